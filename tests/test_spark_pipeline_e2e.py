"""Issue 6's end-to-end test: a random shop workload with DDL streams from the private MariaDB
through a pycanal server into the lake (``pycanal pipeline``, its own driver process), on ``local[*]`` and on a Spark standalone cluster (where
the executors write the current-state tables);
the driver is SIGKILLed mid-stream (its whole process group: Python, JVM, workers) and started
again from its checkpoint. At the end every table equals its source value by value, and the
change log holds every row change of the binlog exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline_helpers import await_exactly_once, commits, embedded_server, stop_job
from pycanal.binlog.reader import read_events
from pycanal.demo import SCHEMA, TABLES, Workload
from pycanal.parse.filter import TableFilter
from pycanal.spark.check import compare_table
from pycanal.spark.event_rows import EventRows
from pycanal.testing import PrivateMariaDB
from spark_fixtures import spark  # noqa: F401

pytestmark = pytest.mark.mariadb


@pytest.fixture
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=52, binlog_row_metadata="FULL") as server:
        yield server


def start_job(
    lake: Path, port: int, log: Path, master: str, progress: bool = False, cache: Path | None = None
) -> subprocess.Popen:
    """The job, ``pycanal pipeline`` (``progress``: a progress line a second); on a cluster the
    executors write the current-state tables (``--apply-on executors``). ``cache``: another cache
    directory (where no class archive was made)."""
    command = ["pycanal.cli", "pipeline", *(["--progress", "1"] if progress else [])]
    env = os.environ | ({"PYCANAL_CACHE_DIR": str(cache)} if cache is not None else {})
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *command, "--address", f"127.0.0.1:{port}"]
            + [
                "--destination",
                "shop",
                "--filter",
                "shop\\..*",
                "--lake",
                str(lake),
                "--trigger",
                "500 milliseconds",
                "--master",
                master,
                "--apply-on",
                "driver" if master.startswith("local") else "executors",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and the workers die with it
            env=env,
        )


def binlog_positions(db: PrivateMariaDB, start: tuple[str, int]) -> list[tuple]:
    db.flush_binary_logs()
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start[0]) : -1]]

    def events():
        for path in files:
            yield from read_events(path, start_position=start[1] if path.name == start[0] else None)

    return [
        (r.op, r.position.file, r.position.offset, r.position.row)
        for r in EventRows(accepts=TableFilter("shop\\..*")).rows(events())
    ]


# On the standalone cluster alone: the local master's kill and restart are the restart backlog's
# (test_spark_restart_backlog, both apply modes).
@pytest.mark.parametrize("cluster", ["cluster"], indirect=True)
def test_driver_sigkill_exactly_once(
    db: PrivateMariaDB,
    cluster: Any,
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    master = cluster.master_url if cluster is not None else "local[*]"
    start = db.current_binlog()
    server, tcp = embedded_server(db, "shop", start, "shop\\..*")
    lake = tmp_path / "lake"
    log = tmp_path / "job.log"
    job = start_job(lake, tcp.port, log, master, cache=tmp_path / "no-archive")
    try:
        for ddl in SCHEMA:
            db.execute(ddl)
        deadline = time.monotonic() + 120
        while commits(lake) < 1:  # the job runs (Spark started): the workload's clock starts now
            assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        work = Workload(db, seconds=20)
        writer = threading.Thread(target=work.run)
        writer.start()
        while commits(lake) < 3:  # a few batches applied, the stream well under way
            assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        assert not work.done.is_set(), "the workload ended before the driver was killed"
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        killed_at = commits(lake)
        time.sleep(2)  # the workload goes on while no driver runs
        job = start_job(lake, tcp.port, log, master, progress=True)
        writer.join()
        assert work.error is None, work.error
        expected = binlog_positions(db, start)
        await_exactly_once(lake, expected, job, log, 180)
        assert commits(lake) > killed_at
        with db.root_connection("shop") as conn:
            for table, key in TABLES.items():
                check = compare_table(conn, lake, "shop", table, key)
                assert check.equal, f"{table}: {check.first_difference}"
                assert check.source_rows > 0
                check = compare_table(conn, lake, "shop", table, key, spark=spark)
                assert check.equal, f"{table} read by Spark's Delta: {check.first_difference}"
        assert "applied up to batch" in log.read_text()  # pycanal pipeline's progress lines
        assert f"(master {master})" in log.read_text()
        # The first driver had no class archive and said how to make one; the second mapped this
        # machine's (scripts/setup.sh made it) and said nothing.
        assert log.read_text().count("python -m pycanal.spark.jvm") == 1
        if cluster is not None:  # the executors on both workers read the source's partitions
            for n in (1, 2):
                assert list((cluster.root / f"worker{n}").glob("app-*/*/stderr")), f"worker {n} ran nothing"
        lag = subprocess.run([sys.executable, "-m", "pycanal.cli", "lag", "--lake", str(lake)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert {line.split("\t")[0] for line in lag.stdout.splitlines()} == {f"shop.{t}" for t in TABLES}
    finally:
        stop_job(job)
        tcp.stop()
        server.stop()
