"""``PeriodMixedMetaManager``: memory, with cursors flushed to ZooKeeper every ``period`` seconds.

Like Canal's ``PeriodMixedMetaManager`` (``default-instance.xml``, the HA set-up): reads and writes go to
memory (:class:`MemoryMetaManager`); ``subscribe``/``unsubscribe`` are written to ZooKeeper at once,
changed cursors every ``period`` seconds and on ``stop`` (Canal's paths and cursor JSON, via
:class:`ZooKeeperMetaManager`); batches stay in memory. ``start`` loads every destination's clients
and cursors from ZooKeeper.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pycanal.meta._flusher import PeriodicFlusher
from pycanal.meta.base import ClientIdentity
from pycanal.meta.memory import MemoryMetaManager
from pycanal.meta.zookeeper import ZooKeeperMetaManager
from pycanal.parse.position import LogPosition

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["PeriodMixedMetaManager"]


class PeriodMixedMetaManager(MemoryMetaManager):
    """See the module docstring. ``zk``: a connect string or a started ``KazooClient``."""

    def __init__(self, zk: str | KazooClient | ZooKeeperMetaManager, period: float = 1.0) -> None:
        super().__init__()
        self.zookeeper = zk if isinstance(zk, ZooKeeperMetaManager) else ZooKeeperMetaManager(zk)
        self.period = float(period)
        if self.period <= 0:
            raise ValueError(f"period must be > 0, not {period!r}")
        self._dirty: set[ClientIdentity] = set()
        self._flush_lock = threading.Lock()
        self._flusher: PeriodicFlusher | None = None

    def _do_start(self) -> None:
        self.zookeeper.start()
        with self._lock:
            self._destinations.clear()
            self._cursors.clear()
            self._batches.clear()
            self._dirty.clear()
            for destination in self.zookeeper.list_destinations():
                clients = self.zookeeper.list_all_subscribe_info(destination)
                if clients:
                    self._destinations[destination] = clients
                for client in clients:
                    cursor = self.zookeeper.get_cursor(client)
                    if cursor is not None:
                        self._cursors[client] = cursor
        self._flusher = PeriodicFlusher("pycanal-meta-zk-flush", self.period, self.flush)
        self._flusher.start()

    def _do_stop(self) -> None:
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        try:
            self.flush()
        finally:
            self.zookeeper.stop()

    def flush(self) -> None:
        """Write the changed cursors to ZooKeeper now."""
        with self._flush_lock:
            with self._lock:
                todo = [(c, self._cursors.get(c)) for c in self._dirty if self.has_subscribe(c)]
                self._dirty.clear()
            for i, (client, cursor) in enumerate(todo):
                if cursor is None:
                    continue
                try:
                    self.zookeeper.update_cursor(client, cursor)
                except BaseException:
                    with self._lock:
                        self._dirty.update(c for c, _ in todo[i:])
                    raise

    def subscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            super().subscribe(client)
        self.zookeeper.subscribe(client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        with self._flush_lock:  # no flush may re-create the client's cursor after this
            with self._lock:
                super().unsubscribe(client)
                self._dirty.discard(client)
            self.zookeeper.unsubscribe(client)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        with self._lock:
            super().update_cursor(client, position)
            self._dirty.add(client)
