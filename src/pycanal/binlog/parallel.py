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
file from its start. The scan reads the 19-byte header of every event and, only where needed,
a few more bytes: the FORMAT_DESCRIPTION body (post-header lengths, checksum algorithm), the
flags of rows events, the MariaDB GTID flags and the first bytes of QUERY texts (to tell
``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` from statements). Transaction starts are preferred: the
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
import struct
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from .constants import HEADER_LEN, MAGIC
from .constants import EventType as E
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

_TYPE_SIZE = struct.Struct("<4xB4xI")  # header: type at 4, event size at 9
_U16 = struct.Struct("<H")

_GTID_TYPES = frozenset({E.GTID, E.ANONYMOUS_GTID, E.GTID_TAGGED, E.MARIADB_GTID})
_ROWS_TYPES = frozenset(
    {
        E.PRE_GA_WRITE_ROWS,
        E.PRE_GA_UPDATE_ROWS,
        E.PRE_GA_DELETE_ROWS,
        E.WRITE_ROWS_V1,
        E.UPDATE_ROWS_V1,
        E.DELETE_ROWS_V1,
        E.WRITE_ROWS,
        E.UPDATE_ROWS,
        E.DELETE_ROWS,
        E.PARTIAL_UPDATE_ROWS,
        E.MARIADB_WRITE_ROWS_COMPRESSED_V1,
        E.MARIADB_UPDATE_ROWS_COMPRESSED_V1,
        E.MARIADB_DELETE_ROWS_COMPRESSED_V1,
        E.MARIADB_WRITE_ROWS_COMPRESSED,
        E.MARIADB_UPDATE_ROWS_COMPRESSED,
        E.MARIADB_DELETE_ROWS_COMPRESSED,
    }
)
# Events that belong to the statement after them: a split point moves back over them.
_CONTEXT_TYPES = frozenset(
    {
        E.INTVAR,
        E.RAND,
        E.USER_VAR,
        E.BEGIN_LOAD_QUERY,
        E.APPEND_BLOCK,
        E.ROWS_QUERY,
        E.MARIADB_ANNOTATE_ROWS,
    }
)
# Pre-GA 5.1 servers numbered events 16-22 differently (see decoder._PRE_GA_PERMUTATION).
_PRE_GA_PERMUTATION = {16: 19, 17: 20, 18: 21, 19: 22, 20: 16, 21: 17, 22: 18}
_STMT_END_F = 0x0001
_MARIADB_FL_STANDALONE = 0x01
_CHECKSUM_CRC32 = 1

# What a QUERY text does to the transaction state.
_Q_STATEMENT, _Q_BEGIN, _Q_END = 0, 1, 2


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


class _Candidate(NamedTuple):
    pos: int
    transaction_start: int | None
    gtid_pos: int | None
    fde_pos: int | None


# --------------------------------------------------------------------------- the scan
def _version_tuple(version: bytes) -> tuple[int, int, int]:
    parts = []
    for piece in version.split(b"-")[0].split(b".")[:3]:
        digits = bytes(ch for ch in piece if 48 <= ch <= 57)
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


class _Format:
    """What the scan needs from a FORMAT_DESCRIPTION event (same rules as the decoder)."""

    __slots__ = ("post_header", "crc_len", "permute")

    def __init__(self, data: Any = None, pos: int = 0, size: int = 0) -> None:
        self.post_header = b""
        self.crc_len = 0
        self.permute: dict[int, int] | None = None
        if data is None or size < HEADER_LEN + 57:
            return
        body = pos + HEADER_LEN
        version = bytes(data[body + 2 : body + 52]).split(b"\0", 1)[0]
        v = _version_tuple(version)
        end = pos + size
        has_alg = v >= (5, 3, 0) if b"mariadb" in version.lower() else v >= (5, 6, 1)
        if has_alg and size >= HEADER_LEN + 57 + 5:
            if data[end - 5] == _CHECKSUM_CRC32:
                self.crc_len = 4
            end -= 5
        post = bytes(data[body + 57 : end])
        if len(post) == 22 and (v[:2] == (5, 2) or (v[:2] == (5, 1) and v[2] <= 15)):
            self.permute = _PRE_GA_PERMUTATION
            reordered = bytearray(post)
            for old, new in _PRE_GA_PERMUTATION.items():
                reordered[new - 1] = post[old - 1]
            post = bytes(reordered)
        self.post_header = post

    def post_header_len(self, typ: int, default: int) -> int:
        if 0 < typ <= len(self.post_header):
            return self.post_header[typ - 1]
        return default

    def rows_flags_offset(self, typ: int) -> int:
        """Offset of the rows flags from the event start: after a 6-byte (or old 4-byte) table id."""
        ph = self.post_header_len(typ, 0) or (10 if typ in (30, 31, 32, 39) or typ >= 169 else 8)
        return HEADER_LEN + (4 if ph == 6 else 6)


def _query_kind(data: Any, pos: int, size: int, fmt: _Format) -> int:
    """BEGIN / XA START, COMMIT / ROLLBACK / XA COMMIT / XA ROLLBACK, or another statement."""
    body = pos + HEADER_LEN
    ph = fmt.post_header_len(E.QUERY, 13)
    if ph < 11 or size < HEADER_LEN + ph:
        return _Q_STATEMENT
    db_len = data[body + 8]
    status_len = _U16.unpack_from(data, body + 11)[0] if ph >= 13 else 0
    q = body + ph + status_len + db_len + 1
    end = pos + size - fmt.crc_len
    head = bytes(data[q : min(q + 12, end)]).upper()
    if head == b"BEGIN" or head.startswith(b"XA START"):
        return _Q_BEGIN
    if head == b"COMMIT" or head == b"ROLLBACK" or head.startswith((b"XA COMMIT", b"XA ROLLBACK")):
        return _Q_END
    return _Q_STATEMENT


def _scan(data: Any) -> tuple[list[_Candidate], list[_Candidate], int]:
    """Walk the event headers: (transaction starts, statement starts inside transactions, end).

    ``end`` is where the scan stopped: the end of the file, or the first damaged event header.
    """
    n = len(data)
    if n < 4 or bytes(data[:4]) != MAGIC:
        return [], [], min(n, 4)
    strong: list[_Candidate] = []
    weak: list[_Candidate] = []
    fmt = _Format()
    fde_pos: int | None = None
    seen_gtid = False  # a file with GTID events starts every transaction with one
    in_txn = False
    began = False  # the transaction's BEGIN is behind us (MariaDB: implied by its GTID event)
    txn_start: int | None = None
    txn_gtid: int | None = None
    clean = True  # no TABLE_MAP pending: the decoder holds no statement state
    stmt_done = False  # the previous event ended a statement inside the transaction
    ctx: int | None = None  # first context event before the coming statement
    unpack = _TYPE_SIZE.unpack_from
    flag_offsets: dict[int, int] = {}
    pos = 4
    while n - pos >= HEADER_LEN:
        typ, size = unpack(data, pos)
        if size < HEADER_LEN or pos + size > n:
            break
        if fmt.permute is not None:
            typ = fmt.permute.get(typ, typ)
        if typ in _ROWS_TYPES:
            off = flag_offsets.get(typ)
            if off is None:
                off = flag_offsets[typ] = fmt.rows_flags_offset(typ)
            flags = _U16.unpack_from(data, pos + off)[0] if off + 2 <= size else 0
            clean = bool(flags & _STMT_END_F)
            stmt_done = clean and in_txn
        elif typ == E.TABLE_MAP:
            if in_txn and stmt_done and clean:
                weak.append(_Candidate(pos if ctx is None else ctx, txn_start, txn_gtid, fde_pos))
            clean = stmt_done = False
        elif typ in _CONTEXT_TYPES:
            if ctx is None:
                ctx = pos
            pos += size
            continue  # keeps ctx, clean and stmt_done
        elif typ in _GTID_TYPES:
            if clean:
                strong.append(_Candidate(pos, None, None, fde_pos))
            seen_gtid = in_txn = True
            txn_start = txn_gtid = pos
            began = (
                typ == E.MARIADB_GTID
                and size > HEADER_LEN + 12
                and not data[pos + HEADER_LEN + 12] & _MARIADB_FL_STANDALONE
            )
            stmt_done = False
        elif typ == E.QUERY or typ == E.EXECUTE_LOAD_QUERY or typ == E.MARIADB_QUERY_COMPRESSED:
            kind = _query_kind(data, pos, size, fmt) if typ == E.QUERY else _Q_STATEMENT
            start = pos if ctx is None else ctx
            if not in_txn:
                if not seen_gtid and clean:
                    strong.append(_Candidate(start, None, None, fde_pos))
                    txn_start, txn_gtid = start, None
                if kind == _Q_BEGIN:
                    in_txn = began = True
                stmt_done = False
            elif not began:
                if kind == _Q_BEGIN:
                    began = True
                else:  # the GTID's transaction is this one statement
                    in_txn = False
                stmt_done = False
            elif kind == _Q_END:
                in_txn = began = stmt_done = False
            elif kind == _Q_STATEMENT:
                if stmt_done and clean:
                    weak.append(_Candidate(start, txn_start, txn_gtid, fde_pos))
                stmt_done = clean
            else:
                stmt_done = False
        elif typ == E.XID or typ == E.XA_PREPARE:
            in_txn = began = stmt_done = False
        elif typ == E.TRANSACTION_PAYLOAD:
            # A whole transaction in one event: assumed to end its statements (servers write
            # complete transactions into it), so nothing is pending afterwards.
            if not in_txn and clean:
                strong.append(_Candidate(pos, None, None, fde_pos))
            in_txn = began = stmt_done = False
            clean = True
        elif typ == E.FORMAT_DESCRIPTION:
            fmt = _Format(data, pos, size)
            fde_pos = pos
            flag_offsets.clear()
            clean = True
            in_txn = began = stmt_done = False
        elif typ == E.MARIADB_START_ENCRYPTION:
            break  # the rest of the file is encrypted: no more headers to read
        ctx = None
        pos += size
    return strong, weak, pos


def _nearest(cands: list[_Candidate], offsets: list[int], target: float) -> _Candidate | None:
    i = bisect.bisect_left(offsets, target)
    best = None
    for j in (i - 1, i):
        if 0 <= j < len(cands) and (best is None or abs(offsets[j] - target) < abs(best.pos - target)):
            best = cands[j]
    return best


def plan_parts(data: bytes | bytearray | memoryview | mmap.mmap, parts: int) -> list[Part]:
    """Split a binlog file's bytes into up to ``parts`` parts of roughly equal size (see the
    module docstring for where a part may start). The first part starts at 4."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    strong, weak, end = _scan(data)
    chosen: dict[int, _Candidate] = {}
    span = end - 4
    if parts > 1 and span > 0:
        strong_pos = [c.pos for c in strong]
        weak_pos = [c.pos for c in weak]
        size = span / parts
        for k in range(1, parts):
            target = 4 + size * k
            s = _nearest(strong, strong_pos, target)
            w = _nearest(weak, weak_pos, target)
            pick = s
            if w is not None and (s is None or abs(s.pos - target) > size / 4):
                if s is None or abs(w.pos - target) < abs(s.pos - target):
                    pick = w
            if pick is not None and 4 < pick.pos < end:
                chosen.setdefault(pick.pos, pick)
    starts = sorted(chosen)
    first_fde = 4 if end > 4 else None
    out = [Part(4, starts[0] if starts else None, None, None, first_fde)]
    for i, s in enumerate(starts):
        c = chosen[s]
        stop = starts[i + 1] if i + 1 < len(starts) else None
        out.append(Part(s, stop, c.transaction_start, c.gtid_pos, c.fde_pos))
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
