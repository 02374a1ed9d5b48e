"""Decoded binlog events -> the serialized bytes of their Canal ``Entry`` messages (Canal's
``LogEventConvert``), without protobuf objects.

Canal's server keeps each Entry's serialized bytes in its store ("raw mode"), so the bytes are
all a stream needs. ``RawEntryConverter`` writes them directly, for every event type::

    conv = RawEntryConverter(timezone="Asia/Shanghai")
    for event in read_events("mysql-bin.000001"):
        for raw in conv.convert(event):      # list[bytes]
            entry = Entry.FromString(raw)    # only if a message is wanted

``records(event)`` gives the same bytes as store records, with what the transaction buffer, the
sink and the store read (position, entry and event type, rows): known here, never parsed back.

The bytes are protobuf's serialization of the entries (:mod:`pycanal.protocol.wire`; the tests check
them byte for byte against a protobuf oracle). What each event becomes is ``docs/compatibility.md``
("Canal entries"): rows events through the per-table generated code of
:mod:`pycanal.parse.rowcode` (column rules: :mod:`pycanal.parse.columns`), statements as
:mod:`pycanal.parse.queries` says, the Header's GTID part from :mod:`pycanal.parse.gtidstate`.
The Header's table part is encoded once per table, its GTID part once per GTID event, its file
once per binlog file.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import TableIdNotFoundError
from pycanal.parse.columns import ColumnRules
from pycanal.parse.gtidstate import GtidState
from pycanal.parse.queries import entry_text, query_entry, rows_query_table, variable_statement, xa_props
from pycanal.parse.rowcode import EVENT_TYPES, TableCode
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.wire import encode_varint, field_bytes, field_int, field_string, pair
from pycanal.store.event import Event, record

__all__ = ["RawEntryConverter"]

_ENTRY_TYPES = {t: b"\x10" + encode_varint(t) for t in pb.EntryType.values()}  # Entry.entryType (2)
_EVENT_TYPE_FIELDS = {t: b"\x58" + encode_varint(t) for t in pb.EventType.values()}  # Header.eventType (11)
# Entry{header: {eventType: MHEARTBEAT}, entryType: HEARTBEAT}
_HEARTBEAT = b"\x0a\x02" + _EVENT_TYPE_FIELDS[pb.MHEARTBEAT] + _ENTRY_TYPES[pb.HEARTBEAT]
_VARIABLES = (ev.UserVarEvent, ev.IntvarEvent, ev.RandEvent)
# Read for every event: bound once here, as a module's attribute is looked up at each read (a
# fifth of the frame entries' time on 1-row transactions, perf).
_ROWS, _PAYLOAD, _XID, _QUERY, _GTID = (
    ev.RowsEvent,
    ev.TransactionPayloadEvent,
    ev.XidEvent,
    ev.QueryEvent,
    ev.GtidEvent,
)
_ROWS_QUERY_EVENT, _GTID_LIST, _HEARTBEAT_EVENT = ev.RowsQueryEvent, ev.GtidListEvent, ev.HeartbeatEvent
_ROWS_QUERY, _MARIADB_GTID = int(E.ROWS_QUERY), int(E.MARIADB_GTID)
_ROWDATA, _BEGIN, _END, _GTIDLOG = pb.ROWDATA, pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND, pb.GTIDLOG
_UPDATE, _QUERY_TYPE = pb.UPDATE, pb.QUERY


class RawEntryConverter:
    """Turns decoded binlog events into the bytes of Canal entries (see the module notes).

    ``timezone`` renders TIMESTAMP columns (name, tzinfo; UTC by default). ``enum_set`` is
    ``"index"`` (Canal: ENUM index, SET bitmask) or ``"label"``. ``gtid_set`` (a
    ``MysqlGtidSet``/``MariadbGtidSet``, copied) turns on GTID mode: Header ``gtid`` is the
    executed set and the ``curtGtid*`` props are set. ``filter_query_dml`` drops the QUERY entries
    of ROWS_QUERY/ANNOTATE_ROWS/USER_VAR/INTVAR/RAND events (Canal's
    ``canal.instance.filter.query.dml``). ``fused=False`` writes rows from their decoded values
    only (``rowcode``'s fused path reads the row bytes). ``rows_converted`` counts the rows
    written, ``fused_events`` the rows events the fused path wrote.
    """

    def __init__(
        self,
        *,
        timezone: str | tzinfo | None = "UTC",
        enum_set: str = "index",
        gtid_set: Any = None,
        filter_query_dml: bool = False,
        fused: bool = True,
    ) -> None:
        self.rules = ColumnRules(timezone, enum_set)
        self.gtid = GtidState(gtid_set)
        self.filter_query_dml = filter_query_dml
        self.fused = fused
        self.fused_events = 0
        self.rows_converted = 0
        self._code_key = ("pycanal.parse.rawentry", *self.rules.key)
        self._file: str | None = None
        self._file_head = b""
        self._gtid_props = b""  # Header props (12): curtGtid*
        self._gtid_field = field_string(0x6A, self.gtid.text)  # Header gtid (13)

    # ------------------------------------------------------------------ events
    def convert(self, event: ev.Event) -> list[bytes]:
        """The serialized entries of one decoded event (possibly none)."""
        return [r.raw for r in self.records(event)]  # type: ignore[misc]

    def records(self, event: ev.Event, gtidlog: bool = True) -> list[Event]:
        """The entries of one decoded event as store records (see the module notes).
        ``gtidlog=False`` leaves GTIDLOG entries out (the transaction buffer drops them) but keeps
        the GTID state."""
        t = type(event)
        if t is _ROWS:
            return [self._rows_record(event, event.pos, event.size)]  # type: ignore[arg-type]
        if t is _PAYLOAD:  # inner events carry the payload's position and length
            out: list[Event] = []
            for inner in event.events:  # type: ignore[attr-defined]
                out += self._records(inner, event.pos, event.size, gtidlog)
            return out
        return self._records(event, event.pos, event.size, gtidlog)

    def track_gtid(self, e: ev.GtidEvent) -> bool:
        """Take ``e`` into the GTID state the Headers carry; False for an anonymous GTID."""
        if not self.gtid.track(e):
            return False
        if self.gtid.gtid_set is not None:
            self._gtid_changed()
        return True

    def _gtid_changed(self) -> None:
        gtid = self.gtid
        self._gtid_props = b"".join(field_bytes(0x62, pair(k, v)) for k, v in gtid.props)
        self._gtid_field = field_string(0x6A, gtid.text)

    def _records(self, e: ev.Event, pos: int, size: int, gtidlog: bool) -> list[Event]:
        """``records`` for one event at ``pos``/``size`` (its own, or its TRANSACTION_PAYLOAD's)."""
        t = type(e)
        if t is _ROWS:
            return [self._rows_record(e, pos, size)]  # type: ignore[arg-type]
        if t is _XID:
            end = field_string(0x12, str(e.xid))  # type: ignore[attr-defined]  # transactionId (2)
            return [self._record(e, pos, size, _END, b"", None, end)]
        if t is _QUERY:
            if e.query == "BEGIN":  # type: ignore[attr-defined]
                begin = field_int(0x20, e.thread_id)  # type: ignore[attr-defined]  # threadId (4)
                return [self._record(e, pos, size, _BEGIN, b"", None, begin)]
            return [self._query(e, pos, size)]  # type: ignore[arg-type]
        if t is _GTID:
            return self._gtid(e, pos, size, gtidlog)  # type: ignore[arg-type]
        if t is _ROWS_QUERY_EVENT:
            if self.filter_query_dml:
                return []
            sql = e.query  # type: ignore[attr-defined]
            table = rows_query_table(sql) if e.type == _ROWS_QUERY else ""
            return [self._query_text(e, pos, size, sql, table)]
        if t in _VARIABLES:
            if self.filter_query_dml:
                return []
            return [self._query_text(e, pos, size, variable_statement(e), "")]
        if t is _GTID_LIST:
            self.gtid.track_list(e)  # type: ignore[arg-type]
            if self.gtid.gtid_set is not None:
                self._gtid_changed()
            if not gtidlog:
                return []
            gtid = pair("gtid", e.gtid_set)  # type: ignore[attr-defined]
            return [self._record(e, pos, size, _GTIDLOG, b"", pb.GTID, gtid)]
        if t is _HEARTBEAT_EVENT:
            return [record(_HEARTBEAT, "", 0, 0, 0, 0, "", pb.HEARTBEAT, pb.MHEARTBEAT)]
        return []

    # ------------------------------------------------------------------ statements and markers
    def _query(self, e: ev.QueryEvent, pos: int, size: int) -> Event:
        sql = entry_text(e.query)
        q = query_entry(sql, e.schema or "")
        props = b"".join(field_bytes(0x1A, pair(k, v)) for k, v in q.props)  # props (3)
        if q.entry_type == _BEGIN:  # props (3), threadId (4)
            return self._record(e, pos, size, _BEGIN, b"", None, props + field_int(0x20, e.thread_id))
        if q.entry_type == _END:  # transactionId (2), props (3)
            return self._record(e, pos, size, _END, b"", None, b"\x12\x010" + props)
        # RowChange: eventType (2), isDdl (10, if set), sql (11), props (13), ddlSchemaName (14)
        change = b"".join(
            (
                b"\x10" + encode_varint(q.event_type),
                b"" if q.is_ddl is None else b"\x50\x01" if q.is_ddl else b"\x50\x00",
                field_string(0x5A, sql),
                b"".join(field_bytes(0x6A, pair(k, v)) for k, v in q.props),
                field_string(0x72, q.ddl_schema),
            )
        )
        names = field_string(0x42, q.schema) + field_string(0x4A, q.table)  # schemaName (8), tableName (9)
        return self._record(e, pos, size, _ROWDATA, names, q.event_type, change)

    def _query_text(self, e: ev.Event, pos: int, size: int, sql: str, table: str) -> Event:
        """A QUERY entry of the statement behind rows (or a SET text): no schema, no isDdl."""
        change = b"\x10\x07" + field_string(0x5A, entry_text(sql))  # RowChange eventType (2) QUERY, sql (11)
        return self._record(e, pos, size, _ROWDATA, field_string(0x4A, table), _QUERY_TYPE, change)

    def _gtid(self, e: ev.GtidEvent, pos: int, size: int, gtidlog: bool) -> list[Event]:
        if not self.track_gtid(e):
            return []
        out = []
        if gtidlog:  # storeValue: Pair{gtid}
            out.append(self._record(e, pos, size, _GTIDLOG, b"", pb.GTID, pair("gtid", e.gtid)))
        info = e.info
        if e.type == _MARIADB_GTID and not info.standalone:
            # MariaDB writes no BEGIN query: the GTID event opens the transaction.
            begin = b""
            if info.prepared_xa and info.xid is not None:
                x = info.xid
                xid = f" X'{x.gtrid.hex()}',X'{x.bqual.hex()}',{x.format_id}"
                begin = b"".join([field_bytes(0x1A, pair(k, v)) for k, v in xa_props("XA START", xid)])
            begin += field_int(0x20, info.thread_id or 0)  # TransactionBegin props (3), threadId (4)
            out.append(self._record(e, pos, size, _BEGIN, b"", None, begin))
        return out

    def _record(
        self, e: ev.Event, pos: int, size: int, entry_type: int, names: bytes, event_type: int | None,
        value: bytes,
    ) -> Event:  # fmt: skip
        """A record whose Header has no rowsCount; ``names``: its schemaName and tableName fields,
        ``event_type``: its eventType (None: left out), ``value``: the storeValue."""
        field = _EVENT_TYPE_FIELDS[event_type] if event_type is not None else b""
        header = self._header(e, pos, size, names, field, b"")
        return record(_entry(header, entry_type, value), e.file, pos, size, e.timestamp * 1000,
                      e.server_id, self.gtid.text, entry_type,
                      _UPDATE if event_type is None else event_type)  # fmt: skip

    # ------------------------------------------------------------------ rows
    def _rows_record(self, e: ev.RowsEvent, pos: int, size: int) -> Event:
        tm = e.table_map
        if tm is None:
            raise TableIdNotFoundError(e.table_id, e.file, e.pos)
        code = tm.decoders.get(self._code_key)
        if code is None:
            code = tm.decoders[self._code_key] = TableCode(self.rules.plan(tm), tm)
        nrows, change, fused = code.change(e, self.fused)
        self.fused_events += fused
        self.rows_converted += nrows
        count = field_bytes(0x62, pair("rowsCount", str(nrows))) if nrows > 0 else b""  # Header props (12)
        header = self._header(e, pos, size, code.header_table, code.header_event_type[e.kind], count)
        event_type = EVENT_TYPES[e.kind]
        return record(_entry(header, _ROWDATA, change), e.file, pos, size, e.timestamp * 1000,
                      e.server_id, self.gtid.text, _ROWDATA, event_type, nrows)  # fmt: skip

    # ------------------------------------------------------------------ Header and Entry
    def _header(
        self, e: ev.Event, pos: int, size: int, names: bytes, event_type: bytes, count: bytes
    ) -> bytes:
        """The Header's bytes: ``names`` (schemaName, tableName), ``event_type`` (the eventType
        field) and ``count`` (the rowsCount prop) as given, the rest from the event and state."""
        if e.file != self._file:
            self._file = e.file
            self._file_head = b"\x08\x01" + field_string(0x12, e.file)  # version (1), logfileName (2)
        return b"".join(
            (
                self._file_head,
                field_int(0x18, pos),  # logfileOffset (3)
                _stamp(e.server_id, e.timestamp),  # serverId (4) .. sourceType (7)
                names,  # schemaName (8), tableName (9)
                field_int(0x50, size),  # eventLength (10)
                event_type,  # eventType (11)
                self._gtid_props,  # props (12): curtGtid*, then rowsCount
                count,
                self._gtid_field,  # gtid (13)
            )
        )


def _entry(header: bytes, entry_type: int, value: bytes) -> bytes:
    """Entry: header (1), entryType (2, a oneof member: always written), storeValue (3)."""
    return b"".join((b"\x0a", encode_varint(len(header)), header, _ENTRY_TYPES[entry_type],
                     field_bytes(0x1A, value) if value else b""))  # fmt: skip


_STAMPS: dict[tuple[int, int], bytes] = {}


def _stamp(server_id: int, timestamp: int) -> bytes:
    """Header fields serverId (4), serverenCode (5), executeTime (6) and sourceType (7) MYSQL: the
    same for every entry of a second of binlog time."""
    key = (server_id, timestamp)
    out = _STAMPS.get(key)
    if out is None:
        if len(_STAMPS) >= 64:
            _STAMPS.clear()
        out = _STAMPS[key] = b"".join(
            (field_int(0x20, server_id), b"\x2a\x05UTF-8", field_int(0x30, timestamp * 1000), b"\x38\x02")
        )
    return out
