"""``PeriodMixedMetaManager``: memory, with cursors flushed to ZooKeeper every ``period`` seconds.

Like Canal's ``PeriodMixedMetaManager`` (``default-instance.xml``, the HA set-up): reads and writes go to
memory (:class:`MemoryMetaManager`); ``subscribe``/``unsubscribe`` are written to ZooKeeper at once,
changed cursors every ``period`` seconds and on ``stop`` (Canal's paths and cursor JSON, via
:class:`ZooKeeperMetaManager`); batches stay in memory. ``start`` loads every destination's clients
and cursors from ZooKeeper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pycanal.common.flusher import WriteBehind
from pycanal.meta.base import ClientIdentity
from pycanal.meta.memory import MemoryMetaManager
from pycanal.meta.zookeeper import ZooKeeperMetaManager
from pycanal.protocol.position import LogPosition

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["PeriodMixedMetaManager"]


class PeriodMixedMetaManager(MemoryMetaManager):
    """See the module docstring. ``zk``: a connect string or a started ``KazooClient``."""

    def __init__(self, zk: str | KazooClient | ZooKeeperMetaManager, period: float = 1.0) -> None:
        super().__init__()
        self.zookeeper = zk if isinstance(zk, ZooKeeperMetaManager) else ZooKeeperMetaManager(zk)
        self.period = float(period)
        self._writes: WriteBehind[ClientIdentity, LogPosition] = WriteBehind(
            "pycanal-meta-zk-flush",
            self.period,
            self._lock,
            self._cursor_to_write,
            self.zookeeper.update_cursor,
        )

    def _do_start(self) -> None:
        self.zookeeper.start()
        with self._lock:
            self._destinations.clear()
            self._cursors.clear()
            self._batches.clear()
            self._writes.forget()
            for destination in self.zookeeper.list_destinations():
                clients = self.zookeeper.list_all_subscribe_info(destination)
                if clients:
                    self._destinations[destination] = clients
                for client in clients:
                    cursor = self.zookeeper.get_cursor(client)
                    if cursor is not None:
                        self._cursors[client] = cursor
        self._writes.start()

    def _do_stop(self) -> None:
        try:
            self._writes.stop()
        finally:
            self.zookeeper.stop()

    def _cursor_to_write(self, client: ClientIdentity) -> LogPosition | None:
        return self._cursors.get(client) if self.has_subscribe(client) else None

    def flush(self) -> None:
        """Write the changed cursors to ZooKeeper now."""
        self._writes.flush()

    def subscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            super().subscribe(client)
        self.zookeeper.subscribe(client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        with self._writes.flushing:  # no flush may re-create the client's cursor after this
            with self._lock:
                super().unsubscribe(client)
                self._writes.forget(client)
            self.zookeeper.unsubscribe(client)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        with self._lock:
            super().update_cursor(client, position)
            self._writes.changed(client)
