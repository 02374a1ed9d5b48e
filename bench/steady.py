"""Steady writes: what each server spends while a source writes at a constant rate.

Most CDC streams are not backlogs but a source writing all day at some rate. sysbench
``oltp_write_only`` (an indexed UPDATE, a non-indexed UPDATE, a DELETE, an INSERT per
transaction) writes at ``--rate`` transactions/s for ``--seconds`` into a private MariaDB while a
server streams them to a ``SimpleConnector`` that parses every Entry and RowChange (GETs of 4,096
units waiting up to 200 ms, then an ack): ``pycanal server`` and Alibaba Canal 1.1.7 itself
(``bench/servers.py``: Canal's default settings for both, Canal with ``startup.sh``'s G1 and
heap), alternated, ``--repeat`` times each. Each server process first drains a warm-up destination
(its JIT warms up), then the measured destination starts at a fresh binlog file. The server's CPU
seconds (its process tree, the parser's conversion process included) run from the writer's start
until the client holds every row of the file (counted in the file afterwards: nothing lost).

One JSON object on stdout (medians, every run, the ratio pycanal / Canal of CPU per
transaction); progress on stderr.

    .venv/bin/python bench/steady.py [--rate 1000] [--seconds 20] [--repeat 3] [--skip-canal]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oltp  # noqa: E402
import servers  # noqa: E402
from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402

COMMON = ["--tables=4", "--table-size=20000"]


class Counter(threading.Thread):
    """Drains ``bench`` (every RowChange parsed, every value touched) until told to stop."""

    def __init__(self, conn: Any) -> None:
        super().__init__(daemon=True)
        self.conn, self.rows, self.ends, self.error = conn, 0, 0, None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                msg = self.conn.get_without_ack(4096, timeout=200, unit="ms")
                if msg.id == -1:
                    continue
                for entry in msg.entries:
                    if entry.entryType == pb.TRANSACTIONEND:
                        self.ends += 1
                    elif entry.entryType == pb.ROWDATA:
                        change = pb.RowChange.FromString(entry.storeValue)
                        if change.eventType in (pb.INSERT, pb.UPDATE, pb.DELETE):
                            for row in change.rowDatas:
                                for c in row.beforeColumns:
                                    _ = c.value
                                for c in row.afterColumns:
                                    _ = c.value
                                self.rows += 1
                self.conn.ack(msg.id)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc


def one_run(name: str, db: Any, warm: dict[str, Any], rate: int, seconds: int, tmp: Path) -> dict[str, Any]:
    time.sleep(1.1)  # Canal looks its start up by time: the file begins a second after the last
    db.execute("FLUSH BINARY LOGS")
    path = db.binlog_files()[-1]
    feed = servers.Feed(db, (path.name, 4), "sbtest.*")
    warm_feed = servers.Feed(db, (warm["file"].name, 4), "sbtest.*")
    server = (
        servers.pycanal_server(feed, warm_feed, tmp)
        if name == "pycanal"
        else servers.canal_server(feed, warm_feed)
    )
    with server as (port, pid):
        conn = servers.subscribed(port, "warm")
        try:
            servers.Drainer(conn).file(warm["file"].name, warm["rows"], warm["transactions"])
        finally:
            conn.disconnect()
        conn = servers.subscribed(port, "bench")
        counter = Counter(conn)
        counter.start()
        try:
            time.sleep(2)  # the destination started: its start-up is not the steady cost
            before, t0 = servers.usage(pid), time.perf_counter()
            oltp.sysbench(db, "oltp_write_only", "run", *COMMON, "--threads=4", f"--rate={rate}",
                          f"--time={seconds}", "--events=0")  # fmt: skip
            wrote = time.perf_counter() - t0
            db.execute("FLUSH BINARY LOGS")
            rows, txns = oltp.count_file(path)
            deadline = time.monotonic() + 120
            while (counter.rows < rows or counter.ends < txns) and counter.error is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: {counter.rows:,} of {rows:,} rows after 120 s ({path.name})")
                time.sleep(0.01)
            after, wall = servers.usage(pid), time.perf_counter() - t0
        finally:
            counter.stopping.set()
            counter.join(5)
            conn.disconnect()
        if counter.error is not None:
            raise RuntimeError(f"{name}: the client failed: {counter.error}")
        if counter.rows != rows or counter.ends != txns:
            raise RuntimeError(
                f"{name}: {counter.rows:,} rows / {counter.ends:,} ends, the file has {rows:,} / {txns:,}"
            )
    cpu = after["cpu_s"] - before["cpu_s"]
    oltp.log(
        f"{name}: {txns:,} transactions in {wrote:.1f} s, all delivered after {wall:.1f} s; server CPU {cpu:.2f} s"
    )
    return {
        "transactions": txns,
        "rows": rows,
        "write_rate_txn_per_s": round(txns / wrote),
        "server_cpu_s": round(cpu, 3),
        "server_cpu_us_per_txn": round(cpu / txns * 1e6, 1),
        "server_cpu_share_of_a_core": round(cpu / wall, 3),
        "server_peak_rss_mb": after["peak_rss_mb"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=1000, help="transactions/s sysbench writes (default 1000)")
    ap.add_argument("--seconds", type=int, default=20, help="how long it writes (default 20)")
    servers.race_options(ap)
    args = ap.parse_args(argv)
    if min(args.rate, args.seconds, args.repeat) < 1:
        ap.error("--rate, --seconds and --repeat must be positive")
    names = servers.racers(args)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    with contextlib.redirect_stdout(sys.stderr), oltp.source_db() as db, tempfile.TemporaryDirectory() as tmp:
        oltp.sysbench(db, "oltp_write_only", "prepare", *COMMON)
        warm = oltp.run_workload(db, "oltp_write_only", 2000, 4, COMMON)
        for _ in range(args.repeat):
            for name in names:
                runs[name].append(one_run(name, db, warm, args.rate, args.seconds, Path(tmp)))
        version = db.version
    med = {n: statistics.median(r["server_cpu_us_per_txn"] for r in rs) for n, rs in runs.items()}
    result: dict[str, Any] = {
        "bench": "steady",
        "settings": {"rate": args.rate, "seconds": args.seconds, "repeat": args.repeat, "mariadb": version},
        "server_cpu_us_per_txn": med,
        "runs": runs,
    }
    if "canal" in runs:
        result["pycanal_over_canal_cpu"] = servers.pairwise(runs, "server_cpu_us_per_txn")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
