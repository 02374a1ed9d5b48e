"""Delta deletion vectors: the rows of a data file that are no longer in the table.

A deletion vector (Delta protocol, "Deletion Vectors") is a set of row positions of one Parquet
file, serialized as Delta's ``RoaringBitmapArray``: the magic number 1681511377 (little-endian),
the number of 32-bit bitmaps (int64) and, for each, the high 32 bits of its positions (int32)
and a 32-bit Roaring bitmap in the portable format (CRoaring's, also Java's). It is stored in
the log entry (``storageType`` ``i``: Z85 text) or in a file next to the data
(``deletion_vector_<uuid>.bin``: a version byte 1, then per vector its size (int32 big-endian),
the bytes and their CRC-32 (big-endian); ``storageType`` ``u``, ``pathOrInlineDv`` the Z85 text
of the uuid's 16 bytes, ``offset`` the size field's).

Pure functions over bytes and numpy arrays of positions (sorted, unique, ``uint64``).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import Any

import numpy as np

from pycanal.storage import LakePath, lake_path

__all__ = [
    "DvError",
    "deserialize",
    "descriptor_bytes",
    "file_descriptors",
    "positions",
    "serialize",
    "vector_file",
]

MAGIC = 1681511377
_NO_RUNS, _RUNS = 12346, 12347  # the portable format's cookies
_ARRAY_MAX = 4096  # an array container holds up to this many values, a bitmap container more
_Z85 = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


class DvError(ValueError):
    """A deletion vector that cannot be read."""


def z85_encode(data: bytes) -> str:
    """Z85 text of ``data``, zero-padded to a multiple of 4 bytes (Delta's variant)."""
    data += b"\0" * (-len(data) % 4)
    out = bytearray()
    for (v,) in struct.iter_unpack(">I", data):
        chunk = bytearray(5)
        for i in range(4, -1, -1):
            v, chunk[i] = divmod(v, 85)
            chunk[i] = _Z85[chunk[i]]
        out += chunk
    return out.decode("ascii")


def z85_decode(text: str, size: int | None = None) -> bytes:
    raw = text.encode("ascii")
    if len(raw) % 5:
        raise DvError(f"Z85 text of {len(raw)} characters (not a multiple of 5)")
    out = bytearray()
    for i in range(0, len(raw), 5):
        v = 0
        for c in raw[i : i + 5]:
            if c not in _Z85_VALUE:
                raise DvError(f"{chr(c)!r} is not a Z85 character")
            v = v * 85 + _Z85_VALUE[c]
        out += struct.pack(">I", v)
    return bytes(out if size is None else out[:size])


def serialize(pos: np.ndarray) -> bytes:
    """The ``RoaringBitmapArray`` of ``pos`` (sorted, unique), its magic number first."""
    pos = np.asarray(pos, dtype=np.uint64)
    highs = (pos >> np.uint64(32)).astype(np.uint32)
    parts = [struct.pack("<Iq", MAGIC, 0 if len(pos) == 0 else int(highs[-1]) + 1)]
    for high in range(0 if len(pos) == 0 else int(highs[-1]) + 1):
        low = (pos[highs == high] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        parts.append(struct.pack("<I", high) + _roaring32(low))
    return b"".join(parts)


def _roaring32(values: np.ndarray) -> bytes:
    """``values`` (uint32, sorted, unique) as a portable Roaring bitmap without run containers."""
    keys, starts = np.unique(values >> np.uint32(16), return_index=True)
    bounds = [*starts.tolist(), len(values)]
    header = struct.pack("<II", _NO_RUNS, len(keys))
    bodies = []
    for i, key in enumerate(keys.tolist()):
        lows = (values[bounds[i] : bounds[i + 1]] & np.uint32(0xFFFF)).astype("<u2")
        header += struct.pack("<HH", key, len(lows) - 1)
        if len(lows) <= _ARRAY_MAX:
            bodies.append(lows.tobytes())
        else:
            bits = np.zeros(1 << 16, dtype=np.uint8)
            bits[lows] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    offset = len(header) + 4 * len(keys)
    offsets = b""
    for body in bodies:
        offsets += struct.pack("<I", offset)
        offset += len(body)
    return header + offsets + b"".join(bodies)


def deserialize(data: bytes) -> np.ndarray:
    """The positions of a ``RoaringBitmapArray`` (``serialize``'s inverse; any container kind)."""
    if len(data) < 12 or struct.unpack_from("<I", data)[0] != MAGIC:
        raise DvError("not a deletion vector (no RoaringBitmapArray magic number)")
    (count,) = struct.unpack_from("<q", data, 4)
    at, out = 12, []
    for _ in range(count):
        (high,) = struct.unpack_from("<I", data, at)
        low, at = _read_roaring32(data, at + 4)
        out.append(low.astype(np.uint64) | (np.uint64(high) << np.uint64(32)))
    return np.concatenate(out) if out else np.empty(0, np.uint64)


def _read_roaring32(data: bytes, at: int) -> tuple[np.ndarray, int]:
    (cookie,) = struct.unpack_from("<I", data, at)
    if cookie & 0xFFFF == _RUNS:
        n = (cookie >> 16) + 1
        run_flags = np.frombuffer(data, np.uint8, (n + 7) // 8, at + 4)
        runs = np.unpackbits(run_flags, bitorder="little")[:n].astype(bool)
        at += 4 + (n + 7) // 8
    elif cookie == _NO_RUNS:
        (n,) = struct.unpack_from("<I", data, at + 4)
        runs = np.zeros(n, bool)
        at += 8
    else:
        raise DvError(f"unknown Roaring bitmap cookie {cookie}")
    desc = np.frombuffer(data, "<u2", 2 * n, at).reshape(n, 2)
    at += 4 * n
    if cookie == _NO_RUNS or n >= 4:  # the offsets, which the containers follow anyway
        at += 4 * n
    parts = []
    for (key, card_1), run in zip(desc.tolist(), runs.tolist(), strict=True):
        base = np.uint32(key << 16)
        if run:
            (nruns,) = struct.unpack_from("<H", data, at)
            pairs = np.frombuffer(data, "<u2", 2 * nruns, at + 2).reshape(nruns, 2).astype(np.uint32)
            at += 2 + 4 * nruns
            lows = np.concatenate(
                [np.arange(s, s + length + 1, dtype=np.uint32) for s, length in pairs.tolist()]
            )
        elif card_1 + 1 <= _ARRAY_MAX:
            lows = np.frombuffer(data, "<u2", card_1 + 1, at).astype(np.uint32)
            at += 2 * (card_1 + 1)
        else:
            bits = np.unpackbits(np.frombuffer(data, np.uint8, 8192, at), bitorder="little")
            lows = np.flatnonzero(bits).astype(np.uint32)
            at += 8192
        parts.append(lows | base)
    return (np.concatenate(parts) if parts else np.empty(0, np.uint32)), at


def file_descriptors(
    table_dir: LakePath, vectors: list[tuple[bytes, int]]
) -> tuple[LakePath, list[dict[str, Any]]]:
    """Write ``vectors`` ((bytes, cardinality) each) to one new deletion vector file of the table;
    the file and the vectors' descriptors."""
    name = uuid.uuid4()
    blob, out = bytearray(b"\x01"), []
    for data, cardinality in vectors:
        out.append({"storageType": "u", "pathOrInlineDv": z85_encode(name.bytes), "offset": len(blob),
                    "sizeInBytes": len(data), "cardinality": cardinality})  # fmt: skip
        blob += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    path = table_dir / f"deletion_vector_{name}.bin"
    path.write_bytes(bytes(blob))
    return path, out


def vector_file(descriptor: dict[str, Any], table_dir: LakePath) -> LakePath | None:
    """The file a descriptor's vector is in (by uuid or path); None for a vector inline."""
    kind, where = descriptor["storageType"], descriptor["pathOrInlineDv"]
    if kind == "i":
        return None
    if kind == "u":
        prefix, code = where[:-20], where[-20:]
        return table_dir / prefix / f"deletion_vector_{uuid.UUID(bytes=z85_decode(code))}.bin"
    if kind == "p":
        return lake_path(where, table_dir.storage_options)
    raise DvError(f"unknown deletion vector storage type {kind!r}")


def descriptor_bytes(descriptor: dict[str, Any], table_dir: LakePath) -> bytes:
    """The serialized vector a descriptor names (inline, or in a file by uuid or path)."""
    size = int(descriptor["sizeInBytes"])
    path = vector_file(descriptor, table_dir)
    if path is None:
        return z85_decode(descriptor["pathOrInlineDv"], size)
    offset = int(descriptor.get("offset") or 1)
    head = path.read_range(offset, 4 + size + 4)
    if len(head) < 8 + size or struct.unpack_from(">i", head)[0] != size:
        raise DvError(f"{path} at {offset}: not a deletion vector of {size} bytes")
    data = head[4 : 4 + size]
    if struct.unpack_from(">I", head, 4 + size)[0] != zlib.crc32(data):
        raise DvError(f"{path} at {offset}: checksum mismatch")
    return data


def positions(descriptor: dict[str, Any] | None, table_dir: LakePath) -> np.ndarray:
    """The deleted positions a descriptor names (none for None)."""
    if descriptor is None:
        return np.empty(0, np.uint64)
    pos = deserialize(descriptor_bytes(descriptor, table_dir))
    if len(pos) != int(descriptor["cardinality"]):
        raise DvError(
            f"a deletion vector of {len(pos)} rows where its descriptor says {descriptor['cardinality']}"
        )
    return pos
