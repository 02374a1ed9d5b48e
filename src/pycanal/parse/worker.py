"""The parser's second process (``canal.instance.parser.parallel``): events decoded and converted
beside the process that reads them.

On small transactions a parser is bound by one core: per event it frames, decodes, filters and
writes entries, all under one GIL. Here the work splits in two stages. The reading process keeps
what talks to the source or carries the schema: the socket and framing, the events the schema
history needs (FORMAT_DESCRIPTION, ROTATE, QUERY, TABLE_MAP: DDL applied in order, each TABLE_MAP
completed by the history), the transaction buffer and the store. The bytes of every event go, in
chunks, through a pipe to one forked process that decodes and converts them
(:class:`~pycanal.parse.logevent.LogEventConvert`, the code the parser runs inline) and sends
back the store records in order. One process, not a pool: the converter carries state from event
to event (binlog file, GTID), so every event goes through one converter, in order.

A TABLE_MAP decodes to the object the reading process completed from the schema history at that
point of the stream (after the DDL before it): a chunk names them in order, a copy travels once
per schema version.

Chunks close at ``chunk_events`` events or ``chunk_bytes`` bytes, or on :meth:`flush` (the parser
flushes once the socket has nothing more to read and its ``linger`` has passed since the last chunk
went, or the worker answered that chunk: a chunk costs a round trip to the worker whatever its
size, so a stream of small transactions goes in chunks of a linger's worth, while a transaction
after a quiet spell goes at once). The reading process never writes more than
the pipe holds while the worker may be blocked writing its answers (no deadlock), and waits for
answers then. The transaction's frame (GTID, BEGIN, XID events) is converted by the reading
process (:meth:`ConvertWorker.feed`: its records take their place in the order); the worker only
sees GTID events when the Headers carry the GTID set (``canal.instance.gtidon``). Errors come
back in order: the records of the events before a failed event, then its error (the same
exception type: ``TableIdNotFoundError`` still rewinds the parser). A worker that dies, or leaves
a chunk unanswered for ``answer_timeout`` (60 s, a second more per MB of the chunk; it is killed
then), raises :class:`ConvertWorkerError`, and the parser starts again. The worker closes every
file descriptor it inherited but its pipes and stdio, ignores SIGINT, never collects the heap it
inherited (:func:`_fork`), and leaves when its pipes close. What it would import lazily (sqlglot
for DDL, ...) is imported before the fork: a server forks one worker per destination from a
threaded process, where a module being imported by another thread at the fork stays locked in
the child (:func:`_preload_for_fork`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import pickle
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.constants import ROWS_KIND
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.decoder import EventDecoder
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.filter import RegexFilter
from pycanal.parse.logevent import LogEventConvert
from pycanal.store.event import Event, record

__all__ = ["UNDECODED", "ConvertWorker", "ConvertWorkerError"]

_PICKLE = pickle.HIGHEST_PROTOCOL
_RESET = -1  # in a chunk's TABLE_MAP list: the worker forgets the shipped TableMaps
_MAX_KNOWN = 8192  # TableMaps shipped before both sides start over
_PIPE_SIZE = 1 << 20  # asked for both pipes (Linux F_SETPIPE_SZ; the maximum for users)
_SECONDS_PER_MB = 1.0  # a chunk's answer may take this much longer per MB of it (one huge event)
_FRAME = (ev.GtidEvent, ev.XidEvent, ev.QueryEvent)  # QUERY: only BEGIN

# What the reading process leaves undecoded: the events of a transaction's body that carry no
# schema. It converts the transaction's frame itself (GTID, BEGIN, XID: a few bytes each).
UNDECODED = frozenset({*ROWS_KIND, E.ROWS_QUERY, E.MARIADB_ANNOTATE_ROWS})


class ConvertWorkerError(RuntimeError):
    """The conversion process died or failed outside the conversion of an event."""


class ConvertWorker:
    """The second process of one parser run (see the module notes).

    ``convert`` and ``decoder`` are the run's: the worker gets copies as they are at the fork
    (before the first event). ``with_meta``: the reading process completes TABLE_MAPs (its
    decoder's ``table_meta`` calls :meth:`meta`). ``warn`` receives the converter's warnings.
    """

    def __init__(
        self,
        convert: LogEventConvert,
        decoder: EventDecoder,
        *,
        with_meta: bool,
        warn: Callable[[str], object],
        chunk_events: int = 512,
        chunk_bytes: int = 256 << 10,
        answer_timeout: float = 60.0,
    ) -> None:
        self.chunk_events, self.chunk_bytes = chunk_events, chunk_bytes
        self.answer_timeout = answer_timeout
        self.sent_at = 0.0  # time.monotonic() when the last chunk went
        self.chunks_sent = 0
        self._records = convert.records  # the transaction frames, converted here
        self._filter = convert.table_filter  # a subscription may replace its lists: shipped then
        self._filter_sent = (self._filter.white, self._filter.black)
        self._gtid_state = convert.converter.gtid.gtid_set is not None  # the worker's Headers need it
        self.warn = warn
        self.skipped_table_errors = 0
        jobs_in, jobs_out = os.pipe()
        results_in, results_out = os.pipe()
        self.capacity = _pipe_size(jobs_out)
        _pipe_size(results_out)
        _preload_for_fork()
        try:
            self.pid = _fork()
        except OSError:
            for fd in (jobs_in, jobs_out, results_in, results_out):
                os.close(fd)
            raise
        if self.pid == 0:  # the worker: never returns into the caller's code
            code = 1
            try:
                _close_fds_but(0, 1, 2, jobs_in, results_out)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent
                _serve(Connection(jobs_in, writable=False), Connection(results_out, readable=False),
                       convert, decoder, with_meta)  # fmt: skip
                code = 0
            except BaseException:  # noqa: BLE001 - the parent sees the pipe close
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(jobs_in)
        os.close(results_out)
        self._jobs = Connection(jobs_out, readable=False)
        self._results = Connection(results_in, writable=False)
        self._datas: list[bytes] = []
        self._positions: list[int] = []
        self._metas: list[Any] = []
        self._owns: list[tuple[int, list[Event]]] = []  # ours: (events put before them, records)
        self._bytes = 0
        self._known: dict[int, tuple[int, TableMap]] = {}  # id(TableMap) -> (number, TableMap)
        self._numbers = 0
        # each chunk out: its bytes, our records, when its answer is overdue (time.monotonic())
        self._inflight: deque[tuple[int, list, float]] = deque()
        self._held = 0
        self._out: list[Event] = []
        self._error: BaseException | None = None
        self._exitcode: int | None = None

    # ------------------------------------------------------------------ the reading process
    def meta(self, tm: TableMap) -> TableMap:
        """Note ``tm`` (a TABLE_MAP completed by the schema history) for the next chunk."""
        known = self._known.get(id(tm))
        if known is not None and known[1] is tm:
            self._metas.append(known[0])
            return tm
        if len(self._known) >= _MAX_KNOWN:
            self._known.clear()
            self._metas.append(_RESET)
        self._numbers += 1
        self._known[id(tm)] = (self._numbers, tm)
        self._metas.append((self._numbers, dataclasses.replace(tm)))  # no compiled decoders
        return tm

    def feed(self, data: bytes, pos: int, event: ev.Event | None) -> bool:
        """One event of the stream: its bytes (read at ``pos``) and, if the reading process
        decoded it, the event. A transaction's frame (GTID, BEGIN, XID) is converted here, the
        rest goes to the worker. True when records are ready to :meth:`take`."""
        if event is not None:
            t = type(event)
            if t in _FRAME and (t is not ev.QueryEvent or event.query == "BEGIN"):  # type: ignore[attr-defined]
                records = self._records(event)
                if records:
                    self._owns.append((len(self._datas), records))
                if t is not ev.GtidEvent or not self._gtid_state:
                    return bool(self._out) or self._error is not None
        return self.put(data, pos)

    def put(self, data: bytes, pos: int) -> bool:
        """Queue one event's bytes (read at ``pos``); True when records are ready to :meth:`take`."""
        self._datas.append(data)
        self._positions.append(pos)
        self._bytes += len(data)
        if len(self._datas) >= self.chunk_events or self._bytes >= self.chunk_bytes:
            self.flush()
        return bool(self._out) or self._error is not None

    def flush(self) -> None:
        """Send the events queued so far; take the answers already there."""
        if self._error is not None:
            return  # the worker stopped: take() raises its error
        if self._datas:
            f, lists = self._filter, None
            if (f.white, f.black) != self._filter_sent:
                self._filter_sent = (f.white, f.black)
                lists = (f.white.pattern, f.black.pattern)
            msg = pickle.dumps((self._datas, self._positions, self._metas, lists), _PICKLE)
            due = time.monotonic() + self.answer_timeout + len(msg) / (1 << 20) * _SECONDS_PER_MB
            chunk = (len(msg), self._owns, due)
            self._datas, self._positions, self._metas, self._owns, self._bytes = [], [], [], [], 0
            # Bytes in the pipe are never more than the unanswered chunks: with room for this
            # one the write cannot block while the worker waits for us to read its answers.
            while self._inflight and self._held + len(msg) > self.capacity:
                self._answer()
            try:
                self._jobs.send_bytes(msg)
            except OSError as exc:
                raise self._lost() from exc
            self._inflight.append(chunk)
            self._held += len(msg)
            self.chunks_sent += 1
            self.sent_at = time.monotonic()
        elif self._owns:  # only records of our own: after the chunks still out, if any
            owns, self._owns = self._owns, []
            if self._inflight:
                self._inflight[-1][1].extend([(1 << 62, records) for _, records in owns])
            else:
                for _, records in owns:
                    self._out += records
        while self._inflight and self._results.poll(0):
            self._answer()
        if self._inflight and time.monotonic() > self._inflight[0][2]:
            raise self._hung()

    def take(self) -> list[Event]:
        """The records answered so far, in order (then, once they are taken, a worker's error)."""
        out = self._out
        if out:
            self._out = []
            return out
        if self._error is not None:
            raise self._error
        return out

    def wait(self) -> None:
        """Block until the next chunk is answered."""
        if self._inflight:
            self._answer()

    @property
    def queued(self) -> bool:
        """Events wait in the open chunk."""
        return bool(self._datas)

    @property
    def busy(self) -> bool:
        """Events queued or sent and not answered (False once the worker failed)."""
        return self._error is None and bool(self._datas or self._owns or self._inflight)

    def fileno(self) -> int:
        """Readable when an answer is there."""
        return self._results.fileno()

    def _answer(self) -> None:
        """Take the oldest chunk's answer: the worker's records with ours (``feed``) in between."""
        try:
            if not self._results.poll(max(0.0, self._inflight[0][2] - time.monotonic())):
                raise self._hung()
            records, ends, skipped, warnings, error = pickle.loads(self._results.recv_bytes())
        except (EOFError, OSError) as exc:
            raise self._lost() from exc
        size, owns, _ = self._inflight.popleft()
        self._held -= size
        out = self._out
        done = 0  # records of the worker's taken so far
        for index, mine in owns:  # ours come before the worker's event ``index``
            if index > len(ends):
                if error is not None:
                    break  # after the event that failed: never reached
                upto = len(records)
            else:
                upto = ends[index - 1] if index else 0
            out += [_record(r) for r in records[done:upto]]
            done = upto
            out += mine
        out += [_record(r) for r in records[done:]]
        self.skipped_table_errors += skipped
        for message in warnings:
            self.warn(message)
        if error is not None and self._error is None:
            self._error = error
            self._inflight.clear()  # the worker stops at an error: nothing more will come
            self._held = 0

    def _hung(self) -> ConvertWorkerError:
        """The worker let a chunk's answer go overdue: killed, so that the parser's run ends
        with an error (and starts again) rather than waiting for ever."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self._reap(5.0)
        return ConvertWorkerError(
            f"the conversion process (pid {self.pid}) did not answer within {self.answer_timeout:.0f} s "
            f"(+{_SECONDS_PER_MB:.0f} s per MB of the chunk): killed"
        )

    def _lost(self) -> ConvertWorkerError:
        self._reap(1.0)
        how = "exited" if self._exitcode is None else f"exited with code {self._exitcode}"
        return ConvertWorkerError(f"the conversion process (pid {self.pid}) {how}")

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the pipes (the worker leaves at its next read or write) and reap it; killed if it
        does not exit within 5 s. Idempotent."""
        self._jobs.close()
        self._results.close()
        if not self._reap(5.0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reap(5.0)

    def _reap(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._exitcode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._exitcode = -1
                break
            if pid:
                self._exitcode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                return False
            else:
                time.sleep(0.002)
        return True


# --------------------------------------------------------------------------- the fork
def _preload_for_fork() -> None:
    """Import what the forked converter would otherwise import lazily (sqlglot and its dialect for
    DDL, the JSON decoder, zstd for TRANSACTION_PAYLOAD), in the forking thread, before the fork:
    in a threaded process a module being imported by another thread at the fork is locked for
    good in the child (see :func:`pycanal.parse.ddl.preload`)."""
    from pycanal.binlog import jsonb  # noqa: F401 - imported for its side effect
    from pycanal.parse import ddl

    ddl.preload()
    with contextlib.suppress(ImportError):
        import zstandard  # noqa: F401


_FORK_LOCK = threading.Lock()  # one fork at a time: the collector's switch below is process-wide


def _fork() -> int:
    """``os.fork()`` whose child never collects what it inherited.

    A garbage cycle of the parent may hold an object whose finalizer takes a lock: collected in
    the child, it waits for ever on a lock another thread held at the fork (seen: a dropped
    parser's SQLite schema store, freed in the child's first collection while another
    destination's thread was inside SQLite's allocator; the destination then delivered nothing).
    The collector is off across the fork, so neither the fork's own callbacks nor the child's
    first allocations collect, and the child freezes the inherited heap first of all."""
    with _FORK_LOCK:
        enabled = gc.isenabled()
        gc.disable()
        try:
            pid = os.fork()
            if pid == 0:
                gc.freeze()
        finally:
            if enabled:
                gc.enable()
    return pid


def _close_fds_but(*keep: int) -> None:
    """Close every file descriptor but ``keep``: a forked worker must not hold the parent's
    sockets and pipes open (a closed connection would stay open, a pipe never end)."""
    low = 0
    for fd in [*sorted(keep), os.sysconf("SC_OPEN_MAX")]:
        if low < fd:  # an empty range would close everything (close_range with last < first)
            os.closerange(low, fd)
        low = fd + 1


def _pipe_size(fd: int) -> int:
    """Bytes a pipe holds (asking Linux for ``_PIPE_SIZE``); 64 KiB where that cannot be known."""
    try:
        import fcntl

        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (ImportError, AttributeError, OSError):
        return 1 << 16


# --------------------------------------------------------------------------- the worker process
def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling as itself, else a ``ConvertWorkerError`` naming it."""
    try:
        back = pickle.loads(pickle.dumps(exc, _PICKLE))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:  # noqa: BLE001 - whatever does not pickle is described instead
        pass
    return ConvertWorkerError(f"{type(exc).__name__}: {exc}")


def _record(r: tuple) -> Event:
    """The record of what :func:`_fields` sent."""
    return record(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])


def _fields(r: Event) -> tuple:
    """What a record sends back: :func:`~pycanal.store.event.record`'s arguments."""
    return (r.raw, r.journal_name, r.position, r.event_length, r.execute_time, r.server_id, r.gtid,
            r.entry_type, r.event_type, r.rows)  # fmt: skip


def _serve(jobs: Connection, results: Connection, convert: LogEventConvert, decoder: EventDecoder,
           with_meta: bool) -> None:  # fmt: skip
    """Decode and convert chunks until the pipes close or an event fails."""
    known: dict[int, TableMap] = {}
    shipped: deque[TableMap] = deque()
    if with_meta:
        decoder.table_meta = lambda _tm: shipped.popleft()
    decoder.verify_checksum = False  # the reading process checked every event it sent
    warnings: list[str] = []
    convert.warn = warnings.append
    decode, records = decoder.decode, convert.records
    track_gtid = convert.converter.track_gtid
    rotate, gtid = ev.RotateEvent, ev.GtidEvent
    while True:
        try:
            datas, positions, metas, lists = pickle.loads(jobs.recv_bytes())
        except (EOFError, OSError):
            return
        if lists is not None:  # the subscription's filter, from these events on
            convert.table_filter.white = RegexFilter(lists[0], True)
            convert.table_filter.black = RegexFilter(lists[1], False)
        for item in metas:
            if item == _RESET:
                known.clear()
            elif type(item) is int:
                shipped.append(known[item])
            else:
                known[item[0]] = item[1]
                shipped.append(item[1])
        out: list[tuple] = []
        ends: list[int] = []  # records after each event
        error = None
        skipped = convert.skipped_table_errors
        try:
            for data, pos in zip(datas, positions, strict=True):
                event = decode(data, pos)
                t = type(event)
                if t is rotate:
                    decoder.file = event.next_file  # type: ignore[attr-defined]
                elif t is gtid:  # converted by the reading process: the GTID state only
                    track_gtid(event)
                    ends.append(len(out))
                    continue
                out += [_fields(r) for r in records(event)]
                ends.append(len(out))
        except Exception as exc:  # noqa: BLE001 - reported in order, where it happened
            error = _portable(exc)
        answer = (out, ends, convert.skipped_table_errors - skipped, warnings[:], error)
        warnings.clear()
        try:
            results.send_bytes(pickle.dumps(answer, _PICKLE))
        except OSError:
            return
        if error is not None:
            return
