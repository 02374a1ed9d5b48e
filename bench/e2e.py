"""End-to-end benchmark: MariaDB -> ``pycanal server`` (its own process) and Alibaba Canal 1.1.7
itself -> the same TCP client decoding every Entry, against python-mysql-replication on the same
binlog in the same run.

1. ``throughput``: the 300k-row workload of ``bench/decode.py`` (1,000-row transactions) alone in
   one binlog file. Each server (``bench/servers.py``: Canal's default settings for both, Canal
   with ``startup.sh``'s G1 and heap) first serves a warm-up destination on another MariaDB (a
   third of the rows: the JIT warms up, not measured), then the workload's destination, started
   by the subscription; a ``SimpleConnector`` in this process gets batches (``get_without_ack`` +
   ``ack``), parses every ``Entry`` and ``RowChange`` and touches every column value; rows/s from
   the subscription to the last transaction end. The server's CPU seconds and peak RSS.
2. ``latency``: with the server caught up, a writer thread commits 50-row transactions at a
   steady 5,000 rows/s for ``--latency-seconds`` into a table of each server's own; each row
   carries its id, the writer notes the time its COMMIT returned, the client the time the row
   arrived: p50/p99 of the difference. The client's GETs wait at most 5 ms (Canal's timed get
   waits for a full batch otherwise).
3. ``python_mysql_replication``: ``BinLogStreamReader`` over the same workload file (the settings
   of ``bench/decode.py``), measured first, before the servers start.

One JSON object goes to stdout; progress to stderr.

    .venv/bin/python bench/e2e.py [--rows 300000] [--latency-seconds 10] [--skip-pmr] [--skip-canal]
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

import decode as decode_bench  # noqa: E402  (the workload and the python-mysql-replication runner)
import servers  # noqa: E402
from oltp import count_file  # noqa: E402
from pycanal.client import SimpleConnector  # noqa: E402
from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402

_T0 = time.monotonic()
LAT_TABLE = "e2e_latency"


def log(msg: str) -> None:
    print(f"[e2e-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def consume(
    conn: SimpleConnector, rows: int, on_row: Any = None, batch: int = 1000, wait_ms: int = 200
) -> tuple[int, float]:
    """Get + parse until ``rows`` rows arrived; returns (rows, seconds from the first row).
    A timed GET returns when ``batch`` entries are there or after ``wait_ms`` (Canal's rule)."""
    n = 0
    first = None
    while n < rows:
        msg = conn.get_without_ack(batch, timeout=wait_ms, unit="ms")
        if msg.id == -1:
            continue
        for entry in msg.entries:
            if entry.entryType != pb.ROWDATA:
                continue
            change = pb.RowChange.FromString(entry.storeValue)
            if change.isDdl:
                continue
            if first is None:
                first = time.perf_counter()
            for row in change.rowDatas:
                for c in row.afterColumns:
                    if on_row is not None and c.name == "id":
                        on_row(int(c.value))
                    _ = c.value
                n += 1
        conn.ack(msg.id)
    return n, time.perf_counter() - (first or time.perf_counter())


def latency_phase(
    db: PrivateMariaDB, conn: SimpleConnector, seconds: float, rate: int, table: str
) -> dict[str, Any]:
    db.execute(f"CREATE TABLE IF NOT EXISTS `{db.database}`.`{table}` (id INT PRIMARY KEY, v INT)")
    per_txn = 50
    total = int(seconds * rate) // per_txn * per_txn
    committed: dict[int, float] = {}
    received: dict[int, float] = {}
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with db.root_connection(db.database) as c, c.cursor() as cur:
                t0 = time.perf_counter()
                for t in range(total // per_txn):
                    due = t0 + t * per_txn / rate
                    delay = due - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    ids = range(t * per_txn, (t + 1) * per_txn)
                    cur.execute(f"INSERT INTO `{table}` VALUES " + ",".join(f"({i},{i})" for i in ids))
                    c.commit()
                    now = time.perf_counter()
                    for i in ids:
                        committed[i] = now
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    # A short timed GET: Canal's timed get waits for a full batch, so the wait bounds the latency.
    consume(conn, total, lambda i: received.setdefault(i, time.perf_counter()), batch=1000, wait_ms=5)
    thread.join()
    if errors:
        raise errors[0]
    lat = sorted((received[i] - committed[i]) * 1000 for i in range(total))
    return {
        "rows": total,
        "rate_rows_per_s": rate,
        "p50_ms": round(statistics.median(lat), 2),
        "p99_ms": round(lat[int(len(lat) * 0.99) - 1], 2),
        "max_ms": round(lat[-1], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=5_000, help="rows/s of the latency phase")
    ap.add_argument("--skip-pmr", action="store_true")
    ap.add_argument("--skip-canal", action="store_true", help="no Canal 1.1.7 column")
    ap.add_argument(
        "--pycanal-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an instance setting of pycanal's measured destination (tuning; default: none)",
    )
    args = ap.parse_args(argv)
    load_start = os.getloadavg()
    result: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory(prefix="pycanal-e2e-") as tmp:
        db = PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"])
        warm_db = PrivateMariaDB(server_id=3)
        with db, warm_db:
            log(
                f"MariaDB {db.version} on port {db.port}; loading {args.rows:,} rows (and {args.rows // 3:,} to warm up)"
            )
            warm, _ = decode_bench.load_workload(warm_db, args.rows // 3)
            path, size = decode_bench.load_workload(db, args.rows)
            if not args.skip_pmr:
                pmr_run = decode_bench.PmrRun(db, path.name)
                result["python_mysql_replication"] = decode_bench.best_of(
                    "python-mysql-replication", 1, pmr_run, args.rows
                )
            warm_feed = servers.Feed(warm_db, (warm.name, 4), decode_bench.TABLE)
            drained = [(p.name, *count_file(p)) for p in (warm, path)]
            for name in ("pycanal", "canal")[: 1 if args.skip_canal else 2]:
                table = f"{LAT_TABLE}_{name}"  # the latency table of its own
                bench = servers.Feed(db, (path.name, 4), f"{decode_bench.TABLE}|{table}")
                server = (
                    servers.pycanal_server(
                        bench, warm_feed, Path(tmp), "".join(f"{kv}\n" for kv in args.pycanal_conf)
                    )
                    if name == "pycanal"
                    else servers.canal_server(bench, warm_feed)
                )

                def latency(conn: SimpleConnector, table: str = table) -> dict[str, Any]:
                    return latency_phase(db, conn, args.latency_seconds, args.rate, table)

                res = servers.race(server, drained[0], drained[1], then=latency)
                res["latency"] = res.pop("then")
                result[name] = res
                log(
                    f"{name}: {res['rows_per_s']:,} rows/s, server CPU {res['server_cpu_s']} s; latency {res['latency']}"
                )
            ratios = {}
            if "canal" in result:
                p, c = result["pycanal"], result["canal"]
                ratios["pycanal_vs_canal"] = round(p["rows_per_s"] / c["rows_per_s"], 2)
                ratios["pycanal_cpu_vs_canal"] = round(p["server_cpu_s"] / c["server_cpu_s"], 2)
                ratios["pycanal_p99_vs_canal"] = round(p["latency"]["p99_ms"] / c["latency"]["p99_ms"], 2)
            if not args.skip_pmr:
                ratios["pycanal_vs_pmr"] = round(
                    result["pycanal"]["rows_per_s"] / result["python_mysql_replication"]["rows_per_s"], 2
                )
            result["ratios"] = ratios
    result["settings"] = (
        "both servers: Canal's default canal.properties (16384-slot MEMSIZE store, filter.query.dml off, "
        "parallel parser); Canal 1.1.7 with startup.sh's G1 and heap " + " ".join(servers.CANAL_HEAP)
    )
    if args.pycanal_conf:
        result["settings"] += "; pycanal tuned: " + ", ".join(args.pycanal_conf)
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
