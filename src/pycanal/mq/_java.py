"""Java's string semantics that Canal's MQ rules depend on, reproduced for Python ``str``.

Partitions and topic names are computed in Java on UTF-16 strings; a consumer that expects Canal's
partitions needs the same 32-bit arithmetic here, not Python's unbounded ``hash``-free ints.
"""

from __future__ import annotations

import sys
from array import array

__all__ = ["equals_ignore_case", "hash_partition", "is_wildcard", "split_list", "string_hash"]

_MASK = 0xFFFFFFFF
_NATIVE_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_WILDCARD = frozenset("*?+|(){}[]\\$^")


def string_hash(text: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a signed
    32-bit int (astral characters count as their two surrogates; lone surrogates as themselves)."""
    h = 0
    if text.isascii():
        for unit in text.encode("ascii"):
            h = (31 * h + unit) & _MASK
    else:
        units = array("H")
        units.frombytes(text.encode(_NATIVE_UTF16, "surrogatepass"))
        for unit in units:
            h = (31 * h + unit) & _MASK
    return h - 0x100000000 if h & 0x80000000 else h


def hash_partition(hash_code: int, partitions: int) -> int:
    """``Math.abs(Math.abs(hash) % n)``, Canal's partition of a hash.

    Java's ``Math.abs(Integer.MIN_VALUE)`` stays negative and ``%`` keeps the dividend's sign, so
    the second ``abs`` lands MIN_VALUE on ``2^31 mod n``; with unbounded ints that is ``abs(h) % n``
    for every h.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, not {partitions}")
    return abs(hash_code) % partitions


def _upper(ch: str) -> str:
    up = ch.upper()
    return up if len(up) == 1 else ch  # Character.toUpperCase(char) maps one char to one char


def equals_ignore_case(a: str, b: str) -> bool:
    """``String.equalsIgnoreCase``: per character, equal, or equal upper cases, or equal lower
    cases of the upper cases (so ``ß`` does not equal ``SS``, unlike ``casefold``)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        ux, uy = _upper(x), _upper(y)
        if ux != uy and ux.lower() != uy.lower():
            return False
    return True


def split_list(text: str) -> list[str]:
    """Canal's list split, ``StringUtils.split(StringUtils.replace(s, ",", ";"), ";")``: commas and
    semicolons both separate, empty items vanish, nothing is trimmed."""
    return [item for item in text.replace(",", ";").split(";") if item]


def is_wildcard(text: str) -> bool:
    """``MQMessageUtils.isWildCard``: a name with any regex metacharacter but ``.`` is a regex."""
    return not _WILDCARD.isdisjoint(text)
