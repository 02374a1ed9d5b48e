"""A Java ``.properties`` reader (the syntax of ``java.util.Properties.load``).

* a logical line may span several natural lines: a line ending in an odd number of backslashes
  continues on the next one, whose leading whitespace is dropped;
* a line whose first non-blank character is ``#`` or ``!`` is a comment (never continued);
  blank lines are skipped;
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace, then at most one
  ``=``/``:``, then whitespace separate it from the value; the value keeps trailing whitespace;
* escapes: ``\\t \\n \\r \\f``, ``\\uXXXX``; any other ``\\c`` is ``c`` (so ``\\=``, ``\\:``, ``\\ ``,
  ``\\#``, ``\\\\``); a malformed ``\\u`` is an error;
* a repeated key: the last value wins.

Files are read as UTF-8, falling back to ISO-8859-1 (Java's encoding for ``Properties.load``)
when they are not valid UTF-8.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PropertiesSyntaxError", "load_properties", "parse_properties"]

_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"


class PropertiesSyntaxError(ValueError):
    """A malformed ``.properties`` file (for example a bad ``\\uXXXX`` escape)."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= len(natural):
                    break
                line = natural[i].lstrip(_WHITESPACE)
                i += 1
                continue
            parts.append(line)
            break
        out.append((lineno, "".join(parts)))
    return out


def _unescape(text: str, lineno: int, source: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break  # a lone trailing backslash (end of file inside a continuation)
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesSyntaxError(f"{source}:{lineno}: malformed \\uxxxx escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(c, c))
    # join UTF-16 surrogate pairs written as two \u escapes
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _split(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return key, line[j:]


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse ``.properties`` text into an ordered dict (see the module docstring)."""
    result: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        result[_unescape(raw_key, lineno, source)] = _unescape(raw_value, lineno, source)
    return result


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and parse a ``.properties`` file."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    return parse_properties(text, str(path))
