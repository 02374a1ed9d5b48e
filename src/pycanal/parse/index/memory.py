"""``MemoryLogPositionManager``: positions in a dict (lost on exit)."""

from __future__ import annotations

import threading

from pycanal.protocol.position import LogPosition

from .base import LogPositionManager

__all__ = ["MemoryLogPositionManager"]


class MemoryLogPositionManager(LogPositionManager):
    def __init__(self) -> None:
        self._positions: dict[str, LogPosition] = {}
        self._lock = threading.Lock()

    def stop(self) -> None:
        super().stop()
        with self._lock:
            self._positions.clear()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        with self._lock:
            return self._positions.get(destination)

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        with self._lock:
            self._positions[destination] = log_position

    def destinations(self) -> set[str]:
        with self._lock:
            return set(self._positions)

    def remove(self, destination: str) -> None:
        with self._lock:
            self._positions.pop(destination, None)
