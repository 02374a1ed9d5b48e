"""Snapshot readers: how fast one table's existing rows come out of the source, per reader.

    .venv/bin/python bench/snapshot.py   # --rows 1000000 --chunk-rows 50000 --processes 2

sysbench ``prepare`` fills one table of ``--rows`` rows (``sbtest1``: INT key, INT, CHAR(120),
CHAR(60)) in a private MariaDB. Then, each alone on the idle source, the single-connection read
limits and pycanal's chunk reader:

* ``mariadb --quick -e 'SELECT * ...' > /dev/null``: the C client, the ceiling;
* PyMySQL's ``SSCursor``, values left undecoded: the Python driver alone;
* ``pycanal.snapshot.read_chunk`` over the table's chunks in one process: consistent snapshot,
  binlog position, values in the binlog decoder's form;
* the same + ``SnapshotRows`` into Arrow record batches (what a Spark executor yields);
* that, the chunks spread over ``--processes`` processes (what executors do).

Prints JSON: rows/s of each and ratios to the C client and to ``SSCursor``. This is the reader
part of issue 15's benchmark; the lake part (Delta tables, a concurrent writer) comes with the
Spark snapshot source.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oltp as oltp_bench  # noqa: E402
from pycanal.snapshot import describe, plan_chunks, read_chunk  # noqa: E402
from pycanal.snapshot.reader import connect  # noqa: E402
from pycanal.spark.rows import SnapshotRows  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB, _find_binary  # noqa: E402

_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[snapshot-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def c_client(db: PrivateMariaDB, table: str) -> int:
    exe = _find_binary("mariadb", "mysql")
    cmd = [exe, f"--socket={db.socket}", "--user=root", "--quick", "--batch", "--skip-column-names",
           "-e", f"SELECT * FROM `{db.database}`.`{table}`"]  # fmt: skip
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True).stdout
    return out.count(b"\n")


def sscursor(params: dict[str, Any], database: str, table: str) -> int:
    import pymysql.cursors

    with connect(**params) as conn, conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT * FROM `{database}`.`{table}`")
        n = 0
        while rows := cur.fetchmany(10_000):
            n += len(rows)
        return n


def chunks(params: dict[str, Any], database: str, table: str, chunk_rows: int) -> list[Any]:
    with connect(**params) as conn:
        t = describe(conn, database, table)
        return [(t, c) for c in plan_chunks(conn, t, chunk_rows)]


def read_chunks(params: dict[str, Any], work: list[Any], arrow: bool) -> int:
    n = 0
    with connect(**params) as conn:
        for t, c in work:
            read = read_chunk(conn, t, c)
            if arrow:
                n += sum(b.num_rows for b in SnapshotRows().batches([read]))
            else:
                n += len(read.rows)
    return n


def _part(args: tuple) -> int:
    return read_chunks(*args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args(argv)
    with PrivateMariaDB() as db:
        log(f"sysbench prepare: 1 x {args.rows:,} rows")
        oltp_bench.sysbench(db, "oltp_read_only", "prepare", "--tables=1", f"--table-size={args.rows}")
        table = "sbtest1"
        params = {"host": db.host, "port": db.port, "user": db.repl_user, "password": db.repl_password}
        results: dict[str, Any] = {}

        def record(name: str, secs: float, n: int) -> None:
            if n != args.rows:
                raise SystemExit(f"{name}: read {n:,} rows of {args.rows:,}")
            results[name] = {"seconds": round(secs, 2), "rows_per_s": round(n / secs)}
            log(f"{name}: {n / secs:,.0f} rows/s")

        c_client(db, table)  # warm the buffer pool
        record("mariadb_cli_quick", *timed(lambda: c_client(db, table)))
        record("pymysql_sscursor", *timed(lambda: sscursor(params, db.database, table)))
        work = chunks(params, db.database, table, args.chunk_rows)
        log(f"{len(work)} chunks of ~{args.chunk_rows:,} rows")
        record("read_chunk", *timed(lambda: read_chunks(params, work, False)))
        record("read_chunk_to_arrow", *timed(lambda: read_chunks(params, work, True)))
        parts = [(params, work[i :: args.processes], True) for i in range(args.processes)]
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(args.processes) as pool:
            record(
                f"read_chunk_to_arrow_{args.processes}_processes", *timed(lambda: sum(pool.map(_part, parts)))
            )
    c, s = results["mariadb_cli_quick"]["rows_per_s"], results["pymysql_sscursor"]["rows_per_s"]
    for r in results.values():
        r["ratio_vs_mariadb_cli"] = round(r["rows_per_s"] / c, 2)
        r["ratio_vs_sscursor"] = round(r["rows_per_s"] / s, 2)
    out = {
        "rows": args.rows,
        "chunk_rows": args.chunk_rows,
        "chunks": len(work),
        "readers": results,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg(),
        },
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
