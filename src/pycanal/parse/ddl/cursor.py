"""A cursor over a statement's tokens: what every reader of a statement needs (keywords, names,
balanced groups, index key parts, value expressions), shared by the DDL parser and the
classification's readers of DML and unreadable statements.
"""

from __future__ import annotations

from .lexer import DdlParseError, Token
from .statements import Default, TableName

__all__ = ["Cursor"]

_BINARY_OPERATORS = frozenset({"+", "-", "*", "/", "%", "||", "&&", "|", "&", "^", "<<", ">>", "DIV", "MOD"})


class Cursor:
    """Tokens ``toks`` of ``sql`` and the index ``i`` of the next one."""

    def __init__(self, sql: str, tokens: list[Token]):
        self.sql = sql
        self.toks = tokens
        self.i = 0

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
