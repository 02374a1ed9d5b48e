"""The change row shared by every Spark source: one row per row change or DDL statement.

Columns (``ROW_SCHEMA``, in this order):

* ``op``: INSERT, UPDATE, DELETE or DDL;
* ``database``, ``table``: the changed table (DDL: each table the statement touches, one row
  each; ``table`` is null for database statements);
* ``pk``: the primary key values as a JSON object (``{"id":5}``) taken from the after image
  (before image for DELETE), null when the table has no primary key;
* ``before``, ``after``: the row images as JSON objects keyed by column name, values in the
  canonical form of :mod:`pycanal.binlog.canonical` (DECIMAL as an exact string, binary as
  ``{"base64": ...}``, temporal values as the server's text, TIMESTAMP in UTC, SET as a list);
  a column a partial row image does not carry is left out;
* ``position``: ``file``, ``offset`` (of the event), ``row`` (index among the rows at that
  offset) and ``gtid`` (of the transaction, or null); ``(file, offset, row)`` orders all rows;
* ``ts``: the event time (second precision, UTC);
* ``sql``, ``sql_database``: for DDL, the statement and the session's database it ran in
  (needed to resolve unqualified names).

Two builders give identical rows: :class:`EventRows` from decoded binlog events (the
``binlog`` batch source) and :class:`EntryRows` from Canal ``Entry`` messages (a Canal or
pycanal server). docs/spark.md lists the values where the two cannot agree.
"""

from __future__ import annotations

import base64
import calendar
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import lru_cache
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pyarrow as pa

from pycanal.binlog import events as ev
from pycanal.binlog.canonical import is_ddl, json_value
from pycanal.binlog.rows import MISSING
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.ddl import parse_ddl
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta.types import parse_labels
from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = [
    "ARROW_SCHEMA",
    "ROW_SCHEMA",
    "ChangeRow",
    "EntryRows",
    "EventRows",
    "RowPosition",
    "RowsError",
    "to_record_batch",
]

ROW_SCHEMA = (
    "op STRING, database STRING, `table` STRING, pk STRING, before STRING, after STRING, "
    "position STRUCT<file: STRING, offset: BIGINT, row: INT, gtid: STRING>, ts TIMESTAMP, "
    "sql STRING, sql_database STRING"
)
POSITION_TYPE = pa.struct(
    [("file", pa.string()), ("offset", pa.int64()), ("row", pa.int32()), ("gtid", pa.string())]
)
ARROW_SCHEMA = pa.schema(
    [
        ("op", pa.string()),
        ("database", pa.string()),
        ("table", pa.string()),
        ("pk", pa.string()),
        ("before", pa.string()),
        ("after", pa.string()),
        ("position", POSITION_TYPE),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("sql", pa.string()),
        ("sql_database", pa.string()),
    ]
)


class RowPosition(NamedTuple):
    file: str
    offset: int
    row: int
    gtid: str | None


class ChangeRow(NamedTuple):
    op: str
    database: str | None
    table: str | None
    pk: str | None
    before: str | None
    after: str | None
    position: RowPosition
    ts: datetime
    sql: str | None
    sql_database: str | None


class RowsError(ValueError):
    """Input the change rows cannot be built from, with where it was found."""


def to_record_batch(rows: list[ChangeRow]) -> pa.RecordBatch:
    """Rows as one Arrow record batch of ``ARROW_SCHEMA`` (what the Spark sources yield)."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * 10
    pos = list(zip(*cols[6], strict=True)) if rows else [()] * 4
    position = pa.StructArray.from_arrays(
        [
            pa.array(pos[0], pa.string()),
            pa.array(pos[1], pa.int64()),
            pa.array(pos[2], pa.int32()),
            pa.array(pos[3], pa.string()),
        ],
        fields=list(POSITION_TYPE),
    )
    arrays = [pa.array(c, pa.string()) for c in cols[:6]]
    arrays += [position, pa.array(cols[7], pa.timestamp("us", tz="UTC"))]
    arrays += [pa.array(c, pa.string()) for c in cols[8:]]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class _Clock:
    """Event seconds -> UTC datetimes, cached (rows of one second share one object)."""

    def __init__(self) -> None:
        self._cache: dict[int, datetime] = {}

    def __call__(self, seconds: int) -> datetime:
        t = self._cache.get(seconds)
        if t is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            t = self._cache[seconds] = datetime.fromtimestamp(seconds, UTC)
        return t


class _Builder:
    """What both row builders share: row numbering per position, the GTID, the filter, DDL rows."""

    def __init__(self, accepts: TableFilter | None, gtid: str | None, resume: tuple[str, int, int] | None):
        self.accepts = accepts
        self.gtid = gtid
        self._at: tuple[str, int] = (resume[0], resume[1]) if resume else ("", -1)
        self._next = resume[2] if resume else 0
        self.clock = _Clock()

    @property
    def resume(self) -> tuple[str, int, int]:
        """(file, offset, next row index): pass it back to continue numbering mid-event."""
        return self._at[0], self._at[1], self._next

    def position(self, file: str, offset: int) -> RowPosition:
        if (file, offset) != self._at:
            self._at = (file, offset)
            self._next = 0
        row = self._next
        self._next += 1
        return RowPosition(file, offset, row, self.gtid)

    def wanted(self, schema: str | None, table: str | None) -> bool:
        return self.accepts is None or self.accepts.accepts(schema, table)

    def ddl_rows(
        self, sql: str, session_db: str | None, sql_mode: int, file: str, offset: int, ts: int
    ) -> Iterator[ChangeRow]:
        """One DDL row per table (or database) the statement touches, if the filter takes it."""
        results = parse_ddl(sql, session_db, sql_mode)
        if self.accepts is not None and not self.accepts.accepts_ddl(results):
            return
        names: list[tuple[str | None, str | None]] = []
        for r in results:
            # A RENAME names both sides; a database statement has no table.
            for name in ([(r.ori_schema, r.ori_table)] if r.ori_table else []) + [(r.schema, r.table)]:
                if name not in names:
                    names.append(name)
        when = self.clock(ts)
        for schema, table in names:
            yield ChangeRow("DDL", schema, table, None, None, None, self.position(file, offset), when, sql,
                            session_db)  # fmt: skip


# ------------------------------------------------------------------------------ events
class _TablePlan(NamedTuple):
    names: tuple[str, ...]  # '"name":' for each column
    keys: tuple[int, ...]  # primary key column indexes, in column order


_PLAN_KEY = "pycanal.spark.rows"


def _table_plan(tm: TableMap, file: str, offset: int) -> _TablePlan:
    plan = tm.decoders.get(_PLAN_KEY)
    if plan is None:
        if tm.names is None:
            raise RowsError(
                f"rows of {tm.schema}.{tm.table} at {file}:{offset}: the binlog has no column names "
                "(binlog_row_metadata is not FULL); give the table schema (a schema history or CREATE "
                "TABLE statements)"
            )
        names = tuple(_jstr(n) + ":" for n in tm.names)
        keys = tuple(sorted(i for i, _ in tm.primary_key or ()))
        plan = tm.decoders[_PLAN_KEY] = _TablePlan(names, keys)
    return plan


def _value(v: Any) -> str:
    """``canonical.json_value`` with its commonest cases first (the row builders' hot path)."""
    t = type(v)
    if t is str:
        return _jstr(v)
    if t is int:
        return str(v)
    if v is None:
        return "null"
    return json_value(v)


def _image(names: tuple[str, ...], values: tuple) -> str:
    return (
        "{" + ",".join([n + _value(v) for n, v in zip(names, values, strict=True) if v is not MISSING]) + "}"
    )


def _key(plan: _TablePlan, image: tuple, fallback: tuple | None) -> str | None:
    if not plan.keys:
        return None
    parts = []
    for i in plan.keys:
        v = image[i]
        if v is MISSING and fallback is not None:
            v = fallback[i]  # a MINIMAL after image leaves out an unchanged key
        parts.append(plan.names[i] + _value(v))
    return "{" + ",".join(parts) + "}"


class EventRows:
    """Change rows from decoded binlog events (``read_events``), in binlog order.

    ``accepts``: the tables to keep (DDL: Canal's statement filter, ``TableFilter.accepts_ddl``).
    ``gtid``: the GTID of the transaction the events start inside (a file part that starts
    mid-transaction). Column names and the primary key come from the TABLE_MAP (FULL metadata)
    or the schema history the decoder was given; a table with neither is an error.
    """

    def __init__(self, *, accepts: TableFilter | None = None, gtid: str | None = None) -> None:
        self._b = _Builder(accepts, gtid, None)

    def rows(self, events: Iterable[ev.Event]) -> Iterator[ChangeRow]:
        b = self._b
        for e in events:
            if isinstance(e, ev.RowsEvent):
                yield from self._rows(e)
            elif isinstance(e, ev.GtidEvent):
                b.gtid = e.gtid
            elif isinstance(e, ev.XidEvent | ev.XaPrepareEvent):
                b.gtid = None
            elif isinstance(e, ev.TransactionPayloadEvent):
                for inner in e.events:
                    if isinstance(inner, ev.RowsEvent):
                        yield from self._rows(inner, e.pos)
                b.gtid = None
            elif isinstance(e, ev.QueryEvent) and not isinstance(e, ev.ExecuteLoadQueryEvent):
                sql = e.query
                if is_ddl(sql):
                    mode = e.status.get("sql_mode", 0)
                    yield from b.ddl_rows(sql, e.schema or None, mode, e.file, e.pos, e.timestamp)
                    b.gtid = None
                elif sql.lstrip()[:6].upper() == "COMMIT":
                    b.gtid = None

    def _rows(self, e: ev.RowsEvent, offset: int | None = None) -> Iterator[ChangeRow]:
        b = self._b
        tm = e.table_map
        if tm is None:
            return  # a rows event with no rows (the decoder raises for one whose table is unknown)
        if not b.wanted(tm.schema, tm.table):
            return
        at = e.pos if offset is None else offset
        plan = _table_plan(tm, e.file, at)
        when = b.clock(e.timestamp)
        kind = e.kind
        schema, table, file = tm.schema, tm.table, e.file
        for r in e.rows:
            if kind == "INSERT":
                row = ChangeRow(kind, schema, table, _key(plan, r, None), None, _image(plan.names, r),
                                b.position(file, at), when, None, None)  # fmt: skip
            elif kind == "UPDATE":
                before, after = r
                row = ChangeRow(kind, schema, table, _key(plan, after, before), _image(plan.names, before),
                                _image(plan.names, after), b.position(file, at), when, None, None)  # fmt: skip
            else:
                row = ChangeRow(kind, schema, table, _key(plan, r, None), _image(plan.names, r), None,
                                b.position(file, at), when, None, None)  # fmt: skip
            yield row


# ------------------------------------------------------------------------------ entries
# java.sql.Types of values Canal ships as ISO-8859-1 text of the bytes.
_BINARY_SQL_TYPES = frozenset({-2, -3, -4, 2004})
_SQL_INTEGER, _SQL_BIT = 4, -7
_INT_NAMES = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bit", "bool", "boolean"}
)
_TEXT_TEMPORAL = frozenset({"date", "datetime", "time"})
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary",
                         "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point", "linestring",
                         "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
                         "vector", "inet4", "inet6", "uuid"})  # fmt: skip

# value converter: (sqlType, text) -> canonical JSON
_Conv = Callable[[int, str], str]


def _text_or_bytes(sql_type: int, text: str) -> str:
    if sql_type in _BINARY_SQL_TYPES:
        return '{"base64": "' + base64.b64encode(text.encode("latin-1")).decode("ascii") + '"}'
    return _jstr(text)


def _enum_conv(labels: list[str] | None) -> _Conv:
    def conv(sql_type: int, text: str) -> str:
        if sql_type == _SQL_INTEGER:
            index = int(text)
            if labels is None:
                return str(index)
            return _jstr(("", *labels)[index])
        return _jstr(text)

    return conv


def _set_conv(labels: list[str] | None) -> _Conv:
    def conv(sql_type: int, text: str) -> str:
        if sql_type == _SQL_BIT:
            mask = int(text)
            if labels is None:
                return str(mask)
            if mask >> len(labels):
                raise ValueError(f"SET value {mask} has bits beyond its {len(labels)} labels")
            return json.dumps([m for bit, m in enumerate(labels) if mask >> bit & 1], ensure_ascii=False)
        return json.dumps(text.split(",") if text else [], ensure_ascii=False)

    return conv


def _timestamp_conv(zone: tzinfo | None) -> _Conv:
    if zone is None:
        return lambda sql_type, text: _jstr(text)

    @lru_cache(maxsize=4096)
    def to_utc(local: str) -> str:
        if local.startswith("0000-00-00"):
            return local
        naive = datetime.strptime(local, "%Y-%m-%d %H:%M:%S")
        t = calendar.timegm(naive.replace(tzinfo=zone).utctimetuple())
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")

    return lambda sql_type, text: _jstr(to_utc(text[:19]) + text[19:])


def _column_conv(mysql_type: str, zone: tzinfo | None) -> _Conv:
    """The converter of one Canal ``mysqlType`` (``int(11) unsigned``, ``enum('a','b')``, ...)."""
    low = mysql_type.strip().lower()
    base = low.split("(", 1)[0].split(None, 1)[0] if low else ""
    if base in _INT_NAMES:
        return lambda sql_type, text: str(int(text))
    if base == "year":
        return lambda sql_type, text: str(int(text))
    if base in ("decimal", "numeric", "dec", "fixed"):
        return lambda sql_type, text: f'"{Decimal(text):f}"'
    if base in ("float", "double", "real"):
        return lambda sql_type, text: repr(float(text))
    if base in _TEXT_TEMPORAL:
        return lambda sql_type, text: _jstr(text)
    if base == "timestamp":
        return _timestamp_conv(zone)
    if base == "enum":
        return _enum_conv(parse_labels(mysql_type) if "(" in low else None)
    if base == "set":
        return _set_conv(parse_labels(mysql_type) if "(" in low else None)
    if base == "json":
        return lambda sql_type, text: text
    if base in _TEXT_TYPES:
        return _text_or_bytes
    raise ValueError(f"unknown mysqlType {mysql_type!r}")


def _zone(timezone: str | tzinfo | None) -> tzinfo | None:
    if timezone is None or (isinstance(timezone, str) and timezone.upper() in ("UTC", "Z", "+00:00")):
        return None
    return ZoneInfo(timezone) if isinstance(timezone, str) else timezone


class EntryRows:
    """Change rows from Canal ``Entry`` messages (objects or serialized bytes), in stream order.

    ``timezone`` is the server's TIMESTAMP rendering zone (pycanal's ``timezone``, the JVM zone of
    a Java Canal server) so TIMESTAMP values are brought back to UTC. ``gtid`` and ``resume``
    continue a previous instance's state (a stream batch that starts inside a transaction or a
    TRANSACTION_PAYLOAD event): take them from ``.gtid`` and ``.resume`` of that instance.
    """

    def __init__(
        self,
        *,
        accepts: TableFilter | None = None,
        timezone: str | tzinfo | None = "UTC",
        gtid: str | None = None,
        resume: tuple[str, int, int] | None = None,
    ) -> None:
        self._b = _Builder(accepts, gtid, resume)
        self._zone = _zone(timezone)
        self._convs: dict[str, _Conv] = {}

    @property
    def gtid(self) -> str | None:
        return self._b.gtid

    @property
    def resume(self) -> tuple[str, int, int]:
        return self._b.resume

    def rows(self, entries: Iterable[pb.Entry | bytes]) -> Iterator[ChangeRow]:
        b = self._b
        for entry in entries:
            if isinstance(entry, bytes | bytearray | memoryview):
                entry = pb.Entry.FromString(bytes(entry))
            kind = entry.entryType
            if kind == pb.GTIDLOG:
                b.gtid = pb.Pair.FromString(entry.storeValue).value or None
            elif kind == pb.TRANSACTIONEND:
                b.gtid = None
            elif kind == pb.ROWDATA:
                h = entry.header
                for prop in h.props:
                    if prop.key == "curtGtid":
                        b.gtid = prop.value or None
                change = pb.RowChange.FromString(entry.storeValue)
                et = change.eventType
                if et in (pb.INSERT, pb.UPDATE, pb.DELETE):
                    yield from self._rows(h, change)
                elif change.isDdl and is_ddl(change.sql):
                    session = change.ddlSchemaName or None
                    yield from b.ddl_rows(change.sql, session, 0, h.logfileName, h.logfileOffset,
                                          h.executeTime // 1000)  # fmt: skip
                    b.gtid = None

    def _conv(self, mysql_type: str) -> _Conv:
        conv = self._convs.get(mysql_type)
        if conv is None:
            conv = self._convs[mysql_type] = _column_conv(mysql_type, self._zone)
        return conv

    def _image(self, columns: Any, where: str) -> tuple[str, list[tuple[str, str]]]:
        parts = []
        keys = []
        for c in columns:
            name = _jstr(c.name) + ":"
            if c.isNull:
                text = "null"
            else:
                try:
                    text = self._conv(c.mysqlType)(c.sqlType, c.value)
                except (ValueError, IndexError, UnicodeEncodeError) as exc:
                    raise RowsError(f"column {c.name!r} ({c.mysqlType}) of {where}: {exc}") from None
            parts.append(name + text)
            if c.isKey:
                keys.append((name, text))
        return "{" + ",".join(parts) + "}", keys

    def _rows(self, h: pb.Header, change: pb.RowChange) -> Iterator[ChangeRow]:
        b = self._b
        schema, table = h.schemaName, h.tableName
        if not b.wanted(schema, table):
            return
        op = pb.EventType.Name(change.eventType)
        when = b.clock(h.executeTime // 1000)
        where = f"{schema}.{table} at {h.logfileName}:{h.logfileOffset}"
        for rd in change.rowDatas:
            before = after = None
            bkeys: list[tuple[str, str]] = []
            akeys: list[tuple[str, str]] = []
            if op != "INSERT":
                before, bkeys = self._image(rd.beforeColumns, where)
            if op != "DELETE":
                after, akeys = self._image(rd.afterColumns, where)
            keys = dict(bkeys) if op == "DELETE" else {**dict(bkeys), **dict(akeys)}
            pk = "{" + ",".join(n + t for n, t in keys.items()) + "}" if keys else None
            yield ChangeRow(op, schema, table, pk, before, after, b.position(h.logfileName, h.logfileOffset),
                            when, None, None)  # fmt: skip
