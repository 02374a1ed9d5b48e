"""The job's Spark processes: the driver JVM's flags, its checkpoint file manager, and the Python Spark starts
(``pycanal-spark-python``) importing pyspark from its installed package (cached bytecode), not
from ``pyspark.zip``; another Spark installation's path is left as it is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyspark

from pycanal.spark.python import spark_extras
from pycanal.spark.session import CHECKPOINT_FILE_MANAGER, checkpoint_logs, spark_python
from spark_fixtures import spark  # noqa: F401

HOME = os.path.dirname(pyspark.__file__)
SITE = os.path.dirname(HOME)
ZIPS = [f"{HOME}/python/lib/pyspark.zip", f"{HOME}/python/lib/py4j-0.10.9.9-src.zip"]


def test_the_zips_of_the_installed_package_are_copies():
    assert spark_extras(["", *ZIPS, "/x", SITE], HOME) == ZIPS
    core = f"{HOME}/jars/spark-core_2.13-4.2.0.jar"  # Spark adds it for installations with pyspark in it
    assert spark_extras([*ZIPS, "/x/their.jar", core, SITE], HOME) == [*ZIPS, core]


def test_another_spark_installation_keeps_its_zips():
    other = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-src.zip", SITE]
    assert spark_extras(other, "/opt/spark") == []  # its own pyspark is the zip's
    assert spark_extras(["", *ZIPS], HOME) == []  # no installed package on the path
    assert spark_extras([*ZIPS, SITE], None) == []


def test_the_command_runs_python_without_the_zips(tmp_path: Path):
    """As Spark starts it: the zips first on PYTHONPATH, SPARK_HOME the package."""
    assert Path(spark_python()).name == "pycanal-spark-python"  # installed beside the interpreter
    zips = [z for z in ZIPS if os.path.exists(z)]
    assert zips, ZIPS
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*zips, str(tmp_path)]), "SPARK_HOME": HOME}
    code = "import sys, pyspark, py4j; print(pyspark.__file__); print(sys.executable); print(sys.path)"
    out = subprocess.run([spark_python(), "-c", code], env=env, capture_output=True, text=True, check=True)
    pyspark_file, executable, path = out.stdout.splitlines()
    assert pyspark_file.startswith(HOME) and ".zip" not in pyspark_file, pyspark_file
    assert executable == sys.executable
    assert str(tmp_path) in path and not any(z in path for z in zips)  # the rest of PYTHONPATH kept
    env["SPARK_HOME"] = "/opt/spark"  # another installation: the path as Spark gave it
    out = subprocess.run([spark_python(), "-c", code], env=env, capture_output=True, text=True, check=True)
    assert ".zip" in out.stdout.splitlines()[0]


def test_workers_import_pyspark_from_the_package(spark):  # noqa: F811
    files = spark.sparkContext.parallelize([0, 1], 2).map(
        lambda _: __import__("pyspark.worker").worker.__file__
    )
    for f in files.collect():
        assert ".zip" not in f and f.startswith(HOME), f


def test_the_driver_side_planners_import_pyspark_from_the_package(spark):  # noqa: F811
    """The Python the driver's JVM starts for its planners (the data sources' lookup, run twice
    at a session's first query) is ``PYSPARK_DRIVER_PYTHON``: started as the JVM starts it, with
    the zips first on its path, it imports pyspark from the package (from the zip it took 1.0 s
    of CPU a process, 0.2 s from the package)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(ZIPS), "SPARK_HOME": HOME}
    out = subprocess.run(
        [os.environ["PYSPARK_DRIVER_PYTHON"], "-c", "import pyspark.sql.worker.lookup_data_sources as m; print(m.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert ".zip" not in out and out.startswith(HOME), out


def test_the_driver_jvm_runs_with_the_measured_flags(spark):  # noqa: F811
    """spark_session's JVM flags reach the JVM (C1 only, ParallelGC: docs/benchmarks.md, "Spark pipeline")."""
    bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    args = list(bean.getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in args and "-XX:+UseParallelGC" in args, args


def test_pipelines_write_their_logs_through_the_filesystem_api(spark, tmp_path: Path):  # noqa: F811
    """start_pipeline's checkpoint file manager is set where the session has none (a user's
    stays), and it is a class of this PySpark: a query starts and commits with it (an unknown
    class fails the query's start)."""
    key, manager = CHECKPOINT_FILE_MANAGER
    before = spark.conf.get(key, None)
    try:
        spark.conf.unset(key)
        checkpoint_logs(spark)
        assert spark.conf.get(key) == manager
        spark.conf.set(key, "com.example.TheirManager")
        checkpoint_logs(spark)
        assert spark.conf.get(key) == "com.example.TheirManager"
        spark.conf.set(key, manager)
        batches = []
        query = (
            spark.readStream.format("rate").option("rowsPerSecond", 5).load()
            .writeStream.foreachBatch(lambda df, batch_id: batches.append(batch_id))
            .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="100 milliseconds").start()
        )  # fmt: skip
        try:
            time.sleep(1.5)  # the rate source's first rows
            query.processAllAvailable()
        finally:
            query.stop()
        assert batches and (tmp_path / "cp" / "commits" / str(batches[-1])).is_file()
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def test_the_canal_source_imports_no_server():
    """Every Python process Spark starts imports the source's module: not the server's stack
    (its instances, parsers, deployer), which the client's HA election once pulled in, nor the
    snapshot's (connectorx, the lake's writers), which only a query that snapshots needs."""
    code = "import sys, pycanal.spark.canal_source; print(sorted(m for m in sys.modules if m.startswith('pycanal.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in (
        "pycanal.deployer.controller",
        "pycanal.server.embedded",
        "pycanal.instance",
        "pycanal.parse.parser",
        "pycanal.spark.snapshot",
        "pycanal.spark.chunk_files",
    ):
        assert f"'{heavy}'" not in out, out


def test_workers_have_only_the_package_jars_that_hold_python_on_their_path(spark):  # noqa: F811
    """Spark puts every ``--packages`` jar on the Python path of its processes; the session keeps
    there only those with Python (Delta's), and the wrapper takes Spark's core jar off: the
    directory of none of the others is read by an import walking the path."""
    import zipfile

    def jars(_: Any) -> Any:
        import sys

        yield [p for p in sys.path if p.endswith(".jar")]

    (found,) = spark.sparkContext.parallelize([0], 1).mapPartitions(jars).collect()
    assert found and all(any(n.endswith(".py") for n in zipfile.ZipFile(j).namelist()) for j in found), found
    assert any("delta-spark" in os.path.basename(j) for j in found), found
    assert not [p for p in sys.path if p.endswith(".jar") and p not in found and "userFiles" in p]


def test_the_worker_daemon_forks_with_the_reads_modules_imported(spark: Any) -> None:  # noqa: F811
    """The task workers' daemon is pycanal's, which imports what pycanal's reads use (and
    pyarrow's pandas check) and freezes them before it forks; other daemons preload nothing."""
    from pycanal.spark.daemon import PRELOAD

    def probe(_: Any) -> list[Any]:
        import gc
        import os
        import sys

        with open(f"/proc/{os.getppid()}/cmdline") as f:
            parent = f.read().split("\0")
        return [parent, gc.get_freeze_count() > 0, [m for m in PRELOAD if m in sys.modules]]

    [(parent, frozen, loaded)] = spark.sparkContext.parallelize([0], 1).map(probe).collect()
    assert parent[1:4] == ["-m", "pycanal.spark.daemon", "pyspark.worker"]
    assert frozen and loaded == list(PRELOAD)
    code = (
        "import sys, gc; from pycanal.spark.daemon import preload; preload(); "
        "print(gc.get_freeze_count() > 0, 'pandas' in sys.modules, 'pycanal.spark.chunk_files' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "True", "True"]
