"""Pipeline benchmark: MariaDB -> pycanal server -> Spark ``format("canal")`` -> ``apply_changes``
(change log + current-state Delta table), against python-mysql-replication reading the same
binlog in the same run.

The server is an embedded server + ``CanalTcpServer`` in this process; the Spark query
(``local[2]``, this process's driver) writes to a temporary lake.

1. ``delay``: a writer inserts 100-row transactions at ``--rate`` rows/s for ``--delay-seconds``;
   a poller reads the current-state Delta table every 100 ms; the delay of a row is the time from
   its COMMIT returning to the first poll that sees it: p50/p99. (This also warms Spark up.)
2. ``throughput``: the query is stopped, ``--rows`` rows (the ``bench/decode.py`` table,
   1,000-row INSERTs) are loaded, and the query restarts from its checkpoint. The end is when
   both tables hold every row (the change log's commit markers and the Delta table's row count,
   polled every 50 ms); rows/s from the start of the first micro-batch with rows (the server
   to the tables), and from the query's ``start()`` (Spark's restart included).

One JSON object goes to stdout; progress to stderr.

    .venv/bin/python bench/pipeline.py [--rows 300000] [--rate 2000] [--delay-seconds 20] [--skip-pmr]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
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
from pycanal.instance import CanalInstance  # noqa: E402
from pycanal.meta import MemoryMetaManager  # noqa: E402
from pycanal.parse.position import EntryPosition  # noqa: E402
from pycanal.server import CanalServerWithEmbedded  # noqa: E402
from pycanal.server.tcp import CanalTcpServer  # noqa: E402
from pycanal.spark.current import table_path  # noqa: E402
from pycanal.spark.job import spark_session, start_pipeline  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402

_T0 = time.monotonic()
DELAY_TABLE = "pipeline_delay"


def log(msg: str) -> None:
    print(f"[pipeline-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def _epoch(iso: str) -> float:
    """A progress report's ``timestamp`` (UTC, ISO 8601) as epoch seconds."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def wait_applied(query: Any, lake: Path, database: str, rows: int) -> float:
    """Poll until the change log holds ``rows`` + 2 rows (the workload's DROP and CREATE TABLE)
    and the current-state table ``rows`` rows; returns the epoch time it was seen."""
    from deltalake import DeltaTable

    from pycanal.spark.changelog import ChangeLog

    marks = ChangeLog(lake).commits
    path = str(table_path(lake, database, decode_bench.TABLE))
    deadline = time.monotonic() + 600
    logged = 0
    while True:
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
        logged = sum(json.loads(m.read_text())["rows"] for m in marks.glob("*.json")) if marks.is_dir() else 0
        current = 0
        with contextlib.suppress(Exception):  # not created yet, or being committed: poll again
            current = sum(DeltaTable(path).get_add_actions(flatten=True).column("num_records").to_pylist())
        if logged >= rows + 2 and current >= rows:
            return time.time()
        if time.monotonic() > deadline:
            raise RuntimeError(f"after 600 s: {logged:,} rows in the change log, {current:,} in the table")
        time.sleep(0.05)


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
            ids = DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
        except Exception:  # noqa: BLE001 - a table being created: poll again
            continue
        now = time.perf_counter()
        for i in ids:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--rate", type=int, default=2_000)
    ap.add_argument("--delay-seconds", type=float, default=20.0)
    ap.add_argument("--skip-pmr", action="store_true")
    args = ap.parse_args(argv)
    load_start = os.getloadavg()
    result: dict[str, Any] = {}
    with (
        contextlib.redirect_stdout(sys.stderr),
        tempfile.TemporaryDirectory(prefix="pycanal-pipeline-") as tmp,
    ):
        db = PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"])
        with db:
            log(f"MariaDB {db.version} on port {db.port}")
            db.execute(f"CREATE TABLE `{db.database}`.`{DELAY_TABLE}` (id INT PRIMARY KEY, v INT)")
            start = EntryPosition(*db.current_binlog())
            db.execute(f"DROP TABLE `{db.database}`.`{DELAY_TABLE}`")
            db.execute(f"CREATE TABLE `{db.database}`.`{DELAY_TABLE}` (id INT PRIMARY KEY, v INT)")
            server = CanalServerWithEmbedded()
            parser = {
                "master_address": (db.host, db.port),
                "username": db.repl_user,
                "password": db.repl_password,
                "master_position": start,
            }
            server.add_instance(
                CanalInstance("bench", parser, store={"buffer_size": 65536}, meta_manager=MemoryMetaManager())
            )
            tcp = CanalTcpServer(server).start()
            lake = Path(tmp) / "lake"
            spark = spark_session(Path(tmp) / "spark-tmp", "pycanal-bench")

            def start_query() -> Any:
                return start_pipeline(
                    spark,
                    lake,
                    address=f"127.0.0.1:{tcp.port}",
                    destination="bench",
                    trigger="500 milliseconds",
                )

            query = start_query()
            try:
                # 1. commit-to-visible delay at a steady rate (also warms Spark and its workers up)
                result["delay"] = delay_phase(db, lake, args.delay_seconds, args.rate)
                log(f"delay: {result['delay']}")
                query.stop()
                # 2. throughput: the rows are loaded while the query is stopped, then it restarts
                #    from its checkpoint and applies them all; timed from start() to the last row
                log(f"loading {args.rows:,} rows")
                path, size = decode_bench.load_workload(db, args.rows)
                t_restart = time.time()
                query = start_query()
                t_done = wait_applied(query, lake, db.database, args.rows)
                batches = [p for p in query.recentProgress if p["numInputRows"]]
                t_first = min(_epoch(p["timestamp"]) for p in batches)
                secs, secs_restart = t_done - t_first, t_done - t_restart
                result["pycanal_pipeline"] = {
                    "rows": args.rows,
                    "wall_s": round(secs, 3),
                    "rows_per_s": round(args.rows / secs),
                    "wall_s_incl_restart": round(secs_restart, 3),
                    "rows_per_s_incl_restart": round(args.rows / secs_restart),
                    "batches": len(batches),
                    "rows_per_batch_max": max(p["numInputRows"] for p in batches),
                }
                log(
                    f"pipeline: {args.rows:,} rows in both tables {secs:.2f}s after the first micro-batch began, "
                    f"{secs_restart:.2f}s after the query restarted"
                )
                query.stop()
                if not args.skip_pmr:  # after the pipeline: Spark's idle Python workers stay warm
                    pmr_run = decode_bench.PmrRun(db, path.name)
                    result["python_mysql_replication"] = decode_bench.best_of(
                        "python-mysql-replication", 1, pmr_run, args.rows
                    )
            finally:
                query.stop()
                spark.stop()
                tcp.stop()
                server.stop()
    pmr = result.get("python_mysql_replication")
    if pmr and result["pycanal_pipeline"]["rows_per_s"]:
        result["ratio_vs_pmr"] = round(result["pycanal_pipeline"]["rows_per_s"] / pmr["rows_per_s"], 2)
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in load_start],
    }
    result["workload"] = {"rows": args.rows, "binlog_bytes": size}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
