"""What MySQL's and MariaDB's GTID code share: limits, UUIDs, tags, and the
``mysql::serialization`` variable-length integers."""

from __future__ import annotations

import re

from ..errors import BinlogError

_GTID_LOG_EVENT = 33
_ANONYMOUS_GTID_LOG_EVENT = 34
_GTID_TAGGED_LOG_EVENT = 42

GNO_END = (1 << 63) - 1
"""One past the largest MySQL GNO (``INT64_MAX``); also the largest exclusive interval end."""
MAX_GNO = GNO_END - 1
"""The largest GNO MySQL accepts."""

TAG_MAX_LENGTH = 32

_U8 = 0xFF
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF

_HEX = "0123456789abcdefABCDEF"
_WHITESPACE = " \t\n\r\v\f"
_TAG_RE = re.compile(r"[a-z_][a-z0-9_]{0,31}\Z")


def _raw(data: bytes | bytearray | memoryview, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what}: expected bytes, got {type(data).__name__}")


def _need(data: bytes, pos: int, n: int, what: str) -> None:
    if pos + n > len(data):
        raise BinlogError(
            f"{what}: truncated, needs {n} byte(s) at body byte {pos} but only {max(len(data) - pos, 0)} remain"
        )


def _u(data: bytes, pos: int, n: int, what: str) -> int:
    _need(data, pos, n, what)
    return int.from_bytes(data[pos : pos + n], "little")


# ---------------------------------------------------------------------------------------------
# UUIDs and tags
# ---------------------------------------------------------------------------------------------


def _uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _is_uuid_text(text: str) -> bool:
    if len(text) != 36:
        return False
    for i, ch in enumerate(text):
        if i in (8, 13, 18, 23):
            if ch != "-":
                return False
        elif ch not in _HEX:
            return False
    return True


def _uuid_bytes(uuid: object) -> bytes:
    """Accept a 36-character text UUID (any case), 16 raw bytes or a :class:`uuid.UUID`."""
    if isinstance(uuid, str):
        text = uuid.strip(_WHITESPACE)
        if not _is_uuid_text(text):
            raise BinlogError(f"invalid UUID {uuid!r}: expected 8-4-4-4-12 hexadecimal digits")
        return bytes.fromhex(text.replace("-", ""))
    if isinstance(uuid, (bytes, bytearray)):
        if len(uuid) != 16:
            raise BinlogError(f"invalid UUID: expected 16 bytes, got {len(uuid)}")
        return bytes(uuid)
    raw = getattr(uuid, "bytes", None)  # uuid.UUID
    if isinstance(raw, bytes) and len(raw) == 16:
        return raw
    raise TypeError(f"UUID must be str, bytes or uuid.UUID, not {type(uuid).__name__}")


def _normalize_tag(tag: str | None) -> str:
    """Return the canonical (lowercase) tag, ``""`` for no tag; raise on an invalid tag."""
    if tag is None or tag == "":
        return ""
    if not isinstance(tag, str):
        raise TypeError(f"GTID tag must be str, not {type(tag).__name__}")
    low = tag.lower()
    if not low.isascii() or not _TAG_RE.match(low):
        raise BinlogError(
            f"invalid GTID tag {tag!r}: a tag is 1-32 characters, a letter or '_' first, "
            "then letters, digits or '_'"
        )
    return low


def _check_gno(gno: object, what: str = "GNO") -> int:
    if not isinstance(gno, int) or isinstance(gno, bool):
        raise TypeError(f"{what} must be int, not {type(gno).__name__}")
    if not 1 <= gno <= MAX_GNO:
        raise BinlogError(f"invalid {what} {gno}: must be between 1 and {MAX_GNO}")
    return gno


# ---------------------------------------------------------------------------------------------
# mysql::serialization variable-length integers
# ---------------------------------------------------------------------------------------------


def _read_varlen(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read an unsigned variable-length integer of the MySQL serialization library.

    The number of trailing one bits of the first byte, plus one, is the byte count (1-8); the
    value is the little-endian integer of those bytes shifted right by the byte count. A first
    byte of ``0xFF`` means eight more bytes follow holding the plain 64-bit value.
    """
    if pos >= end:
        raise BinlogError(f"{what}: truncated, variable-length integer missing at body byte {pos}")
    first = data[pos]
    if first == 0xFF:
        if pos + 9 > end:
            raise BinlogError(f"{what}: truncated 9-byte variable-length integer at body byte {pos}")
        return int.from_bytes(data[pos + 1 : pos + 9], "little"), pos + 9
    n = 1
    while first & (1 << (n - 1)):
        n += 1
    if pos + n > end:
        raise BinlogError(f"{what}: truncated {n}-byte variable-length integer at body byte {pos}")
    return int.from_bytes(data[pos : pos + n], "little") >> n, pos + n


def _read_varlen_signed(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    raw, pos = _read_varlen(data, pos, end, what)
    return (-(raw >> 1) - 1 if raw & 1 else raw >> 1), pos


def _write_varlen(value: int) -> bytes:
    if not 0 <= value <= _U64:
        raise BinlogError(f"value {value} does not fit a 64-bit variable-length integer")
    bits = value.bit_length()
    n = max(1, -(-bits // 7))
    if n > 8:
        return b"\xff" + value.to_bytes(8, "little")
    return ((value << n) | ((1 << (n - 1)) - 1)).to_bytes(n, "little")
