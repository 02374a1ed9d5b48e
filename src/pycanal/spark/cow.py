"""A current-state Delta table written copy-on-write, its log entries written here.

A delta-rs MERGE costs ~15 ms of CPU whatever its size (DataFusion plans it, the commit reads
and refreshes the table state), so a micro-batch of 1-row transactions spread over 200 tables
cost ~4 s of driver CPU. ``KeyedTable`` keeps a table's live files in
memory (path, size, and the range of the key's first column where it is an integer or a text);
``write`` replaces the files whose key range can hold a changed key by new Parquet files (their
rows without the changed keys, plus the upserted rows; sorted by the range column and cut at
``file_bytes`` on disk, so that a table that grows keeps files of that size with disjoint ranges
and a write rewrites only the files its keys fall in, not the whole table) and commits the swap
as the table's next log entry, created only if that version does not exist yet
(``delta.commit``): ~3 ms. The entry carries the Delta transaction id a MERGE would (``txn``), so
exactly-once is unchanged, and readers (delta-rs, Spark) see an ordinary remove/add commit.
Files under ``_SMALL_ROWS`` rows
(a table's insert tail: new keys above every range make a file a write) are merged by the write
that finds ``_MAX_SMALL`` of them, not by a compaction that would rewrite the whole table.

With ``deletion_vectors``, a change to a file of ``_SMALL_ROWS`` rows or more commits a Delta
deletion vector for it (``delta.dv``: the positions of its replaced rows) instead of rewriting it: the
cost of a write no longer grows with the table (docs/spark.md). Files with vectors, whoever wrote
them, are read and rewritten with the vectors applied.

Tables whose protocol or properties ask more of a writer (a change data feed, CHECK constraints,
invariants, append-only: ``unsupported`` says which), and keys Arrow does not compare as SQL does
(floating point), are MERGEd by delta-rs instead; tables with features neither writes
(``refused``: column mapping, clustering, row tracking, ...) are not written.
Another writer's commit (upkeep, a user) makes the link fail: the state is read again and the
write redone. A filesystem without hard links sends the table to MERGE as well.
"""

from __future__ import annotations

import bisect
import json
import math
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, WriterProperties

from pycanal.storage import LakePath, lake_path

from .arrow import arange, in_range, take_in_blocks
from .delta import dv
from .delta.checkpoint import from_log
from .delta.commit import FileAction, commit, merge_actions, vectors_actions
from .delta.log import live_adds
from .delta.rs import delta_table
from .delta.tablestate import conform, has_vectors, read_rows

__all__ = [
    "CONTENTS",
    "WRITER_PROPERTIES",
    "ChunkFile",
    "Contents",
    "KeyedTable",
    "refused",
    "unsupported",
    "write_data_file",
]

# invariants/appendOnly: checked unused; deletionVectors: read and written here; variantType:
# delta-rs adds it to a version 7 table's protocol on any property change, and a current-state
# table has no VARIANT column (its columns are checked against the source's when it is opened)
_FEATURES = {"timestampNtz", "deletionVectors", "variantType"}
_WRITER_FEATURES = _FEATURES | {"appendOnly", "invariants"}
_READER_FEATURES = _FEATURES
# Commits lost in a row to other writers before giving up: delta-rs' default (max_commit_retries).
# Each retry reads the winners' entries and redoes the write; 3 was lost in CI to delta-rs appending
# and compacting one S3 table in a loop (tests/test_spark_s3.py).
_RETRIES = 15
# zstd, not snappy, for a current-state table's data files of 1 MiB of rows and up (and delta-rs'
# MERGE, compaction and DDL rewrites): text of some entropy writes 15-30% faster, reads 2.4x faster
# and takes 40% less disk. Smaller files stay snappy: zstd's fixed cost a column made a 1,000-row
# write of the lake bench's rows 50% dearer (docs/benchmarks.md, "The lake with many tables").
_ZSTD_FROM_BYTES = 1 << 20
WRITER_PROPERTIES = WriterProperties(compression="ZSTD")


# What delta-rs' MERGE (1.6) writes besides: tests/test_spark_tables_by_spark.py writes tables Spark
# created with each feature and reads them back with Spark's Delta. A column-mapped table's MERGEd
# rows read back with null keys; clustering, row tracking, type widening, column defaults and v2
# checkpoints it refuses to commit.
_MERGE_WRITER_FEATURES = _WRITER_FEATURES | {"changeDataFeed", "checkConstraints"}


def refused(dt: DeltaTable) -> str | None:
    """The table features of ``dt`` that no writer of pycanal's writes correctly (None: none)."""
    protocol = dt.protocol()
    if protocol.min_reader_version == 2 or protocol.min_writer_version in (5, 6):
        return "columnMapping" if protocol.min_writer_version != 6 else "identityColumns"
    if dt.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
        return "columnMapping"
    features = set(protocol.writer_features or []) - _MERGE_WRITER_FEATURES
    features |= set(protocol.reader_features or []) - _READER_FEATURES
    if any("delta.generationExpression" in (f.metadata or {}) for f in dt.schema().fields):
        features.add("generatedColumns")
    return ", ".join(sorted(features)) or None


def unsupported(dt: DeltaTable) -> str | None:
    """Why ``dt`` must not be written by ``KeyedTable`` (None: it may be)."""
    protocol = dt.protocol()
    features = set(protocol.writer_features or [])
    # CHECK constraints, a change data feed, generated or mapped columns: writer version 3 and up
    if protocol.min_writer_version > 2 and not (
        protocol.min_writer_version == 7 and features <= _WRITER_FEATURES
    ):
        return f"writer version {protocol.min_writer_version} with features {sorted(features)}"
    if not set(protocol.reader_features or []) <= _READER_FEATURES:
        return f"reader features {sorted(protocol.reader_features or [])}"
    if dt.metadata().configuration.get("delta.appendOnly", "false").lower() == "true":
        return "delta.appendOnly"
    for field in dt.schema().fields:
        if "delta.invariants" in (field.metadata or {}):
            return f"invariant on column {field.name}"
    return None


def _exact(t: pa.DataType) -> bool:
    """Whether Arrow's equality of values of ``t`` is the key equality (not so for -0.0 / 0.0)."""
    return not pa.types.is_floating(t) and (
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_temporal(t)
        or pa.types.is_decimal(t)
        or pa.types.is_boolean(t)
    )


def _integer(t: pa.DataType) -> bool:
    """Integer types whose Delta statistics are exact in any writer's log (Delta has no unsigned
    64-bit type)."""
    return pa.types.is_integer(t) and t != pa.uint64()


def _text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


# Data files written here; their bounds of a text key are exact (other writers may truncate them).
_PREFIX = "pycanal-"


@dataclass(frozen=True)
class _File:
    size: int
    low: int | None  # the range key's bounds, None where unknown
    high: int | None
    stats: str | None = None  # as committed (kept where a deletion vector is added to the file)
    vector: dict[str, Any] | None = None  # its deletion vector's descriptor
    rows: int | None = None  # rows in the file (those a vector hides too), None where unknown


@dataclass(frozen=True)
class ChunkFile:
    """A data file of the table that another process wrote (a snapshot chunk's, by the executor
    that read it: ``chunk_files``) and no log entry names yet: ``write`` commits it in place of
    every row of its key range, ``low`` to ``high`` (the key columns' bounds as the table types
    them; None: open)."""

    name: str
    size: int
    stats: str  # its Delta statistics (``write_data_file``'s)
    rows: int
    low: list | None
    high: list | None


# Files of fewer than _SMALL_ROWS rows are small: rewritten when a change touches them, and all
# of them with the next write once there are _MAX_SMALL (a table's insert tail, a file a write,
# is merged by the writes, not by a compaction that rewrites the table). With deletion vectors
# (``deletion_vectors=True``) a bigger file gets a vector instead, until it would hide more than
# _PURGE of its rows. A write costs ~2 ms of CPU
# either way up to ~10,000 rows of the lake bench's rows, and a rewrite ~0.12 us a row more
# after that (docs/benchmarks.md, "The lake with many tables").
_SMALL_ROWS = 10_000
_MAX_SMALL = 8
_PURGE = 0.2


class Contents:
    """Data files' rows as Arrow tables, the most recently used up to ``max_bytes``: a table
    rewritten every micro-batch is not read back from the file it was just written to (files are
    never changed, so an entry never goes stale)."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, pa.Table] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: LakePath | str) -> pa.Table | None:
        with self._lock:
            table = self._items.get(str(path))
            if table is not None:
                self._items.move_to_end(str(path))
            return table

    def put(self, path: LakePath | str, table: pa.Table) -> None:
        if table.nbytes > self.max_bytes // 4:
            return
        with self._lock:
            self._bytes += table.nbytes
            old = self._items.pop(str(path), None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[str(path)] = table
            while self._bytes > self.max_bytes:
                self._bytes -= self._items.popitem(last=False)[1].nbytes

    def drop(self, path: LakePath) -> None:
        with self._lock:
            for key in (str(path), f"{path}#keys"):
                old = self._items.pop(key, None)
                if old is not None:
                    self._bytes -= old.nbytes


CONTENTS = Contents()  # the process's, shared by its open tables


class _NotCommitted(Exception):
    """The log entry was not created: another writer took the version, or (``why_not`` set) the
    filesystem cannot link."""


class KeyedTable:
    """An open current-state table: its delta-rs handle and, for a table ``write`` may write, its
    version, transaction id and live files as they are after this process's commits."""

    def __init__(
        self,
        path: LakePath | str,
        schema: pa.Schema,
        keys: list[str],
        app_id: str,
        contents: Contents = CONTENTS,
        file_bytes: int = 8 << 20,
        deletion_vectors: bool = False,
    ) -> None:
        self.path, self.keys, self.app_id = lake_path(path), keys, app_id
        self.base = self.schema = schema  # pycanal's columns; with a user's (``_load``)
        self.extra: list[pa.Field] = []  # columns a user added (Spark's ADD COLUMNS)
        self.contents, self.file_bytes = contents, file_bytes
        self.deletion_vectors = deletion_vectors  # changes to big files as deletion vectors
        self._deleted: dict[str, np.ndarray] = {}  # files' deleted positions, as read or written
        self.dt = delta_table(self.path)
        key_types = [schema.field(k).type for k in keys]
        self.why_not = None if all(_exact(t) for t in key_types) else "a floating-point key"
        ranged = _integer(key_types[0]) or _text(key_types[0])
        self.range_key = keys[0] if ranged else None  # files' bounds of it spare untouched files
        self._ratio = 0.5  # bytes on disk per byte in memory, as the last file written had them
        self.files: dict[str, _File] = {}
        self._fresh = True  # self.dt is at self.version
        self._load()
        if deletion_vectors and self.writable and not self.vectors:
            self._enable_vectors()

    @property
    def writable(self) -> bool:
        return self.why_not is None

    def delta(self) -> DeltaTable:
        """The delta-rs handle at the latest version (after this process's own commits)."""
        if not self._fresh:
            self.dt.update_incremental()
            self._fresh = True
        return self.dt

    def reload(self) -> None:
        """Read the state again (after a commit by delta-rs)."""
        self.delta()
        self._load()

    def _load(self) -> None:
        dt = self.dt
        if self.why_not is None:
            self.why_not = unsupported(dt)
        self.version = dt.version()
        self.txn = dt.transaction_version(self.app_id)
        self.vectors = has_vectors(dt)  # the table's files may have deletion vectors
        self._deleted = {}
        self._columns(dt)
        if self.why_not is not None:
            return
        if self.vectors:
            self._load_log()
            return
        adds = pa.table(dt.get_add_actions(flatten=True))
        n = adds.num_rows
        lows = highs = [None] * n
        if self.range_key is not None and f"min.{self.range_key}" in adds.column_names:
            lows = adds.column(f"min.{self.range_key}").to_pylist()
            highs = adds.column(f"max.{self.range_key}").to_pylist()
            if _text(self.schema.field(self.range_key).type):
                ours = [p.startswith(_PREFIX) for p in adds["path"].to_pylist()]
                lows = [lo if mine else None for lo, mine in zip(lows, ours, strict=True)]
                highs = [hi if mine else None for hi, mine in zip(highs, ours, strict=True)]
        self.files = {
            p: _File(s, lo, hi, rows=n)
            for p, s, lo, hi, n in zip(
                adds["path"].to_pylist(),
                adds["size_bytes"].to_pylist(),
                lows,
                highs,
                adds["num_records"].to_pylist(),
                strict=True,
            )  # fmt: skip
        }

    def _load_log(self) -> None:
        """The live files from the log itself: delta-rs' listing has no deletion vectors."""
        text = self.range_key is not None and _text(self.schema.field(self.range_key).type)
        self.files = {}
        for p, add in live_adds(self.path / "_delta_log", self.version).items():
            stats = json.loads(add["stats"]) if add.get("stats") else {}
            low = high = None
            if self.range_key is not None and not (text and not p.startswith(_PREFIX)):
                low = stats.get("minValues", {}).get(self.range_key)
                high = stats.get("maxValues", {}).get(self.range_key)
            self.files[p] = _File(
                add["size"], low, high, add.get("stats"), add.get("deletionVector"), stats.get("numRecords")
            )

    def _columns(self, dt: DeltaTable) -> None:
        """The table's columns: pycanal's (``base``), and those a user added, in the table's order.
        A user's column is kept: unchanged where pycanal updates a row, null in the rows it inserts
        (as Delta's MERGE ``UPDATE SET *`` / ``INSERT *`` leave a target column the source lacks)."""
        table = pa.schema(dt.schema().to_arrow())
        if table.names == self.base.names:
            self.schema, self.extra = self.base, []
            return
        ours = set(self.base.names)
        self.extra = [f for f in table if f.name not in ours]
        self.schema = pa.schema([self.base.field(f.name) if f.name in ours else f for f in table])

    def _enable_vectors(self) -> None:
        """Commit the table's protocol with deletion vectors, and a checkpoint of that version:
        ``checkpoint.from_log`` makes a checkpoint only from entries without a protocol change, so
        each table's next one was delta-rs' own (~50 ms of CPU) -- in bench/lake.py, 200 tables'
        within the same minute, which doubled the apply's time (addBatch 513-561 ms against 280)."""
        actions = vectors_actions(self.dt, self.version)
        for _ in range(_RETRIES):
            try:
                self._link(actions)
                break
            except _NotCommitted:
                if self.why_not is not None:
                    return
                self._fresh = False
                self.reload()
                if self.vectors:
                    return
        self._fresh = False
        self.reload()
        if self.vectors:
            self.dt.create_checkpoint()

    def committed(self, txn: int) -> bool:
        return self.txn is not None and self.txn >= txn

    # ------------------------------------------------------------------ write
    def write(
        self, upserts: pa.Table, deletes: pa.Table, txn: int, metadata: dict[str, Any],
        chunks: list[ChunkFile] | tuple[()] = (),
    ) -> bool:  # fmt: skip
        """Replace the rows of ``upserts``' and ``deletes``' keys by ``upserts`` (rows of the table's
        schema; ``deletes``: key columns; no key twice) in one commit with transaction id ``txn``;
        each of ``chunks`` (disjoint ranges; a table with deletion vectors and an integer range key,
        without a user's columns) replaces its key range's rows first, less its rows of those keys.
        False (nothing written) when the table is not, or no longer, one this class may write."""
        keys, gone = upserts.select(self.keys), deletes.select(self.keys)
        changed = pa.concat_tables([keys, gone if gone.schema == keys.schema else gone.cast(keys.schema)])
        attempt = 0
        while self.writable:  # a table can stop being one by the commit that got in first
            try:
                self._write(upserts, changed, txn, metadata, chunks)
                return True
            except _NotCommitted:
                if not self.writable:
                    return False
                attempt += 1
                if attempt == _RETRIES:
                    raise RuntimeError(
                        f"{self.path}: version {self.version + 1} was committed by another writer {_RETRIES} times "
                        "in a row"
                    ) from None
                self._fresh = False
                self.reload()
                if self.committed(txn):
                    return True
        return False

    def _write(
        self, upserts: pa.Table, changed: pa.Table, txn: int, metadata: dict[str, Any],
        chunks: list[ChunkFile] | tuple[()] = (),
    ) -> None:  # fmt: skip
        # A chunk's file joins the live files first, so that the changed keys mark (or rewrite)
        # its rows as any file's; its range's rows in the other files go as if changed.
        pending = {c.name for c in chunks}
        ranges = [(c.low, c.high) for c in chunks]
        if chunks and not (
            self.deletion_vectors and self.vectors and self.range_key == self.keys[0] and not self.extra
        ):
            raise ValueError(
                f"{self.path}: chunk files need deletion vectors and an integer first key column"
            )
        for c in chunks:
            stats = json.loads(c.stats)
            low, high = (stats[m].get(self.range_key) for m in ("minValues", "maxValues"))
            self.files[c.name] = _File(c.size, low, high, c.stats, rows=c.rows)
        try:
            self._write_files(upserts, changed, txn, metadata, pending, ranges)
        except BaseException:
            for name in pending:
                self.files.pop(name, None)
            raise

    def _write_files(
        self, upserts: pa.Table, changed: pa.Table, txn: int, metadata: dict[str, Any],
        pending: set[str], ranges: list[tuple[list | None, list | None]],
    ) -> None:  # fmt: skip
        touched = self._touching(changed, ranges, pending)
        marked: dict[str, np.ndarray] = {}
        if self.deletion_vectors and self.vectors:
            touched, marked = self._mark(touched, changed, ranges, pending)
        done = {*touched, *marked}
        rest = [p for p in self.files if p not in done and self._small(p)]
        if len(rest) >= _MAX_SMALL:
            touched += rest  # merged with this write's rows
        if self.extra:
            upserts = self._with_extra(upserts, touched, marked)
        kept = [self._without(self._live(p), changed, [] if p in pending else ranges) for p in touched]
        new = pa.concat_tables([*kept, upserts]).combine_chunks()
        parts = self._cut(new) if new.num_rows else []
        added, vector_file = [], None
        try:
            for part in parts:
                added.append(self._write_file(part))
            readded, vector_file = self._vectors(marked)
            adopted = [(p, self.files[p]) for p in pending if p not in marked and p not in touched]
            self._commit(touched, added, txn, metadata, len(upserts), len(changed) - len(upserts), readded,
                         adopted, pending)  # fmt: skip
        except BaseException:
            for name, *_ in added:
                (self.path / name).unlink()  # in no log entry
            if vector_file is not None:
                vector_file.unlink()
            raise
        for p in touched:
            del self.files[p]
            self._deleted.pop(p, None)
            self.contents.drop(self.path / p)
            if p in pending:
                (self.path / p).unlink()  # a chunk's file rewritten before any entry named it
        for p, f in readded:
            self.files[p] = f
            self._deleted[p] = marked[p]
        for (name, f, _), part in zip(added, parts, strict=True):
            self.files[name] = f
            self.contents.put(self.path / name, part)
        if parts:
            self._ratio = max(sum(f.size for _, f, _ in added) / max(new.nbytes, 1), 0.01)
        self.version += 1
        self.txn = txn
        self._fresh = False

    def _cut(self, new: pa.Table) -> list[pa.Table]:
        """``new`` as files of about ``file_bytes`` on disk, by ranges of the range column."""
        n = math.ceil(new.nbytes * self._ratio / self.file_bytes)
        if n <= 1 or self.range_key is None:
            return [new]
        new = take_in_blocks(new, pc.sort_indices(new, sort_keys=[(self.range_key, "ascending")]))
        size = math.ceil(new.num_rows / n)
        return [new.slice(i, size) for i in range(0, new.num_rows, size)]

    def _mark(
        self, touched: list[str], changed: pa.Table, ranges: list[tuple[list | None, list | None]] = (),
        pending: set[str] = frozenset(),
    ) -> tuple[list[str], dict[str, np.ndarray]]:  # fmt: skip
        """Which of the ``touched`` files to rewrite, and the others' deleted positions once the
        rows of the changed keys (and, but in the ``pending`` files, of the key ``ranges``) are
        added to them (files where no live row has one: neither)."""
        rewrite, marked = [], {}
        for p in touched:
            if self._small(p):
                rewrite.append(p)
                continue
            keys = self._keys(p)
            if len(self.keys) == 1:
                hit = pc.is_in(keys.column(0), value_set=changed.column(self.keys[0]).combine_chunks())
            else:
                numbered = keys.append_column("__row", arange(keys.num_rows))
                joined = numbered.join(changed, self.keys, join_type="left semi").column("__row")
                hit = pc.is_in(arange(keys.num_rows), value_set=joined.combine_chunks())
            gone = None if p in pending else _in_ranges(keys, ranges)
            if gone is not None:
                hit = pc.or_(hit, gone)
            rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False)).astype(np.uint64)
            deleted = self._vector(p)
            at = np.searchsorted(deleted, rows)  # a few positions into a sorted vector: no sort of both
            there = np.zeros(len(rows), bool)
            if len(deleted):
                there = deleted[np.minimum(at, len(deleted) - 1)] == rows
            fresh = rows[~there]
            if not len(fresh):
                continue  # only rows deleted already: the file holds none of these keys
            now = np.insert(deleted, at[~there], fresh)
            if len(now) > _PURGE * keys.num_rows:
                rewrite.append(p)
            else:
                marked[p] = now
        return rewrite, marked

    def _vectors(self, marked: dict[str, np.ndarray]) -> tuple[list[tuple[str, _File]], LakePath | None]:
        """The files of ``marked`` with their new deletion vectors, in one new file. Never inline in
        the log entry (the protocol allows it): Delta Lake for Spark 4.4's VACUUM fails on an inline
        vector (``scala.MatchError`` in ``getDeletionVectorRelativePathAndSize``;
        tests/test_spark_delta.py)."""
        if not marked:
            return [], None
        paths = list(marked)
        vector_file, written = dv.file_descriptors(
            self.path, [(dv.serialize(marked[p]), len(marked[p])) for p in paths]
        )
        descriptors = dict(zip(paths, written, strict=True))
        out = []
        for p, descriptor in descriptors.items():
            f = self.files[p]
            stats = f.stats
            if stats is not None:  # its bounds now include deleted rows: no longer tight
                stats = json.dumps({**json.loads(stats), "tightBounds": False}, separators=(",", ":"))
            out.append((p, _File(f.size, f.low, f.high, stats, descriptor, f.rows)))
        return out, vector_file

    def _small(self, name: str) -> bool:
        """Whether a file is rewritten rather than given a deletion vector."""
        rows = self.files[name].rows
        return (self._keys(name).num_rows if rows is None else rows) < _SMALL_ROWS

    def _vector(self, name: str) -> np.ndarray:
        """The positions ``name``'s deletion vector hides."""
        rows = self._deleted.get(name)
        if rows is None:
            rows = self._deleted[name] = dv.positions(self.files[name].vector, self.path)
        return rows

    def _touching(
        self, changed: pa.Table, ranges: list[tuple[list | None, list | None]] = (), pending: set[str] = frozenset()
    ) -> list[str]:  # fmt: skip
        """The live files that may hold a changed key, or (but the ``pending`` ones) a key of ``ranges``."""
        if self.range_key is None or not self.files:
            return list(self.files)
        # Python values compare as Arrow's do here (integers; UTF-8 texts by code point = by byte),
        # and a bisection a file costs less than an Arrow call over the keys.
        keys = sorted(k for k in changed.column(self.range_key).to_pylist() if k is not None)
        spans = [
            (None if lo is None else _py(lo[0]), None if hi is None else _py(hi[0])) for lo, hi in ranges
        ]
        out = []
        for p, f in self.files.items():
            if f.low is None or f.high is None:
                out.append(p)
                continue
            i = bisect.bisect_left(keys, f.low)
            if i < len(keys) and keys[i] <= f.high:
                out.append(p)
            elif p not in pending and any(
                (lo is None or f.high >= lo) and (hi is None or f.low <= hi) for lo, hi in spans
            ):
                out.append(p)
        return out

    def key_rows(self, low: Any = None, high: Any = None) -> pa.Table:
        """The key columns of the rows in the files whose range of the first key column can hold
        values from ``low`` to ``high`` (None: open); of every row where files have no ranges."""
        if not self.writable:
            return read_rows(self.delta(), self.keys)
        names = [
            p for p, f in self.files.items()
            if f.low is None or f.high is None or ((low is None or f.high >= low) and (high is None or f.low <= high))
        ]  # fmt: skip
        parts = [self._live(p).select(self.keys) for p in names]
        return pa.concat_tables(parts) if parts else self.schema.empty_table().select(self.keys)

    def _read(self, name: str) -> pa.Table:
        """All of a file's rows, those its deletion vector hides too."""
        data = self.contents.get(self.path / name)
        if data is None:
            data = conform(pq.ParquetFile((self.path / name).input_file()).read(), self.schema)
            self.contents.put(self.path / name, data)
        return conform(data, self.schema)  # a user added a column since it was kept

    def _live(self, name: str) -> pa.Table:
        """A file's rows in the table (its deletion vector applied)."""
        data = self._read(name)
        if self.files[name].vector is None:
            return data
        keep = np.ones(data.num_rows, bool)
        keep[self._vector(name).astype(np.int64)] = False
        return data.filter(pa.array(keep))

    def _keys(self, name: str) -> pa.Table:
        """A file's key columns, every row (cached apart from the rows: a deletion vector's write
        reads only these)."""
        data = self.contents.get(self.path / name)
        if data is not None:
            return data.select(self.keys)
        key = f"{self.path / name}#keys"
        data = self.contents.get(key)
        if data is None:
            schema = pa.schema([self.schema.field(k) for k in self.keys])
            data = pq.read_table((self.path / name).input_file(), columns=self.keys).cast(schema)
            self.contents.put(key, data)
        return data

    def _with_extra(self, upserts: pa.Table, touched: list[str], marked: dict[str, np.ndarray]) -> pa.Table:
        """``upserts`` with the user's columns: the values of the rows they replace (those in the
        ``touched`` files, and those the new vectors of ``marked`` files hide), else null."""
        names = [*self.keys, *(f.name for f in self.extra)]
        old = [self._live(p).select(names) for p in touched]
        for p, now in marked.items():
            hidden = np.setdiff1d(now, self._vector(p), assume_unique=True).astype(np.int64)
            old.append(self._read(p).select(names).take(pa.array(hidden)))
        before = (
            pa.concat_tables(old) if old else pa.schema([self.schema.field(n) for n in names]).empty_table()
        )
        # Matched on the keys alone (Acero joins no list columns), rows told apart by number.
        mine = upserts.select(self.keys).append_column("__new", arange(upserts.num_rows))
        theirs = before.select(self.keys).append_column("__old", arange(before.num_rows))
        pairs = mine.join(theirs, self.keys, join_type="inner")
        at = np.full(upserts.num_rows, -1, np.int64)
        at[pairs.column("__new").to_numpy()] = pairs.column("__old").to_numpy()
        index = pa.array(at, mask=at < 0)
        for f in self.extra:
            upserts = upserts.append_column(f, before.column(f.name).take(index))
        return upserts.select(self.schema.names)

    def _without(
        self, data: pa.Table, changed: pa.Table, ranges: list[tuple[list | None, list | None]] = ()
    ) -> pa.Table:  # fmt: skip
        """``data`` less the rows of the changed keys and of the key ``ranges``."""
        gone = _in_ranges(data.select(self.keys), ranges)
        if gone is not None:
            data = data.filter(pc.invert(gone))
        if len(self.keys) == 1:
            k = self.keys[0]
            return data.filter(
                pc.invert(pc.is_in(data.column(k), value_set=changed.column(k).combine_chunks()))
            )
        # Joined on the keys alone: Acero joins no list (SET) columns.
        rows = data.select(self.keys).append_column("__row", arange(data.num_rows))
        return data.take(rows.join(changed, self.keys, join_type="left anti").column("__row"))

    def _write_file(self, data: pa.Table) -> tuple[str, _File, str]:
        name, size, stats = write_data_file(self.path, data, self.range_key)
        low = high = None
        if self.range_key is not None:
            low, high = stats["minValues"][self.range_key], stats["maxValues"][self.range_key]
        text = json.dumps(stats, separators=(",", ":"))
        return name, _File(size, low, high, text, rows=data.num_rows), text

    # ------------------------------------------------------------------ upkeep
    def compactable(self, target_bytes: int) -> bool:
        """Whether compaction into files of ``target_bytes`` has anything to merge here (two live
        files that are not small and fit in one: the writes merge the small ones); True where this
        writer does not know the files."""
        if not self.writable:
            return True
        sizes = sorted(f.size for p, f in self.files.items() if not self._small(p))
        return len(sizes) >= 2 and sizes[0] + sizes[1] <= target_bytes

    def checkpoint(self) -> None:
        """A Delta checkpoint at this writer's version: made from the last checkpoint and the
        entries after it where those are plain (``delta.checkpoint``), else by delta-rs."""
        if self.writable and from_log(self.path / "_delta_log", self.version, set(self.files)):
            return
        self.delta().create_checkpoint()

    def _commit(
        self, removed: list[str], added: list[tuple[str, _File, str]], txn: int, metadata: dict[str, Any],
        upserts: int, deletes: int, readded: list[tuple[str, _File]] = (),
        adopted: list[tuple[str, _File]] = (), pending: set[str] = frozenset(),
    ) -> None:  # fmt: skip
        """Commit the write: ``removed`` files gone, ``added`` ones new, ``readded`` ones with a new
        deletion vector (removed and added again), ``adopted`` ones (of the ``pending`` files,
        which no entry named before) added as they are."""
        files = self.files
        removes = [
            FileAction(p, files[p].size, vector=files[p].vector)
            for p in [*removed, *(p for p, _ in readded)]
            if p not in pending
        ]
        adds = [FileAction(name, f.size, stats, f.vector) for name, f, stats in added]
        adds += [FileAction(p, f.size, f.stats, f.vector) for p, f in [*readded, *adopted]]
        metrics = {"num_source_rows": upserts + deletes, "num_target_files_removed": len(removed),
                   "num_target_files_added": len(added) + len(adopted), "num_deletion_vectors_added": len(readded)}  # fmt: skip
        self._link(merge_actions(self.keys, self.app_id, self.version, txn, metadata, removes, adds, metrics))

    def _link(self, actions: list[dict[str, Any]]) -> None:
        """Create the table's next log entry with ``actions``; _NotCommitted if it is there."""
        log_dir = self.path / "_delta_log"
        try:
            if commit(log_dir, self.version + 1, actions):
                return
        except OSError as exc:
            if not log_dir.is_local:
                raise  # the store failed the request: not a table to write some other way
            # no hard links here (some network and FUSE filesystems): delta-rs writes it
            self.why_not = f"no hard links in {log_dir}: {exc.strerror or exc}"
        raise _NotCommitted


def write_data_file(
    directory: LakePath, data: pa.Table, range_key: str | None
) -> tuple[str, int, dict[str, Any]]:
    """``data`` as a new data file of the table in ``directory``: its name, size and Delta
    statistics (exact bounds of ``range_key``)."""
    codec = "zstd" if data.nbytes >= _ZSTD_FROM_BYTES else "snappy"
    name = f"{_PREFIX}{uuid.uuid4()}.{codec}.parquet"
    # No dictionary pages: keys are unique and a small file's other columns rarely repeat enough
    # to pay for hashing every value (a 5,745-row file: 3.4 -> 2.7 ms a write; bench/lake.py's soak).
    # An open stream, not a path: pyarrow resolves a path's filesystem every call.
    with (directory / name).output_stream() as out:
        pq.write_table(data, out, compression=codec, use_dictionary=False)
        size = out.tell()
    return name, size, _stats(data, range_key)


def _in_ranges(keys: pa.Table, ranges: list[tuple[list | None, list | None]]) -> pa.Array | None:
    """Whether each key (the key columns) is in one of ``ranges``; None without ranges."""
    if not ranges or not keys.num_rows:
        return None
    columns = [keys.column(i).combine_chunks() for i in range(keys.num_columns)]
    masks = [in_range(columns, low, high) for low, high in ranges]
    out = masks[0]
    for mask in masks[1:]:
        out = pc.or_(out, mask)
    return out


def _py(value: Any) -> Any:
    return value.as_py() if isinstance(value, pa.Scalar) else value


def _stats(data: pa.Table, key: str | None) -> dict[str, Any]:
    """A data file's Delta statistics: rows, null counts, and the exact bounds of ``key``, of
    integer columns and of texts whose bounds are short (bounds are optional; long ones would
    bloat the log)."""
    lows, highs, nulls = {}, {}, {}
    for field, column in zip(data.schema, data.columns, strict=True):
        nulls[field.name] = column.null_count
        t = field.type
        if column.null_count == len(column):
            continue
        if field.name != key and not (_integer(t) or _text(t)):
            continue
        low, high = (v.as_py() for v in pc.min_max(column).values())
        if field.name == key or not _text(t) or max(len(low.encode()), len(high.encode())) <= 32:
            lows[field.name], highs[field.name] = low, high
    return {"numRecords": data.num_rows, "minValues": lows, "maxValues": highs, "nullCount": nulls}
