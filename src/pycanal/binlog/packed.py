"""MySQL length-encoded ("packed") integers and strings, as used inside binlog event bodies."""

from __future__ import annotations

from .errors import BinlogError


def read_packed_int(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a length-encoded integer at ``pos``; return (value, next position)."""
    try:
        first = buf[pos]
        if first < 0xFB:
            return first, pos + 1
        if first == 0xFC:
            end = pos + 3
            width = 2
        elif first == 0xFD:
            end = pos + 4
            width = 3
        elif first == 0xFE:
            end = pos + 9
            width = 8
        else:
            raise BinlogError(f"bad length-encoded integer prefix 0x{first:02x}", offset=pos)
    except IndexError:
        raise BinlogError("truncated length-encoded integer", offset=pos) from None
    if end > len(buf):
        raise BinlogError("truncated length-encoded integer", offset=pos)
    return int.from_bytes(buf[pos + 1 : pos + 1 + width], "little"), end


def read_packed_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Decode a length-encoded byte string at ``pos``; return (bytes, next position)."""
    n, pos = read_packed_int(buf, pos)
    end = pos + n
    if end > len(buf):
        raise BinlogError(f"length-encoded string of {n} bytes overruns its field", offset=pos)
    return bytes(buf[pos:end]), end
