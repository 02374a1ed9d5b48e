"""Binlog files: check the magic, frame events and hand each one to the decoder."""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from .constants import HEADER_LEN, MAGIC
from .constants import EventType as E
from .decoder import EventDecoder
from .errors import BinlogError
from .events import Event

_ENCRYPTED_MAGIC = b"\xfdbin"
_U32 = struct.Struct("<I")


def check_magic(head: bytes, source: str) -> None:
    if head[:4] == MAGIC:
        return
    if head[:4] == _ENCRYPTED_MAGIC:
        raise BinlogError("encrypted binlog not supported (MySQL keyring-encrypted file)", source, 0)
    if len(head) < 4:
        raise BinlogError(f"file too short for the binlog magic ({len(head)} bytes)", source, 0)
    raise BinlogError(f"bad magic {head[:4].hex()}, expected fe62696e ('\\xfebin')", source, 0)


def iter_frames(data: bytes | mmap.mmap, source: str, start: int = 4) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, event bytes)`` for each complete event from ``start``; a cut-off event is an error."""
    n = len(data)
    pos = start
    while pos < n:
        if n - pos < HEADER_LEN:
            raise BinlogError(
                f"truncated event header ({n - pos} of {HEADER_LEN} bytes at end of file)", source, pos
            )
        size = _U32.unpack_from(data, pos + 9)[0]
        if size < HEADER_LEN:
            raise BinlogError(
                f"bad event size {size} (smaller than the {HEADER_LEN}-byte header)", source, pos
            )
        if pos + size > n:
            raise BinlogError(
                f"truncated event: header says {size} bytes, {n - pos} remain in the file", source, pos
            )
        yield pos, data[pos : pos + size]
        pos += size


def iter_events(
    data: bytes | mmap.mmap,
    source: str,
    start_position: int | None = None,
    stop_position: int | None = None,
    decoder: EventDecoder | None = None,
) -> Iterator[Event]:
    """Decode the events of a whole binlog file held in ``data`` (magic included).

    Events before ``start_position`` are framed but not yielded, except that the
    FORMAT_DESCRIPTION event is always decoded (the rest of the file needs it).
    """
    if decoder is None:
        decoder = EventDecoder(source, Path(source).name)
    check_magic(data[:4], source)
    start = 4 if start_position is None else start_position
    if start < 4:
        raise BinlogError(f"start position {start} is inside the magic", source, start)
    aligned = False
    for pos, raw in iter_frames(data, source):
        if stop_position is not None and pos >= stop_position:
            return
        if pos < start:
            if raw[4] == E.FORMAT_DESCRIPTION:
                decoder.decode(raw, pos)
            continue
        if not aligned:
            if pos != start:
                raise BinlogError(f"start position {start} is not at an event boundary", source, start)
            aligned = True
        yield decoder.decode(raw, pos)
    # The end of the file is a valid start (nothing new yet); anything else unmatched is not.
    if start > len(data):
        raise BinlogError(
            f"start position {start} is past the end of the file ({len(data)} bytes)", source, start
        )
    if not aligned and 4 < start < len(data):
        raise BinlogError(f"start position {start} is not at an event boundary", source, start)


def read_events(
    path: str | os.PathLike,
    start_position: int | None = None,
    stop_position: int | None = None,
    decoder: EventDecoder | None = None,
) -> Iterator[Event]:
    """Decode the events of one binlog file (see ``iter_events``), reading it through mmap."""
    p = Path(path)
    source = str(p)
    if decoder is None:
        decoder = EventDecoder(source, p.name)
    else:
        decoder.source, decoder.file = source, p.name
    with open(p, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise BinlogError("empty file (no binlog magic)", source, 0)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from iter_events(data, source, start_position, stop_position, decoder)
