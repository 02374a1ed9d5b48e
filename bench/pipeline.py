"""Pipeline benchmark: MariaDB -> pycanal server -> Spark ``format("canal")`` -> ``apply_changes``
(change log + current-state Delta table), against python-mysql-replication reading the same
binlog in the same run.

The server is a ``pycanal server`` process (conf/'s settings: a 128 MB MEMSIZE store; the source's
``batchBytes`` of 32 MiB per micro-batch); the Spark query (``local[2]``, this process's driver,
the job's settings) writes to a temporary lake.

0. a warm-up: 1,000 rows through the pipeline (Spark starts its Python workers).
1. ``delay``: a writer inserts 100-row transactions at ``--rate`` rows/s for ``--delay-seconds``;
   a poller reads the current-state Delta table every 100 ms; the delay of a row is the time from
   its COMMIT returning to the first poll that sees it: p50/p99.
2. ``throughput``, ``--warmup-rounds`` + ``--rounds`` times: the source's runner (or, with
   ``--pause server``, the server) is paused (SIGSTOP) while ``--rows`` rows (the ``bench/decode.py`` table, ``--txn-rows`` rows
   per INSERT transaction) are loaded and the server parses them into its store; it resumes and
   the running query takes the backlog. rows/s from the resume to the moment both tables hold
   every row (the change log's commits, and an applied record for each of them; the
   Delta table's row count is checked then), with the CPU seconds each process kind used
   meanwhile and Spark's phase times per micro-batch (and a timeline on stderr). The first
   ``--warmup-rounds`` warm up the JVM's JIT for batches of this size (a long-running
   pipeline's steady state: the first round is ~30% slower, the second ~10%); the median of
   the ``--rounds`` after them is reported.
   After each round python-mysql-replication decodes that round's binlog file from the server
   (this machine's speed drifts by +-30% over minutes: a round's ratio is measured in one go).

With ``--via kafka`` the changes reach Spark as most Canal users take them: the server runs
``canal.serverMode = kafka`` (a plain conf: flat messages, a one-partition topic on a private
Kafka broker) and the query is ``pycanal pipeline --kafka``'s (Spark's Kafka source, the same
apply); the throughput rounds then pause the server (``--pause server``), so that each round's
time runs from the binlog backlog to the lake through the broker.

One JSON object goes to stdout; progress to stderr.

    .venv/bin/python bench/pipeline.py [--rows 300000] [--rate 2000] [--delay-seconds 20] [--skip-pmr]
        [--warmup-rounds 2] [--rounds 3] [--batch-size N] [--batch-mb M] [--store-mb 128] [--keep-query-dml]
        [--pause source|server] [--txn-rows 1000] [--via tcp|kafka]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode as decode_bench  # noqa: E402
import oltp as oltp_bench  # noqa: E402
import servers  # noqa: E402
from pycanal.spark.apply import applied_batch_ids  # noqa: E402
from pycanal.spark.changelog import ChangeLog  # noqa: E402
from pycanal.spark.current import table_path  # noqa: E402
from pycanal.spark.delta.tablestate import read_rows  # noqa: E402
from pycanal.spark.job import Pipeline, start_pipeline  # noqa: E402
from pycanal.spark.session import DRIVER_JAVA_OPTIONS, KAFKA_DRIVER_JAVA_OPTIONS, spark_session  # noqa: E402
from pycanal.testing._process import free_port  # noqa: E402
from pycanal.testing.kafka import PrivateKafka  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402

_T0 = time.monotonic()
DELAY_TABLE = "pipeline_delay"


def log(msg: str) -> None:
    print(f"[pipeline-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def processes() -> dict[int, tuple[str, float]]:
    """This process and its descendants: pid -> (kind, CPU seconds used so far). Kinds: the
    JVM, the source's runner, Spark's Python workers, the pycanal server, this driver."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, str, float]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{d}/stat").read_text()
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                f = stat[stat.rindex(")") + 2 :].split()
                stats[int(d)] = (int(f[1]), cmd, (int(f[11]) + int(f[12])) / tick)
    mine, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo += [p for p, (ppid, _, _) in stats.items() if ppid == pid]
    out = {}
    for pid in mine & stats.keys():
        _, cmd, secs = stats[pid]
        kind = (
            "kafka" if "kafka.Kafka" in cmd
            else "jvm" if "java" in cmd.split(" ", 1)[0]
            else "source_runner" if "python_streaming_source_runner" in cmd
            else "python_workers" if "pyspark" in cmd
            else "server" if "pycanal.cli" in cmd
            else "driver" if pid == os.getpid()
            else "other"
        )  # fmt: skip
        out[pid] = (kind, secs)
    return out


def cpu_by_kind() -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, secs in processes().values():
        out[kind] = out.get(kind, 0.0) + secs
    return out


def wait_idle(pid: int, deadline: float = 300) -> None:
    """Wait until ``pid`` used under 2% of a core over half a second (the server has parsed
    the backlog into its store, or the store is full)."""
    end = time.monotonic() + deadline
    last = processes()[pid][1]
    while time.monotonic() < end:
        time.sleep(0.5)
        now = processes()[pid][1]
        if now - last < 0.01:
            return
        last = now
    raise RuntimeError(f"process {pid} still busy after {deadline} s")


def progress_with_rows(query: Any) -> list[dict[str, Any]]:
    """The progress reports of the micro-batches with rows (Spark posts one after its batch ends,
    which can be after the poller saw the rows)."""
    deadline = time.monotonic() + 60
    while True:
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        if batches and not query.status["isTriggerActive"]:
            return batches
        if time.monotonic() > deadline:
            raise RuntimeError("no progress report of the micro-batches within 60 s")
        time.sleep(0.1)


def changelog_rows(lake: Path) -> int:
    return ChangeLog(lake).rows()


def all_applied(log: ChangeLog, lake: Path) -> bool:
    """Every committed micro-batch is applied to the current state."""
    last = log.last_batch()
    return last is not None and applied_batch_ids(lake)[-1:] == [last]


def wait_applied(
    query: Any, lake: Path, database: str, rows: int, logged_before: int, sysbench: bool = False
) -> float:
    """Poll until the change log holds ``rows`` + 2 more rows than ``logged_before`` (the
    workload's DROP and CREATE TABLE; no DDL in a sysbench round) and every change-log batch is
    applied to the current state; returns the epoch time it was seen, after checking that the
    current-state table holds ``rows`` rows (sysbench: ``check_sysbench`` compares the tables).
    The poll is cheap (it shares the driver's process): the change log's entries are read once (``ChangeLog.rows``)."""
    ddl = 0 if sysbench else 2
    from deltalake import DeltaTable

    changelog = ChangeLog(lake)
    deadline = time.monotonic() + 600
    while True:
        logged = changelog.rows() - logged_before
        if logged >= rows + ddl and all_applied(changelog, lake):
            done = time.time()
            if sysbench:
                if logged != rows:
                    raise RuntimeError(f"{logged:,} rows in the change log: {rows:,} expected")
                return done
            path = str(table_path(lake, database, decode_bench.TABLE))
            current = read_rows(DeltaTable(path), ["id"]).num_rows  # numRecords counts rows vectors hide
            if logged != rows + 2 or current != rows:
                raise RuntimeError(
                    f"{logged:,} rows in the change log, {current:,} in the table: {rows:,} expected"
                )
            return done
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"after 600 s: {logged:,} rows in the change log")
        time.sleep(0.05)


def sysbench_common(args: argparse.Namespace) -> list[str]:
    return [f"--tables={args.tables}", f"--table-size={args.table_size}"]


def check_sysbench(db: PrivateMariaDB, lake: Path, tables: int) -> None:
    """Every sbtest table of the lake holds the source's rows: count and sum of k (the current
    state is complete: the pipeline ran before sysbench prepared the tables)."""
    from deltalake import DeltaTable

    for n in range(1, tables + 1):
        table = f"sbtest{n}"
        ((count, ksum),) = db.query(f"SELECT COUNT(*), SUM(k) FROM `{db.database}`.`{table}`")
        data = read_rows(DeltaTable(str(table_path(lake, db.database, table))), ["k"])
        got = (data.num_rows, sum(v for v in data.column("k").to_pylist() if v is not None))
        if got != (count, int(ksum)):
            raise RuntimeError(
                f"{table}: the lake holds {got} (rows, sum k), the source {(count, int(ksum))}"
            )


def mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return float("nan")


def wait_settled(lake: Path, seconds: float = 2.0, deadline: float = 300) -> None:
    """Wait until the change log has grown by nothing for ``seconds`` and every batch is applied."""
    changelog = ChangeLog(lake)
    end = time.monotonic() + deadline
    last, since = -1, time.monotonic()
    while time.monotonic() < end:
        rows = changelog.rows()
        if rows != last:
            last, since = rows, time.monotonic()
        elif time.monotonic() - since >= seconds and all_applied(changelog, lake):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the change log did not settle within {deadline} s")


def warm_up(db: PrivateMariaDB, lake: Path) -> None:
    """A few transactions through the pipeline, waited for in the current-state table."""
    from deltalake import DeltaTable

    with db.root_connection(db.database) as c, c.cursor() as cur:
        for t in range(5):
            cur.execute(
                f"INSERT INTO `{DELAY_TABLE}` VALUES "
                + ",".join(f"({-i},0)" for i in range(t * 200 + 1, t * 200 + 201))
            )
            c.commit()
            time.sleep(0.3)
    path = str(table_path(lake, db.database, DELAY_TABLE))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if read_rows(DeltaTable(path), ["id"]).num_rows >= 1000:
                return
        time.sleep(0.2)
    raise RuntimeError("the warm-up rows did not reach the current-state table within 120 s")


def delay_phase(db: PrivateMariaDB, lake: Path, seconds: float, rate: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    per_txn = 100
    total = int(seconds * rate) // per_txn * per_txn
    committed: dict[int, float] = {}
    visible: dict[int, float] = {}
    path = table_path(lake, db.database, DELAY_TABLE)

    def writer() -> None:
        with db.root_connection(db.database) as c, c.cursor() as cur:
            t0 = time.perf_counter()
            for t in range(total // per_txn):
                delay = t0 + t * per_txn / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                ids = range(t * per_txn, (t + 1) * per_txn)
                cur.execute(f"INSERT INTO `{DELAY_TABLE}` VALUES " + ",".join(f"({i},{i})" for i in ids))
                c.commit()
                now = time.perf_counter()
                for i in ids:
                    committed[i] = now

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds + 120
    while len(visible) < total and time.monotonic() < deadline:
        time.sleep(0.1)
        if not path.exists():
            continue
        try:
            ids = read_rows(DeltaTable(str(path)), ["id"]).column("id").to_pylist()
        except Exception:  # noqa: BLE001 - a table being created: poll again
            continue
        now = time.perf_counter()
        for i in ids:
            if i >= 0:  # not a warm-up row
                visible.setdefault(i, now)
    thread.join()
    delays = sorted(visible[i] - committed[i] for i in range(total) if i in visible and i in committed)
    if len(delays) != total:
        raise RuntimeError(f"only {len(delays)} of {total} rows became visible")
    return {
        "rows": total,
        "rate_rows_per_s": rate,
        "p50_s": round(statistics.median(delays), 3),
        "p99_s": round(delays[int(len(delays) * 0.99) - 1], 3),
    }


def throughput_round(
    args: argparse.Namespace, db: PrivateMariaDB, lake: Path, server_pid: int, query: Any, n: int
) -> dict[str, Any]:
    """One round of the throughput phase (see the module docstring)."""
    paused = next(
        pid
        for pid, (kind, _) in processes().items()
        if kind == ("source_runner" if args.pause == "source" else "server")
    )
    log(f"round {n}: loading {args.rows:,} rows while the {args.pause} is paused")
    os.kill(paused, signal.SIGSTOP)
    sysbench = args.workload == "sysbench"
    try:
        if sysbench:
            w = oltp_bench.run_workload(db, "oltp_write_only", args.sysbench_events, 8, sysbench_common(args))
            binlog, rows = (w["file"], w["bytes"]), w["rows"]
        else:
            binlog, rows = decode_bench.load_workload(db, args.rows, args.txn_rows), args.rows
        if args.pause == "source":
            wait_idle(server_pid)
    except BaseException:
        os.kill(paused, signal.SIGCONT)
        raise
    before = {p["batchId"] for p in query.recentProgress}
    logged_before = changelog_rows(lake)
    cpu0 = cpu_by_kind()
    t_resume = time.time()
    os.kill(paused, signal.SIGCONT)
    t_done = wait_applied(query, lake, db.database, rows, logged_before, sysbench)
    if sysbench:
        check_sysbench(db, lake, args.tables)
    cpu = {k: round(v - cpu0.get(k, 0.0), 2) for k, v in cpu_by_kind().items()}
    batches = [p for p in progress_with_rows(query) if p["batchId"] not in before]
    secs = t_done - t_resume
    log(f"round {n}: {rows:,} rows in both tables {secs:.2f}s after the {args.pause} resumed")
    for p in batches:  # the timeline, from the resume: trigger, end of addBatch, logged, applied
        start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() - t_resume
        name = f"{p['batchId']:020d}.json"
        logged = ChangeLog(lake).dir.local.glob(f"date=*/batch-{p['batchId']:020d}.parquet")
        marked = min((mtime(f) for f in logged), default=float("nan")) - t_resume  # nan once folded
        applied = mtime(lake / "_pycanal" / "applied" / name) - t_resume
        d = p["durationMs"]
        log(
            f"  batch {p['batchId']}: {p['numInputRows']:>7,} rows, trigger at {start:6.2f}s, latestOffset "
            f"{d.get('latestOffset', 0) / 1000:.2f}s, addBatch {d.get('addBatch', 0) / 1000:.2f}s, logged at "
            f"{marked:.2f}s, applied at {applied:.2f}s"
        )
    out = {
        "rows": rows,
        "wall_s": round(secs, 3),
        "rows_per_s": round(rows / secs),
        "batches": len(batches),
        "rows_per_batch": [p["numInputRows"] for p in batches],
        "cpu_s": {k: v for k, v in sorted(cpu.items()) if v > 0},
        "batch_ms": {  # Spark's phases per micro-batch (addBatch: read + sink)
            k: [p["durationMs"].get(k, 0) for p in batches] for k in sorted(batches[0]["durationMs"])
        },
        "_binlog": binlog,
    }
    if not args.skip_pmr:  # the peer on this round's binlog, right after it: the ratio cancels drift
        # The source's runner paused meanwhile: the idle pipeline polls the server otherwise.
        runners = [pid for pid, (kind, _) in processes().items() if kind == "source_runner"]
        for runner in runners:  # none with --via kafka
            os.kill(runner, signal.SIGSTOP)
        try:
            if sysbench:
                pmr = oltp_bench.pmr(db, binlog[0], rows)
            else:
                pmr_run = decode_bench.PmrRun(db, binlog[0].name)
                pmr = decode_bench.best_of("python-mysql-replication", 1, pmr_run, args.rows)
        finally:
            for runner in runners:
                os.kill(runner, signal.SIGCONT)
        out["python_mysql_replication_rows_per_s"] = pmr["rows_per_s"]
        out["ratio_vs_pmr"] = round(out["rows_per_s"] / pmr["rows_per_s"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--rate", type=int, default=2_000)
    ap.add_argument("--delay-seconds", type=float, default=20.0)
    ap.add_argument("--skip-pmr", action="store_true")
    ap.add_argument("--trigger", default="500 milliseconds", help="the query's processing-time trigger")
    ap.add_argument("--batch-size", type=int, help="the source's batchSize (entries per micro-batch)")
    ap.add_argument("--batch-mb", type=float, help="the source's batchBytes in MiB (per micro-batch)")
    ap.add_argument(
        "--store-mb",
        type=int,
        default=128,
        help="the server's store (MEMSIZE, 1 KB slots; conf/ ships 128 MB)",
    )
    ap.add_argument(
        "--keep-query-dml",
        action="store_true",
        help="the server keeps the SQL text behind rows events (Canal's default; conf/ drops it)",
    )
    ap.add_argument("--warmup-rounds", type=int, default=2, help="throughput rounds that warm up the JIT")
    ap.add_argument(
        "--rounds", type=int, default=3, help="throughput rounds measured: the median is reported"
    )
    ap.add_argument("--txn-rows", type=int, default=1000, help="rows per transaction of the workload")
    ap.add_argument(
        "--workload", choices=("insert", "sysbench"), default="insert",
        help="insert: --rows rows in --txn-rows transactions; sysbench: oltp_write_only rounds",
    )  # fmt: skip
    ap.add_argument(
        "--sysbench-events", type=int, default=15_000, help="oltp_write_only transactions a round"
    )
    ap.add_argument("--tables", type=int, default=4, help="sysbench tables")
    ap.add_argument("--table-size", type=int, default=20_000, help="rows per sysbench table")
    ap.add_argument(
        "--pause", choices=("source", "server"), default="source", help="what waits while loading"
    )
    ap.add_argument(
        "--via", choices=("tcp", "kafka"), default="tcp",
        help="the server's TCP protocol, or canal.serverMode = kafka and Spark's Kafka source",
    )  # fmt: skip
    ap.add_argument("--protobuf", action="store_true", help="--via kafka: canal.mq.flatMessage = false")
    args = ap.parse_args(argv)
    if args.via == "kafka" and args.pause != "server":
        ap.error("--via kafka: the rounds pause the server (--pause server); there is no source runner")
    if args.via == "kafka" and (args.batch_size or args.batch_mb):
        ap.error("--via kafka: --batch-size and --batch-mb are the canal source's options")
    load_start = os.getloadavg()
    result: dict[str, Any] = {}
    with (
        contextlib.redirect_stdout(sys.stderr),
        tempfile.TemporaryDirectory(prefix="pycanal-pipeline-") as tmp,
    ):
        db = PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"])
        kafka = PrivateKafka() if args.via == "kafka" else None
        with db, kafka or contextlib.nullcontext():
            log(f"MariaDB {db.version} on port {db.port}")
            db.execute(f"CREATE TABLE `{db.database}`.`{DELAY_TABLE}` (id INT PRIMARY KEY, v INT)")
            start = db.current_binlog()
            db.execute(f"DROP TABLE `{db.database}`.`{DELAY_TABLE}`")
            db.execute(f"CREATE TABLE `{db.database}`.`{DELAY_TABLE}` (id INT PRIMARY KEY, v INT)")
            port = free_port()
            conf = Path(tmp) / "conf"
            # conf/'s store and event filters; --store-mb MB of 1 KB slots; --keep-query-dml
            extra = (
                servers.shipped_settings()
                + (
                    f"canal.instance.memory.buffer.size = {args.store_mb * 1024}\n"
                    "canal.instance.memory.buffer.memunit = 1024\n"
                )
                + ("canal.instance.filter.query.dml = false\n" if args.keep_query_dml else "")
            )
            tables = r"sbtest\\d+" if args.workload == "sysbench" else decode_bench.TABLE
            servers.write_conf(conf, db, port, start, f"{tables}|{DELAY_TABLE}", extra)
            source: dict[str, Any] = {"address": f"127.0.0.1:{port}", "destination": "bench"}
            if kafka is not None:  # no TCP server: ready once its metrics port answers
                kafka.create_topic("bench", 1)
                port = free_port()
                with (conf / "canal.properties").open("a") as props:
                    props.write(f"canal.serverMode = kafka\nkafka.bootstrap.servers = {kafka.bootstrap_servers}\n"
                                f"canal.metrics.pull.port = {port}\ncanal.mq.flatMessage = {not args.protobuf}\n")  # fmt: skip
                with (conf / "bench" / "instance.properties").open("a") as props:
                    props.write("canal.mq.topic = bench\n")
                source = {"kafka": kafka.bootstrap_servers, "topic": "bench"}
            server = servers.start_server(conf, port, Path(tmp) / "server.log")
            lake = Path(tmp) / "lake"
            java = KAFKA_DRIVER_JAVA_OPTIONS if kafka is not None else DRIVER_JAVA_OPTIONS  # as the job's
            spark = spark_session(Path(tmp) / "spark-tmp", "pycanal-bench", java_options=java)

            def start() -> Pipeline:
                return start_pipeline(
                    spark,
                    lake,
                    trigger=args.trigger,
                    batch_size=args.batch_size,
                    batch_bytes=int(args.batch_mb * 1024 * 1024) if args.batch_mb else None,
                    **source,
                )

            pipeline = start()
            try:
                warm_up(db, lake)  # Spark's first micro-batches start its workers: not measured
                if args.workload == "sysbench":  # the tables' rows reach the lake before any round
                    log(f"sysbench prepare: {args.tables} x {args.table_size:,} rows")
                    oltp_bench.sysbench(db, "oltp_write_only", "prepare", *sysbench_common(args))
                    wait_settled(lake, seconds=5.0)  # longer than any trigger interval used
                    check_sysbench(db, lake, args.tables)
                # 1. commit-to-visible delay at a steady rate
                result["delay"] = delay_phase(db, lake, args.delay_seconds, args.rate)
                log(f"delay: {result['delay']}")
                # 2. throughput: the rows are loaded while the source (its runner process) or the
                #    server is paused (SIGSTOP); then it resumes and the running query takes the
                #    backlog. With the source paused the server parses the backlog into its store
                #    first: the time is from the server into the tables. The first rounds warm
                #    the JVM's JIT for batches of this size (a running pipeline's steady state).
                rounds = [
                    throughput_round(args, db, lake, server.pid, pipeline.query, r)
                    for r in range(1, args.warmup_rounds + args.rounds + 1)
                ]
                size = [r.pop("_binlog") for r in rounds][-1][1]
                warm = rounds[args.warmup_rounds :]
                mid = (len(warm) - 1) // 2  # the median, the lower middle one of an even count
                median = sorted(warm, key=lambda r: r["rows_per_s"])[mid]
                result["pycanal_pipeline"] = {
                    **median,
                    "rounds_rows_per_s": [r["rows_per_s"] for r in rounds],
                }
                if not args.skip_pmr:
                    result["ratio_vs_pmr_median"] = sorted(r["ratio_vs_pmr"] for r in warm)[mid]
                    result["rounds_ratio_vs_pmr"] = [r["ratio_vs_pmr"] for r in rounds]
                pipeline.stop()
                status = Path(f"/proc/{server.pid}/status").read_text()
                result["server_peak_rss_mb"] = int(status.split("VmHWM:")[1].split()[0]) // 1024
            finally:
                pipeline.query.stop()
                spark.stop()
                server.terminate()
                server.wait(timeout=30)
    result["via"] = args.via
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in load_start],
    }
    if args.workload == "sysbench":
        result["workload"] = {"sysbench": "oltp_write_only", "transactions": args.sysbench_events,
                              "tables": args.tables, "table_size": args.table_size, "binlog_bytes": size}  # fmt: skip
    else:
        result["workload"] = {"rows": args.rows, "rows_per_transaction": args.txn_rows, "binlog_bytes": size}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
