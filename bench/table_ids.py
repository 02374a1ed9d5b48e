"""Tables reopened under new ids: more tables than the server's table cache, pycanal against Canal.

MariaDB gives a table a new table id each time it opens it anew: after FLUSH TABLES, or when
more tables are in use than ``table_definition_cache`` holds (400 by default), as in a schema per
tenant. ``--tables`` tables of one shape (sysbench's: INT key, INT, CHAR(120), CHAR(60)) get
``--transactions`` 1-row INSERTs round-robin, alone in one binlog file of a private MariaDB with
``table_definition_cache = table_open_cache = 400``: with 1,000 tables every transaction's
TABLE_MAP carries a new id (the bench counts them). Then, in one run:

1. ``mariadb-binlog -v --base64-output=decode-rows`` and ``pycanal binlog decode --format jsonl``
   (its defaults) on the file, best of 3 each, alternated;
2. ``pycanal server`` and Alibaba Canal 1.1.7 (``bench/servers.py``: Canal's defaults for both, a
   warm-up destination first, the clock from the subscription to the last transaction end),
   ``--repeat`` times each, alternated, drained by the client that parses every RowChange.

One JSON object on stdout (medians, every run, ratios); progress on stderr.

    .venv/bin/python bench/table_ids.py [--tables 1000] [--transactions 10000] [--repeat 3] [--skip-canal]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import oltp  # noqa: E402
import servers  # noqa: E402
from decode import best_of, cli_run, mariadb_binlog_run  # noqa: E402
from pycanal.binlog import read_events  # noqa: E402
from pycanal.binlog.events import TableMapEvent  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB, mariadb_binlog_path  # noqa: E402

CACHE = ["--table-definition-cache=400", "--table-open-cache=400"]
WARM = ["--tables=1", "--table-size=1000"]


def load(db: PrivateMariaDB, tables: int, transactions: int) -> Path:
    """The tables, then their INSERTs alone in one binlog file (a second after the last one ended:
    Canal looks its start position up by time)."""
    with db.root_connection(db.database) as conn, conn.cursor() as cur:
        for i in range(tables):
            cur.execute(
                f"CREATE TABLE t{i} (id INT PRIMARY KEY AUTO_INCREMENT, k INT, c CHAR(120), pad CHAR(60))"
            )
        time.sleep(1.1)
        cur.execute("FLUSH BINARY LOGS")
        path = db.binlog_files()[-1]
        for j in range(transactions):
            cur.execute(f"INSERT INTO t{j % tables} (k, c, pad) VALUES ({j}, '{j:0120d}', '{j:060d}')")
        cur.execute("FLUSH BINARY LOGS")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=1000, help="tables written round-robin (default 1000)")
    ap.add_argument("--transactions", type=int, default=10_000, help="1-row INSERTs (default 10000)")
    servers.race_options(ap)
    args = ap.parse_args(argv)
    if min(args.tables, args.transactions, args.repeat) < 1:
        ap.error("--tables, --transactions and --repeat must be positive")
    names = servers.racers(args)
    result: dict[str, Any] = {"bench": "table_ids", "settings": vars(args) | {"server_args": CACHE}}
    extra = [*CACHE, "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0"]
    with contextlib.redirect_stdout(sys.stderr), PrivateMariaDB(extra_args=extra) as db:
        oltp.sysbench(db, "oltp_write_only", "prepare", *WARM)
        warm = oltp.run_workload(db, "oltp_write_only", 2000, 4, WARM)
        path = load(db, args.tables, args.transactions)
        rows, txns = oltp.count_file(path)
        ids = {e.table_map.table_id for e in read_events(path) if isinstance(e, TableMapEvent)}
        oltp.log(f"{path.name}: {txns:,} transactions over {args.tables:,} tables, {len(ids):,} table ids")
        result["file"] = {
            "name": path.name,
            "bytes": path.stat().st_size,
            "transactions": txns,
            "table_ids": len(ids),
        }
        cmd = [mariadb_binlog_path(), "--no-defaults", "-v", "--base64-output=decode-rows", str(path)]
        decoders: dict[str, list[dict[str, Any]]] = {"cli_jsonl": [], "mariadb_binlog": []}
        for _ in range(3):
            decoders["cli_jsonl"].append(best_of("cli jsonl", 1, lambda: cli_run(path, rows), rows))
            decoders["mariadb_binlog"].append(
                best_of("mariadb-binlog", 1, lambda: mariadb_binlog_run(cmd, rows), rows)
            )
        best = {n: max(r["rows_per_s"] for r in rs) for n, rs in decoders.items()}
        result["decode_rows_per_s"] = best
        result["cli_jsonl_over_mariadb_binlog"] = round(best["cli_jsonl"] / best["mariadb_binlog"], 3)
        bench = servers.Feed(db, (path.name, 4), "t[0-9]+")
        warm_feed = servers.Feed(db, (warm["file"].name, 4), "sbtest.*")
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.repeat):
                for name in names:
                    server = (servers.pycanal_server(bench, warm_feed, Path(tmp)) if name == "pycanal"
                              else servers.canal_server(bench, warm_feed))  # fmt: skip
                    res = servers.race(
                        server,
                        (warm["file"].name, warm["rows"], warm["transactions"]),
                        (path.name, rows, txns),
                    )
                    oltp.log(
                        f"{name}: {res['txn_per_s']:,} transactions/s, server CPU {res['server_cpu_s']} s"
                    )
                    runs[name].append(res)
        result["mariadb"] = db.version
    result["servers"] = {
        n: {"txn_per_s": statistics.median(r["txn_per_s"] for r in rs),
            "server_cpu_s": statistics.median(r["server_cpu_s"] for r in rs), "runs": rs}
        for n, rs in runs.items()
    }  # fmt: skip
    if "canal" in runs:
        result["pycanal_over_canal"] = servers.pairwise(runs, "txn_per_s")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
