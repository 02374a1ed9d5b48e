"""Embedded end-to-end benchmark: rows/s from MariaDB to an embedded client.

A private MariaDB gets bench/decode.py's workload (``--rows`` sysbench-like rows in 1,000-row
INSERTs, alone in one binlog file). A Canal conf dir is written into a temporary directory (file
meta manager, MEMSIZE store, raw entries, the workload file as the start position) and served by
``pycanal.deployer.controller.Deployer``; one client subscribes and runs a ``get_without_ack`` / ``ack``
loop (batch ``--batch`` memory units), decoding every entry's ``RowChange`` and touching every
column value, until every row arrived. Timed: from ``Deployer.start`` to the last ack (so the
parser's connection and dump are inside). For the ratio, python-mysql-replication streams the
same binlog file (bench/decode.py's ``PmrRun``).

One JSON object on stdout; progress on stderr.

    .venv/bin/python bench/embedded.py [--rows 300000] [--repeat 1] [--batch 1024] [--skip-pmr]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pycanal  # noqa: E402
from decode import TABLE, PmrRun, load_workload, log  # noqa: E402
from pycanal.deployer.controller import Deployer  # noqa: E402
from pycanal.meta import ClientIdentity  # noqa: E402
from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402

DEST = "bench"


def write_conf(root: Path, db: PrivateMariaDB, journal: str, schema: str) -> None:
    (root / DEST).mkdir(parents=True)
    (root / "canal.properties").write_text(
        f"canal.destinations = {DEST}\n"
        "canal.conf.dir = .\n"
        f"canal.file.data.dir = {root / 'data'}\n"
        "canal.auto.scan = false\n"
    )
    (root / DEST / "instance.properties").write_text(
        f"canal.instance.master.address = {db.host}:{db.port}\n"
        f"canal.instance.master.journal.name = {journal}\n"
        "canal.instance.master.position = 4\n"
        f"canal.instance.dbUsername = {db.repl_user}\n"
        f"canal.instance.dbPassword = {db.repl_password}\n"
        f"canal.instance.filter.regex = {schema}\\\\.{TABLE}\n"
    )


def embedded_run(conf: Path, rows: int, batch: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    c0 = time.process_time()
    n = batches = entries = 0
    with Deployer(conf, environ={}) as deployer:
        server = deployer.server
        client = ClientIdentity(DEST, 1001, "")
        server.subscribe(client)
        deadline = time.monotonic() + 600
        while n < rows:
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded: only {n:,} of {rows:,} rows")
            msg = server.get_without_ack(client, batch, timeout=0.5)
            if msg.id == -1:
                continue
            batches += 1
            for e in msg.parsed_entries():
                entries += 1
                if e.entryType != pb.ROWDATA:
                    continue
                change = pb.RowChange.FromString(e.storeValue)
                for row in change.rowDatas:
                    n += 1
                    for c in row.afterColumns:
                        _v = c.value
            server.ack(client, msg.id)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    if n != rows:
        raise RuntimeError(f"embedded: {n:,} rows, expected {rows:,}")
    return {
        "rows_per_s": round(rows / wall),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "batches": batches,
        "entries": entries,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1024, help="get batch size (memory units, MEMSIZE)")
    ap.add_argument("--skip-pmr", action="store_true")
    args = ap.parse_args(argv)
    result: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr):
        db = PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"])
        with db, tempfile.TemporaryDirectory(prefix="pycanal-bench-embedded-") as tmp:
            log(f"MariaDB {db.version} on port {db.port}")
            t0 = time.monotonic()
            path, size = load_workload(db, args.rows)
            log(f"loaded {args.rows:,} rows in {time.monotonic() - t0:.1f}s: {path.name}, {size:,} bytes")
            runs = []
            for i in range(args.repeat):
                conf = Path(tmp) / f"conf{i}"  # a fresh meta.dat per run
                write_conf(conf, db, path.name, db.database)
                r = embedded_run(conf, args.rows, args.batch)
                log(f"embedded run {i + 1}: {r['wall_s']}s, {r['rows_per_s']:,} rows/s")
                runs.append(r)
            best = min(runs, key=lambda r: r["wall_s"])
            result["embedded"] = {**best, "runs": runs}
            if not args.skip_pmr:
                pmr_runs = []
                pmr = PmrRun(db, path.name)
                for _ in range(args.repeat):
                    t1 = time.perf_counter()
                    n, cpu = pmr()
                    wall = time.perf_counter() - t1
                    if n != args.rows:
                        raise RuntimeError(f"python-mysql-replication: {n:,} rows, expected {args.rows:,}")
                    pmr_runs.append(
                        {"rows_per_s": round(n / wall), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
                    )
                    log(f"python-mysql-replication: {wall:.3f}s, {n / wall:,.0f} rows/s")
                pbest = min(pmr_runs, key=lambda r: r["wall_s"])
                result["python_mysql_replication"] = {**pbest, "runs": pmr_runs}
                result["ratio_embedded_vs_pmr"] = round(best["rows_per_s"] / pbest["rows_per_s"], 2)
            result["workload"] = {"rows": args.rows, "binlog_bytes": size, "table": TABLE}
            result["env"] = {
                "pycanal": pycanal.__version__ if hasattr(pycanal, "__version__") else None,
                "python": platform.python_version(),
                "mariadb": db.version,
                "cpus": os.cpu_count(),
                "batch_memunits": args.batch,
            }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
