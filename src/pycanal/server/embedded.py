"""``CanalServerWithEmbedded``: Canal's in-process server API over several destinations.

::

    server = CanalServerWithEmbedded()
    server.add_instance(CanalInstance("example", parser={...}), lazy=True)
    client = ClientIdentity("example", 1001, "shop\\..*")
    server.subscribe(client)                       # lazy start; filter replaces the instance's
    msg = server.get_without_ack(client, 100, timeout=1.0)
    ...                                            # process msg.entries
    server.ack(client, msg.id)                     # or server.rollback(client)

Semantics (Canal's ``CanalServerWithEmbedded``, seed 002):

* ``subscribe``: starts the meta manager, subscribes, sets a missing cursor to the store's first
  position, then ``instance.subscribe_change`` (a client filter replaces the instance filter).
* ``get_without_ack(client, batch_size, timeout)``: ``timeout=None`` → ``try_get``; ``<= 0`` →
  blocking get (until a full batch); ``> 0`` → waits that long (in ``unit`` seconds) and returns
  what is there. Several batches may be outstanding: each continues after the last one handed out.
  An empty result is ``Message(-1, [])``.
* ``get``: the same, then ``ack`` at once; refused while batches are outstanding.
* ``ack(client, batch_id)``: the batch must be the first outstanding one (the meta manager's
  ``batchId:X is not the firstly:Y``); an unknown id is ``ack error , clientId:%s batchId:%d is not
  exist , please check``. The cursor moves to the batch's ack position (its last transaction
  boundary) and the store frees the batch (``store.ack(end, end_seq)``).
* ``rollback(client)``: all outstanding batches are dropped and the store hands them out again.
  ``rollback(client, batch_id)``: the batch must exist (Canal's error otherwise); Canal removes only
  that batch but rolls the whole store back, which leaves the other outstanding batches pointing
  at events that will be handed out again under new ids (their ack then fails). pycanal drops all
  outstanding batches in both forms: the store rollback replays them all anyway.

``Message.entries`` holds the serialized entries (bytes) when the store is raw (``raw=True``),
otherwise protobuf ``Entry`` objects; :meth:`Message.parsed_entries` always gives ``Entry``s.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from pycanal.errors import CanalServerError
from pycanal.instance import CanalInstance
from pycanal.meta import ClientIdentity
from pycanal.meta import PositionRange as MetaPositionRange
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import LogPosition
from pycanal.store import Events, MemoryEventStore

__all__ = ["CanalServerError", "CanalServerWithEmbedded", "Message"]

log = logging.getLogger(__name__)

_UNITS = {
    "ns": 1e-9,
    "nanoseconds": 1e-9,
    "us": 1e-6,
    "microseconds": 1e-6,
    "ms": 1e-3,
    "milliseconds": 1e-3,
    "s": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hours": 3600.0,
    "days": 86400.0,
}


@dataclass(slots=True)
class Message:
    """Canal's ``Message``: a batch id (-1 when empty) and its entries."""

    id: int
    entries: list[Any] = field(default_factory=list)
    raw: bool = False

    def parsed_entries(self) -> list[pb.Entry]:
        if not self.raw:
            return list(self.entries)
        return [pb.Entry.FromString(b) for b in self.entries]

    def __len__(self) -> int:
        return len(self.entries)


def _seconds(timeout: float, unit: str | float) -> float:
    if isinstance(unit, (int, float)):
        return timeout * float(unit)
    try:
        return timeout * _UNITS[unit.lower()]
    except KeyError:
        raise CanalServerError(f"unknown time unit {unit!r}") from None


class CanalServerWithEmbedded:
    def __init__(self) -> None:
        self._instances: dict[str, CanalInstance] = {}
        self._lazy: set[str] = set()
        self._lock = threading.RLock()
        self._client_locks: dict[str, threading.RLock] = {}
        self._running = False

    # ------------------------------------------------------------------ server lifecycle
    def start(self, destination: str | None = None) -> None:
        """Without a destination: mark the server running (instances start lazily or one by one).
        With one: start that instance."""
        if destination is None:
            self._running = True
            return
        instance = self._instance(destination)
        instance.start()

    def stop(self, destination: str | None = None) -> None:
        """Stop one instance, or (no destination) every instance and the server."""
        if destination is not None:
            self._instance(destination).stop()
            return
        with self._lock:
            instances = list(self._instances.values())
            self._running = False
        for instance in instances:
            try:
                instance.stop()
            except Exception:  # noqa: BLE001 - stop the others anyway
                log.exception("stopping %s failed", instance.destination)

    def is_start(self, destination: str | None = None) -> bool:
        if destination is None:
            return self._running
        with self._lock:
            instance = self._instances.get(destination)
        return instance is not None and instance.is_start

    def add_instance(self, instance: CanalInstance, *, lazy: bool = True) -> None:
        """Register a destination's instance; ``lazy``: started on its first subscribe,
        otherwise now."""
        with self._lock:
            if instance.destination in self._instances:
                raise CanalServerError(f"destination:{instance.destination} already exists")
            self._instances[instance.destination] = instance
            self._client_locks[instance.destination] = threading.RLock()
            if lazy:
                self._lazy.add(instance.destination)
        self._running = True
        if not lazy:
            instance.start()

    def remove_instance(self, destination: str) -> CanalInstance:
        with self._lock:
            instance = self._instances.pop(destination, None)
            self._lazy.discard(destination)
            self._client_locks.pop(destination, None)
        if instance is None:
            raise CanalServerError(f"destination:{destination} does not exist")
        instance.stop()
        return instance

    def instance(self, destination: str) -> CanalInstance:
        return self._instance(destination)

    @property
    def destinations(self) -> list[str]:
        with self._lock:
            return list(self._instances)

    def _instance(self, destination: str) -> CanalInstance:
        with self._lock:
            instance = self._instances.get(destination)
        if instance is None:
            raise CanalServerError(f"destination:{destination} does not exist")
        return instance

    def _check_start(self, destination: str) -> CanalInstance:
        instance = self._instance(destination)
        if not instance.is_start:
            raise CanalServerError(f"destination:{destination} should start first")
        return instance

    def _check_subscribe(self, instance: CanalInstance, client: ClientIdentity) -> None:
        if not instance.meta_manager.has_subscribe(client):
            raise CanalServerError(f"ClientIdentity:{client} should subscribe first")

    def _client_lock(self, destination: str) -> threading.RLock:
        with self._lock:
            return self._client_locks[destination]

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, client: ClientIdentity) -> None:
        instance = self._instance(client.destination)
        with self._client_lock(client.destination):
            if not instance.is_start:
                if client.destination not in self._lazy:
                    raise CanalServerError(f"destination:{client.destination} should start first")
                instance.start()
            meta = instance.meta_manager
            if not meta.is_start():
                meta.start()
            meta.subscribe(client)
            if meta.get_cursor(client) is None:
                position = instance.event_store.get_first_position()
                if position is not None:
                    meta.update_cursor(client, position)
            instance.subscribe_change(client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        instance = self._instance(client.destination)
        with self._client_lock(client.destination):
            instance.meta_manager.unsubscribe(client)

    def list_all_subscribe(self, destination: str) -> list[ClientIdentity]:
        return self._check_start(destination).meta_manager.list_all_subscribe_info(destination)

    # ------------------------------------------------------------------ get
    @staticmethod
    def _events(
        store: MemoryEventStore, start: LogPosition | None, batch_size: int, timeout: float | None, unit: Any
    ) -> Events:
        if timeout is None:
            return store.try_get(start, batch_size)
        if timeout <= 0:
            return store.get(start, batch_size)
        return store.get(start, batch_size, _seconds(timeout, unit))

    @staticmethod
    def _message(batch_id: int, events: Events, raw: bool) -> Message:
        if raw:
            return Message(batch_id, [e.raw_bytes() for e in events.events], True)
        return Message(batch_id, [e.entry for e in events.events], False)

    @staticmethod
    def _meta_range(events: Events) -> MetaPositionRange:
        r = events.position_range
        assert r is not None
        return MetaPositionRange(start=r.start, ack=r.ack, end=r.end, end_seq=r.end_seq)

    def get(
        self, client: ClientIdentity, batch_size: int, timeout: float | None = None, unit: Any = "seconds"
    ) -> Message:
        """Get and ack at once; refused while the client has outstanding batches."""
        instance = self._check_start(client.destination)
        self._check_subscribe(instance, client)
        with self._client_lock(client.destination):
            last = instance.meta_manager.get_lastest_batch(client)
            if last is not None:
                raise CanalServerError(
                    f"clientId:{client.client_id} has last batch:[{last}] isn't ack , maybe loss data"
                )
            message = self.get_without_ack(client, batch_size, timeout, unit)
            if message.id != -1:
                self.ack(client, message.id)
            return message

    def get_without_ack(
        self, client: ClientIdentity, batch_size: int, timeout: float | None = None, unit: Any = "seconds"
    ) -> Message:
        """A batch after the last one handed out; ack or roll it back later."""
        instance = self._check_start(client.destination)
        self._check_subscribe(instance, client)
        with self._client_lock(client.destination):
            meta = instance.meta_manager
            store = instance.event_store
            last = meta.get_lastest_batch(client)
            if last is not None:
                start = last.start
            else:
                start = meta.get_cursor(client)
                if start is None:
                    start = store.get_first_position()
            events = self._events(store, start, batch_size, timeout, unit)
            if not events:
                return Message(-1, [], store.raw)
            batch_id = meta.add_batch(client, self._meta_range(events))
            return self._message(batch_id, events, store.raw)

    def list_batch_ids(self, client: ClientIdentity) -> list[int]:
        instance = self._check_start(client.destination)
        self._check_subscribe(instance, client)
        return sorted(instance.meta_manager.list_all_batchs(client))

    # ------------------------------------------------------------------ ack / rollback
    def ack(self, client: ClientIdentity, batch_id: int) -> None:
        instance = self._check_start(client.destination)
        self._check_subscribe(instance, client)
        with self._client_lock(client.destination):
            meta = instance.meta_manager
            rng = meta.remove_batch(client, batch_id)  # not the first: CanalMetaManagerError
            if rng is None:
                raise CanalServerError(
                    f"ack error , clientId:{client.client_id} batchId:{batch_id} is not exist , please check"
                )
            if rng.ack is not None:
                meta.update_cursor(client, rng.ack)
            instance.event_store.ack(rng.end, rng.end_seq)

    def rollback(self, client: ClientIdentity, batch_id: int | None = None) -> None:
        instance = self._check_start(client.destination)
        # Canal: a rollback by a client that is not subscribed is ignored (the client may not have
        # subscribed yet when it rolls back on connect).
        if not instance.meta_manager.has_subscribe(client):
            return
        with self._client_lock(client.destination):
            meta = instance.meta_manager
            if batch_id is not None:
                rng = meta.remove_batch(client, batch_id)
                if rng is None:
                    raise CanalServerError(
                        f"rollback error, clientId:{client.client_id} batchId:{batch_id} is not exist , "
                        "please check"
                    )
            meta.clear_all_batchs(client)
            instance.event_store.rollback()
