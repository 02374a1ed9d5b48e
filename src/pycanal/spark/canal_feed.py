"""The runner's side of ``format("canal")`` (``Feed``): its connection to the server, the entries
it holds, the micro-batches it plans from them, and its watchdog.

Spark runs ``latestOffset``, ``partitions`` and ``commit`` in one long-lived driver-side runner
process. Its feed holds the :class:`~pycanal.client.SimpleConnector` and a queue of the entries it
got with ``get_without_ack``, each with the stream state right after it (``Queued``); a pump thread
keeps fetching while Spark runs a micro-batch. An offset is the position of an entry,
``{"file", "pos", "k"}``: up to and including the k-th entry at binlog (file, pos), with ``txn``,
``gtid`` and ``row`` where a micro-batch ends inside a transaction or an event's entries
(``Offset``; the module docstring of ``canal_source`` says when). ``ack`` acks the server batches a
committed micro-batch covers; a new connection rolls the server back to its last ack, and the
entries up to the start of the next micro-batch are skipped (``sync``).
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from pycanal.client import CanalClientError, ClusterConnector, Message, SimpleConnector
from pycanal.heap import hold_long_lived
from pycanal.parse.ddl import is_ddl
from pycanal.parse.filter import TableFilter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import binlog_file_order

from .canal_options import CanalOptions
from .entry_rows import entry_row_count, header_gtid

__all__ = ["Feed", "Key", "Offset", "Queued", "entry_key", "parse_offset", "show_key", "to_offset"]

log = logging.getLogger(__name__)

_PUMP_IDLE = 0.02  # seconds the pump pauses after an empty answer (its GETs do not wait on the server)
_RETRY = 1.0  # seconds between connection attempts
_IUD = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})

Key = tuple[str, int, int, int]  # (file prefix, file number, pos, k): orders all entries


def entry_key(file: str, pos: int, k: int) -> Key:
    """The key of the k-th entry at binlog position (file, pos)."""
    return (*binlog_file_order(file), pos, k)


class Queued(NamedTuple):
    """One received entry and the stream state right after it."""

    key: Key
    file: str
    pos: int
    k: int
    raw: bytes
    boundary: bool  # a transaction (or a standalone entry) ends here
    gtid: str | None  # EntryRows' GTID after this entry
    txn: bool  # inside a transaction after this entry
    end: int  # bytes received on this connection up to and including this entry
    read: bool  # EntryRows reads it (rows, DDL, GTID, transaction end); the rest is not shipped


class Offset(NamedTuple):
    """A micro-batch's end (or start) as its offset says: the key of its last entry, and the
    stream state after it."""

    key: Key
    gtid: str | None
    txn: bool
    row: int | None = None  # rows numbered at this position so far, when more entries may share it


def parse_offset(offset: Any, destination: str) -> Offset:
    """An offset Spark hands back (JSON), checked; ValueError names what is wrong."""
    try:
        file, pos, k = offset["file"], offset["pos"], offset["k"]
        gtid, txn, row = offset.get("gtid"), offset.get("txn", False), offset.get("row")
        if not (isinstance(file, str) and type(pos) is int and type(k) is int and isinstance(txn, bool)):
            raise TypeError("file must be a string, pos and k integers")
        if row is not None and type(row) is not int:
            raise TypeError("row must be an integer")
        if gtid is not None and not isinstance(gtid, str):
            raise TypeError("gtid must be a string")
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"format('canal') destination {destination}: bad offset {offset!r}: {exc}") from None
    return Offset(entry_key(file, pos, k), gtid, txn, row)


def to_offset(e: Queued, row: int | None = None) -> dict[str, Any]:
    """The offset of a micro-batch ending on ``e`` (``row``: the rows numbered at its position)."""
    out: dict[str, Any] = {"file": e.file, "pos": e.pos, "k": e.k}
    if e.gtid is not None:
        out["gtid"] = e.gtid
    if e.txn:
        out["txn"] = True
    if row is not None:
        out["row"] = row
    return out


def show_key(key: Key) -> str:
    """A key as messages name it: ``file:pos#k``."""
    prefix, seq, pos, k = key
    file = f"{prefix}.{seq:06d}" if seq >= 0 else prefix
    return f"{file}:{pos}#{k}" if file else "the server cursor"


def _step(entry: pb.Entry, gtid: str | None, txn: bool) -> tuple[bool, str | None, bool, bool]:
    """(boundary, gtid, txn) after ``entry``, and whether ``EntryRows`` reads it at all: the GTID
    follows ``EntryRows`` exactly; a TRANSACTIONBEGIN or a QUERY entry that is no DDL (the SQL
    behind rows events, informational statements) gives it nothing."""
    kind = entry.entryType
    if kind == pb.TRANSACTIONEND:
        return True, None, False, True
    if kind == pb.TRANSACTIONBEGIN:
        return False, gtid, True, False
    if kind == pb.GTIDLOG:
        return False, pb.Pair.FromString(entry.storeValue).value or None, True, True
    if kind == pb.ROWDATA:
        h = entry.header
        if h.props:
            gtid = header_gtid(h, gtid)
        if h.eventType not in _IUD:
            change = pb.RowChange.FromString(entry.storeValue)
            if change.eventType not in _IUD:
                if is_ddl(change.sql):
                    return True, None, False, True
                return not txn, gtid, txn, False
    return not txn, gtid, txn, True


class Feed:
    """The runner's state: the connection, the entries after ``floor`` and the unacked batches.

    A pump thread fetches from the server while Spark runs a micro-batch (up to two batches'
    worth of entries ahead), so planning the next one rarely waits on the network. Spark calls
    the runner from one thread; ``cond`` guards what the pump shares with it. The connection
    is only replaced (``connect``) from Spark's thread, with the pump stopped.
    """

    def __init__(self, opts: CanalOptions) -> None:
        hold_long_lived()  # the runner process lives as long as the query; the queue churns
        self.opts = opts
        self.cluster = ClusterConnector(opts.zk_servers, opts.destination) if opts.zk_servers else None
        self.conn: SimpleConnector | None = None
        self.cond = threading.Condition()
        self.entries: list[Queued] = []
        self.batches: deque[tuple[int, Key]] = deque()  # unacked server batches: (id, last entry)
        self.floor = Offset(entry_key("", 0, -1), None, False)
        self.last: tuple[str, int, int] = ("", 0, -1)  # (file, pos, k) of the last entry received
        self.stall: Key | None = None  # queue tail when the last plan found no transaction end
        self.rounds = 0  # answers the pump got on this connection
        self.received = 0  # bytes of the entries received on this connection
        self.drained = False  # the pump's last answer was empty
        self.error: CanalClientError | None = None  # what stopped the pump
        self.accepts = TableFilter(opts.filter) if opts.filter else None
        # The watchdog (``watch``): since when the runner holds entries it has planned nothing from.
        self._held: tuple[Key | None, int] = (None, -1)  # queue tail, unacked batches: when they last changed
        self._held_since = time.monotonic()
        self.refetched = False  # the watchdog rolled back and fetched again since the last micro-batch
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None

    def where(self) -> str:
        if self.conn is not None:
            host, port = self.conn.address
            at = f"{host}:{port}" + (f" (from zkServers {self.opts.zk_servers})" if self.cluster else "")
        else:
            at = self.opts.address or f"zkServers {self.opts.zk_servers}"
        return f"format('canal') destination {self.opts.destination} at {at}"

    @property
    def connected(self) -> bool:
        return self.conn is not None and self.conn.connected

    # ------------------------------------------------------------------ connection
    def connect(self, floor: Offset) -> None:
        """(Re)connect, retrying for ``timeout``: the server rolls back what was not acked and
        hands it out again (from its cursor: the last ack)."""
        self.disconnect()
        self.entries.clear()
        self.batches.clear()
        self.last = ("", 0, -1)
        self.stall = None
        self.rounds, self.drained, self.error, self.received = 0, False, None, 0
        self.floor = floor
        deadline = time.monotonic() + self.opts.timeout
        while True:
            try:
                server = self.cluster.running_server() if self.cluster else self.opts.address
                conn = SimpleConnector(
                    server,
                    self.opts.destination,
                    self.opts.user,
                    self.opts.password,
                    client_id=self.opts.client_id,
                )
                conn.connect()  # rolls back every outstanding batch of this clientId
                conn.subscribe(self.opts.filter)
                break
            except (CanalClientError, KazooException, KazooTimeoutError) as exc:
                if time.monotonic() + _RETRY > deadline:
                    raise RuntimeError(
                        f"{self.where()}: no connection within {self.opts.timeout:g}s: {exc}"
                    ) from exc
                log.warning("%s: %s; connecting again in %gs", self.where(), exc, _RETRY)
                time.sleep(_RETRY)
        self.conn = conn
        self._stop = threading.Event()
        self._pump = threading.Thread(
            target=self._run_pump, args=(conn, self._stop), name="pycanal-canal-pump", daemon=True
        )
        self._pump.start()

    def disconnect(self) -> None:
        with self.cond:
            self._stop.set()
            self.cond.notify_all()
        if self._pump is not None:
            self._pump.join()
            self._pump = None
        if self.conn is not None:
            self.conn.disconnect()

    def close(self) -> None:
        self.disconnect()
        if self.cluster is not None:
            self.cluster.disconnect()  # its ZooKeeper client

    def _run_pump(self, conn: SimpleConnector, stop: threading.Event) -> None:
        while True:
            with self.cond:
                while self._full() and not stop.is_set():
                    self.cond.wait()
            if stop.is_set():
                return
            try:
                # No long poll: an ack (Spark's commit) shares the connection and would wait behind it.
                message = conn.get_without_ack(self.opts.fetch_size)
            except CanalClientError as exc:
                with self.cond:
                    if not stop.is_set():
                        self.error = exc
                        self.cond.notify_all()
                return
            with self.cond:
                if stop.is_set():
                    return  # a new connection: the server hands this batch out again
                self.drained = message.id == -1
                if not self.drained:
                    self.ingest(message)
                self.rounds += 1
                self.cond.notify_all()
            if self.drained:
                stop.wait(_PUMP_IDLE)

    def _full(self) -> bool:
        """Two batches' worth queued, with a position change after the first: enough to plan
        (one position can hold more entries than that: a TRANSACTION_PAYLOAD event)."""
        entries = self.entries
        if not entries:
            return False
        top = self._top(self.opts.batch_size, self.opts.batch_bytes)
        if len(entries) <= 2 * top and self._bytes(len(entries)) <= 2 * self.opts.batch_bytes:
            return False
        first, tail = entries[top - 1], entries[-1]
        return (first.pos, first.file) != (tail.pos, tail.file)

    def _top(self, cap: int, cap_bytes: int) -> int:
        """How many of the queued entries fit in a micro-batch of ``cap`` entries and
        ``cap_bytes`` bytes (at least one: a bigger entry makes a batch alone)."""
        entries = self.entries
        top = min(len(entries), cap)
        if top and self._bytes(top) > cap_bytes:
            limit = entries[0].end - len(entries[0].raw) + cap_bytes  # an ``end`` within the cap
            top = max(1, bisect.bisect_right(entries, limit, hi=top, key=lambda e: e.end))
        return top

    def _bytes(self, n: int) -> int:
        """The bytes of the first ``n`` (>= 1) queued entries."""
        entries = self.entries
        return entries[n - 1].end - entries[0].end + len(entries[0].raw)

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait (holding ``cond``) until ``done()``; one reconnect when the pump lost the
        connection. False at the timeout."""
        deadline = time.monotonic() + timeout
        reconnected = False
        while not done():
            if self.error is not None:
                if reconnected:
                    raise RuntimeError(f"{self.where()}: {self.error}") from self.error
                log.warning("%s: %s; reconnecting", self.where(), self.error)
                self.cond.release()
                try:
                    self.connect(self.floor)
                finally:
                    self.cond.acquire()
                reconnected = True
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.cond.wait(left)
        return True

    def sync(self, start: Offset) -> None:
        """Make the queue begin right after ``start``; reconnect when it no longer covers it."""
        if not self.connected or start.key < self.floor.key:
            self.connect(start)
            return
        with self.cond:
            drop = 0
            while drop < len(self.entries) and self.entries[drop].key <= start.key:
                drop += 1
            if drop:
                at = self.entries[drop - 1]
                if at.key == start.key and (at.gtid, at.txn) != (start.gtid, start.txn):
                    raise RuntimeError(
                        f"{self.where()}: the stream state at {show_key(start.key)} is gtid={at.gtid} "
                        f"txn={at.txn}, the offset says gtid={start.gtid} txn={start.txn}: the server's "
                        "stream changed"
                    )
                del self.entries[:drop]
                self.cond.notify_all()
            self.floor = start

    def ingest(self, message: Message) -> None:
        file0, pos0, k = self.last
        tail = self.entries[-1] if self.entries else None
        gtid, txn = (tail.gtid, tail.txn) if tail else (self.floor.gtid, self.floor.txn)
        floor = self.floor.key
        key: Key = floor
        for raw in message.raw_entries:
            entry = pb.Entry.FromString(raw)
            h = entry.header
            file, pos = h.logfileName, h.logfileOffset
            k = k + 1 if pos == pos0 and file == file0 else 0
            file0, pos0 = file, pos
            key = entry_key(file, pos, k)
            if key <= floor:
                continue  # handed out again after a reconnect: <= start, done already
            boundary, gtid, txn, read = _step(entry, gtid, txn)
            self.received += len(raw)
            self.entries.append(Queued(key, file, pos, k, raw, boundary, gtid, txn, self.received, read))
        self.last = (file0, pos0, k)
        self.batches.append((message.id, key))

    # ------------------------------------------------------------------ planning
    def plan_end(self, top: int, drained: bool) -> Queued | None:
        """The last entry of the next micro-batch, of at most ``top`` entries (None: no batch yet)."""
        entries = self.entries
        n = len(entries)
        for i in range(top - 1, -1, -1):
            if entries[i].boundary:
                self.stall = None
                return entries[i]
        if n == 0:
            return None
        # No transaction ends within the cap. Cut one longer than the cap; and one the server
        # stopped handing out twice in a row: its store is full of batches Spark has not
        # committed yet, and Canal acks a batch only whole. Then every queued entry goes, the
        # last one whatever its position (issue 43: a store that ends inside a transaction,
        # taken in one GET, can be freed no other way), its rows numbered on (``offset``).
        stalled = drained and self.stall == entries[-1].key
        self.stall = entries[-1].key if drained else None
        if n <= top and not stalled:
            return None
        if stalled and n <= top:
            log.info(
                "%s: the server hands out nothing more until its batches are acked: the micro-batch "
                "ends inside a transaction, at %s", self.where(), show_key(entries[-1].key),
            )  # fmt: skip
            return entries[-1]
        for i in range(min(top, n - 1) - 1, -1, -1):  # the last position change within the cap
            if entries[i + 1].pos != entries[i].pos or entries[i + 1].file != entries[i].file:
                return entries[i]
        for i in range(top, n - 1):  # one position has more than ``top`` entries: take them all
            if entries[i + 1].pos != entries[i].pos or entries[i + 1].file != entries[i].file:
                return entries[i]
        return entries[-1] if stalled else None

    def stuck(self) -> float:
        """Seconds the runner has held entries (or unacked batches) with nothing planned from
        them and nothing new received; 0 when it holds none."""
        if not (self.entries or self.batches) or self._held[1] < 0:
            return 0.0
        return time.monotonic() - self._held_since

    def watch(self, moved: bool) -> None:
        """The watchdog, after each plan (``moved``: it planned a micro-batch, or an empty one to
        get the last committed): a runner that holds entries and plans nothing from them for
        ``stallTimeout`` seconds says why, rolls back and fetches them again; if that does not
        help within another ``stallTimeout``, it raises, to fail the query (a supervisor restarts
        the job). A stall is a bug (issue 43 was one): this keeps it from being silent."""
        held = (self.entries[-1].key if self.entries else None, len(self.batches))
        if moved:  # the clock starts at the next plan that finds nothing (Spark may run long batches)
            self._held, self.refetched = (None, -1), False
            return
        if held != self._held or not (self.entries or self.batches):
            self._held, self._held_since = held, time.monotonic()
            return
        stuck = self.stuck()
        if not self.opts.stall_timeout or stuck < self.opts.stall_timeout:
            return
        first = show_key(self.entries[0].key) if self.entries else "-"
        what = (
            f"no micro-batch for {stuck:.0f}s while {len(self.entries)} entries ({first} .. "
            f"{show_key(held[0]) if held[0] else '-'}) and {len(self.batches)} server batches are held"
        )
        if self.refetched:
            raise RuntimeError(f"{self.where()}: {what}, also after fetching them again (stallTimeout "
                               f"{self.opts.stall_timeout:g}s): stopping the query")  # fmt: skip
        log.warning("%s: %s: rolling back and fetching them again", self.where(), what)
        self.connect(self.floor)
        self.refetched = True
        self._held = (None, -1)

    def offset(self, end: Queued) -> dict[str, Any]:
        """The offset of a micro-batch ending on ``end`` (a queued entry). When the next entry may
        share its position (nothing after it is queued, or it is at the same position), the
        offset says how many rows were numbered at that position, for the next batch to go on."""
        entries = self.entries
        i = bisect.bisect_left(entries, end.key, key=lambda e: e.key)
        after = entries[i + 1] if i + 1 < len(entries) else None
        if end.boundary or (after is not None and (after.pos, after.file) != (end.pos, end.file)):
            return to_offset(end)
        floor = self.floor
        row = floor.row or 0 if floor.key[:3] == end.key[:3] else 0
        j = i
        while j >= 0 and (entries[j].pos, entries[j].file) == (end.pos, end.file):
            row += entry_row_count(pb.Entry.FromString(entries[j].raw), self.accepts)
            j -= 1
        return to_offset(end, row)

    def plan(self) -> tuple[Queued | None, bool]:
        """The last entry of the next micro-batch (None: no batch yet), and whether only Spark's
        commit of the last batch can bring more (the server answers empty, the unacked batches
        are all Spark's). A queue with a transaction end is planned at once; otherwise this
        waits for an answer to a GET sent after the call, so that ``drained`` is current."""
        caps = self.opts.batch_size, self.opts.batch_bytes
        with self.cond:

            def ready() -> bool:
                top = self._top(*caps)
                return len(self.entries) > top or any(e.boundary for e in self.entries[:top])

            if not ready():
                target = self.rounds + 2  # the GET in flight may predate the call: the next one does not
                self._wait(lambda: ready() or self.rounds >= target, self.opts.timeout)
            drained = self.drained and not ready()
            end = self.plan_end(self._top(*caps), drained)
            return end, drained and bool(self.batches) and self.batches[0][1] <= self.floor.key

    def take(self, start: Offset, end: Offset) -> list[Queued]:
        """The entries in (start, end], fetching them again when this runner does not have them."""
        self.sync(start)
        with self.cond:
            reached = lambda: bool(self.entries) and self.entries[-1].key >= end.key  # noqa: E731
            if not self._wait(reached, self.opts.timeout):
                got = show_key(self.entries[-1].key) if self.entries else "nothing after the start"
                raise RuntimeError(
                    f"{self.where()}: micro-batch ({show_key(start.key)}, {show_key(end.key)}] cannot be read "
                    f"again: the server handed out up to {got} within {self.opts.timeout:g}s "
                    "(was the server's cursor moved, or its binlog purged?)"
                )
            n = 0
            while self.entries[n].key < end.key:
                n += 1
            last = self.entries[n]
            if last.key != end.key or (last.gtid, last.txn) != (end.gtid, end.txn):
                raise RuntimeError(
                    f"{self.where()}: micro-batch ({show_key(start.key)}, {show_key(end.key)}] does not match the "
                    f"server's stream: its entry there is {show_key(last.key)} gtid={last.gtid} txn={last.txn}"
                )
            return self.entries[: n + 1]

    def ack(self, end: Key) -> None:
        """Ack every server batch whose entries are all <= ``end`` (in order, as Canal wants).
        ``cond`` is not held while acking: the pump holds the connection during its GET."""
        assert self.conn is not None
        while True:
            with self.cond:
                if not (self.batches and self.batches[0][1] <= end):
                    return
                batch_id = self.batches[0][0]
            try:
                self.conn.ack(batch_id)
            except CanalClientError as exc:
                # Not acked: the server hands the batches out again after the reconnect, skipped then.
                log.warning("%s: ack failed: %s", self.where(), exc)
                return
            with self.cond:
                self.batches.popleft()
