"""The jsonl CLI against ``mariadb-binlog -v`` on a binlog of every column type (issue 42).

``bench/decode.py`` races the decoders on sysbench-like rows (INT, CHAR, DECIMAL, DATETIME);
this one writes the seeded all-types workload of ``tests/workload.py`` (every MariaDB column
type with its extreme values: 65-digit DECIMALs, TIMEs past 24 h at every precision, JSON,
GEOMETRY, ENUM/SET, BIT, BLOBs past 64 KB; single and multi-row INSERTs, UPDATEs, DELETEs, key
changes) alone into one binlog file of a private MariaDB (ROW, CRC32, FULL row metadata), then
times, best of ``--repeat`` each, alternated:

1. ``pycanal binlog decode FILE --format jsonl > /dev/null`` (its defaults: in parts by a
   process per core from 4 MiB), and the same with ``--workers 1``;
2. ``mariadb-binlog --no-defaults -v --base64-output=decode-rows FILE > /dev/null``.

Both write every row as text. Before timing, the row changes each prints are counted and must
agree (jsonl's INSERT/UPDATE/DELETE lines, one per row; mariadb-binlog's ``### INSERT INTO``,
``### UPDATE``, ``### DELETE FROM``). One JSON object on stdout; progress on stderr.

    .venv/bin/python bench/decode_types.py [--ops 2000] [--repeat 3] [--seed 42] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pycanal  # noqa: E402
import workload  # noqa: E402 - the tests' seeded all-types workload
from decode import best_of, cli_run, log, mariadb_binlog_run  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB, mariadb_binlog_path  # noqa: E402

_MBL_ROWS = (b"### INSERT INTO", b"### UPDATE", b"### DELETE FROM")


def load(db: PrivateMariaDB, ops: int, seed: int) -> Path:
    """The all-types table's statements alone in one binlog file; its path."""
    schema = db.database
    spec = workload.ALL_TYPES
    db.execute(f"DROP TABLE IF EXISTS `{schema}`.`{spec.name}`")
    db.execute(spec.create_sql(schema))
    path = db.flush_binary_logs()
    with db.root_connection(schema) as conn:
        workload.run(conn, workload.generate(spec, schema, seed, ops))
    nxt = db.flush_binary_logs()
    files = db.binlog_files()
    if files.index(nxt) != files.index(path) + 1:
        raise RuntimeError(f"unexpected binlog rotation: workload {path}, next {nxt}, files {files}")
    return path


def jsonl_rows(path: Path) -> int:
    """Row changes in the CLI's jsonl (one process; untimed)."""
    out = subprocess.run(
        [sys.executable, "-m", "pycanal.cli", "binlog", "decode", str(path), "--format", "jsonl", "--workers", "1"],
        capture_output=True, check=True,
    )  # fmt: skip
    kinds = {"INSERT", "UPDATE", "DELETE"}
    return sum(json.loads(line)["type"] in kinds for line in out.stdout.splitlines())


def mbl_rows(cmd: list[str]) -> int:
    """Row changes ``mariadb-binlog -v`` prints (untimed)."""
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return sum(line.startswith(_MBL_ROWS) for line in out.splitlines())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--ops", type=int, default=2_000, help="workload operations (default 2000: a 138 MB file)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, alternated; the best counts")
    ap.add_argument("--seed", type=int, default=42, help="the workload's seed (default 42)")
    ap.add_argument("--keep", action="store_true", help="keep the server's temporary directory")
    args = ap.parse_args(argv)
    if args.ops < 1 or args.repeat < 1:
        ap.error("--ops and --repeat must be positive")
    load_start = [round(x, 2) for x in os.getloadavg()]
    with (
        contextlib.redirect_stdout(sys.stderr),
        PrivateMariaDB(keep=args.keep, binlog_row_metadata="FULL") as db,
    ):
        t0 = time.monotonic()
        path = load(db, args.ops, args.seed)
        size = path.stat().st_size
        log(
            f"MariaDB {db.version}: {args.ops:,} operations in {time.monotonic() - t0:.1f}s, {path.name} {size:,} bytes"
        )
        cmd = [mariadb_binlog_path(), "--no-defaults", "-v", "--base64-output=decode-rows", str(path)]
        rows = jsonl_rows(path)
        printed = mbl_rows(cmd)
        if rows != printed:
            raise RuntimeError(f"{path}: jsonl has {rows:,} row changes, mariadb-binlog printed {printed:,}")
        log(f"{rows:,} row changes in both outputs")
        runs: dict[str, list] = {"cli_jsonl": [], "cli_jsonl_one_process": [], "mariadb_binlog": []}
        timed = {
            "cli_jsonl": lambda: cli_run(path, rows),
            "cli_jsonl_one_process": lambda: cli_run(path, rows, "jsonl", "--workers", "1"),
            "mariadb_binlog": lambda: mariadb_binlog_run(cmd, rows),
        }
        for _ in range(args.repeat):  # alternated, so a drift of the machine touches all three
            for name, run in timed.items():
                runs[name].append(best_of(name, 1, run, rows))
        best = {name: min(r, key=lambda x: x["wall_s"]) for name, r in runs.items()}
        mbl = best["mariadb_binlog"]["rows_per_s"]
        result: dict[str, Any] = {
            "bench": "decode_types",
            "file": {
                "name": path.name,
                "bytes": size,
                "row_changes": rows,
                "ops": args.ops,
                "seed": args.seed,
            },
            "rows_per_s": {name: b["rows_per_s"] for name, b in best.items()},
            "ratio": {
                "cli_jsonl_over_mariadb_binlog": round(best["cli_jsonl"]["rows_per_s"] / mbl, 3),
                "cli_jsonl_one_process_over_mariadb_binlog": round(
                    best["cli_jsonl_one_process"]["rows_per_s"] / mbl, 3
                ),
            },
            "runs": {name: [r["runs"][0] for r in rs] for name, rs in runs.items()},
            "versions": {"pycanal": pycanal.__version__, "mariadb": db.version},
            "load_average_start": load_start,
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
