"""The two servers the benchmarks race on one binlog: ``pycanal server`` (its own process, a conf
dir of Canal's defaults) and Alibaba Canal itself (``pycanal.testing.canal.PrivateCanal``: Canal
1.1.7, the newest whose server is on Maven Central, with ``startup.sh``'s JVM options), both read
by the same ``SimpleConnector``; and what each process used (CPU seconds, peak RSS).

Canal gets its documented defaults (canal.properties as shipped: a 16384-slot MEMSIZE store,
parallel parser, TSDB in H2) and ``startup.sh``'s heap (``-Xms2048m -Xmx3072m``, G1); pycanal gets
the same keys (Canal's defaults, no ``filter.query.dml``), which is also what a plain conf dir gives.

A race (``race``) gives each server process two lazy destinations: ``warm`` on a warm-up source
(another MariaDB), drained first so that Canal's JIT is warm, and ``bench`` on the measured file,
started by the client's subscription once the warm-up is done: the clock runs from that
subscription to the file's last transaction end, and no other destination parses meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import perf_profile
from pycanal.client import SimpleConnector
from pycanal.client.simple import CanalClientError
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing._process import free_port
from pycanal.testing.mariadb import PrivateMariaDB

__all__ = [
    "CANAL_HEAP",
    "Drainer",
    "Feed",
    "race",
    "canal_server",
    "pairwise",
    "race_options",
    "racers",
    "profile_of",
    "pycanal_server",
    "shipped_settings",
    "start_server",
    "subscribed",
    "usage",
    "write_conf",
]

# startup.sh's heap on a 64-bit JVM (Canal 1.1.x): -Xms2048m -Xmx3072m.
CANAL_HEAP = ["-Xms2048m", "-Xmx3072m"]


class Feed(NamedTuple):
    """A destination's source: the server, the start, the tables (a regex on table names of its
    workload database)."""

    db: PrivateMariaDB
    start: tuple[str, int]
    tables: str


def write_conf(
    root: Path, db: PrivateMariaDB, port: int, start: tuple[str, int], tables: str, extra: str = "",
    *, warm: Feed | None = None,
) -> None:  # fmt: skip
    """A conf dir for destination ``bench``: Canal's defaults, the source, the start, the tables,
    plus ``extra`` instance lines; with ``warm``, a destination ``warm`` too and both lazy."""
    feeds = {"bench": Feed(db, start, tables)} | ({"warm": warm} if warm else {})
    root.mkdir(parents=True, exist_ok=True)
    (root / "canal.properties").write_text(
        f"canal.ip = 127.0.0.1\ncanal.port = {port}\ncanal.metrics.pull.port = {free_port()}\n"
        f"canal.destinations = {','.join(feeds)}\ncanal.conf.dir = .\ncanal.file.data.dir = {root}/data\n"
        f"canal.auto.scan = false\ncanal.instance.global.lazy = {'true' if warm else 'false'}\n"
    )
    for name, f in feeds.items():
        (root / name).mkdir(parents=True)
        (root / name / "instance.properties").write_text(
            f"canal.instance.master.address = {f.db.host}:{f.db.port}\n"
            f"canal.instance.master.journal.name = {f.start[0]}\n"
            f"canal.instance.master.position = {f.start[1]}\n"
            f"canal.instance.dbUsername = {f.db.repl_user}\n"
            f"canal.instance.dbPassword = {f.db.repl_password}\n"
            f"canal.instance.filter.regex = {f.db.database}\\\\.({f.tables})\n{extra if name == 'bench' else ''}"
        )


def subscribed(port: int, destination: str = "bench") -> SimpleConnector:
    """A connector subscribed as soon as the destination runs (the port opens before it starts)."""
    deadline = time.monotonic() + 60
    while True:
        conn = SimpleConnector(("127.0.0.1", port), destination)
        try:
            conn.connect()
            conn.subscribe()
            return conn
        except (CanalClientError, OSError):
            conn.disconnect()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def shipped_settings() -> str:
    """conf/canal.properties' store and event-filter lines: what a user of the shipped conf runs."""
    conf = Path(__file__).resolve().parent.parent / "conf" / "canal.properties"
    keep = ("canal.instance.memory.", "canal.instance.filter.query.")
    return "".join(line for line in conf.open() if line.startswith(keep))


def start_server(conf: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """``pycanal server --conf conf``, once it listens on ``port``."""
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
            raise RuntimeError(f"pycanal server exited {proc.returncode}: {log_path.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    raise RuntimeError("pycanal server did not listen")


@contextlib.contextmanager
def pycanal_server(bench: Feed, warm: Feed, tmp: Path, extra: str = "") -> Iterator[tuple[int, int]]:
    """``pycanal server`` with destinations ``warm`` and ``bench`` (lazy, Canal's defaults;
    ``extra``: more ``bench`` instance lines): (port, pid), listening; terminated on exit."""
    port = free_port()
    conf = tmp / f"conf-{port}"
    write_conf(conf, bench.db, port, bench.start, bench.tables, extra, warm=warm)
    proc = start_server(conf, port, tmp / f"server-{port}.log")
    try:
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def canal_server(bench: Feed, warm: Feed) -> Iterator[tuple[int, int]]:
    """Canal 1.1.7 with destinations ``warm`` and ``bench`` (lazy; its documented defaults,
    startup.sh's G1 and heap, JVM zone UTC as pycanal's TIMESTAMP rendering): (port, pid)."""
    from pycanal.testing.canal import PrivateCanal

    def over(f: Feed) -> dict[str, object]:
        return {
            "master.address": f"{f.db.host}:{f.db.port}",
            "filter.regex": f"{f.db.database}\\.({f.tables})",
            "master.journal.name": f.start[0],
            "master.position": f.start[1],
        }

    canal = PrivateCanal.for_mariadb(
        bench.db, destinations={"warm": over(warm), "bench": over(bench)}, quick_start=False,
        jvm_args=CANAL_HEAP, timezone="UTC", log_level="WARN", canal_properties={"canal.instance.global.lazy": True},
    )  # fmt: skip
    with canal:
        assert canal.pid is not None
        yield canal.port, canal.pid


def race(
    server: Any,
    warm: tuple[str, int, int],
    bench: tuple[str, int, int],
    then: Any = None,
    profile: Path | None = None,
    profiler: str = "py-spy",
) -> dict[str, Any]:
    """One server process (``pycanal_server``/``canal_server``): ``warm`` drained first (file, rows,
    transactions: not measured), then ``bench`` from its subscription to its last transaction end:
    rows/s, the server's CPU seconds over it and its peak RSS. ``then(conn)``, if given, runs on
    the ``bench`` connection afterwards and its result is kept as ``then``; ``profile``: a record
    of the server while it drains ``bench``, by ``profiler``: ``py-spy`` (its raw stacks) or
    ``perf`` (``perf.data`` beside it, the report in it: ``bench/perf_profile.py``)."""
    with server as (port, pid):
        conn = subscribed(port, "warm")
        try:
            Drainer(conn).file(*warm)
        finally:
            conn.disconnect()
        data = profile.with_suffix(".perf.data") if profile is not None else None
        spy = None
        if profile is not None:
            spy = perf_profile.record(data) if profiler == "perf" else profile_of(pid, profile)
        before = usage(pid)
        t0 = time.perf_counter()
        conn = subscribed(port, "bench")
        try:
            res = Drainer(conn).file(*bench, t0=t0)
            after = usage(pid)
            if spy is not None:
                spy.send_signal(2)
                spy.wait(30)
                if profiler == "perf":
                    profile.write_text(perf_profile.report(data, set(_tree(pid))))
            res["server_cpu_s"] = round(after["cpu_s"] - before["cpu_s"], 3)
            if then is not None:
                res["then"] = then(conn)
            res["server_peak_rss_mb"] = usage(pid)["peak_rss_mb"]
        finally:
            conn.disconnect()
    return res


def race_options(ap: Any) -> None:
    """``--repeat`` (runs of each server, alternated) and ``--skip-canal`` on an argument parser."""
    ap.add_argument("--repeat", type=int, default=3, help="runs of each server, alternated (default 3)")
    ap.add_argument("--skip-canal", action="store_true", help="pycanal only: no Canal 1.1.7 column")


def racers(args: Any) -> list[str]:
    """The servers ``race_options`` chose, in the order they alternate."""
    return ["pycanal"] + ([] if args.skip_canal else ["canal"])


def pairwise(runs: dict[str, list[dict[str, Any]]], key: str) -> list[float]:
    """``key`` of each pycanal run over the Canal run alternated with it."""
    return [round(p[key] / c[key], 3) for p, c in zip(runs["pycanal"], runs["canal"], strict=True)]


def _tree(pid: int) -> list[int]:
    """A process and its descendants (the parser's conversion process, the JVM's nothing)."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                out += _tree(int(child))
    return out


def usage(pid: int) -> dict[str, float]:
    """CPU seconds (user + system, the process and its children, live) and peak RSS (MB, summed
    over the process tree: VmHWM) of a running process."""
    cpu = hwm = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += sum(int(x) for x in fields[11:15]) / tick
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm += int(line.split()[1]) / 1024
    return {"cpu_s": round(cpu, 3), "peak_rss_mb": round(hwm, 1)}


def profile_of(pid: int, out: Path) -> Any:
    """py-spy recording a process (GIL holder, threads, subprocesses); stop it with SIGINT."""
    beside = Path(sys.executable).parent / "py-spy"
    exe = str(beside) if beside.exists() else "py-spy"
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--threads", "--gil",
         "--subprocesses", "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


class Drainer:
    """GET + ack through the files in binlog order, parsing every entry and touching every value;
    entries of a later file that arrive with an earlier one's wait for their file's turn."""

    def __init__(self, conn: SimpleConnector) -> None:
        self.conn = conn
        self.pending: list[tuple[float, pb.Entry]] = []  # (arrival, entry) of later files

    def _entries(self) -> list[tuple[float, pb.Entry]]:
        if self.pending:
            out, self.pending = self.pending, []
            return out
        for _ in range(25):  # at most 5 s: the caller decides when it waited too long
            msg = self.conn.get_without_ack(4096, timeout=200, unit="ms")
            if msg.id != -1:
                now = time.perf_counter()
                entries = msg.entries
                self.conn.ack(msg.id)
                return [(now, e) for e in entries]
        return []

    def file(self, file: str, rows: int, txns: int, t0: float | None = None) -> dict[str, Any]:
        """Every row and transaction end of ``file``: the wall time from ``t0`` (default: its first
        entry's arrival)."""
        n = ends = 0
        arrived: float | None = None  # the first entry's arrival: start-up apart from the drain
        cpu0 = time.process_time()
        quiet = time.monotonic() + 120
        while n < rows or ends < txns:
            if time.monotonic() > quiet:
                raise RuntimeError(
                    f"{file}: nothing for 120 s at {n:,} of {rows:,} rows, {ends:,} of {txns:,} ends"
                )
            batch = self._entries()
            if batch:
                quiet = time.monotonic() + 120
            for i, (at, entry) in enumerate(batch):
                if entry.header.logfileName > file:  # the next file: its turn comes
                    self.pending = batch[i:]
                    break
                # An earlier file's name counts as this file's: a destination starts at its file, and
                # Canal 1.1.7 names the entries of its first second there (offsets of this file) with
                # the file before it (seen on MariaDB 10.11, with the parallel parser on and off).
                if arrived is None:
                    arrived = at
                if entry.entryType == pb.TRANSACTIONEND:
                    ends += 1
                    continue
                if entry.entryType != pb.ROWDATA:
                    continue
                change = pb.RowChange.FromString(entry.storeValue)
                if change.eventType not in (pb.INSERT, pb.UPDATE, pb.DELETE):
                    continue
                for row in change.rowDatas:
                    for c in row.beforeColumns:
                        _ = c.value
                    for c in row.afterColumns:
                        _ = c.value
                    n += 1
        first = t0 if t0 is not None else arrived
        wall = time.perf_counter() - (first or time.perf_counter())
        if n != rows or ends != txns:
            raise RuntimeError(
                f"{file}: {n:,} rows / {ends:,} transactions delivered, expected {rows:,} / {txns:,}"
            )
        return {"wall_s": round(wall, 3), "rows_per_s": round(rows / wall), "txn_per_s": round(txns / wall),
                "first_entry_s": round((arrived or 0.0) - (first or 0.0), 3),
                "client_cpu_s": round(time.process_time() - cpu0, 3)}  # fmt: skip
