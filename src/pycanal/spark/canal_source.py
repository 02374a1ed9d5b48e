"""``format("canal")``: an exactly-once streaming Spark source reading a pycanal (or Canal) server.

    from pycanal.spark import register
    register(spark)
    changes = (spark.readStream.format("canal")
               .option("address", "127.0.0.1:11111").option("destination", "example")
               .option("filter", "shop\\..*")
               .load())

Rows have ``pycanal.spark.rows.ROW_SCHEMA``. Options: ``address`` (host:port) or ``zkServers``
(the ZooKeeper connect string: the server running the destination, as
:meth:`~pycanal.client.ClusterConnector.running_server` finds it, again at every reconnect),
``destination``, ``clientId`` (1001; one query per clientId), ``filter`` (Canal's table regex:
the subscription's filter, applied to the rows too), ``batchSize`` (entries per micro-batch,
65536), ``batchBytes`` (bytes of serialized entries per micro-batch, 32 MiB), ``fetchSize``
(entries, or memory units in MEMSIZE mode, per GET: 8192; at most half the server's store, or a
micro-batch may wait for a server batch it cannot end in), ``numPartitions`` (2), ``user``,
``password``, ``timezone`` (the server's TIMESTAMP zone, UTC), ``timeout`` (seconds to wait for a
server to connect to, and for a replayed batch: 60), ``stallTimeout`` (seconds of holding entries
without a micro-batch before the watchdog fetches them again, then fails the query: 120; 0 never),
``stage`` (a directory the executors and
the driver share: a partition's rows go there as a file instead of through Spark's JVM, see
``pycanal.spark.stage``; only for ``ChangeApplier``, which reads them back).

A micro-batch's entries stay unacked until Spark commits it, while the next batches are fetched:
keep ``batchBytes`` at most a third of the server's store. conf/ ships a 128 MB store
(``canal.instance.memory.buffer.size`` 131072 x 1 KB); Canal's default is 16 MB. Fewer, bigger
micro-batches stream faster (Spark costs ~0.25 s per micro-batch, its Python workers ~0.07 s
of CPU per task).

How it stays exactly once (Spark runs ``latestOffset``/``partitions``/``commit`` in one long-lived
driver-side runner process, ``read`` in executors on a pickled reader):

* The runner holds the :class:`~pycanal.client.SimpleConnector` and a queue of the entries it got
  with ``get_without_ack`` (a pump thread keeps fetching while Spark runs a micro-batch). An
  offset is the position of an entry, ``{"file", "pos", "k"}``: up to and including the k-th
  entry at binlog (file, pos) (several entries share a position inside a TRANSACTION_PAYLOAD
  event). A micro-batch ends on the last complete transaction in the queue.
  A transaction longer than a micro-batch (``batchSize``, ``batchBytes``; or one the server
  stopped handing out: its store is full) is cut between two positions; the offset then also
  carries ``txn`` and the ``gtid`` the next batch's rows continue with.
* ``partitions`` ships the serialized entries of (start, end] in the InputPartitions (zstd),
  cut at positions into ``numPartitions`` parts of about equal bytes: executors never talk to
  the server.
* ``commit(end)`` acks every server batch whose entries are all <= end, so the server cursor is
  never past a batch Spark has not committed. After a driver crash a new runner reconnects (the
  server hands out the unacked batches again), skips what is <= start and takes the entries up
  to exactly ``end``: the replayed batch has the same rows.
* Spark commits a batch only when it plans the next one. When the stream is idle (or the server's
  store is full of uncommitted entries) the source asks for an empty micro-batch, the same
  position with a new ``tick``, so that the last batch gets committed and acked.
* A server acks a batch only whole and hands out nothing while its store is full: when it stopped
  answering twice, the micro-batch ends on the last entry held, inside a transaction or an
  event's entries if need be (the offset's ``row``: the rows numbered at that position so far).
  A watchdog makes any other stall loud (``_Feed.watch``; docs/spark.md).
"""

from __future__ import annotations

import array
import bisect
import itertools
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import zstandard
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

from pycanal.binlog.canonical import is_ddl
from pycanal.client import CanalClientError, ClusterConnector, Message, SimpleConnector
from pycanal.heap import hold_long_lived, settle
from pycanal.parse.filter import TableFilter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import binlog_file_order

from .rows import ROW_SCHEMA, EntryRows, entry_row_count
from .snapshot import (
    SnapshotOptions,
    SnapshotPartition,
    SnapshotPlanner,
    commit_signals,
    read_snapshot_partition,
    snap_after,
    snapshot_options,
    snapshot_partitions,
    snapshot_step,
)
from .stage import stage_rows

__all__ = ["CanalDataSource", "CanalPartition", "CanalStreamReader"]

log = logging.getLogger(__name__)

_BATCH_ROWS = 8192  # rows per Arrow batch out of read()
_MIN_PART_BYTES = 32 * 1024  # smaller parts are not worth a task
_PUMP_IDLE = 0.02  # seconds the pump pauses after an empty answer (its GETs do not wait on the server)
_RETRY = 1.0  # seconds between connection attempts
_IUD = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})
# Before every position: the first batch starts at the server's cursor.
INITIAL_OFFSET: dict[str, Any] = {"file": "", "pos": 0, "k": -1}

Key = tuple[str, int, int, int]  # (file prefix, file number, pos, k): orders all entries


def _key(file: str, pos: int, k: int) -> Key:
    return (*binlog_file_order(file), pos, k)


class _Queued(NamedTuple):
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


class _Offset(NamedTuple):
    key: Key
    gtid: str | None
    txn: bool
    row: int | None = None  # rows numbered at this position so far, when more entries may share it


def _parse_offset(offset: Any, destination: str) -> _Offset:
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
    return _Offset(_key(file, pos, k), gtid, txn, row)


def _to_offset(e: _Queued, row: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"file": e.file, "pos": e.pos, "k": e.k}
    if e.gtid is not None:
        out["gtid"] = e.gtid
    if e.txn:
        out["txn"] = True
    if row is not None:
        out["row"] = row
    return out


def _show(key: Key) -> str:
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
        for prop in h.props:
            if prop.key == "curtGtid":
                gtid = prop.value or None
        if h.eventType not in _IUD:
            change = pb.RowChange.FromString(entry.storeValue)
            if change.eventType not in _IUD:
                if is_ddl(change.sql):
                    return True, None, False, True
                return not txn, gtid, txn, False
    return not txn, gtid, txn, True


class _Options(NamedTuple):
    address: str
    zk_servers: str
    destination: str
    client_id: int
    filter: str
    user: str
    password: str
    timezone: str
    batch_size: int
    batch_bytes: int
    fetch_size: int
    num_partitions: int
    timeout: float
    stall_timeout: float
    stage: Path | None
    snapshot: SnapshotOptions | None


def _int(options: dict[str, str], name: str, default: int, high: int = 2**31 - 1) -> int:
    raw = options.get(name.lower())
    try:
        value = int(raw) if raw is not None else default
    except ValueError:
        raise ValueError(f"format('canal'): option {name} must be an integer, got {raw!r}") from None
    if not 1 <= value <= high:
        raise ValueError(f"format('canal'): option {name} must be in 1..{high}, got {value}")
    return value


def _seconds(options: dict[str, str], name: str, default: float) -> float:
    raw = options.get(name.lower())
    try:
        value = float(raw) if raw is not None else default
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"format('canal'): option {name} must be seconds (0 or more), got {raw!r}")
    return value


def _options(raw: Any) -> _Options:
    options = {k.lower(): v for k, v in raw.items()}
    address, zk_servers = options.get("address", ""), options.get("zkservers", "")
    destination = options.get("destination")
    if bool(address) == bool(zk_servers):
        raise ValueError(
            "format('canal') needs option address (host:port of the server) or zkServers, one of them"
        )
    if not destination:
        raise ValueError("format('canal') needs option destination")
    timeout = _seconds(options, "timeout", 60.0)
    batch_size = _int(options, "batchSize", 65536)
    return _Options(
        address,
        zk_servers,
        destination,
        _int(options, "clientId", 1001, 2**15 - 1),  # a Java short in Canal
        options.get("filter", ""),
        options.get("user", ""),
        options.get("password", ""),
        options.get("timezone", "UTC"),
        batch_size,
        _int(options, "batchBytes", 32 * 1024 * 1024),
        min(batch_size, _int(options, "fetchSize", 8192)),
        _int(options, "numPartitions", 2),
        timeout,
        _seconds(options, "stallTimeout", 120.0),
        Path(options["stage"]) if options.get("stage") else None,
        snapshot_options(options, _int),
    )


class CanalPartition(InputPartition):
    """The serialized entries of one part of a micro-batch, packed (their count, their 4-byte
    little-endian lengths, then the entries) and zstd-compressed: Spark's JVM copies a
    partition several times on its way to an executor, and Canal entries shrink about 3x.
    ``gtid``: the GTID the part starts inside; ``resume``: (file, offset, next row index) when
    it starts inside a binlog event's entries (``EntryRows``' ``resume``)."""

    def __init__(
        self, index: int, entries: list[bytes], gtid: str | None, resume: tuple[str, int, int] | None = None
    ) -> None:
        super().__init__(index)
        sizes = array.array("I", map(len, entries))
        if sys.byteorder == "big":
            sizes.byteswap()
        size = 4 + 4 * len(entries) + sum(sizes)  # in the frame header: one-shot decompression
        cobj = zstandard.ZstdCompressor(level=1).compressobj(size=size)
        head = cobj.compress(len(entries).to_bytes(4, "little") + sizes.tobytes())
        self.payload = b"".join([head, *map(cobj.compress, entries), cobj.flush()])
        self.gtid = gtid
        self.resume = resume

    @property
    def entries(self) -> list[memoryview]:
        """The entries, as views into one decompressed buffer (protobuf parses them as they are)."""
        data = memoryview(zstandard.ZstdDecompressor().decompress(self.payload))
        n = int.from_bytes(data[:4], "little")
        sizes = array.array("I")
        sizes.frombytes(data[4 : 4 + 4 * n])
        if sys.byteorder == "big":
            sizes.byteswap()
        ends = itertools.accumulate(sizes, initial=4 + 4 * n)
        return [data[a:b] for a, b in itertools.pairwise(ends)]


class _Feed:
    """The runner's state: the connection, the entries after ``floor`` and the unacked batches.

    A pump thread fetches from the server while Spark runs a micro-batch (up to two batches'
    worth of entries ahead), so planning the next one rarely waits on the network. Spark calls
    the runner from one thread; ``cond`` guards what the pump shares with it. The connection
    is only replaced (``connect``) from Spark's thread, with the pump stopped.
    """

    def __init__(self, opts: _Options) -> None:
        hold_long_lived()  # the runner process lives as long as the query; the queue churns
        self.opts = opts
        self.cluster = ClusterConnector(opts.zk_servers, opts.destination) if opts.zk_servers else None
        self.conn: SimpleConnector | None = None
        self.cond = threading.Condition()
        self.entries: list[_Queued] = []
        self.batches: deque[tuple[int, Key]] = deque()  # unacked server batches: (id, last entry)
        self.floor = _Offset(_key("", 0, -1), None, False)
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
    def connect(self, floor: _Offset) -> None:
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

    def sync(self, start: _Offset) -> None:
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
                        f"{self.where()}: the stream state at {_show(start.key)} is gtid={at.gtid} "
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
            key = _key(file, pos, k)
            if key <= floor:
                continue  # handed out again after a reconnect: <= start, done already
            boundary, gtid, txn, read = _step(entry, gtid, txn)
            self.received += len(raw)
            self.entries.append(_Queued(key, file, pos, k, raw, boundary, gtid, txn, self.received, read))
        self.last = (file0, pos0, k)
        self.batches.append((message.id, key))

    # ------------------------------------------------------------------ planning
    def plan_end(self, top: int, drained: bool) -> _Queued | None:
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
                "ends inside a transaction, at %s", self.where(), _show(entries[-1].key),
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
        first = _show(self.entries[0].key) if self.entries else "-"
        what = (
            f"no micro-batch for {stuck:.0f}s while {len(self.entries)} entries ({first} .. "
            f"{_show(held[0]) if held[0] else '-'}) and {len(self.batches)} server batches are held"
        )
        if self.refetched:
            raise RuntimeError(f"{self.where()}: {what}, also after fetching them again (stallTimeout "
                               f"{self.opts.stall_timeout:g}s): stopping the query")  # fmt: skip
        log.warning("%s: %s: rolling back and fetching them again", self.where(), what)
        self.connect(self.floor)
        self.refetched = True
        self._held = (None, -1)

    def offset(self, end: _Queued) -> dict[str, Any]:
        """The offset of a micro-batch ending on ``end`` (a queued entry). When the next entry may
        share its position (nothing after it is queued, or it is at the same position), the
        offset says how many rows were numbered at that position, for the next batch to go on."""
        entries = self.entries
        i = bisect.bisect_left(entries, end.key, key=lambda e: e.key)
        after = entries[i + 1] if i + 1 < len(entries) else None
        if end.boundary or (after is not None and (after.pos, after.file) != (end.pos, end.file)):
            return _to_offset(end)
        floor = self.floor
        row = floor.row or 0 if floor.key[:3] == end.key[:3] else 0
        j = i
        while j >= 0 and (entries[j].pos, entries[j].file) == (end.pos, end.file):
            row += entry_row_count(pb.Entry.FromString(entries[j].raw), self.accepts)
            j -= 1
        return _to_offset(end, row)

    def plan(self) -> tuple[_Queued | None, bool]:
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

    def take(self, start: _Offset, end: _Offset) -> list[_Queued]:
        """The entries in (start, end], fetching them again when this runner does not have them."""
        self.sync(start)
        with self.cond:
            reached = lambda: bool(self.entries) and self.entries[-1].key >= end.key  # noqa: E731
            if not self._wait(reached, self.opts.timeout):
                got = _show(self.entries[-1].key) if self.entries else "nothing after the start"
                raise RuntimeError(
                    f"{self.where()}: micro-batch ({_show(start.key)}, {_show(end.key)}] cannot be read "
                    f"again: the server handed out up to {got} within {self.opts.timeout:g}s "
                    "(was the server's cursor moved, or its binlog purged?)"
                )
            n = 0
            while self.entries[n].key < end.key:
                n += 1
            last = self.entries[n]
            if last.key != end.key or (last.gtid, last.txn) != (end.gtid, end.txn):
                raise RuntimeError(
                    f"{self.where()}: micro-batch ({_show(start.key)}, {_show(end.key)}] does not match the "
                    f"server's stream: its entry there is {_show(last.key)} gtid={last.gtid} txn={last.txn}"
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


def _split(entries: list[_Queued], parts: int) -> list[int]:
    """Indexes where parts 2.. start: position changes, about equal bytes per part."""
    sizes = [len(e.raw) for e in entries]
    total = sum(sizes)
    parts = max(1, min(parts, total // _MIN_PART_BYTES))
    cuts: list[int] = []
    done = 0
    for i in range(1, len(entries)):
        done += sizes[i - 1]
        if len(cuts) + 1 >= parts:
            break
        prev, e = entries[i - 1], entries[i]
        if done >= total * (len(cuts) + 1) / parts and (e.pos != prev.pos or e.file != prev.file):
            cuts.append(i)
    return cuts


class CanalStreamReader(DataSourceStreamReader):
    """See the module docstring. The connection is made on first use, in the runner process only:
    the instances Spark pickles for ``read`` carry the options alone."""

    def __init__(self, options: Any) -> None:
        self.opts = _options(options)
        self.accepts = TableFilter(self.opts.filter) if self.opts.filter else None
        self._feed: _Feed | None = None
        self._planner: SnapshotPlanner | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "accepts": self.accepts, "_feed": None, "_planner": None}

    def _runner(self) -> _Feed:
        if self._feed is None:
            self._feed = _Feed(self.opts)
        return self._feed

    def _offset(self, offset: Any) -> _Offset:
        return _parse_offset(offset, self.opts.destination)

    def initialOffset(self) -> dict[str, Any]:
        return dict(INITIAL_OFFSET)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if not isinstance(limit, ReadAllAvailable):
            raise ValueError(
                f"format('canal') supports no read limit but its batchSize and batchBytes, got {limit!r}"
            )
        if self.opts.snapshot is not None:
            step = snapshot_step(self.opts.snapshot, self._snapshot_planner(), start)
            if step is not None:
                return step  # tables declared: nothing of the stream in this micro-batch
        feed = self._runner()
        feed.sync(self._offset(start))
        end, idle = feed.plan()
        feed.watch(end is not None or idle)
        if end is not None:
            out = feed.offset(end)
        elif idle:
            # Only Spark's commit of the last batch can free the server now, and Spark commits it
            # when it plans the next one: an empty micro-batch (the same position, a new tick).
            out = {**start, "tick": int(start.get("tick", 0)) + 1}
        else:
            out = dict(start)
        if self.opts.snapshot is not None:
            out["snap"] = snap_after(self._snapshot_planner(), start)
        return out

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """For Spark's progress (``sources[].latestOffset``): the last entry received, how many
        are queued and for how long the runner has held entries it planned nothing from
        (``stuck``, seconds: the job's progress line names a stall)."""
        feed = self._feed
        if feed is None:
            return None
        with feed.cond:
            tail = feed.entries[-1] if feed.entries else None
            out = _to_offset(tail) if tail is not None else {}
            out.update(queued=len(feed.entries), stuck=round(feed.stuck(), 1))
        return out

    def _snapshot_planner(self) -> SnapshotPlanner:
        if self._planner is None:
            assert self.opts.snapshot is not None
            self._planner = SnapshotPlanner(self.opts.snapshot, self.accepts)
        return self._planner

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[CanalPartition]:
        first, last = self._offset(start), self._offset(end)
        if last.key <= first.key:
            return snapshot_partitions(start, end, 0)
        entries = self._runner().take(first, last)
        bounds = [0, *_split(entries, self.opts.num_partitions), len(entries)]
        # A batch that starts inside an event's entries numbers its rows on from the last one's.
        resume = (start["file"], start["pos"], first.row) if first.row is not None else None
        out = []
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
            gtid = entries[a - 1].gtid if a else first.gtid
            out.append(
                CanalPartition(i, [e.raw for e in entries[a:b] if e.read], gtid, None if a else resume)
            )
        return out + snapshot_partitions(start, end, len(out))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, SnapshotPartition):
            assert self.opts.snapshot is not None
            yield from read_snapshot_partition(self.opts.snapshot, partition, self.opts.stage)
        else:
            assert isinstance(partition, CanalPartition)
            rows = EntryRows(
                accepts=self.accepts,
                timezone=self.opts.timezone,
                gtid=partition.gtid,
                resume=partition.resume,
            )
            batches = rows.batches(partition.entries, _BATCH_ROWS)
            if self.opts.stage is None:
                yield from batches
            elif (staged := stage_rows(self.opts.stage, batches)) is not None:
                yield staged
        settle()  # PySpark's daemon runs a full collection after every task

    def commit(self, end: dict[str, Any]) -> None:
        if self._feed is not None and self._feed.connected:
            self._feed.ack(self._offset(end).key)
        if self.opts.snapshot is not None:
            commit_signals(self.opts.snapshot, end)

    def stop(self) -> None:
        """Disconnect. Spark may end the runner without calling this: its exit closes the
        socket just the same, and the next runner's connect rolls back what was not acked."""
        if self._feed is not None:
            self._feed.close()
        if self._planner is not None:
            self._planner.close()


class CanalDataSource(DataSource):
    """The ``canal`` streaming source (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "canal"

    def schema(self) -> str:
        return ROW_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CanalStreamReader(self.options)
