"""The MySQL/MariaDB lexer of the DDL parser: tokens of a statement as the server reads them.

It drops ``#``, ``--`` and ``/* */`` comments, runs executable comments (``/*!50100 ... */``,
MariaDB's ``/*M!100301 ... */``) as the server does, and reads backquoted identifiers and strings
with backslash escapes and doubled quotes; the session's ``sql_mode`` (logged in the QUERY event)
decides what a double quote and a backslash mean.
"""

from __future__ import annotations

import re

__all__ = [
    "MODE_ANSI_QUOTES",
    "MODE_NO_BACKSLASH_ESCAPES",
    "MODE_REAL_AS_FLOAT",
    "DdlParseError",
    "Token",
    "normalize_sql",
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
