"""Issue 43: the job SIGKILLed while it drains a backlog, restarted at once, with
the server on Canal's default store (a plain conf dir: 16384 slots, MEMSIZE, the SQL behind rows
events kept): every run ends with the lake equal to the source.

A restarted runner's first GET takes the server's whole store as one batch; with a backlog the
store is full, and where it ends inside a transaction (a transaction reaches the store in two
puts when the transaction buffer flushes at its rows event's SQL) no micro-batch could end on
that batch's last entry, so Spark's commit could never ack it and the stream stood still for
good. Every restart meets a full store, so one kill covers it (a second kill cost ~25 s of the
suite and met the same store). The runner's offsets are the same whichever side applies: the
driver's apply mode here (the executors' went through the same kill until 2026-12-02, 184 s of the
suite's serial lane; it meets a driver SIGKILL in test_spark_cluster_hosts.py). The kill point is
drawn at random (seeded, printed on failure)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline_helpers import stop_job
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.check import compare_table
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port
from spark_fixtures import spark  # noqa: F401

pytestmark = pytest.mark.mariadb

TABLES = 20
RATE = 800  # transactions a second: while a job restarts (~10 s) the store fills (16384 entries)
SEED = int(os.environ.get("PYCANAL_TEST_SEED", "43"))


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=53, binlog_row_metadata="FULL") as server:
        yield server


class Writer(threading.Thread):
    """One-row transactions over the tables at ``rate`` a second (inserts, updates, deletes; each
    changes a row), until stopped."""

    def __init__(self, db: PrivateMariaDB, schema: str, rnd: random.Random, rate: float) -> None:
        super().__init__(daemon=True)
        self.db, self.schema, self.rnd, self.rate = db, schema, rnd, rate
        self.live: list[set[int]] = [set() for _ in range(TABLES)]
        self.next_id = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.written = 0

    def run(self) -> None:
        rnd = self.rnd
        try:
            with self.db.root_connection(self.schema) as conn, conn.cursor() as cur:
                t0 = time.monotonic()
                while not self.stop.is_set():
                    t = rnd.randrange(TABLES)
                    live, r = self.live[t], rnd.random()
                    if r < 0.6 or not live:
                        self.next_id += 1
                        live.add(self.next_id)
                        cur.execute(f"INSERT INTO t{t} VALUES ({self.next_id}, {rnd.randrange(1000)}, 'v')")
                    elif r < 0.9:
                        cur.execute(
                            f"UPDATE t{t} SET v = v + 1, s = 'u' WHERE id = {rnd.choice(sorted(live))}"
                        )
                    else:
                        victim = rnd.choice(sorted(live))
                        live.discard(victim)
                        cur.execute(f"DELETE FROM t{t} WHERE id = {victim}")
                    conn.commit()
                    self.written += 1
                    ahead = self.written / self.rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def plain_conf(root: Path, db: PrivateMariaDB, schema: str, port: int, start: tuple[str, int]) -> Path:
    """Canal's defaults but the addresses, the start, the account and the filter."""
    conf = root / "conf"
    (conf / schema).mkdir(parents=True)
    (conf / "canal.properties").write_text(
        f"canal.ip = 127.0.0.1\ncanal.port = {port}\ncanal.metrics.pull.port = {free_port()}\n"
        f"canal.destinations = {schema}\ncanal.conf.dir = .\ncanal.file.data.dir = {root}/data\n"
    )
    (conf / schema / "instance.properties").write_text(
        f"canal.instance.master.address = {db.host}:{db.port}\n"
        f"canal.instance.master.journal.name = {start[0]}\ncanal.instance.master.position = {start[1]}\n"
        f"canal.instance.dbUsername = {db.repl_user}\ncanal.instance.dbPassword = {db.repl_password}\n"
        f"canal.instance.filter.regex = {schema}\\\\..*\n"
    )
    return conf


def job(lake: Path, port: int, schema: str, apply_on: str, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pycanal.cli", "pipeline", "--address", f"127.0.0.1:{port}"]
            + ["--destination", schema, "--filter", f"{schema}\\..*", "--lake", str(lake)]
            + [
                "--apply-on",
                apply_on,
                "--trigger",
                "500 milliseconds",
                "--progress",
                "2",
                "--stall-timeout",
                "30",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and the workers die with it
        )


def batches(lake: Path) -> int:
    last = ChangeLog(lake).last_batch() if (lake / "_pycanal").is_dir() else None
    return 0 if last is None else last + 1


def equal(db: PrivateMariaDB, lake: Path, schema: str) -> bool:
    """Every table equals its source (the writer has stopped: equal once, equal for good)."""
    with db.root_connection(schema) as conn:
        for t in range(TABLES):
            try:
                if not compare_table(conn, lake, schema, f"t{t}", "id").equal:
                    return False
            except Exception:  # a table not made yet
                return False
    return True


def test_killed_while_draining_a_backlog(
    db: PrivateMariaDB,
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    apply_on = "driver"
    rnd = random.Random(f"{SEED}-{apply_on}")
    schema = f"backlog_{apply_on}"
    start = db.current_binlog()
    db.execute(f"CREATE DATABASE {schema}")
    for t in range(TABLES):
        db.execute(f"CREATE TABLE {schema}.t{t} (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
    port = free_port()
    conf = plain_conf(tmp_path, db, schema, port, start)
    server_log = tmp_path / "server.log"
    with server_log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "pycanal.cli", "server", "--conf", str(conf)],
                                  stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    lake, log = tmp_path / "lake", tmp_path / "job.log"
    kills: list[float] = []
    writer = Writer(db, schema, rnd, RATE)
    writer.start()
    time.sleep(5)  # a backlog of more entries than the server's store holds before the job starts
    running = job(lake, port, schema, apply_on, log)
    try:
        deadline = time.monotonic() + 120  # killed a random moment after a micro-batch, restarted at once
        while batches(lake) == 0:
            assert running.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        kills.append(round(rnd.uniform(0.0, 3.0), 2))
        time.sleep(kills[-1])
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()
        running = job(lake, port, schema, apply_on, log)
        time.sleep(3)  # the stream goes on after the restart
        writer.stop.set()
        writer.join()
        assert writer.error is None, writer.error
        deadline = time.monotonic() + 180
        while not equal(db, lake, schema):
            assert running.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, (
                f"seed {SEED}, kills after {kills} s: the lake did not catch up\n" + log.read_text()[-3000:]
            )
            time.sleep(1)
        assert "STALLED" not in log.read_text()
        with db.root_connection(schema) as conn:  # and so it is to Spark's Delta
            check = compare_table(conn, lake, schema, "t0", "id", spark=spark)
            assert check.equal, f"t0 read by Spark's Delta: {check.first_difference}"
    finally:
        writer.stop.set()
        stop_job(running)
        server.kill()
        server.wait()
