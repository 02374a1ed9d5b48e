"""Pipeline benchmark: MariaDB -> pycanal server -> Spark ``format("canal")`` -> ``apply_changes``
(change log + current-state Delta table), against python-mysql-replication reading the same
binlog in the same run.

The server is an embedded server + ``CanalTcpServer`` in this process; the Spark query
(``local[2]``, this process's driver) writes to a temporary lake.

1. ``delay``: a writer inserts 100-row transactions at ``--rate`` rows/s for ``--delay-seconds``;
   a poller reads the current-state Delta table every 100 ms; the delay of a row is the time from
   its COMMIT returning to the first poll that sees it: p50/p99. (This also warms Spark up.)
2. ``throughput``: the query is stopped, ``--rows`` rows (the ``bench/decode.py`` table,
   1,000-row INSERTs) are loaded, and the query restarts from its checkpoint: rows/s from its
   ``start()`` to the last row applied into both tables (the restart is counted).

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


def applied_rows(query: Any, seen: dict[int, tuple[float, int]]) -> int:
    for p in query.recentProgress:
        if p["batchId"] not in seen and p["numInputRows"]:
            seen[p["batchId"]] = (time.perf_counter(), p["numInputRows"])
    return sum(n for _, n in seen.values())


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
                if not args.skip_pmr:
                    pmr_run = decode_bench.PmrRun(db, path.name)
                    result["python_mysql_replication"] = decode_bench.best_of(
                        "python-mysql-replication", 1, pmr_run, args.rows
                    )
                t0 = time.perf_counter()
                query = start_query()
                seen: dict[int, tuple[float, int]] = {}
                deadline = time.monotonic() + 600
                while applied_rows(query, seen) < args.rows + 2:  # + DROP and CREATE TABLE rows
                    time.sleep(0.1)
                    if query.exception() is not None:
                        raise RuntimeError(f"query failed: {query.exception()}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {applied_rows(query, seen):,} rows applied")
                secs = max(t for t, _ in seen.values()) - t0
                busy = sum(
                    p["durationMs"].get("triggerExecution", 0)
                    for p in query.recentProgress
                    if p["numInputRows"]
                )
                result["pycanal_pipeline"] = {
                    "rows": args.rows,
                    "wall_s": round(secs, 3),
                    "rows_per_s": round(args.rows / secs),
                    "batches": len(seen),
                    "batch_busy_s": round(busy / 1000, 3),
                }
                log(f"pipeline: {args.rows:,} rows applied {secs:.2f}s after the query (re)started")
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
