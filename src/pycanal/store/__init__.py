"""The event store: Canal's ``MemoryEventStoreWithBuffer`` ring buffer (put / get / ack).

::

    from pycanal.store import Event, MemoryEventStore

    store = MemoryEventStore(buffer_size=16384, batch_mode="MEMSIZE", ddl_isolation=False)
    store.validate(transaction_size=1024)        # canal.instance.transaction.size
    store.put([Event.from_raw(raw) for raw in entries])
    batch = store.get(None, batch_size=16, timeout=1.0)
    ...                                          # send batch.events, cursor := batch.position_range.ack
    store.ack(batch.position_range.end, batch.position_range.end_seq)

See ``pycanal.store.memory`` for the exact rules.
"""

from __future__ import annotations

from .event import DDL_EVENT_TYPES, Event
from .memory import (
    ITEMSIZE,
    MEMSIZE,
    Events,
    MemoryEventStore,
    PositionRange,
    StoreConfigError,
    StoreError,
    validate,
)

__all__ = [
    "DDL_EVENT_TYPES",
    "ITEMSIZE",
    "MEMSIZE",
    "Event",
    "Events",
    "MemoryEventStore",
    "PositionRange",
    "StoreConfigError",
    "StoreError",
    "validate",
]
