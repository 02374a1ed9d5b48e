"""Table filters with Canal's ``AviaterRegexFilter`` semantics.

``canal.instance.filter.regex`` (white list) and ``canal.instance.filter.black.regex`` (black list)
are comma-separated regular expressions matched against ``schema.table``:

* the pattern is split on commas that are not inside ``()``, ``[]`` or ``{}`` (so ``a{1,3}`` and
  ``[a,b]`` stay whole);
* each part must match the whole name (it is wrapped as ``^(?:part)$``); the parts are tried
  longest first, as Canal does (which only matters for backtracking-free equivalence);
* matching is case-insensitive, on the lower-cased ``schema.table``;
* an empty (or blank) pattern gives the default: ``True`` for a white list, ``False`` for a black list.

DDL is filtered by its table; a RENAME passes if either side passes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["RegexFilter", "TableFilter", "split_pattern"]

_OPEN = {"(": ")", "[": "]", "{": "}"}


def split_pattern(pattern: str) -> list[str]:
    """Split a filter pattern on top-level commas (outside (), [] and {}), dropping blank parts.

    A backslash escapes the next character (so ``\\,`` and ``\\[`` are literal), and inside a
    character class every bracket but the closing ``]`` is literal, as in the regex itself.
    """
    parts: list[str] = []
    buf: list[str] = []
    stack: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            buf.append(pattern[i : i + 2])
            i += 2
            continue
        if stack and stack[-1] == "]":
            # Inside a character class: only an unescaped ']' closes it.
            if ch == "]":
                stack.pop()
            buf.append(ch)
            i += 1
            continue
        if ch in _OPEN:
            stack.append(_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch == "," and not stack:
            parts.append("".join(buf))
            buf = []
            i += 1
            continue
        buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]


class RegexFilter:
    """One comma-separated list of full-match, case-insensitive regular expressions.

    ``default_empty`` is what an empty pattern answers (Canal: white list True, black list False).
    """

    __slots__ = ("pattern", "default_empty", "parts", "_regex")

    def __init__(self, pattern: str | None, default_empty: bool) -> None:
        self.pattern = pattern or ""
        self.default_empty = default_empty
        parts = split_pattern(self.pattern)
        # Longest first, like Canal (``foo|foot`` would otherwise stop at ``foo`` in a non-anchored
        # engine; with the anchors it only keeps the behaviour identical).
        parts.sort(key=len, reverse=True)
        self.parts = parts
        if parts:
            try:
                self._regex = re.compile("|".join(f"^(?:{p})$" for p in parts), re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"bad filter pattern {self.pattern!r}: {exc}") from None
        else:
            self._regex = None

    @property
    def empty(self) -> bool:
        return self._regex is None

    def filter(self, name: str | None) -> bool:
        """Does ``name`` (``schema.table``) match? An empty pattern answers ``default_empty``."""
        if self._regex is None:
            return self.default_empty
        if not name:
            return False
        return self._regex.match(name.lower()) is not None

    __call__ = filter

    def __repr__(self) -> str:
        return f"RegexFilter({self.pattern!r}, default_empty={self.default_empty})"


class TableFilter:
    """Canal's white list plus black list on ``schema.table``.

    A table passes when the white list accepts it and the black list does not.
    """

    __slots__ = ("white", "black")

    def __init__(self, white: str | RegexFilter | None = None, black: str | RegexFilter | None = None):
        self.white = white if isinstance(white, RegexFilter) else RegexFilter(white, True)
        self.black = black if isinstance(black, RegexFilter) else RegexFilter(black, False)

    def accepts(self, schema: str | None, table: str | None) -> bool:
        name = f"{schema or ''}.{table or ''}"
        return self.white.filter(name) and not self.black.filter(name)

    def accepts_ddl(self, results: Iterable) -> bool:
        """The DDL filter over the ``DdlResult``s of one statement (Canal's
        ``LogEventConvert.processFilter``).

        A result passes when its table passes; a RENAME (a result with an old name) when the white
        list accepts its old or its new name and the black list does not name both. The statement
        passes when any of its table results passes (``DROP TABLE a, b`` is delivered when ``b`` is
        of interest), or when none of its results names a table (database statements and other
        queries are not table-specific).
        """
        tabled = False
        for r in results:
            if r.table is None:
                continue
            tabled = True
            ori_table = getattr(r, "ori_table", None)
            if ori_table is None:
                if self.accepts(r.schema, r.table):
                    return True
                continue
            new, old = f"{r.schema or ''}.{r.table}", f"{r.ori_schema or ''}.{ori_table}"
            white = self.white.filter(new) or self.white.filter(old)
            if white and not (self.black.filter(new) and self.black.filter(old)):
                return True
        return not tabled

    def __repr__(self) -> str:
        return f"TableFilter(white={self.white.pattern!r}, black={self.black.pattern!r})"
