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

import json
import os
from pathlib import Path
from typing import Any

from pycanal.common.files import clear_temporaries, write_atomically
from pycanal.common.flusher import WriteBehind
from pycanal.meta.base import CanalMetaManagerError, ClientIdentity
from pycanal.meta.memory import MemoryMetaManager
from pycanal.protocol.position import LogPosition

__all__ = ["META_FILE_NAME", "FileMixedMetaManager"]

META_FILE_NAME = "meta.dat"


class FileMixedMetaManager(MemoryMetaManager):
    """See the module docstring. ``period`` is in seconds."""

    def __init__(self, data_dir: str | os.PathLike[str], period: float = 1.0) -> None:
        super().__init__()
        self.data_dir = Path(data_dir)
        self.period = float(period)
        self._writes: WriteBehind[str, dict[str, Any]] = WriteBehind(
            f"pycanal-meta-file-flush:{self.data_dir}", self.period, self._lock, self._document, self._write
        )

    def meta_file(self, destination: str) -> Path:
        return self.data_dir / destination / META_FILE_NAME

    # ------------------------------------------------------------------ lifecycle
    def _do_start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._destinations.clear()
            self._cursors.clear()
            self._batches.clear()
            self._writes.forget()
            for sub in sorted(self.data_dir.iterdir()):
                if sub.is_dir():
                    clear_temporaries(sub / META_FILE_NAME)  # left by a crash before the rename
                    if (sub / META_FILE_NAME).is_file():
                        self._load(sub.name)
        self._writes.start()

    def _do_stop(self) -> None:
        self._writes.stop()

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

    def _write(self, destination: str, document: dict[str, Any]) -> None:
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        write_atomically(self.meta_file(destination), text.encode("utf-8"))

    def flush(self, destinations: list[str] | None = None) -> None:
        """Write the changed destinations (or the ones given) now."""
        self._writes.flush(destinations)

    # ------------------------------------------------------------------ overrides
    def subscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            super().subscribe(client)
            self._writes.changed(client.destination)
        self.flush([client.destination])

    def unsubscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            super().unsubscribe(client)
            self._writes.changed(client.destination)
        self.flush([client.destination])

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        with self._lock:
            super().update_cursor(client, position)
            self._writes.changed(client.destination)
