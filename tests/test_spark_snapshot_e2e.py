"""Issue 15's end-to-end test: tables that hold rows before the pipeline starts (their binlog
purged) reach the lake through the initial snapshot, while a writer keeps changing them; the
driver is SIGKILLed mid-snapshot and restarted as ``pycanal pipeline``. At the end every table
equals its source value by value, every source row was read once, and the change log holds
every binlog change after the start once."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipeline_helpers import embedded_server, stop_job
from pycanal.spark.apply import applied_batch_ids
from pycanal.spark.canal_options import stage_dir
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.check import normalize
from pycanal.spark.current import table_path
from pycanal.spark.delta.rs import delta_table, is_delta_table
from pycanal.spark.delta.tablestate import read_rows
from pycanal.storage import LakePath, lake_path
from pycanal.testing import PrivateMariaDB
from pycanal.testing.s3 import PrivateS3
from spark_fixtures import spark  # noqa: F401

pytestmark = pytest.mark.mariadb

DB = "snapdb"
ROWS = 3000
# name -> (columns, the row of number i); the writer changes column v
TABLES = {
    "t_int": ("id INT PRIMARY KEY, v INT, s VARCHAR(20)", lambda i: f"({i * 2}, {i}, 's{i}')"),
    "t_ubig": (
        "id BIGINT UNSIGNED PRIMARY KEY, v INT, d DECIMAL(20,6), t DATETIME(3)",
        lambda i: (
            f"({18446744073709551615 - i * 1_000_003}, {i}, {i}.125, '2026-01-01 00:00:{i % 60:02d}.5')"
        ),
    ),
    "t_comp": (
        "a INT, b VARCHAR(12), v INT, PRIMARY KEY (a, b)",
        lambda i: f"({i % 13}, 'b{i:05d}', {i})",
    ),
    "t_str": (
        "s VARCHAR(24) COLLATE utf8mb4_unicode_ci PRIMARY KEY, v INT, j JSON",
        lambda i: f"('{['a', 'B', 'é', 'Z', 'ß'][i % 5]}-{i}', {i}, '{{\"n\": {i}}}')",
    ),
}
NO_KEY = "t_nokey"  # no primary key: change log only
# the columns the writer inserts (an ALTER TABLE adds one with a default during the snapshot)
COLUMNS = {"t_int": "id, v, s", "t_ubig": "id, v, d, t", "t_comp": "a, b, v", "t_str": "s, v, j"}


@pytest.fixture
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=53, binlog_row_metadata="FULL") as server:
        yield server


def load(db: PrivateMariaDB) -> None:
    db.execute(f"CREATE DATABASE {DB}")
    for name, (columns, row) in TABLES.items():
        db.execute(f"CREATE TABLE {DB}.{name} ({columns})")
        for start in range(0, ROWS, 1000):
            db.execute(
                f"INSERT INTO {DB}.{name} VALUES " + ", ".join(row(i) for i in range(start, start + 1000))
            )
    db.execute(f"CREATE TABLE {DB}.{NO_KEY} (v INT, w INT)")
    db.execute(f"INSERT INTO {DB}.{NO_KEY} VALUES " + ", ".join(f"({i}, {i % 7})" for i in range(500)))


class Writer:
    """Single-row updates, deletes and inserts on the keyed tables until stopped."""

    def __init__(self, db: PrivateMariaDB, tables: tuple[str, ...] = tuple(TABLES)) -> None:
        self.db, self.stop, self.error, self.commits = db, threading.Event(), None, 0
        self.tables = sorted(tables)
        self.latencies: list[float] = []  # seconds per autocommit statement

    def run(self) -> None:
        r = random.Random(15)
        try:
            with self.db.root_connection(DB) as conn, conn.cursor() as cur:
                n = ROWS
                while not self.stop.is_set():
                    name = r.choice(self.tables)
                    k = r.random()
                    t0 = time.monotonic()
                    if k < 0.5:
                        cur.execute(f"UPDATE {name} SET v = v + 1000000 ORDER BY RAND() LIMIT 1")
                    elif k < 0.7:
                        cur.execute(f"DELETE FROM {name} ORDER BY RAND() LIMIT 1")
                    else:
                        n += 1
                        cur.execute(
                            f"INSERT IGNORE INTO {name} ({COLUMNS[name]}) VALUES {TABLES[name][1](n)}"
                        )
                    self.latencies.append(time.monotonic() - t0)
                    self.commits += 1
                    time.sleep(0.002)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def start_job(
    lake: Path, port: int, db: PrivateMariaDB, log: Path, master: str, progress: bool = False
) -> subprocess.Popen:
    command = ["pycanal.cli", "pipeline", *(["--progress", "1"] if progress else [])]
    args = [
        "--address", f"127.0.0.1:{port}", "--destination", "snap", "--filter", f"{DB}\\..*", "--lake", str(lake),
        "--trigger", "500 milliseconds", "--master", master, "--snapshot", "initial",
        "--source", f"{db.host}:{db.port}", "--source-user", db.repl_user, "--source-password", db.repl_password,
        "--snapshot-chunk-rows", "200",
    ]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *command, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def snapshot_state(lake: Path | LakePath) -> object:
    """The ``snap`` part of the newest offset Spark logged."""
    offsets = lake_path(lake) / "_checkpoint" / "offsets"
    numbers = sorted(int(n) for n in offsets.listdir() if n.isdigit())
    if not numbers:
        return None
    return json.loads((offsets / str(numbers[-1])).read_text().splitlines()[-1]).get("snap")


def change_log(lake: Path | LakePath) -> list[dict]:
    out = []
    for f in ChangeLog(lake).files():
        out += pq.read_table(f.input_file(), columns=["op", "table", "pk", "position"]).to_pylist()
    return out


def chunk_files(lake: Path) -> tuple[list[Path], list[Path]]:
    """The data files the change log's CHUNK rows name (``chunk_files``): those a current-state
    table's log adds (committed as they are), and the others."""
    named = []
    for f in ChangeLog(lake).files():
        for r in pq.read_table(f.input_file(), columns=["op", "table", "after"]).to_pylist():
            if r["op"] == "CHUNK" and "file" in json.loads(r["after"]):
                named.append((r["table"], json.loads(r["after"])["file"]["name"]))
    taken, left = [], []
    for table, name in named:
        path = table_path(lake, DB, table)
        added = {
            json.loads(line)["add"]["path"]
            for log in (path / "_delta_log").listdir() if log.endswith(".json")
            for line in (path / "_delta_log" / log).read_text().splitlines() if line.startswith('{"add"')
        }  # fmt: skip
        (taken if name in added else left).append(path.local / name)
    return taken, left


def executor_log_files(lake: Path | LakePath) -> tuple[set[str], set[str]]:
    """The change log's data files executors wrote (``batch-<id>-<hex>.parquet``): those a log
    entry added, and those on disk of committed batches that none did."""
    log = ChangeLog(lake)
    added = {
        json.loads(line)["add"]["path"]
        for entry in log.log_dir.listdir() if entry.endswith(".json")
        for line in (log.log_dir / entry).read_text().splitlines() if line.startswith('{"add"')
    }  # fmt: skip
    last = log.last_batch()
    on_disk = {
        f"{day}/{name}"
        for day in log.dir.listdir() if day.startswith("date=")
        for name in (log.dir / day).listdir()
        if re.fullmatch(r"batch-(\d{20})-[0-9a-f]{32}\.parquet", name) and int(name[6:26]) <= last
    }  # fmt: skip
    ours = {p for p in added if re.fullmatch(r"date=[0-9-]+/batch-\d{20}-[0-9a-f]{32}\.parquet", p)}
    return ours, on_disk - added


def rows_equal(db: PrivateMariaDB, lake: Path | LakePath, table: str, session: Any = None) -> str | None:
    """The source table against its current-state table, read by delta-rs or by ``session``'s Delta."""
    with db.root_connection(DB) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        columns = [d[0] for d in cur.description]
        source = sorted(json.dumps([normalize(v) for v in r], default=str) for r in cur.fetchall())
    path = table_path(lake, DB, table)
    if not is_delta_table(path):  # the directory comes before its first log entry
        return "no current-state table yet"
    if session is not None:
        target_rows = session.read.format("delta").load(path.spark_uri).toArrow().to_pylist()
    else:
        target_rows = read_rows(delta_table(path)).to_pylist()
    target = sorted(json.dumps([normalize(r[c]) for c in columns], default=str) for r in target_rows)
    if source == target:
        return None
    diff = sorted(set(source) ^ set(target))[:3]
    return f"{len(source)} source rows, {len(target)} target rows; differing: {diff}"


# On the standalone cluster alone (the chunks read by its executors, in other processes than
# the driver): the local master's kill and restart are the restart backlog's (test_spark_restart_backlog).
# Two drivers on a standalone cluster: in the suite (3 workers on 2 cores) its micro-batches took
# 12-38 s, and once (2026-11-29) one 180 s deadline for both drivers ran out; each has its own now.
@pytest.mark.timeout(480)
@pytest.mark.parametrize("cluster", ["cluster"], indirect=True)
def test_initial_snapshot_with_a_writer_and_a_driver_sigkill(
    db: PrivateMariaDB,
    cluster: Any,
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    """On a 2-worker standalone cluster (the chunks read by its executors)."""
    master = cluster.master_url if cluster is not None else "local[2]"
    load(db)
    db.flush_binary_logs()
    db.execute(f"PURGE BINARY LOGS TO '{db.current_binlog()[0]}'")  # the preload's binlog is gone
    start = db.current_binlog()
    server, tcp = embedded_server(db, "snap", start, f"{DB}\\..*")
    lake, log = tmp_path / "lake", tmp_path / "job.log"
    writer = Writer(db)
    thread = threading.Thread(target=writer.run)
    job = start_job(lake, tcp.port, db, log, master)
    try:
        deadline = time.monotonic() + 180
        thread.start()
        while sum(1 for r in change_log(lake) if r["op"] == "READ") < 2000:  # well into the snapshot
            assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        assert snapshot_state(lake) != "done", "the snapshot ended before the driver was killed"
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        killed_at = ChangeLog(lake).last_batch()
        time.sleep(1)  # the writer goes on while no driver runs
        job = start_job(lake, tcp.port, db, log, master, progress=True)
        deadline = time.monotonic() + 180  # the restarted driver's own: a JVM and executors again
        # A schema change mid-snapshot, on a table not read yet: its chunks have the new column
        # before the stream brings the ALTER to the lake.
        db.execute(f"ALTER TABLE {DB}.t_int ADD COLUMN extra INT NOT NULL DEFAULT 7")
        while snapshot_state(lake) != "done":
            assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        writer.stop.set()
        thread.join()
        assert writer.error is None, writer.error
        assert writer.commits > 100
        lat = sorted(writer.latencies)
        print(f"writer during the snapshot: {writer.commits} commits, p50 {lat[len(lat) // 2] * 1000:.1f} ms, "
              f"p99 {lat[int(len(lat) * 0.99)] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms")  # fmt: skip
        end = db.current_binlog()
        while True:  # the stream reaches the writer's last change, and the current state is applied
            rows = change_log(lake)
            last = max(
                (r["position"]["file"], r["position"]["offset"])
                for r in rows
                if r["op"] not in ("READ", "CHUNK")
            )
            if last >= (end[0], end[1] - 200) and applied_batch_ids(lake)[-1:] == [
                ChangeLog(lake).last_batch()
            ]:
                break
            assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(2)
        rows = change_log(lake)
        assert ChangeLog(lake).last_batch() > killed_at
        for name in TABLES:
            problem = rows_equal(db, lake, name)
            assert problem is None, f"{name}: {problem}"
            problem = rows_equal(db, lake, name, spark)
            assert problem is None, f"{name} read by Spark's Delta: {problem}"
        reads = [(r["table"], r["pk"]) for r in rows if r["op"] == "READ"]
        keyed = [r for r in reads if r[0] != NO_KEY]
        assert len(keyed) == len(set(keyed)), "a snapshot row was read twice"
        assert len(reads) - len(keyed) == 500  # the table without a key: one chunk, change log only
        assert {t for t, _ in keyed} == set(TABLES)
        assert not (lake / "current" / DB / NO_KEY).exists()
        # the chunks came staged by the executors, and their files went with their batches' commits
        assert stage_dir(lake).local.is_dir() and not stage_dir(lake).listdir()
        taken, left = chunk_files(lake)
        assert taken, "no chunk's file was committed as it is (chunk_files)"
        assert all(not path.exists() for path in left), "a chunk file nobody took was not deleted"
        committed, stray = executor_log_files(lake)
        assert committed, "no chunk's change-log file was committed as it is (write_unnamed)"
        assert not stray, f"change-log files of committed batches no entry added: {sorted(stray)[:3]}"
        changes = [(r["position"]["file"], r["position"]["offset"], r["position"]["row"])
                   for r in rows if r["op"] in ("INSERT", "UPDATE", "DELETE")]  # fmt: skip
        assert len(changes) == len(set(changes)), "a change appears twice in the change log"
        assert len(changes) >= writer.commits * 0.5
        assert "applied up to batch" in log.read_text()
        if cluster is not None:  # both workers' executors ran tasks (stream parts and chunks)
            for n in (1, 2):
                assert list((cluster.root / f"worker{n}").glob("app-*/*/stderr")), f"worker {n} ran nothing"
    finally:
        writer.stop.set()
        if thread.is_alive():
            thread.join()
        stop_job(job)
        tcp.stop()
        server.stop()


def test_ad_hoc_snapshot_of_a_table_newly_added_to_the_filter(
    db: PrivateMariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline streams t_int only; t_ubig, with rows, joins its filter: ``pycanal snapshot``
    asks for it, and after the restart with the wider filter the lake has t_ubig whole, while a
    writer changes both tables. t_int and t_str drifted meanwhile (rows deleted with the binlog off
    for the session): snapshotted again with it, the lake loses the rows the source no longer has
    (by the chunks' key ranges for t_int's INT key, emptied and read again for t_str's string key).
    The lake is in S3 (a real S3 server): the request, the staged chunks and the tables are objects
    (the initial snapshot's test runs on local disk)."""
    s3 = PrivateS3()
    s3.start()
    s3.create_bucket("lake")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)  # for the job, the snapshot command and this test alike
    db.execute(f"CREATE DATABASE {DB}")
    start = db.current_binlog()
    server, tcp = embedded_server(db, "snap", start)
    lake, log = lake_path("s3://lake/adhoc"), tmp_path / "job.log"
    for name in ("t_int", "t_ubig", "t_str"):
        columns, row = TABLES[name]
        db.execute(f"CREATE TABLE {DB}.{name} ({columns})")
        db.execute(f"INSERT INTO {DB}.{name} VALUES " + ", ".join(row(i) for i in range(1000)))

    def job(filter_regex: str) -> subprocess.Popen:
        args = [
            "--address", f"127.0.0.1:{tcp.port}", "--destination", "snap", "--filter", filter_regex,
            "--lake", str(lake), "--trigger", "500 milliseconds", "--master", "local[2]",
            "--source", f"{db.host}:{db.port}", "--source-user", db.repl_user,
            "--source-password", db.repl_password, "--snapshot-chunk-rows", "300",
        ]  # fmt: skip
        with log.open("ab") as out:
            return subprocess.Popen([sys.executable, "-m", "pycanal.cli", "pipeline", *args], stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    first = job(f"{DB}\\.t_(int|str)")
    second = None
    writer = Writer(db, ("t_int", "t_ubig"))
    thread = threading.Thread(target=writer.run)
    try:
        deadline = time.monotonic() + 240
        while rows_equal(db, lake, "t_int") or rows_equal(db, lake, "t_str"):  # streamed in (CREATE, rows)
            assert time.monotonic() < deadline and first.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        stop_job(first)
        with db.root_connection(DB) as conn, conn.cursor() as cur:  # drift: deletes the binlog never sees
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("DELETE FROM t_int WHERE id < 200 OR id BETWEEN 1000 AND 1100")
            cur.execute("DELETE FROM t_str WHERE v % 7 = 0")
        assert rows_equal(db, lake, "t_int") is not None and rows_equal(db, lake, "t_str") is not None
        ask = subprocess.run([sys.executable, "-m", "pycanal.cli", "snapshot", "--lake", str(lake), f"{DB}.t_ubig",
                              f"{DB}.t_int", f"{DB}.t_str"], capture_output=True, text=True)  # fmt: skip
        assert ask.returncode == 0 and "requested: snapdb.t_ubig" in ask.stdout, ask.stderr
        thread.start()  # the writer changes both tables from now on
        second = job(f"{DB}\\.(t_int|t_ubig|t_str)")
        while not (lake / "current" / DB / "t_ubig").exists() or snapshot_state(lake) != "done":
            assert time.monotonic() < deadline and second.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        writer.stop.set()
        thread.join()
        assert writer.error is None, writer.error
        end = db.current_binlog()
        while True:
            rows = change_log(lake)
            last = max(
                (r["position"]["file"], r["position"]["offset"])
                for r in rows
                if r["op"] not in ("READ", "CHUNK")
            )
            if last >= (end[0], end[1] - 200) and applied_batch_ids(lake)[-1:] == [
                ChangeLog(lake).last_batch()
            ]:
                break
            assert time.monotonic() < deadline and second.poll() is None, (last, end, writer.commits)
            time.sleep(0.5)
        time.sleep(2)
        for name in ("t_int", "t_ubig", "t_str"):
            problem = rows_equal(db, lake, name)
            assert problem is None, f"{name}: {problem}"
        reads = [r["table"] for r in change_log(lake) if r["op"] == "READ"]
        assert set(reads) == {"t_ubig", "t_int", "t_str"} and reads.count("t_ubig") >= 1000
        requests = (lake / "_pycanal" / "snapshot-requests").listdir()
        assert not [n for n in requests if n.endswith(".json")], "the request was not taken"
        assert stage_dir(lake).listdir() == []  # the staged chunks went with their batches' commits
        assert executor_log_files(lake)[0], "no chunk's change-log file was committed as it is on S3"
    finally:
        writer.stop.set()
        if thread.is_alive():
            thread.join()
        stop_job(first)
        if second is not None:
            stop_job(second)
        tcp.stop()
        server.stop()
        print(s3.logs(200))  # shown when the test fails (a store that stopped answering once)
        s3.stop()
