"""Canal's event-kind and column filters (``canal.instance.filter.*`` beyond the table regexes).

:class:`EventFilters` drops whole events by kind, as Canal's ``LogEventConvert`` does:

* ``rows`` (``filter.rows``): every row change;
* ``insert`` / ``update`` / ``delete`` (``filter.dml.*``): row changes of that kind;
* ``query_dml`` (``filter.query.dml``): QUERY events holding DML (statement-based rows), the
  SQL text logged before rows events (ROWS_QUERY, MariaDB's ANNOTATE_ROWS) and the ``SET``
  entries of USER_VAR/INTVAR/RAND events (the only query filter those see, as in Canal);
* ``query_ddl`` (``filter.query.ddl``): DDL entries (the schema history still applies them,
  so later rows keep decoding with the right columns);
* ``query_dcl`` (``filter.query.dcl``): the remaining QUERY entries (GRANT, REVOKE, ...);
  XA COMMIT/ROLLBACK entries pass every query filter (Canal builds them before filtering);
* ``table_error`` (``filter.table.error``): a rows event whose TABLE_MAP is missing is dropped
  with a warning instead of stopping the parser (an explicit opt-in: counted in
  ``skipped_table_errors``, never silent).

Transaction begin/end entries are never dropped here: the position the parser persists comes from
them. ``filter.transaction.entry`` is applied in the sink (:class:`pycanal.sink.EntryEventSink`).

:class:`FieldFilter` keeps or drops columns per table (``filter.field`` /
``filter.black.field``), Canal's format ``schema.table:col1/col2,schema2.table2:col3``; names are
matched case-insensitively. A column is kept when the white list of its table is empty or names it,
and the black list does not name it; ``Column.index`` keeps the column's position in the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = ["EventFilters", "FieldFilter", "FieldFilterError"]

_DML = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})
_DDL = frozenset({pb.CREATE, pb.ALTER, pb.ERASE, pb.RENAME, pb.TRUNCATE, pb.CINDEX, pb.DINDEX})
_XA_OUTCOME = frozenset({pb.XACOMMIT, pb.XAROLLBACK})


@dataclass(frozen=True, slots=True)
class EventFilters:
    rows: bool = False
    insert: bool = False
    update: bool = False
    delete: bool = False
    query_dml: bool = False
    query_ddl: bool = False
    query_dcl: bool = False
    table_error: bool = False

    @classmethod
    def from_settings(cls, settings: Mapping[str, bool]) -> EventFilters:
        """From Canal's keys without the ``canal.instance.filter.`` prefix (``rows``,
        ``dml.insert``, ``query.ddl``, ``table.error``, ...)."""
        return cls(
            rows=bool(settings.get("rows")),
            insert=bool(settings.get("dml.insert")),
            update=bool(settings.get("dml.update")),
            delete=bool(settings.get("dml.delete")),
            query_dml=bool(settings.get("query.dml")),
            query_ddl=bool(settings.get("query.ddl")),
            query_dcl=bool(settings.get("query.dcl")),
            table_error=bool(settings.get("table.error")),
        )

    def drops_rows(self, kind: str) -> bool:
        """Whether a rows event of ``kind`` (INSERT, UPDATE, DELETE) is dropped."""
        if self.rows:
            return True
        return (
            (kind == "INSERT" and self.insert)
            or (kind == "UPDATE" and self.update)
            or (kind == "DELETE" and self.delete)
        )

    @property
    def drops_queries(self) -> bool:
        return self.query_dml or self.query_ddl or self.query_dcl

    def drops_query(self, event_type: int) -> bool:
        """Whether a ROWDATA entry built from a QUERY event (``event_type`` of its header) is
        dropped: as LogEventConvert.processFilter and parseQueryEvent, ``query.ddl`` drops every
        one, ``query.dml`` statement DML, ``query.dcl`` the QUERY type (database statements and
        statements on no table). XA COMMIT/ROLLBACK entries are never dropped: Canal builds them
        before it looks at any filter."""
        if event_type in _XA_OUTCOME:
            return False
        if self.query_ddl:
            return True
        if event_type in _DML:
            return self.query_dml
        return event_type not in _DDL and self.query_dcl


class FieldFilterError(ValueError):
    """A malformed ``filter.field`` / ``filter.black.field`` value."""


def _parse_fields(text: str, key: str) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        table, sep, cols = part.partition(":")
        table = table.strip()
        if not sep or "." not in table or not table.split(".", 1)[1]:
            raise FieldFilterError(f"{key}: {part!r} is not schema.table:col1/col2")
        names = frozenset(c.strip().lower() for c in cols.split("/") if c.strip())
        if not names:
            raise FieldFilterError(f"{key}: {part!r} names no column")
        out[table.lower()] = out.get(table.lower(), frozenset()) | names
    return out


class FieldFilter:
    """Column white/black lists per ``schema.table`` (see the module notes)."""

    def __init__(self, white: str = "", black: str = "") -> None:
        self.white = _parse_fields(white or "", "canal.instance.filter.field")
        self.black = _parse_fields(black or "", "canal.instance.filter.black.field")

    def __bool__(self) -> bool:
        return bool(self.white or self.black)

    def applies(self, schema: str, table: str) -> bool:
        name = f"{schema}.{table}".lower()
        return name in self.white or name in self.black

    def filter_entry(self, entry: pb.Entry) -> pb.Entry:
        """``entry`` with the row images of its ROWDATA reduced to the kept columns."""
        name = f"{entry.header.schemaName}.{entry.header.tableName}".lower()
        white, black = self.white.get(name), self.black.get(name)
        if white is None and black is None:
            return entry
        change = pb.RowChange.FromString(entry.storeValue)

        def keep(column: pb.Column) -> bool:
            n = column.name.lower()
            return (white is None or n in white) and (black is None or n not in black)

        for row in change.rowDatas:
            for image in (row.beforeColumns, row.afterColumns):
                kept = [c for c in image if keep(c)]
                if len(kept) != len(image):
                    del image[:]
                    image.extend(kept)
        entry.storeValue = change.SerializeToString()
        return entry
