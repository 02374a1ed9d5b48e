"""The protobuf oracle of ``pycanal.parse.rawentry.RawEntryConverter``: the same entries built as
protobuf messages, one ``Column`` message per value, serialized by protobuf itself.

Production writes entry bytes by hand (``pycanal.protocol.wire``) with generated per-table code
(``pycanal.parse.rowcode``); the tests check those bytes against ``SerializeToString()`` of the
messages built here, byte for byte. Both sides share the vocabulary (column rules, statement
classification, GTID state); the encoding, the event dispatch and the row images are this
module's own::

    conv = EntryConverter(timezone="Asia/Shanghai")
    for event in read_events("mysql-bin.000001"):
        for entry in conv.convert(event):      # list[Entry]
            ...
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import TableIdNotFoundError
from pycanal.binlog.rows import MISSING
from pycanal.parse.columns import ColumnRules, EntryColumn
from pycanal.parse.gtidstate import GtidState
from pycanal.parse.queries import entry_text, query_entry, rows_query_table, variable_statement, xa_props
from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = ["EntryConverter", "image"]

_ABSENT = object()


class EntryConverter:
    """Decoded events -> Canal ``Entry`` messages; options as ``RawEntryConverter``'s."""

    def __init__(
        self,
        *,
        timezone: str | tzinfo | None = "UTC",
        enum_set: str = "index",
        gtid_set: Any = None,
        filter_query_dml: bool = False,
    ) -> None:
        self.rules = ColumnRules(timezone, enum_set)
        self.gtid = GtidState(gtid_set)
        self.filter_query_dml = filter_query_dml
        self._plan_key = ("entry_oracle", *self.rules.key)

    def convert(self, event: ev.Event) -> list[pb.Entry]:
        """The entries for one decoded event (possibly none)."""
        if isinstance(event, ev.RowsEvent):
            return [self._rows(event)]
        if isinstance(event, ev.QueryEvent):
            if isinstance(event, ev.ExecuteLoadQueryEvent):
                return []
            return [self._query(event)]
        if isinstance(event, ev.XidEvent):
            end = pb.TransactionEnd(transactionId=str(event.xid))
            return [self._entry(self._header(event), pb.TRANSACTIONEND, end)]
        if isinstance(event, ev.TransactionPayloadEvent):
            out: list[pb.Entry] = []
            for inner in event.events:
                for entry in self.convert(inner):
                    if entry.entryType != pb.HEARTBEAT:
                        entry.header.logfileOffset = event.pos
                        entry.header.eventLength = event.size
                    out.append(entry)
            return out
        if isinstance(event, ev.GtidEvent):
            return self._gtid(event)
        if isinstance(event, ev.GtidListEvent):
            self.gtid.track_list(event)
            return [self._gtid_entry(event, event.gtid_set)]
        if isinstance(event, ev.HeartbeatEvent):
            return [pb.Entry(header=pb.Header(eventType=pb.MHEARTBEAT), entryType=pb.HEARTBEAT)]
        if isinstance(event, ev.RowsQueryEvent):
            if self.filter_query_dml:
                return []
            table = rows_query_table(event.query) if event.type == E.ROWS_QUERY else ""
            return [self._query_entry(event, event.query, table)]
        if isinstance(event, (ev.UserVarEvent, ev.IntvarEvent, ev.RandEvent)):
            if self.filter_query_dml:
                return []
            return [self._query_entry(event, variable_statement(event), "")]
        return []

    # ------------------------------------------------------------------ pieces
    def _header(
        self,
        e: ev.Event,
        schema: str = "",
        table: str = "",
        event_type: int | None = None,
        rows_count: int = 0,
    ) -> pb.Header:
        h = pb.Header(
            version=1,
            logfileName=e.file,
            logfileOffset=e.pos,
            serverId=e.server_id,
            serverenCode="UTF-8",
            executeTime=e.timestamp * 1000,
            sourceType=pb.MYSQL,
            schemaName=schema,
            tableName=table,
            eventLength=e.size,
            gtid=self.gtid.text,
        )
        if event_type is not None:
            h.eventType = event_type
        for key, value in self.gtid.props:
            h.props.add(key=key, value=value)
        if rows_count > 0:
            h.props.add(key="rowsCount", value=str(rows_count))
        return h

    @staticmethod
    def _entry(header: pb.Header, entry_type: int, payload: Any = None) -> pb.Entry:
        entry = pb.Entry(header=header, entryType=entry_type)
        if payload is not None:
            entry.storeValue = payload.SerializeToString()
        return entry

    def _query(self, e: ev.QueryEvent) -> pb.Entry:
        sql = entry_text(e.query)
        q = query_entry(sql, e.schema or "")
        if q.entry_type == pb.TRANSACTIONBEGIN:
            begin = pb.TransactionBegin(threadId=e.thread_id)
            _add(begin.props, q.props)
            return self._entry(self._header(e), pb.TRANSACTIONBEGIN, begin)
        if q.entry_type == pb.TRANSACTIONEND:
            end = pb.TransactionEnd(transactionId="0")
            _add(end.props, q.props)
            return self._entry(self._header(e), pb.TRANSACTIONEND, end)
        change = pb.RowChange(eventType=q.event_type, sql=sql)
        if q.is_ddl is not None:
            change.isDdl = q.is_ddl
        if q.ddl_schema:
            change.ddlSchemaName = q.ddl_schema
        _add(change.props, q.props)
        return self._entry(self._header(e, q.schema, q.table, q.event_type), pb.ROWDATA, change)

    def _query_entry(self, e: ev.Event, sql: str, table: str) -> pb.Entry:
        change = pb.RowChange(eventType=pb.QUERY, sql=entry_text(sql))
        return self._entry(self._header(e, "", table, pb.QUERY), pb.ROWDATA, change)

    def _gtid_entry(self, e: ev.Event, gtid: str) -> pb.Entry:
        return self._entry(self._header(e, "", "", pb.GTID), pb.GTIDLOG, pb.Pair(key="gtid", value=gtid))

    def _gtid(self, e: ev.GtidEvent) -> list[pb.Entry]:
        if not self.gtid.track(e):
            return []
        info = e.info
        out = [self._gtid_entry(e, e.gtid)]
        if e.type == E.MARIADB_GTID and not info.standalone:
            # MariaDB writes no BEGIN query: the GTID event opens the transaction.
            begin = pb.TransactionBegin(threadId=info.thread_id or 0)
            if info.prepared_xa and info.xid is not None:
                x = info.xid
                _add(
                    begin.props, xa_props("XA START", f" X'{x.gtrid.hex()}',X'{x.bqual.hex()}',{x.format_id}")
                )
            out.append(self._entry(self._header(e), pb.TRANSACTIONBEGIN, begin))
        return out

    # ------------------------------------------------------------------ rows
    def _rows(self, e: ev.RowsEvent) -> pb.Entry:
        tm = e.table_map
        if tm is None:
            raise TableIdNotFoundError(e.table_id, e.file, e.pos)
        kind = e.kind
        event_type = pb.INSERT if kind == "INSERT" else pb.UPDATE if kind == "UPDATE" else pb.DELETE
        plan = tm.decoders.get(self._plan_key)
        if plan is None:
            plan = tm.decoders[self._plan_key] = self.rules.plan(tm)
        change = pb.RowChange(tableId=e.table_id, eventType=event_type, isDdl=False)
        rows = e.rows
        add_row = change.rowDatas.add
        if kind == "INSERT":
            for row in rows:
                image(add_row().afterColumns, plan, row, None)
        elif kind == "DELETE":
            for row in rows:
                image(add_row().beforeColumns, plan, row, False)
        else:
            for before, after in rows:
                row_data = add_row()
                image(row_data.afterColumns, plan, after, image(row_data.beforeColumns, plan, before, False))
        header = self._header(e, tm.schema, tm.table, event_type, len(rows))
        return self._entry(header, pb.ROWDATA, change)


def image(columns: Any, plan: list[EntryColumn], values: tuple, before: dict | bool | None) -> dict | None:
    """Append one row image's columns. ``before``: False for a before-image (never updated),
    None for an INSERT after-image (all updated), else the before-image's {index: text or None},
    which a before-image returns."""
    seen: dict[int, str | None] | None = {} if before is False else None
    for i, name, is_key, mysql_type, rule in plan:
        v = values[i]
        if v is MISSING:
            continue
        column = columns.add(index=i, name=name, isKey=is_key, mysqlType=mysql_type, isNull=v is None)
        if v is None:
            column.sqlType = rule.null_type
            text = None
            column.updated = before is None or (before is not False and before.get(i, _ABSENT) is not None)
        else:
            column.sqlType, text = rule.convert(v)
            column.value = text
            column.updated = before is None or (before is not False and before.get(i, _ABSENT) != text)
        if seen is not None:
            seen[i] = text
    return seen


def _add(props: Any, pairs: tuple[tuple[str, str], ...]) -> None:
    for key, value in pairs:
        props.add(key=key, value=value)
