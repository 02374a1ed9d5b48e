"""``MemoryMetaManager``: everything in process memory (Canal's ``MemoryMetaManager``)."""

from __future__ import annotations

import threading

from pycanal.meta.base import ClientIdentity, MetaManager, PositionRange, not_first_error
from pycanal.protocol.position import LogPosition

__all__ = ["MemoryMetaManager"]


class _ClientBatches:
    """One client's outstanding batches and its id counter (ids start at 1)."""

    __slots__ = ("batches", "next_id")

    def __init__(self) -> None:
        self.batches: dict[int, PositionRange] = {}
        self.next_id = 1

    def add(self, range: PositionRange, batch_id: int | None) -> int:
        if batch_id is None:
            batch_id = self.next_id
            self.next_id += 1
        else:
            batch_id = int(batch_id)
            self.next_id = max(self.next_id, batch_id + 1)
        self.batches[batch_id] = range
        return batch_id


class MemoryMetaManager(MetaManager):
    """Subscriptions (in subscription order), cursors and batches in dicts, under one lock."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._destinations: dict[str, list[ClientIdentity]] = {}
        self._cursors: dict[ClientIdentity, LogPosition] = {}
        self._batches: dict[ClientIdentity, _ClientBatches] = {}

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            clients = self._destinations.setdefault(client.destination, [])
            if client in clients:
                clients.remove(client)  # Canal: remove, then add (the new filter wins)
            clients.append(client)

    def has_subscribe(self, client: ClientIdentity) -> bool:
        with self._lock:
            return client in self._destinations.get(client.destination, ())

    def unsubscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            clients = self._destinations.get(client.destination)
            if clients is not None and client in clients:
                clients.remove(client)
            self._cursors.pop(client, None)
            self._batches.pop(client, None)

    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        with self._lock:
            return list(self._destinations.get(destination, ()))

    def destinations(self) -> list[str]:
        with self._lock:
            return list(self._destinations)

    # ------------------------------------------------------------------ cursors
    def get_cursor(self, client: ClientIdentity) -> LogPosition | None:
        with self._lock:
            return self._cursors.get(client)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        with self._lock:
            self._cursors[client] = position

    # ------------------------------------------------------------------ batches
    def _client_batches(self, client: ClientIdentity) -> _ClientBatches:
        cb = self._batches.get(client)
        if cb is None:
            cb = self._batches[client] = _ClientBatches()
        return cb

    def add_batch(self, client: ClientIdentity, range: PositionRange, batch_id: int | None = None) -> int:
        with self._lock:
            return self._client_batches(client).add(range, batch_id)

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        with self._lock:
            cb = self._batches.get(client)
            if cb is None or not cb.batches:
                return None
            first = min(cb.batches)
            if first != batch_id:
                raise not_first_error(batch_id, first)
            return cb.batches.pop(batch_id)

    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        with self._lock:
            cb = self._batches.get(client)
            return None if cb is None else cb.batches.get(batch_id)

    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None:
        with self._lock:
            cb = self._batches.get(client)
            return cb.batches[min(cb.batches)] if cb is not None and cb.batches else None

    def get_lastest_batch(self, client: ClientIdentity) -> PositionRange | None:
        with self._lock:
            cb = self._batches.get(client)
            return cb.batches[max(cb.batches)] if cb is not None and cb.batches else None

    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        with self._lock:
            cb = self._batches.get(client)
            return {} if cb is None else dict(sorted(cb.batches.items()))

    def clear_all_batchs(self, client: ClientIdentity) -> None:
        with self._lock:
            cb = self._batches.get(client)
            if cb is not None:
                cb.batches.clear()  # the id counter keeps counting, as in Canal
