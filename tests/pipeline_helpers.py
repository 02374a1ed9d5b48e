"""What the end-to-end pipeline tests share: an embedded Canal server on a private MariaDB,
stopping a job's whole process group (Python driver, JVM, workers), the binlog's row changes, and
waiting for a lake (on disk or in S3) to hold each of them exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pycanal.binlog.reader import read_events
from pycanal.demo import SCHEMA, Workload
from pycanal.instance import CanalInstance
from pycanal.meta import MemoryMetaManager
from pycanal.parse.filter import TableFilter
from pycanal.protocol.position import EntryPosition
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.tcp import CanalTcpServer
from pycanal.spark.apply import applied_batch_ids
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.event_rows import EventRows
from pycanal.storage import LakePath
from pycanal.testing import PrivateMariaDB


def embedded_server(
    db: PrivateMariaDB,
    destination: str,
    start: tuple[str, int],
    filter_regex: str | None = None,
    host: str = "127.0.0.1",
) -> tuple[CanalServerWithEmbedded, Any]:
    """A server with one destination reading ``db`` from ``start``, and its TCP side (``.port``)
    listening on ``host``."""
    server = CanalServerWithEmbedded()
    parser: dict[str, Any] = {
        "master_address": (db.host, db.port),
        "username": db.repl_user,
        "password": db.repl_password,
        "master_position": EntryPosition(*start),
    }
    if filter_regex is not None:
        parser["filter"] = filter_regex
    server.add_instance(
        CanalInstance(destination, parser, store={"buffer_size": 16384}, meta_manager=MemoryMetaManager())
    )
    return server, CanalTcpServer(server, host=host).start()


def stop_job(job: subprocess.Popen) -> None:
    """SIGTERM the job's process group, SIGKILL it after a minute."""
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def commits(lake: Path | LakePath) -> int:
    """Micro-batches committed to the change log (counting the empty ones it skips)."""
    last = ChangeLog(lake).last_batch()
    return 0 if last is None else last + 1


def changelog_positions(lake: Path | LakePath) -> list[tuple]:
    """(op, file, offset, row) of every change row in the lake's change log."""
    out = []
    for f in ChangeLog(lake).files():
        t = pq.read_table(f.input_file(), columns=["op", "position"])
        out += [(r["op"], *(r["position"][k] for k in ("file", "offset", "row"))) for r in t.to_pylist()]
    return out


def await_exactly_once(
    lake: Path | LakePath, expected: list[tuple], job: subprocess.Popen, log: Path, timeout: float
) -> None:
    """Wait until the change log holds the ``expected`` positions, each once and nothing else,
    and the current state has applied its last batch (the job applies in the background)."""
    deadline = time.monotonic() + timeout
    while len(changelog_positions(lake)) < len(expected):
        assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
        time.sleep(1)
    got = changelog_positions(lake)
    assert len(got) == len(set(got)), "a change appears twice in the change log"
    assert sorted(got) == sorted(expected), "the change log lost or invented a change"
    while applied_batch_ids(lake)[-1:] != [ChangeLog(lake).last_batch()]:
        assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
        time.sleep(0.3)


def binlog_positions(db: PrivateMariaDB, start: tuple[str, int], tables: str = "shop\\..*") -> list[tuple]:
    """Every row change of ``tables`` in ``db``'s binlog from ``start``: (op, file, offset, row)."""
    db.flush_binary_logs()
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start[0]) : -1]]

    def events():
        for path in files:
            yield from read_events(path, start_position=start[1] if path.name == start[0] else None)

    return [
        (r.op, r.position.file, r.position.offset, r.position.row)
        for r in EventRows(accepts=TableFilter(tables)).rows(events())
    ]


def shop_under_way(
    db: PrivateMariaDB,
    lake: Path | LakePath,
    job: subprocess.Popen,
    log: Path,
    seconds: float,
    timeout: float,
) -> tuple[Workload, threading.Thread]:
    """The shop's tables made and, once ``job`` committed a micro-batch, the demo's workload writing
    for ``seconds`` in a thread; back when a few batches are in, or ``seconds``/3 later however slow
    the batches come, so that what a test does next happens mid-workload."""
    for ddl in SCHEMA:
        db.execute(ddl)
    deadline = time.monotonic() + timeout
    while commits(lake) < 1:
        assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
        time.sleep(0.3)
    work = Workload(db, seconds=seconds)
    writer = threading.Thread(target=work.run)
    writer.start()
    began = time.monotonic()
    while commits(lake) < 3 and time.monotonic() - began < seconds / 3:
        assert job.poll() is None, log.read_text()[-3000:]
        time.sleep(0.3)
    return work, writer
