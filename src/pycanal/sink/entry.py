"""``EntryEventSink`` (Canal's ``EntryEventSink`` + ``HeartBeatEntryEventHandler``).

The parser hands each flushed list of store records (``Event``: the entry's bytes, written by the
converter with everything the store reads) to :meth:`EntryEventSink.sink`. HEARTBEAT entries are
dropped; the rest are tagged with the source ``LogIdentity`` (and turned into the store's
representation: kept as they are in raw mode) and put into the store in one piece.
While the store is full the sink waits and retries (Canal spins on ``tryPut``; pycanal waits on the
store's condition in short slices), so the parser's buffer flush blocks until the entries are
accepted -- which is what makes the parser's position persist only after the store holds them.
:meth:`stop` ends a blocked put: ``sink`` then returns False.

``filter_transaction_entry`` (``canal.instance.filter.transaction.entry``) drops TRANSACTIONBEGIN
and TRANSACTIONEND entries as Canal does, except one every ``empty_transaction_interval`` seconds
of binlog time or every ``empty_transaction_threshold`` entries: those carry the store's ack
points (a client cursor only moves to a transaction boundary), so some must get through.

Not done: Canal's empty-transaction filter (``filterEmtryTransactionEntry``): a BEGIN/END pair
left empty by the table filter is kept.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import LogIdentity
from pycanal.store import Event, MemoryEventStore

__all__ = ["EntryEventSink", "SinkError"]

_HEARTBEAT = pb.HEARTBEAT

log = logging.getLogger(__name__)


class SinkError(RuntimeError):
    """Canal's ``CanalSinkException``."""


class EntryEventSink:
    def __init__(
        self,
        store: MemoryEventStore,
        identity: LogIdentity | Callable[[], LogIdentity] | None = None,
        *,
        retry_interval: float = 0.1,
        filter_transaction_entry: bool = False,
        empty_transaction_interval: float = 5.0,
        empty_transaction_threshold: int = 8192,
    ) -> None:
        self.store = store
        self.filter_transaction_entry = filter_transaction_entry
        self._tx_interval_ms = int(empty_transaction_interval * 1000)
        self._tx_threshold = empty_transaction_threshold
        self._tx_count = 0
        self._tx_time = -(1 << 62)  # the first boundary always passes
        self.identity = identity
        self.retry_interval = retry_interval
        self.blocking_time = 0.0  # seconds spent waiting on a full store (Canal's eventsSinkBlockingTime)
        self._running = False
        self._stopped = threading.Event()

    @property
    def is_running(self) -> bool:
        return self._running

    def start(self) -> None:
        self._running = True
        self._stopped.clear()

    def stop(self) -> None:
        self._running = False
        self._stopped.set()

    def _identity(self) -> LogIdentity | None:
        ident = self.identity
        return ident() if callable(ident) else ident

    def sink(self, records: Sequence[Event], identity: LogIdentity | None = None) -> bool:
        """Put ``records`` (minus heartbeats) into the store, waiting while it is full.
        True when accepted; False when the sink was stopped first."""
        if not self._running:
            raise SinkError("the sink is not running")
        ident = identity if identity is not None else self._identity()
        if self.filter_transaction_entry:
            records = [r for r in records if self._pass_boundary(r)]
        events: list[Event] = [r for r in records if r.entry_type != _HEARTBEAT]
        if self.store.raw and all(r.raw is not None for r in events):
            if ident is not None:
                for r in events:
                    r.identity = ident
        else:
            new_event = self.store.new_event
            events = [new_event(r, ident) for r in events]
        if not events:
            return True
        started = None
        while True:
            if self.store.put(events, timeout=self.retry_interval):
                if started is not None:
                    self.blocking_time += time.monotonic() - started
                return True
            if started is None:
                started = time.monotonic()
            if not self._running:
                return False

    def idle(self) -> None:
        """The parser has read everything the source sent and sunk it: the store's waiting get
        need not wait for more."""
        self.store.idle()

    def _pass_boundary(self, record: Event) -> bool:
        if record.entry_type not in (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND):
            return True
        self._tx_count += 1
        at = record.execute_time
        if self._tx_count <= self._tx_threshold and abs(at - self._tx_time) <= self._tx_interval_ms:
            return False
        self._tx_count, self._tx_time = 0, at
        return True

    __call__ = sink
