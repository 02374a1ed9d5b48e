"""Decoded binlog events -> Canal ``Entry`` messages (Canal's ``LogEventConvert``).

``EntryConverter.convert(event)`` returns the entries one decoded event produces (usually zero
or one; a MariaDB GTID event that opens a transaction gives two)::

    conv = EntryConverter(timezone="Asia/Shanghai")
    for event in read_events("mysql-bin.000001"):
        for entry in conv.convert(event):
            ...

The mapping of every event and column type, and each deliberate difference from Canal, is
documented in ``docs/compatibility.md`` ("Canal entries").
"""

from __future__ import annotations

import calendar
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from pycanal.binlog import events as ev
from pycanal.binlog.canonical import json_value as _canonical_json
from pycanal.binlog.constants import ColumnType as T
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import TableIdNotFoundError
from pycanal.binlog.rows import MISSING, JsonPatch
from pycanal.binlog.tablemap import TableMap
from pycanal.binlog.typenames import BLOB_FAMILY, VARCHAR_FAMILY, is_binary, mysql_column_type
from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = [
    "DdlClassifier",
    "EntryConverter",
    "JavaTypes",
    "TableIdNotFoundError",
    "java_double_text",
    "entry_text",
    "keyword_ddl_classifier",
    "mysql_column_type",
]

log = logging.getLogger(__name__)

# (event type name, schema, table) per statement; schema/table may be None.
DdlResult = tuple[str, str | None, str | None]
DdlClassifier = Callable[[str, str | None], Sequence[Any]]


class JavaTypes:
    """The ``java.sql.Types`` codes Canal puts in ``Column.sqlType``."""

    BIT = -7
    TINYINT = -6
    BIGINT = -5
    LONGVARBINARY = -4
    VARBINARY = -3
    BINARY = -2
    CHAR = 1
    DECIMAL = 3
    INTEGER = 4
    SMALLINT = 5
    REAL = 7
    DOUBLE = 8
    VARCHAR = 12
    DATE = 91
    TIME = 92
    TIMESTAMP = 93
    OTHER = 1111
    BLOB = 2004
    CLOB = 2005


J = JavaTypes


# ------------------------------------------------------------------------------ DDL fallback
_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?"
_LEAD = r"^\s*(?:/\*(?!!).*?\*/\s*|#[^\n]*\n\s*|--[^\n]*\n\s*)*"
_KEYWORD_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "CREATE",
        re.compile(
            _LEAD
            + rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}",
            re.I | re.S,
        ),
    ),
    (
        "ALTER",
        re.compile(
            _LEAD + rf"ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{_NAME}", re.I | re.S
        ),
    ),
    (
        "ERASE",
        re.compile(
            _LEAD + rf"DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?(?:/\*.*?\*/\s*)?{_NAME}",
            re.I | re.S,
        ),
    ),
    ("TRUNCATE", re.compile(_LEAD + rf"TRUNCATE\s+(?:TABLE\s+)?{_NAME}", re.I | re.S)),
    (
        "RENAME",
        re.compile(_LEAD + rf"RENAME\s+TABLES?\s+{_IDENT}(?:\s*\.\s*{_IDENT})?\s+TO\s+{_NAME}", re.I | re.S),
    ),
    (
        "CINDEX",
        re.compile(
            _LEAD + rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+"
            rf"(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}\s+(?:USING\s+\w+\s+)?ON\s+{_NAME}",
            re.I | re.S,
        ),
    ),
    (
        "DINDEX",
        re.compile(_LEAD + rf"DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?{_IDENT}\s+ON\s+{_NAME}", re.I | re.S),
    ),
    ("INSERT", re.compile(_LEAD + rf"(?:INSERT|REPLACE)\s+(?:\w+\s+)*?(?:INTO\s+)?{_NAME}", re.I | re.S)),
    ("UPDATE", re.compile(_LEAD + rf"UPDATE\s+(?:LOW_PRIORITY\s+|IGNORE\s+)*{_NAME}", re.I | re.S)),
    ("DELETE", re.compile(_LEAD + rf"DELETE\s+(?:\w+\s+)*?FROM\s+{_NAME}", re.I | re.S)),
]
_DATABASE_RULE = re.compile(
    _LEAD + rf"(?:CREATE|DROP|ALTER)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_IDENT})",
    re.I | re.S,
)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def entry_text(text: str) -> str:
    """A statement's text as an entry carries it: protobuf strings are UTF-8, so bytes the decoder
    could not read (kept as surrogates: e.g. MariaDB's ANNOTATE_ROWS of a latin1 client, which logs
    no charset) become U+FFFD, as Canal's decoding with its connection charset (UTF-8) makes them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def keyword_ddl_classifier(sql: str, default_schema: str | None) -> list[DdlResult]:
    """A keyword-based stand-in for the DDL parser: table CREATE/ALTER/DROP/TRUNCATE/RENAME, index
    CREATE/DROP, statement DML and database statements (QUERY with the database as schema).
    Anything else gives ``[]`` (eventType QUERY, no table). Only the first table is named."""
    for kind, rule in _KEYWORD_RULES:
        m = rule.match(sql)
        if m:
            first, second = m.group(1), m.group(2)
            if second is None:
                return [(kind, default_schema, _unquote(first))]
            return [(kind, _unquote(first), _unquote(second))]
    m = _DATABASE_RULE.match(sql)
    if m:
        return [("QUERY", _unquote(m.group(1)), None)]
    return []


def _default_classifier() -> DdlClassifier:
    """``pycanal.parse.ddl.parse_ddl`` (Canal's DruidDdlParser counterpart), else the keywords."""
    try:
        from pycanal.parse.ddl import parse_ddl
    except ImportError:  # pragma: no cover - the DDL parser ships with pycanal
        return keyword_ddl_classifier
    return parse_ddl


def _ddl_result(item: Any) -> DdlResult:
    """Normalise one classifier result: a ``(type, schema, table, ...)`` sequence or an object with
    ``type``/``event_type`` and ``schema``/``schema_name`` and ``table``/``table_name``."""
    if isinstance(item, (tuple, list)):
        kind, schema, table = item[0], item[1], item[2]
    else:
        kind = _first_attr(item, "event_type", "type", "kind")
        schema = _first_attr(item, "schema", "schema_name")
        table = _first_attr(item, "table", "table_name")
    name = _event_type_name(kind)
    if name not in _EVENT_TYPE_NAMES:
        # e.g. parse_ddl's UNKNOWN for a statement it cannot read (its ``error`` says why)
        log.warning(
            "DDL classifier gave event type %r (%s); using QUERY",
            kind,
            getattr(item, "error", None) or "no detail",
        )
        name = "QUERY"
    return name, schema or None, table or None


def _first_attr(obj: Any, *names: str) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


_EVENT_TYPE_NAMES = frozenset(pb.EventType.keys())


def _event_type_name(kind: Any) -> str:
    if isinstance(kind, int):
        return pb.EventType.Name(kind)
    name = getattr(kind, "name", kind)
    return str(name).upper()


# ------------------------------------------------------------------------------ value text
_DML = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})


def java_double_text(x: float) -> str:
    """``x`` laid out like Java's ``Double.toString`` (shortest round-trip digits): plain notation
    with at least one fraction digit for 1e-3 <= |x| < 1e7, else ``d.dddE[-]n``."""
    if x != x:
        return "NaN"
    if x == float("inf"):
        return "Infinity"
    if x == float("-inf"):
        return "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits))
    point = len(ds) + exp  # the decimal point sits after this many digits of ds
    ds = ds.rstrip("0")
    prefix = "-" if sign else ""
    a = abs(x)
    if 1e-3 <= a < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{ds}"
        if point >= len(ds):
            return f"{prefix}{ds}{'0' * (point - len(ds))}.0"
        return f"{prefix}{ds[:point]}.{ds[point:]}"
    return f"{prefix}{ds[0]}.{ds[1:] or '0'}E{point - 1}"


def _decimal_text(v: Decimal) -> str:
    text = f"{v:f}"
    if text.startswith("-") and not v:
        return text[1:]
    return text


def _latin1(v: bytes) -> str:
    return v.decode("latin-1")


class _Timestamps:
    """TIMESTAMP text (the decoder's UTC text) -> the same instant in the configured zone."""

    def __init__(self, zone: tzinfo | None) -> None:
        self.zone = zone
        self.convert = lru_cache(maxsize=4096)(self._convert) if zone is not None else None

    def _convert(self, seconds: str) -> str:
        if seconds.startswith("0000-00-00"):
            return seconds
        epoch = calendar.timegm(
            (
                int(seconds[0:4]),
                int(seconds[5:7]),
                int(seconds[8:10]),
                int(seconds[11:13]),
                int(seconds[14:16]),
                int(seconds[17:19]),
            )
        )
        return datetime.fromtimestamp(epoch, self.zone).strftime("%Y-%m-%d %H:%M:%S")

    def text(self, v: str) -> str:
        if self.convert is None:
            return v
        return self.convert(v[:19]) + v[19:]


def _zone(timezone: str | tzinfo | None) -> tzinfo | None:
    """``None`` for UTC (the decoder's text is already UTC), else a tzinfo."""
    if timezone is None:
        return None
    if isinstance(timezone, str):
        if timezone.upper() in ("UTC", "Z", "+00:00"):
            return None
        return ZoneInfo(timezone)
    if timezone is UTC or getattr(timezone, "key", None) == "UTC":
        return None
    return timezone


_TEXT_NAME = re.compile(r"^\s*(tiny|medium|long)?text\b", re.I)


# ------------------------------------------------------------------------------ column plans
# One plan per (TableMap, converter options): (index, name, isKey, mysqlType, conv, null sqlType)
# where conv(value) -> (sqlType, text). Kept in the TableMap's ``decoders`` dict (a new schema
# version is a new TableMap object, so the plan can never outlive the layout it describes).
_Plan = list[tuple[int, str, bool, str, Callable[[Any], tuple[int, str]], int]]

_INT_TYPES = {
    # type: (sqlType, widened sqlType, 2^(bits-1))
    T.TINY: (J.TINYINT, J.SMALLINT, 1 << 7),
    T.SHORT: (J.SMALLINT, J.INTEGER, 1 << 15),
    T.INT24: (J.INTEGER, J.INTEGER, 1 << 23),
    T.LONG: (J.INTEGER, J.BIGINT, 1 << 31),
    T.LONGLONG: (J.BIGINT, J.DECIMAL, 1 << 63),
}


def _int_conv(base: int, widened: int, limit: int, unsigned: bool) -> Callable[[Any], tuple[int, str]]:
    if unsigned:
        return lambda v: (widened if v >= limit else base, str(v))
    return lambda v: (base, str(v))


def _fixed(sql_type: int, fmt: Callable[[Any], str] = str) -> Callable[[Any], tuple[int, str]]:
    return lambda v: (sql_type, fmt(v))


def _chars_or_bytes(text_type: int) -> Callable[[Any], tuple[int, str]]:
    def conv(v: Any) -> tuple[int, str]:
        if type(v) is bytes:
            return J.BLOB, v.decode("latin-1")
        return text_type, v

    return conv


def _json_conv(v: Any) -> tuple[int, str]:
    if isinstance(v, JsonPatch):
        return J.VARCHAR, _canonical_json(v)
    return J.VARCHAR, str(v)


class EntryConverter:
    """Turns decoded binlog events into Canal entries (see the module notes).

    ``ddl_classifier(sql, default_schema)`` returns one ``(event_type_name, schema, table)`` per
    table the statement touches (or objects with ``type``, ``schema``, ``table`` attributes, such
    as ``pycanal.parse.ddl.DdlResult``); ``pycanal.parse.ddl.parse_ddl`` when not given, and
    ``keyword_ddl_classifier`` is a dependency-free stand-in.
    ``timezone`` renders TIMESTAMP columns (name, tzinfo; UTC by default). ``enum_set`` is
    ``"index"`` (Canal: ENUM index, SET bitmask) or ``"label"``. ``gtid_set`` (a
    ``MysqlGtidSet``/``MariadbGtidSet``, copied) turns on GTID mode: Header ``gtid`` is the
    executed set and the ``curtGtid*`` props are set. ``filter_query_dml`` drops the QUERY entries
    of ROWS_QUERY/ANNOTATE_ROWS/USER_VAR/INTVAR/RAND events (Canal's
    ``canal.instance.filter.query.dml``).
    """

    def __init__(
        self,
        *,
        ddl_classifier: DdlClassifier | None = None,
        timezone: str | tzinfo | None = "UTC",
        enum_set: str = "index",
        gtid_set: Any = None,
        filter_query_dml: bool = False,
    ) -> None:
        if enum_set not in ("index", "label"):
            raise ValueError(f"enum_set must be 'index' or 'label', not {enum_set!r}")
        self.ddl_classifier: DdlClassifier = ddl_classifier or _default_classifier()
        self.enum_labels = enum_set == "label"
        self.filter_query_dml = filter_query_dml
        self._timestamps = _Timestamps(_zone(timezone))
        self._plan_key = ("pycanal.parse.convert", str(timezone), enum_set)
        self.gtid_set = gtid_set.copy() if gtid_set is not None else None
        # Header.gtid and the curtGtid* props of the current GTID (read by the raw fast path too).
        self.gtid_text = str(self.gtid_set) if self.gtid_set is not None else ""
        self.gtid_props: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ events
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
            if self.gtid_set is not None:
                for gtid in event.gtid_set.split(","):
                    if gtid:
                        self.gtid_set.update(gtid)
                self.gtid_text = str(self.gtid_set)
            return [self._gtid_entry(event, event.gtid_set)]
        if isinstance(event, ev.HeartbeatEvent):
            return [pb.Entry(header=pb.Header(eventType=pb.MHEARTBEAT), entryType=pb.HEARTBEAT)]
        if isinstance(event, ev.RowsQueryEvent):
            if self.filter_query_dml:
                return []
            table = self.rows_query_table(event.query) if event.type == E.ROWS_QUERY else ""
            return [self._query_entry(event, event.query, table)]
        if isinstance(event, (ev.UserVarEvent, ev.IntvarEvent, ev.RandEvent)):
            if self.filter_query_dml:
                return []
            return [self._query_entry(event, _variable_statement(event), "")]
        return []

    @staticmethod
    def rows_query_table(sql: str) -> str:
        """The table Canal names for MySQL's ROWS_QUERY statement (MariaDB's ANNOTATE_ROWS: none).
        Only a DML statement's table is needed: a keyword match, never the full parser (a
        multi-row INSERT can be megabytes long)."""
        results = keyword_ddl_classifier(sql[:4096], None)
        return entry_text(results[0][2] or "") if results else ""

    def convert_all(self, events: Iterable[ev.Event]) -> Iterator[pb.Entry]:
        for event in events:
            yield from self.convert(event)

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
            gtid=self.gtid_text,
        )
        if event_type is not None:
            h.eventType = event_type
        if self.gtid_props:
            for key, value in self.gtid_props:
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

    def _classify(self, sql: str, schema: str | None) -> list[DdlResult]:
        try:
            results = self.ddl_classifier(sql, schema)
        except Exception as exc:  # Canal's DruidDdlParser on a ParserException: one nameless QUERY
            log.warning("DDL classifier failed on %r: %s", sql[:200], exc)
            return [("QUERY", None, None)]
        return [_ddl_result(r) for r in results or ()]

    def _query(self, e: ev.QueryEvent) -> pb.Entry:
        sql = entry_text(e.query)
        upper = sql[:12].upper()
        if upper.startswith("XA START"):
            begin = pb.TransactionBegin(threadId=e.thread_id)
            _xa_props(begin.props, "XA START", sql[8:])
            return self._entry(self._header(e), pb.TRANSACTIONBEGIN, begin)
        if upper.startswith("XA END"):
            end = pb.TransactionEnd(transactionId="0")
            _xa_props(end.props, "XA END", sql[6:])
            return self._entry(self._header(e), pb.TRANSACTIONEND, end)
        for prefix, event_type in (("XA COMMIT", pb.XACOMMIT), ("XA ROLLBACK", pb.XAROLLBACK)):
            if upper.startswith(prefix):
                change = pb.RowChange(eventType=event_type, sql=sql)
                _xa_props(change.props, prefix, sql[len(prefix) :])
                return self._entry(self._header(e, "", "", event_type), pb.ROWDATA, change)
        tail = sql[-6:].upper()
        if tail.endswith("BEGIN"):
            begin = pb.TransactionBegin(threadId=e.thread_id)
            return self._entry(self._header(e), pb.TRANSACTIONBEGIN, begin)
        if tail == "COMMIT":  # a non-transactional engine's statement group: no XID
            return self._entry(self._header(e), pb.TRANSACTIONEND, pb.TransactionEnd(transactionId="0"))
        results = self._classify(sql, e.schema or None)
        if not results:
            # A statement that names no table or database (accounts, views, routines, SAVEPOINT,
            # ALTER DATABASE, REPLACE, ...): Canal's DruidDdlParser gives no result and Canal drops
            # the event (LogEventConvert.parseQueryEvent: ``if (!notFilter) return null``). pycanal
            # keeps it as an informational QUERY entry without isDdl, the shape Canal gives the SQL
            # behind rows events, so a client that treats isDdl entries as schema changes skips it;
            # ``filter.query.dcl`` drops it as Canal would.
            change = pb.RowChange(eventType=pb.QUERY, sql=sql)
            if e.schema:
                change.ddlSchemaName = e.schema
            return self._entry(self._header(e, "", "", pb.QUERY), pb.ROWDATA, change)
        name, schema, table = results[0]  # Canal: "for a multi-table DDL only the first counts"
        event_type = pb.EventType.Value(name)
        # LogEventConvert.parseQueryEvent: setIsDdl(!isDml) -- true for table DDL and for a QUERY
        # from a database statement, false for statement DML.
        change = pb.RowChange(eventType=event_type, isDdl=event_type not in _DML, sql=sql)
        if e.schema:
            change.ddlSchemaName = e.schema
        return self._entry(self._header(e, schema or "", table or "", event_type), pb.ROWDATA, change)

    def _query_entry(self, e: ev.Event, sql: str, table: str) -> pb.Entry:
        change = pb.RowChange(eventType=pb.QUERY, sql=entry_text(sql))
        return self._entry(self._header(e, "", table, pb.QUERY), pb.ROWDATA, change)

    def _gtid_entry(self, e: ev.Event, gtid: str) -> pb.Entry:
        return self._entry(self._header(e, "", "", pb.GTID), pb.GTIDLOG, pb.Pair(key="gtid", value=gtid))

    def track_gtid(self, e: ev.GtidEvent) -> bool:
        """Take ``e`` into the GTID state the Headers carry; False for an anonymous GTID."""
        if e.type == E.ANONYMOUS_GTID or e.gtid is None:
            return False
        if self.gtid_set is not None:
            info = e.info
            self.gtid_set.update(e.gtid)
            self.gtid_text = str(self.gtid_set)
            props = [("curtGtid", e.gtid)]
            if e.type != E.MARIADB_GTID:
                if info.sequence_number is not None:
                    props.append(("curtGtidSn", str(info.sequence_number)))
                if info.last_committed is not None:
                    props.append(("curtGtidLct", str(info.last_committed)))
            self.gtid_props = props
        return True

    def _gtid(self, e: ev.GtidEvent) -> list[pb.Entry]:
        if not self.track_gtid(e):
            return []
        info = e.info
        out = [self._gtid_entry(e, e.gtid)]
        if e.type == E.MARIADB_GTID and not info.standalone:
            # MariaDB writes no BEGIN query: the GTID event opens the transaction.
            begin = pb.TransactionBegin(threadId=info.thread_id or 0)
            if info.prepared_xa and info.xid is not None:
                x = info.xid
                _xa_props(begin.props, "XA START", f" X'{x.gtrid.hex()}',X'{x.bqual.hex()}',{x.format_id}")
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
            plan = self.column_plan(tm)
            tm.decoders[self._plan_key] = plan
        change = pb.RowChange(tableId=e.table_id, eventType=event_type, isDdl=False)
        rows = e.rows
        add_row = change.rowDatas.add
        if kind == "INSERT":
            for image in rows:
                _image(add_row().afterColumns, plan, image, None)
        elif kind == "DELETE":
            for image in rows:
                _image(add_row().beforeColumns, plan, image, False)
        else:
            for before, after in rows:
                row = add_row()
                seen = _image(row.beforeColumns, plan, before, False)
                _image(row.afterColumns, plan, after, seen)
        header = self._header(e, tm.schema, tm.table, event_type, len(rows))
        return self._entry(header, pb.ROWDATA, change)

    def column_plan(self, tm: TableMap) -> _Plan:
        """Per column (index, name, isKey, mysqlType, value converter, NULL sqlType); cached on ``tm``."""
        names = tm.names
        keys = {i for i, _ in tm.primary_key or ()}
        declared = tm.column_types
        plan: _Plan = []
        for i in range(tm.column_count):
            name = names[i] if names else f"@{i + 1}"
            mysql_type = declared[i] if declared else mysql_column_type(tm, i)
            conv, null_type = self._column(tm, i, declared[i] if declared else None)
            plan.append((i, name, i in keys, mysql_type, conv, null_type))
        return plan

    def _column(
        self, tm: TableMap, i: int, declared: str | None
    ) -> tuple[Callable[[Any], tuple[int, str]], int]:
        t = tm.types[i]
        if t in _INT_TYPES:
            base, widened, limit = _INT_TYPES[t]
            unsigned = bool(tm.unsigned[i]) if tm.unsigned else False
            return _int_conv(base, widened, limit, unsigned), base
        if t == T.FLOAT:
            return _fixed(J.REAL, java_double_text), J.REAL
        if t == T.DOUBLE:
            return _fixed(J.DOUBLE, java_double_text), J.DOUBLE
        if t in (T.NEWDECIMAL, T.DECIMAL):
            return _fixed(J.DECIMAL, _decimal_text), J.DECIMAL
        if t == T.BIT:
            return _fixed(J.BIT), J.BIT
        if t in (T.TIMESTAMP, T.TIMESTAMP2):
            return _fixed(J.TIMESTAMP, self._timestamps.text), J.TIMESTAMP
        if t in (T.DATETIME, T.DATETIME2):
            return _fixed(J.TIMESTAMP, str), J.TIMESTAMP
        if t in (T.TIME, T.TIME2):
            return _fixed(J.TIME, str), J.TIME
        if t in (T.DATE, T.NEWDATE):
            return _fixed(J.DATE, str), J.DATE
        if t == T.YEAR:
            return _fixed(J.VARCHAR, lambda v: "0000" if v == 0 else str(v)), J.VARCHAR
        if t == T.ENUM:
            return self._enum(tm.enum_labels[i] if tm.enum_labels else None)
        if t == T.SET:
            return self._set(tm.set_labels[i] if tm.set_labels else None)
        if t in VARCHAR_FAMILY or t == T.STRING:
            text_type = J.VARCHAR if t in VARCHAR_FAMILY else J.CHAR
            return _chars_or_bytes(text_type), J.BLOB if is_binary(tm, i, declared) else text_type
        if t in BLOB_FAMILY:
            if declared:
                is_text = _TEXT_NAME.match(declared) is not None
            else:
                is_text = is_binary(tm, i, None) is False
            return _chars_or_bytes(J.CLOB), J.CLOB if is_text else J.BLOB
        if t == T.JSON:
            return _json_conv, J.VARCHAR
        if t in (T.GEOMETRY, T.VECTOR):
            return _fixed(J.BLOB, _latin1), J.BLOB
        return _fixed(J.OTHER, str), J.OTHER

    def _enum(self, labels: list[str] | None) -> tuple[Callable[[Any], tuple[int, str]], int]:
        if self.enum_labels and labels is not None:
            return (lambda v: (J.CHAR, v) if type(v) is str else (J.INTEGER, str(v))), J.CHAR
        index = {label: n for n, label in reversed(list(enumerate(labels or (), 1)))}
        index.setdefault("", 0)

        def conv(v: Any) -> tuple[int, str]:
            if type(v) is str:
                return J.INTEGER, str(index[v])
            return J.INTEGER, str(v)

        return conv, J.INTEGER

    def _set(self, labels: list[str] | None) -> tuple[Callable[[Any], tuple[int, str]], int]:
        if self.enum_labels and labels is not None:
            return (lambda v: (J.CHAR, ",".join(v)) if type(v) is list else (J.BIT, str(v))), J.CHAR
        bits = {label: 1 << n for n, label in reversed(list(enumerate(labels or ())))}

        def conv(v: Any) -> tuple[int, str]:
            if type(v) is list:
                mask = 0
                for member in v:
                    mask |= bits[member]
                return J.BIT, str(mask)
            return J.BIT, str(v)

        # Canal: a NULL SET maps through BINARY to BLOB.
        return conv, J.BLOB


def _image(columns: Any, plan: _Plan, image: tuple, before: dict | bool | None) -> dict | None:
    """Append one row image's columns. ``before``: False for a before-image (never updated),
    None for an INSERT after-image (all updated), else the before-image's {index: text or None}."""
    add = columns.add
    seen: dict[int, str | None] | None = {} if before is False else None
    for i, name, is_key, mysql_type, conv, null_type in plan:
        v = image[i]
        if v is MISSING:
            continue
        if v is None:
            updated = before is None or (before is not False and (i not in before or before[i] is not None))
            add(
                index=i,
                sqlType=null_type,
                name=name,
                isKey=is_key,
                updated=updated,
                isNull=True,
                mysqlType=mysql_type,
            )
            if seen is not None:
                seen[i] = None
            continue
        sql_type, text = conv(v)
        updated = before is None or (before is not False and before.get(i, _ABSENT) != text)
        add(
            index=i,
            sqlType=sql_type,
            name=name,
            isKey=is_key,
            updated=updated,
            isNull=False,
            value=text,
            mysqlType=mysql_type,
        )
        if seen is not None:
            seen[i] = text
    return seen


_ABSENT = object()


def _xa_props(props: Any, xa_type: str, xid: str) -> None:
    props.add(key="XA_TYPE", value=xa_type)
    props.add(key="XA_XID", value=xid)


def _variable_statement(e: ev.Event) -> str:
    """The ``SET`` statement Canal shows for USER_VAR / INTVAR / RAND events."""
    if isinstance(e, ev.IntvarEvent):
        return f"SET {'LAST_INSERT_ID' if e.kind == 1 else 'INSERT_ID'} = {e.value}"
    if isinstance(e, ev.RandEvent):
        return f"SET SESSION rand_seed1 = {e.seed1} , rand_seed2 = {e.seed2}"
    assert isinstance(e, ev.UserVarEvent)
    if e.is_null or e.value is None:
        return f"SET @{e.name} := NULL"
    v = e.value
    if e.value_type == 0:
        text = v.decode("latin-1") if isinstance(v, bytes) else v
        return f"SET @{e.name} := '{text}'"
    if isinstance(v, float):
        return f"SET @{e.name} := {java_double_text(v)}"
    if isinstance(v, Decimal):
        return f"SET @{e.name} := {_decimal_text(v)}"
    if isinstance(v, bytes):
        return f"SET @{e.name} := {v.decode('latin-1')}"
    return f"SET @{e.name} := {v}"
