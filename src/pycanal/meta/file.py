"""``FileMixedMetaManager``: memory, with subscriptions and cursors persisted to ``meta.dat``.

Like Canal's ``FileMixedMetaManager`` (the default of ``file-instance.xml``): everything lives in memory
(:class:`MemoryMetaManager`); each destination's clients and cursors (not the batches) are written to
``<data_dir>/<destination>/meta.dat`` in Canal's JSON layout::

    {"clientDatas":[{"clientIdentity":{"clientId":1001,"destination":"example","filter":".*\\\\..*"},
                     "cursor":{"identity":{...},"postion":{...}}}],
     "destination":"example"}

``subscribe``/``unsubscribe`` write at once; cursor updates are written every ``period`` seconds
(Canal's ``canal.file.flush.period``, there in ms) when something changed, and on ``stop``. ``start``
loads every ``<data_dir>/*/meta.dat``.

Unlike Canal (a plain overwrite, which a power loss can leave empty or full of NULs, Canal #3581),
each write is atomic and durable: the JSON goes to a temporary file in the same directory, which is
fsync'ed, renamed over ``meta.dat`` and the directory fsync'ed — a reader or a crash sees the old
file or the new one, never a torn one. Also unlike Canal (#4312), an empty client list is written
too: unsubscribing the last client is persisted.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from pycanal.meta._flusher import PeriodicFlusher
from pycanal.meta.base import CanalMetaManagerError, ClientIdentity
from pycanal.meta.memory import MemoryMetaManager
from pycanal.parse.position import LogPosition

__all__ = ["META_FILE_NAME", "FileMixedMetaManager", "write_atomically"]

META_FILE_NAME = "meta.dat"
_TMP_PREFIX = ".meta.dat."
_TMP_SUFFIX = ".tmp"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` so that it is, at any instant and after any crash, either the
    complete old content or the complete new content: temp file in the same directory, write,
    fsync, rename over ``path``, fsync the directory. A failure removes the temp file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX, dir=path.parent)
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
    _fsync_dir(path.parent)


class FileMixedMetaManager(MemoryMetaManager):
    """See the module docstring. ``period`` is in seconds."""

    def __init__(self, data_dir: str | os.PathLike[str], period: float = 1.0) -> None:
        super().__init__()
        self.data_dir = Path(data_dir)
        self.period = float(period)
        if self.period <= 0:
            raise ValueError(f"period must be > 0, not {period!r}")
        self._dirty: set[str] = set()
        self._flush_lock = threading.Lock()
        self._flusher: PeriodicFlusher | None = None

    def meta_file(self, destination: str) -> Path:
        return self.data_dir / destination / META_FILE_NAME

    # ------------------------------------------------------------------ lifecycle
    def _do_start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._destinations.clear()
            self._cursors.clear()
            self._batches.clear()
            self._dirty.clear()
            for sub in sorted(self.data_dir.iterdir()):
                if sub.is_dir():
                    for stale in sub.glob(_TMP_PREFIX + "*" + _TMP_SUFFIX):
                        with contextlib.suppress(OSError):
                            stale.unlink()  # left by a crash before the rename
                    if (sub / META_FILE_NAME).is_file():
                        self._load(sub.name)
        self._flusher = PeriodicFlusher(f"pycanal-meta-file-flush:{self.data_dir}", self.period, self.flush)
        self._flusher.start()

    def _do_stop(self) -> None:
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        self.flush()

    def _load(self, destination: str) -> None:
        path = self.meta_file(destination)
        try:
            data = json.loads(path.read_bytes())
            clients = data.get("clientDatas") or []
            for item in clients:
                client = ClientIdentity.from_dict(item["clientIdentity"])
                self._destinations.setdefault(destination, []).append(client)
                if item.get("cursor") is not None:
                    self._cursors[client] = LogPosition.from_dict(item["cursor"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CanalMetaManagerError(f"cannot read {path}: {exc}") from exc

    # ------------------------------------------------------------------ persistence
    def _document(self, destination: str) -> dict[str, Any]:
        datas = []
        for client in self._destinations.get(destination, ()):
            item: dict[str, Any] = {"clientIdentity": client.to_dict()}
            cursor = self._cursors.get(client)
            if cursor is not None:
                item["cursor"] = cursor.to_dict()
            datas.append(item)
        return {"clientDatas": datas, "destination": destination}

    def flush(self, destinations: list[str] | None = None) -> None:
        """Write the changed destinations (or the ones given) now."""
        with self._flush_lock:
            with self._lock:
                todo = sorted(self._dirty) if destinations is None else list(destinations)
                docs = [(d, self._document(d)) for d in todo]
                self._dirty.difference_update(todo)
            for destination, doc in docs:
                try:
                    path = self.meta_file(destination)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
                    write_atomically(path, text.encode("utf-8"))
                except BaseException:
                    with self._lock:
                        self._dirty.add(destination)  # retried on the next flush
                    raise

    # ------------------------------------------------------------------ overrides
    def subscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            super().subscribe(client)
            self._dirty.add(client.destination)
        self.flush([client.destination])

    def unsubscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            super().unsubscribe(client)
            self._dirty.add(client.destination)
        self.flush([client.destination])

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        with self._lock:
            super().update_cursor(client, position)
            self._dirty.add(client.destination)
