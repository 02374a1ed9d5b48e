"""Decode benchmark: rows/s for pycanal, python-mysql-replication and mariadb-binlog.

The script starts a private MariaDB (``pycanal.testing.mariadb.PrivateMariaDB``: ROW binlog,
CRC32 checksums, FULL row metadata), writes a sysbench-like workload into a fresh table --
``--rows`` rows of ``(id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60), d DECIMAL(12,2),
t DATETIME)`` in 1,000-row multi-row INSERTs, with FLUSH BINARY LOGS before and after so the
workload sits alone in one binlog file -- and then measures, in one run:

1. ``pycanal``: ``pycanal.binlog.read_events`` over that file, building every row's Python
   values (best of ``--repeat`` runs; wall and CPU time);
2. ``python-mysql-replication``: ``BinLogStreamReader`` streaming the same file from the server
   as the replication user over TCP and building every ``row["values"]`` (best of ``--repeat``);
3. ``mariadb-binlog -v --base64-output=decode-rows FILE > /dev/null`` (best of ``--repeat``);
4. ``pycanal_parallel``: ``pycanal.binlog.parallel.decode_parallel`` over the file with
   ``--workers`` processes (default 2) and as many parts, each worker building every row's
   values of its part and returning only its row count (best of ``--repeat``; wall time, and
   CPU time of the parent plus the workers; the process pool is started inside each run).

It prints one JSON object on stdout; progress goes to stderr.

    .venv/bin/python bench/decode.py [--rows 300000] [--repeat 3] [--workers 2] [--keep] [--skip-pmr]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pycanal
from pycanal.binlog import read_events
from pycanal.binlog.events import RowsEvent
from pycanal.binlog.parallel import decode_parallel, split_points
from pycanal.testing.mariadb import PrivateMariaDB, mariadb_binlog_path

SEED = 20240601
BATCH = 1000
TABLE = "sbtest1"
# sysbench's oltp_common.lua templates: c is 10 groups of 11 random digits (119 characters,
# it must fit CHAR(120)), pad 5 groups (59 characters, for CHAR(60)).
C_GROUPS = 10
PAD_GROUPS = 5
T_BASE = datetime(2000, 1, 1)
T_SPAN = int((datetime(2031, 1, 1) - T_BASE).total_seconds())
D_MAX_CENTS = 10**12 - 1  # DECIMAL(12,2): up to 9,999,999,999.99

_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[decode-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- workload
def _digits(rng: random.Random, groups: int) -> str:
    return "-".join(f"{rng.randrange(10**11):011d}" for _ in range(groups))


def generate_rows(n: int, seed: int = SEED) -> Iterator[tuple[int, int, str, str, str, str]]:
    """The workload rows, deterministic for a seed: (id, k, c, pad, d as text, t as text)."""
    rng = random.Random(seed)
    for i in range(1, n + 1):
        k = rng.randint(1, n)
        c = _digits(rng, C_GROUPS)
        pad = _digits(rng, PAD_GROUPS)
        cents = rng.randint(-D_MAX_CENTS, D_MAX_CENTS)
        sign = "-" if cents < 0 else ""
        d = f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"
        t = (T_BASE + timedelta(seconds=rng.randrange(T_SPAN))).strftime("%Y-%m-%d %H:%M:%S")
        yield i, k, c, pad, d, t


def load_workload(db: PrivateMariaDB, n: int, per_statement: int = BATCH) -> tuple[Path, int]:
    """Create the table, write the rows alone into one binlog file (``per_statement`` rows per
    INSERT, each its own transaction); return (path, size)."""
    schema = db.database
    db.execute(f"DROP TABLE IF EXISTS `{schema}`.`{TABLE}`")
    db.execute(
        f"CREATE TABLE `{schema}`.`{TABLE}` (id INT PRIMARY KEY, k INT, c CHAR(120), "
        "pad CHAR(60), d DECIMAL(12,2), t DATETIME) ENGINE=InnoDB"
    )
    time.sleep(1.1)  # a new second: Canal (with its TSDB) finds a start position by its time (bench/oltp.py)
    path = db.flush_binary_logs()
    log(f"workload binlog: {path}")
    with db.root_connection(schema) as conn, conn.cursor() as cur:
        # No ANNOTATE_ROWS events (the full INSERT text, ~230 KB per statement): the file holds
        # what a row-decoding benchmark is about, and mariadb-binlog does not print the SQL.
        cur.execute("SET SESSION binlog_annotate_row_events = OFF")
        batch: list[str] = []
        done = 0
        for row in generate_rows(n):
            batch.append("({},{},'{}','{}',{},'{}')".format(*row))
            if len(batch) == per_statement:
                cur.execute(f"INSERT INTO `{TABLE}` (id, k, c, pad, d, t) VALUES " + ",".join(batch))
                done += len(batch)
                batch.clear()
                if done % 50_000 == 0:
                    log(f"  inserted {done:,} rows")
        if batch:
            cur.execute(f"INSERT INTO `{TABLE}` (id, k, c, pad, d, t) VALUES " + ",".join(batch))
    nxt = db.flush_binary_logs()
    files = db.binlog_files()
    if path not in files or nxt == path or files.index(nxt) != files.index(path) + 1:
        raise RuntimeError(f"unexpected binlog rotation: workload {path}, next {nxt}, files {files}")
    count = db.query(f"SELECT COUNT(*) FROM `{schema}`.`{TABLE}`")[0][0]
    if count != n:
        raise RuntimeError(f"table holds {count} rows, expected {n}")
    return path, path.stat().st_size


# --------------------------------------------------------------------------- timing helpers
def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def best_of(name: str, repeat: int, run: Any, expected_rows: int) -> dict[str, Any]:
    """Run ``run() -> (rows, cpu seconds)`` ``repeat`` times; keep the fastest by wall time."""
    runs: list[dict[str, float]] = []
    for i in range(repeat):
        t0 = time.perf_counter()
        rows, cpu = run()
        wall = time.perf_counter() - t0
        if rows != expected_rows:
            raise RuntimeError(f"{name}: decoded {rows:,} rows, expected {expected_rows:,}")
        runs.append({"wall_s": round(wall, 4), "cpu_s": round(cpu, 4)})
        log(f"{name} run {i + 1}/{repeat}: {wall:.3f}s wall, {cpu:.3f}s CPU, {rows / wall:,.0f} rows/s")
    best = min(runs, key=lambda r: r["wall_s"])
    return {
        "rows_per_s": round(expected_rows / best["wall_s"]),
        "wall_s": best["wall_s"],
        "cpu_s": best["cpu_s"],
        "cpu_rows_per_s": round(expected_rows / best["cpu_s"]) if best["cpu_s"] > 0 else None,
        "runs": runs,
    }


# --------------------------------------------------------------------------- the three decoders
def pycanal_decode(path: Path) -> tuple[int, float]:
    c0 = time.process_time()
    n = 0
    for ev in read_events(path):
        if isinstance(ev, RowsEvent):
            rows = ev.rows  # rows decode lazily, on first access
            n += len(rows)
            for row in rows:
                for _v in row:
                    pass
    return n, time.process_time() - c0


def pycanal_verify(path: Path, n: int) -> None:
    """Untimed: every decoded row equals the generated one."""
    expected = generate_rows(n)
    seen = 0
    for ev in read_events(path):
        if not isinstance(ev, RowsEvent):
            continue
        if ev.kind != "INSERT" or ev.table != TABLE:
            raise RuntimeError(
                f"unexpected rows event in the workload file: {ev.kind} {ev.schema}.{ev.table}"
            )
        for row in ev.rows:
            i, k, c, pad, d, t = next(expected)
            want = (i, k, c, pad, Decimal(d), t)
            if tuple(row) != want:
                raise RuntimeError(f"pycanal row {seen + 1} differs:\n  got  {row!r}\n  want {want!r}")
            seen += 1
    if seen != n:
        raise RuntimeError(f"pycanal verification saw {seen:,} rows, expected {n:,}")


def parallel_count_rows(events: Any) -> int:
    """``decode_parallel`` consumer (top level, so it pickles): build every row's values of the
    part, as ``pycanal_decode`` does, and return only the row count."""
    n = 0
    for ev in events:
        if isinstance(ev, RowsEvent):
            rows = ev.rows
            n += len(rows)
            for row in rows:
                for _v in row:
                    pass
    return n


def parallel_rows_digest(events: Any) -> tuple[int, str]:
    """``decode_parallel`` consumer for the untimed check: (rows, SHA-256 of their text form)."""
    h = hashlib.sha256()
    n = 0
    for ev in events:
        if isinstance(ev, RowsEvent):
            for row in ev.rows:
                h.update(_row_text(row).encode())
                n += 1
    return n, h.hexdigest()


def _row_text(row: Any) -> str:
    i, k, c, pad, d, t = row
    return f"{i}|{k}|{c}|{pad}|{d}|{t}\n"


def pycanal_parallel_decode(path: Path, workers: int) -> tuple[int, float]:
    """Wall time is taken by the caller; CPU time is this process's plus the workers' (the pool
    is shut down, so its processes are reaped, before the children's usage is read)."""
    c0 = time.process_time()
    k0 = _children_cpu()
    counts = decode_parallel(path, parallel_count_rows, workers=workers, parts=workers)
    return sum(counts), time.process_time() - c0 + _children_cpu() - k0


def pycanal_parallel_verify(path: Path, n: int, workers: int) -> None:
    """Untimed: the parts' rows, in file order, are exactly the generated rows."""
    parts = decode_parallel(path, parallel_rows_digest, workers=workers, parts=workers)
    expected = generate_rows(n)
    total = 0
    for i, (count, digest) in enumerate(parts):
        h = hashlib.sha256()
        for _ in range(count):
            row = next(expected, None)
            if row is None:
                raise RuntimeError(f"pycanal_parallel: more than {n:,} rows")
            h.update(_row_text(row).encode())
        if h.hexdigest() != digest:
            raise RuntimeError(f"pycanal_parallel: the rows of part {i} differ from the generated ones")
        total += count
    if total != n:
        raise RuntimeError(f"pycanal_parallel verification saw {total:,} rows, expected {n:,}")


def pmr_stream(db: PrivateMariaDB, log_file: str, server_id: int, only_events: list) -> Any:
    """python-mysql-replication's reader over ``log_file`` from its start to the binlog's end."""
    from pymysqlreplication import BinLogStreamReader

    return BinLogStreamReader(
        connection_settings=db.repl_params(),
        server_id=server_id,
        log_file=log_file,
        log_pos=4,
        resume_stream=True,
        blocking=False,  # BINLOG_DUMP_NON_BLOCK: the server ends the stream at the end of the binlog
        only_events=only_events,
        # is_mariadb stays False: in 1.0.17 it only matters with auto_position (GTID); without
        # it, is_mariadb=True sends COM_BINLOG_DUMP with an empty file name (log_file/log_pos are
        # ignored, the dump starts at the oldest binlog), and with blocking=False the server then
        # drops the connection at the end, which the reader retries from the start, endlessly.
        # The plain file/position dump works against MariaDB (it sets @mariadb_slave_capability).
        enable_logging=False,  # it would log its parameters
    )


class PmrRun:
    """python-mysql-replication streaming the workload file from the server."""

    def __init__(self, db: PrivateMariaDB, log_file: str) -> None:
        self.db = db
        self.log_file = log_file
        self.server_id = 1000 + os.getpid() % 100000
        self.samples: list[dict[str, Any]] = []  # the first row of each event, for a value check

    def __call__(self) -> tuple[int, float]:
        from pymysqlreplication.row_event import WriteRowsEvent

        self.server_id += 1  # a fresh replica id per run
        self.samples = []
        samples_append = self.samples.append
        c0 = time.process_time()
        stream = pmr_stream(self.db, self.log_file, self.server_id, [WriteRowsEvent])
        n = 0
        try:
            for ev in stream:
                rows = ev.rows
                n += len(rows)
                if rows:
                    samples_append(rows[0]["values"])
                for row in rows:
                    for _v in row["values"].values():
                        pass
        finally:
            stream.close()
        return n, time.process_time() - c0


class PmrJsonRun(PmrRun):
    """python-mysql-replication + ``json.dumps`` of every row: what a user of the library does to
    emit JSON lines (the comparison for ``pycanal binlog decode --format jsonl``)."""

    def __call__(self) -> tuple[int, float]:
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        self.server_id += 1
        c0 = time.process_time()
        stream = pmr_stream(
            self.db, self.log_file, self.server_id, [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]
        )
        n = 0
        with open(os.devnull, "w") as out:
            try:
                for ev in stream:
                    if stream.log_file != self.log_file:
                        break
                    for row in ev.rows:
                        out.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
                        n += 1
            finally:
                stream.close()
        return n, time.process_time() - c0


def cli_run(path: Path, rows: int, fmt: str = "jsonl", *extra: str) -> tuple[int, float]:
    """``pycanal binlog decode FILE --format FMT [EXTRA] > /dev/null`` (its processes' CPU as cpu
    seconds); returns ``rows`` (the output is checked by the tests, not here)."""
    c0 = _children_cpu()
    with open(os.devnull, "wb") as null:
        subprocess.run([sys.executable, "-m", "pycanal.cli", "binlog", "decode", str(path), "--format", fmt,
                        *extra], stdout=null, check=True)  # fmt: skip
    return rows, _children_cpu() - c0


def pmr_check_samples(samples: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Compare python-mysql-replication's sampled rows with the generated ones."""
    wanted = {s.get("id") for s in samples}
    expected = {row[0]: row for row in generate_rows(n) if row[0] in wanted}
    mismatches = []
    for s in samples:
        exp = expected.get(s.get("id"))
        got = (s.get("id"), s.get("k"), s.get("c"), s.get("pad"), s.get("d"), s.get("t"))
        want = None
        if exp is not None:
            want = (exp[0], exp[1], exp[2], exp[3], Decimal(exp[4]), datetime.fromisoformat(exp[5]))
        if got != want:
            mismatches.append({"got": repr(got), "want": repr(want)})
    if mismatches:
        log(
            f"WARNING: python-mysql-replication: {len(mismatches)} of {len(samples)} sampled rows differ, "
            f"first: {mismatches[0]}"
        )
    return {"sampled_rows": len(samples), "mismatches": len(mismatches), "first_mismatch": mismatches[:1]}


def mariadb_binlog_run(cmd: list[str], rows: int) -> tuple[int, float]:
    """Wall time is taken by the caller; CPU time is the child's user + system time."""
    c0 = _children_cpu()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return rows, _children_cpu() - c0  # it decodes every row of the file


def mariadb_binlog_verify(cmd: list[str], n: int) -> None:
    """Untimed: the tool prints one ``### INSERT INTO`` per row, so it really decoded them all."""
    inserts = 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(b"### INSERT INTO"):
                inserts += 1
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
    if inserts != n:
        raise RuntimeError(f"{cmd[0]} printed {inserts:,} row INSERTs, expected {n:,}")


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000, help="rows in the workload (default 300000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per decoder, the best counts (default 3)")
    ap.add_argument("--keep", action="store_true", help="keep the server's temporary directory")
    ap.add_argument("--skip-pmr", action="store_true", help="do not run python-mysql-replication")
    ap.add_argument("--workers", type=int, default=2, help="processes for pycanal_parallel (default 2)")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.repeat < 1 or args.workers < 1:
        ap.error("--rows, --repeat and --workers must be positive")
    load_start = os.getloadavg()

    result: dict[str, Any] = {}
    # Third-party code must not write to our stdout: the JSON object is the only thing there.
    with contextlib.redirect_stdout(sys.stderr):
        log(f"starting a private MariaDB (rows={args.rows:,}, repeat={args.repeat})")
        db = PrivateMariaDB(
            keep=args.keep,
            # Only to make loading the workload quicker; the decoders do not touch InnoDB.
            extra_args=["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"],
        )
        with db:
            log(f"MariaDB {db.version} on port {db.port}, dir {db.root_dir}")
            t0 = time.monotonic()
            path, size = load_workload(db, args.rows)
            log(f"loaded {args.rows:,} rows in {time.monotonic() - t0:.1f}s: {path.name}, {size:,} bytes")

            log("verifying pycanal's values against the generated rows (untimed)")
            pycanal_verify(path, args.rows)

            log("pycanal: read_events over the file")
            pyc = best_of("pycanal", args.repeat, lambda: pycanal_decode(path), args.rows)

            starts = split_points(path.read_bytes(), args.workers)
            part_bytes = [b - a for a, b in zip(starts, starts[1:] + [size], strict=True)]
            log(f"pycanal_parallel: {args.workers} workers, parts at {starts} ({part_bytes} bytes)")
            pycanal_parallel_verify(path, args.rows, args.workers)
            par = best_of(
                "pycanal_parallel",
                args.repeat,
                lambda: pycanal_parallel_decode(path, args.workers),
                args.rows,
            )
            par["workers"] = args.workers
            par["parts"] = len(starts)
            par["split_points"] = starts
            par["part_bytes"] = part_bytes
            par["call"] = (
                f"decode_parallel(file, consume=parallel_count_rows, workers={args.workers}, "
                f"parts={args.workers})"
            )

            pmr: dict[str, Any] | None = None
            pmr_version = None
            if not args.skip_pmr:
                pmr_version = importlib.metadata.version("mysql-replication")
                log(f"python-mysql-replication {pmr_version}: streaming {path.name} from the server")
                run = PmrRun(db, path.name)
                pmr = best_of("python-mysql-replication", args.repeat, run, args.rows)
                pmr["check"] = pmr_check_samples(run.samples, args.rows)
                pmr["settings"] = {
                    "is_mariadb": False,
                    "log_file": path.name,
                    "log_pos": 4,
                    "resume_stream": True,
                    "blocking": False,
                    "only_events": ["WriteRowsEvent"],
                    "transport": f"TCP {db.host} as {db.repl_user!r}",
                }

            log("pycanal binlog decode --format jsonl / text > /dev/null")
            cli_jsonl = best_of("cli jsonl", args.repeat, lambda: cli_run(path, args.rows), args.rows)
            cli_jsonl_one = best_of("cli jsonl --workers 1", args.repeat,
                                    lambda: cli_run(path, args.rows, "jsonl", "--workers", "1"), args.rows)  # fmt: skip
            cli_text = best_of("cli text", args.repeat, lambda: cli_run(path, args.rows, "text"), args.rows)
            pmr_json = None
            if not args.skip_pmr:
                pmr_json = best_of("python-mysql-replication + json.dumps", args.repeat,
                                   PmrJsonRun(db, path.name), args.rows)  # fmt: skip

            tool = mariadb_binlog_path()
            cmd = [tool, "--no-defaults", "-v", "--base64-output=decode-rows", str(path)]
            tool_version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()
            log(f"mariadb-binlog: {' '.join(cmd)} > /dev/null")
            mariadb_binlog_verify(cmd, args.rows)

            mbl = best_of(
                "mariadb-binlog", args.repeat, lambda: mariadb_binlog_run(cmd, args.rows), args.rows
            )
            mbl["command"] = " ".join(cmd) + " > /dev/null"

            result = {
                "benchmark": "decode",
                "rows": args.rows,
                "binlog_file": str(path) if args.keep else path.name,
                "binlog_bytes": size,
                "binlog_row_metadata": db.binlog_row_metadata,
                "binlog_checksum": "CRC32",
                "annotate_rows_events": False,
                "repeat": args.repeat,
                "rows_per_s": {
                    "pycanal": pyc["rows_per_s"],
                    "python_mysql_replication": pmr["rows_per_s"] if pmr else None,
                    "mariadb_binlog": mbl["rows_per_s"],
                    "pycanal_parallel": par["rows_per_s"],
                },
                "ratio": {
                    "pycanal_over_python_mysql_replication": (
                        round(pyc["rows_per_s"] / pmr["rows_per_s"], 2) if pmr else None
                    ),
                    "pycanal_over_mariadb_binlog": round(pyc["rows_per_s"] / mbl["rows_per_s"], 3),
                    "pycanal_parallel_over_python_mysql_replication": (
                        round(par["rows_per_s"] / pmr["rows_per_s"], 2) if pmr else None
                    ),
                    "pycanal_parallel_over_mariadb_binlog": round(par["rows_per_s"] / mbl["rows_per_s"], 3),
                    "pycanal_parallel_over_pycanal": round(par["rows_per_s"] / pyc["rows_per_s"], 2),
                },
                "pycanal": pyc,
                "python_mysql_replication": pmr,
                "mariadb_binlog": mbl,
                "pycanal_parallel": par,
                "cli_jsonl": cli_jsonl,  # the default: a file this size in parts, a process per core
                "cli_jsonl_one_process": cli_jsonl_one,
                "cli_text": cli_text,
                "ratio_cli_jsonl_vs_mariadb_binlog": round(cli_jsonl["rows_per_s"] / mbl["rows_per_s"], 3),
                "ratio_cli_jsonl_one_process_vs_mariadb_binlog": round(
                    cli_jsonl_one["rows_per_s"] / mbl["rows_per_s"], 3
                ),
                "python_mysql_replication_json": pmr_json,
                "ratio_cli_jsonl_vs_pmr_json": (
                    round(cli_jsonl["rows_per_s"] / pmr_json["rows_per_s"], 2) if pmr_json else None
                ),
                "notes": [
                    "pycanal_parallel: decode_parallel splits the file into "
                    f"{args.workers} parts of about equal bytes at transaction starts (split_points) and "
                    f"decodes them in a pool of {args.workers} processes; the "
                    "rows are built in the workers, only counts come back; wall time includes starting "
                    "the pool; rows/s compare wall times, so they depend on idle cores (see "
                    "machine.load_average_*)",
                ],
                "versions": {
                    "python": platform.python_version(),
                    "pycanal": pycanal.__version__,
                    "mariadb": db.version,
                    "mariadb_binlog": tool_version,
                    "python_mysql_replication": pmr_version,
                },
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "cpus_available": len(os.sched_getaffinity(0))
                    if hasattr(os, "sched_getaffinity")
                    else None,
                    "platform": platform.platform(),
                    "processor": platform.machine(),
                    "load_average_start": [round(x, 2) for x in load_start],
                    "load_average_end": [round(x, 2) for x in os.getloadavg()],
                },
            }
        if args.keep:
            log(f"kept the server's directory: {db.root_dir}")
        log("done")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
