"""OLTP benchmark: small transactions, as production sources write them.

sysbench (Debian package, installed by scripts/setup.sh) writes into the private MariaDB, then every
reader takes the same binlog file in one run:

1. ``sysbench``: ``oltp_write_only`` (per transaction: an indexed UPDATE, a non-indexed UPDATE, a
   DELETE, an INSERT; ``--threads`` clients; ``--tables`` tables of ``--table-size`` rows) for
   ``--events`` transactions, and ``oltp_insert`` (1-row transactions) for ``--insert-events``. Each
   workload sits alone in one binlog file (FLUSH BINARY LOGS around it); its write rate is the file's
   rows over sysbench's wall time, on the same 2 cores the readers then use.
2. ``mariadb_binlog``: ``mariadb-binlog -v --base64-output=decode-rows FILE > /dev/null`` (C),
   alternated ``--reader-repeat`` times with the jsonl CLI (4.): the median run of each.
3. ``python_mysql_replication``: ``BinLogStreamReader`` streaming the file (rows events, every
   value touched).
4. ``cli_jsonl``: ``pycanal binlog decode FILE --format jsonl > /dev/null`` (its own process, start-up
   included), against python-mysql-replication + ``json.dumps`` of every row; ``split_scan``: the
   scan of every event header that plans the file's parts (``pycanal.binlog.splits``, alone in the
   CLI's parent and on Spark's driver), compiled and interpreted, as seconds a GiB of such a file;
5. ``pycanal_server`` and ``canal``: a ``pycanal server`` process and Alibaba Canal 1.1.7 itself
   (``bench/servers.py``: both with Canal's default settings, Canal with ``startup.sh``'s G1 and
   heap), a fresh process per file, drained by the same ``SimpleConnector`` that parses every
   Entry and RowChange and touches every column value: first a warm-up destination on another
   MariaDB (an ``oltp_write_only`` run of a third of ``--events``: the JIT warms up), then the
   file's destination, started by the subscription; the clock runs from it to the file's last
   transaction end. The server's CPU seconds over the file (its process tree) and peak RSS.

Ratios (same run, same file): pycanal server / Canal, / python-mysql-replication, / sysbench's
write rate. One JSON object on stdout; progress on stderr. ``--profile DIR`` records a profile
of the pycanal server while it drains the files: py-spy's (the GIL holder's stacks), or with
``--profiler perf`` perf's (C stacks, which see into the compiled twins: ``bench/perf_profile.py``).
``--pipeline`` adds the Spark pipeline (``bench/pipeline.py --workload sysbench``: server ->
``format("canal")`` -> change log + current-state Delta tables, oltp_write_only rounds with
python-mysql-replication on each round's file): ``spark_pipeline`` takes a backlog the server holds
in its store, ``spark_pipeline_with_parse`` one the server parses during the measured window
(conf/'s settings).

    .venv/bin/python bench/oltp.py [--events 15000] [--insert-events 20000] [--skip-pmr] [--skip-canal]
        [--profile DIR [--profiler perf]] [--filter-query-dml] [--pipeline]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode as decode_bench  # noqa: E402
import servers  # noqa: E402
from pycanal.binlog import read_events, splits  # noqa: E402
from pycanal.binlog.events import RowsEvent, TransactionPayloadEvent, XidEvent  # noqa: E402
from pycanal.compiled import interpreted, is_compiled  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB, mariadb_binlog_path  # noqa: E402

_T0 = time.monotonic()


def scan_speeds(path: Path, repeat: int = 5) -> dict[str, Any]:
    """``pycanal.binlog.splits.scan`` over the file's bytes in memory, compiled
    (``scripts/build_ext.py``) and interpreted, the best of ``repeat`` each, as seconds a GiB."""
    data = path.read_bytes()
    out: dict[str, Any] = {"compiled_built": is_compiled(splits)}
    for name, module in (("compiled", splits), ("interpreted", interpreted("pycanal.binlog.splits"))):
        best = min(_timed(module.scan, data) for _ in range(repeat))
        out[f"{name}_s_per_gib"] = round(best * (1 << 30) / len(data), 3)
    out["compiled_over_interpreted"] = round(out["interpreted_s_per_gib"] / out["compiled_s_per_gib"], 1)
    return out


def _timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def log(msg: str) -> None:
    print(f"[oltp-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the source
def source_db() -> PrivateMariaDB:
    """The sysbench source: room for its tables in memory, commits not flushed (the writer's rate
    is the file's, not the disk's)."""
    return PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M",
                                      "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0"])  # fmt: skip


def sysbench(db: PrivateMariaDB, test: str, command: str, *args: str) -> str:
    exe = shutil.which("sysbench")
    if exe is None:
        raise SystemExit("sysbench is missing: run scripts/setup.sh (it installs the Debian package)")
    cmd = [exe, test, "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
           f"--mysql-db={db.database}", *args, command]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sysbench {test} {command} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def run_workload(
    db: PrivateMariaDB, test: str, events: int, threads: int, common: list[str]
) -> dict[str, Any]:
    """One sysbench run alone in one binlog file: its file, rows, transactions and write rate. The
    file starts a second after the last one ended: Canal (with its TSDB) looks a start position up
    by its time and would begin in the file before when both share one."""
    time.sleep(1.1)
    db.execute("FLUSH BINARY LOGS")
    path = db.binlog_files()[-1]
    t0 = time.perf_counter()
    out = sysbench(db, test, "run", *common, f"--threads={threads}", f"--events={events}", "--time=0")
    wall = time.perf_counter() - t0
    db.execute("FLUSH BINARY LOGS")
    m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", out)
    rows, txns = count_file(path)
    log(
        f"{test}: {txns:,} transactions, {rows:,} rows in {wall:.2f}s ({path.name}, {path.stat().st_size:,} B)"
    )
    return {
        "file": path,
        "rows": rows,
        "transactions": txns,
        "bytes": path.stat().st_size,
        "sysbench": {
            "wall_s": round(wall, 3),
            "rows_per_s": round(rows / wall),
            "txn_per_s": round(txns / wall),
            "sysbench_tps": float(m.group(2)) if m else None,
            "threads": threads,
        },
    }


def count_file(path: Path) -> tuple[int, int]:
    rows = txns = 0
    for e in read_events(path):
        inner = e.events if isinstance(e, TransactionPayloadEvent) else (e,)
        for x in inner:
            if isinstance(x, RowsEvent):
                rows += len(x.rows)
            elif isinstance(x, XidEvent):
                txns += 1
    return rows, txns


# --------------------------------------------------------------------------- the readers
def mariadb_binlog(path: Path, rows: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run([mariadb_binlog_path(), "--no-defaults", "-v", "--base64-output=decode-rows", str(path)],
                       stdout=null, check=True)  # fmt: skip
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 3), "rows_per_s": round(rows / wall)}


def text_readers(path: Path, rows: int, repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``mariadb-binlog -v`` and the jsonl CLI, alternated ``repeat`` times (the machine's drift
    falls on both): each one's median run, and its runs' walls."""

    def median_of(walls: list[float]) -> dict[str, Any]:
        wall = statistics.median(walls)
        return {"wall_s": round(wall, 3), "rows_per_s": round(rows / wall), "runs_s": walls}

    mb: list[float] = []
    cli: list[float] = []
    for _ in range(repeat):
        mb.append(mariadb_binlog(path, rows)["wall_s"])
        t0 = time.perf_counter()
        decode_bench.cli_run(path, rows)
        cli.append(round(time.perf_counter() - t0, 3))
    return median_of(mb), median_of(cli)


def pmr(db: PrivateMariaDB, path: Path, rows: int) -> dict[str, Any]:
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    kinds = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]
    stream = decode_bench.pmr_stream(db, path.name, 2000 + os.getpid() % 100000, kinds)
    n = 0
    t0 = time.perf_counter()
    try:
        for ev in stream:
            if stream.log_file != path.name:
                break  # non-blocking streams go on into the next files
            for row in ev.rows:
                n += 1
                for image in row.values():
                    for _v in image.values():
                        pass
    finally:
        stream.close()
    wall = time.perf_counter() - t0
    if n != rows:
        raise RuntimeError(f"python-mysql-replication read {n:,} rows, the file holds {rows:,}")
    return {"wall_s": round(wall, 3), "rows_per_s": round(rows / wall)}


def spark_pipeline(args: argparse.Namespace, pause: str = "source") -> dict[str, Any]:
    """bench/pipeline.py on sysbench rounds in its own process (its own MariaDB, server and Spark):
    rows/s into the change log and the current-state tables, python-mysql-replication on each
    round's file right after it. ``pause`` source: the backlog waits in the server's store, the
    rate is the pipeline's from there; server: the server parses it in the measured window too
    (everything on the same 2 cores)."""
    cmd = [sys.executable, str(Path(__file__).resolve().parent / "pipeline.py"), "--workload", "sysbench",
           "--sysbench-events", str(args.events), "--tables", str(args.tables), "--table-size",
           str(args.table_size), "--warmup-rounds", "1", "--rounds", "3", "--delay-seconds", "5",
           "--pause", pause]  # fmt: skip
    log("Spark pipeline: " + " ".join(cmd[1:]))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench/pipeline.py failed: {proc.stderr[-3000:]}")
    out = json.loads(proc.stdout)
    p = out["pycanal_pipeline"]
    res = {k: p[k] for k in ("rows", "rows_per_s", "rounds_rows_per_s", "cpu_s")}
    res["ratio_vs_pmr_median"] = out.get("ratio_vs_pmr_median")
    res["rounds_ratio_vs_pmr"] = out.get("rounds_ratio_vs_pmr")
    log(
        f"Spark pipeline: {res['rows_per_s']:,} rows/s, {res['ratio_vs_pmr_median']}x python-mysql-replication"
    )
    return res


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument(
        "--events",
        type=int,
        default=15_000,
        help="oltp_write_only transactions (0: skip; sysbench's 0 is no limit)",
    )
    ap.add_argument(
        "--insert-events", type=int, default=20_000, help="oltp_insert 1-row transactions (0: skip)"
    )
    ap.add_argument("--skip-pmr", action="store_true")
    ap.add_argument(
        "--reader-repeat", type=int, default=3,
        help="runs of mariadb-binlog and the jsonl CLI, alternated: their medians (default 3)",
    )  # fmt: skip
    ap.add_argument("--skip-canal", action="store_true", help="no Canal 1.1.7 column")
    ap.add_argument("--profile", type=Path, help="write profiles of the server here")
    ap.add_argument(
        "--profiler", choices=("py-spy", "perf"), default="py-spy",
        help="py-spy: the GIL holder's Python stacks; perf: C stacks, which see into the compiled twins",
    )  # fmt: skip
    ap.add_argument(
        "--filter-query-dml", action="store_true",
        help="also the server with canal.instance.filter.query.dml (no ANNOTATE_ROWS entries)",
    )  # fmt: skip
    ap.add_argument(
        "--pipeline", action="store_true",
        help="also the Spark pipeline on oltp_write_only rounds (bench/pipeline.py --workload sysbench)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    result: dict[str, Any] = {}
    load_start = os.getloadavg()
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory(prefix="pycanal-oltp-") as tmp_s:
        tmp = Path(tmp_s)
        db = source_db()
        with db, contextlib.ExitStack() as stack:
            common = [f"--tables={args.tables}", f"--table-size={args.table_size}"]
            log(
                f"MariaDB {db.version} on port {db.port}; sysbench prepare {args.tables} x {args.table_size:,} rows"
            )
            sysbench(db, "oltp_write_only", "prepare", *common)
            # The warm-up source: another MariaDB, so that nothing else parses while a file is measured.
            warm_db = stack.enter_context(PrivateMariaDB(extra_args=["--sync-binlog=0"], server_id=3))
            sysbench(warm_db, "oltp_write_only", "prepare", *common)
            warmup = run_workload(warm_db, "oltp_write_only", max(1, args.events // 3), args.threads, common)
            warm_feed = servers.Feed(warm_db, (warmup["file"].name, 4), "sbtest.*")
            workloads = {}
            if args.events:
                workloads["oltp_write_only"] = run_workload(
                    db, "oltp_write_only", args.events, args.threads, common
                )
            if args.insert_events:
                workloads["oltp_insert"] = run_workload(
                    db, "oltp_insert", args.insert_events, args.threads, common
                )
            for name, w in workloads.items():
                r: dict[str, Any] = {k: v for k, v in w.items() if k != "file"}
                r["mariadb_binlog"], r["cli_jsonl"] = text_readers(w["file"], w["rows"], args.reader_repeat)
                log(f"{name}: mariadb-binlog {r['mariadb_binlog']['rows_per_s']:,} rows/s")
                if not args.skip_pmr:
                    r["python_mysql_replication"] = pmr(db, w["file"], w["rows"])
                    log(
                        f"{name}: python-mysql-replication {r['python_mysql_replication']['rows_per_s']:,} rows/s"
                    )
                r["split_scan"] = scan_speeds(w["file"])
                log(f"{name}: the split scan {r['split_scan']}")
                if not args.skip_pmr:
                    pj = decode_bench.best_of(
                        "pmr + json.dumps", 1, decode_bench.PmrJsonRun(db, w["file"].name), w["rows"]
                    )
                    r["python_mysql_replication_json"] = {
                        "rows_per_s": pj["rows_per_s"],
                        "wall_s": pj["wall_s"],
                    }
                result[name] = r

            def drained(w: dict[str, Any]) -> tuple[str, int, int]:
                return w["file"].name, w["rows"], w["transactions"]

            for name, w in workloads.items():
                bench = servers.Feed(db, (w["file"].name, 4), "sbtest.*")
                racers: list[tuple[str, Any, Path | None]] = [
                    ("pycanal_server", servers.pycanal_server(bench, warm_feed, tmp), args.profile)
                ]
                if args.filter_query_dml:  # Canal's switch for the SQL behind rows events: not even fetched
                    extra = "canal.instance.filter.query.dml = true\n"
                    server = servers.pycanal_server(bench, warm_feed, tmp, extra)
                    racers.append(("pycanal_server_query_dml_filtered", server, None))
                if not args.skip_canal:
                    racers.append(("canal", servers.canal_server(bench, warm_feed), None))
                for racer, server, profile in racers:
                    spy = profile / f"{racer}-{name}.txt" if profile is not None else None
                    res = servers.race(
                        server, drained(warmup), drained(w), profile=spy, profiler=args.profiler
                    )
                    log(f"{name}: {racer} {res['rows_per_s']:,} rows/s, server CPU {res['server_cpu_s']} s, "
                        f"peak RSS {res['server_peak_rss_mb']} MB")  # fmt: skip
                    result[name][racer] = res
            for name, r in result.items():
                rate = r["pycanal_server"]["rows_per_s"]
                ratios = {"server_vs_sysbench_write": round(rate / r["sysbench"]["rows_per_s"], 2),
                          "server_vs_mariadb_binlog": round(rate / r["mariadb_binlog"]["rows_per_s"], 2)}  # fmt: skip
                if "canal" in r:
                    ratios["server_vs_canal"] = round(rate / r["canal"]["rows_per_s"], 2)
                    ratios["server_cpu_vs_canal"] = round(
                        r["pycanal_server"]["server_cpu_s"] / r["canal"]["server_cpu_s"], 2
                    )
                    ratios["canal_vs_sysbench_write"] = round(
                        r["canal"]["rows_per_s"] / r["sysbench"]["rows_per_s"], 2
                    )
                if not args.skip_pmr:
                    ratios["server_vs_pmr"] = round(rate / r["python_mysql_replication"]["rows_per_s"], 2)
                    ratios["cli_jsonl_vs_pmr_json"] = round(
                        r["cli_jsonl"]["rows_per_s"] / r["python_mysql_replication_json"]["rows_per_s"], 2
                    )
                ratios["cli_jsonl_vs_mariadb_binlog"] = round(
                    r["cli_jsonl"]["rows_per_s"] / r["mariadb_binlog"]["rows_per_s"], 2
                )
                r["ratios"] = ratios
                log(f"{name}: {ratios}")
    if args.pipeline:
        result["spark_pipeline"] = spark_pipeline(args)
        result["spark_pipeline_with_parse"] = spark_pipeline(args, pause="server")
    result["settings"] = (
        "both servers: Canal's default canal.properties (16384-slot MEMSIZE store, filter.query.dml off, "
        "parallel parser); Canal 1.1.7 with startup.sh's G1 and heap " + " ".join(servers.CANAL_HEAP)
    )
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in load_start],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
