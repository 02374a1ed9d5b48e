"""Protobuf wire-format surgery on Canal's entry bytes.

Canal's Java ``CanalEntry`` classes are proto2: a field written with its default value (``isKey:
false``) keeps its presence and is written again when Canal re-serializes a parsed entry, while
pycanal's proto3 classes drop it. So where Canal re-serializes entries (protobuf records split by
partition or topic), pycanal edits the original bytes instead: for bytes in canonical field order,
which Canal and pycanal both write, the result is what Canal's ``toByteString()`` gives.
"""

from __future__ import annotations

__all__ = ["fields", "length_field", "split_around", "varint", "varint_field"]


def varint(value: int) -> bytes:
    """A base-128 varint; a negative number is ten bytes of 64-bit two's complement (int64)."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(data: bytes) -> list[tuple[int, int, int, int]]:
    """Top-level fields as ``(number, start, value_start, end)``: the field is ``data[start:end]``,
    its varint value or length-delimited payload starts at ``value_start``."""
    out = []
    pos, n = 0, len(data)
    while pos < n:
        start = pos
        tag, pos = _read_varint(data, pos)
        wire = tag & 7
        if wire == 0:
            value_start = pos
            _, pos = _read_varint(data, pos)
        elif wire == 1:
            value_start, pos = pos, pos + 8
        elif wire == 2:
            length, value_start = _read_varint(data, pos)
            pos = value_start + length
        elif wire == 5:
            value_start, pos = pos, pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > n:
            raise ValueError("truncated field")
        out.append((tag >> 3, start, value_start, pos))
    return out


def varint_field(data: bytes, number: int, default: int) -> int:
    """The last value of varint field ``number`` (proto2: the last one wins), else ``default``."""
    value = default
    for num, start, value_start, _end in fields(data):
        if num == number and (data[start] & 7) == 0:
            value, _ = _read_varint(data, value_start)
    return value


def length_field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def split_around(data: bytes, number: int) -> tuple[bytes, list[bytes], bytes]:
    """``data`` cut around length-delimited field ``number``: the other fields before its first
    occurrence, each occurrence's payload, and the other fields after it (a message without the
    field is all "before"). ``before + length_field(number, p) + after`` is the message with that
    field set to ``p`` alone, where Canal's re-serialization puts it for canonical bytes."""
    before: list[bytes] = []
    after: list[bytes] = []
    payloads: list[bytes] = []
    for num, start, value_start, end in fields(data):
        if num == number:
            payloads.append(data[value_start:end])
        elif payloads:
            after.append(data[start:end])
        else:
            before.append(data[start:end])
    return b"".join(before), payloads, b"".join(after)
