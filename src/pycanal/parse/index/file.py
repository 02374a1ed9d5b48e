"""``FileMixedLogPositionManager`` (Canal's): positions in memory, flushed to ``parse.dat``.

Each destination's latest position lives in memory; the destinations whose position changed are
written every ``period`` seconds (Canal's ``canal.file.flush.period``, there in ms) and on ``stop`` to
``<data_dir>/<destination>/parse.dat``, Canal's layout and JSON (a ``LogPosition`` without
``@type``)::

    {"identity":{"slaveId":-1,"sourceAddress":{"address":"127.0.0.1","port":3306}},
     "postion":{"included":false,"journalName":"mysql-bin.000001","position":4,...}}

A destination absent from memory is loaded from its file on first use (as Canal does), so a
restarted manager resumes from the last flushed position. Unlike Canal's plain overwrite, each
write is atomic and durable (:func:`pycanal.meta.file.write_atomically`).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from pycanal.meta._flusher import PeriodicFlusher
from pycanal.meta.file import write_atomically
from pycanal.parse.position import LogPosition

from .base import LogPositionManager, LogPositionManagerError

__all__ = ["PARSE_FILE_NAME", "FileMixedLogPositionManager"]

log = logging.getLogger(__name__)

PARSE_FILE_NAME = "parse.dat"
_MISSING = object()


class FileMixedLogPositionManager(LogPositionManager):
    """See the module docstring. ``period`` is in seconds (> 0)."""

    def __init__(self, data_dir: str | os.PathLike[str], period: float = 1.0) -> None:
        self.data_dir = Path(data_dir)
        self.period = float(period)
        if self.period <= 0:
            raise ValueError(f"period must be > 0, not {period!r}")
        self._positions: dict[str, LogPosition | None] = {}
        self._dirty: set[str] = set()
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._flusher: PeriodicFlusher | None = None

    def position_file(self, destination: str) -> Path:
        return self.data_dir / destination / PARSE_FILE_NAME

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._positions.clear()
            self._dirty.clear()
        super().start()
        self._flusher = PeriodicFlusher(f"pycanal-parse-file-flush:{self.data_dir}", self.period, self.flush)
        self._flusher.start()

    def stop(self) -> None:
        if not self.running:
            return
        super().stop()
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        try:
            self.flush()
        finally:
            with self._lock:
                self._positions.clear()

    # ------------------------------------------------------------------ interface
    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        with self._lock:
            position = self._positions.get(destination, _MISSING)
            if position is _MISSING:
                position = self._load(destination)
                self._positions[destination] = position
            return position  # type: ignore[return-value]

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        with self._lock:
            self._positions[destination] = log_position
            self._dirty.add(destination)

    # ------------------------------------------------------------------ persistence
    def _load(self, destination: str) -> LogPosition | None:
        path = self.position_file(destination)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LogPositionManagerError(f"cannot read {path}: {exc}") from exc
        if not raw.strip():
            return None
        try:
            return LogPosition.from_json(raw)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LogPositionManagerError(f"cannot read {path}: {exc}") from exc

    def flush(self, destinations: list[str] | None = None) -> None:
        """Write the changed destinations (or the ones given) now."""
        with self._flush_lock:
            with self._lock:
                todo = sorted(self._dirty) if destinations is None else list(destinations)
                items = [(d, self._positions.get(d)) for d in todo]
                self._dirty.difference_update(todo)
            for i, (destination, position) in enumerate(items):
                if position is None:
                    continue
                try:
                    path = self.position_file(destination)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_atomically(path, position.to_json().encode("utf-8"))
                except OSError as exc:
                    with self._lock:
                        self._dirty.update(d for d, _ in items[i:])  # retried on the next flush
                    raise LogPositionManagerError(
                        f"cannot write {self.position_file(destination)}: {exc}"
                    ) from exc
