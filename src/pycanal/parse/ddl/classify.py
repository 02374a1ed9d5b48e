"""Canal's classification of a statement (``DruidDdlParser``/``DdlResult``): :func:`parse_ddl`.

It gives a list of :class:`DdlResult` ``(type, schema, table, ori_schema, ori_table)``. Statements
are pre-classified by their leading keywords (sqlglot misreads non-DDL such as ``flush tables``);
table statements get their structure from sqlglot (dialect ``mysql``) and, where sqlglot gives up
(``exp.Command``) or fails, from the hand parser (:func:`~pycanal.parse.ddl.parser.parse_statement`);
statement DML names its table as Druid does. A statement neither can read gives one result of type
``UNKNOWN`` with ``error`` set: the caller must stop with a clear error naming the statement and
its binlog position, never ignore it.
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass

from .cursor import Cursor
from .lexer import _WORD_RE, DdlParseError, Token, normalize_sql, tokenize
from .parser import parse_statement
from .statements import (
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropDatabase,
    DropIndex,
    DropTables,
    OtherStatement,
    RenameTables,
    Statement,
    TableName,
    TruncateTable,
)

log = logging.getLogger(__name__)

__all__ = ["DdlResult", "DdlType", "is_ddl", "parse_ddl", "preload"]


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


_SCHEMA_VERBS = frozenset({"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"})
_ACCOUNTS = frozenset({"USER", "ROLE"})
_LEAD_CHARS = 256  # enough for the leading words of any statement but one behind a long comment


# A statement's leading word where it starts with a letter: the lexer's first token (its word
# characters), which no comment, quote or sql_mode can precede.
_LEAD_WORD = re.compile(rf"\s*((?=[A-Za-z]){_WORD_RE.pattern})")


def is_ddl(sql: str, sql_mode: int = 0) -> bool:
    """Whether a statement changes a schema: CREATE/ALTER/DROP/RENAME/TRUNCATE of anything but an
    account (USER, ROLE are plain queries). The cheap question a reader of row changes asks of
    every QUERY event before it follows the schema; its first words are read as the server reads
    them (comments dropped, executable comments run).

    A statement led by any other word is answered from that word alone: the lexer took 12-65 us
    for a sysbench row's statement (MariaDB logs one before each row event), about as much as
    reading the row's change; the first word takes under 1 us."""
    lead = _LEAD_WORD.match(sql)
    if lead is not None and lead.group(1).upper() not in _SCHEMA_VERBS:
        return False
    words = _lead_words(sql[:_LEAD_CHARS], sql_mode)
    if len(words) < 2 and len(sql) > _LEAD_CHARS:
        words = _lead_words(sql, sql_mode)
    if not words or words[0] not in _SCHEMA_VERBS:
        return False
    rest = [w for w in words[1:] if w not in _LEAD_FILLERS]
    return not rest or rest[0] not in _ACCOUNTS


def _lead_words(sql: str, sql_mode: int) -> list[str | None]:
    try:
        tokens = tokenize(sql, sql_mode)
    except DdlParseError:  # a head cut inside a string or comment: the whole statement decides
        if len(sql) <= _LEAD_CHARS:
            return []
        tokens = tokenize(sql, sql_mode)
    return [t.upper for t in tokens[:6]]


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
    p = Cursor("", tokens)
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


def _one_join(p: Cursor) -> bool:
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
    p = Cursor("", tokens)
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
