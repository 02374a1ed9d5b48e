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

An unset ``entryType`` counts as ROWDATA and an unset Header ``eventType`` as UPDATE (the
defaults of Canal's proto2 messages).

``flush_callback(entries)`` must block until the sink has accepted the entries; returning
``False`` (or raising) means they were not accepted: ``flush`` raises and keeps them buffered.
After an accepted batch the buffer records the position of the last ``TRANSACTIONEND`` in it
(``last_position``) and passes it to ``position_callback``, which is where the position manager
persists it: everything up to that transaction end has reached the sink.

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

__all__ = ["FlushRejectedError", "TransactionBuffer", "TransactionPosition"]

_DML = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})


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
    def of(cls, entry: pb.Entry) -> TransactionPosition:
        h = entry.header
        return cls(
            h.logfileName,
            h.logfileOffset,
            h.logfileOffset + h.eventLength,
            h.executeTime,
            h.serverId,
            h.gtid,
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
        flush_callback: Callable[[list[pb.Entry]], Any] | None = None,
        position_callback: Callable[[TransactionPosition], Any] | None = None,
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
        self._entries: list[pb.Entry] = []

    def __len__(self) -> int:
        """Entries buffered and not yet flushed."""
        return len(self._entries)

    def add(self, entry: pb.Entry) -> None:
        kind = entry.entryType if entry.HasField("entryType") else pb.ROWDATA
        if kind == pb.TRANSACTIONBEGIN:
            self.flush()
            self._put(entry)
        elif kind == pb.TRANSACTIONEND:
            self._put(entry)
            self.flush()
        elif kind == pb.ROWDATA:
            self._put(entry)
            header = entry.header
            event_type = header.eventType if header.HasField("eventType") else pb.UPDATE
            if event_type not in _DML:
                self.flush()
        elif kind == pb.HEARTBEAT:
            self._put(entry)
            self.flush()
        # Other entry types (GTIDLOG) are not passed on.

    def add_all(self, entries: Iterable[pb.Entry]) -> None:
        for entry in entries:
            self.add(entry)

    def flush(self) -> None:
        """Hand everything buffered to the callback (no-op when empty)."""
        if not self._entries:
            return
        batch = self._entries
        if self.flush_callback(batch) is False:
            raise FlushRejectedError(f"the sink did not accept a batch of {len(batch)} entries")
        self._entries = []
        for entry in reversed(batch):
            if entry.HasField("entryType") and entry.entryType == pb.TRANSACTIONEND:
                self.last_position = position = TransactionPosition.of(entry)
                if self.position_callback is not None:
                    self.position_callback(position)
                break

    def reset(self) -> None:
        """Drop buffered entries (the parser restarts from the last persisted position)."""
        self._entries = []

    def _put(self, entry: pb.Entry) -> None:
        if len(self._entries) >= self.size:
            self.flush()
        self._entries.append(entry)
