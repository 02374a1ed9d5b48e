"""ZooKeeper position managers (Canal's ``ZooKeeperLogPositionManager`` and
``PeriodMixedLogPositionManager``).

* :class:`ZooKeeperLogPositionManager` reads and writes the node
  ``/otter/canal/destinations/<destination>/parse`` (:func:`pycanal.meta.zookeeper.parse_path`)
  holding the ``LogPosition`` JSON with ``"@type":"com.alibaba.otter.canal.protocol.position.LogPosition"``
  (fastjson's ``WriteClassName``, as Canal writes it); every persist is a ZooKeeper write.
* :class:`PeriodMixedLogPositionManager` keeps positions in memory and writes the changed ones to
  that node every ``period`` seconds (Canal's ``canal.zookeeper.flush.period``, there in ms) and on
  ``stop``; a destination absent from memory is read from ZooKeeper.

``zk`` is a connect string (the manager owns its ``KazooClient``) or a started ``KazooClient``
(shared, never stopped by the manager).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pycanal.meta._flusher import PeriodicFlusher
from pycanal.meta.zookeeper import parse_path, write_node
from pycanal.parse.position import LogPosition

from .base import LogPositionManager, LogPositionManagerError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["PeriodMixedLogPositionManager", "ZooKeeperLogPositionManager"]

_MISSING = object()


class ZooKeeperLogPositionManager(LogPositionManager):
    """See the module docstring."""

    def __init__(self, zk: str | KazooClient, *, timeout: float = 10.0) -> None:
        self._zk_arg = zk
        self._owns_client = isinstance(zk, str)
        self.timeout = timeout
        self._zk: KazooClient | None = None

    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            raise RuntimeError("ZooKeeperLogPositionManager is not started")
        return self._zk

    def start(self) -> None:
        if self.running:
            return
        if self._owns_client:
            from kazoo.client import KazooClient

            client = KazooClient(hosts=str(self._zk_arg), timeout=self.timeout)
            client.start(timeout=self.timeout)
            self._zk = client
        else:
            self._zk = self._zk_arg  # type: ignore[assignment]
        super().start()

    def stop(self) -> None:
        if not self.running:
            return
        super().stop()
        client, self._zk = self._zk, None
        if client is not None and self._owns_client:
            client.stop()
            client.close()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        from kazoo.exceptions import KazooException, NoNodeError

        path = parse_path(destination)
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        except KazooException as exc:
            raise LogPositionManagerError(f"cannot read {path}: {exc!r}") from exc
        if not data:
            return None
        try:
            return LogPosition.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LogPositionManagerError(f"cannot decode {path}: {exc}") from exc

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        from kazoo.exceptions import KazooException

        path = parse_path(destination)
        data = log_position.to_json(with_type=True).encode("utf-8")
        try:
            write_node(self.zk, path, data)
        except (KazooException, RuntimeError) as exc:
            raise LogPositionManagerError(f"cannot write {path}: {exc!r}") from exc


class PeriodMixedLogPositionManager(LogPositionManager):
    """See the module docstring. ``period`` is in seconds (> 0)."""

    def __init__(self, zk: str | KazooClient | ZooKeeperLogPositionManager, period: float = 1.0) -> None:
        self.zookeeper = (
            zk if isinstance(zk, ZooKeeperLogPositionManager) else ZooKeeperLogPositionManager(zk)
        )
        self.period = float(period)
        if self.period <= 0:
            raise ValueError(f"period must be > 0, not {period!r}")
        self._positions: dict[str, LogPosition | None] = {}
        self._dirty: set[str] = set()
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._flusher: PeriodicFlusher | None = None

    def start(self) -> None:
        if self.running:
            return
        if not self.zookeeper.running:
            self.zookeeper.start()
        with self._lock:
            self._positions.clear()
            self._dirty.clear()
        super().start()
        self._flusher = PeriodicFlusher("pycanal-parse-zk-flush", self.period, self.flush)
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
            if self.zookeeper.running:
                self.zookeeper.stop()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        with self._lock:
            position = self._positions.get(destination, _MISSING)
            if position is _MISSING:
                position = self.zookeeper.get_latest_index_by(destination)
                self._positions[destination] = position
            return position  # type: ignore[return-value]

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        with self._lock:
            self._positions[destination] = log_position
            self._dirty.add(destination)

    def flush(self) -> None:
        """Write the changed positions to ZooKeeper now."""
        with self._flush_lock:
            with self._lock:
                items = [(d, self._positions.get(d)) for d in sorted(self._dirty)]
                self._dirty.clear()
            for i, (destination, position) in enumerate(items):
                if position is None:
                    continue
                try:
                    self.zookeeper.persist_log_position(destination, position)
                except BaseException:
                    with self._lock:
                        self._dirty.update(d for d, _ in items[i:])
                    raise
