"""End-to-end benchmark: MariaDB -> ``pycanal server`` (its own process) -> a TCP client that
decodes every Entry, against python-mysql-replication on the same binlog in the same run.

1. ``throughput``: the 300k-row workload of ``bench/decode.py`` is loaded first (alone in one
   binlog file); then a pycanal server process is started from a conf dir pointing at that
   file, and a ``SimpleConnector`` in this process gets batches (``get_without_ack`` + ``ack``),
   parses every ``Entry`` and ``RowChange`` and touches every column value. rows/s is measured
   from the first row received to the last (the server's start-up is not counted).
2. ``latency``: with the server caught up, a writer thread commits 50-row transactions at a
   steady 5,000 rows/s for ``--latency-seconds``; each row carries its id, the writer notes the
   time its COMMIT returned, the client the time the row arrived: p50/p99 of the difference.
   The client's GETs wait at most 5 ms (Canal's timed get waits for a full batch otherwise).
3. ``python_mysql_replication``: ``BinLogStreamReader`` over the same workload file (the settings
   of ``bench/decode.py``), measured first, before the server starts.

One JSON object goes to stdout; progress to stderr.

    .venv/bin/python bench/e2e.py [--rows 300000] [--latency-seconds 10] [--skip-pmr]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode as decode_bench  # noqa: E402  (the workload and the python-mysql-replication runner)
from pycanal.client import SimpleConnector  # noqa: E402
from pycanal.client.simple import CanalClientError  # noqa: E402
from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402
from pycanal.testing._process import free_port  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402

_T0 = time.monotonic()
LAT_TABLE = "e2e_latency"


def log(msg: str) -> None:
    print(f"[e2e-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def shipped_settings() -> str:
    """conf/canal.properties' store and event-filter lines: what a user of the shipped conf runs."""
    conf = Path(__file__).resolve().parent.parent / "conf" / "canal.properties"
    keep = ("canal.instance.memory.", "canal.instance.filter.query.")
    return "".join(line for line in conf.open() if line.startswith(keep))


def write_conf(
    root: Path, db: PrivateMariaDB, port: int, start: tuple[str, int], tables: str, extra: str = ""
) -> None:
    """A conf dir for one destination ``bench`` (the shipped defaults, plus ``extra`` lines)."""
    (root / "bench").mkdir(parents=True)
    (root / "canal.properties").write_text(
        f"canal.ip = 127.0.0.1\ncanal.port = {port}\ncanal.metrics.pull.port = {free_port()}\n"
        f"canal.destinations = bench\ncanal.conf.dir = .\ncanal.file.data.dir = {root}/data\n"
        "canal.auto.scan = false\n"
    )
    (root / "bench" / "instance.properties").write_text(
        f"canal.instance.master.address = {db.host}:{db.port}\n"
        f"canal.instance.master.journal.name = {start[0]}\n"
        f"canal.instance.master.position = {start[1]}\n"
        f"canal.instance.dbUsername = {db.repl_user}\n"
        f"canal.instance.dbPassword = {db.repl_password}\n"
        f"canal.instance.filter.regex = {db.database}\\\\.({tables})\n{extra}"
    )


def start_server(conf: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    import socket

    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pycanal.cli", "server", "--conf", str(conf), "--log-level", "WARNING"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {log_path.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    raise RuntimeError("server did not listen")


def subscribed(port: int) -> SimpleConnector:
    """A connector subscribed as soon as the destination runs (the port opens before it starts)."""
    deadline = time.monotonic() + 60
    while True:
        conn = SimpleConnector(("127.0.0.1", port), "bench")
        conn.connect()
        try:
            conn.subscribe()
            return conn
        except CanalClientError:
            conn.disconnect()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


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


def latency_phase(db: PrivateMariaDB, conn: SimpleConnector, seconds: float, rate: int) -> dict[str, Any]:
    db.execute(f"CREATE TABLE IF NOT EXISTS `{db.database}`.`{LAT_TABLE}` (id INT PRIMARY KEY, v INT)")
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
                    cur.execute(f"INSERT INTO `{LAT_TABLE}` VALUES " + ",".join(f"({i},{i})" for i in ids))
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
    args = ap.parse_args(argv)
    load_start = os.getloadavg()
    result: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory(prefix="pycanal-e2e-") as tmp:
        db = PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"])
        with db:
            log(f"MariaDB {db.version} on port {db.port}; loading {args.rows:,} rows")
            path, size = decode_bench.load_workload(db, args.rows)
            if not args.skip_pmr:
                pmr_run = decode_bench.PmrRun(db, path.name)
                pmr = decode_bench.best_of("python-mysql-replication", 1, pmr_run, args.rows)
                result["python_mysql_replication"] = pmr
            port = free_port()
            conf = Path(tmp) / "conf"
            write_conf(conf, db, port, (path.name, 4), f"{decode_bench.TABLE}|{LAT_TABLE}")
            proc = start_server(conf, port, Path(tmp) / "server.log")
            try:
                conn = subscribed(port)
                rows, secs = consume(conn, args.rows)
                result["pycanal_e2e"] = {
                    "rows": rows,
                    "wall_s": round(secs, 3),
                    "rows_per_s": round(rows / secs),
                }
                log(f"pycanal end to end: {rows:,} rows in {secs:.2f}s = {rows / secs:,.0f} rows/s")
                result["latency"] = latency_phase(db, conn, args.latency_seconds, args.rate)
                log(f"latency at {args.rate:,} rows/s: {result['latency']}")
                conn.disconnect()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            if not args.skip_pmr:
                result["ratio_vs_pmr"] = round(result["pycanal_e2e"]["rows_per_s"] / pmr["rows_per_s"], 2)
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
