"""Lake benchmark: many tables, small transactions, the lag of the current-state tables.

MariaDB (private) -> ``pycanal server`` (its own process, conf/'s defaults) -> the Spark job
(``start_pipeline``, this process's driver: change log + current-state Delta tables). For each
table count of ``--tables`` (200, 20, 2 by default), a fresh schema of that many tables
``lakeN (id INT PRIMARY KEY, v INT, s VARCHAR(64))`` with ``--rows`` rows each goes through the
pipeline first (checked: every table equals its source). Then:

1. rates: sysbench (``bench/lake.lua``: autocommit 1-row transactions, 60% INSERT, 30% UPDATE,
   10% DELETE, spread at random over the tables; ``--rate`` paces it) writes at each of
   ``--rates`` for ``--seconds``. Meanwhile a marker row is updated every 100 ms with its commit
   time and the marker's current-state table is polled every 50 ms (``tablestate.TableReader``:
   the log entries committed since the last poll, where delta-rs' refresh lists the table's
   log, in the driver's process beside the apply it measures): the lag of a marker
   is the time from its commit to the first poll that sees it (p50/p99/max, the p99 of each 10 s
   and after the first 20 s).
   A rate is sustained when the writer reached it and the lag p99 is under 5 s. After each rate
   the lake is compared with the source (row count and sum of ``v`` of every table).
2. backlog: the source's runner process is paused (SIGSTOP) while sysbench writes at
   ``--backlog-rate`` for ``--backlog-seconds``; it resumes, and the catch-up time runs until the
   last marker is visible and every table equals its source. python-mysql-replication decodes
   the backlog's binlog file in the same run: the peer's rows/s.

``--minutes M`` (soak) writes at ``--soak-rate`` (``--soak-mix``: the shares of INSERT, UPDATE and
DELETE, 60,30,10; 0,100,0 keeps the tables' sizes) for M minutes on the first table count and
prints per minute: Spark's addBatch (median/max), the background apply's rounds (median
seconds, micro-batches per round), the lag p99, the Parquet files under current/ and
changelog/ (on disk) and the change log's live files (what a reader lists), ``lake1``'s log
entries, and a full-table query of ``lake1`` (median of 5, once the lake has caught up) through
delta-rs (``full_table_query_s``) and through ``pycanal.spark.delta.tablestate.read_table``
(``read_table_s``: the last checkpoint and the entries after it), next to the delta-rs query on its
rows written as a new one-commit table (``fresh_table_query_s``: the table's size without its
minutes of streaming); and where the minute's CPU went (``cpu_s``: the driver, the JVM, the server,
Spark's workers and the source's runner, MariaDB and sysbench as ``other``, and the machine's
user, system, iowait and steal time), the file-creation cost at its start (``file_create_us``),
and the machine's speed (``cpu_probe_ms``: the CPU a fixed loop takes, every 5 s, median; it
moves with the CPU that the processes doing constant work use, the control for the apply's
time, which moves with both).

The job writes deletion vectors, as by default (changes to table files of 10,000 rows and more
as Delta deletion vectors; with ``--rows`` in the 100,000s they are what keeps the apply's cost
to the changes rather than to the rows the tables hold: docs/benchmarks.md, stop 30);
``--no-deletion-vectors`` runs it copy-on-write only, as runs before they were the default did.

``--s3`` puts the lakes in an S3 bucket instead of ``--dir`` (issue 40), all else the same: a
private S3 server (``pycanal.testing.s3.PrivateS3``: S3Proxy on loopback, its objects files in the
run's directory) with the bucket ``lake``, each table count's lake ``s3://lake/lake-N``; the AWS_*
settings go in this process's environment before Spark starts and the session has
``lake_options`` (s3a), so the driver, the JVM (Spark's checkpoint) and the executors all write to
S3. They reach the server through ``s3count``, a counting relay in a process of its own; the
bench's own reads (the checks, the marker's poller, the soak's queries) go to the server directly
and are not counted. Each rate, the backlog, each soak minute and each table count's whole run
(``runs[].s3``) then say where the time goes: ``micro_batches`` (the change log's committed
batches in that window), ``requests`` and ``requests_per_batch``, ``bytes_in`` (request bodies,
uploaded) and ``bytes_out`` (answer bodies, downloaded), totals and per batch, and ``by_kind``:
GET, HEAD, LIST, DELETE, COPY, PUT, PUT_IF_NONE_MATCH (a create-once: a Delta commit, a journal
marker; status 412 = lost to an existing key), PUT_IF_MATCH, PUT_PART and POST_* (multipart,
multi-key delete), each with its count and per-batch count, statuses, bytes, and ``mean_ms`` and
``p99_ms``: the time at the relay from sending the request on to having the whole answer (the
server's time on loopback, not the client's queueing); ``by_client`` (s3a or object_store, by
User-Agent) and ``by_area`` (the lake's directory: current, changelog, _checkpoint, _pycanal,
...: requests, and by kind). Latencies are those of S3Proxy on this machine's disk, not of AWS (tens of ms a request):
the counts and bytes carry over, the times do not. ``--no-s3-relay`` is the control for the
relay's own cost: the same run without it, and without the counts. ``file_create_us`` of a rate
or minute is "n/a" on S3 (a local-disk probe).

One JSON object goes to stdout, progress to stderr.

    .venv/bin/python bench/lake.py [--tables 200,20,2] [--rates 500,1000,2000,5000] [--seconds 20]
        [--backlog-rate 1500] [--backlog-seconds 30] [--rows 1000] [--minutes 0] [--skip-pmr]
        [--apply-share 1.0] [--no-deletion-vectors] [--s3] [--dir DIR] [--settle-s 360] [--keep]

The JSON's ``machine.file_create_us`` is the CPU a file creation takes in ``--dir``: each write
of a current-state table creates two files, so it weighs on the apply; each rate's result has the
cost at its start (``file_create_us``). On ext4 without a journal (this machine's disk) the kernel,
allocating an inode, checks one by one and passes over those freed in the last minute, or six
while their inode table block is dirty -- as new files near them keep it: after a run deleted its
lake (tens of thousands of files), the next run's files cost up to ~0.9 ms of CPU each instead of
20-40 us, and its lag measures that deletion (docs/benchmarks.md, stop 34). So a run notes when
it deleted its directory (``.pycanal-lake-bench.deleted`` in ``--dir``) and the next one first
waits until ``--settle-s`` have passed since (``machine.settle_wait_s``); ``--keep`` leaves the
directory (for a series of runs, deleted together afterwards).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oltp as oltp_bench  # noqa: E402
import pipeline as pipeline_bench  # noqa: E402
import s3count  # noqa: E402
import servers  # noqa: E402
from pycanal.spark.changelog import ChangeLog  # noqa: E402
from pycanal.spark.current import table_path  # noqa: E402
from pycanal.spark.delta.rs import delta_table  # noqa: E402
from pycanal.spark.delta.tablestate import TableReader, read_rows, read_table  # noqa: E402
from pycanal.spark.job import Pipeline, start_pipeline  # noqa: E402
from pycanal.spark.maintenance import Maintenance  # noqa: E402
from pycanal.spark.session import lake_options, spark_session  # noqa: E402
from pycanal.storage import LakePath, lake_path  # noqa: E402
from pycanal.testing._process import free_port  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402
from pycanal.testing.s3 import S3PROXY_VERSION, PrivateS3  # noqa: E402

_T0 = time.monotonic()
LUA = Path(__file__).resolve().parent / "lake.lua"


DELETED = ".pycanal-lake-bench.deleted"  # when the last run deleted its directory (the module notes)
BUCKET = "lake"  # --s3: the bucket of the private S3 server the lakes go in
OWN_KINDS: dict[int, str] = {}  # pid -> kind for cpu_by_kind, where pipeline.processes' would mislead


def log(msg: str) -> None:
    print(f"[lake-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3) if ordered else float("nan")


class Marker:
    """A row updated every ``period`` s with its commit time (ms); a poller reads its
    current-state table and notes when each value is first seen."""

    def __init__(self, db: PrivateMariaDB, schema: str, lake: LakePath, period: float = 0.1) -> None:
        self.db, self.schema, self.period = db, schema, period
        self.path = table_path(lake, schema, "marker")
        self.committed: list[int] = []  # commit times, ms
        self.seen: dict[int, float] = {}  # value -> first seen, epoch s
        self.error = ""  # the poller's last error
        self.writing = threading.Event()
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._write, daemon=True),
            threading.Thread(target=self._poll, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _write(self) -> None:
        with self.db.root_connection(self.schema) as conn, conn.cursor() as cur:
            while not self.stop.is_set():
                if self.writing.is_set():
                    ts = int(time.time() * 1000)
                    cur.execute("UPDATE marker SET ts = %s WHERE id = 1", (ts,))
                    conn.commit()
                    self.committed.append(ts)
                time.sleep(self.period)

    def _poll(self) -> None:
        # pycanal's poller: it reads the entries committed since its last read (delta-rs lists the
        # table's log at every refresh; the marker is committed to every round), as this thread
        # shares the driver's process and its GIL with the apply it measures
        reader = TableReader(self.path)
        while not self.stop.is_set():
            try:
                value = reader.read(["ts"]).column("ts").to_pylist()
                now = time.time()
                for v in value:
                    if v is not None and v not in self.seen:
                        self.seen[v] = now
            except Exception as exc:  # noqa: BLE001 - not created yet, or what a stall reports
                self.error = f"{type(exc).__name__}: {exc}"[:500]
            time.sleep(0.05)

    def last_visible(self, timeout: float) -> float:
        """Wait until the last committed value is seen; its first-seen time."""
        deadline = time.monotonic() + timeout
        last = self.committed[-1]
        while last not in self.seen:
            if time.monotonic() > deadline:
                seen = max(self.seen, default=None)
                raise RuntimeError(
                    f"marker {last} not visible after {timeout} s (the last seen: {seen}; "
                    f"the poller's last error: {self.error or 'none'})"
                )
            time.sleep(0.02)
        return self.seen[last]

    def lags(self, since_ms: int, until_ms: int) -> list[float]:
        """Seconds from commit to visible of the markers committed in [since, until]: a marker is
        visible once it or a later one is (one batch applies the last of several); a marker
        never visible counts up to now."""
        now = time.time()
        seen = sorted(self.seen.items())  # by value (commit time)
        earliest, first = [], now  # the earliest sighting of a value >= each value
        for _value, at in reversed(seen):
            first = min(first, at)
            earliest.append(first)
        earliest.reverse()
        values = [v for v, _ in seen]
        out = []
        for ts in self.committed:
            if since_ms <= ts <= until_ms:
                k = bisect.bisect_left(values, ts)
                out.append((earliest[k] if k < len(values) else now) - ts / 1000)
        return out

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)


def lua(
    db: PrivateMariaDB,
    schema: str,
    tables: int,
    rows: int,
    rate: int,
    seconds: float,
    base: int,
    mix: str = "60,30,10",
) -> dict[str, Any]:
    cmd = ["sysbench", str(LUA), "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
           f"--mysql-db={schema}", f"--tables={tables}", f"--rows={rows}", f"--base={base}", "--threads=4",
           f"--rate={rate}", f"--time={int(seconds)}", "--events=0", f"--mix={mix}", "--report-interval=1",
           "run"]  # fmt: skip
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"sysbench failed: {out.stdout[-1500:]}{out.stderr[-1500:]}")
    m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", out.stdout)
    # sysbench's second-by-second report: the rate it wrote at, and the events its --rate queued
    # behind busy threads (written later in a burst)
    seconds_tps = [float(t) for t in re.findall(r"\] thds: \d+ (?:tps|eps): ([\d.]+)", out.stdout)]
    queued = [int(q) for q in re.findall(r"queue length: (\d+)", out.stdout)]
    return {
        "transactions": int(m.group(1)),
        "txn_per_s": round(float(m.group(2))),
        "wall_s": round(wall, 2),
        "writer_tps_first_10s": [round(t) for t in seconds_tps[:10]],
        "writer_queue_max": max(queued, default=0),
    }


def equal(db: PrivateMariaDB, schema: str, lake: LakePath, names: list[str]) -> list[str]:
    """The tables of ``names`` whose (rows, sum of v) differ between the lake and the source."""
    bad = []
    for name in names:
        ((count, vsum),) = db.query(f"SELECT COUNT(*), COALESCE(SUM(v), 0) FROM `{schema}`.`{name}`")
        try:
            data = read_rows(delta_table(table_path(lake, schema, name)), ["v"])
            got = (data.num_rows, sum(v for v in data.column("v").to_pylist() if v is not None))
        except Exception:  # noqa: BLE001 - not there yet
            got = None
        if got != (count, int(vsum)):
            bad.append(name)
    return bad


def wait_equal(db: PrivateMariaDB, schema: str, lake: LakePath, tables: int, timeout: float) -> float:
    """Wait until every table equals its source (the writer has stopped: a table found equal
    stays so, and only the others are read again); the time it was seen (epoch s)."""
    deadline = time.monotonic() + timeout
    bad = [f"lake{i}" for i in range(1, tables + 1)]
    while True:
        bad = equal(db, schema, lake, bad)
        if not bad:
            return time.time()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(bad)} tables differ after {timeout} s: {bad[:3]}")
        time.sleep(0.2)


def batch_stats(pipeline: Pipeline, since: float) -> dict[str, Any]:
    """Spark's micro-batches since ``since`` (epoch s): count, change rows (the applier's count:
    Spark counts a staged partition as one row), addBatch ms."""
    from datetime import datetime

    batches = [
        p for p in pipeline.query.recentProgress
        if p["numInputRows"] and datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() >= since
    ]  # fmt: skip
    add = [p["durationMs"].get("addBatch", 0) for p in batches]
    rows = [pipeline.applier.rows_in.get(p["batchId"], p["numInputRows"]) for p in batches]
    phases = sorted({k for p in batches for k in p["durationMs"]} - {"addBatch"})
    return {
        "batches": len(batches),
        "rows_per_batch_median": statistics.median(rows) if rows else 0,
        "addBatch_ms_median": statistics.median(add) if add else 0,
        "addBatch_ms_max": max(add) if add else 0,
        # the rest of a micro-batch (getBatch: the source's rows; triggerExecution: all of it)
        "phases_ms_median": {
            k: statistics.median(p["durationMs"].get(k, 0) for p in batches) for k in phases
        },
    }


def files_in(path: LakePath) -> int:
    """The Parquet files under ``path`` (on S3: one listing of its keys, not a walk)."""
    if path.is_local:
        return sum(1 for _root, _dirs, names in os.walk(path.local) for n in names if n.endswith(".parquet"))
    import obstore
    from obstore.store import S3Store

    bucket, _, key = path.uri.removeprefix("s3://").partition("/")
    config = {k.lower(): v for k, v in path.storage_options.items()}
    store = S3Store(bucket, config=config, client_options={"allow_http": True})
    return sum(
        1 for o in obstore.list(store, key.rstrip("/") + "/").collect() if o["path"].endswith(".parquet")
    )


def committed(lake: LakePath) -> int:
    """The micro-batches the pipeline has committed to the change log."""
    last = ChangeLog(lake).last_batch()
    return 0 if last is None else last + 1


class Lakes:
    """Where each table count's lake goes: a directory in the run's (the default), or with ``--s3`` a
    prefix of the bucket ``lake`` of a private S3 server (S3Proxy on loopback, its objects in the
    run's directory). There the pipeline (its driver, JVM and executors, by the AWS_* settings put
    in this process's environment before Spark starts) reaches the server through the counting
    relay (``s3count``), and the bench's own reads (the checks, the marker's poller, the soak's
    queries and listings) go to the server directly, uncounted."""

    def __init__(self, tmp: Path, s3: bool, relay: bool = True) -> None:
        self.tmp = tmp
        self.server: PrivateS3 | None = None
        self.counter: s3count.S3Counter | None = None
        if not s3:
            return
        self.server = PrivateS3(base_dir=tmp, keep=True).start()  # its directory goes with the run's
        self.server.create_bucket(BUCKET)
        OWN_KINDS[self.server.pid or 0] = "s3_server"
        endpoint = self.server.endpoint_url
        if relay:
            self.counter = s3count.S3Counter(self.server.endpoint_url, tmp / "s3count.log")
            OWN_KINDS[self.counter.process.pid] = "s3_relay"
            endpoint = self.counter.endpoint_url
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[name]  # no profile, token or region of the user's beside the server's
        os.environ.update(self.server.env() | {"AWS_ENDPOINT_URL": endpoint})
        log(f"S3Proxy {S3PROXY_VERSION} at {self.server.endpoint_url}, the pipeline's requests to {endpoint}")

    def lake(self, name: str) -> tuple[LakePath, LakePath]:
        """The lake ``name``: the pipeline's path and the bench's."""
        if self.server is None:
            path = lake_path(self.tmp / name)
            return path, path
        uri = f"s3://{BUCKET}/{name}"
        return lake_path(uri), lake_path(uri, {"AWS_ENDPOINT_URL": self.server.endpoint_url})

    def spark_conf(self) -> dict[str, str]:
        """The session settings the lakes need (``lake_options``: none on a local disk)."""
        return lake_options(self.lake("any")[0])

    def mark(self) -> int:
        """The pipeline's requests so far (0 on a local disk)."""
        return self.counter.mark() if self.counter is not None else 0

    def requests(self, since: int, batches: int) -> dict[str, Any] | None:
        """The pipeline's requests since ``mark`` gave ``since`` (None on a local disk), per micro-batch."""
        if self.counter is None:
            return None
        return s3count.per_batch(self.counter.summary(since), batches)

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()
        if self.server is not None:
            self.server.stop()


def setup(db: PrivateMariaDB, schema: str, tables: int, rows: int) -> None:
    with db.root_connection() as conn, conn.cursor() as cur:
        for i in range(1, tables + 1):
            cur.execute(f"CREATE TABLE `{schema}`.`lake{i}` (id INT PRIMARY KEY, v INT, s VARCHAR(64))")
            for first in range(1, rows + 1, 100_000):  # statements under max_allowed_packet
                last = min(rows, first + 99_999)
                values = ",".join(f"({k},{k % 97},'row {k}')" for k in range(first, last + 1))
                cur.execute(f"INSERT INTO `{schema}`.`lake{i}` VALUES {values}")
        conn.commit()


def run_tables(
    args: argparse.Namespace, db: PrivateMariaDB, spark: Any, tmp: Path, lakes: Lakes, tables: int, soak: bool
) -> dict[str, Any]:
    schema = f"lk{tables}"
    db.execute(f"CREATE DATABASE `{schema}`")
    start = db.current_binlog()  # the pipeline sees every table created
    db.execute(f"CREATE TABLE `{schema}`.marker (id INT PRIMARY KEY, ts BIGINT)")
    db.execute(f"INSERT INTO `{schema}`.marker VALUES (1, 0)")
    port = free_port()
    conf = tmp / f"conf-{tables}"
    servers.write_conf(conf, db, port, start, ".*", servers.shipped_settings())
    text = (
        (conf / "bench" / "instance.properties")
        .read_text()
        .replace(f"{db.database}\\\\.(.*)", f"{schema}\\\\..*")
    )
    (conf / "bench" / "instance.properties").write_text(text)
    server = servers.start_server(conf, port, tmp / f"server-{tables}.log")
    lake, view = lakes.lake(f"lake-{tables}")  # the pipeline's and the bench's (on S3: uncounted)
    started = lakes.mark()
    pipeline: Pipeline = start_pipeline(spark, lake, address=f"127.0.0.1:{port}", destination="bench",
                                        trigger=args.trigger, batch_size=args.batch_size,
                                        apply_threads=args.apply_threads, stage=not args.no_stage,
                                        apply_share=args.apply_share, apply_on=args.apply_on,
                                        maintenance=Maintenance(compact_every=args.compact_every,
                                                                checkpoint_every=args.compact_every,
                                                                deletion_vectors=args.deletion_vectors))  # fmt: skip
    marker = Marker(db, schema, view)
    out: dict[str, Any] = {"tables": tables}
    try:
        t0 = time.time()
        setup(db, schema, tables, args.rows)
        wait_equal(db, schema, view, tables, 600)
        log(f"{tables} tables x {args.rows:,} rows in the lake after {time.time() - t0:.1f} s")
        base = 10_000_000
        rates = []
        for rate in [] if soak else args.rates:
            base += 100_000_000
            create_us = round(file_create_us(tmp)) if lake.is_local else "n/a"
            mark, batch0 = lakes.mark(), committed(view)
            marker.writing.set()
            since = int(time.time() * 1000)
            res = lua(db, schema, tables, args.rows, rate, args.seconds, base)
            until = int(time.time() * 1000)
            marker.writing.clear()
            time.sleep(0.2)
            end = time.time()
            try:
                drained = marker.last_visible(300) - end
            except RuntimeError as exc:
                drained = str(exc)
            lags = marker.lags(since, until)
            windows = [marker.lags(t, min(t + 10_000, until)) for t in range(since, until, 10_000)]
            res.update(rate=rate, file_create_us=create_us, lag_p50_s=pct(lags, 0.5), lag_p99_s=pct(lags, 0.99), lag_max_s=pct(lags, 1.0),
                       lag_p99_by_10s_s=[pct(w, 0.99) for w in windows if w],
                       lag_p99_after_20s_s=pct(marker.lags(since + 20_000, until), 0.99),
                       after_writer_s=drained if isinstance(drained, str) else round(drained, 2),
                       **batch_stats(pipeline, since / 1000))  # fmt: skip
            res["sustained"] = res["txn_per_s"] >= 0.95 * rate and res["lag_p99_s"] < 5.0
            wait_equal(db, schema, view, tables, 600)
            if (s3 := lakes.requests(mark, committed(view) - batch0)) is not None:
                res["s3"] = s3
            log(f"{tables} tables at {rate:,} txn/s: {res}")
            rates.append(res)
        out["rates"] = rates
        ok = [r["txn_per_s"] for r in rates if r["sustained"]]
        out["highest_sustained_txn_per_s"] = max(ok) if ok else 0
        if soak:
            out["soak"] = soak_run(args, db, schema, tables, view, lakes, pipeline, marker)
        elif args.backlog_seconds > 0:
            out["backlog"] = backlog(args, db, schema, tables, view, lakes, marker, base + 100_000_000)
        if (s3 := lakes.requests(started, committed(view))) is not None:
            out["s3"] = s3  # the whole run: the rows loaded, the rates, the backlog or soak
    except Exception:
        log(f"failed; the pipeline then: {pipeline_state(pipeline, server)}")
        raise
    finally:
        marker.close()
        pipeline.stop()
        server.terminate()
        server.wait(timeout=30)
    return out


def pipeline_state(pipeline: Pipeline, server: subprocess.Popen[bytes]) -> dict[str, Any]:
    """What a stalled run's pipeline was doing: the query's state and error, its last
    micro-batch, the apply's last round, whether the server runs."""
    query = pipeline.query
    last = query.lastProgress or {}
    return {
        "query_active": query.isActive,
        "query_error": str(query.exception() or "")[:2000],
        "query_status": query.status,
        "last_batch": {k: last.get(k) for k in ("batchId", "timestamp", "numInputRows")},
        "last_apply_round": pipeline.applier.rounds[-1] if pipeline.applier.rounds else None,
        "server_exit": server.poll(),
    }


def backlog(args: argparse.Namespace, db: PrivateMariaDB, schema: str, tables: int, lake: LakePath,
            lakes: Lakes, marker: Marker, base: int) -> dict[str, Any]:  # fmt: skip
    runner = next(pid for pid, (kind, _) in pipeline_bench.processes().items() if kind == "source_runner")
    mark, batch0 = lakes.mark(), committed(lake)
    db.execute("FLUSH BINARY LOGS")
    path = db.binlog_files()[-1]
    os.kill(runner, signal.SIGSTOP)
    try:
        marker.writing.set()
        res = lua(db, schema, tables, args.rows, args.backlog_rate, args.backlog_seconds, base)
        marker.writing.clear()
        time.sleep(0.2)
    finally:
        os.kill(runner, signal.SIGCONT)
    resumed = time.time()
    db.execute("FLUSH BINARY LOGS")
    visible = marker.last_visible(600)
    equal_at = wait_equal(db, schema, lake, tables, 600)
    rows, txns = oltp_bench.count_file(path)
    res.update(rows=rows, catch_up_s=round(visible - resumed, 2), equal_after_s=round(equal_at - resumed, 2),
               lake_rows_per_s=round(rows / max(visible - resumed, 1e-3)))  # fmt: skip
    if (s3 := lakes.requests(mark, committed(lake) - batch0)) is not None:
        res["s3"] = s3
    if not args.skip_pmr:
        pmr = oltp_bench.pmr(db, path, rows)
        res["python_mysql_replication_rows_per_s"] = pmr["rows_per_s"]
        res["ratio_vs_pmr"] = round(res["lake_rows_per_s"] / pmr["rows_per_s"], 2)
    log(f"{tables} tables, backlog of {args.backlog_seconds:.0f} s at {args.backlog_rate:,} txn/s: {res}")
    return res


def soak_run(args: argparse.Namespace, db: PrivateMariaDB, schema: str, tables: int, lake: LakePath,
             lakes: Lakes, pipeline: Pipeline, marker: Marker) -> list[dict[str, Any]]:  # fmt: skip
    minutes = []
    probe = SpeedProbe()
    for minute in range(1, args.minutes + 1):
        cpu0 = cpu_by_kind()
        create_us = round(file_create_us(lake.parent.local)) if lake.is_local else "n/a"
        mark, batch0 = lakes.mark(), committed(lake)
        marker.writing.set()
        since = int(time.time() * 1000)
        # ids of a minute: 400M + 40M per minute + 10M per writer thread (INT holds 45 minutes)
        res = lua(db, schema, tables, args.rows, args.soak_rate, 60, 400_000_000 + minute * 40_000_000,
                  args.soak_mix)  # fmt: skip
        lags = marker.lags(since, int(time.time() * 1000))
        marker.writing.clear()
        cpu1 = cpu_by_kind()
        speed = probe.median_ms(since / 1000, time.time())
        # The query runs once the lake has caught up, not beside the apply's last rounds in this
        # process: what it measures is the table, not the contention.
        marker.last_visible(300)
        queries, ours = [], []
        for _ in range(5):  # a query right after a checkpoint or before one differs: the median of 5
            t0 = time.perf_counter()
            data = read_rows(delta_table(table_path(lake, schema, "lake1")))
            t1 = time.perf_counter()
            read_table(table_path(lake, schema, "lake1"))
            queries.append(t1 - t0)
            ours.append(time.perf_counter() - t1)
        rows = data.num_rows
        fresh = fresh_query_s(data, lake.parent)
        rounds = [r for r in pipeline.applier.rounds if r[0] >= since / 1000]
        row = {"minute": minute, **res, "lag_p99_s": pct(lags, 0.99), **batch_stats(pipeline, since / 1000),
               "apply_s_median": round(statistics.median(r[1] for r in rounds), 3) if rounds else None,
               "batches_per_apply": round(sum(r[2] for r in rounds) / len(rounds), 2) if rounds else None,
               "current_files": files_in(lake / "current"), "changelog_files": files_in(lake / "changelog"),
               "changelog_live_files": len(ChangeLog(lake).files()),
               "lake1_log_entries": len((table_path(lake, schema, "lake1") / "_delta_log").listdir()),
               "full_table_query_s": round(statistics.median(queries), 3),
               "read_table_s": round(statistics.median(ours), 4), "fresh_table_query_s": fresh,
               "lake1_rows": rows, "file_create_us": create_us, "cpu_probe_ms": speed,
               "cpu_s": {k: round(v - cpu0.get(k, 0), 1) for k, v in cpu1.items()}}  # fmt: skip
        if (s3 := lakes.requests(mark, committed(lake) - batch0)) is not None:
            row["s3"] = s3
        log(f"soak minute {minute}: {row}")
        minutes.append(row)
    marker.writing.clear()
    probe.close()
    return minutes


class SpeedProbe:
    """The machine's speed while the run loads it: every ``period`` s, the CPU time (this thread's:
    neither the GIL's waits nor a wait for a core count) of a fixed pure-Python loop, in ms. A
    process doing constant work (the server, MariaDB) uses more CPU a minute when this rises:
    the VM's cores slowed (a neighbour on their other hyperthreads, the host's clock), which
    steal time does not show."""

    def __init__(self, period: float = 5.0) -> None:
        self.samples: list[tuple[float, float]] = []  # (epoch s, ms)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self.thread.start()

    def _run(self, period: float) -> None:
        while not self.stop.wait(period):
            started, x = time.thread_time(), 0
            for i in range(200_000):
                x += i * i % 7
            self.samples.append((time.time(), (time.thread_time() - started) * 1000))

    def median_ms(self, since: float, until: float) -> float | None:
        got = [ms for at, ms in self.samples if since <= at <= until]
        return round(statistics.median(got), 1) if got else None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds used so far: by this run's processes of each kind (``pipeline.processes``), and
    by the whole machine in each of user, system, iowait and steal (a VM's neighbours: time the
    hypervisor gave to others, which slows every process here at once)."""
    out: dict[str, float] = {}
    for pid, (kind, secs) in pipeline_bench.processes().items():
        kind = OWN_KINDS.get(pid, kind)
        out[kind] = out.get(kind, 0.0) + secs
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    tick = os.sysconf("SC_CLK_TCK")
    for name, i in (("machine_user", 0), ("machine_system", 2), ("machine_iowait", 4), ("machine_steal", 7)):
        out[name] = int(fields[i]) / tick
    return out


def fresh_query_s(data: Any, where: LakePath) -> float:
    """The same query on ``data`` written as a new one-commit Delta table beside the lake: what the
    query costs on a table of that size that has not been streamed into for minutes (the control
    for the soak's full-table query, whose table grows). On S3 it stays (the bucket goes with the
    run)."""
    from deltalake import write_deltalake

    path = (
        lake_path(tempfile.mkdtemp(dir=where.local)) if where.is_local else where / f"fresh-{time.time_ns()}"
    )
    try:
        write_deltalake(path.uri, data, storage_options=path.storage_options or None)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            delta_table(path).to_pyarrow_table()
            times.append(time.perf_counter() - t0)
        return round(statistics.median(times), 3)
    finally:
        if path.is_local:
            shutil.rmtree(path.local, ignore_errors=True)


def file_create_us(where: Path, n: int = 200) -> float:
    """CPU microseconds to create a file in a new directory under ``where``: a current-state
    table's write creates two (its data file and the log entry's temporary file), and the cost
    differs by machine and directory (docs/benchmarks.md, stop 23). The files stay (``where`` is
    the run's directory): deleting them would make the next creations dearer (the module notes)."""
    d = Path(tempfile.mkdtemp(dir=where))
    started = time.process_time()
    for i in range(n):
        (d / f"f{i}").touch()
    return (time.process_time() - started) / n * 1e6


def settle(where: Path, seconds: float) -> float:
    """Wait until ``seconds`` have passed since the last run deleted its directory under ``where``
    (the module notes); the seconds waited."""
    try:
        left = float((where / DELETED).read_text()) + seconds - time.time()
    except (OSError, ValueError):
        return 0.0
    if left > 0:
        log(f"waiting {left:.0f} s: the last run deleted its files in {where} less than {seconds:.0f} s ago")
        time.sleep(left)
    return max(left, 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", default="200,20,2", help="table counts, comma-separated")
    ap.add_argument("--rates", default="500,1000,2000,5000", help="writer rates (txn/s), comma-separated")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per rate")
    ap.add_argument("--rows", type=int, default=1000, help="rows per table before the runs")
    ap.add_argument("--backlog-rate", type=int, default=1500)
    ap.add_argument("--backlog-seconds", type=float, default=30.0, help="0: no backlog phase")
    ap.add_argument("--trigger", default="1 second", help="the query's processing-time trigger")
    ap.add_argument("--minutes", type=int, default=0, help="soak: minutes at --soak-rate (first table count)")
    ap.add_argument("--soak-rate", type=int, default=1000)
    ap.add_argument("--soak-mix", default="60,30,10", help="soak: percent INSERT,UPDATE,DELETE")
    ap.add_argument("--no-stage", action="store_true", help="change rows through Spark, not the stage")
    ap.add_argument("--batch-size", type=int, help="the source's batchSize (entries per micro-batch)")
    ap.add_argument("--apply-threads", type=int, default=2, help="current-state tables written at once")
    ap.add_argument(
        "--apply-share",
        type=float,
        default=1.0,
        help="the share of the time the apply may take (1: no pause)",
    )
    ap.add_argument("--apply-on", choices=("driver", "executors"), default="driver")
    ap.add_argument("--compact-every", type=int, default=Maintenance().compact_every,
                    help="MERGEs into a table between compactions (and checkpoints)")  # fmt: skip
    ap.add_argument("--skip-pmr", action="store_true")
    ap.add_argument("--deletion-vectors", action=argparse.BooleanOptionalAction,
                    default=Maintenance().deletion_vectors, help="the job's --deletion-vectors")  # fmt: skip
    ap.add_argument("--s3", action="store_true", help="the lakes in a private S3 server's bucket (S3Proxy)")
    ap.add_argument("--s3-relay", action=argparse.BooleanOptionalAction, default=True,
                    help="--s3: the pipeline's requests through the counting relay (the control: without)")  # fmt: skip
    ap.add_argument("--dir", help="where the lake, Spark's files and MariaDB go (default: the temp dir)")
    ap.add_argument("--settle-s", type=float, default=360.0,
                    help="wait first until this long after the last run deleted its files here")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="leave the run's directory (its path goes to stderr)")
    args = ap.parse_args(argv)
    args.rates = [int(x) for x in args.rates.split(",") if x]
    counts = [int(x) for x in args.tables.split(",") if x]
    if args.minutes:
        counts = counts[:1]
    load_start = os.getloadavg()
    result: dict[str, Any] = {
        "lake": f"s3 (S3Proxy {S3PROXY_VERSION}, loopback)" if args.s3 else "local disk",
        "deletion_vectors": args.deletion_vectors,
        "rows_per_table": args.rows,
        "runs": [],
    }
    where = Path(args.dir or tempfile.gettempdir())
    waited = settle(where, args.settle_s)
    tmp = tempfile.mkdtemp("", "pycanal-lake-", where)
    failed = True
    try:
        with contextlib.redirect_stdout(sys.stderr):
            create_us = file_create_us(Path(tmp))
            log(f"creating a file in {tmp}: {create_us:.0f} us of CPU")
            db = PrivateMariaDB(
                extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"], base_dir=tmp
            )
            with db:
                log(f"MariaDB {db.version} on port {db.port}")
                lakes = Lakes(Path(tmp), args.s3, args.s3_relay)
                try:
                    spark = spark_session(
                        Path(tmp) / "spark-tmp", "pycanal-lake-bench", conf=lakes.spark_conf()
                    )
                    try:
                        for n in counts:
                            run = run_tables(args, db, spark, Path(tmp), lakes, n, bool(args.minutes))
                            result["runs"].append(run)
                    finally:
                        spark.stop()
                finally:
                    lakes.close()
        failed = False
    finally:
        if args.keep or failed:
            log(f"kept {tmp}")  # a failed run's lake and logs, to look into
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            (where / DELETED).write_text(str(time.time()))
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                         "load_avg_at_start": [round(x, 2) for x in load_start],
                         "file_create_us": round(create_us), "settle_wait_s": round(waited)}  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
