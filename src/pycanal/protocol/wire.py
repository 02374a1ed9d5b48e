"""The protobuf wire format by hand, for Canal's messages: written (entries, packets) and cut
(stored entries split without a parse).

Entries are written as bytes in the order protobuf's serializer emits them (fields by number;
proto3 scalars left out when zero or empty, ``oneof`` members written whenever set), so they are
byte-identical to ``SerializeToString()`` of the same message. Tags are the field's
``number << 3 | wire type`` byte (every field number of ``EntryProtocol.proto`` fits one byte).

Reading (:func:`fields`, :func:`split_around`) is for where Canal re-serializes a parsed entry
(an MQ record split by partition): its Java classes are proto2, so a field written with its default
value (``isKey: false``) keeps its presence and is written again, where pycanal's proto3 classes
would drop it; cutting the stored bytes gives what Canal's ``toByteString()`` gives.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import CanalProtocol_pb2 as cp

__all__ = [
    "Prefixes",
    "encode_varint",
    "field_bytes",
    "field_int",
    "field_string",
    "fields",
    "messages_packet_parts",
    "pair",
    "split_around",
    "varint_field",
]

BYTES = [bytes((n,)) for n in range(256)]
CACHE_LIMIT = 4096  # lengths whose prefixes are kept (longer ones are built each time)


def encode_varint(n: int) -> bytes:
    """Protobuf base-128 varint; negative numbers as their 64-bit two's complement (10 bytes),
    as protobuf writes negative int32/int64 values."""
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return BYTES[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, (n >> 7 & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_bytes(tag: int, data: bytes) -> bytes:
    """A length-delimited field (string, bytes, message), written even when empty."""
    return BYTES[tag] + encode_varint(len(data)) + data


def field_string(tag: int, text: str) -> bytes:
    """A proto3 string field: nothing when empty."""
    return field_bytes(tag, text.encode("utf-8")) if text else b""


def field_int(tag: int, n: int) -> bytes:
    """A proto3 integer field: nothing when zero."""
    return BYTES[tag] + encode_varint(n) if n else b""


def pair(key: str, value: str) -> bytes:
    """A ``Pair`` message's body."""
    return field_string(0x0A, key) + field_string(0x12, value)


class Prefixes(dict):
    """``tag + varint(n)`` by ``n``, built on first use (small ``n`` kept)."""

    def __init__(self, tag: int) -> None:
        super().__init__()
        self.tag = BYTES[tag]

    def __missing__(self, n: int) -> bytes:
        out = self.tag + encode_varint(n)
        if n < CACHE_LIMIT:
            self[n] = out
        return out


# Tag 2 (Messages.messages) plus the varint length, for the usual entry sizes.
_ENTRY_PREFIX = [b"\x12" + encode_varint(n) for n in range(1 << 14)]
# Packet field 3 (type) = MESSAGES, then the tag of field 5 (body).
_MESSAGES_HEAD = bytes((0x18, cp.MESSAGES, 0x2A))


def messages_packet_parts(batch_id: int, entries: Sequence[bytes]) -> tuple[list[bytes], int]:
    """``Packet{type=MESSAGES, body=Messages{batch_id, messages}}`` of serialized entries, as
    parts to join, and the packet's length: ``b"".join(parts)`` is the packet, and ``parts[0]`` is
    empty, room for a frame header (the TCP protocol's length) without copying the batch once more.

    Byte for byte what protobuf writes, except that ``batch_id`` is written even when 0; no
    ``version`` (Canal's raw path, on the TCP wire and in MQ records alike)."""
    lengths = list(map(len, entries))
    try:
        prefixes = list(map(_ENTRY_PREFIX.__getitem__, lengths))
    except IndexError:  # an entry of 16 KiB or more
        prefixes = [b"\x12" + encode_varint(n) for n in lengths]
    head = b"\x08" + encode_varint(batch_id)
    # Interleave prefixes and entries with slice assignments: C loops, no per-entry Python code.
    parts: list[bytes] = [b""] * (3 + 2 * len(lengths))
    parts[3::2] = prefixes
    parts[4::2] = entries
    parts[2] = head
    body_len = len(head) + sum(lengths) + sum(map(len, prefixes))
    parts[1] = _MESSAGES_HEAD + encode_varint(body_len)
    return parts, len(parts[1]) + body_len


# ------------------------------------------------------------------ reading
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


def split_around(data: bytes, number: int) -> tuple[bytes, list[bytes], bytes]:
    """``data`` cut around length-delimited field ``number``: the other fields before its first
    occurrence, each occurrence's payload, and the other fields after it (a message without the
    field is all "before"). ``before + field_bytes(number << 3 | 2, p) + after`` is the message with that
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
