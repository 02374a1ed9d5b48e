"""The change-log table: every change row, append-only Parquet, partitioned by table and date.

Layout under ``<target>/changelog``: ``table_name=<db>.<table>/date=<YYYY-MM-DD>/part-<batch>-<n>.parquet``
(Hive-style, values URI-escaped; ``table_name`` is just ``<db>`` for database statements). A
micro-batch's files are named by its batch id, so a replay of a batch that crashed before its
commit rewrites the same names. ``_pycanal_commits/<batch>.json`` is the batch's commit marker,
written atomically after its files are durable: it lists them, and its presence makes a replay
of the batch a no-op. Readers take the file list from the markers (``change_log_files``), so
files of an uncommitted attempt are never read.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .rows import ARROW_SCHEMA

__all__ = [
    "CHANGELOG_SCHEMA",
    "ChangeLog",
    "batch_ids",
    "change_log_files",
    "read_change_log",
    "write_atomic",
]

# The file columns: the change row plus the micro-batch it came in.
CHANGELOG_SCHEMA = ARROW_SCHEMA.append(pa.field("batch_id", pa.int64()))


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that readers see the old content or all of the new one, durably."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def batch_ids(directory: Path) -> list[int]:
    """The batch ids of a directory of ``<batch>.json`` records, in order (none if it is absent)."""
    if not directory.is_dir():
        return []
    return sorted(int(n[:-5]) for n in os.listdir(directory) if n.endswith(".json") and n[:-5].isdigit())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _partition(database: str | None, table: str | None) -> str:
    name = database or ""
    if table is not None:
        name += "." + table
    return quote(name, safe="") or "__HIVE_DEFAULT_PARTITION__"  # read back as null


_writers: dict[int, ThreadPoolExecutor] = {}


def _writer() -> ThreadPoolExecutor:
    """The process's change-log writer: one thread, so a batch's files are written while its
    MERGEs run, and a replay in the same process writes its files after an earlier attempt's
    (same names). Per process id: a forked child does not have its parent's thread."""
    pid = os.getpid()
    if pid not in _writers:
        _writers[pid] = ThreadPoolExecutor(1, thread_name_prefix="pycanal-changelog")
    return _writers[pid]


_part_pools: dict[int, ThreadPoolExecutor] = {}


def _parts() -> ThreadPoolExecutor:
    """Threads writing a batch's partition files at once: most of a small file's time is the
    wait for its fsyncs (a batch of 1-row transactions over 200 tables is 200 files)."""
    pid = os.getpid()
    if pid not in _part_pools:
        _part_pools[pid] = ThreadPoolExecutor(8, thread_name_prefix="pycanal-changelog-part")
    return _part_pools[pid]


def _partitions(rows: pa.Table) -> dict[tuple[str, str], pa.Array]:
    """(table_name, date) -> the rows there, in order; the names are made once per table and day."""
    days = pc.cast(rows.column("ts"), pa.date32())
    keys = pa.table({"d": rows.column("database"), "t": rows.column("table"), "day": days})
    keys = keys.append_column("row", pc.indices_nonzero(pa.repeat(True, rows.num_rows)))
    # Without threads, each group keeps the rows' order.
    groups = keys.group_by(["d", "t", "day"], use_threads=False).aggregate([("row", "min"), ("row", "list")])
    dates = pc.strftime(rows.column("ts").take(groups["row_min"]), "%Y-%m-%d").to_pylist()
    out: dict[tuple[str, str], list[pa.Array]] = {}
    for d, t, date, idx in zip(
        groups["d"].to_pylist(), groups["t"].to_pylist(), dates, groups["row_list"], strict=True
    ):
        out.setdefault((_partition(d, t), date), []).append(idx.values)
    # Tables whose names escape alike (`a.b`.`c`, `a`.`b.c`) share a partition: rows back in order.
    return {k: v[0] if len(v) == 1 else pa.concat_arrays(v).sort() for k, v in out.items()}


class ChangeLog:
    def __init__(self, target_dir: str | Path) -> None:
        self.dir = Path(target_dir) / "changelog"
        self.commits = self.dir / "_pycanal_commits"
        self._written: Future[None] | None = None

    def marker(self, batch_id: int) -> Path:
        return self.commits / f"{batch_id:020d}.json"

    def committed(self, batch_id: int) -> bool:
        return self.marker(batch_id).is_file()

    def batch_ids(self) -> list[int]:
        """The committed micro-batches, in order."""
        return batch_ids(self.commits)

    def read_batch(self, batch_id: int) -> pa.Table:
        """A committed batch's change rows back from its files (``ARROW_SCHEMA``; rows of
        different partitions are not in position order)."""
        record = json.loads(self.marker(batch_id).read_text())
        tables = [pq.ParquetFile(self.dir / rel).read(columns=ARROW_SCHEMA.names) for rel in record["files"]]
        return pa.concat_tables(tables).cast(ARROW_SCHEMA) if tables else ARROW_SCHEMA.empty_table()

    def write(self, rows: pa.Table, batch_id: int) -> list[str]:
        """Start writing the batch's rows (sorted by position) into their partitions, in the
        background; returns the files relative to the change-log directory. ``commit`` waits for
        them to be durable."""
        if rows.num_rows == 0:
            return []
        data = rows.append_column("batch_id", pa.repeat(pa.scalar(batch_id, pa.int64()), rows.num_rows))
        partitions = sorted(_partitions(rows).items())
        if len(partitions) > 1:  # the rows partition by partition: one take, then a slice each
            data = data.take(pa.concat_arrays([idx for _, idx in partitions]))
        parts, start = [], 0
        for n, (key, idx) in enumerate(partitions):
            rel = f"table_name={key[0]}/date={key[1]}/part-{batch_id:020d}-{n:05d}.parquet"
            parts.append((rel, data.slice(start, len(idx))))
            start += len(idx)
        self._written = _writer().submit(self._write, parts)
        return [rel for rel, _ in parts]

    def _write(self, parts: list[tuple[str, pa.Table]]) -> None:
        if len(parts) == 1:
            self._write_part(*parts[0])
            return
        for done in [_parts().submit(self._write_part, rel, part) for rel, part in parts]:
            done.result()

    def _write_part(self, rel: str, part: pa.Table) -> None:
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(part, tmp, compression="zstd")  # faster than snappy here, and half the size
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)

    def commit(self, batch_id: int, info: dict[str, Any]) -> None:
        if self._written is not None:
            self._written.result()  # the files are durable before the marker lists them
        record = {"batch_id": batch_id, "committed_at": time.time(), **info}
        write_atomic(self.marker(batch_id), json.dumps(record, indent=1).encode())


def change_log_files(target_dir: str | Path) -> list[str]:
    """The absolute paths of every committed change-log file, in batch order."""
    log = ChangeLog(target_dir)
    out = []
    for batch_id in log.batch_ids():
        record = json.loads(log.marker(batch_id).read_text())
        out += [str(log.dir / rel) for rel in record["files"]]
    return out


def read_change_log(spark: Any, target_dir: str | Path) -> Any:
    """The committed change log as a Spark DataFrame (with ``table_name`` and ``date`` columns)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    files = change_log_files(target_dir)
    if not files:
        schema = from_arrow_schema(
            CHANGELOG_SCHEMA.append(pa.field("table_name", pa.string())).append(pa.field("date", pa.date32()))
        )
        return spark.createDataFrame([], schema)
    return spark.read.option("basePath", str(ChangeLog(target_dir).dir)).parquet(*files)
