"""The change log: every change row, in an append-only Delta table partitioned by day and
clustered by table.

``<target>/changelog`` is a Delta table (protocol 1/2, ``delta.appendOnly``) that every Delta
reader reads: ``spark.read.format("delta")``, ``readStream.format("delta")``, delta-rs, DuckDB.
Its columns are ``table_name`` (``database.table``, or the database of a database statement;
first, so that every reader keeps statistics of it), the change row (``rows.ARROW_SCHEMA``) and
``batch_id``; its partition column is ``date``, the UTC day of ``ts``.

A micro-batch is one data file per day it spans, ``date=<day>/batch-<batch>.parquet``, appended by
one log entry that carries the Delta transaction id ``(APP_ID, batch)``: the batch is in the change
log exactly when the log's latest version of ``APP_ID`` is at least its id, so a replay of a
committed batch is a no-op and a replay of one that crashed before its entry writes the same file
again. One file a batch, not one a table: at 200 tables, a micro-batch of 5,000 rows written as a
file per table took 90 ms of CPU with delta-rs against 1.6 ms for one file (docs/spark.md).
A snapshot chunk's rows are written by the executor that read them, as a file of their own that
no entry names yet (``write_unnamed``: ``date=<day>/batch-<batch>-<id>.parquet``), and the batch's
entry adds it beside the batch's file (``write``'s ``files``): the driver no longer encodes them.
A fold leaves such a file as it is (one table's rows in position order already). A batch that
never committed leaves such files unnamed; ``clear_unnamed`` deletes them.

``fold`` (the applier runs it every ``Maintenance.fold_every`` applied batches) clusters the
table: the batch files of a day are rewritten into one file per table,
``date=<day>/part-<first>-<last>-<level>-<id>.parquet`` (rows in position order), and when a
table's day ends in ``fanout`` files of one level whose total is under ``target_bytes``, they are
merged into one of the next level, so each row is rewritten a few times at most. A fold is one
commit of removes and adds with ``dataChange: false`` (an ``OPTIMIZE``: a stream reader skips it);
if another writer removed one of its inputs meanwhile (Spark's ``OPTIMIZE``), it gives up and
deletes what it wrote. A reader of one table's day (``WHERE table_name = ... AND date = ...``)
prunes the other days by partition and the other tables' files by their statistics.

Checkpoints come every ``checkpoint_every`` commits (``delta.checkpoint``); they delete the files
removed longer ago than ``delta.deletedFileRetentionDuration`` and the log entries older than
``delta.logRetentionDuration``, so time travel works within the retention.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, Transaction, write_deltalake
from deltalake.transaction import AddAction, RemoveAction

from pycanal import __version__
from pycanal.common.files import clear_temporaries, write_atomically
from pycanal.storage import LakePath, lake_path

from .arrow import arange
from .delta.checkpoint import from_log
from .delta.commit import commit
from .delta.log import LogState
from .delta.rs import delta_table, is_delta_table, storage
from .rows import ARROW_SCHEMA

__all__ = [
    "APP_ID",
    "CHANGELOG_SCHEMA",
    "ChangeLog",
    "ChangeLogError",
    "batch_ids",
    "last_change_times",
    "write_unnamed",
]

APP_ID = "pycanal-changelog"
# The data files' columns; the table's add the partition column ``date``.
CHANGELOG_SCHEMA = pa.schema(
    [pa.field("table_name", pa.string()), *ARROW_SCHEMA, pa.field("batch_id", pa.int64())]
)
_TABLE_SCHEMA = CHANGELOG_SCHEMA.append(pa.field("date", pa.date32()))
_ENGINE = f"pycanal-{__version__}"
log = logging.getLogger(__name__)
_PART = re.compile(r"date=([0-9-]+)/part-(\d{20})-(\d{20})-(\d+)-[0-9a-f]+\.parquet")
_BATCH = re.compile(r"date=([0-9-]+)/batch-(\d{20})(-[0-9a-f]{32})?\.parquet")
# What the writer keeps exact statistics of: the cluster key, and what readers select batches by.
_BOUNDED = ("table_name", "op", "batch_id")
# Writer features whose rules this writer keeps (an invariant on a column it refuses itself).
_WRITER_FEATURES = {"appendOnly", "invariants"}


class ChangeLogError(ValueError):
    """The change log cannot be written as it is (a table feature, a column, another writer)."""


def batch_ids(directory: LakePath) -> list[int]:
    """The batch ids of a directory of ``<batch>.json`` records, in order (none if it is absent)."""
    return sorted(int(n[:-5]) for n in directory.listdir() if n.endswith(".json") and n[:-5].isdigit())


def _table_names(rows: pa.Table) -> pa.Array:
    """``database.table`` per change row; the database alone for a database statement; null
    where there is neither."""
    database, table = rows.column("database"), rows.column("table")
    dotted = pc.binary_join_element_wise(pc.fill_null(database, ""), table, ".")
    name = pc.if_else(pc.is_valid(table), dotted, database)
    return pc.if_else(
        pc.equal(pc.fill_null(name, ""), ""), pa.scalar(None, pa.string()), name
    ).combine_chunks()


_writers: dict[int, ThreadPoolExecutor] = {}


def _writer() -> ThreadPoolExecutor:
    """The process's change-log writer: one thread, so a batch's files are written while its
    MERGEs run, and a replay in the same process writes its files after an earlier attempt's
    (same names). Per process id: a forked child does not have its parent's thread."""
    pid = os.getpid()
    if pid not in _writers:
        _writers[pid] = ThreadPoolExecutor(1, thread_name_prefix="pycanal-changelog")
    return _writers[pid]


def _stats(data: pa.Table) -> str:
    """A data file's Delta statistics: rows, null counts of the flat columns, bounds of ``_BOUNDED``."""
    lows, highs, nulls = {}, {}, {}
    for name in CHANGELOG_SCHEMA.names:
        column = data.column(name)
        if pa.types.is_struct(column.type):
            continue
        nulls[name] = column.null_count
        if name in _BOUNDED and column.null_count < len(column):
            lows[name], highs[name] = (v.as_py() for v in pc.min_max(column).values())
    stats = {"numRecords": data.num_rows, "minValues": lows, "maxValues": highs, "nullCount": nulls}
    return json.dumps(stats, separators=(",", ":"), ensure_ascii=False)


def _write_parquet(path: LakePath, table: pa.Table) -> int:
    """Write ``table`` to ``path`` whole (a replay writes the same names: on a local disk what an
    attempt cut short left of it is removed first, and the file is synced); returns its size."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")  # faster than snappy here, and half the size
    data = memoryview(sink.getvalue())
    if path.is_local:
        clear_temporaries(path.local)
        write_atomically(path.local, data)
    else:
        path.write_bytes(data)
    return data.nbytes


def _days(rows: pa.Table) -> list[tuple[str, pa.Table]]:
    """(UTC day, its rows in order) of change rows."""
    days = pc.cast(rows.column("ts"), pa.date32())
    low, high = pc.min_max(days).values()
    if low == high:
        return [(f"{low.as_py():%Y-%m-%d}", rows)]
    return [(f"{d:%Y-%m-%d}", rows.filter(pc.equal(days, d))) for d in pc.unique(days).to_pylist()]


def _log_table(rows: pa.Table, batch_id: int) -> pa.Table:
    """Change rows as the change log's data files hold them."""
    return pa.Table.from_arrays(
        [_table_names(rows), *rows.select(ARROW_SCHEMA.names).columns,
         pa.repeat(pa.scalar(batch_id, pa.int64()), rows.num_rows)],
        schema=CHANGELOG_SCHEMA,
    )  # fmt: skip


def write_unnamed(
    target_dir: str | LakePath, rows: pa.Table, batch_id: int, order: int = 0
) -> dict[str, Any] | None:
    """Write change rows of micro-batch ``batch_id`` (``ARROW_SCHEMA``, in position order, one UTC
    day) as a data file of the change log of the lake ``target_dir`` that no log entry names yet:
    what ``ChangeLog.write`` takes as one of the batch's ``files`` (an executor's part of the batch:
    ``path`` under the change log, ``date``, ``size``, ``stats``, ``batch``). None without rows, or
    for rows of several days. ``order``: the partition's place in the micro-batch, first in the
    file's name: a batch's files are read back in name order, so rows at one position (chunks of
    several tables read at one binlog position) come back in the order the applier had them
    first, the order its current-state steps follow when it applies the batch again."""
    if not rows.num_rows:
        return None
    days = _days(rows)
    if len(days) != 1:
        return None
    day = days[0][0]
    rel = f"date={day}/batch-{batch_id:020d}-{order:08x}{uuid.uuid4().hex[:24]}.parquet"
    data = _log_table(rows, batch_id)
    size = _write_parquet(lake_path(target_dir) / "changelog" / rel, data)
    return {"path": rel, "date": day, "size": size, "stats": _stats(data), "batch": batch_id}


def _add(rel: str, day: str, size: int, stats: str, now: int, data_change: bool) -> dict[str, Any]:
    return {"add": {"path": rel, "partitionValues": {"date": day}, "size": size, "modificationTime": now,
                    "dataChange": data_change, "stats": stats}}  # fmt: skip


class ChangeLog:
    """The change log of the lake ``target_dir`` (module docstring): its writer and readers.
    ``properties``: the table's properties where the writer creates it (retentions);
    ``checkpoint_every``: commits between checkpoints. Thread-safe."""

    def __init__(
        self,
        target_dir: str | Path | LakePath,
        *,
        properties: dict[str, str] | None = None,
        checkpoint_every: int = 50,
    ) -> None:
        self.dir = lake_path(target_dir) / "changelog"
        self.log_dir = self.dir / "_delta_log"
        self.properties = properties or {}
        self.checkpoint_every = checkpoint_every
        self._lock = threading.Lock()
        self._state: LogState | None = None
        self._written: Future[list[dict[str, Any]]] | None = None

    # ------------------------------------------------------------------ the log
    def state(self) -> LogState:
        """The table's log as it is now (replayed from where this reader was); an empty state
        where there is no table yet. ChangeLogError where the table has a feature this writer
        does not keep."""
        with self._lock:
            return self._replayed().copy()

    def _replayed(self) -> LogState:
        if self._state is None or self._state.version < 0:
            if not self.log_dir.exists():
                return LogState()
            self._state = LogState.at_checkpoint(self.log_dir) or LogState()
        self._state.replay(self.log_dir)
        return self._state

    def _create(self) -> None:
        """Create the table where there is none (a writer's first step)."""
        if self.log_dir.exists():
            return
        if any((self.dir / old).exists() for old in ("_pycanal_commits", "_pycanal_manifest")):
            raise ChangeLogError(
                f"{self.dir}: a change log of pycanal before 2026-11-28 (Parquet files and commit markers, "
                "not a Delta table): start this pipeline on a new lake, or move that change log away"
            )
        configuration = {"delta.appendOnly": "true", **self.properties}
        try:
            write_deltalake(**storage(self.dir), data=_TABLE_SCHEMA.empty_table(), mode="error",
                            partition_by=["date"], name="changelog", configuration=configuration)  # fmt: skip
        except Exception:  # noqa: BLE001 - created meanwhile by another writer: fine if it is there
            if not is_delta_table(self.dir):
                raise
        delta_table(self.dir).create_checkpoint()  # every later checkpoint is made from it

    def _check(self, state: LogState) -> None:
        """Refuse a table this writer would write wrong: a protocol feature it does not keep, or an
        invariant on a column."""
        protocol = state.protocol or {}
        writers = set(protocol.get("writerFeatures") or [])
        version = protocol.get("minWriterVersion", 2)
        if version > 2 and not (version == 7 and writers <= _WRITER_FEATURES):
            raise ChangeLogError(
                f"{self.dir}: writer version {version} with table features {sorted(writers)}: pycanal "
                "writes the change log only with protocol features it keeps (appendOnly, invariants)"
            )
        if protocol.get("minReaderVersion", 1) > 1 and (protocol.get("readerFeatures") or []):
            raise ChangeLogError(
                f"{self.dir}: reader features {sorted(protocol['readerFeatures'])} are not ones pycanal writes"
            )
        schema = (state.metadata or {}).get("schemaString")
        if schema and '"delta.invariants"' in schema:
            raise ChangeLogError(f"{self.dir}: a column has a delta.invariants rule pycanal does not check")

    def _commit(self, actions: list[dict[str, Any]], conflict: Any = None) -> int | None:
        """Create the next log entry with ``actions``, after the entries other writers made
        meanwhile; ``conflict(state)`` says whether those make the commit void (None returned then)."""
        with self._lock:
            state = self._replayed()
            while True:
                self._check(state)
                if conflict is not None and conflict(state):
                    return None
                version = state.version + 1
                try:
                    created = commit(self.log_dir, version, actions)
                except OSError as exc:  # no hard links here (some network and FUSE filesystems)
                    if not self.log_dir.is_local:
                        raise
                    log.info("%s: %s; committing through delta-rs", self.log_dir, exc.strerror or exc)
                    self._commit_by_delta_rs(actions)
                    state.replay(self.log_dir)
                    version = state.version
                    break
                if created:
                    state.version = version
                    state.apply([next(iter(a.items())) for a in actions])
                    break
                state.replay(self.log_dir)
            live = set(state.live)
        if self.checkpoint_every and version % self.checkpoint_every == 0:
            # Made from the last one where the entries since are plain, else by delta-rs.
            try:
                made = from_log(self.log_dir, version, {unquote(p) for p in live})
            except OSError:  # no hard links for its file
                if not self.log_dir.is_local:
                    raise
                made = False
            if not made:
                delta_table(self.dir, version).create_checkpoint()
        return version

    def _commit_by_delta_rs(self, actions: list[dict[str, Any]]) -> None:
        """The same commit through delta-rs' log store (its own put-if-absent, without links)."""
        adds = [AddAction(a["path"], a["size"], a["partitionValues"], a["modificationTime"], a["dataChange"],
                          a["stats"]) for a in (x["add"] for x in actions if "add" in x)]  # fmt: skip
        removes = [RemoveAction(r["path"], r["dataChange"], r["deletionTimestamp"], r["size"], r["partitionValues"])
                   for r in (x["remove"] for x in actions if "remove" in x)]  # fmt: skip
        txns = [
            Transaction(t["appId"], t["version"], t["lastUpdated"])
            for t in (x["txn"] for x in actions if "txn" in x)
        ]
        dt = delta_table(self.dir)
        dt.create_write_transaction([*removes, *adds], "append", dt.schema(), ["date"],
                                    commit_properties=CommitProperties(app_transactions=txns))  # fmt: skip

    # ------------------------------------------------------------------ the writer
    def committed(self, batch_id: int) -> bool:
        last = self.last_batch()
        return last is not None and last >= batch_id

    def last_batch(self) -> int | None:
        """The last micro-batch committed (None: none)."""
        with self._lock:  # read in place: a micro-batch asks, no copy of the live files needed
            txn = self._replayed().txns.get(APP_ID)
        return None if txn is None else int(txn["version"])

    def write(self, rows: pa.Table, batch_id: int, files: Sequence[dict[str, Any]] = ()) -> None:
        """Start writing the batch's change rows (``ARROW_SCHEMA``, in position order) into its
        files, in the background; ``commit`` waits for them and adds ``files`` (the batch's rows
        written by executors, ``write_unnamed``) too."""
        self._create()
        data = _log_table(rows, batch_id)

        def write() -> list[dict[str, Any]]:
            now = int(time.time() * 1000)
            adds = [_add(f["path"], f["date"], f["size"], f["stats"], now, True) for f in files]
            if data.num_rows:
                for day, part in _days(data):
                    rel = f"date={day}/batch-{batch_id:020d}.parquet"
                    adds.append(_add(rel, day, _write_parquet(self.dir / rel, part), _stats(part), now, True))
            return adds

        self._written = _writer().submit(write)

    def commit(self, batch_id: int) -> None:
        """Commit the batch ``write`` started (its files durable first) with its transaction id."""
        adds = self._written.result() if self._written is not None else []
        self._written = None
        now = int(time.time() * 1000)
        info = {"timestamp": now, "operation": "STREAMING UPDATE", "engineInfo": _ENGINE,
                "operationParameters": {"outputMode": "Append", "queryId": APP_ID, "epochId": str(batch_id)},
                "isBlindAppend": True}  # fmt: skip
        txn = {"txn": {"appId": APP_ID, "version": batch_id, "lastUpdated": now}}

        def done(state: LogState) -> bool:  # another writer committed this batch meanwhile
            return int(state.txns.get(APP_ID, {}).get("version", -1)) >= batch_id

        self._commit([{"commitInfo": info}, txn, *adds], done)

    def clear_unnamed(self) -> int:
        """Delete the executors' files (``write_unnamed``) of batches after the last committed one:
        batches that never committed (a replay writes new ones). How many. Files of committed
        batches that no entry names are left: a removed file may be kept for time travel. Only
        the days from the day before the latest committed one are listed (a chunk's rows are
        dated when they are read, after every commit before them): one listing a day on S3."""
        state = self.state()
        txn = state.txns.get(APP_ID)
        last = -1 if txn is None else int(txn["version"])
        days = [_entry_form(a)["partitionValues"].get("date") for a in state.live.values()]
        latest = max((d for d in days if d), default=None)
        floor = "" if latest is None else f"date={dt.date.fromisoformat(latest) - dt.timedelta(days=1)}"
        n = 0
        for day in (d for d in self.dir.listdir() if d.startswith("date=") and d >= floor):
            for name in (self.dir / day).listdir():
                m = _BATCH.fullmatch(f"{day}/{name}")
                if m is not None and m.group(3) and int(m.group(2)) > last:
                    (self.dir / day / name).unlink()
                    n += 1
        return n

    # ------------------------------------------------------------------ readers
    def _files(self, state: LogState) -> list[tuple[str, dict[str, Any]]]:
        """(relative path, add) of the live files, the earliest batches first (partition values
        as a dict, as a log entry has them; a checkpoint's are pairs)."""
        files = [(unquote(p), _entry_form(a)) for p, a in state.live.items()]
        return sorted(files, key=lambda f: (_bounds(f[1]), f[0]))  # a batch's files by name (write_unnamed)

    def files(self) -> list[LakePath]:
        """The live data files, the earliest batches first."""
        return [self.dir / rel for rel, _ in self._files(self.state())]

    def rows(self) -> int:
        """The number of committed change rows."""
        return sum(_num_records(a) for a in self.state().live.values())

    def read(self, after: int = -1, through: int | None = None) -> pa.Table:
        """The committed change rows of the batches after ``after`` (up to ``through``), by batch
        and position (``CHANGELOG_SCHEMA`` and ``date``); only the files that may hold them are read."""
        parts = []
        for rel, add in self._files(self.state()):
            low, high = _bounds(add)
            if high <= after or (through is not None and low > through):
                continue
            data = pq.ParquetFile((self.dir / rel).input_file()).read()
            # Columns another writer added are not the change log's; its files lack none of ours.
            data = data.select(CHANGELOG_SCHEMA.names).cast(CHANGELOG_SCHEMA)
            day = pa.scalar(dt.date.fromisoformat(add["partitionValues"]["date"]), pa.date32())
            data = data.append_column("date", pa.repeat(day, data.num_rows))
            keep = pc.greater(data["batch_id"], after)
            if through is not None:
                keep = pc.and_(keep, pc.less_equal(data["batch_id"], through))
            parts.append(data.filter(keep))
        if not parts:
            return _TABLE_SCHEMA.empty_table()
        table = pa.concat_tables(parts)
        pos = table.column("position").combine_chunks()
        keys = pa.table(
            {"b": table["batch_id"], "f": pos.field("file"), "o": pos.field("offset"), "r": pos.field("row")}
        )
        order = pc.sort_indices(keys, [(k, "ascending") for k in "bfor"])
        return table.take(order)

    def batches(self, after: int) -> list[int]:
        """The committed micro-batches after ``after``, in order."""
        state = self.state()
        ids: set[int] = set()
        for rel, add in self._files(state):
            low, high = _bounds(add)
            if high <= after:
                continue
            if (m := _BATCH.fullmatch(rel)) is not None:
                ids.add(int(m.group(2)))
            else:
                ids.update(
                    pq.read_table((self.dir / rel).input_file(), columns=["batch_id"])
                    .column("batch_id")
                    .unique()
                    .to_pylist()
                )
        return sorted(b for b in ids if b > after)

    def read_batch(self, batch_id: int) -> pa.Table:
        """A committed batch's change rows (``ARROW_SCHEMA``), in position order."""
        return self.read(batch_id - 1, batch_id).select(ARROW_SCHEMA.names)

    # ------------------------------------------------------------------ folding
    def _part(self, day: str, first: int, last: int, level: int, rows: pa.Table, now: int) -> dict[str, Any]:
        """Write one table's rows of batches ``first``..``last`` of ``day`` at ``level``: its ``add``."""
        rel = f"date={day}/part-{first:020d}-{last:020d}-{level}-{uuid.uuid4().hex[:12]}.parquet"
        return _add(rel, day, _write_parquet(self.dir / rel, rows), _stats(rows), now, False)

    def folded_through(self) -> int:
        """The last micro-batch folded into tables' files (-1: none)."""
        ends = [int(m.group(3)) for p in self.state().live if (m := _PART.fullmatch(unquote(p)))]
        return max(ends, default=-1)

    def fold(self, upto: int, *, fanout: int = 10, target_bytes: int = 128 << 20) -> dict[str, int] | None:
        """Cluster the batches up to ``upto`` by table (module docstring); what it did (None:
        nothing to fold, or another writer removed an input meanwhile). One fold at a time."""
        if fanout < 2:
            raise ValueError(f"fold fanout must be at least 2, not {fanout}")
        state = self.state()
        files = self._files(state)
        batches: dict[str, list[str]] = {}
        for rel, _ in files:
            m = _BATCH.fullmatch(rel)
            if m is not None and not m.group(3) and int(m.group(2)) <= upto:  # executors' files: one table's
                batches.setdefault(m.group(1), []).append(rel)
        if not batches:
            return None
        parts: dict[tuple[str, str | None], list[tuple[int, int, int, int, str]]] = {}
        for rel, add in files:
            if (m := _PART.fullmatch(rel)) is not None:
                key = (m.group(1), _stats_of(add).get("minValues", {}).get("table_name"))
                parts.setdefault(key, []).append(
                    (int(m.group(2)), int(m.group(3)), int(m.group(4)), add["size"], rel)
                )
        removes: list[str] = []  # relative paths
        adds: list[dict[str, Any]] = []
        now = int(time.time() * 1000)
        rows = 0
        try:
            for day, rels in sorted(batches.items()):
                data = pa.concat_tables(
                    [pq.read_table((self.dir / r).input_file()).select(CHANGELOG_SCHEMA.names) for r in rels]
                )
                rows += data.num_rows
                lo, hi = _BATCH.fullmatch(rels[0]).group(2), _BATCH.fullmatch(rels[-1]).group(2)
                removes += rels
                for name, idx in _by_table(data):
                    adds.append(self._part(day, int(lo), int(hi), 1, data.take(idx), now))
                    entries = parts.setdefault((day, name), [])
                    entries.append((int(lo), int(hi), 1, adds[-1]["add"]["size"], adds[-1]["add"]["path"]))
                    entries.sort()
                    while len(entries) >= fanout:
                        run, level = entries[-fanout:], entries[-1][2]
                        if any(e[2] != level for e in run) or sum(e[3] for e in run) >= target_bytes:
                            break
                        merged = pa.concat_tables(
                            [
                                pq.read_table((self.dir / e[4]).input_file()).select(CHANGELOG_SCHEMA.names)
                                for e in run
                            ]
                        )
                        adds.append(self._part(day, run[0][0], run[-1][1], level + 1, merged, now))
                        rel = adds[-1]["add"]["path"]
                        mine = {a["add"]["path"] for a in adds}
                        for e in run:
                            if e[4] in mine:  # written by this fold: never committed, gone now
                                adds = [a for a in adds if a["add"]["path"] != e[4]]
                                (self.dir / e[4]).unlink()
                            else:
                                removes.append(e[4])
                        entries[-fanout:] = [(run[0][0], run[-1][1], level + 1, adds[-1]["add"]["size"], rel)]
        except BaseException:
            for a in adds:
                (self.dir / a["add"]["path"]).unlink()
            raise
        info = {"timestamp": now, "operation": "OPTIMIZE", "engineInfo": _ENGINE, "readVersion": state.version,
                "operationParameters": {"predicate": "[]", "zOrderBy": '["table_name"]', "auto": "true"}}  # fmt: skip
        actions = [{"commitInfo": info}]
        live = dict(files)
        actions += [{"remove": {"path": live[r]["path"], "deletionTimestamp": now, "dataChange": False,
                                "extendedFileMetadata": True, "partitionValues": live[r]["partitionValues"],
                                "size": live[r]["size"]}} for r in removes]  # fmt: skip
        actions += adds

        def lost(latest: LogState) -> bool:  # an input removed by another writer meanwhile
            return any(live[r]["path"] not in latest.live for r in removes)

        if self._commit(actions, lost) is None:
            for a in adds:
                (self.dir / a["add"]["path"]).unlink()
            return None
        folded = {int(_BATCH.fullmatch(r).group(2)) for rels in batches.values() for r in rels}
        return {"through": max(folded), "batches": len(folded), "rows": rows, "written": len(adds),
                "retired": len(removes)}  # fmt: skip


def _entry_form(add: dict[str, Any]) -> dict[str, Any]:
    values = add.get("partitionValues")
    return add if isinstance(values, dict) else {**add, "partitionValues": dict(values or [])}


def _stats_of(add: dict[str, Any]) -> dict[str, Any]:
    return json.loads(add["stats"]) if add.get("stats") else {}


def _num_records(add: dict[str, Any]) -> int:
    return int(_stats_of(add)["numRecords"])


def _bounds(add: dict[str, Any]) -> tuple[int, int]:
    """The first and last batch of a live file (all of them where its statistics do not say)."""
    stats = _stats_of(add)
    low, high = stats.get("minValues", {}).get("batch_id"), stats.get("maxValues", {}).get("batch_id")
    return (-1 if low is None else int(low), 1 << 62 if high is None else int(high))


def _by_table(rows: pa.Table) -> list[tuple[str | None, pa.Array]]:
    """(table_name, its rows' indices in order), by name."""
    keys = pa.table({"t": rows.column("table_name"), "row": arange(rows.num_rows)})
    groups = keys.group_by(["t"], use_threads=False).aggregate([("row", "list")])  # in order
    out = sorted(
        zip(groups["t"].to_pylist(), groups["row_list"], strict=True),
        key=lambda g: (g[0] is None, g[0] or ""),
    )
    return [(name, idx.values) for name, idx in out]


def last_change_times(rows: pa.Table) -> dict[str, float]:
    """Per ``database.table`` in ``rows`` (change rows): the source's commit time (epoch s) of
    its last change."""
    ts = pc.cast(rows.column("ts"), pa.int64())
    per = pa.table({"d": rows.column("database"), "t": rows.column("table"), "ts": ts})
    per = per.filter(pc.is_valid(per["t"])).group_by(["d", "t"], use_threads=False).aggregate([("ts", "max")])
    return {
        f"{d}.{t}": v / 1e6
        for d, t, v in zip(*(per[c].to_pylist() for c in ("d", "t", "ts_max")), strict=True)
        if v is not None
    }
