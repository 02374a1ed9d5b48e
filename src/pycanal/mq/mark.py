"""How far a destination's transactional producer got (``canal.mq.transaction = true``): the mark
each Kafka transaction carries as a record header, read back after a restart so that the entries
the broker already committed are not sent again.

A store batch is acked after its transaction commits, and the server persists its acked cursor only
every ``canal.file.flush.period``: a kill -9 leaves committed entries that the restarted server
reads from the binlog again. A transaction's mark is the position of its batch's last entry;
after a (re)start, the entries up to the newest committed mark are dropped before the records are
built, so a ``read_committed`` consumer sees each entry once.

An entry's position is the source's server id, binlog file and offset, and its ordinal among the
entries of its binlog event: one event can give several (a MariaDB GTID event its GTIDLOG and
BEGIN entries, a MySQL 8 compressed transaction payload every entry of its transaction). Ordinals
count from where the worker started: a fresh store starts on an event boundary (a dump starts at an
event, never inside one), and a worker counts on across its own batches.

Nothing here does I/O: :class:`pycanal.mq.producer.TransactionalKafkaSender` writes and reads the
header, :mod:`pycanal.mq.starter` keeps a :class:`MarkTracker` per worker.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import binlog_file_order

from .flat import parse_entry

__all__ = ["MARK_HEADER", "BatchMark", "MarkTracker"]

MARK_HEADER = "pycanal.mark"
"""The header holding a :class:`BatchMark`: on the last record of each partition of a transaction."""

_Position = tuple[int, str, int]  # server id, binlog file, offset


def _position(entry: bytes | pb.Entry) -> _Position:
    h = parse_entry(entry).header
    return h.serverId, h.logfileName, h.logfileOffset


@dataclass(frozen=True, slots=True)
class BatchMark:
    """The position of a transaction's last entry (see the module docstring). ``seq`` numbers the
    transactions of ``producer`` (the transactional id): the newest of the marks found in several
    partitions is the one with the highest."""

    producer: str
    seq: int
    server_id: int
    journal: str
    offset: int
    ordinal: int

    def encode(self) -> bytes:
        return json.dumps(
            {
                "producer": self.producer,
                "seq": self.seq,
                "serverId": self.server_id,
                "journal": self.journal,
                "offset": self.offset,
                "ordinal": self.ordinal,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, value: bytes | str | None) -> BatchMark | None:
        """The mark a header value holds; None for anything else (another writer's header)."""
        try:
            d = json.loads(value or b"")
            return cls(
                str(d["producer"]),
                int(d["seq"]),
                int(d["serverId"]),
                str(d["journal"]),
                int(d["offset"]),
                int(d["ordinal"]),
            )
        except (TypeError, ValueError, KeyError):
            return None

    @property
    def position(self) -> _Position:
        return self.server_id, self.journal, self.offset

    def covers(self, position: _Position, ordinal: int) -> bool:
        """Is the entry at ``position`` (the ``ordinal``-th of its event) at or before this mark?
        Never for another source's entry: positions of two servers do not compare."""
        server_id, journal, offset = position
        if server_id != self.server_id:
            return False
        return (binlog_file_order(journal), offset, ordinal) <= (
            binlog_file_order(self.journal),
            self.offset,
            self.ordinal,
        )

    def __str__(self) -> str:
        return f"{self.journal}:{self.offset}#{self.ordinal} serverId={self.server_id} seq={self.seq}"


class MarkTracker:
    """One worker's marks. ``last`` is the mark of the last batch this worker acked (None: the next
    entry starts a binlog event); ``committed``, set by :meth:`resume`, the newest mark the broker
    held then, until the entries pass it; ``skipped`` counts the entries dropped since."""

    def __init__(self, producer: str) -> None:
        self.producer = producer
        self.last: BatchMark | None = None
        self.committed: BatchMark | None = None
        self.skipped = 0
        self._seq = 0

    def resume(self, committed: BatchMark | None) -> None:
        """Skip the entries up to ``committed`` (the broker's newest mark) from the next batch on."""
        self.committed = committed
        self.skipped = 0
        if committed is not None:
            self._seq = max(self._seq, committed.seq)

    def split(self, entries: Sequence[bytes | pb.Entry]) -> tuple[Sequence[bytes | pb.Entry], BatchMark]:
        """The entries of a (non-empty) batch the broker does not hold yet, and the batch's mark."""
        fresh = entries if self.committed is None else self._skip(entries)
        return fresh, self._mark(entries)

    def acked(self, mark: BatchMark) -> None:
        """The batch of ``mark`` was acked: the next batch follows it."""
        self.last = mark
        self._seq = max(self._seq, mark.seq)

    def save(self) -> tuple[BatchMark | None, int]:
        """The marks as they are, for :meth:`restore` after batches that were not acked after all."""
        return self.last, self._seq

    def restore(self, saved: tuple[BatchMark | None, int]) -> None:
        self.last, self._seq = saved

    def _skip(self, entries: Sequence[bytes | pb.Entry]) -> Sequence[bytes | pb.Entry]:
        committed = self.committed
        assert committed is not None
        position, ordinal = (self.last.position, self.last.ordinal) if self.last else (None, 0)
        for i, entry in enumerate(entries):
            at = _position(entry)
            ordinal = ordinal + 1 if at == position else 1
            position = at
            if not committed.covers(at, ordinal):
                self.committed = None  # past the mark: nothing further can be held
                return entries[i:]
            self.skipped += 1
        return entries[len(entries) :]

    def _mark(self, entries: Sequence[bytes | pb.Entry]) -> BatchMark:
        """The last entry's mark: its ordinal counts the entries of its event before it, back into
        the previous batch when this one holds nothing else."""
        at = _position(entries[-1])
        ordinal = 1
        for entry in reversed(entries[:-1]):
            if _position(entry) != at:
                break
            ordinal += 1
        else:
            if self.last is not None and self.last.position == at:
                ordinal += self.last.ordinal
        return BatchMark(self.producer, self._seq + 1, *at, ordinal)
