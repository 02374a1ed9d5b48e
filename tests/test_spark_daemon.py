"""The job's Spark processes: the driver JVM's flags, and (pycanal.spark.daemon) Spark's Python
workers importing pyspark from its installed package (with cached bytecode), not from
``pyspark.zip``; another Spark installation's path is left as it is."""

from __future__ import annotations

import os

import pyspark

from pycanal.spark.daemon import installed_first
from spark_fixtures import spark  # noqa: F401

HOME = os.path.dirname(pyspark.__file__)
SITE = os.path.dirname(HOME)
ZIPS = [f"{HOME}/python/lib/pyspark.zip", f"{HOME}/python/lib/py4j-0.10.9.9-src.zip"]


def test_the_zips_of_the_installed_package_go_last():
    path = ["", *ZIPS, "/x", SITE]
    assert installed_first(path, HOME) == ["", "/x", SITE, *ZIPS]


def test_another_spark_installation_keeps_its_path():
    other = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-src.zip", SITE]
    assert installed_first(other, "/opt/spark") == other  # its own pyspark is the zip's
    assert installed_first(["", *ZIPS], HOME) == ["", *ZIPS]  # no installed package on the path
    assert installed_first([*ZIPS, SITE], None) == [*ZIPS, SITE]


def test_workers_import_pyspark_from_the_package(spark):  # noqa: F811
    files = spark.sparkContext.parallelize([0, 1], 2).map(
        lambda _: __import__("pyspark.worker").worker.__file__
    )
    for f in files.collect():
        assert ".zip" not in f and f.startswith(HOME), f


def test_the_driver_jvm_runs_with_the_measured_flags(spark):  # noqa: F811
    """spark_session's JVM flags reach the JVM (C1 only, ParallelGC: docs/benchmarks.md, stop 28)."""
    bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    args = list(bean.getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in args and "-XX:+UseParallelGC" in args, args
