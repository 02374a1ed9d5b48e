"""The position-manager interface (Canal's ``CanalLogPositionManager``)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from pycanal.protocol.position import LogPosition

__all__ = ["LogPositionManager", "LogPositionManagerError"]


class LogPositionManagerError(Exception):
    """A manager could not read or persist a position (Canal's ``CanalParseException`` there)."""


class LogPositionManager(ABC):
    """Stores the latest parsed position per destination."""

    running = False

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False

    @abstractmethod
    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        """The latest stored position of ``destination`` (None: nothing stored)."""

    @abstractmethod
    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        """Store ``log_position`` as the latest of ``destination``; raise
        :class:`LogPositionManagerError` when it cannot be stored."""

    def __enter__(self) -> LogPositionManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
