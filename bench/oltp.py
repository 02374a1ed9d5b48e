"""OLTP benchmark: small transactions, as production sources write them.

sysbench (Debian package, installed by scripts/setup.sh) writes into the private MariaDB, then every
reader takes the same binlog file in one run:

1. ``sysbench``: ``oltp_write_only`` (per transaction: an indexed UPDATE, a non-indexed UPDATE, a
   DELETE, an INSERT; ``--threads`` clients; ``--tables`` tables of ``--table-size`` rows) for
   ``--events`` transactions, and ``oltp_insert`` (1-row transactions) for ``--insert-events``. Each
   workload sits alone in one binlog file (FLUSH BINARY LOGS around it); its write rate is the file's
   rows over sysbench's wall time, on the same 2 cores the readers then use.
2. ``mariadb_binlog``: ``mariadb-binlog -v --base64-output=decode-rows FILE > /dev/null`` (C).
3. ``python_mysql_replication``: ``BinLogStreamReader`` streaming the file (rows events, every
   value touched).
4. ``cli_jsonl``: ``pycanal binlog decode FILE --format jsonl > /dev/null`` (its own process, start-up
   included), against python-mysql-replication + ``json.dumps`` of every row;
5. ``pycanal_server``: a ``pycanal server`` process (conf/'s store, started at the file's start) and
   a ``SimpleConnector`` in this process that parses every Entry and RowChange and touches every
   column value; the clock runs from the moment the destination took the subscription (it starts
   parsing a few ms before) to the last transaction end.

Ratios (same run, same file): pycanal server / python-mysql-replication and pycanal server /
sysbench's write rate. One JSON object on stdout; progress on stderr. ``--profile DIR`` records a
py-spy profile of the server (the GIL holder's stacks) while it drains the backlog. ``--pipeline``
adds the Spark pipeline (``bench/pipeline.py --workload sysbench``: server -> ``format("canal")``
-> change log + current-state Delta tables, oltp_write_only rounds with python-mysql-replication on
each round's file): ``spark_pipeline`` takes a backlog the server holds in its store,
``spark_pipeline_with_parse`` one the server parses during the measured window (conf/'s settings).

    .venv/bin/python bench/oltp.py [--events 15000] [--insert-events 20000] [--skip-pmr] [--profile DIR]
        [--pipeline]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode as decode_bench  # noqa: E402
from e2e import start_server, subscribed, write_conf  # noqa: E402
from pycanal.binlog import read_events  # noqa: E402
from pycanal.binlog.events import RowsEvent, TransactionPayloadEvent, XidEvent  # noqa: E402
from pycanal.client import SimpleConnector  # noqa: E402
from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402
from pycanal.testing._process import free_port  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB, mariadb_binlog_path  # noqa: E402

_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[oltp-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the source
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
    """One sysbench run alone in one binlog file: its file, rows, transactions and write rate."""
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


def drain(conn: SimpleConnector, file: str, rows: int, txns: int, t0: float) -> dict[str, Any]:
    """GET + ack until every row and transaction end arrived; parse and touch everything. The clock
    starts when the destination took the subscription (it started parsing a few ms before)."""
    n = ends = 0
    cpu0 = time.process_time()
    while n < rows or ends < txns:
        msg = conn.get_without_ack(4096, timeout=200, unit="ms")
        if msg.id == -1:
            continue
        for entry in msg.entries:
            if entry.header.logfileName != file:
                continue  # the server goes on into the next workload's file
            if entry.entryType == pb.TRANSACTIONEND:
                ends += 1
                continue
            if entry.entryType != pb.ROWDATA:
                continue
            change = pb.RowChange.FromString(entry.storeValue)
            if change.eventType not in (pb.INSERT, pb.UPDATE, pb.DELETE):
                continue
            for row in change.rowDatas:
                for c in row.beforeColumns:
                    _ = c.value
                for c in row.afterColumns:
                    _ = c.value
                n += 1
        conn.ack(msg.id)
    wall = time.perf_counter() - t0
    if n != rows or ends != txns:
        raise RuntimeError(
            f"the server delivered {n:,} rows / {ends:,} transactions, expected {rows:,} / {txns:,}"
        )
    return {"wall_s": round(wall, 3), "rows_per_s": round(rows / wall), "txn_per_s": round(txns / wall),
            "client_cpu_s": round(time.process_time() - cpu0, 3)}  # fmt: skip


def pycanal_server(
    db: PrivateMariaDB, w: dict[str, Any], tmp: Path, profile: Path | None, query_dml_filtered: bool = False
) -> dict[str, Any]:
    port = free_port()
    conf = tmp / f"conf-{w['file'].name}-{port}"
    write_conf(conf, db, port, (w["file"].name, 4), "sbtest.*")
    with (Path(__file__).resolve().parent.parent / "conf" / "canal.properties").open() as f:
        shipped = [line for line in f if line.startswith("canal.instance.memory.")]
    with (conf / "bench" / "instance.properties").open("a") as f:
        f.writelines(shipped)  # conf/'s store
        if query_dml_filtered:  # Canal's switch for the SQL behind rows events: not even fetched
            f.write("canal.instance.filter.query.dml = true\n")
    proc = start_server(conf, port, tmp / "server.log")
    spy = None
    try:
        conn = subscribed(port)
        t0 = time.perf_counter()
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            out = profile / f"server-{w['file'].name}.txt"
            spy = subprocess.Popen([_py_spy(), "record", "--pid", str(proc.pid), "--format", "raw", "--rate", "200",
                                    "--threads", "--gil", "--subprocesses", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        c0 = cpu_of(proc.pid)
        res = drain(conn, w["file"].name, w["rows"], w["transactions"], t0)
        res["server_cpu_s"] = round(cpu_of(proc.pid) - c0, 3)
        conn.disconnect()
    finally:
        if spy is not None:
            spy.send_signal(2)
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(30)
        proc.terminate()
        proc.wait(timeout=30)
    return res


def _py_spy() -> str:
    """py-spy from the dev dependencies (beside this interpreter), else from PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else "py-spy"


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


def cpu_of(pid: int) -> float:
    """CPU seconds of a process and its children, live (the parser's conversion process) or
    reaped."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])
    seconds = ticks / os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    seconds += cpu_of(int(child))
    return seconds


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--events", type=int, default=15_000, help="oltp_write_only transactions")
    ap.add_argument(
        "--insert-events", type=int, default=20_000, help="oltp_insert 1-row transactions (0: skip)"
    )
    ap.add_argument("--skip-pmr", action="store_true")
    ap.add_argument("--profile", type=Path, help="write py-spy profiles of the server here")
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
        db = PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M",
                                        "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0"])  # fmt: skip
        with db:
            common = [f"--tables={args.tables}", f"--table-size={args.table_size}"]
            log(
                f"MariaDB {db.version} on port {db.port}; sysbench prepare {args.tables} x {args.table_size:,} rows"
            )
            sysbench(db, "oltp_write_only", "prepare", *common)
            workloads = {
                "oltp_write_only": run_workload(db, "oltp_write_only", args.events, args.threads, common)
            }
            if args.insert_events:
                workloads["oltp_insert"] = run_workload(
                    db, "oltp_insert", args.insert_events, args.threads, common
                )
            for name, w in workloads.items():
                r: dict[str, Any] = {k: v for k, v in w.items() if k != "file"}
                r["mariadb_binlog"] = mariadb_binlog(w["file"], w["rows"])
                log(f"{name}: mariadb-binlog {r['mariadb_binlog']['rows_per_s']:,} rows/s")
                if not args.skip_pmr:
                    r["python_mysql_replication"] = pmr(db, w["file"], w["rows"])
                    log(
                        f"{name}: python-mysql-replication {r['python_mysql_replication']['rows_per_s']:,} rows/s"
                    )
                cli = decode_bench.best_of(
                    "cli jsonl", 1, lambda w=w: decode_bench.cli_run(w["file"], w["rows"]), w["rows"]
                )
                r["cli_jsonl"] = {"rows_per_s": cli["rows_per_s"], "wall_s": cli["wall_s"]}
                if not args.skip_pmr:
                    pj = decode_bench.best_of(
                        "pmr + json.dumps", 1, decode_bench.PmrJsonRun(db, w["file"].name), w["rows"]
                    )
                    r["python_mysql_replication_json"] = {
                        "rows_per_s": pj["rows_per_s"],
                        "wall_s": pj["wall_s"],
                    }
                r["pycanal_server"] = pycanal_server(db, w, tmp, args.profile)
                if args.filter_query_dml:
                    r["pycanal_server_query_dml_filtered"] = pycanal_server(db, w, tmp, None, True)
                    log(
                        f"{name}: with filter.query.dml {r['pycanal_server_query_dml_filtered']['rows_per_s']:,} rows/s"
                    )
                log(f"{name}: pycanal server -> TCP client {r['pycanal_server']['rows_per_s']:,} rows/s")
                rate = r["pycanal_server"]["rows_per_s"]
                ratios = {"server_vs_sysbench_write": round(rate / r["sysbench"]["rows_per_s"], 2),
                          "server_vs_mariadb_binlog": round(rate / r["mariadb_binlog"]["rows_per_s"], 2)}  # fmt: skip
                if not args.skip_pmr:
                    ratios["server_vs_pmr"] = round(rate / r["python_mysql_replication"]["rows_per_s"], 2)
                    ratios["cli_jsonl_vs_pmr_json"] = round(
                        r["cli_jsonl"]["rows_per_s"] / r["python_mysql_replication_json"]["rows_per_s"], 2
                    )
                r["ratios"] = ratios
                log(f"{name}: {ratios}")
                result[name] = r
    if args.pipeline:
        result["spark_pipeline"] = spark_pipeline(args)
        result["spark_pipeline_with_parse"] = spark_pipeline(args, pause="server")
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in load_start],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
