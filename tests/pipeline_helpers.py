"""What the end-to-end pipeline tests share: an embedded Canal server on a private MariaDB, and
stopping a job's whole process group (Python driver, JVM, workers)."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

from pycanal.instance import CanalInstance
from pycanal.meta import MemoryMetaManager
from pycanal.protocol.position import EntryPosition
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.tcp import CanalTcpServer
from pycanal.testing import PrivateMariaDB


def embedded_server(
    db: PrivateMariaDB, destination: str, start: tuple[str, int], filter_regex: str | None = None
) -> tuple[CanalServerWithEmbedded, Any]:
    """A server with one destination reading ``db`` from ``start``, and its TCP side (``.port``)."""
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
    return server, CanalTcpServer(server).start()


def stop_job(job: subprocess.Popen) -> None:
    """SIGTERM the job's process group, SIGKILL it after a minute."""
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
