"""The streaming job: a pycanal (or Canal) server's changes applied to a lake, exactly once.

    pycanal pipeline --address 127.0.0.1:11111 --destination example --lake /lake/shop [--master URL]

is ``spark.readStream.format("canal") -> foreachBatch(ChangeApplier(background=True))`` (the
current state of a micro-batch is applied while Spark reads the next one) with the checkpoint
under ``<lake>/_checkpoint``: killed at any moment (SIGKILL included) and started again, it resumes
from its checkpoint and the server's cursor, and the tables end up as if it never stopped.
SIGTERM/SIGINT stop the query cleanly. ``--master`` (default ``local[*]``) runs it on a Spark
cluster (``spark://host:7077``); under ``spark-submit``, ``--master ''`` leaves the master to it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from pycanal.heap import settle

from .apply import ChangeApplier, stage_dir
from .jvm import archive_options
from .maintenance import Maintenance

__all__ = [
    "CHECKPOINT_FILE_MANAGER",
    "DRIVER_JAVA_OPTIONS",
    "Pipeline",
    "checkpoint_logs",
    "progress_line",
    "run",
    "spark_python",
    "spark_session",
    "start_pipeline",
]


# The driver JVM's flags. ParallelGC (research/spark.md). C1 only (no C2 JIT): the rows bypass the
# JVM (staged files), so its own work (scheduling, offsets, markers) runs no slower compiled by C1,
# while C2 spent 2-3 s of CPU compiling during a job's first minute (docs/benchmarks.md, stop 28).
DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:TieredStopAtLevel=1"

# How Spark writes a query's offset and commit logs. Its default (Hadoop's FileContext API) runs a
# `readlink` or `chmod` process for most steps of a log file on a local filesystem where Hadoop has
# no native library (PySpark ships none): 7-12 processes forked by the driver JVM a micro-batch, the
# two logs' 90 ms of a micro-batch on an idle machine (docs/benchmarks.md, stop 33). The FileSystem
# API writes the same temporary file and renames it, with one `chmod` a file: 22 ms. On a local
# filesystem neither API's rename is atomic (both check first that the target does not exist).
CHECKPOINT_FILE_MANAGER = (
    "spark.sql.streaming.checkpointFileManagerClass",
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
)


def checkpoint_logs(spark: Any) -> None:
    """The session's ``spark.sql.streaming.checkpointFileManagerClass``, where unset, becomes
    ``CHECKPOINT_FILE_MANAGER``'s (a query's logs in a local or mounted directory)."""
    key, manager = CHECKPOINT_FILE_MANAGER
    if spark.conf.get(key, None) is None:
        spark.conf.set(key, manager)


def spark_python() -> str:
    """The Python Spark's processes run: ``pycanal-spark-python`` beside this interpreter
    (``pycanal.spark.python``), or this interpreter where that command is not installed."""
    launcher = Path(sys.executable).with_name("pycanal-spark-python")
    return str(launcher) if os.access(launcher, os.X_OK) else sys.executable


def spark_session(
    local_dir: str | Path,
    app: str = "pycanal",
    master: str | None = "local[*]",
    java_options: str = DRIVER_JAVA_OPTIONS,
    class_archive: str | Path | None = "auto",
) -> Any:
    """A SparkSession with the settings measured on this kind of machine
    (/work/shared/research/spark.md) and pycanal's sources registered. ``master``: Spark's master
    URL (``local[*]``, ``spark://host:7077``, ...); None leaves it to ``spark-submit``.
    ``java_options``: the driver JVM's flags (where this call starts the JVM; under
    ``spark-submit``, its ``--driver-java-options``), with ``class_archive`` mapped
    (``pycanal.spark.jvm``: "auto" is this machine's archive where it was made; None: none)."""
    if class_archive is not None and "SharedArchiveFile" not in java_options:
        java_options = f"{java_options} {archive_options(class_archive)}".strip()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = spark_python()  # this venv (pyarrow, pycanal), pyspark not from its zip
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from . import register

    Path(local_dir).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    spark = (
        builder.appName(app)
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.local.dir", str(local_dir))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


class Pipeline(NamedTuple):
    """A running pipeline: the streaming query and its applier (current state in the background)."""

    query: Any
    applier: ChangeApplier

    def stop(self) -> None:
        """Stop the query, then wait for the last batch's current state (and raise its error)."""
        self.query.stop()
        self.applier.wait()


def start_pipeline(
    spark: Any,
    lake: str | Path,
    *,
    address: str | None = None,
    zk_servers: str | None = None,
    destination: str = "example",
    client_id: int = 1001,
    filter: str = "",
    user: str = "",
    password: str = "",
    trigger: str = "1 second",
    zero_dates: str = "null",
    batch_size: int | None = None,
    batch_bytes: int | None = None,
    apply_threads: int = 2,
    apply_share: float = 1.0,
    apply_on: str = "driver",
    maintenance: Maintenance | None = None,
    cache_mb: int = 256,
    stage: bool = True,
    snapshot: str = "never",
    source: str = "",
    source_user: str = "",
    source_password: str = "",
    snapshot_chunk_rows: int | None = None,
    snapshot_parallelism: int | None = None,
    snapshot_reader: str | None = None,
    snapshot_server_ids: str | None = None,
    stall_timeout: float | None = None,
) -> Pipeline:
    """Start the query (``batch_size``, ``batch_bytes``: the source's ``batchSize`` and
    ``batchBytes``, entries and bytes per micro-batch; ``apply_threads``: current-state tables
    written at once; ``apply_share``: the share of the time their apply may take and ``apply_on`` where it runs
    (``"driver"`` or ``"executors"``, ``ChangeApplier``);
    ``maintenance``: their upkeep, default ``Maintenance()``; ``cache_mb``: rows
    of their recently written files kept in the driver's memory; ``stage``: the executors hand
    the rows to the driver as files in the lake's stage, not through Spark; ``snapshot``
    ``"initial"``: the existing rows of the filter's tables first, read from ``source``
    (HOST:PORT) as ``source_user``, see ``pycanal.spark.snapshot`` (``snapshot_reader``,
    ``snapshot_server_ids``: its options ``snapshotReader``, ``snapshotServerIds``;
    ``stall_timeout``: its ``stallTimeout``, seconds without progress before its watchdog acts); with a
    ``source`` the pipeline also takes ad-hoc snapshot requests, ``pycanal snapshot --lake``).
    The session's checkpoint file manager, where unset, becomes ``CHECKPOINT_FILE_MANAGER``'s
    (``checkpoint_logs``)."""
    lake = Path(lake).resolve()
    reader = spark.readStream.format("canal").option("destination", destination)
    reader = reader.option("clientId", str(client_id)).option("filter", filter)
    if stage:
        reader = reader.option("stage", str(stage_dir(lake)))
    if address:
        reader = reader.option("address", address)
    if zk_servers:
        reader = reader.option("zkServers", zk_servers)
    if user:
        reader = reader.option("user", user).option("password", password)
    if batch_size:
        reader = reader.option("batchSize", str(batch_size))
    if batch_bytes:
        reader = reader.option("batchBytes", str(batch_bytes))
    if stall_timeout is not None:
        reader = reader.option("stallTimeout", str(stall_timeout))
    if snapshot != "never" or source:
        reader = reader.option("snapshot", snapshot).option("source", source)
        reader = reader.option("sourceUser", source_user).option("sourcePassword", source_password)
        requests = snapshot_requests(lake)
        requests.mkdir(parents=True, exist_ok=True)  # where `pycanal snapshot` looks for a pipeline
        reader = reader.option("snapshotSignals", str(requests))
        if snapshot_chunk_rows:
            reader = reader.option("snapshotChunkRows", str(snapshot_chunk_rows))
        if snapshot_parallelism:
            reader = reader.option("snapshotParallelism", str(snapshot_parallelism))
        if snapshot_reader:
            reader = reader.option("snapshotReader", snapshot_reader)
        if snapshot_server_ids:
            reader = reader.option("snapshotServerIds", snapshot_server_ids)
    checkpoint_logs(spark)  # the checkpoint is under the lake: a local (or mounted) path
    applier = ChangeApplier(
        lake, zero_dates=zero_dates, background=True, apply_threads=apply_threads, maintenance=maintenance,
        cache_bytes=cache_mb << 20, apply_share=apply_share, apply_on=apply_on,
    )  # fmt: skip
    query = (
        reader.load()
        .writeStream.foreachBatch(applier)
        .option("checkpointLocation", str(lake / "_checkpoint"))
        .trigger(processingTime=trigger)
        .start()
    )
    settle()  # the driver: Spark, py4j and pyarrow alive for the query's life
    return Pipeline(query, applier)


def snapshot_requests(lake: str | Path) -> Path:
    """Where a pipeline into ``lake`` takes ad-hoc snapshot requests from."""
    return Path(lake).resolve() / "_pycanal" / "snapshot-requests"


def snapshot_progress(query: Any) -> str | None:
    """``"done"``, ``"N tables left, at db.table"`` or None (no snapshot): from the end offset
    of the query's last micro-batch."""
    for progress in reversed(query.recentProgress):
        for source in progress.get("sources", []):
            end = source.get("endOffset")
            try:
                snap = (json.loads(end) if isinstance(end, str) else end or {}).get("snap")
            except (ValueError, AttributeError):
                continue
            if snap == "done":
                return "done"
            if isinstance(snap, dict):
                left = snap.get("left", [])
                return f"{len(left)} tables left" + (f", at {left[0][0]}.{left[0][1]}" if left else "")
    return None


def source_stuck(query: Any) -> str | None:
    """ "N entries held for S s" when the source's last report (its ``latestOffset`` in Spark's
    progress) says it holds entries it has planned nothing from; None otherwise."""
    for source in (query.lastProgress or {}).get("sources", []):
        latest = source.get("latestOffset")
        try:
            report = json.loads(latest) if isinstance(latest, str) else latest or {}
        except ValueError:
            continue
        if isinstance(report, dict) and report.get("stuck", 0) >= 5:
            return f"{report.get('queued', 0)} entries held for {report['stuck']:.0f} s"
    return None


def progress_line(pipeline: Pipeline, lake: str | Path) -> str:
    """One line of progress: micro-batches and rows taken, the last batch applied to the current
    state and how far behind the source it is (and the initial snapshot's progress)."""
    from .apply import last_applied

    q = pipeline.query

    def rows_of(p: dict[str, Any]) -> int:  # a staged snapshot chunk is one input row to Spark
        return pipeline.applier.rows_in.get(p.get("batchId", -1), p.get("numInputRows", 0))

    rows = sum(rows_of(p) for p in q.recentProgress)
    last = q.lastProgress or {}
    applied = last_applied(lake)
    behind = (
        f"{time.time() - applied['source_time']:.1f} s behind"
        if applied and applied.get("source_time")
        else "-"
    )
    snapshot = snapshot_progress(q)
    stuck = source_stuck(q)
    return (
        f"batch {last.get('batchId', '-')}: {rows_of(last) if last else 0} rows in "
        f"{last.get('durationMs', {}).get('addBatch', 0)} ms; {rows} rows in the last "
        f"{len(q.recentProgress)} batches; applied up to batch "
        f"{applied['batch_id'] if applied else '-'} ({behind})"
        + (f"; snapshot {snapshot}" if snapshot else "")
        + (f"; STALLED: the source made no micro-batch from {stuck} (stallTimeout acts)" if stuck else "")
    )


def run(
    lake: str | Path,
    *,
    master: str | None = "local[*]",
    java_options: str = DRIVER_JAVA_OPTIONS,
    class_archive: str | Path | None = "auto",
    progress_seconds: float = 10.0,
    out: Any = None,
    **options: Any,
) -> int:
    """Run the job until SIGTERM/SIGINT (``options``: ``start_pipeline``'s); a progress line
    every ``progress_seconds`` (0: none). The exit code: 0, or 1 when the query failed."""
    out = out or sys.stdout
    spark = spark_session(
        Path(lake) / "_spark-tmp", "pycanal-job", master=master, java_options=java_options,
        class_archive=class_archive,
    )  # fmt: skip
    pipeline = start_pipeline(spark, lake, **options)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"pycanal job: streaming {options.get('destination', 'example')} into {lake} "
          f"(master {spark.sparkContext.master})", file=out, flush=True)  # fmt: skip
    if class_archive == "auto" and "SharedArchiveFile" not in spark.conf.get(
        "spark.driver.extraJavaOptions", ""
    ):
        print("pycanal job: Spark's classes were loaded one by one: `python -m pycanal.spark.jvm` makes "
              "the archive that starts the next jobs ~2 s sooner (docs/spark.md)", file=out, flush=True)  # fmt: skip
    next_progress = time.monotonic() + progress_seconds
    try:
        while not stop.wait(0.5):
            if pipeline.query.exception() is not None:
                print(
                    f"pycanal job: the query failed: {pipeline.query.exception()}",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
            if progress_seconds and time.monotonic() >= next_progress:
                next_progress += progress_seconds
                print(f"pycanal job: {progress_line(pipeline, lake)}", file=out, flush=True)
        pipeline.stop()
    finally:
        spark.stop()
    return 0
