"""``LogEventConvert``: a decoded binlog event through the filters into store records.

Canal's ``LogEventConvert`` in one place, so the parser runs the same code whether it converts
inline or in its second process (:mod:`pycanal.parse.worker`): the table filter on rows events
(answers cached per table), the event-kind filters (``canal.instance.filter.*``), the conversion
(``RawEntryConverter.records``: entry bytes with what the buffer and the store read), then the
filters that read an entry's Header (DDL by table, the query filters, the field filter).

Events that make no entry (TABLE_MAP, ROTATE, FORMAT_DESCRIPTION) give none; the schema history
is not touched here (the parser applies DDL in order, where the source connection is).
"""

from __future__ import annotations

from collections.abc import Callable

from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import TableIdNotFoundError
from pycanal.parse.ddl import parse_ddl
from pycanal.parse.eventfilter import EventFilters, FieldFilter
from pycanal.parse.filter import TableFilter
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.store.event import Event

__all__ = ["LogEventConvert"]

_DML = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})
_NO_ENTRY = (ev.TableMapEvent, ev.RotateEvent, ev.FormatDescriptionEvent)
# Canal's LogEventConvert drops the entries of these events under filter.query.dml only.
_DML_TEXT = (ev.RowsQueryEvent, ev.UserVarEvent, ev.IntvarEvent, ev.RandEvent)
# Read for every event: bound once here (a module's attribute is looked up at each read).
_ROWS, _ROWS_QUERY, _PAYLOAD = ev.RowsEvent, ev.RowsQueryEvent, ev.TransactionPayloadEvent
_ANNOTATE_ROWS, _ROWDATA = int(E.MARIADB_ANNOTATE_ROWS), pb.ROWDATA


class LogEventConvert:
    """Filters and converts one destination's events (see the module notes).

    ``warn(message)`` reports a rows event dropped under ``filter.table.error`` (counted in
    ``skipped_table_errors``); without that filter such an event raises ``TableIdNotFoundError``.
    """

    def __init__(
        self,
        converter: RawEntryConverter,
        table_filter: TableFilter,
        event_filters: EventFilters,
        field_filter: FieldFilter | None,
        warn: Callable[[str], object],
    ) -> None:
        self.converter = converter
        self.table_filter = table_filter
        self.filters = event_filters
        self.fields = field_filter or None
        self.warn = warn
        self.skipped_table_errors = 0
        self._verdicts: dict[tuple[str, str], bool] = {}
        self._verdicts_of = (table_filter.white, table_filter.black)  # a subscription replaces them
        # MariaDB's SQL behind rows events goes through unfiltered when nothing reads its Header.
        self._annotations_pass = not self.fields and not event_filters.drops_queries

    def records(self, event: ev.Event) -> list[Event]:
        """The store records of one event, filtered (possibly none)."""
        t = type(event)
        if t is _ROWS:
            if not self._keep_rows(event):  # type: ignore[arg-type]
                return []
        elif t is _ROWS_QUERY and self._annotations_pass and event.type == _ANNOTATE_ROWS:
            return self.converter.records(event)
        elif t in _NO_ENTRY:
            return []
        elif t is _PAYLOAD:
            event.events = [e for e in event.events if not isinstance(e, ev.RowsEvent) or self._keep_rows(e)]  # type: ignore[attr-defined]
        rows_event = t is _ROWS or t is _PAYLOAD
        out = self.converter.records(event, gtidlog=False)
        if self.fields or not rows_event:
            kept = []
            for record in out:
                if record.entry_type == _ROWDATA:
                    record = self._filtered(record, event, rows_event)  # type: ignore[assignment]
                    if record is None:
                        continue
                kept.append(record)
            return kept
        return out

    def _keep_rows(self, e: ev.RowsEvent) -> bool:
        tm = e.table_map
        if tm is None:
            if not self.filters.table_error:
                raise TableIdNotFoundError(e.table_id, e.file, e.pos)
            self.skipped_table_errors += 1
            self.warn(
                f"rows event at {e.file}:{e.pos} has no TABLE_MAP (table id {e.table_id}): dropped (filter.table.error)"
            )
            return False
        name = (tm.schema, tm.table)
        f = self.table_filter
        if f.white is not self._verdicts_of[0] or f.black is not self._verdicts_of[1]:
            self._verdicts.clear()
            self._verdicts_of = (f.white, f.black)
        accepted = self._verdicts.get(name)
        if accepted is None:
            accepted = self._verdicts[name] = self.table_filter.accepts(*name)
        return accepted and not self.filters.drops_rows(e.kind)

    def _ddl_passes(self, event: ev.Event) -> bool:
        """Canal keeps a DDL when any table it names passes the filter (``DROP TABLE a, b``, a
        RENAME's old name), while the Header names only the first: classify the statement again."""
        if not isinstance(event, ev.QueryEvent):
            return False
        try:
            results = parse_ddl(event.query, event.schema or None)
        except Exception:  # noqa: BLE001 - the entry was classified once already; keep the first answer
            return False
        tabled = [r for r in results if r.table]
        return bool(tabled) and self.table_filter.accepts_ddl(tabled)

    def _filtered(self, record: Event, event: ev.Event, rows_event: bool) -> Event | None:
        """A ROWDATA record through the filters that read its Header: the table filter and the
        query filters for entries from QUERY events, the field filter; None when dropped."""
        filters, fields = self.filters, self.fields
        entry = pb.Entry.FromString(record.raw)  # type: ignore[arg-type]
        header = entry.header
        if not rows_event:
            # A QUERY entry: DDL is filtered by its tables (rows events were filtered before).
            if header.eventType not in _DML and header.tableName:
                if not self.table_filter.accepts(
                    header.schemaName, header.tableName
                ) and not self._ddl_passes(event):
                    return None
            if filters.drops_queries:
                if isinstance(event, _DML_TEXT):  # the SQL behind rows, SET statements: DML only
                    if filters.query_dml:
                        return None
                elif filters.drops_query(header.eventType):
                    return None
        if fields and fields.applies(header.schemaName, header.tableName):
            return Event.from_entry(fields.filter_entry(entry))
        return record
