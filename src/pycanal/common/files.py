"""Durable file replacement: a reader or a crash sees the old content or the new, never a torn
file (Canal's plain overwrite of ``meta.dat`` can leave it empty, Canal #3581)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["clear_temporaries", "fsync_dir", "write_atomically"]


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data``: a temporary file in the same directory (``.<name>.*.tmp``,
    the directory made if missing), written, fsync'ed, renamed over ``path``, the directory
    fsync'ed. A failure removes it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def clear_temporaries(path: str | os.PathLike[str]) -> None:
    """Remove what a crash before the rename left of ``write_atomically(path, ...)``."""
    path = Path(path)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
