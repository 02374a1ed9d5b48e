"""The change log: every change row, append-only Parquet, a file per micro-batch folded by table and date.

Layout under ``<target>/changelog``:

    _pycanal_batches/<batch>.parquet          a micro-batch's rows, every table, in position order
    _pycanal_commits/<batch>.json             its commit marker: its files and rows
    table_name=<db>.<table>/date=<day>/part-<first>-<last>.parquet   folded batches first..last
    _pycanal_manifest/<batch>.json            the fold through <batch>: its live files, rows, and
                                              per table the source time of its last change
    _pycanal_manifest/retired-<batch>.json    the files that fold replaced

A micro-batch is one file whatever the number of tables it touches (creating a file costs more
CPU than writing a small one). Its name comes from the batch id, so a replay of a batch that
crashed before its commit rewrites it; the marker is written atomically once the file is
durable, and its presence makes a replay a no-op.

``fold`` (the applier runs it every ``Maintenance.fold_every`` applied batches) moves committed
batches into Hive-style partitions (values URI-escaped; ``table_name`` is just ``<db>`` for
database statements): a file per partition for the batches folded together; when a partition
ends in ``fanout`` files of one level whose total is under ``target_bytes``, they are merged into
one of the next level, so a partition keeps at most ``fanout`` files a level. The manifest,
written atomically, is the fold's commit; the folded markers are deleted after it, and the files
it replaced are deleted by the first fold ``retention_seconds`` later (a reader holding an older
list reads them until then). A fold cut short left an intent naming its last batch: the next
fold redoes exactly that one (same batches, same file names) before anything else.

Readers take the newest manifest and the markers of the later batches (``change_log_files``):
files of an uncommitted attempt or an unfinished fold are never read.
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

from pycanal.common.files import clear_temporaries, write_atomically

from .arrow import arange
from .rows import ARROW_SCHEMA

__all__ = [
    "CHANGELOG_SCHEMA",
    "ChangeLog",
    "batch_ids",
    "change_log_files",
    "last_change_times",
    "read_change_log",
]

# The file columns: the change row plus the micro-batch it came in.
CHANGELOG_SCHEMA = ARROW_SCHEMA.append(pa.field("batch_id", pa.int64()))


def batch_ids(directory: Path) -> list[int]:
    """The batch ids of a directory of ``<batch>.json`` records, in order (none if it is absent)."""
    if not directory.is_dir():
        return []
    return sorted(int(n[:-5]) for n in os.listdir(directory) if n.endswith(".json") and n[:-5].isdigit())


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


def _partitions(rows: pa.Table) -> dict[tuple[str, str], pa.Array]:
    """(table_name, date) -> the rows there, in order; the names are made once per table and day."""
    days = pc.cast(rows.column("ts"), pa.date32())
    keys = pa.table({"d": rows.column("database"), "t": rows.column("table"), "day": days})
    keys = keys.append_column("row", arange(rows.num_rows))
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


def _write_parquet(path: Path, table: pa.Table) -> int:
    """Write ``table`` to ``path`` durably (``write_atomically``, what an attempt cut short left of
    it removed first: a replay writes the same names); returns its size."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")  # faster than snappy here, and half the size
    data = memoryview(sink.getvalue())
    clear_temporaries(path)
    write_atomically(path, data)
    return data.nbytes


def _read(path: Path) -> pa.Table:
    # ParquetFile: no partition columns guessed from the path.
    return pq.ParquetFile(path).read(columns=CHANGELOG_SCHEMA.names).cast(CHANGELOG_SCHEMA)


_EMPTY: dict[str, Any] = {"through": -1, "rows": 0, "partitions": {}, "tables": {}, "retiring": []}


class ChangeLog:
    def __init__(self, target_dir: str | Path) -> None:
        self.dir = Path(target_dir) / "changelog"
        self.commits = self.dir / "_pycanal_commits"
        self.manifests = self.dir / "_pycanal_manifest"
        self._written: Future[None] | None = None
        self._manifest: dict[str, Any] = _EMPTY
        self._marker_rows: dict[int, int] = {}

    def marker(self, batch_id: int) -> Path:
        return self.commits / f"{batch_id:020d}.json"

    def folded_through(self) -> int:
        """The last micro-batch folded into the partitions (-1: none)."""
        ids = batch_ids(self.manifests)
        return ids[-1] if ids else -1

    def committed(self, batch_id: int) -> bool:
        return self.marker(batch_id).is_file() or batch_id <= self.folded_through()

    def batch_ids(self) -> list[int]:
        """The committed micro-batches not folded yet, in order."""
        ids = batch_ids(
            self.commits
        )  # listed before the manifest: a fold in between deletes markers after it
        through = self.folded_through()
        return [b for b in ids if b > through]

    def last_batch(self) -> int | None:
        """The last committed micro-batch, folded or not."""
        ids = self.batch_ids()
        through = self.folded_through()
        return ids[-1] if ids else (through if through >= 0 else None)

    def manifest(self) -> dict[str, Any]:
        """The newest fold's manifest (``through``, ``rows``, live ``partitions``, per table the
        source time of its last change, ``tables``); read again only when a newer one exists."""
        for _ in range(100):
            through = self.folded_through()
            if through == self._manifest["through"]:
                return self._manifest
            try:
                self._manifest = json.loads((self.manifests / f"{through:020d}.json").read_text())
            except FileNotFoundError:  # replaced by a newer one meanwhile
                continue
            return self._manifest
        raise RuntimeError(f"{self.manifests}: the newest manifest keeps changing")

    def read_batch(self, batch_id: int) -> pa.Table:
        """A committed batch not folded yet, back from its files (``ARROW_SCHEMA``)."""
        if not self.marker(batch_id).is_file() and batch_id <= self.folded_through():
            raise ValueError(
                f"{self.dir}: micro-batch {batch_id} is folded into the partitions (change_log_files)"
            )
        record = json.loads(self.marker(batch_id).read_text())
        tables = [_read(self.dir / rel).select(ARROW_SCHEMA.names) for rel in record["files"]]
        return pa.concat_tables(tables).cast(ARROW_SCHEMA) if tables else ARROW_SCHEMA.empty_table()

    def write(self, rows: pa.Table, batch_id: int) -> list[str]:
        """Start writing the batch's rows (sorted by position) into its file, in the background;
        returns the files relative to the change-log directory. ``commit`` waits for them."""
        if rows.num_rows == 0:
            return []
        data = rows.append_column("batch_id", pa.repeat(pa.scalar(batch_id, pa.int64()), rows.num_rows))
        rel = f"_pycanal_batches/{batch_id:020d}.parquet"
        self._written = _writer().submit(_write_parquet, self.dir / rel, data)
        return [rel]

    def commit(self, batch_id: int, info: dict[str, Any]) -> None:
        if self._written is not None:
            self._written.result()  # the files are durable before the marker lists them
        record = {"batch_id": batch_id, "committed_at": time.time(), **info}
        write_atomically(self.marker(batch_id), json.dumps(record, indent=1).encode())

    # ------------------------------------------------------------------ readers
    def files(self) -> list[str]:
        """The paths (relative to ``dir``) of every committed row: the live folded files, then
        the later batches' files, in batch order."""
        for _ in range(100):
            ids = batch_ids(self.commits)
            m = self.manifest()
            live = sorted(
                (lo, hi, f"{key}/{name}")
                for key, entries in m["partitions"].items()
                for name, lo, hi, *_ in entries
            )
            try:
                later = [rel for b in ids if b > m["through"] for rel in self._marker(b)["files"]]
            except FileNotFoundError:  # folded while we read: the next manifest has them
                continue
            return [rel for *_, rel in live] + later
        raise RuntimeError(f"{self.dir}: the change log keeps being folded under the reader")

    def rows(self) -> int:
        """The number of committed change rows."""
        for _ in range(100):
            ids = batch_ids(self.commits)
            m = self.manifest()
            try:
                return m["rows"] + sum(self._rows_of(b) for b in ids if b > m["through"])
            except FileNotFoundError:
                continue
        raise RuntimeError(f"{self.dir}: the change log keeps being folded under the reader")

    def _marker(self, batch_id: int) -> dict[str, Any]:
        return json.loads(self.marker(batch_id).read_text())

    def _rows_of(self, batch_id: int) -> int:
        if batch_id not in self._marker_rows:
            self._marker_rows[batch_id] = self._marker(batch_id)["rows"]
        return self._marker_rows[batch_id]

    # ------------------------------------------------------------------ folding
    def fold(
        self,
        upto: int,
        *,
        retention_seconds: float = 86400.0,
        fanout: int = 10,
        target_bytes: int = 128 << 20,
    ) -> dict[str, int] | None:
        """Fold the committed batches up to ``upto`` into the partitions (module docstring) and
        delete retired files older than ``retention_seconds``; returns what it did (None:
        nothing to fold). Only one fold may run on a change log at a time."""
        if fanout < 2:
            raise ValueError(f"fold fanout must be at least 2, not {fanout}")
        m = self._finish(self.manifest())
        intent = self.manifests / "folding.json"
        redone = None
        if intent.is_file():
            pending = json.loads(intent.read_text())["through"]
            if pending > m["through"]:
                # An interrupted fold: redone first over the same batches, to the same names (its
                # files may be on disk), then the batches after it up to ``upto``.
                redone = self._fold(pending, m, retention_seconds, fanout, target_bytes)
                if pending >= upto:
                    return redone
                m = self._finish(self.manifest())
        done = self._fold(upto, m, retention_seconds, fanout, target_bytes)
        if redone is None or done is None:
            return done or redone
        return {k: v if k == "through" else v + redone[k] for k, v in done.items()}

    def _fold(
        self,
        upto: int,
        m: dict[str, Any],
        retention_seconds: float,
        fanout: int,
        target_bytes: int,
    ) -> dict[str, int] | None:
        """One fold of the batches up to ``upto`` after the manifest ``m``."""
        intent = self.manifests / "folding.json"
        ids = [b for b in self.batch_ids() if b <= upto]
        if not ids:
            self._expire(retention_seconds)
            return None
        lo, hi = ids[0], ids[-1]
        write_atomically(intent, json.dumps({"through": hi}).encode())
        inputs = [rel for b in ids for rel in self._marker(b)["files"]]
        rows = pa.concat_tables([_read(self.dir / rel) for rel in inputs]) if inputs else None
        partitions = {k: [list(e) for e in v] for k, v in m["partitions"].items()}
        retiring, written = list(inputs), 0
        groups = sorted(_partitions(rows).items()) if rows is not None else []
        if len(groups) > 1:
            rows = rows.take(pa.concat_arrays([idx for _, idx in groups]))
        start = 0
        for (name, date), idx in groups:
            key = f"table_name={name}/date={date}"
            entries = partitions.setdefault(key, [])
            part = rows.slice(start, len(idx))
            start += len(idx)
            file = f"part-{lo:020d}-{hi:020d}.parquet"
            entries.append([file, lo, hi, 1, _write_parquet(self.dir / key / file, part)])
            written += 1
            while len(entries) >= fanout and (level := entries[-1][3]) > 0:
                run = entries[-fanout:]
                if any(e[3] != level for e in run):
                    break
                if sum(e[4] for e in run) >= target_bytes:
                    for e in run:
                        e[3] = 0  # big enough: never merged again (level 0)
                    break
                merged = pa.concat_tables([_read(self.dir / key / e[0]) for e in run])
                file = f"part-{run[0][1]:020d}-{run[-1][2]:020d}.parquet"
                entries[-fanout:] = [
                    [file, run[0][1], run[-1][2], level + 1, _write_parquet(self.dir / key / file, merged)]
                ]
                retiring += [f"{key}/{e[0]}" for e in run]
                written += 1
        tables = dict(m["tables"])
        for name, at in (last_change_times(rows) if rows is not None else {}).items():
            tables[name] = max(at, tables.get(name, at))
        record = {
            "through": hi,
            "rows": m["rows"] + (rows.num_rows if rows is not None else 0),
            "folded_at": time.time(),
            "partitions": partitions,
            "tables": tables,
            "retiring": retiring,
        }
        write_atomically(
            self.manifests / f"{hi:020d}.json", json.dumps(record, separators=(",", ":")).encode()
        )
        self._finish(self.manifest())
        self._expire(retention_seconds)
        return {"through": hi, "batches": len(ids), "rows": record["rows"] - m["rows"], "written": written,
                "retired": len(retiring)}  # fmt: skip

    def _finish(self, m: dict[str, Any]) -> dict[str, Any]:
        """The steps after a fold's manifest (again, after a crash): its retired files recorded
        with the time, the markers it folded, older manifests and its intent deleted."""
        through = m["through"]
        if through < 0:
            return m
        retired = self.manifests / f"retired-{through:020d}.json"
        if m["retiring"] and not retired.is_file():
            write_atomically(retired, json.dumps(m["retiring"]).encode())
        for b in batch_ids(self.commits):
            if b <= through:
                self.marker(b).unlink(missing_ok=True)
        for b in batch_ids(self.manifests):
            if b < through:
                (self.manifests / f"{b:020d}.json").unlink(missing_ok=True)
        intent = self.manifests / "folding.json"
        if intent.is_file() and json.loads(intent.read_text())["through"] <= through:
            intent.unlink()
        return m

    def _expire(self, retention_seconds: float) -> None:
        """Delete the files retired longer ago than ``retention_seconds`` (their record's time)."""
        if not self.manifests.is_dir():
            return
        now = time.time()
        for name in sorted(os.listdir(self.manifests)):
            path = self.manifests / name
            if (
                name.startswith("retired-")
                and name.endswith(".json")
                and now - path.stat().st_mtime >= retention_seconds
            ):
                for rel in json.loads(path.read_text()):
                    (self.dir / rel).unlink(missing_ok=True)
                path.unlink()


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


def change_log_files(target_dir: str | Path) -> list[str]:
    """The absolute paths of every committed change-log file, in batch order."""
    log = ChangeLog(target_dir)
    return [str(log.dir / rel) for rel in log.files()]


def read_change_log(spark: Any, target_dir: str | Path) -> Any:
    """The committed change log as a Spark DataFrame, with ``table_name`` (``database.table``,
    or the database of a database statement) and ``date`` (of ``ts``, UTC): the partition values."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    files = change_log_files(target_dir)
    schema = from_arrow_schema(CHANGELOG_SCHEMA)
    df = spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
    database, table = F.col("database"), F.col("table")
    name = F.when(table.isNotNull(), F.concat(F.coalesce(database, F.lit("")), F.lit("."), table)).when(
        database != "", database
    )
    day = F.date_from_unix_date(F.floor(F.unix_micros("ts") / F.lit(86_400_000_000)).cast("int"))
    return df.select(*schema.names).withColumn("table_name", name).withColumn("date", day)
