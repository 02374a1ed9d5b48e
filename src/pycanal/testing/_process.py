"""Helpers shared by the private servers (MariaDB, ZooKeeper) that tests start and stop."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    """A loopback port that was free a moment ago (callers retry if the server cannot bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, or "" if it cannot be read (for start-up error messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def die_with_parent(signum: int) -> Callable[[], None]:
    """A ``preexec_fn``: on Linux the kernel sends ``signum`` to the server when the thread that
    started it exits (PR_SET_PDEATHSIG), so a killed test run leaves no server behind."""

    def preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signum)
        except Exception:
            pass

    return preexec


def emergency_cleanup(proc: subprocess.Popen[bytes] | None, root: Path, keep: bool) -> None:
    """Run at interpreter exit (or garbage collection) for a server that was never stopped."""
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot handle SIGTERM
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
