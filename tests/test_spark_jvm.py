"""The driver JVM's class archive (pycanal.spark.jvm): named after Java and Spark, made by a
training run, and mapped by a driver JVM that must use it (``-Xshare:on`` fails otherwise)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pycanal.spark.jvm import make_class_archive
from pycanal.spark.session import DRIVER_JAVA_OPTIONS, archive_options, class_archive, local_options

pytestmark = pytest.mark.skipif(class_archive() is None, reason="no Java")

_SESSION = """
import sys
from pycanal.spark.session import spark_session
spark = spark_session(sys.argv[1], master="local[1]", java_options=sys.argv[2], class_archive=sys.argv[3])
assert spark.range(1000).selectExpr("id % 3 AS m").groupBy("m").count().count() == 3
# the driver's address went to the JVM it started, and no further: a session made later in this
# process (another master) chooses its own
import os
assert spark._jvm.System.getenv("SPARK_LOCAL_IP") == "127.0.0.1" and "SPARK_LOCAL_IP" not in os.environ
spark.stop()
"""


def _session(tmp_path: Path, archive: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            _SESSION,
            str(tmp_path / "local"),
            f"{DRIVER_JAVA_OPTIONS} -Xshare:on",
            str(archive),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"},
    )


def test_the_archive_is_named_after_java_and_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = class_archive(tmp_path)
    assert mine is not None and mine.parent == tmp_path and mine == class_archive(tmp_path)
    with pytest.raises(ValueError, match=f"class archive {mine}: no such file"):
        archive_options(mine)  # named but not made: an error, not a silent run without it
    mine.write_bytes(b"x")
    assert archive_options(mine) == f"-XX:SharedArchiveFile={mine}"
    assert archive_options(None) == ""
    monkeypatch.setenv("PYCANAL_CACHE_DIR", str(tmp_path / "empty"))
    assert archive_options("auto") == ""  # this machine's, not made: nothing to map
    monkeypatch.setenv("PYCANAL_CACHE_DIR", str(tmp_path))
    assert archive_options("auto") == f"-XX:SharedArchiveFile={mine}"

    other = tmp_path / "jdk"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "java").write_text("#!/bin/sh\n")
    (other / "release").write_text('JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("JAVA_HOME", str(other))
    theirs = class_archive(tmp_path)
    assert theirs is not None and theirs != mine  # another JVM uses none of this one's archive
    monkeypatch.setenv("PYCANAL_CACHE_DIR", str(tmp_path / "cache"))
    assert class_archive().parent == tmp_path / "cache"


def test_a_made_archive_is_mapped_by_the_driver_jvm(tmp_path: Path) -> None:
    # The one scripts/setup.sh made (make_class_archive too), or a new one: a training run is ~40 s.
    archive = class_archive()
    if archive is None or not archive.is_file():
        archive = make_class_archive(DRIVER_JAVA_OPTIONS, tmp_path / "spark.jsa")
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert archive.is_file() and archive.stat().st_size > 10 << 20
    done = _session(tmp_path, archive)
    assert done.returncode == 0, done.stderr[-3000:]

    # The check bites: with -Xshare:on a JVM that cannot map its archive does not start.
    broken = tmp_path / "broken.jsa"
    broken.write_bytes(os.urandom(1 << 16))
    failed = _session(tmp_path, broken)
    assert failed.returncode != 0


def test_local_sessions_replay_and_list_in_as_many_tasks_as_threads() -> None:
    """Delta's 50 tasks to rebuild a snapshot and Spark's up to 10,000 to list a table for VACUUM
    are a cluster's: local[N] gets N (the first query after another writer's commits 10-20 s ->
    1-2 s here); a cluster's master keeps Spark's and Delta's defaults."""
    keys = (
        "spark.databricks.delta.snapshotPartitions",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism",
    )
    assert local_options("local[3]") == dict.fromkeys(keys, "3")
    assert local_options("local[2,4]") == dict.fromkeys(keys, "2")
    assert local_options("local") == dict.fromkeys(keys, "1")
    assert local_options("local[*]") == dict.fromkeys(keys, str(os.cpu_count()))
    assert local_options("spark://host:7077") == local_options(None) == local_options("yarn") == {}
