"""Decode one binlog file in several processes: split it where decoding can restart, decode the
parts in a process pool and return the consumers' results in file order.

Meant for backfill and audit of large binlog files (``pycanal binlog decode --format jsonl``
decodes a large file this way, Spark's ``format("binlog")`` splits files at the same points): the
consumer runs *inside* each worker, so row values are built there, in parallel, and only what
the consumer returns (a count, a digest, a batch of serialised lines) travels back to the
parent. Python row objects are never shipped between processes; that is the point.

Where a part may start
----------------------
Decoding an event needs, besides its own bytes, the FORMAT_DESCRIPTION event (``read_events``
always decodes it, whatever the start position) and the TABLE_MAPs of the current statement
(the decoder drops them at each rows event flagged STMT_END_F). So a part may start at:

* a **transaction start**: a MySQL GTID / ANONYMOUS_GTID / GTID_TAGGED event, a MariaDB GTID
  event (162), or, in files without GTID events, a QUERY event outside a transaction (``BEGIN``
  or a DDL / autocommit statement), moved back over the INTVAR / RAND / USER_VAR / LOAD-block
  events that give that statement its context; a TRANSACTION_PAYLOAD event outside a
  transaction (one compressed event holding a whole transaction) also counts;
* a **statement start inside a transaction**, for huge transactions: the TABLE_MAP (or the
  ROWS_QUERY / ANNOTATE_ROWS before it) that follows a rows event flagged STMT_END_F, or a
  statement QUERY (statement-based logging) that follows the end of the previous statement.

Either is only a candidate while no TABLE_MAP is pending (the last rows event ended its
statement), so the decoder's state at the split point equals that of a decoder that read the
file from its start. The scan (``splits.py``, compiled where it can be) reads the 19-byte header
of every event and, only where needed, a few more bytes: the FORMAT_DESCRIPTION body
(post-header lengths, checksum algorithm), the flags of rows events, the MariaDB GTID flags and
the first bytes of QUERY texts (to tell ``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` from statements). Transaction starts are preferred: the
split point for a target offset is the nearest transaction start if it lies within a quarter
of a part's size, else the nearest candidate of either kind.

A part that starts inside a transaction has lost the transaction's GTID event (it is in the
previous part): ``PartEvents.transaction_gtid`` decodes it on request, so a consumer that
tracks the current GTID (``canonical.Recorder``) can be primed with it.

Limits: a damaged event header ends the scan (the part that reaches it reports the error, at
the same offset as a single-process decode); MariaDB encrypted binlogs are not split. Each
worker's ``read_events`` frames (but does not decode) the events before its start position,
so the time to reach a part grows with its offset (a few hundred ns per skipped event).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import mmap
import os
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from . import splits
from .decoder import EventDecoder
from .errors import BinlogError
from .events import Event, GtidEvent
from .reader import iter_frames, read_events

__all__ = [
    "Part",
    "PartEvents",
    "WorkerTraceback",
    "decode_parallel",
    "iter_parallel",
    "plan_parts",
    "split_points",
]


class Part(NamedTuple):
    """One part of a file: events at offsets ``start <= pos < stop`` (``stop`` None: to the end).

    ``transaction_start`` is None when the part starts at a transaction start; otherwise it is
    the offset of the event that opened the transaction the part starts inside, and ``gtid_pos``
    the offset of that transaction's GTID event (None if it has none). ``fde_pos`` is the offset
    of the FORMAT_DESCRIPTION event in force at ``start``.
    """

    start: int
    stop: int | None
    transaction_start: int | None = None
    gtid_pos: int | None = None
    fde_pos: int | None = None


_Candidate = tuple[int, int | None, int | None, int | None]  # splits.scan's: pos, transaction
# start, GTID position, FORMAT_DESCRIPTION position


def _nearest(cands: list[_Candidate], offsets: list[int], target: float) -> _Candidate | None:
    i = bisect.bisect_left(offsets, target)
    best = None
    for j in (i - 1, i):
        if 0 <= j < len(cands) and (best is None or abs(offsets[j] - target) < abs(best[0] - target)):
            best = cands[j]
    return best


def plan_parts(data: bytes | bytearray | memoryview | mmap.mmap, parts: int) -> list[Part]:
    """Split a binlog file's bytes into up to ``parts`` parts of roughly equal size (see the
    module docstring for where a part may start). The first part starts at 4."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    strong, weak, end = splits.scan(data)
    chosen: dict[int, _Candidate] = {}
    span = end - 4
    if parts > 1 and span > 0:
        strong_pos = [c[0] for c in strong]
        weak_pos = [c[0] for c in weak]
        size = span / parts
        for k in range(1, parts):
            target = 4 + size * k
            s = _nearest(strong, strong_pos, target)
            w = _nearest(weak, weak_pos, target)
            pick = s
            if w is not None and (s is None or abs(s[0] - target) > size / 4):
                if s is None or abs(w[0] - target) < abs(s[0] - target):
                    pick = w
            if pick is not None and 4 < pick[0] < end:
                chosen.setdefault(pick[0], pick)
    starts = sorted(chosen)
    first_fde = 4 if end > 4 else None
    out = [Part(4, starts[0] if starts else None, None, None, first_fde)]
    for i, s in enumerate(starts):
        _, transaction_start, gtid_pos, fde_pos = chosen[s]
        stop = starts[i + 1] if i + 1 < len(starts) else None
        out.append(Part(s, stop, transaction_start, gtid_pos, fde_pos))
    return out


def split_points(data: bytes | bytearray | memoryview | mmap.mmap, parts: int) -> list[int]:
    """Start offsets of up to ``parts`` parts of a binlog file's bytes (magic included), each at
    an event where decoding can begin with no state but the FORMAT_DESCRIPTION event; the first
    is 4. Pure function of the bytes; a damaged header ends the scan (no split point after it)."""
    return [p.start for p in plan_parts(data, parts)]


# --------------------------------------------------------------------------- workers
class PartEvents:
    """The events of one part, as handed to ``consume`` in a worker: an iterator of decoded
    events (``read_events(path, start_position=start, stop_position=stop)``) with what is known
    about where the part sits in the file."""

    def __init__(self, path: str, part: Part, index: int = 0) -> None:
        self.path = path
        self.part = part
        self.index = index
        self.start = part.start
        self.stop = part.stop
        self._events = _part_events(path, part)
        self._gtid: GtidEvent | None = None

    def __iter__(self) -> Iterator[Event]:
        return self._events

    def __next__(self) -> Event:
        return next(self._events)

    @property
    def mid_transaction(self) -> bool:
        """True when the part starts at a statement inside a transaction, not at its start."""
        return self.part.transaction_start is not None

    @property
    def transaction_gtid(self) -> GtidEvent | None:
        """The GTID event of the transaction this part starts inside (decoded on first access),
        or None when the part starts at a transaction start or the transaction has no GTID."""
        if self._gtid is None and self.part.gtid_pos is not None:
            self._gtid = _decode_one(self.path, self.part.gtid_pos, self.part.fde_pos)
        return self._gtid

    def close(self) -> None:
        self._events.close()


def _part_events(path: str, part: Part) -> Iterator[Event]:
    """The part's events: after the first part, its FORMAT_DESCRIPTION event is decoded and the
    events are framed from ``start`` on, a boundary the scan found, instead of framing every event
    before it again (per part, a walk over the file up to the part: on a 1 GiB file in 32 parts,
    15 walks over the whole file in all)."""
    if part.start == 4 or part.fde_pos is None:
        yield from read_events(path, start_position=part.start, stop_position=part.stop)
        return
    with _mapped(path) as (data, decoder):
        _decode_at(decoder, data, part.fde_pos)
        for pos, raw in iter_frames(data, decoder.source, part.start):
            if part.stop is not None and pos >= part.stop:
                return
            yield decoder.decode(raw, pos)


def _decode_one(path: str, pos: int, fde_pos: int | None) -> Any:
    """Decode the event at ``pos`` after the FORMAT_DESCRIPTION event at ``fde_pos``."""
    with _mapped(path) as (data, decoder):
        if fde_pos is not None:
            _decode_at(decoder, data, fde_pos)
        return _decode_at(decoder, data, pos)


@contextlib.contextmanager
def _mapped(path: str) -> Iterator[tuple[mmap.mmap, EventDecoder]]:
    """The file mapped, and a decoder naming it as ``read_events``' does."""
    p = Path(path)
    with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield data, EventDecoder(str(p), p.name)


def _decode_at(decoder: EventDecoder, data: mmap.mmap, pos: int) -> Event:
    """The event at ``pos`` (an event boundary)."""
    size = int.from_bytes(data[pos + 9 : pos + 13], "little")
    return decoder.decode(data[pos : pos + size], pos)


_OK, _ERROR = "ok", "error"


def _run_part(path: str, part: Part, index: int, consume: Callable[[PartEvents], Any]) -> tuple:
    events = PartEvents(path, part, index)
    try:
        return _OK, consume(events)
    except BinlogError as exc:
        # BinlogError does not pickle with its fields (its args hold the formatted message):
        # send them as plain values and rebuild the error in the parent.
        return _ERROR, exc.message, exc.source, exc.offset, traceback.format_exc()
    finally:
        events.close()


class WorkerTraceback(Exception):
    """The traceback of an error raised in a worker process (the ``__cause__`` of the error)."""

    def __str__(self) -> str:
        return f"\n\n(in worker process)\n{self.args[0]}"


def decode_parallel(
    path: str | os.PathLike,
    consume: Callable[[PartEvents], Any],
    workers: int | None = None,
    parts: int | None = None,
    *,
    mp_context: Any = None,
) -> list:
    """Decode one binlog file in worker processes; return ``consume``'s results in file order.

    The file is split with ``plan_parts`` into up to ``parts`` parts (default: ``workers``)
    and each part is decoded in a ``ProcessPoolExecutor`` of ``workers`` processes (default
    ``os.cpu_count()``): the worker calls ``consume(events)`` with a ``PartEvents`` iterator over
    ``read_events(path, start_position=start, stop_position=stop)``. Row values are built in
    the workers, by the consumer, which is what makes this parallel: only ``consume``'s result
    is pickled back, so make it small (a count, a digest, serialised lines), never the events.

    ``consume`` must be picklable: a function defined at the top level of a module. A part
    that starts inside a transaction does not see the transaction's GTID (or BEGIN) event; see
    ``PartEvents.transaction_gtid``. A ``BinlogError`` raised in a worker (while decoding, or
    by lazily decoded rows in ``consume``) is raised here with the same message, file and
    offset (its ``__cause__`` holds the worker's traceback); when several parts fail, the first
    in file order wins, as in a single-process decode. Other exceptions from ``consume``
    propagate as ``ProcessPoolExecutor`` delivers them. Parts not yet started are cancelled on
    an error; running ones finish first. ``mp_context`` is passed to the executor.
    """
    return list(iter_parallel(path, consume, workers, parts, mp_context=mp_context))


def iter_parallel(
    path: str | os.PathLike,
    consume: Callable[[PartEvents], Any],
    workers: int | None = None,
    parts: int | None = None,
    *,
    mp_context: Any = None,
) -> Iterator[Any]:
    """:func:`decode_parallel`'s results one by one, in file order, as they are ready: a part is
    handed to a worker only while fewer than twice ``workers`` results wait to be taken, so a
    slow reader of the results (a pipe) holds that many in memory, not the file's."""
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if parts is None:
        parts = workers
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    p = Path(path)
    source = str(p)
    plan = _plan_file(p, parts)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(plan)), mp_context=mp_context)
    try:
        ahead: deque[Future] = deque()
        todo = iter(enumerate(plan))
        while True:
            for i, part in itertools.islice(todo, 2 * workers - len(ahead)):
                ahead.append(pool.submit(_run_part, source, part, i, consume))
            if not ahead:
                return
            out = ahead.popleft().result()
            if out[0] == _ERROR:
                _, message, src, offset, tb = out
                raise BinlogError(message, src, offset) from WorkerTraceback(tb)
            yield out[1]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _plan_file(path: Path, parts: int) -> list[Part]:
    """``plan_parts`` over the file; a file that cannot be mapped is one part (its reader reports
    what is wrong with it)."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0 or parts == 1:
                return [Part(4, None, None, None, 4)]
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return plan_parts(data, parts)
    except OSError:
        return [Part(4, None, None, None, 4)]
