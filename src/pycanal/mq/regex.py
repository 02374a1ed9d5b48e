"""The table-name regex of Canal's MQ rules (``connector.core``'s ``AviaterRegexFilter``).

It is not the instance filter's (``pycanal.parse.filter``): the MQ copy splits on every comma,
answers ``True`` for an empty pattern or name, and matches the way ORO's ``Perl5Matcher.matches``
does — the first match at offset 0 must span the whole lower-cased name, so an unparenthesised
``a|ab`` never matches ``ab``. Patterns are Perl 5 syntax, compiled by Python's ``re``.
"""

from __future__ import annotations

import re

__all__ = ["MQRegex"]


class MQRegex:
    """One ``AviaterRegexFilter``: comma parts, longest first, each anchored as ``^part$``."""

    __slots__ = ("pattern", "_regex")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        parts = [p for p in pattern.split(",") if p]
        parts.sort(key=len, reverse=True)  # stable, as Java's List.sort
        joined = "|".join(f"^{p}$" for p in parts)
        try:
            self._regex = re.compile(joined, re.IGNORECASE | re.DOTALL) if parts else None
        except re.error as exc:
            raise ValueError(f"bad regular expression {pattern!r}: {exc}") from None

    def matches(self, name: str) -> bool:
        if self._regex is None or not name:
            return True
        target = name.lower()
        found = self._regex.match(target)
        return found is not None and found.end() == len(target)

    def __repr__(self) -> str:
        return f"MQRegex({self.pattern!r})"
