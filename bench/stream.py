"""Stream benchmark: rows/s and Canal entries/s over the replica connection, against
python-mysql-replication on the same stream, in the same run.

The script starts a private MariaDB (ROW binlog, CRC32, binlog_row_metadata FULL by default --
python-mysql-replication 1.x maps no column names without it; ``--row-metadata MINIMAL`` shows
pycanal taking the names from its schema history alone) and loads the
workload of ``bench/decode.py`` (its table, generator and loader are imported from there:
``--rows`` sysbench-like rows in 1,000-row INSERTs, alone in one binlog file). Then, streaming
that file from the server as the replication user over TCP (non-blocking dump, so the server
ends the stream at the end of the binlog), it measures:

1. ``pycanal_stream``: ``pycanal.parse.stream.ReplicaStream`` (schema history started from
   ``information_schema``, TABLE_MAPs completed by it), building every row's Python values;
2. ``pycanal_entries``: the same stream turned into serialized Canal ``Entry`` bytes by
   ``RawEntryConverter`` (what the server stores and sends: byte-identical to protobuf's
   serialization, written directly): entries/s and rows/s;
3. ``python_mysql_replication``: ``BinLogStreamReader`` building every ``row["values"]`` (the
   settings of ``bench/decode.py``).

Each is the best of ``--repeat`` runs (wall time). One JSON object goes to stdout; progress to
stderr.

    .venv/bin/python bench/stream.py [--rows 300000] [--repeat 3] [--pmr-repeat 1] [--skip-pmr]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode as decode_bench  # noqa: E402  (bench/decode.py: the workload and PMR runner)
import pycanal  # noqa: E402
from pycanal.binlog.events import RowsEvent  # noqa: E402
from pycanal.parse.rawentry import RawEntryConverter  # noqa: E402
from pycanal.parse.stream import ReplicaStream  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402

_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[stream-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def _stream(db: PrivateMariaDB, file: str) -> ReplicaStream:
    return ReplicaStream(
        db.host,
        db.port,
        db.repl_user,
        db.repl_password,
        start=(file, 4),
        stop_at_end=True,
        heartbeat_period=0,
    )


def pycanal_stream(db: PrivateMariaDB, file: str) -> tuple[int, float]:
    c0 = time.process_time()
    n = 0
    with _stream(db, file) as stream:
        for e in stream.events():
            if isinstance(e, RowsEvent):
                rows = e.rows
                n += len(rows)
                for row in rows:
                    for _v in row:
                        pass
    return n, time.process_time() - c0


class EntriesRun:
    """The stream through ``RawEntryConverter``; counts rows and entries (ROWDATA entries are built
    with every column of every row)."""

    def __init__(self, db: PrivateMariaDB, file: str) -> None:
        self.db, self.file = db, file
        self.entries = 0
        self.row_entries = 0

    def __call__(self) -> tuple[int, float]:
        c0 = time.process_time()
        entries = row_entries = 0
        conv = RawEntryConverter()
        convert = conv.convert
        with _stream(self.db, self.file) as stream:
            for e in stream.events():
                out = convert(e)
                entries += len(out)
                if isinstance(e, RowsEvent):
                    row_entries += len(out)
        self.entries, self.row_entries = entries, row_entries
        # counted by the converter: its fused path writes entries from the row bytes, so reading
        # ``e.rows`` here would decode every row again
        return conv.rows_converted, time.process_time() - c0


def verify(db: PrivateMariaDB, file: str, n: int) -> None:
    """Untimed: the streamed rows equal the generated ones, and carry the history's names."""
    expected = decode_bench.generate_rows(n)
    seen = 0
    with _stream(db, file) as stream:
        for e in stream.events():
            if not isinstance(e, RowsEvent):
                continue
            if e.table_map.names != ["id", "k", "c", "pad", "d", "t"]:
                raise RuntimeError(f"column names not filled in: {e.table_map.names}")
            for row in e.rows:
                i, k, c, pad, d, t = next(expected)
                if tuple(row) != (i, k, c, pad, Decimal(d), t):
                    raise RuntimeError(f"streamed row {seen + 1} differs: {row!r}")
                seen += 1
    if seen != n:
        raise RuntimeError(f"stream verification saw {seen:,} rows, expected {n:,}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each pycanal measurement (best counts)")
    ap.add_argument("--pmr-repeat", type=int, default=1, help="runs of python-mysql-replication (default 1)")
    ap.add_argument("--skip-pmr", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument(
        "--row-metadata",
        choices=["FULL", "MINIMAL"],
        default="FULL",
        help="binlog_row_metadata (default FULL: python-mysql-replication 1.x needs it for column names)",
    )
    args = ap.parse_args(argv)
    if args.rows < 1 or args.repeat < 1 or args.pmr_repeat < 1:
        ap.error("--rows, --repeat and --pmr-repeat must be positive")
    load_start = os.getloadavg()
    result: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr):
        db = PrivateMariaDB(
            keep=args.keep,
            binlog_row_metadata=args.row_metadata,
            extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"],
        )
        with db:
            log(f"MariaDB {db.version} on port {db.port}; loading {args.rows:,} rows")
            path, size = decode_bench.load_workload(db, args.rows)
            file = path.name
            log(f"workload binlog {file}: {size:,} bytes; verifying the stream (untimed)")
            verify(db, file, args.rows)

            stream = decode_bench.best_of(
                "pycanal_stream", args.repeat, lambda: pycanal_stream(db, file), args.rows
            )
            run = EntriesRun(db, file)
            entries = decode_bench.best_of("pycanal_entries", args.repeat, run, args.rows)
            entries["entries"] = run.entries
            entries["rowdata_entries"] = run.row_entries
            entries["entries_per_s"] = round(run.entries / entries["wall_s"])

            pmr = None
            pmr_version = None
            if not args.skip_pmr:
                pmr_version = importlib.metadata.version("mysql-replication")
                pmr_run = decode_bench.PmrRun(db, file)
                pmr = decode_bench.best_of("python-mysql-replication", args.pmr_repeat, pmr_run, args.rows)
                pmr["check"] = decode_bench.pmr_check_samples(pmr_run.samples, args.rows)
                pmr["settings"] = {"is_mariadb": False, "blocking": False, "only_events": ["WriteRowsEvent"]}

            def ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
                return round(a["rows_per_s"] / b["rows_per_s"], 2) if a and b else None

            result = {
                "benchmark": "stream",
                "rows": args.rows,
                "binlog_file": file,
                "binlog_bytes": size,
                "binlog_row_metadata": db.binlog_row_metadata,
                "transport": f"TCP {db.host}, user {db.repl_user!r}, non-blocking COM_BINLOG_DUMP",
                "rows_per_s": {
                    "pycanal_stream": stream["rows_per_s"],
                    "pycanal_entries": entries["rows_per_s"],
                    "python_mysql_replication": pmr["rows_per_s"] if pmr else None,
                },
                "entries_per_s": entries["entries_per_s"],
                "ratio": {
                    "pycanal_stream_over_python_mysql_replication": ratio(stream, pmr),
                    "pycanal_entries_over_python_mysql_replication": ratio(entries, pmr),
                    "pycanal_entries_over_pycanal_stream": ratio(entries, stream),
                },
                "goal": "pycanal >= 10x python-mysql-replication",
                "pycanal_stream": stream,
                "pycanal_entries": entries,
                "python_mysql_replication": pmr,
                "notes": [
                    "pycanal_stream: ReplicaStream (schema history from information_schema, SQLite in a "
                    "temp dir; TABLE_MAPs completed by it) building every value; wall time includes "
                    "connecting, SHOW MASTER STATUS and loading the schema",
                    "pycanal_entries: the same stream through RawEntryConverter.convert (serialized Entry "
                    "bytes, byte-identical to protobuf's); one ROWDATA entry per rows event",
                ],
                "versions": {
                    "python": platform.python_version(),
                    "pycanal": pycanal.__version__,
                    "mariadb": db.version,
                    "python_mysql_replication": pmr_version,
                },
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "platform": platform.platform(),
                    "load_average_start": [round(x, 2) for x in load_start],
                    "load_average_end": [round(x, 2) for x in os.getloadavg()],
                },
            }
        log("done")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
