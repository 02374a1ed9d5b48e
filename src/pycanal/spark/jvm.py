"""A class-data-sharing archive of Spark's classes for the driver JVM (AppCDS).

A driver JVM loads and verifies ~18,500 classes from Spark's jars by the end of its first
query; mapped from an archive written by an earlier JVM they cost a fraction of that:
a ``SparkSession`` up in 3.6-4.5 s instead of 5.8-7.1 s and its first query in 1.2-1.4 s instead of
2.2-3.1 s here (docs/benchmarks.md, "The lake with many tables"). The archive (Java's dynamic archive,
``-XX:ArchiveClassesAtExit``) is written once per machine by ``python -m pycanal.spark.jvm``
(``scripts/setup.sh`` runs it): a JVM with the driver's flags runs the kinds of work a pipeline
does (a Python streaming source, ``foreachBatch``, Arrow to Python, a shuffle), then exits and
dumps the classes it loaded. It is named after the Java build, the pyspark version and its jars,
so a JVM or Spark upgrade uses none until it is made again; a JVM that cannot use an archive
(another class path) warns and starts as without one. Where it lives and how a session maps it:
``pycanal.spark.session``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from .session import DRIVER_JAVA_OPTIONS, class_archive, spark_session

__all__ = ["make_class_archive"]


def make_class_archive(java_options: str, path: Path | None = None) -> Path:
    """Make the archive (``path``: this machine's) by a training run in a new process; the path."""
    path = path or class_archive()
    if path is None:
        raise RuntimeError("no Java: neither $JAVA_HOME/bin/java nor java on PATH")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pycanal.spark.jvm",
                "--train",
                str(tmp),
                f"--java-options={java_options}",
            ],
            check=True,
        )
        if not tmp.is_file():
            raise RuntimeError(f"the training JVM wrote no class archive at {tmp}")
        os.replace(tmp, path)  # whole or not at all, whoever else makes it at the same time
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _train(out: Path, java_options: str) -> None:
    """The training run: a pipeline's kinds of work, then a normal JVM exit (which dumps)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Counter(DataSourceStreamReader):
        def initialOffset(self) -> dict:
            return {"n": 0}

        def latestOffset(self) -> dict:
            self.n = getattr(self, "n", 0) + 100
            return {"n": self.n}

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            return [InputPartition((start["n"], end["n"]))]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            low, high = partition.value
            yield pa.record_batch({"id": pa.array(range(low, high), pa.int64())})

    class CounterSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pycanal_training"

        def schema(self) -> str:
            return "id long"

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return Counter()

    with tempfile.TemporaryDirectory(prefix="pycanal-cds-") as tmp:
        spark: SparkSession = spark_session(
            Path(tmp) / "local", "pycanal-class-archive", master="local[2]",
            java_options=f"{java_options} -XX:ArchiveClassesAtExit={out} -Xlog:cds*=off", class_archive=None,
        )  # fmt: skip
        proc = spark.sparkContext._gateway.proc
        spark.dataSource.register(CounterSource)
        batches: list[int] = []
        query = (
            spark.readStream.format("pycanal_training")
            .load()
            .writeStream.foreachBatch(lambda df, i: batches.append(df.toArrow().num_rows))
            .option("checkpointLocation", str(Path(tmp) / "checkpoint"))
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        while len(batches) < 3 and query.exception() is None:
            query.awaitTermination(0.2)
        query.stop()
        df = spark.range(10_000).selectExpr("id % 7 AS m", "CAST(id AS STRING) AS s")
        df.groupBy("m").count().toArrow()
        spark.stop()
    proc.stdin.close()  # the JVM exits when its stdin closes, and dumps its classes first
    if proc.wait(timeout=300) != 0:
        raise RuntimeError(f"the training JVM exited with {proc.returncode}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Make the driver JVM's class archive, unless made.")
    ap.add_argument("--java-options", default=DRIVER_JAVA_OPTIONS, help="the driver JVM's flags")
    ap.add_argument("--force", action="store_true", help="make it again")
    ap.add_argument("--train", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.train:
        _train(args.train, args.java_options)
        return 0
    path = class_archive()
    if path is not None and path.is_file() and not args.force:
        print(f"pycanal: the driver JVM's class archive: {path}")
        return 0
    print(f"pycanal: the driver JVM's class archive: {make_class_archive(args.java_options, path)} (made)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
