"""Canal entries with the row images encoded in worker processes (Canal's
``canal.instance.parser.parallel``): ``RawEntryConverter``'s bytes, in the same order.

Most of the cost of a Canal entry is turning a rows event's row images into its ``RowChange``
bytes (``rawentry``'s fused encoders); one Python process does that on one core. Here the
calling process keeps everything that carries state: it reads the events, converts every other
event inline and in order (they move the GTID state the Headers use) and builds each rows
entry's Header. Only the row images of rows events that the fused path takes travel, in windows,
to worker processes, which return the finished entries::

    with ParallelEntryConverter(timezone="Asia/Shanghai") as pool:
        for event in conn.events():
            pool.submit(event)
            for event, entries in pool.ready():    # completed events, in order; never blocks
                ...
            # when the input goes idle: pool.flush() (send the partial window), or
            # pool.drain() (wait for everything submitted)
        while batch := pool.drain():
            ...

A window goes out when it holds ``window_events`` rows events or ``window_bytes`` bytes of row
images, or on ``flush()``/``drain()``; each worker holds up to ``depth`` windows, so a worker
finds its next window waiting while the caller reads on; when they all hold that many, the
calling process encodes the window itself rather than wait. The row images go through memory
shared with the worker (a slot per window in flight), the entries come back the same way, and
only the jobs' metadata travels over the worker's pipe (images or entries too big for a slot go
through the pipe as well). A job carries the Header's parts (the file and GTID state as of the
event, sent once per window that uses it); the worker adds the row count (the Header's
``rowsCount`` prop) and returns the entry. A window names the layouts its events use, with what
a worker needs to compile the same fused encoder (the TABLE_MAP, the row decoder's column specs,
the kind).

Errors surface where ``RawEntryConverter.convert`` raises them, in order: ``ready()``/``drain()``
return the entries of the events before a failed event, and the next call raises its error.
Row images the fused code cannot read are decoded here, by the event's row decoder, which reports
them as the inline path does (file and position) or, when they decode, encodes them from the
values. A worker that dies or fails outside the row encoding raises ``ConversionWorkerError``
naming the rows event. After an error the pool is closed.

Workers are forked (cheap: they inherit the compiled modules and the converter options); a
worker first closes every file descriptor it inherited but its two pipes and stdio, so sockets
of the parent (the replication connection, a server's clients) close when the parent closes
them. Workers ignore SIGINT and leave when their pipes close: ``close()``, the pool being
garbage collected, or the parent dying. Not thread-safe: one thread drives a pool.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import mmap
import os
import pickle
import signal
import time
import traceback
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from datetime import tzinfo
from multiprocessing.connection import Connection
from select import POLLERR, POLLHUP, POLLIN, poll
from typing import Any, NamedTuple

from pycanal.binlog import events as ev
from pycanal.binlog.parallel import WorkerTraceback
from pycanal.heap import settle
from pycanal.parse.convert import DdlClassifier, keyword_ddl_classifier
from pycanal.parse.rawentry import (
    RawEntryConverter,
    _FusedGen,
    _row_source,
    _TableCode,
    change_head,
    entry_bytes,
    header_head,
    value_change,
)

__all__ = ["ConversionWorkerError", "ParallelEntryConverter", "default_workers"]

_PICKLE = pickle.HIGHEST_PROTOCOL
_PIPE_SIZE = 1 << 20  # asked for both pipes of a worker (Linux F_SETPIPE_SZ; the maximum for users)
_WORKER_LAYOUTS = 256  # compiled encoders a worker keeps (every window names its layouts again)


def default_workers() -> int:
    """Canal's ``parallelThreadSize`` default: 60% of the cores (at least 1). The calling process
    encodes too whenever every worker is busy, so it counts as one more."""
    return max(1, (os.cpu_count() or 1) * 60 // 100)


class ConversionWorkerError(RuntimeError):
    """A worker process died, or failed outside the row encoding, with the rows event at
    ``source``/``offset`` in its hands (the worker's traceback, if any, is the ``__cause__``)."""

    def __init__(self, message: str, source: str, offset: int) -> None:
        self.source, self.offset = source, offset
        super().__init__(f"{source}, offset {offset}: {message}")


# --------------------------------------------------------------------------- calling process
class _Layout(NamedTuple):
    """A row decoder the fused path takes: its id in the windows and what a worker compiles the
    same encoder from (pickled; no reference back to the TableMap, which keeps the decoder)."""

    id: int
    blob: bytes


class _Job:
    """One rows event whose entry a worker builds; stands in the event's entry list until then."""

    __slots__ = ("item", "index", "event", "pos", "size", "code", "layout", "state")

    def __init__(
        self, event: ev.RowsEvent, pos: int, size: int, code: _TableCode, layout: _Layout, state: tuple
    ) -> None:
        self.item: _Item | None = None
        self.index = 0
        self.event, self.pos, self.size = event, pos, size  # pos, size: the Header's
        self.code, self.layout = code, layout
        self.state = state  # (id, (file head, props, gtid)): the Header's state at this event

    def message(self) -> tuple:
        e = self.event
        return (
            self.layout.id,
            len(e.row_data),
            self.state[0],
            e.table_id,
            self.pos,
            self.size,
            e.server_id,
            e.timestamp,
        )


class _Item:
    """One submitted event: its entries (``_Job`` placeholders until the workers answer)."""

    __slots__ = ("event", "entries", "waiting", "error")

    def __init__(self, event: ev.Event) -> None:
        self.event = event
        self.entries: list[Any] = []
        self.waiting = 0
        self.error: BaseException | None = None


class _Dispatch(RawEntryConverter):
    """``RawEntryConverter`` that hands the rows events its fused path takes to ``defer`` (which
    returns the ``_Job`` standing in for the entry) instead of encoding them."""

    def __init__(self, defer: Any, **options: Any) -> None:
        super().__init__(**options)
        self.defer = defer
        # per row decoder: its _Layout, or None when the fused path does not take it
        self.layouts: weakref.WeakKeyDictionary[Any, _Layout | None] = weakref.WeakKeyDictionary()
        self.ids = itertools.count(1)

    def convert(self, event: ev.Event) -> list[Any]:
        """The entries' bytes, with a ``_Job`` standing in for each deferred rows entry."""
        return [r if isinstance(r, _Job) else r.raw for r in self.records(event)]

    def _rows_record(self, e: ev.RowsEvent, pos: int, size: int) -> Any:
        source = _row_source(e)
        if source is not None and e.table_map is not None:
            decode = source[0]
            try:
                layout = self.layouts[decode]
            except KeyError:
                layout = self.layouts[decode] = self._layout(e, decode)
            if layout is not None:
                return self.defer(e, pos, size, self._code(e), layout, self._header_state(e))
        return super()._rows_record(e, pos, size)

    def _layout(self, e: ev.RowsEvent, decode: Any) -> _Layout | None:
        code = self._code(e)
        if code.fused_encoder(e, decode) is None:
            return None
        # TableMaps do not change once decoded (a new schema version is a new object): a copy
        # without its compiled decoders tells a worker all it needs, once and for all
        spec = (dataclasses.replace(code.tm), decode.specs, e.kind)
        return _Layout(next(self.ids), pickle.dumps(spec, _PICKLE))


class _Worker:
    """One forked worker process, its two pipes, its two shared memory areas of ``depth`` slots
    (row images in, entries out) and the windows it holds (oldest first)."""

    def __init__(
        self, number: int, plans: RawEntryConverter, depth: int, in_slot: int, out_slot: int
    ) -> None:
        jobs_in, jobs_out = os.pipe()
        results_in, results_out = os.pipe()
        self.capacity = min(_pipe_size(jobs_out), _pipe_size(results_out))
        self.number = number
        self.depth, self.in_slot, self.out_slot = depth, in_slot, out_slot
        # shared with the child (anonymous MAP_SHARED); pages are only taken where written
        self.inbox = mmap.mmap(-1, in_slot * depth)
        self.outbox = mmap.mmap(-1, out_slot * depth)
        self.sent = 0  # windows sent: window n uses slot n % depth of both areas
        preload_for_fork()
        try:
            self.pid = os.fork()
        except OSError:
            for fd in (jobs_in, jobs_out, results_in, results_out):
                os.close(fd)
            self.inbox.close()
            self.outbox.close()
            raise
        if self.pid == 0:  # the worker: never returns into the caller's code
            code = 1
            try:
                _close_fds_but(0, 1, 2, jobs_in, results_out)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent
                settle()  # the parent's heap, forked along: collections here need not walk it
                _serve(
                    Connection(jobs_in, writable=False), Connection(results_out, readable=False), plans, self
                )
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(jobs_in)
        os.close(results_out)
        self.jobs = Connection(jobs_out, readable=False)
        self.results = Connection(results_in, writable=False)
        self.windows: deque[tuple[list[_Job], int, int]] = deque()  # jobs, pipe bytes, slot
        self.held = 0  # bytes of the windows sent and not answered
        self.exitcode: int | None = None

    def reap(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit; True once it did."""
        deadline = time.monotonic() + timeout
        while self.exitcode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exitcode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                return False
            else:
                time.sleep(0.002)
        return True

    def stop(self) -> None:
        """Close the pipes (the worker stops at its next read or write) and reap it; killed if it
        does not exit within 5 s."""
        self.jobs.close()
        self.results.close()
        if not self.reap(5):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.reap(5)
        self.inbox.close()
        self.outbox.close()

    def describe(self) -> str:
        if self.exitcode is None:
            return f"conversion worker {self.number} (pid {self.pid})"
        return f"conversion worker {self.number} (pid {self.pid}) exited with code {self.exitcode}"


def preload_for_fork() -> None:
    """Import what a forked converter would otherwise import lazily (sqlglot and its dialect for
    DDL, the JSON decoder, zstd for TRANSACTION_PAYLOAD), in the forking thread, before the fork:
    in a threaded process a module being imported by another thread at the fork is locked for
    good in the child (see :func:`pycanal.parse.ddl.preload`)."""
    from pycanal.binlog import jsonb  # noqa: F401 - imported for its side effect
    from pycanal.parse import ddl

    ddl.preload()
    with contextlib.suppress(ImportError):
        import zstandard  # noqa: F401


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


def _stop_all(pool: list[_Worker]) -> None:
    for w in pool:
        w.stop()
    pool.clear()


class ParallelEntryConverter:
    """``RawEntryConverter`` with the row images encoded by ``workers`` processes (see the module
    notes); converter options as ``RawEntryConverter``.

    ``workers`` (default ``default_workers()``) start with the first window. A window closes
    at ``window_events`` rows events or ``window_bytes`` bytes of row images; a worker holds up
    to ``depth`` windows. When every worker holds ``depth`` windows, ``encode_when_busy``
    encodes the window here (this process helps instead of waiting: on 2 cores one worker and
    this process beat two workers), else the caller waits for a worker. ``windows_sent`` and
    ``windows_here`` count both; ``rows_converted`` and ``fused_events`` count as
    ``RawEntryConverter``'s do.
    """

    def __init__(
        self,
        *,
        workers: int | None = None,
        window_events: int = 32,
        window_bytes: int = 256 << 10,
        depth: int = 3,
        encode_when_busy: bool = True,
        ddl_classifier: DdlClassifier | None = None,
        timezone: str | tzinfo | None = "UTC",
        enum_set: str = "index",
        gtid_set: Any = None,
        filter_query_dml: bool = False,
    ) -> None:
        workers = default_workers() if workers is None else workers
        for name, value in (("workers", workers), ("window_events", window_events), ("depth", depth)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        if window_bytes < 1:
            raise ValueError(f"window_bytes must be at least 1, not {window_bytes}")
        self.converter = _Dispatch(
            self._defer,
            ddl_classifier=ddl_classifier,
            timezone=timezone,
            enum_set=enum_set,
            gtid_set=gtid_set,
            filter_query_dml=filter_query_dml,
        )
        # what the workers compile their encoders with (built here: a forked child only runs)
        self._plans = RawEntryConverter(
            ddl_classifier=keyword_ddl_classifier, timezone=timezone, enum_set=enum_set
        )
        self.workers = workers
        self.window_events, self.window_bytes, self.depth = window_events, window_bytes, depth
        self.encode_when_busy = encode_when_busy
        self.windows_sent = 0  # windows encoded by the workers
        self.windows_here = 0  # and here, every worker being busy
        # row images up to 4 windows' worth go through shared memory, entries up to 16 (else the
        # pipe: huge rows events, entries much bigger than their rows)
        self._in_slot = 4 * window_bytes
        self._out_slot = 16 * window_bytes
        self._items: deque[_Item] = deque()
        self._window: list[_Job] = []
        self._window_size = 0
        self._state_ids = itertools.count(1)
        self._state: tuple[int, tuple] = (0, ())
        self._pool: list[_Worker] = []
        self._stop = weakref.finalize(self, _stop_all, self._pool)  # also if never closed
        self._started = False
        self._by_fd: dict[int, _Worker] = {}
        self._poll = poll()
        self._held = 0  # windows out
        self._dead: str | None = None  # why no window can be sent any more
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (none before the first window is sent, or once closed)."""
        return [w.pid for w in self._pool]

    @property
    def rows_converted(self) -> int:
        return self.converter.rows_converted

    @property
    def fused_events(self) -> int:
        return self.converter.fused_events

    # ------------------------------------------------------------------ API
    def submit(self, event: ev.Event) -> None:
        """Convert ``event`` (its rows entries go into the window). Errors are kept for their
        turn in ``ready()``/``drain()``; a full window is sent (see ``encode_when_busy``)."""
        self._check_open()
        item = _Item(event)
        mark = len(self._window)
        try:
            entries = self.converter.convert(event)
        except Exception as exc:
            item.error = exc
            for job in self._window[mark:]:  # rows before the failure in a TRANSACTION_PAYLOAD
                self._window_size -= len(job.event.row_data)
            del self._window[mark:]
        else:
            item.entries = entries
            for i, x in enumerate(entries):
                if type(x) is _Job:
                    x.item, x.index = item, i
                    item.waiting += 1
        self._items.append(item)
        if len(self._window) >= self.window_events or self._window_size >= self.window_bytes:
            self._send()

    def ready(self) -> list[tuple[ev.Event, list[bytes]]]:
        """The completed events from the front, in order, with their entries; never waits. At a
        failed event: what precedes it, or its error when nothing does."""
        self._check_open()
        if self._held:
            self._collect(0)
        return self._completed()

    def flush(self) -> None:
        """Send the partial window now (the input is idle: nothing should wait for more)."""
        self._check_open()
        if self._window:
            self._send()

    def drain(self) -> list[tuple[ev.Event, list[bytes]]]:
        """``flush()``, wait for the workers, return every completed event (as ``ready()``): all
        submitted ones unless one failed (then the next call raises its error)."""
        self.flush()
        while self._held:
            self._collect(None)
        return self._completed()

    def convert_all(self, events: Iterable[ev.Event]) -> Iterator[bytes]:
        """The entries of ``events``, in order (as ``RawEntryConverter.convert_all``)."""
        for event in events:
            self.submit(event)
            for _event, entries in self.ready():
                yield from entries
        while batch := self.drain():
            for _event, entries in batch:
                yield from entries

    def close(self) -> None:
        """Stop the workers (dropping what is in flight) and wait for them to exit."""
        if self._closed:
            return
        self._closed = True
        self._items.clear()
        self._window.clear()
        self._by_fd.clear()
        self._held = 0
        self._stop()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("ParallelEntryConverter is closed")

    def __enter__(self) -> ParallelEntryConverter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ calling side
    def _defer(
        self, e: ev.RowsEvent, pos: int, size: int, code: _TableCode, layout: _Layout, state: tuple
    ) -> _Job:
        if state != self._state[1]:
            self._state = (next(self._state_ids), state)
        job = _Job(e, pos, size, code, layout, self._state)
        self._window.append(job)
        self._window_size += len(e.row_data)
        return job

    def _send(self) -> None:
        """Send the window to the least busy worker: the row images into its slot (in the
        message if they do not fit), the rest in the message. When every worker is busy, encode
        it here (``encode_when_busy``) or wait for an answer."""
        jobs, total = self._window, self._window_size
        self._window, self._window_size = [], 0
        msg = b""
        while True:
            w = self._room()
            if w is not None:
                if not msg:
                    layouts = {job.layout.id: job.layout.blob for job in jobs}
                    states = dict(job.state for job in jobs)
                    inline = [job.event.row_data for job in jobs] if total > self._in_slot else None
                    msg = pickle.dumps((layouts, states, [job.message() for job in jobs], inline), _PICKLE)
                size = len(msg) + 16  # the pipe also holds the message's length header
                if not w.windows or w.held + size <= w.capacity:  # else writing it could block
                    break
            if self._dead is not None:
                self._fail(jobs, self._dead, None)
                return
            if self.encode_when_busy:
                self._encode_here(jobs)
                return
            self._collect(None)
        slot = w.sent % w.depth
        w.sent += 1
        if inline is None:
            box, at = w.inbox, slot * w.in_slot
            for job in jobs:
                data = job.event.row_data
                box[at : at + len(data)] = data
                at += len(data)
        w.windows.append((jobs, size, slot))
        w.held += size
        self._held += 1
        self.windows_sent += 1
        try:
            w.jobs.send_bytes(msg)
        except OSError:
            self._lost(w)

    def _room(self) -> _Worker | None:
        """The least busy worker with fewer than ``depth`` windows; None when every worker holds
        ``depth``, or once one was lost. Starts the workers first, takes the answers there are."""
        if not self._started:
            self._started = True
            self._start()
        if self._held:
            self._collect(0)
        best = None
        if self._dead is None:
            for w in self._pool:
                if len(w.windows) < self.depth and (best is None or len(w.windows) < len(best.windows)):
                    best = w
        return best

    def _encode_here(self, jobs: list[_Job]) -> None:
        """Encode a window in this process (every worker is busy): as ``RawEntryConverter``."""
        self.windows_here += 1
        change_of = self.converter._change
        for job in jobs:
            try:
                nrows, change = change_of(job.event, job.code)
            except Exception as exc:
                job.item.error = exc
                continue
            self._fill(job, nrows, self._entry(job, nrows, change))

    @staticmethod
    def _entry(job: _Job, nrows: int, change: bytes) -> bytes:
        """The entry, its Header from the state as of the job's event (as a worker builds it)."""
        e = job.event
        file_head, props, gtid = job.state[1]
        code = job.code
        head = header_head(file_head, props, code, e.kind, job.pos, job.size, e.server_id, e.timestamp)
        return entry_bytes(head, nrows, gtid, change)

    def _fill(self, job: _Job, nrows: int, entry: bytes) -> None:
        self.converter.rows_converted += nrows
        item = job.item
        item.entries[job.index] = entry
        item.waiting -= 1

    def _start(self) -> None:
        for n in range(self.workers):
            try:
                w = _Worker(n + 1, self._plans, self.depth, self._in_slot, self._out_slot)
            except OSError:  # fork refused: nothing runs half-started
                self.close()
                raise
            self._pool.append(w)
            fd = w.results.fileno()
            self._by_fd[fd] = w
            self._poll.register(fd, POLLIN | POLLERR | POLLHUP)

    def _collect(self, timeout: float | None) -> None:
        """Take the answers that are there (waiting up to ``timeout`` seconds for one)."""
        for fd, _mask in self._poll.poll(None if timeout is None else timeout * 1000):
            w = self._by_fd[fd]
            try:
                msg = w.results.recv_bytes()
            except (EOFError, OSError):
                self._lost(w)
                continue
            jobs, size, slot = w.windows.popleft()
            w.held -= size
            self._held -= 1
            self._answer(jobs, pickle.loads(msg), w, slot)

    def _answer(self, jobs: list[_Job], answer: tuple, w: _Worker, slot: int) -> None:
        """Fill in the entries of an answered window: from the worker's slot (or the answer)."""
        done, inline, failure = answer
        conv = self.converter
        box, at = w.outbox, slot * w.out_slot
        for k, (job, result) in enumerate(zip(jobs, done, strict=False)):
            if result is None:  # the fused code could not read it: as the inline path does
                try:
                    nrows, change = value_change(job.event, job.code)
                except Exception as exc:
                    job.item.error = exc
                    continue
                self._fill(job, nrows, self._entry(job, nrows, change))
                continue
            nrows, length = result
            if inline is None:
                entry = box[at : at + length]
                at += length
            else:
                entry = inline[k]
            conv.fused_events += 1
            self._fill(job, nrows, entry)
        if failure is not None:
            self._fail(jobs[len(done) :], f"{w.describe()} failed", failure)

    def _lost(self, w: _Worker) -> None:
        """A worker is gone: its windows fail, and so does every later one."""
        fd = w.results.fileno()
        self._poll.unregister(fd)
        del self._by_fd[fd]
        self._pool.remove(w)
        w.stop()
        self._dead = w.describe()
        while w.windows:
            jobs, _size, _slot = w.windows.popleft()
            self._held -= 1
            self._fail(jobs, self._dead, None)

    @staticmethod
    def _fail(jobs: list[_Job], message: str, tb: str | None) -> None:
        """``ConversionWorkerError`` for the events of ``jobs`` (their later turn raises it)."""
        for job in jobs:
            item = job.item
            if item.error is None:
                e = job.event
                exc = ConversionWorkerError(f"{message} before encoding this rows event", e.file, e.pos)
                if tb is not None:
                    exc.__cause__ = WorkerTraceback(tb)
                item.error = exc

    def _completed(self) -> list[tuple[ev.Event, list[bytes]]]:
        out: list[tuple[ev.Event, list[bytes]]] = []
        items = self._items
        while items:
            item = items[0]
            if item.error is not None:
                if out:
                    break
                self.close()
                raise item.error
            if item.waiting:
                break
            items.popleft()
            out.append((item.event, item.entries))
        return out


# --------------------------------------------------------------------------- worker process
def _serve(jobs: Connection, results: Connection, plans: RawEntryConverter, w: _Worker) -> None:
    """Encode windows until a pipe closes. Window n takes its row images from slot n % depth of
    the inbox (unless they came in the message) and leaves its entries in the same slot of the
    outbox (in the answer if they do not fit)."""
    layouts: OrderedDict[int, tuple] = OrderedDict()  # id: (encoder, table code, kind)
    inbox, outbox = w.inbox, w.outbox
    n = 0
    while True:
        try:
            msg = jobs.recv_bytes()
        except (EOFError, OSError):
            return  # the parent closed the pool, or is gone
        slot = n % w.depth
        n += 1
        blobs, states, window, inline = pickle.loads(msg)
        at = slot * w.in_slot
        done: list[tuple[int, int] | None] = []
        entries: list[bytes | None] = []
        failure = None
        try:
            for k, (layout, length, state, table_id, pos, size, server_id, timestamp) in enumerate(window):
                if inline is None:
                    data = inbox[at : at + length]
                    at += length
                else:
                    data = inline[k]
                known = layouts.get(layout)
                if known is None:
                    known = layouts[layout] = _compile(plans, pickle.loads(blobs[layout]))
                    if len(layouts) > _WORKER_LAYOUTS:
                        layouts.popitem(last=False)
                encode, code, kind = known
                parts = [change_head(code, kind, table_id)]
                try:
                    nrows = encode(data, parts)
                except Exception:  # the parent decodes it: the decoder says what is wrong
                    done.append(None)
                    entries.append(None)
                    continue
                file_head, props, gtid = states[state]
                head = header_head(file_head, props, code, kind, pos, size, server_id, timestamp)
                entry = entry_bytes(head, nrows, gtid, b"".join(parts))
                entries.append(entry)
                done.append((nrows, len(entry)))
        except Exception:
            failure = traceback.format_exc()
        answer: tuple = (done, entries, failure)
        if sum(len(e) for e in entries if e) <= w.out_slot:
            at = slot * w.out_slot
            for entry in entries:
                if entry:
                    outbox[at : at + len(entry)] = entry
                    at += len(entry)
            answer = (done, None, failure)
        try:
            results.send_bytes(pickle.dumps(answer, _PICKLE))
        except OSError:
            return


def _compile(plans: RawEntryConverter, spec: tuple) -> tuple:
    """(fused encoder, table code, kind): what the parent's ``RawEntryConverter`` compiled."""
    tm, specs, kind = spec
    code = plans._table(tm)
    return _FusedGen(code.plan, code.columns, specs).compile_fused(kind), code, kind
