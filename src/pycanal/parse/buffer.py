"""The transaction buffer between entry conversion and the sink (Canal's ``EventTransactionBuffer``).

Entries are collected and handed to ``flush_callback`` in batches that follow transaction
boundaries:

* ``TRANSACTIONBEGIN``: flush what is buffered first (the previous transaction), then buffer it;
* ``TRANSACTIONEND``: buffer it, then flush (the transaction is complete);
* ``ROWDATA``: buffer it; flush at once unless its Header eventType is INSERT/UPDATE/DELETE (DDL,
  queries, XA COMMIT/ROLLBACK go out on their own batch boundary);
* ``HEARTBEAT``: buffer it, then flush (the source is idle);
* buffer full (``size`` entries held): flush before buffering the next entry, so a transaction
  larger than the buffer reaches the sink in pieces;
* any other entry type (``GTIDLOG``) is dropped, as in Canal.

The buffer holds store records (``pycanal.store.Event``: an entry's bytes and its entry type,
event type and position, as the converter wrote them), so nothing is parsed back; an unset
``entryType`` counts as ROWDATA and an unset Header ``eventType`` as UPDATE (the defaults of
Canal's proto2 messages, ``Event.from_entry``).

``flush_callback(entries)`` must block until the sink has accepted the entries; returning
``False`` (or raising) means they were not accepted: ``flush`` raises and keeps them buffered.
After an accepted batch the buffer records the position of the last ``TRANSACTIONEND`` in it
(``last_position``) and passes it to ``position_callback``, which is where the position manager
persists it: everything up to that transaction end has reached the sink.

``deferred=True`` (the parser's mode) keeps the flushed batches, in order, until :meth:`commit`
(or until ``size`` entries are waiting) and hands them to the callback in one call: the store
then takes a burst of small transactions in one put, and the position persisted is the last
transaction end of all of them. What the sink receives, in which order and where the transaction
boundaries are, is the same; only the number of calls changes.

Differences from Canal: the batch's first entry is also searched for the transaction end (Canal's
loop stops at index 1, so a batch starting with the end of a split transaction persisted
nothing); the position also carries ``end_position`` (the end of the transaction's last event,
where a restart neither repeats nor skips anything) next to Canal's ``position`` (the start of
that event); ``size`` is validated when the buffer is created (power of 2, Canal checks on
``start()``). The buffer is not thread-safe: one producer (the parser's sink stage) uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.store.event import Event

__all__ = ["FlushRejectedError", "TransactionBuffer", "TransactionPosition"]

_DML = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})
_ROWDATA, _BEGIN, _END, _HEARTBEAT = pb.ROWDATA, pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND, pb.HEARTBEAT


@dataclass(frozen=True, slots=True)
class TransactionPosition:
    """Where the last complete transaction of a flushed batch ended (Canal's ``EntryPosition``).

    ``position`` is the start offset of the transaction's end event (what Canal persists) and
    ``end_position`` the offset right after it (``logfileOffset + eventLength``; for a
    transaction inside a TRANSACTION_PAYLOAD, the end of the payload). ``timestamp`` is the
    event's executeTime in milliseconds; ``gtid`` the Header's executed GTID set ("" unless in
    GTID mode).
    """

    journal_name: str
    position: int
    end_position: int
    timestamp: int
    server_id: int
    gtid: str = ""

    @classmethod
    def of(cls, record: Event) -> TransactionPosition:
        return cls(
            record.journal_name,
            record.position,
            record.position + record.event_length,
            record.execute_time,
            record.server_id,
            record.gtid,
        )


class FlushRejectedError(RuntimeError):
    """The flush callback did not accept the batch (it returned ``False``)."""


class TransactionBuffer:
    """Buffer entries and flush them by transaction (see the module notes).

    ``size`` (a power of 2, like Canal's ``canal.instance.transaction.size``, default 1024) is
    the most entries held before a forced flush.
    """

    def __init__(
        self,
        size: int = 1024,
        flush_callback: Callable[[list[Event]], Any] | None = None,
        position_callback: Callable[[TransactionPosition], Any] | None = None,
        *,
        deferred: bool = False,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"transaction buffer size must be an int, not {type(size).__name__}")
        if size <= 0 or size & (size - 1):
            raise ValueError(f"transaction buffer size must be a power of 2, not {size}")
        if flush_callback is None:
            raise ValueError("transaction buffer needs a flush callback")
        self.size = size
        self.flush_callback = flush_callback
        self.position_callback = position_callback
        self.last_position: TransactionPosition | None = None
        self.deferred = deferred
        self._entries: list[Event] = []
        self._ready: list[Event] = []  # flushed, not yet handed to the callback
        self._ready_end: Event | None = None  # the last TRANSACTIONEND among them

    def __len__(self) -> int:
        """Entries buffered and not yet handed to the callback."""
        return len(self._entries) + len(self._ready)

    def add(self, record: Event) -> None:
        kind = record.entry_type
        if kind == _ROWDATA:
            self._put(record)
            if record.event_type not in _DML:
                self.flush()
        elif kind == _BEGIN:
            self.flush()
            self._put(record)
        elif kind == _END or kind == _HEARTBEAT:
            self._put(record)
            self.flush()
        # Other entry types (GTIDLOG) are not passed on.

    def add_all(self, records: Iterable[Event]) -> None:
        for record in records:
            self.add(record)

    def flush(self) -> None:
        """End a batch here: hand it to the callback now, or, deferred, at :meth:`commit`."""
        batch = self._entries
        if batch:
            self._entries = []
            for record in reversed(batch):
                if record.entry_type == _END:
                    self._ready_end = record
                    break
            self._ready += batch
        if not self.deferred or len(self._ready) >= self.size:
            self.commit()

    def commit(self) -> None:
        """Hand every flushed batch to the callback, then persist the last transaction end."""
        if not self._ready:
            return
        if self.flush_callback(self._ready) is False:
            raise FlushRejectedError(f"the sink did not accept a batch of {len(self._ready)} entries")
        end, self._ready, self._ready_end = self._ready_end, [], None
        if end is not None:
            self.last_position = position = TransactionPosition.of(end)
            if self.position_callback is not None:
                self.position_callback(position)

    def reset(self) -> None:
        """Drop buffered entries (the parser restarts from the last persisted position)."""
        self._entries = []
        self._ready = []
        self._ready_end = None

    def _put(self, record: Event) -> None:
        if len(self._entries) >= self.size:
            self.flush()
        self._entries.append(record)
