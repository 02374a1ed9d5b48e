"""``format("canal")``: an exactly-once streaming Spark source reading a pycanal (or Canal) server.

    from pycanal.spark import register
    register(spark)
    changes = (spark.readStream.format("canal")
               .option("address", "127.0.0.1:11111").option("destination", "example")
               .option("filter", "shop\\..*")
               .load())

Rows have ``pycanal.spark.row_schema.ROW_SCHEMA``. Options: ``address`` (host:port) or ``zkServers``
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
  with ``get_without_ack`` (a pump thread keeps fetching while Spark runs a micro-batch:
  ``canal_feed.Feed``). An
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
  A watchdog makes any other stall loud (``canal_feed.Feed.watch``; docs/spark.md).
"""

from __future__ import annotations

import array
import itertools
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

from pycanal.heap import settle
from pycanal.parse.filter import TableFilter

from .canal_options import canal_options
from .row_schema import ROW_SCHEMA

# The runner's modules (the connector, the entry queue) and the executors' (the entries' reader,
# the stage) are imported where they are used: Spark imports this module in a fresh Python
# process for each planning step of a query's start (the source's schema, the reader's pickled
# function), one after another.
if TYPE_CHECKING:
    from types import ModuleType

    import pyarrow as pa

    from .canal_feed import Feed, Offset, Queued
    from .snapshot import SnapshotPlanner

__all__ = ["CanalDataSource", "CanalPartition", "CanalStreamReader"]

_BATCH_ROWS = 8192  # rows per Arrow batch out of read()
_MIN_PART_BYTES = 32 * 1024  # smaller parts are not worth a task
# Before every position: the first batch starts at the server's cursor. ``batch``: the number
# of the micro-batch ending at an offset (``_numbered``).
INITIAL_OFFSET: dict[str, Any] = {"file": "", "pos": 0, "k": -1, "batch": -1}


def _numbered(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    """``end`` numbered as the micro-batch after ``start``'s, or ``start`` itself where it is the
    same offset (no micro-batch). Spark numbers micro-batches as their offsets come, from 0 at
    the initial offset, so the number is the batch id ``foreachBatch`` will get -- unless the
    query reads another source beside this one, which the applier sees and then writes the
    executors' change-log rows itself. A checkpoint without numbers stays without."""
    if "batch" not in start:
        return end
    if {k: v for k, v in end.items() if k != "batch"} == {k: v for k, v in start.items() if k != "batch"}:
        return start
    return {**end, "batch": int(start["batch"]) + 1}


def _feed_module() -> ModuleType:
    """:mod:`pycanal.spark.canal_feed`: the runner's."""
    from . import canal_feed

    return canal_feed


def _snapshot() -> ModuleType:
    """:mod:`pycanal.spark.snapshot`, imported by a query that snapshots only: with the snapshot's
    modules (connectorx, the lake's writers) this module took 0.27-0.33 s of CPU to import in a
    process with pyarrow and pyspark loaded (each Spark Python worker), 0.16 s without them."""
    from . import snapshot

    return snapshot


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
        import zstandard

        cobj = zstandard.ZstdCompressor(level=1).compressobj(size=size)
        head = cobj.compress(len(entries).to_bytes(4, "little") + sizes.tobytes())
        self.payload = b"".join([head, *map(cobj.compress, entries), cobj.flush()])
        self.gtid = gtid
        self.resume = resume

    @property
    def entries(self) -> list[memoryview]:
        """The entries, as views into one decompressed buffer (protobuf parses them as they are)."""
        import zstandard

        data = memoryview(zstandard.ZstdDecompressor().decompress(self.payload))
        n = int.from_bytes(data[:4], "little")
        sizes = array.array("I")
        sizes.frombytes(data[4 : 4 + 4 * n])
        if sys.byteorder == "big":
            sizes.byteswap()
        ends = itertools.accumulate(sizes, initial=4 + 4 * n)
        return [data[a:b] for a, b in itertools.pairwise(ends)]


def _split(entries: list[Queued], parts: int) -> list[int]:
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
        self.opts = canal_options(options)
        self.accepts = TableFilter(self.opts.filter) if self.opts.filter else None
        self._feed: Feed | None = None
        self._planner: SnapshotPlanner | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "accepts": self.accepts, "_feed": None, "_planner": None}

    def _runner(self) -> Feed:
        if self._feed is None:
            self._feed = _feed_module().Feed(self.opts)
        return self._feed

    def _offset(self, offset: Any) -> Offset:
        return _feed_module().parse_offset(offset, self.opts.destination)

    def initialOffset(self) -> dict[str, Any]:
        return dict(INITIAL_OFFSET)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if not isinstance(limit, ReadAllAvailable):
            raise ValueError(
                f"format('canal') supports no read limit but its batchSize and batchBytes, got {limit!r}"
            )
        if self.opts.snapshot is not None:
            step = _snapshot().snapshot_step(self.opts.snapshot, self._snapshot_planner(), start)
            if step is not None:
                return _numbered(start, step)  # tables declared: nothing of the stream in this micro-batch
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
            out["snap"] = _snapshot().snap_after(self._snapshot_planner(), start)
        return _numbered(start, out)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """For Spark's progress (``sources[].latestOffset``): the last entry received, how many
        are queued and for how long the runner has held entries it planned nothing from
        (``stuck``, seconds: the job's progress line names a stall)."""
        feed = self._feed
        if feed is None:
            return None
        with feed.cond:
            tail = feed.entries[-1] if feed.entries else None
            out = _feed_module().to_offset(tail) if tail is not None else {}
            out.update(queued=len(feed.entries), stuck=round(feed.stuck(), 1))
        return out

    def _snapshot_planner(self) -> SnapshotPlanner:
        if self._planner is None:
            assert self.opts.snapshot is not None
            self._planner = _snapshot().SnapshotPlanner(self.opts.snapshot, self.accepts)
        return self._planner

    def _snapshot_partitions(self, start: dict[str, Any], end: dict[str, Any], first: int) -> list[Any]:
        if self.opts.snapshot is not None:
            return _snapshot().snapshot_partitions(start, end, first)
        snap = end.get("snap")
        if isinstance(snap, dict) and snap != start.get("snap"):  # a checkpoint's batch, replayed
            raise ValueError(
                f"format('canal') destination {self.opts.destination}: the checkpoint's micro-batch "
                f"to {end.get('file')}:{end.get('pos')} reads snapshot chunks, but this query has no "
                "source option (the database its snapshot reads): start it with the options it was "
                "started with"
            )
        return []

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = self._offset(start), self._offset(end)
        if last.key <= first.key:
            return self._snapshot_partitions(start, end, 0)
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
        return out + self._snapshot_partitions(start, end, len(out))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CanalPartition):
            assert self.opts.snapshot is not None
            from .snapshot_read import read_snapshot_partition

            yield from read_snapshot_partition(self.opts.snapshot, partition, self.opts.stage)
        else:
            from .entry_rows import EntryRows
            from .stage import stage_rows

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
            _snapshot().commit_signals(self.opts.snapshot, end)

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
