"""Decoded binlog events. Every event keeps its header fields and where it was read from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .constants import EventType
from .tablemap import TableMap


@dataclass(slots=True)
class Event:
    """Common header: ``pos`` is the event's start offset, ``next_pos`` the header's log_pos."""

    type: int
    timestamp: int
    server_id: int
    size: int
    next_pos: int
    flags: int
    pos: int
    file: str

    @property
    def type_name(self) -> str:
        try:
            return EventType(self.type).name
        except ValueError:
            return f"UNKNOWN_{self.type}"


@dataclass(slots=True)
class FormatDescriptionEvent(Event):
    binlog_version: int = 4
    server_version: str = ""
    create_timestamp: int = 0
    header_length: int = 19
    post_header_lengths: bytes = b""
    checksum_alg: int | None = None  # None: the server predates checksums

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()


@dataclass(slots=True)
class QueryEvent(Event):
    thread_id: int = 0
    exec_time: int = 0
    error_code: int = 0
    schema: str = ""
    query: str = ""
    status: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class XidEvent(Event):
    xid: int = 0


@dataclass(slots=True)
class RotateEvent(Event):
    position: int = 4
    next_file: str = ""


@dataclass(slots=True)
class StopEvent(Event):
    pass


@dataclass(slots=True)
class IntvarEvent(Event):
    kind: int = 0  # 1 LAST_INSERT_ID, 2 INSERT_ID
    value: int = 0


@dataclass(slots=True)
class RandEvent(Event):
    seed1: int = 0
    seed2: int = 0


@dataclass(slots=True)
class UserVarEvent(Event):
    name: str = ""
    is_null: bool = True
    value_type: int = 0  # 0 STRING, 1 REAL, 2 INT, 3 ROW, 4 DECIMAL
    charset: int = 0
    value: Any = None
    var_flags: int = 0


@dataclass(slots=True)
class TableMapEvent(Event):
    table_map: TableMap | None = None

    @property
    def schema(self) -> str:
        return self.table_map.schema if self.table_map else ""

    @property
    def table(self) -> str:
        return self.table_map.table if self.table_map else ""


@dataclass(slots=True)
class RowsEvent(Event):
    """WRITE/UPDATE/DELETE (v0/v1/v2, MariaDB compressed) and PARTIAL_UPDATE rows.

    ``rows`` decodes on first access: WRITE/DELETE rows are value tuples in column order,
    UPDATE rows are ``(before, after)`` pairs; columns absent from a partial image are ``MISSING``.
    """

    kind: str = ""  # INSERT, UPDATE or DELETE
    table_id: int = 0
    rows_flags: int = 0
    table_map: TableMap | None = None
    extra: bytes = b""
    column_count: int = 0
    before_columns: list[int] | None = None
    after_columns: list[int] | None = None
    # The row images' bytes and the compiled decoder for them (its ``specs`` attribute lists the
    # ColumnSpecs it was built from), for consumers that encode straight from the bytes.
    row_data: bytes = field(default=b"", repr=False)
    row_decoder: Any = field(default=None, repr=False)
    _decode: Any = field(default=None, repr=False)  # its decoder's rows_of, called with the event
    _rows: list | None = field(default=None, repr=False)

    @property
    def rows(self) -> list:
        if self._rows is None:
            self._rows = self._decode(self)
            self._decode = None
        return self._rows

    @property
    def schema(self) -> str:
        return self.table_map.schema if self.table_map else ""

    @property
    def table(self) -> str:
        return self.table_map.table if self.table_map else ""

    @property
    def is_statement_end(self) -> bool:
        return bool(self.rows_flags & 1)


@dataclass(slots=True)
class RowsQueryEvent(Event):
    """MySQL ROWS_QUERY and MariaDB ANNOTATE_ROWS: the statement behind the following rows."""

    query: str = ""


@dataclass(slots=True)
class GtidEvent(Event):
    """MySQL GTID / ANONYMOUS_GTID / tagged GTID and MariaDB GTID; ``gtid`` is its text form."""

    gtid: str | None = None
    info: Any = None  # the gtid module's decoded body


@dataclass(slots=True)
class PreviousGtidsEvent(Event):
    gtid_set: str = ""
    info: Any = None


@dataclass(slots=True)
class GtidListEvent(Event):
    gtid_set: str = ""
    info: Any = None


@dataclass(slots=True)
class BinlogCheckpointEvent(Event):
    binlog_file: str = ""


@dataclass(slots=True)
class TransactionPayloadEvent(Event):
    compression: int = 0  # 0 ZSTD, 255 NONE
    payload_size: int = 0
    uncompressed_size: int = 0
    events: list[Event] = field(default_factory=list)


@dataclass(slots=True)
class HeartbeatEvent(Event):
    log_file: str = ""
    log_pos: int = 0


@dataclass(slots=True)
class XaPrepareEvent(Event):
    one_phase: bool = False
    format_id: int = 0
    gtrid: bytes = b""
    bqual: bytes = b""


@dataclass(slots=True)
class IncidentEvent(Event):
    incident: int = 0
    message: str = ""


@dataclass(slots=True)
class LoadDataEvent(Event):
    """BEGIN_LOAD_QUERY / APPEND_BLOCK / DELETE_FILE: a LOAD DATA file shipped in blocks."""

    file_id: int = 0
    data: bytes = b""


@dataclass(slots=True)
class ExecuteLoadQueryEvent(QueryEvent):
    file_id: int = 0
    fn_pos_start: int = 0
    fn_pos_end: int = 0
    dup_handling: int = 0


@dataclass(slots=True)
class OpaqueEvent(Event):
    """A known event that carries no row change and that pycanal keeps as bytes:
    TRANSACTION_CONTEXT, VIEW_CHANGE (group replication), START_V3, old LOAD forms, SLAVE,
    IGNORABLE and unknown events that the server flagged LOG_EVENT_IGNORABLE_F."""

    body: bytes = b""
