"""DDL classification (Canal's ``DruidDdlParser``/``DdlResult``) and a MySQL DDL parser.

Two layers:

* :func:`parse_ddl` classifies a statement the way Canal does: a list of :class:`DdlResult`
  ``(type, schema, table, ori_schema, ori_table)``. Statements are pre-classified by their leading
  keywords (sqlglot misreads non-DDL such as ``flush tables``); table statements get their
  structure from sqlglot (dialect ``mysql``) and, where sqlglot gives up (``exp.Command``) or
  fails, from the hand parser below. A statement neither can read gives one result of type
  ``UNKNOWN`` with ``error`` set: the caller must stop with a clear error naming the statement and
  its binlog position, never ignore it.
* :func:`parse_statement` is a hand-written parser over a MySQL/MariaDB lexer for the table DDL
  the schema history applies (CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE, CREATE/DROP INDEX,
  CREATE/ALTER/DROP DATABASE). It keeps every detail a column's type depends on (``int8``,
  ``real``, ``float unsigned``, ``national char``, ``long varchar``, spatial and MariaDB types),
  which sqlglot normalises away or rejects. Anything it does not understand raises
  :class:`DdlParseError` rather than guessing.

The lexer handles ``#``, ``--`` and ``/* */`` comments, runs executable comments
(``/*!50100 ... */``, MariaDB's ``/*M!100301 ... */``) as the server does, backquoted
identifiers, and strings with backslash escapes and doubled quotes.
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass, field
from typing import NamedTuple

log = logging.getLogger(__name__)

__all__ = [
    "AlterAction",
    "AlterDatabase",
    "AlterTable",
    "ColumnDef",
    "CreateDatabase",
    "CreateIndex",
    "CreateTable",
    "DdlParseError",
    "DdlResult",
    "DdlType",
    "Default",
    "DropDatabase",
    "DropIndex",
    "DropTables",
    "OtherStatement",
    "RenameTables",
    "TableName",
    "Token",
    "TruncateTable",
    "normalize_sql",
    "parse_ddl",
    "parse_statement",
    "tokenize",
]


class DdlParseError(ValueError):
    """A statement the parser cannot read (or reads only in part). ``offset``: where, if known."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


# sql_mode bits that change how a statement reads (the QUERY event logs the session's sql_mode).
MODE_REAL_AS_FLOAT = 1
MODE_ANSI_QUOTES = 4
MODE_NO_BACKSLASH_ESCAPES = 1 << 20


# ============================================================================ lexer
class Token:
    """One lexical token. ``kind``: word, ident (backquoted), string, number, hex, bit, var, punct.

    ``value`` is the identifier or keyword as written, a string's unescaped content, a number's
    text, or the punctuation. ``start``/``end`` are offsets in the original SQL (end exclusive).
    """

    __slots__ = ("kind", "value", "start", "end", "upper")

    def __init__(self, kind: str, value: str, start: int, end: int):
        self.kind = kind
        self.value = value
        self.start = start
        self.end = end
        self.upper = value.upper() if kind == "word" else None

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.start})"


_WORD_RE = re.compile(r"[0-9A-Za-z_$\u0080-\uffff]+")
_NUMBER_RE = re.compile(r"(?:0x[0-9A-Fa-f]+|0b[01]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_VERSION_RE = re.compile(r"\d{5,6}")
_OPERATORS = ("<=>", "->>", "<=", ">=", "<>", "!=", "||", "&&", ":=", "<<", ">>", "->")
_ESCAPES = {
    "0": "\0",
    "'": "'",
    '"': '"',
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "\\": "\\",
}


def _read_string(sql: str, i: int, backslash: bool = True) -> tuple[str, int]:
    """Read the quoted string starting at ``sql[i]``; returns (content, index after it)."""
    quote = sql[i]
    out: list[str] = []
    j = i + 1
    n = len(sql)
    while j < n:
        ch = sql[j]
        if backslash and ch == "\\" and j + 1 < n:
            nxt = sql[j + 1]
            # \% and \_ keep their backslash (LIKE patterns), as the server does.
            out.append(_ESCAPES.get(nxt, "\\" + nxt if nxt in "%_" else nxt))
            j += 2
            continue
        if ch == quote:
            if j + 1 < n and sql[j + 1] == quote:
                out.append(quote)
                j += 2
                continue
            return "".join(out), j + 1
        out.append(ch)
        j += 1
    raise DdlParseError(f"unterminated string starting at offset {i}", i)


def tokenize(sql: str, sql_mode: int = 0) -> list[Token]:
    """Split MySQL/MariaDB SQL into tokens, dropping comments and running executable comments.

    ``sql_mode`` (the session's, as logged in the QUERY event): ANSI_QUOTES makes "..." an
    identifier, NO_BACKSLASH_ESCAPES makes a backslash an ordinary character in strings.
    """
    backslash = not sql_mode & MODE_NO_BACKSLASH_ESCAPES
    quotes = "'" if sql_mode & MODE_ANSI_QUOTES else "'\""
    toks: list[Token] = []
    i = 0
    n = len(sql)
    in_exec = False  # inside /*! ... */ whose content is code
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
            continue
        if in_exec and sql.startswith("*/", i):
            in_exec = False
            i += 2
            continue
        if ch == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2].isspace())):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            if not in_exec and (sql.startswith("/*!", i) or sql.startswith("/*M!", i)):
                i += 3 if sql[i + 2] == "!" else 4
                m = _VERSION_RE.match(sql, i)
                if m:
                    i = m.end()
                in_exec = True
                continue
            j = sql.find("*/", i + 2)
            if j < 0:
                raise DdlParseError(f"unterminated comment starting at offset {i}", i)
            i = j + 2
            continue
        if ch in quotes:
            value, j = _read_string(sql, i, backslash)
            # Adjacent literals concatenate: 'a' 'b' is 'ab'.
            if toks and toks[-1].kind == "string" and toks[-1].end <= i:
                prev = toks[-1]
                toks[-1] = Token("string", prev.value + value, prev.start, j)
            else:
                toks.append(Token("string", value, i, j))
            i = j
            continue
        if ch == "`" or ch == '"':
            j = i + 1
            buf: list[str] = []
            while True:
                k = sql.find(ch, j)
                if k < 0:
                    raise DdlParseError(f"unterminated quoted identifier starting at offset {i}", i)
                buf.append(sql[j:k])
                if k + 1 < n and sql[k + 1] == ch:
                    buf.append(ch)
                    j = k + 2
                    continue
                j = k + 1
                break
            toks.append(Token("ident", "".join(buf), i, j))
            i = j
            continue
        if ch == "@":
            m = re.compile(r"@@?(?:[\w$.]+|`[^`]*`|'[^']*')").match(sql, i)
            j = m.end() if m else i + 1
            toks.append(Token("var", sql[i:j], i, j))
            i = j
            continue
        m = _WORD_RE.match(sql, i)
        if m is not None or (ch == "." and i + 1 < n and sql[i + 1].isdigit() and _prev_is_operand(toks)):
            num = _NUMBER_RE.match(sql, i)
            word = m.group() if m else ""
            if num is not None and len(num.group()) >= len(word):
                j = num.end()
                toks.append(Token("number", num.group(), i, j))
                i = j
                continue
            j = m.end()
            # X'..', B'..', N'..' literals.
            if j < n and sql[j] == "'" and word.upper() in ("X", "B", "N"):
                value, k = _read_string(sql, j, backslash)
                kind = {"X": "hex", "B": "bit", "N": "string"}[word.upper()]
                toks.append(Token(kind, value, i, k))
                i = k
                continue
            toks.append(Token("word", word, i, j))
            i = j
            continue
        for op in _OPERATORS:
            if sql.startswith(op, i):
                toks.append(Token("punct", op, i, i + len(op)))
                i += len(op)
                break
        else:
            toks.append(Token("punct", ch, i, i + 1))
            i += 1
    return toks


def _prev_is_operand(toks: list[Token]) -> bool:
    # ".5" is a number unless it follows a name (db.5tbl is not valid anyway): a dot after an
    # identifier is a qualifier.
    return not toks or toks[-1].kind not in ("word", "ident")


def normalize_sql(sql: str, tokens: list[Token] | None = None) -> str:
    """The statement rebuilt from its tokens: comments gone, executable comments opened, names in
    backquotes (an ANSI_QUOTES "name" becomes `name`)."""
    if tokens is None:
        tokens = tokenize(sql)
    return " ".join(
        "`" + t.value.replace("`", "``") + "`" if t.kind == "ident" else sql[t.start : t.end] for t in tokens
    )


# ============================================================================ statements
class TableName(NamedTuple):
    schema: str | None
    name: str

    def qualified(self, default_schema: str | None) -> TableName:
        return self if self.schema is not None else TableName(default_schema, self.name)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema is not None else self.name


@dataclass(slots=True)
class Default:
    """A DEFAULT value: kind is null, string, number, bit, hex, bool or expr; text its value."""

    kind: str
    text: str


@dataclass(slots=True)
class ColumnDef:
    """A column definition as written (the schema model resolves it into a column type)."""

    name: str
    type_name: str  # canonical upper-case base type: INT, VARCHAR, NCHAR, NVARCHAR, MEDIUMTEXT, ...
    params: list[str] = field(default_factory=list)  # numbers as text, or ENUM/SET labels
    has_params: bool = False
    unsigned: bool = False
    zerofill: bool = False
    binary: bool = False  # the BINARY attribute: the binary collation of the charset
    byte: bool = False  # CHAR BYTE: a BINARY column
    charset: str | None = None
    collate: str | None = None
    nullable: bool | None = None  # None: not said
    default: Default | None = None  # None: no DEFAULT clause
    auto_increment: bool = False
    primary_key: bool = False
    unique: bool = False
    generated: str | None = None  # VIRTUAL, PERSISTENT or STORED
    invisible: bool = False
    compressed: bool = False
    comment: str | None = None
    on_update: str | None = None
    system_versioning: bool | None = None  # WITH (True) / WITHOUT (False) SYSTEM VERSIONING
    position: tuple[str, str | None] | None = None  # ("FIRST", None) or ("AFTER", column)


@dataclass(slots=True)
class AlterAction:
    """One ALTER TABLE clause.

    ``op``: ADD_COLUMN, DROP_COLUMN, MODIFY_COLUMN, CHANGE_COLUMN, RENAME_COLUMN, ALTER_COLUMN,
    ADD_PRIMARY_KEY, DROP_PRIMARY_KEY, ADD_INDEX, DROP_INDEX, RENAME_INDEX, RENAME_TABLE,
    CONVERT_CHARSET, TABLE_CHARSET, OPTION (no effect on columns) or UNSUPPORTED (changes the
    table in a way the schema model does not follow: the history refuses it).
    """

    op: str
    text: str = ""
    column: ColumnDef | None = None
    name: str | None = None
    new_name: str | None = None
    if_exists: bool = False
    if_not_exists: bool = False
    key_columns: list[tuple[str, int]] | None = None
    table: TableName | None = None
    charset: str | None = None
    collate: str | None = None
    default: Default | None = None
    drop_default: bool = False
    invisible: bool | None = None
    table_option: bool = False  # ENGINE=, COMMENT=, CHARSET=, ...: a table option, not an item


@dataclass(slots=True)
class CreateTable:
    table: TableName
    columns: list[ColumnDef] = field(default_factory=list)
    primary_key: list[tuple[str, int]] | None = None
    charset: str | None = None
    collate: str | None = None
    like: TableName | None = None
    if_not_exists: bool = False
    or_replace: bool = False
    temporary: bool = False
    has_select: bool = False
    unsupported: str | None = None


@dataclass(slots=True)
class AlterTable:
    table: TableName
    actions: list[AlterAction] = field(default_factory=list)
    if_exists: bool = False


@dataclass(slots=True)
class RenameTables:
    pairs: list[tuple[TableName, TableName]]
    if_exists: bool = False


@dataclass(slots=True)
class DropTables:
    tables: list[TableName]
    temporary: bool = False
    if_exists: bool = False


@dataclass(slots=True)
class TruncateTable:
    table: TableName


@dataclass(slots=True)
class CreateIndex:
    table: TableName
    name: str
    kind: str = "INDEX"  # INDEX, UNIQUE, FULLTEXT, SPATIAL


@dataclass(slots=True)
class DropIndex:
    table: TableName
    name: str


@dataclass(slots=True)
class CreateDatabase:
    name: str
    charset: str | None = None
    collate: str | None = None
    if_not_exists: bool = False
    or_replace: bool = False


@dataclass(slots=True)
class AlterDatabase:
    name: str | None
    charset: str | None = None
    collate: str | None = None


@dataclass(slots=True)
class DropDatabase:
    name: str
    if_exists: bool = False


@dataclass(slots=True)
class OtherStatement:
    """Anything that does not change a table's columns (views, triggers, users, DML, ...)."""

    keyword: str
    text: str = ""


Statement = (
    CreateTable
    | AlterTable
    | RenameTables
    | DropTables
    | TruncateTable
    | CreateIndex
    | DropIndex
    | CreateDatabase
    | AlterDatabase
    | DropDatabase
    | OtherStatement
)

# ============================================================================ parser
_INTEGER_TYPES = {
    "TINYINT": "TINYINT",
    "INT1": "TINYINT",
    "BOOL": "BOOL",
    "BOOLEAN": "BOOL",
    "SMALLINT": "SMALLINT",
    "INT2": "SMALLINT",
    "MEDIUMINT": "MEDIUMINT",
    "INT3": "MEDIUMINT",
    "MIDDLEINT": "MEDIUMINT",
    "INT": "INT",
    "INTEGER": "INT",
    "INT4": "INT",
    "BIGINT": "BIGINT",
    "INT8": "BIGINT",
    "SERIAL": "SERIAL",
}
_SIMPLE_TYPES = {
    **_INTEGER_TYPES,
    "BIT": "BIT",
    "DECIMAL": "DECIMAL",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "FIXED": "DECIMAL",
    "FLOAT": "FLOAT",
    "FLOAT4": "FLOAT4",
    "DOUBLE": "DOUBLE",
    "FLOAT8": "DOUBLE",
    "REAL": "DOUBLE",
    "DATE": "DATE",
    "TIME": "TIME",
    "DATETIME": "DATETIME",
    "TIMESTAMP": "TIMESTAMP",
    "YEAR": "YEAR",
    "VARCHAR": "VARCHAR",
    "VARCHARACTER": "VARCHAR",
    "NVARCHAR": "NVARCHAR",
    "BINARY": "BINARY",
    "VARBINARY": "VARBINARY",
    "TINYBLOB": "TINYBLOB",
    "BLOB": "BLOB",
    "MEDIUMBLOB": "MEDIUMBLOB",
    "LONGBLOB": "LONGBLOB",
    "TINYTEXT": "TINYTEXT",
    "TEXT": "TEXT",
    "MEDIUMTEXT": "MEDIUMTEXT",
    "LONGTEXT": "LONGTEXT",
    "ENUM": "ENUM",
    "SET": "SET",
    "JSON": "JSON",
    "GEOMETRY": "GEOMETRY",
    "POINT": "POINT",
    "LINESTRING": "LINESTRING",
    "POLYGON": "POLYGON",
    "MULTIPOINT": "MULTIPOINT",
    "MULTILINESTRING": "MULTILINESTRING",
    "MULTIPOLYGON": "MULTIPOLYGON",
    "GEOMETRYCOLLECTION": "GEOMETRYCOLLECTION",
    "INET4": "INET4",
    "INET6": "INET6",
    "UUID": "UUID",
    "VECTOR": "VECTOR",
}
# Keywords that start a non-column element of CREATE TABLE (...) when not backquoted.
_CREATE_ELEMENT_KEYWORDS = frozenset(
    {"CONSTRAINT", "PRIMARY", "KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD"}
)
_BINARY_OPERATORS = frozenset({"+", "-", "*", "/", "%", "||", "&&", "|", "&", "^", "<<", ">>", "DIV", "MOD"})


class _Parser:
    def __init__(self, sql: str, tokens: list[Token], sql_mode: int = 0):
        self.sql = sql
        self.toks = tokens
        self.i = 0
        self.real_as_float = bool(sql_mode & MODE_REAL_AS_FLOAT)

    # -- token access -------------------------------------------------------------
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def word(self, k: int = 0) -> str | None:
        t = self.peek(k)
        return t.upper if t is not None and t.kind == "word" else None

    def punct(self, k: int = 0) -> str | None:
        t = self.peek(k)
        return t.value if t is not None and t.kind == "punct" else None

    @property
    def at_end(self) -> bool:
        return self.i >= len(self.toks) or self.punct() == ";" and self.i == len(self.toks) - 1

    def advance(self) -> Token:
        t = self.peek()
        if t is None:
            raise DdlParseError("unexpected end of statement")
        self.i += 1
        return t

    def accept(self, *words: str) -> bool:
        """Consume the keyword sequence ``words`` if it is next."""
        for k, w in enumerate(words):
            if self.word(k) != w:
                return False
        self.i += len(words)
        return True

    def accept_punct(self, p: str) -> bool:
        if self.punct() == p:
            self.i += 1
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def expect_punct(self, p: str) -> None:
        if not self.accept_punct(p):
            raise self.error(f"expected {p!r}")

    def error(self, message: str) -> DdlParseError:
        t = self.peek()
        where = f"at {self.sql[t.start : t.start + 30]!r}" if t is not None else "at the end"
        return DdlParseError(f"{message} {where}")

    def text_from(self, start_index: int) -> str:
        if start_index >= self.i:
            return ""
        return self.sql[self.toks[start_index].start : self.toks[self.i - 1].end]

    # -- names ---------------------------------------------------------------------
    def ident(self) -> str:
        t = self.peek()
        if t is None or t.kind not in ("word", "ident"):
            raise self.error("expected a name")
        self.i += 1
        return t.value

    def table_name(self) -> TableName:
        first = self.ident()
        if self.punct() == "." and self.peek(1) is not None and self.peek(1).kind in ("word", "ident"):
            self.i += 1
            return TableName(first, self.ident())
        return TableName(None, first)

    def name_value(self) -> str:
        """A charset/collation/engine name: a word, a backquoted name or a string."""
        t = self.peek()
        if t is None or t.kind not in ("word", "ident", "string"):
            raise self.error("expected a name")
        self.i += 1
        return t.value

    def if_exists(self) -> bool:
        return self.accept("IF", "EXISTS")

    def if_not_exists(self) -> bool:
        return self.accept("IF", "NOT", "EXISTS")

    # -- skipping ------------------------------------------------------------------
    def skip_group(self) -> str:
        """Consume a balanced ( ... ) group; returns its text."""
        start = self.i
        self.expect_punct("(")
        depth = 1
        while depth:
            t = self.advance()
            if t.kind == "punct":
                if t.value == "(":
                    depth += 1
                elif t.value == ")":
                    depth -= 1
        return self.text_from(start)

    def skip_clause(self, stops: frozenset[str] = frozenset({",", ")"})) -> str:
        """Consume tokens up to a top-level stop punctuation (not consumed) or the end."""
        start = self.i
        while not self.at_end:
            p = self.punct()
            if p in stops:
                break
            if p == "(":
                self.skip_group()
            else:
                self.i += 1
        return self.text_from(start)

    def key_columns(self) -> list[tuple[str, int]]:
        """``(col[(len)] [ASC|DESC], ...)`` of an index."""
        self.expect_punct("(")
        cols: list[tuple[str, int]] = []
        while True:
            if self.punct() == "(":
                # A functional key part: not a column.
                self.skip_group()
                cols.append(("", 0))
            else:
                name = self.ident()
                length = 0
                if self.accept_punct("("):
                    length = int(self.advance().value)
                    self.expect_punct(")")
                cols.append((name, length))
            self.accept("ASC") or self.accept("DESC")
            if self.accept_punct(","):
                continue
            self.expect_punct(")")
            return cols

    # -- expressions -----------------------------------------------------------------
    def primary_expr(self) -> Default:
        t = self.peek()
        if t is None:
            raise self.error("expected a value")
        if t.kind == "punct" and t.value == "(":
            return Default("expr", self.skip_group())
        if t.kind == "punct" and t.value in ("-", "+") and self.peek(1) is not None:
            nxt = self.peek(1)
            if nxt.kind == "number":
                self.i += 2
                return Default("number", (t.value if t.value == "-" else "") + nxt.value)
        if t.kind == "string":
            self.i += 1
            return Default("string", t.value)
        if t.kind == "number":
            self.i += 1
            if t.value[:2].lower() == "0x":
                return Default("hex", t.value[2:])
            if t.value[:2].lower() == "0b":
                return Default("bit", t.value[2:])
            return Default("number", t.value)
        if t.kind in ("hex", "bit"):
            self.i += 1
            return Default(t.kind, t.value)
        if t.kind == "word":
            w = t.upper
            if w.startswith("_") and self.peek(1) is not None and self.peek(1).kind in ("string", "hex"):
                self.i += 2  # charset introducer: _utf8mb4'x'
                return Default(self.toks[self.i - 1].kind, self.toks[self.i - 1].value)
            if w == "NULL":
                self.i += 1
                return Default("null", "NULL")
            if w in ("TRUE", "FALSE"):
                self.i += 1
                return Default("bool", "1" if w == "TRUE" else "0")
            if (
                w in ("DATE", "TIME", "TIMESTAMP")
                and self.peek(1) is not None
                and self.peek(1).kind == "string"
            ):
                self.i += 2
                return Default("string", self.toks[self.i - 1].value)
            start = self.i
            self.i += 1
            if self.punct() == "(":
                self.skip_group()
            elif w == "NEXT" and self.accept("VALUE", "FOR"):
                self.table_name()
            return Default("expr", self.text_from(start))
        if t.kind == "ident":
            self.i += 1
            return Default("expr", self.text_from(self.i - 1))
        raise self.error("expected a value")

    def value_expr(self) -> Default:
        start = self.i
        value = self.primary_expr()
        extended = False
        while True:
            op = self.punct() or self.word()
            if op in _BINARY_OPERATORS and self.peek(1) is not None:
                self.i += 1
                self.primary_expr()
                extended = True
                continue
            break
        return Default("expr", self.text_from(start)) if extended else value

    # -- column definitions -------------------------------------------------------------
    def data_type(self, col: ColumnDef) -> None:
        w = self.word()
        if w is None:
            raise self.error("expected a data type")
        self.i += 1
        name: str | None
        if w == "NATIONAL":
            if (
                self.accept("VARCHAR")
                or self.accept("CHARACTER", "VARYING")
                or self.accept("CHAR", "VARYING")
            ):
                name = "NVARCHAR"
            elif self.accept("CHAR") or self.accept("CHARACTER"):
                name = "NCHAR"
            else:
                raise self.error("expected CHAR or VARCHAR after NATIONAL")
        elif w == "NCHAR":
            name = "NVARCHAR" if (self.accept("VARYING") or self.accept("VARCHAR")) else "NCHAR"
        elif w in ("CHAR", "CHARACTER"):
            name = "VARCHAR" if self.accept("VARYING") else "CHAR"
        elif w == "DOUBLE":
            self.accept("PRECISION")
            name = "DOUBLE"
        elif w == "LONG":
            if self.accept("VARBINARY"):
                name = "MEDIUMBLOB"
            elif self.accept("CHAR", "VARYING") or self.accept("VARCHAR"):
                name = "MEDIUMTEXT"
            elif self.accept("BINARY"):
                name = "MEDIUMTEXT"
                col.binary = True
            else:
                name = "MEDIUMTEXT"
        elif w == "REAL" and self.real_as_float:
            name = "FLOAT4"
        else:
            name = _SIMPLE_TYPES.get(w)
            if name is None:
                self.i -= 1
                raise self.error("unknown data type")
        col.type_name = name
        if self.punct() == "(":
            self.i += 1
            col.has_params = True
            while True:
                t = self.advance()
                if t.kind == "word" and t.upper.startswith("_") and self.peek() is not None:
                    t = self.advance()  # a charset introducer before an ENUM/SET value
                if t.kind not in ("number", "string"):
                    raise self.error("bad data type parameter")
                col.params.append(t.value)
                if self.accept_punct(","):
                    continue
                self.expect_punct(")")
                break
        elif name in ("ENUM", "SET"):
            raise self.error(f"{name} needs a list of values")

    def column_def(self, in_alter: bool) -> ColumnDef:
        col = ColumnDef(name=self.ident(), type_name="")
        self.data_type(col)
        self.column_attributes(col, in_alter)
        return col

    def column_attributes(self, col: ColumnDef, in_alter: bool) -> None:
        while not self.at_end:
            p = self.punct()
            if p in (",", ")"):
                return
            w = self.word()
            if w is None:
                raise self.error(f"unexpected token in the definition of column {col.name!r}")
            if w == "NOT" and self.word(1) == "NULL":
                self.i += 2
                col.nullable = False
            elif w == "NULL":
                self.i += 1
                col.nullable = True
            elif w == "UNSIGNED":
                self.i += 1
                col.unsigned = True
            elif w == "SIGNED":
                self.i += 1
            elif w == "ZEROFILL":
                self.i += 1
                col.zerofill = True
                col.unsigned = True
            elif w == "BINARY":
                self.i += 1
                col.binary = True
            elif w == "BYTE":
                self.i += 1
                col.byte = True
            elif w == "ASCII":
                self.i += 1
                col.charset = "latin1"
            elif w == "UNICODE":
                self.i += 1
                col.charset = "ucs2"
            elif w in ("CHARSET", "CHARACTER"):
                self.i += 1
                if w == "CHARACTER":
                    self.expect("SET")
                col.charset = self.name_value()
            elif w == "COLLATE":
                self.i += 1
                col.collate = self.name_value()
            elif w == "DEFAULT":
                self.i += 1
                col.default = self.value_expr()
            elif w == "AUTO_INCREMENT":
                self.i += 1
                col.auto_increment = True
            elif w == "PRIMARY":
                self.i += 1
                self.expect("KEY")
                col.primary_key = True
            elif w == "KEY":
                self.i += 1
                col.primary_key = True  # in a column definition, KEY means PRIMARY KEY
            elif w == "UNIQUE":
                self.i += 1
                self.accept("KEY") or self.accept("INDEX")
                col.unique = True
            elif w == "COMMENT":
                self.i += 1
                t = self.advance()
                if t.kind != "string":
                    raise self.error("expected a comment string")
                col.comment = t.value
            elif w == "ON" and self.word(1) == "UPDATE":
                self.i += 2
                col.on_update = self.value_expr().text
            elif w in ("GENERATED", "AS"):
                if w == "GENERATED":
                    self.i += 1
                    self.expect("ALWAYS")
                    if self.word() != "AS":
                        raise self.error("expected AS")
                self.i += 1
                if self.word() == "ROW" and self.word(1) in ("START", "END"):
                    # GENERATED ALWAYS AS ROW START/END: system versioning columns.
                    self.i += 2
                    col.generated = "ROW"
                    continue
                self.skip_group()
                col.generated = col.generated or "VIRTUAL"
            elif w in ("VIRTUAL", "PERSISTENT", "STORED"):
                self.i += 1
                col.generated = w
            elif w == "INVISIBLE":
                self.i += 1
                col.invisible = True
            elif w == "VISIBLE":
                self.i += 1
            elif w in ("COLUMN_FORMAT", "STORAGE"):
                self.i += 2
            elif w == "COMPRESSED":
                self.i += 1
                col.compressed = True
                if self.accept_punct("="):
                    self.advance()
            elif w == "SERIAL" and self.word(1) == "DEFAULT" and self.word(2) == "VALUE":
                self.i += 3
                col.nullable = False
                col.auto_increment = True
                col.unique = True
            elif w == "REFERENCES":
                self.i += 1
                self.table_name()
                if self.punct() == "(":
                    self.skip_group()
                while True:
                    if self.accept("MATCH"):
                        self.advance()
                    elif self.word() == "ON" and self.word(1) in ("DELETE", "UPDATE"):
                        self.i += 2
                        if not (self.accept("SET", "NULL") or self.accept("SET", "DEFAULT")):
                            if not self.accept("NO", "ACTION"):
                                self.advance()
                    else:
                        break
            elif w == "CONSTRAINT":
                self.i += 1
                if self.word() != "CHECK":
                    self.ident()
            elif w == "CHECK":
                self.i += 1
                self.skip_group()
            elif w in ("WITH", "WITHOUT") and self.word(1) == "SYSTEM" and self.word(2) == "VERSIONING":
                self.i += 3
                col.system_versioning = w == "WITH"
            elif w in ("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "REF_SYSTEM_ID", "SRID"):
                self.i += 1
                self.accept_punct("=")
                self.advance()
            elif in_alter and w == "FIRST":
                self.i += 1
                col.position = ("FIRST", None)
                return
            elif in_alter and w == "AFTER":
                self.i += 1
                col.position = ("AFTER", self.ident())
                return
            else:
                raise self.error(f"unknown attribute in the definition of column {col.name!r}")

    # -- table options -------------------------------------------------------------------
    def table_option(self, target: CreateTable | AlterAction) -> bool:
        """Consume one table option; charset/collation go to ``target``. False: not an option."""
        start = self.i
        self.accept("DEFAULT")
        w = self.word()
        if w in ("CHARSET", "CHARACTER", "COLLATE"):
            self.i += 1
            if w == "CHARACTER":
                self.expect("SET")
            self.accept_punct("=")
            value = self.name_value()
            if w == "COLLATE":
                target.collate = value
            else:
                target.charset = value
            return True
        if self.i != start:
            self.i = start
            return False
        if w is None:
            return False
        if w in ("DATA", "INDEX") and self.word(1) == "DIRECTORY":
            self.i += 2
        elif w == "WITH" and self.word(1) == "SYSTEM" and self.word(2) == "VERSIONING":
            return False
        elif w in ("ENGINE", "TYPE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM",
                   "COMMENT", "COMPRESSION", "CONNECTION", "DELAY_KEY_WRITE", "ENCRYPTION", "ENCRYPTED",
                   "ENCRYPTION_KEY_ID", "IETF_QUOTES", "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS",
                   "MIN_ROWS", "PACK_KEYS", "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL",
                   "PASSWORD", "ROW_FORMAT", "SEQUENCE", "STATS_AUTO_RECALC", "STATS_PERSISTENT",
                   "STATS_SAMPLE_PAGES", "TABLESPACE", "TRANSACTIONAL", "UNION", "STORAGE",
                   "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "AUTOEXTEND_SIZE", "START"):  # fmt: skip
            self.i += 1
            if w == "START":
                self.expect("TRANSACTION")
                return True
        elif self.punct(1) == "=":
            self.i += 1  # an engine-defined option: name = value
        else:
            return False
        self.accept_punct("=")
        if self.punct() == "(":
            self.skip_group()
        else:
            self.advance()
        return True

    # -- statements ----------------------------------------------------------------------
    def statement(self) -> Statement:
        w = self.word()
        if w == "CREATE":
            return self.create()
        if w == "ALTER":
            return self.alter()
        if w == "DROP":
            return self.drop()
        if w == "RENAME":
            self.i += 1
            if self.accept("TABLE") or self.accept("TABLES"):
                return self.rename_tables()
            return OtherStatement("RENAME", self.sql)
        if w == "TRUNCATE":
            self.i += 1
            self.accept("TABLE")
            stmt = TruncateTable(self.table_name())
            self.finish()
            return stmt
        return OtherStatement(w or (self.peek().value if self.peek() else ""), self.sql)

    def finish(self) -> None:
        self.accept_punct(";")
        if not self.at_end:
            raise self.error("unexpected text after the statement")

    def create(self) -> Statement:
        self.expect("CREATE")
        or_replace = self.accept("OR", "REPLACE")
        # DEFINER/ALGORITHM/SQL SECURITY belong to views, triggers and routines.
        if self.word() in ("DEFINER", "ALGORITHM", "SQL", "AGGREGATE"):
            return OtherStatement("CREATE", self.sql)
        temporary = self.accept("TEMPORARY")
        w = self.word()
        if w == "TABLE":
            self.i += 1
            return self.create_table(or_replace, temporary)
        if w in ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX") or (
            w in ("ONLINE", "OFFLINE") and self.word(1) in ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX")
        ):
            self.accept("ONLINE") or self.accept("OFFLINE")
            kind = "INDEX"
            if self.word() in ("UNIQUE", "FULLTEXT", "SPATIAL"):
                kind = self.advance().upper
            self.expect("INDEX")
            self.if_not_exists()
            name = self.ident()
            if self.accept("USING"):
                self.advance()
            self.expect("ON")
            table = self.table_name()
            self.skip_clause(frozenset())
            return CreateIndex(table, name, kind)
        if w in ("DATABASE", "SCHEMA"):
            self.i += 1
            stmt = CreateDatabase("", if_not_exists=self.if_not_exists(), or_replace=or_replace)
            stmt.name = self.ident()
            self.database_options(stmt)
            return stmt
        return OtherStatement("CREATE", self.sql)

    def database_options(self, stmt: CreateDatabase | AlterDatabase) -> None:
        while not self.at_end:
            self.accept("DEFAULT")
            w = self.word()
            if w in ("CHARSET", "CHARACTER"):
                self.i += 1
                if w == "CHARACTER":
                    self.expect("SET")
                self.accept_punct("=")
                stmt.charset = self.name_value()
            elif w == "COLLATE":
                self.i += 1
                self.accept_punct("=")
                stmt.collate = self.name_value()
            elif w == "COMMENT":
                self.i += 1
                self.accept_punct("=")
                self.advance()
            elif self.punct() == ";":
                self.i += 1
            else:
                raise self.error("unknown database option")

    def create_table(self, or_replace: bool, temporary: bool) -> CreateTable:
        if_not_exists = self.if_not_exists()
        stmt = CreateTable(
            self.table_name(), if_not_exists=if_not_exists, or_replace=or_replace, temporary=temporary
        )
        if self.accept("LIKE"):
            stmt.like = self.table_name()
            self.finish()
            return stmt
        if self.punct() == "(" and self.word(1) == "LIKE":
            self.i += 2
            stmt.like = self.table_name()
            self.expect_punct(")")
            self.finish()
            return stmt
        if self.punct() == "(" and self.word(1) != "SELECT":
            self.i += 1
            while True:
                self.create_element(stmt)
                if self.accept_punct(","):
                    continue
                self.expect_punct(")")
                break
        while not self.at_end:
            self.accept_punct(",")
            if self.table_option(stmt):
                continue
            w = self.word()
            if w == "PARTITION":
                self.skip_clause(frozenset({";"}))  # partitioning never changes the columns
                break
            if w == "WITH" and self.word(1) == "SYSTEM" and self.word(2) == "VERSIONING":
                stmt.unsupported = "WITH SYSTEM VERSIONING adds hidden row_start/row_end columns"
                self.i += 3
                continue
            if w in ("IGNORE", "REPLACE", "AS", "SELECT") or self.punct() == "(":
                stmt.has_select = True
                break
            if self.punct() == ";":
                self.i += 1
                continue
            raise self.error("unknown table option")
        return stmt

    def create_element(self, stmt: CreateTable) -> None:
        t = self.peek()
        w = t.upper if t is not None and t.kind == "word" else None
        if w == "PERIOD" and self.word(1) != "FOR":
            w = None  # PERIOD is not reserved: a column may be called period
        if w not in _CREATE_ELEMENT_KEYWORDS:
            col = self.column_def(in_alter=False)
            stmt.columns.append(col)
            if col.primary_key:
                stmt.primary_key = [(col.name, 0)]
            if col.system_versioning:
                stmt.unsupported = "WITH SYSTEM VERSIONING adds hidden row_start/row_end columns"
            return
        if w == "CONSTRAINT":
            self.i += 1
            if self.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
                self.ident()
            w = self.word()
        if w == "PRIMARY":
            self.i += 1
            self.expect("KEY")
            if self.accept("USING"):
                self.advance()
            stmt.primary_key = self.key_columns()
        self.skip_clause()

    def alter(self) -> Statement:
        self.expect("ALTER")
        self.accept("ONLINE")
        self.accept("IGNORE")
        if self.word() in ("DATABASE", "SCHEMA"):
            self.i += 1
            name = None
            if self.word() not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "UPGRADE"):
                name = self.ident()
            if self.word() == "UPGRADE":
                return OtherStatement("ALTER", self.sql)
            stmt = AlterDatabase(name)
            self.database_options(stmt)
            return stmt
        if not self.accept("TABLE"):
            return OtherStatement("ALTER", self.sql)
        stmt = AlterTable(TableName(None, ""), if_exists=self.if_exists())
        stmt.table = self.table_name()
        if self.accept("WAIT"):
            self.advance()
        self.accept("NOWAIT")
        while not self.at_end:
            if self.accept_punct(";"):
                continue
            stmt.actions.extend(self.alter_action())
            self.accept_punct(",")
        return stmt

    def alter_action(self) -> list[AlterAction]:
        start = self.i
        result = self._alter_action()
        actions = result if isinstance(result, list) else [result]
        for action in actions:
            action.text = self.text_from(start)
        return actions

    def _alter_action(self) -> AlterAction | list[AlterAction]:  # noqa: C901 - one branch per clause keyword
        w = self.word()
        if w == "ADD":
            self.i += 1
            w2 = self.word()
            if w2 == "CONSTRAINT" or (w2 in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "INDEX", "KEY",
                                             "FULLTEXT", "SPATIAL")):  # fmt: skip
                if w2 == "CONSTRAINT":
                    self.i += 1
                    self.if_not_exists()
                    if self.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
                        self.ident()
                    w2 = self.word()
                if w2 == "PRIMARY":
                    self.i += 1
                    self.expect("KEY")
                    if self.accept("USING"):
                        self.advance()
                    cols = self.key_columns()
                    self.skip_clause(frozenset({","}))
                    return AlterAction("ADD_PRIMARY_KEY", key_columns=cols)
                self.skip_clause(frozenset({","}))
                if w2 in ("FOREIGN", "CHECK"):
                    return AlterAction("OPTION")
                return AlterAction("ADD_INDEX")
            if w2 == "PARTITION" or (w2 == "PERIOD" and self.word(1) == "FOR"):
                self.skip_clause(frozenset({","}))
                return AlterAction("OPTION")
            if w2 == "SYSTEM" and self.word(1) == "VERSIONING":
                self.i += 2
                return AlterAction("UNSUPPORTED", name="ADD SYSTEM VERSIONING adds hidden columns")
            self.accept("COLUMN")
            if_not_exists = self.if_not_exists()
            if self.accept_punct("("):
                # ADD (c1 ..., c2 ...): one ADD_COLUMN each, appended in order.
                actions = []
                while True:
                    actions.append(
                        AlterAction(
                            "ADD_COLUMN", column=self.column_def(in_alter=False), if_not_exists=if_not_exists
                        )
                    )
                    if self.accept_punct(","):
                        continue
                    self.expect_punct(")")
                    return actions
            return AlterAction(
                "ADD_COLUMN", column=self.column_def(in_alter=True), if_not_exists=if_not_exists
            )
        if w == "DROP":
            self.i += 1
            w2 = self.word()
            if w2 == "PRIMARY":
                self.i += 1
                self.expect("KEY")
                return AlterAction("DROP_PRIMARY_KEY")
            if w2 in ("INDEX", "KEY"):
                self.i += 1
                if_exists = self.if_exists()
                name = self.ident()
                if name.upper() == "PRIMARY":
                    return AlterAction("DROP_PRIMARY_KEY", if_exists=if_exists)
                return AlterAction("DROP_INDEX", name=name, if_exists=if_exists)
            if w2 == "CONSTRAINT":
                self.i += 1
                if_exists = self.if_exists()
                name = self.ident()
                if name.upper() == "PRIMARY":
                    return AlterAction("DROP_PRIMARY_KEY", if_exists=if_exists)
                return AlterAction("DROP_INDEX", name=name, if_exists=if_exists)
            if w2 in ("FOREIGN", "CHECK", "PARTITION") or (w2 == "PERIOD" and self.word(1) == "FOR"):
                self.skip_clause(frozenset({","}))
                return AlterAction("OPTION")
            if w2 == "SYSTEM" and self.word(1) == "VERSIONING":
                self.i += 2
                return AlterAction("UNSUPPORTED", name="DROP SYSTEM VERSIONING drops hidden columns")
            self.accept("COLUMN")
            if_exists = self.if_exists()
            name = self.ident()
            self.accept("RESTRICT") or self.accept("CASCADE")
            return AlterAction("DROP_COLUMN", name=name, if_exists=if_exists)
        if w == "MODIFY":
            self.i += 1
            self.accept("COLUMN")
            if_exists = self.if_exists()
            return AlterAction("MODIFY_COLUMN", column=self.column_def(in_alter=True), if_exists=if_exists)
        if w == "CHANGE":
            self.i += 1
            self.accept("COLUMN")
            if_exists = self.if_exists()
            old = self.ident()
            return AlterAction(
                "CHANGE_COLUMN", name=old, column=self.column_def(in_alter=True), if_exists=if_exists
            )
        if w == "RENAME":
            self.i += 1
            if self.accept("COLUMN"):
                if_exists = self.if_exists()
                old = self.ident()
                self.expect("TO")
                return AlterAction("RENAME_COLUMN", name=old, new_name=self.ident(), if_exists=if_exists)
            if self.word() in ("INDEX", "KEY"):
                self.i += 1
                old = self.ident()
                self.expect("TO")
                return AlterAction("RENAME_INDEX", name=old, new_name=self.ident())
            self.accept("TO") or self.accept("AS")
            return AlterAction("RENAME_TABLE", table=self.table_name())
        if w == "ALTER":
            self.i += 1
            if self.word() in ("INDEX", "KEY"):
                self.skip_clause(frozenset({","}))
                return AlterAction("OPTION")
            self.accept("COLUMN")
            if_exists = self.if_exists()
            name = self.ident()
            action = AlterAction("ALTER_COLUMN", name=name, if_exists=if_exists)
            if self.accept("SET", "DEFAULT"):
                action.default = self.value_expr()
            elif self.accept("DROP", "DEFAULT"):
                action.drop_default = True
            elif self.accept("SET", "INVISIBLE"):
                action.invisible = True
            elif self.accept("SET", "VISIBLE"):
                action.invisible = False
            else:
                raise self.error("unknown ALTER COLUMN clause")
            return action
        if w == "CONVERT":
            self.i += 1
            if self.accept("TO"):
                if not (self.accept("CHARACTER", "SET") or self.accept("CHARSET")):
                    raise self.error("expected CHARACTER SET")
                action = AlterAction("CONVERT_CHARSET", charset=self.name_value())
                if self.accept("COLLATE"):
                    action.collate = self.name_value()
                return action
            self.skip_clause(frozenset({","}))  # CONVERT PARTITION / CONVERT TABLE ... TO PARTITION
            return AlterAction("OPTION")
        if w in ("ALGORITHM", "LOCK"):
            self.i += 1
            self.accept_punct("=")
            self.advance()
            return AlterAction("OPTION")
        if w == "ORDER" and self.word(1) == "BY":
            self.skip_clause(frozenset({","}))
            return AlterAction("OPTION")
        if w in ("ENABLE", "DISABLE") and self.word(1) == "KEYS":
            self.i += 2
            return AlterAction("OPTION")
        if w in ("DISCARD", "IMPORT") and self.word(1) == "TABLESPACE":
            self.i += 2
            return AlterAction("OPTION")
        if w == "FORCE":
            self.i += 1
            return AlterAction("OPTION")
        if w in ("WITH", "WITHOUT") and self.word(1) == "VALIDATION":
            self.i += 2
            return AlterAction("OPTION")
        if w == "PARTITION" and self.word(1) == "BY":
            self.skip_clause(frozenset({";"}))
            return AlterAction("OPTION")
        if w in ("REMOVE", "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD",
                 "REPAIR", "TRUNCATE", "DISCARD", "IMPORT") and (
            self.word(1) in ("PARTITION", "PARTITIONING")
        ):  # fmt: skip
            self.skip_clause(frozenset({","}))
            return AlterAction("OPTION")
        action = AlterAction("TABLE_CHARSET", table_option=True)
        if self.table_option(action):
            if action.charset is None and action.collate is None:
                action.op = "OPTION"
            return action
        raise self.error("unknown ALTER TABLE clause")

    def drop(self) -> Statement:
        self.expect("DROP")
        temporary = self.accept("TEMPORARY")
        if self.accept("TABLE") or self.accept("TABLES"):
            stmt = DropTables([], temporary=temporary, if_exists=self.if_exists())
            while True:
                stmt.tables.append(self.table_name())
                if not self.accept_punct(","):
                    break
            self.accept("RESTRICT") or self.accept("CASCADE")
            self.finish()
            return stmt
        if self.accept("INDEX") or self.accept("ONLINE", "INDEX") or self.accept("OFFLINE", "INDEX"):
            self.if_exists()
            name = self.ident()
            self.expect("ON")
            table = self.table_name()
            self.skip_clause(frozenset())
            return DropIndex(table, name)
        if self.word() in ("DATABASE", "SCHEMA"):
            self.i += 1
            if_exists = self.if_exists()
            stmt2 = DropDatabase(self.ident(), if_exists=if_exists)
            self.finish()
            return stmt2
        return OtherStatement("DROP", self.sql)

    def rename_tables(self) -> RenameTables:
        stmt = RenameTables([], if_exists=self.if_exists())
        while True:
            old = self.table_name()
            if self.accept("WAIT"):
                self.advance()
            self.accept("NOWAIT")
            self.expect("TO")
            stmt.pairs.append((old, self.table_name()))
            if not self.accept_punct(","):
                break
        self.finish()
        return stmt


def parse_statement(sql: str, sql_mode: int = 0) -> Statement:
    """Parse one MySQL/MariaDB statement into a statement object (table DDL in detail).

    ``sql_mode`` is the session's (ANSI_QUOTES, NO_BACKSLASH_ESCAPES, REAL_AS_FLOAT matter)."""
    tokens = tokenize(sql, sql_mode)
    p = _Parser(sql, tokens, sql_mode)
    return p.statement()


# ============================================================================ classification
class DdlType(enum.StrEnum):
    """Canal's ``EventType`` values for a DDL/query, plus UNKNOWN for a statement nobody can read."""

    CREATE = "CREATE"
    ALTER = "ALTER"
    ERASE = "ERASE"  # DROP TABLE
    TRUNCATE = "TRUNCATE"
    RENAME = "RENAME"
    CINDEX = "CINDEX"
    DINDEX = "DINDEX"
    QUERY = "QUERY"
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    UNKNOWN = "UNKNOWN"


@dataclass(slots=True, frozen=True)
class DdlResult:
    """One table (or database) a statement touches, as Canal's ``DdlResult``.

    For RENAME, ``schema``/``table`` are the new name and ``ori_schema``/``ori_table`` the old one.
    ``error`` is set (and ``type`` is UNKNOWN) when the statement could not be read; ``table`` is
    then the parser's best guess, or None.
    """

    type: DdlType
    schema: str | None
    table: str | None
    ori_schema: str | None = None
    ori_table: str | None = None
    error: str | None = None
    temporary: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


_TABLE_LEADS = {
    ("CREATE", "TABLE"),
    ("CREATE", "INDEX"),
    ("ALTER", "TABLE"),
    ("DROP", "TABLE"),
    ("DROP", "TABLES"),
    ("DROP", "INDEX"),
    ("RENAME", "TABLE"),
    ("RENAME", "TABLES"),
    ("TRUNCATE", "TABLE"),
}
# Words that may sit between the verb and its object: CREATE OR REPLACE TEMPORARY TABLE, ALTER ONLINE
# IGNORE TABLE, CREATE UNIQUE INDEX, DROP TEMPORARY TABLE.
_LEAD_FILLERS = frozenset({"OR", "REPLACE", "TEMPORARY", "ONLINE", "OFFLINE", "IGNORE", "UNIQUE", "FULLTEXT",
                           "SPATIAL"})  # fmt: skip
_DML = {
    "INSERT": DdlType.INSERT,
    "REPLACE": DdlType.INSERT,
    "UPDATE": DdlType.UPDATE,
    "DELETE": DdlType.DELETE,
}


def _classify(tokens: list[Token]) -> tuple[str, str]:
    """(family, verb): family is table, database, dml or other."""
    words = [t.upper for t in tokens[:8]]
    if not words or words[0] is None:
        return "other", ""
    verb = words[0]
    if verb in _DML:
        return "dml", verb
    if verb == "TRUNCATE":
        return "table", verb
    if verb in ("CREATE", "ALTER", "DROP", "RENAME"):
        rest = [w for w in words[1:] if w not in _LEAD_FILLERS]
        obj = rest[0] if rest else None
        if (verb, obj) in _TABLE_LEADS:
            return "table", verb
        if obj in ("DATABASE", "SCHEMA"):
            return "database", verb
    return "other", verb


class _SqlglotQuiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "unsupported syntax" not in record.getMessage()


_sqlglot = None


def _sqlglot_module():
    global _sqlglot
    if _sqlglot is None:
        import sqlglot

        # The Command fallback is expected for some MySQL DDL; we handle it, so do not warn.
        logging.getLogger("sqlglot").addFilter(_SqlglotQuiet())
        _sqlglot = sqlglot
    return _sqlglot


def preload() -> None:
    """Import sqlglot with its MySQL dialect (which sqlglot imports on first use) now.

    For a process about to fork a converter from a threaded server: a module that another thread is
    importing at the moment of the fork stays locked in the child, whose first import of it then
    waits forever (its import lock has no owner there). Importing here waits for such an import to
    finish, so the child never imports sqlglot itself. Found with three destinations starting at
    once (tests/test_canal_reference.py::test_where_canal_stops)."""
    _sqlglot_module().parse_one("ALTER TABLE t ADD c int", read="mysql")


def _sg_table(node, default_schema: str | None) -> TableName | None:
    from sqlglot import exp

    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table) or not node.name:
        return None
    return TableName(node.db or default_schema, node.name)


def _sg_results(expr, default_schema: str | None) -> list[DdlResult] | None:
    """Canal's results from a sqlglot tree, or None when the tree is not one we can read."""
    from sqlglot import exp

    def res(kind: DdlType, t: TableName, ori: TableName | None = None, temporary: bool = False) -> DdlResult:
        return DdlResult(kind, t.schema, t.name, ori.schema if ori else None, ori.name if ori else None,
                         temporary=temporary)  # fmt: skip

    if isinstance(expr, exp.Create):
        kind = str(expr.args.get("kind") or "").upper()
        if kind == "TABLE":
            t = _sg_table(expr.this, default_schema)
            if t is None:
                return None
            props = expr.args.get("properties")
            temporary = bool(props and any(isinstance(p, exp.TemporaryProperty) for p in props.expressions))
            return [res(DdlType.CREATE, t, temporary=temporary)]
        if kind == "INDEX" and isinstance(expr.this, exp.Index):
            t = _sg_table(expr.this.args.get("table"), default_schema)
            return [res(DdlType.CINDEX, t)] if t is not None else None
        return None
    if isinstance(expr, exp.Drop):
        kind = str(expr.args.get("kind") or "").upper()
        if kind == "TABLE":
            tables = [_sg_table(t, default_schema) for t in (expr.args.get("tables") or [expr.this])]
            if not tables or any(t is None for t in tables):
                return None
            temporary = bool(expr.args.get("temporary"))
            return [res(DdlType.ERASE, t, temporary=temporary) for t in tables]
        if kind == "INDEX":
            on = expr.args.get("cluster")
            t = _sg_table(on.this, default_schema) if isinstance(on, exp.OnProperty) else None
            return [res(DdlType.DINDEX, t)] if t is not None else None
        return None
    if isinstance(expr, exp.TruncateTable):
        tables = [_sg_table(t, default_schema) for t in expr.expressions]
        if not tables or any(t is None for t in tables):
            return None
        return [res(DdlType.TRUNCATE, t) for t in tables]
    if isinstance(expr, exp.Alter) and str(expr.args.get("kind") or "").upper() == "TABLE":
        t = _sg_table(expr.this, default_schema)
        if t is None:
            return None
        out = []
        for action in expr.args.get("actions") or []:
            if isinstance(action, exp.AlterRename):
                new = _sg_table(action.this, default_schema)
                if new is None:
                    return None
                out.append(res(DdlType.RENAME, new, t))
            elif isinstance(action, exp.AddConstraint):
                inner = list(action.expressions)
                for c in list(inner):
                    if isinstance(c, exp.Constraint):
                        inner.extend(c.expressions)
                index_like = (exp.PrimaryKey, exp.IndexColumnConstraint, exp.UniqueColumnConstraint)
                kind = DdlType.CINDEX if any(isinstance(c, index_like) for c in inner) else DdlType.ALTER
                out.append(res(kind, t))
            elif isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() in (
                "INDEX",
                "KEY",
            ):
                out.append(res(DdlType.DINDEX, t))
            else:
                out.append(res(DdlType.ALTER, t))
        return out or [res(DdlType.ALTER, t)]
    return None


_DROP_PRIMARY = re.compile(r"DROP\s+PRIMARY\b", re.I)
_ADD_FK_OR_CHECK = re.compile(
    r"ADD\s+(?:CONSTRAINT\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:(?!FOREIGN\b|CHECK\b)(?:`(?:[^`]|``)*`|\w+)\s*)?)?"
    r"(?:FOREIGN|CHECK)\b",
    re.I,
)


def _hand_results(stmt: Statement, default_schema: str | None) -> list[DdlResult]:
    def res(kind: DdlType, t: TableName, ori: TableName | None = None, temporary: bool = False) -> DdlResult:
        t = t.qualified(default_schema)
        o = ori.qualified(default_schema) if ori is not None else None
        return DdlResult(kind, t.schema, t.name, o.schema if o else None, o.name if o else None,
                         temporary=temporary)  # fmt: skip

    if isinstance(stmt, CreateTable):
        return [res(DdlType.CREATE, stmt.table, temporary=stmt.temporary)]
    if isinstance(stmt, AlterTable):
        # DruidDdlParser.parse's ALTER TABLE branch: one ALTER first when the statement has table
        # options, then one result per item: RENAME, CINDEX for an added index, key or unique/primary
        # constraint, DINDEX for a dropped index, key or constraint, ALTER for the rest (DROP PRIMARY
        # KEY and DROP FOREIGN KEY included). Druid gives an added FOREIGN KEY or CHECK no result at
        # all (and Canal then drops the statement); pycanal keeps such a statement as one ALTER.
        out = [res(DdlType.ALTER, stmt.table)] if any(a.table_option for a in stmt.actions) else []
        for a in stmt.actions:
            if a.table_option:
                continue
            if a.op == "RENAME_TABLE":
                out.append(res(DdlType.RENAME, a.table, stmt.table))
            elif a.op in ("ADD_INDEX", "ADD_PRIMARY_KEY"):
                out.append(res(DdlType.CINDEX, stmt.table))
            elif a.op in ("DROP_INDEX", "DROP_PRIMARY_KEY") and not _DROP_PRIMARY.match(a.text):
                out.append(res(DdlType.DINDEX, stmt.table))
            elif not _ADD_FK_OR_CHECK.match(a.text):
                out.append(res(DdlType.ALTER, stmt.table))
        return out or [res(DdlType.ALTER, stmt.table)]
    if isinstance(stmt, DropTables):
        return [res(DdlType.ERASE, t, temporary=stmt.temporary) for t in stmt.tables]
    if isinstance(stmt, RenameTables):
        return [res(DdlType.RENAME, new, old) for old, new in stmt.pairs]
    if isinstance(stmt, TruncateTable):
        return [res(DdlType.TRUNCATE, stmt.table)]
    if isinstance(stmt, CreateIndex):
        return [res(DdlType.CINDEX, stmt.table)]
    if isinstance(stmt, DropIndex):
        return [res(DdlType.DINDEX, stmt.table)]
    if isinstance(stmt, CreateDatabase | DropDatabase):
        return [DdlResult(DdlType.QUERY, stmt.name, None)]
    return []  # ALTER DATABASE and statements on no table: DruidDdlParser names nothing


def _guess_table(tokens: list[Token], default_schema: str | None) -> TableName | None:
    """The first table name after the leading keywords, for an UNKNOWN result (best effort)."""
    p = _Parser("", tokens)
    try:
        while p.word() in _LEAD_FILLERS or p.word() in ("CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"):
            p.i += 1
        if p.word() in ("TABLE", "TABLES"):
            p.i += 1
        elif p.word() == "INDEX":
            while not p.at_end and p.word() != "ON":
                p.i += 1
            p.i += 1
        p.if_exists() or p.if_not_exists()
        return p.table_name().qualified(default_schema)
    except DdlParseError:
        return None


_DML_FILLERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "QUICK", "IGNORE", "INTO"})
_CLAUSES = frozenset({"SET", "WHERE", "ORDER", "LIMIT", "PARTITION", "RETURNING"})
_JOINS = frozenset({"JOIN", "INNER", "CROSS", "LEFT", "RIGHT", "NATURAL", "STRAIGHT_JOIN", "USING"})


def _one_join(p: _Parser) -> bool:
    """From a join operator after an UPDATE's first table: the table list up to SET joins exactly two
    table sources (one JOIN keyword or comma outside parentheses)."""
    depth = joins = 0
    for k in range(p.i, len(p.toks)):
        t = p.toks[k]
        if t.kind == "punct":
            if t.value == "(":
                depth += 1
            elif t.value == ")":
                depth -= 1
            elif t.value == "," and depth == 0:
                joins += 1
        elif t.kind == "word" and depth == 0:
            if t.upper == "SET":
                break
            if t.upper in ("JOIN", "STRAIGHT_JOIN"):
                joins += 1
    return joins == 1


def _dml_results(verb: str, tokens: list[Token], default_schema: str | None) -> list[DdlResult]:
    """DruidDdlParser.parse for a statement DML: INSERT, UPDATE or DELETE with the table Druid's
    ``getTableName`` gives. A DELETE names its target when it has one (``DELETE t1 FROM a t1 JOIN
    b`` names ``t1``, as written), none for several; a multi-table UPDATE names its first table when
    it joins two table sources (the left side of the join; ``a JOIN b JOIN c`` nests a join on the
    left, so no name). REPLACE is no ``SQLInsertStatement`` there, so it gives no result. Checked
    against Canal 1.1.7's DruidDdlParser (tests/test_canal_reference.py)."""
    if verb == "REPLACE":
        return []
    p = _Parser("", tokens)
    table: TableName | None = None
    try:
        p.i = 1
        while p.word() in _DML_FILLERS:
            p.i += 1
        if verb == "DELETE":
            # Druid names the one target: DELETE FROM t ..., DELETE FROM t USING ..., DELETE t FROM ...
            # (the target as written, an alias too); several targets (a comma) name none.
            p.accept("FROM")
            table = p.table_name().qualified(default_schema)
            if p.punct() == "." and p.punct(1) == "*":
                p.i += 2
            if p.punct() == ",":
                table = None
        else:
            table = p.table_name().qualified(default_schema)
        if verb == "UPDATE":
            if p.accept("AS"):
                p.advance()
            elif p.peek() is not None and p.punct() is None and p.word() not in _CLAUSES | _JOINS:
                p.advance()  # an alias
            if (p.word() in _JOINS or p.punct() == ",") and not _one_join(p):
                table = None
    except DdlParseError:
        table = None
    if table is None:
        return [DdlResult(_DML[verb], default_schema, None)]
    return [DdlResult(_DML[verb], table.schema, table.name)]


def _dedupe(results: list[DdlResult]) -> list[DdlResult]:
    out: list[DdlResult] = []
    for r in results:
        if r not in out:
            out.append(r)
    return out


def parse_ddl(sql: str, default_schema: str | None, sql_mode: int = 0) -> list[DdlResult]:
    """Classify one statement like Canal's ``DruidDdlParser.parse(sql, schema)``.

    Returns one result per table the statement touches (``DROP TABLE a, b`` and ``RENAME TABLE a TO
    b, c TO d`` give several; each ALTER TABLE clause kind gives one, duplicates removed), with the
    session schema ``default_schema`` filled in where the statement does not name one. A statement
    that cannot be read gives a single UNKNOWN result with ``error`` set.
    """
    try:
        tokens = tokenize(sql, sql_mode)
    except DdlParseError as exc:
        # Classify by what could be read: a broken INSERT is no DDL.
        try:
            head = tokenize(sql[: exc.offset], sql_mode) if exc.offset else []
        except DdlParseError:
            head = []
        family, verb = _classify(head)
        if family in ("other", "dml"):
            return _dml_results(verb, head, default_schema) if family == "dml" else []
        guess = _guess_table(head, default_schema) if family == "table" else None
        return [
            DdlResult(
                DdlType.UNKNOWN,
                guess.schema if guess else default_schema,
                guess.name if guess else None,
                error=str(exc),
            )  # fmt: skip
        ]
    family, verb = _classify(tokens)
    if family == "other":
        return []
    if family == "dml":
        return _dml_results(verb, tokens, default_schema)
    hand_error: str | None = None
    if family == "table" and verb == "ALTER":
        # Canal's result order for ALTER TABLE needs every clause, table options included: the hand
        # parser keeps them all (sqlglot drops some), so it goes first here.
        try:
            stmt = parse_statement(sql, sql_mode)
        except DdlParseError:
            pass
        else:
            if isinstance(stmt, AlterTable):
                return _dedupe(_hand_results(stmt, default_schema))
    if family == "table":
        sqlglot = _sqlglot_module()
        try:
            expr = sqlglot.parse_one(normalize_sql(sql, tokens), read="mysql")
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
            expr = None
        except Exception as exc:  # sqlglot raising anything else is a sqlglot bug: fall back
            log.debug("sqlglot failed on %r: %r", sql, exc)
            expr = None
        if expr is not None:
            results = _sg_results(expr, default_schema)
            if results is not None:
                return _dedupe(results)
    try:
        stmt = parse_statement(sql, sql_mode)
    except DdlParseError as exc:
        hand_error = str(exc)
    else:
        if family == "table" and isinstance(stmt, OtherStatement):
            hand_error = "not a recognised table statement"
        else:
            return _dedupe(_hand_results(stmt, default_schema))
    guess = _guess_table(tokens, default_schema) if family == "table" else None
    if family == "database":
        return [DdlResult(DdlType.UNKNOWN, default_schema, None, error=hand_error)]
    return [
        DdlResult(
            DdlType.UNKNOWN,
            guess.schema if guess else default_schema,
            guess.name if guess else None,
            error=f"cannot parse {verb} statement: {hand_error}",
        )
    ]
