"""The store's record of one Canal entry (Canal's ``store.model.Event``).

An ``Event`` carries the entry -- as a protobuf ``Entry`` or, in raw mode, as its serialized bytes,
so the server can send them without re-serializing -- plus what the store needs without parsing it
again: the position (source identity, binlog file, offset, server id, execute time, GTID), the entry
type, the event type, whether it is a DDL, and its size for the MEMSIZE accounting.

Sizes are Canal's: the length of the serialized entry in raw mode; otherwise the header's
``eventLength`` times 6 (Canal's estimate of binlog-to-entry growth), or the entry's serialized
size when ``eventLength`` is not set.

``is_ddl`` follows Canal's ``MemoryEventStoreWithBuffer.isDdl``: a ROWDATA entry whose event type
is CREATE, ALTER, ERASE, RENAME, TRUNCATE, CINDEX or DINDEX -- by event type only, never by
``RowChange.isDdl`` (a QUERY entry is no ack point and no DDL batch of its own).
"""

from __future__ import annotations

from typing import Any

from ..protocol import EntryProtocol_pb2 as pb
from ..protocol.position import EntryPosition, LogIdentity, LogPosition

__all__ = ["DDL_EVENT_TYPES", "Event", "record"]

DDL_EVENT_TYPES = frozenset({pb.CREATE, pb.ALTER, pb.ERASE, pb.RENAME, pb.TRUNCATE, pb.CINDEX, pb.DINDEX})
_NO_IDENTITY = LogIdentity()


def _entry_type(entry: pb.Entry) -> int:
    return entry.entryType if entry.HasField("entryType") else pb.ROWDATA


def _event_type(header: pb.Header) -> int:
    return header.eventType if header.HasField("eventType") else pb.UPDATE


def _is_ddl(entry_type: int, event_type: int) -> bool:
    return entry_type == pb.ROWDATA and event_type in DDL_EVENT_TYPES


def _rows_count(header: pb.Header) -> int:
    for prop in header.props:
        if prop.key == "rowsCount":
            return int(prop.value) if prop.value.isdigit() else 0
    return 0


class Event:
    """One stored entry. Build it with ``from_entry`` / ``from_raw``, with :func:`record` (a
    converter's raw entry, positional and typed when compiled), or directly when the producer
    already knows the fields (``raw`` or ``entry`` must be given)."""

    __slots__ = (
        "identity",
        "journal_name",
        "position",
        "server_id",
        "execute_time",
        "gtid",
        "entry_type",
        "event_type",
        "is_ddl",
        "size",
        "rows",
        "event_length",
        "raw",
        "_entry",
    )

    def __init__(
        self,
        *,
        journal_name: str,
        position: int,
        execute_time: int,
        server_id: int = 0,
        gtid: str = "",
        entry_type: int = pb.ROWDATA,
        event_type: int = pb.UPDATE,
        is_ddl: bool = False,
        raw: bytes | None = None,
        entry: pb.Entry | None = None,
        size: int | None = None,
        identity: LogIdentity | None = None,
        rows: int = 0,
        event_length: int = 0,
    ) -> None:
        self.identity = identity if identity is not None else _NO_IDENTITY
        self.journal_name = journal_name
        self.position = position
        self.server_id = server_id
        self.execute_time = execute_time
        self.gtid = gtid
        self.entry_type = entry_type
        self.event_type = event_type
        self.is_ddl = is_ddl
        self.raw = raw
        self._entry = entry
        if size is None:
            if raw is not None:
                size = len(raw)
            elif entry is not None:
                size = entry.header.eventLength * 6 or entry.ByteSize()
            else:
                size = 0
        self.size = size
        self.rows = rows  # the ROWDATA entry's ``rowsCount`` (the store's row counters)
        self.event_length = event_length  # Header.eventLength: where the binlog event ends

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_entry(cls, entry: pb.Entry, identity: LogIdentity | None = None, *, raw: bool = True) -> Event:
        """An event for ``entry``; ``raw=True`` keeps only its serialized bytes (Canal's rawEntry)."""
        return cls._of(entry, entry.SerializeToString() if raw else None, identity)

    @classmethod
    def _of(cls, entry: pb.Entry, raw: bytes | None, identity: LogIdentity | None) -> Event:
        """An event for ``entry``, holding ``raw`` (its bytes) or, without, the entry itself."""
        h = entry.header
        entry_type = _entry_type(entry)
        event_type = _event_type(h)
        return cls(
            journal_name=h.logfileName,
            position=h.logfileOffset,
            execute_time=h.executeTime,
            server_id=h.serverId,
            gtid=h.gtid,
            entry_type=entry_type,
            event_type=event_type,
            is_ddl=_is_ddl(entry_type, event_type),
            raw=raw,
            entry=None if raw is not None else entry,
            identity=identity,
            rows=_rows_count(h) if entry_type == pb.ROWDATA else 0,
            event_length=h.eventLength,
        )

    @classmethod
    def from_raw(cls, data: bytes, identity: LogIdentity | None = None) -> Event:
        """A raw-mode event for serialized ``Entry`` bytes (parsed once for the header)."""
        return cls._of(pb.Entry.FromString(data), bytes(data), identity)

    # ------------------------------------------------------------------ access
    @property
    def entry(self) -> pb.Entry | None:
        """The protobuf entry (parsed from the raw bytes on demand, not cached)."""
        if self._entry is not None:
            return self._entry
        if self.raw is not None:
            return pb.Entry.FromString(self.raw)
        return None

    def raw_bytes(self) -> bytes | None:
        """The serialized entry (serialized on demand in non-raw mode)."""
        if self.raw is not None:
            return self.raw
        if self._entry is not None:
            return self._entry.SerializeToString()
        return None

    @property
    def has_payload(self) -> bool:
        return self.raw is not None or self._entry is not None

    def log_position(self, included: bool = False) -> LogPosition:
        """Canal's ``CanalEventUtils.createPosition(event, included)``."""
        return LogPosition(
            self.identity,
            EntryPosition(
                journal_name=self.journal_name,
                position=self.position,
                server_id=self.server_id,
                gtid=self.gtid,
                timestamp=self.execute_time,
                included=included,
            ),
        )

    def matches(self, position: LogPosition) -> bool:
        """Canal's ``CanalEventUtils.checkPosition``: same timestamp, and, unless the position has
        neither file nor offset, same offset and file."""
        p = position.postion
        if p.timestamp != self.execute_time:
            return False
        if not p.journal_name and p.position is None:
            return True
        return p.position == self.position and (p.journal_name or "") == (self.journal_name or "")

    def stub(self) -> Event:
        """A copy with the position data only (what the store keeps at its ack point)."""
        return Event(
            journal_name=self.journal_name,
            position=self.position,
            execute_time=self.execute_time,
            server_id=self.server_id,
            gtid=self.gtid,
            entry_type=self.entry_type,
            event_type=self.event_type,
            is_ddl=self.is_ddl,
            size=self.size,
            identity=self.identity,
            rows=self.rows,
            event_length=self.event_length,
        )

    def __repr__(self) -> str:
        kind: Any = (
            pb.EntryType.Name(self.entry_type)
            if self.entry_type in pb.EntryType.values()
            else self.entry_type
        )
        return (
            f"Event({self.journal_name}:{self.position} ts={self.execute_time} {kind}"
            f"{' DDL' if self.is_ddl else ''} size={self.size})"
        )


def record(
    raw: bytes, journal_name: str, position: int, event_length: int, execute_time: int, server_id: int,
    gtid: str, entry_type: int, event_type: int, rows: int = 0,
) -> Event:  # fmt: skip
    """A raw-mode event for the bytes a converter just wrote, with what it knows of them
    (``RawEntryConverter.records``): nothing parsed, no keyword call."""
    self = Event.__new__(Event)
    self.identity = _NO_IDENTITY
    self.journal_name = journal_name
    self.position = position
    self.server_id = server_id
    self.execute_time = execute_time
    self.gtid = gtid
    self.entry_type = entry_type
    self.event_type = event_type
    self.is_ddl = entry_type == pb.ROWDATA and event_type in DDL_EVENT_TYPES
    self.raw = raw
    self._entry = None
    self.size = len(raw)
    self.rows = rows
    self.event_length = event_length
    return self
