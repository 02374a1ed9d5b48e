"""The protobuf wire format, written by hand for Canal's entry messages.

Entries are written as bytes in the order protobuf's serializer emits them (fields by number;
proto3 scalars left out when zero or empty, ``oneof`` members written whenever set), so they are
byte-identical to ``SerializeToString()`` of the same message. Tags are the field's
``number << 3 | wire type`` byte (every field number of ``EntryProtocol.proto`` fits one byte).
"""

from __future__ import annotations

__all__ = ["Prefixes", "encode_varint", "field_bytes", "field_int", "field_string", "pair"]

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
