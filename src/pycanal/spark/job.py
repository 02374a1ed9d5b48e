"""The streaming job: a pycanal (or Canal) server's changes applied to a lake, exactly once.

    pycanal pipeline --address 127.0.0.1:11111 --destination example --lake /lake/shop [--master URL]
    pycanal pipeline --kafka 127.0.0.1:9092 --topic example --lake /lake/shop

is ``spark.readStream.format("canal") -> foreachBatch(ChangeApplier(background=True))`` (the
current state of a micro-batch is applied while Spark reads the next one), or Spark's
``format("kafka")`` over Canal's topics, decoded in the executors (``kafka_rows.KafkaApplier``),
with the checkpoint under ``<lake>/_checkpoint`` (with a micro-batch's Kafka offsets): killed at any moment
(SIGKILL included) and started again, it resumes from its checkpoint and the server's cursor (or
the offsets), and the tables end up as if it never stopped.
SIGTERM/SIGINT stop the query cleanly. ``--master`` (default ``local[*]``) runs it on a Spark
cluster (``spark://host:7077``); under ``spark-submit``, ``--master ''`` leaves the master to it.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from pycanal.heap import settle
from pycanal.storage import LakePath, lake_path

from .apply import ChangeApplier
from .canal_options import SIGNALS_MARK, check_trigger, source_options, stage_dir
from .maintenance import Maintenance
from .session import DRIVER_JAVA_OPTIONS, checkpoint_logs, lake_options, spark_session

__all__ = [
    "Pipeline",
    "failure",
    "kafka_stream",
    "progress_line",
    "run",
    "snapshot_progress",
    "start_pipeline",
]


class Pipeline(NamedTuple):
    """A running pipeline: the streaming query and its applier (current state in the background)."""

    query: Any
    applier: ChangeApplier

    def stop(self) -> None:
        """Stop the query, then wait for the last batch's current state (and raise its error)."""
        self.query.stop()
        self.applier.wait()


def kafka_stream(spark: Any, options: dict[str, str]) -> Any:
    """Spark's Kafka source over Canal's topics (``kafka_options``), its offset ranges cut into at
    least the session's default parallelism (and 2) tasks: a topic of one partition, Canal's
    default, would be one task a micro-batch, decoding while the other cores wait."""
    parts = max(2, spark.sparkContext.defaultParallelism)
    return spark.readStream.format("kafka").options(**options, minPartitions=str(parts)).load()


def start_pipeline(
    spark: Any,
    lake: str | Path | LakePath,
    *,
    trigger: str = "1 second",
    zero_dates: str = "null",
    apply_threads: int = 2,
    apply_share: float = 1.0,
    apply_on: str = "driver",
    maintenance: Maintenance | None = None,
    cache_mb: int = 256,
    **source: Any,
) -> Pipeline:
    """Start the query (``source``: ``source_options``' keywords, the server, the filter and the
    snapshot; ``apply_threads``: current-state tables written at once; ``apply_share``: the share
    of the time their apply may take and ``apply_on`` where it runs (``"driver"`` or
    ``"executors"``, ``ChangeApplier``); ``maintenance``: their upkeep, default
    ``Maintenance()``; ``cache_mb``: rows of their recently written files kept in the driver's
    memory). The session's checkpoint file manager, where unset, becomes
    ``session.CHECKPOINT_FILE_MANAGER``'s (``session.checkpoint_logs``)."""
    lake = lake_path(lake)
    options = source_options(lake, **source)
    check_trigger(trigger)
    if "snapshotSignals" in options:  # where `pycanal snapshot` looks for a pipeline
        (lake_path(options["snapshotSignals"]) / SIGNALS_MARK).write_text("", sync=True)
    checkpoint_logs(spark)  # the checkpoint is under the lake
    applier = ChangeApplier(
        lake, zero_dates=zero_dates, background=True, apply_threads=apply_threads, maintenance=maintenance,
        cache_bytes=cache_mb << 20, apply_share=apply_share, apply_on=apply_on,
    )  # fmt: skip
    if "kafka.bootstrap.servers" in options:
        from .kafka_rows import KafkaApplier

        changes = kafka_stream(spark, options)
        stage = stage_dir(lake) if source.get("stage", True) else None  # as the canal source's
        batches: Any = KafkaApplier(applier, lake, dataframe=apply_on == "executors", stage=stage)
    else:
        changes, batches = spark.readStream.format("canal").options(**options).load(), applier
    query = (
        changes.writeStream.foreachBatch(batches)
        .option("checkpointLocation", (lake / "_checkpoint").spark_uri)
        .trigger(processingTime=trigger)
        .start()
    )
    settle()  # the driver: Spark, py4j and pyarrow alive for the query's life
    return Pipeline(query, applier)


# A pycanal error as a Python traceback's last line shows it.
_PYCANAL_ERROR = re.compile(r"^pycanal\.[\w.]+Error: (.+)$", re.M)


def failure(exc: object) -> str:
    """What a failed query says: the message of the pycanal error that failed it (raised in an
    executor or in ``foreachBatch``, it reaches the driver inside Spark's and py4j's tracebacks),
    else Spark's whole text."""
    found = _PYCANAL_ERROR.search(str(exc))
    return found[1] if found else str(exc)


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
    lake = lake_path(lake)
    local = lake.local / "_spark-tmp" if lake.is_local else Path(tempfile.gettempdir()) / "pycanal-spark-tmp"
    spark = spark_session(
        local, "pycanal-job", master=master, java_options=java_options, class_archive=class_archive,
        conf=lake_options(lake),
    )  # fmt: skip
    pipeline = start_pipeline(spark, lake, **options)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    what = options.get("topic") or options.get("topic_pattern") or options.get("destination", "example")
    print(f"pycanal job: streaming {what} into {lake} "
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
                    f"pycanal job: the query failed: {failure(pipeline.query.exception())}",
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
