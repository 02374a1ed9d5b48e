"""Positions in memory, written behind to a store (Canal's ``FileMixedLogPositionManager`` and
``PeriodMixedLogPositionManager``).

Each destination's latest position lives in memory; the destinations whose position changed are
written every ``period`` seconds (Canal's ``canal.file.flush.period`` / ``canal.zookeeper.flush.period``,
there in ms) and on ``stop``. A destination absent from memory is read from the store on first use
(as Canal does), so a restarted manager resumes from the last written position.

* :class:`FileMixedLogPositionManager`: ``<data_dir>/<destination>/parse.dat``, Canal's JSON (a
  ``LogPosition`` without ``@type``); unlike Canal's plain overwrite each write is atomic and
  durable (:func:`pycanal.common.files.write_atomically`)::

      {"identity":{"slaveId":-1,"sourceAddress":{"address":"127.0.0.1","port":3306}},
       "postion":{"included":false,"journalName":"mysql-bin.000001","position":4,...}}

* :class:`PeriodMixedLogPositionManager`: the ZooKeeper node of
  :class:`~pycanal.parse.index.zookeeper.ZooKeeperLogPositionManager`.
"""

from __future__ import annotations

import os
import threading
from abc import abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from pycanal.common.files import write_atomically
from pycanal.common.flusher import WriteBehind
from pycanal.protocol.position import LogPosition

from .base import LogPositionManager, LogPositionManagerError
from .zookeeper import ZooKeeperLogPositionManager

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = [
    "PARSE_FILE_NAME",
    "FileMixedLogPositionManager",
    "MixedLogPositionManager",
    "PeriodMixedLogPositionManager",
]

PARSE_FILE_NAME = "parse.dat"
_MISSING = object()


class MixedLogPositionManager(LogPositionManager):
    """See the module docstring: ``_read``/``_write`` are the store, ``_open``/``_close`` its life."""

    def __init__(self, period: float, name: str) -> None:
        self.period = float(period)
        self._positions: dict[str, LogPosition | None] = {}
        self._lock = threading.RLock()
        self._writes: WriteBehind[str, LogPosition] = WriteBehind(
            name, self.period, self._lock, self._positions.get, self._write
        )

    @abstractmethod
    def _read(self, destination: str) -> LogPosition | None: ...

    @abstractmethod
    def _write(self, destination: str, position: LogPosition) -> None: ...

    def _open(self) -> None:  # noqa: B027 - optional hook
        pass

    def _close(self) -> None:  # noqa: B027 - optional hook
        pass

    def start(self) -> None:
        if self.running:
            return
        self._open()
        with self._lock:
            self._positions.clear()
            self._writes.forget()
        super().start()
        self._writes.start()

    def stop(self) -> None:
        if not self.running:
            return
        super().stop()
        try:
            self._writes.stop()
        finally:
            with self._lock:
                self._positions.clear()
            self._close()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        with self._lock:
            position = self._positions.get(destination, _MISSING)
            if position is _MISSING:
                position = self._positions[destination] = self._read(destination)
            return position  # type: ignore[return-value]

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        with self._lock:
            self._positions[destination] = log_position
            self._writes.changed(destination)

    def flush(self, destinations: list[str] | None = None) -> None:
        """Write the changed destinations (or the ones given) now."""
        self._writes.flush(destinations)


class FileMixedLogPositionManager(MixedLogPositionManager):
    """See the module docstring. ``period`` is in seconds (> 0)."""

    def __init__(self, data_dir: str | os.PathLike[str], period: float = 1.0) -> None:
        self.data_dir = Path(data_dir)
        super().__init__(period, f"pycanal-parse-file-flush:{self.data_dir}")

    def position_file(self, destination: str) -> Path:
        return self.data_dir / destination / PARSE_FILE_NAME

    def _open(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def _read(self, destination: str) -> LogPosition | None:
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

    def _write(self, destination: str, position: LogPosition) -> None:
        path = self.position_file(destination)
        try:
            write_atomically(path, position.to_json().encode("utf-8"))
        except OSError as exc:
            raise LogPositionManagerError(f"cannot write {path}: {exc}") from exc


class PeriodMixedLogPositionManager(MixedLogPositionManager):
    """See the module docstring. ``period`` is in seconds (> 0)."""

    def __init__(self, zk: str | KazooClient | ZooKeeperLogPositionManager, period: float = 1.0) -> None:
        self.zookeeper = (
            zk if isinstance(zk, ZooKeeperLogPositionManager) else ZooKeeperLogPositionManager(zk)
        )
        super().__init__(period, "pycanal-parse-zk-flush")

    def _open(self) -> None:
        if not self.zookeeper.running:
            self.zookeeper.start()

    def _close(self) -> None:
        if self.zookeeper.running:
            self.zookeeper.stop()

    def _read(self, destination: str) -> LogPosition | None:
        return self.zookeeper.get_latest_index_by(destination)

    def _write(self, destination: str, position: LogPosition) -> None:
        self.zookeeper.persist_log_position(destination, position)
