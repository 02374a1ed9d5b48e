"""The change row shared by every Spark source: one row per row change or DDL statement.

Columns (``ROW_SCHEMA``, in this order):

* ``op``: INSERT, UPDATE, DELETE, DDL, or READ (a row of the initial snapshot, at the binlog
  position its chunk was read at: :class:`SnapshotRows`);
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

Two builders give identical rows (and :class:`SnapshotRows` READ rows whose images equal an INSERT's
of the same row): :class:`EventRows` from decoded binlog events (the
``binlog`` batch source) and :class:`EntryRows` from Canal ``Entry`` messages (a Canal or
pycanal server). docs/spark.md lists the values where the two cannot agree. Both give the rows
as ``ChangeRow`` tuples (``rows()``) or as Arrow record batches built column by column
(``batches()``, what the Spark sources yield; equal to ``to_record_batch`` of the rows).

How it is fast
--------------
A builder turns each event into a run: the rows of one event share all columns but ``pk``,
``before``, ``after`` and the row index, so a batch extends those once per event and builds
``ts`` from integers. For entries, reading the protobuf ``Column`` messages costs most: per
layout of a RowChange's rows (op and each image's column names, ``mysqlType`` and ``isKey``,
read from its first row; later rows only check their column count, see ``EntryRows._reader``)
:class:`EntryRows` compiles straight-line Python that reads each column's ``isNull`` and
``value`` (and ``sqlType`` where the converter needs it) and joins the JSON texts once per row,
the primary key picked at compile time.
"""

from __future__ import annotations

import base64
import calendar
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import lru_cache
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any, Generic, NamedTuple, TypeVar
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.binlog import events as ev
from pycanal.binlog.canonical import is_ddl, json_value
from pycanal.binlog.rows import MISSING
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.ddl import parse_ddl
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta.types import parse_labels
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.snapshot.chunks import EXACT_RANGE_TYPES
from pycanal.snapshot.reader import ChunkRead, SchemaRead, decoded
from pycanal.snapshot.window import ChunkColumns

__all__ = [
    "ARROW_SCHEMA",
    "ROW_SCHEMA",
    "ChangeRow",
    "EntryRows",
    "EventRows",
    "RowPosition",
    "entry_row_count",
    "RowsError",
    "SNAPSHOT_DDL",
    "SnapshotRows",
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


def _record_batch(*columns: Sequence[Any]) -> pa.RecordBatch:
    """A batch of ``ARROW_SCHEMA`` from 13 columns: the schema's, ``position`` as its four
    (file, offset, row, gtid); ``ts`` as datetimes or microseconds."""
    op, database, table, pk, before, after, file, offset, row, gtid, ts, sql, sql_database = columns
    text = pa.string()
    position = pa.StructArray.from_arrays(
        [_array(file, text), _array(offset, pa.int64()), _array(row, pa.int32()), _array(gtid, text)],
        fields=list(POSITION_TYPE),
    )
    arrays = [_array(c, text) for c in (op, database, table, pk, before, after)]
    arrays += [position, _array(ts, ARROW_SCHEMA.field("ts").type)]
    arrays += [_array(sql, text), _array(sql_database, text)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _array(values: Sequence[Any] | pa.Array, kind: pa.DataType) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, kind)


def to_record_batch(rows: list[ChangeRow]) -> pa.RecordBatch:
    """Rows as one Arrow record batch of ``ARROW_SCHEMA`` (what the Spark sources yield)."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * 10
    pos = list(zip(*cols[6], strict=True)) if rows else [()] * 4
    return _record_batch(*cols[:6], *pos, *cols[7:])


class _Run(NamedTuple):
    """The rows of one event (or one DDL row), column-wise: only ``pk``, ``before``, ``after``
    and the row index differ between them."""

    op: str
    database: str | None
    table: str | None
    pk: list[str | None]
    before: list[str | None]
    after: list[str | None]
    file: str
    offset: int
    row: int  # the first row's index at (file, offset)
    gtid: str | None
    seconds: int  # event time
    sql: str | None
    sql_database: str | None


def _batches(runs: Iterable[_Run], size: int) -> Iterator[pa.RecordBatch]:
    """Runs as record batches of ``size`` rows (the last one fewer)."""
    columns: list[list[Any]] = [[] for _ in range(13)]
    for r in runs:
        n = len(r.pk)
        values = (
            [r.op] * n, [r.database] * n, [r.table] * n, r.pk, r.before, r.after, [r.file] * n,
            [r.offset] * n, range(r.row, r.row + n), [r.gtid] * n, [r.seconds * 1_000_000] * n,
            [r.sql] * n, [r.sql_database] * n,
        )  # fmt: skip
        for column, v in zip(columns, values, strict=True):
            column.extend(v)
        while len(columns[0]) >= size:
            yield _record_batch(*(c[:size] for c in columns))
            for c in columns:
                del c[:size]
    if columns[0]:
        yield _record_batch(*columns)


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

    def take(self, file: str, offset: int, n: int) -> int:
        """The index of the first of ``n`` (> 0) rows at (file, offset)."""
        if (file, offset) != self._at:
            self._at = (file, offset)
            self._next = 0
        row = self._next
        self._next += n
        return row

    def wanted(self, schema: str | None, table: str | None) -> bool:
        return self.accepts is None or self.accepts.accepts(schema, table)

    def ddl_runs(
        self, sql: str, session_db: str | None, sql_mode: int, file: str, offset: int, seconds: int
    ) -> Iterator[_Run]:
        """One DDL row per table (or database) the statement touches, if the filter takes it."""
        results = parse_ddl(sql, session_db, sql_mode)
        if self.accepts is not None and not self.accepts.accepts_ddl(results):
            return
        # A statement on no table (a view, a routine) is still a row: of its session database.
        names: list[tuple[str | None, str | None]] = [] if results else [(session_db, None)]
        for r in results:
            # A RENAME names both sides; a database statement has no table.
            for name in ([(r.ori_schema, r.ori_table)] if r.ori_table else []) + [(r.schema, r.table)]:
                if name not in names:
                    names.append(name)
        for schema, table in names:
            yield _Run("DDL", schema, table, [None], [None], [None], file, offset, self.take(file, offset, 1),
                       self.gtid, seconds, sql, session_db)  # fmt: skip


_In = TypeVar("_In")


class _RowSource(ABC, Generic[_In]):
    """``rows()`` and ``batches()``, both over the runs of a builder."""

    _b: _Builder

    @abstractmethod
    def _runs(self, source: Iterable[_In]) -> Iterator[_Run]: ...

    def rows(self, source: Iterable[_In]) -> Iterator[ChangeRow]:
        """One ``ChangeRow`` per row."""
        clock = self._b.clock
        for r in self._runs(source):
            when = clock(r.seconds)
            for row, (pk, before, after) in enumerate(zip(r.pk, r.before, r.after, strict=True), r.row):
                yield ChangeRow(r.op, r.database, r.table, pk, before, after,
                                RowPosition(r.file, r.offset, row, r.gtid), when, r.sql, r.sql_database)  # fmt: skip

    def batches(self, source: Iterable[_In], rows_per_batch: int = 8192) -> Iterator[pa.RecordBatch]:
        """The rows as record batches of ``rows_per_batch`` rows (the last one fewer): the same
        values as ``to_record_batch`` of ``rows()``, built column by column."""
        if rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be positive, got {rows_per_batch}")
        return _batches(self._runs(source), rows_per_batch)


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


class EventRows(_RowSource[ev.Event]):
    """Change rows from decoded binlog events (``read_events``), in binlog order.

    ``accepts``: the tables to keep (DDL: Canal's statement filter, ``TableFilter.accepts_ddl``).
    ``gtid``: the GTID of the transaction the events start inside (a file part that starts
    mid-transaction). Column names and the primary key come from the TABLE_MAP (FULL metadata)
    or the schema history the decoder was given; a table with neither is an error.
    """

    def __init__(self, *, accepts: TableFilter | None = None, gtid: str | None = None) -> None:
        self._b = _Builder(accepts, gtid, None)

    def _runs(self, events: Iterable[ev.Event]) -> Iterator[_Run]:
        b = self._b
        for e in events:
            if isinstance(e, ev.RowsEvent):
                run = self._run(e)
                if run is not None:
                    yield run
            elif isinstance(e, ev.GtidEvent):
                b.gtid = e.gtid
            elif isinstance(e, ev.XidEvent | ev.XaPrepareEvent):
                b.gtid = None
            elif isinstance(e, ev.TransactionPayloadEvent):
                for inner in e.events:
                    if isinstance(inner, ev.RowsEvent):
                        run = self._run(inner, e.pos)
                        if run is not None:
                            yield run
                b.gtid = None
            elif isinstance(e, ev.QueryEvent) and not isinstance(e, ev.ExecuteLoadQueryEvent):
                sql = e.query
                if is_ddl(sql):
                    mode = e.status.get("sql_mode", 0)
                    yield from b.ddl_runs(sql, e.schema or None, mode, e.file, e.pos, e.timestamp)
                    b.gtid = None
                elif sql.lstrip()[:6].upper() == "COMMIT":
                    b.gtid = None

    def _run(self, e: ev.RowsEvent, offset: int | None = None) -> _Run | None:
        b = self._b
        tm = e.table_map
        if tm is None:
            return None  # a rows event with no rows (the decoder raises for one whose table is unknown)
        if not b.wanted(tm.schema, tm.table):
            return None
        at = e.pos if offset is None else offset
        plan = _table_plan(tm, e.file, at)
        names = plan.names
        kind = e.kind
        pks: list[str | None] = []
        befores: list[str | None] = []
        afters: list[str | None] = []
        for r in e.rows:
            if kind == "INSERT":
                pks.append(_key(plan, r, None))
                befores.append(None)
                afters.append(_image(names, r))
            elif kind == "UPDATE":
                before, after = r
                pks.append(_key(plan, after, before))
                befores.append(_image(names, before))
                afters.append(_image(names, after))
            else:
                pks.append(_key(plan, r, None))
                befores.append(_image(names, r))
                afters.append(None)
        if not pks:
            return None
        return _Run(kind, tm.schema, tm.table, pks, befores, afters, e.file, at, b.take(e.file, at, len(pks)),
                    b.gtid, e.timestamp, None, None)  # fmt: skip


class SnapshotRows(_RowSource["ChunkRead | ChunkColumns | SchemaRead"]):
    """READ change rows from snapshot chunks (:func:`pycanal.snapshot.read_chunk`): each row at
    its chunk's binlog position, ``after`` and ``pk`` as an INSERT of the same row would give them
    (Debezium's ``r``); and from a ``read_schema``, one DDL row per table: its ``CREATE TABLE IF
    NOT EXISTS`` (the lake learns tables that existed before the stream). Rows of reads at one
    position are numbered on from each other."""

    def __init__(self, *, resume: tuple[str, int, int] | None = None) -> None:
        self._b = _Builder(None, None, resume)

    @property
    def resume(self) -> tuple[str, int, int]:
        return self._b.resume

    def _runs(self, reads: Iterable[ChunkRead | ChunkColumns | SchemaRead]) -> Iterator[_Run]:
        for read in reads:
            if isinstance(read, SchemaRead):
                for schema, table, sql in read.creates:
                    sql = _if_not_exists(sql, f"{schema}.{table}")
                    yield _Run("DDL", schema, table, [None], [None], [None], read.file, read.pos,
                               self._b.take(read.file, read.pos, 1), None, read.seconds, sql, schema)  # fmt: skip
                continue
            n = _chunk_size(read)
            t = read.table
            if n:
                pks, afters = _chunk_images(read)
                yield _Run("READ", t.schema, t.name, pks.to_pylist() if pks is not None else [None] * n,
                           [None] * n, afters.to_pylist(), read.file, read.pos, self._b.take(read.file, read.pos, n),
                           None, read.seconds, None, None)  # fmt: skip
            chunk = self._chunk_run(read)
            if chunk is not None:
                yield chunk

    def _chunk_run(self, read: ChunkRead | ChunkColumns) -> _Run | None:
        """The chunk's ``CHUNK`` row (numbered after its READ rows), None without one."""
        bounds = _chunk_bounds(read)
        if bounds is None:
            return None
        t = read.table
        return _Run(CHUNK, t.schema, t.name, [None], [None], [bounds], read.file, read.pos,
                    self._b.take(read.file, read.pos, 1), None, read.seconds, None, None)  # fmt: skip

    def batches(
        self, reads: Iterable[ChunkRead | ChunkColumns | SchemaRead], rows_per_batch: int = 8192
    ) -> Iterator[pa.RecordBatch]:
        """As ``_RowSource.batches``; a chunk's images are built column by column (``_chunk_images``)."""
        if rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be positive, got {rows_per_batch}")
        for read in reads:
            if isinstance(read, SchemaRead):
                yield from _batches(self._runs([read]), rows_per_batch)
                continue
            n, t = _chunk_size(read), read.table
            if n:
                pks, afters = _chunk_images(read)
                first = self._b.take(read.file, read.pos, n)
                for a in range(0, n, rows_per_batch):
                    m = min(rows_per_batch, n - a)
                    nulls = pa.nulls(m, pa.string())
                    yield _record_batch(
                        ["READ"] * m, [t.schema] * m, [t.name] * m, pks.slice(a, m) if pks is not None else nulls, nulls,
                        afters.slice(a, m), [read.file] * m, [read.pos] * m, range(first + a, first + a + m), nulls,
                        [read.seconds * 1_000_000] * m, nulls, nulls,
                    )  # fmt: skip
            chunk = self._chunk_run(read)
            if chunk is not None:
                yield from _batches([chunk], 1)


# A snapshot chunk's key range (``after``: {"lower": <key image>, "upper": <key image>}, each the
# text of a ``pk`` image of the bound, null: open), after its READ rows at their position: the
# current state's rows in that range that the chunk lacks are deleted there (the source had no
# such row then).
CHUNK = "CHUNK"


def _chunk_bounds(read: ChunkRead | ChunkColumns) -> str | None:
    """The ``CHUNK`` row's ``after`` of a chunk whose range a lake can test exactly (keys of
    ``EXACT_RANGE_TYPES``, or the whole table), None for a table without key or a range of
    another key type."""
    t, chunk = read.table, read.chunk
    whole = chunk.lower is None and chunk.upper is None
    if not t.key or not (whole or all(t.columns[i].data_type in EXACT_RANGE_TYPES for i in t.key)):
        return None
    names = tuple(_jstr(t.columns[i].name) + ":" for i in t.key)

    def bound(values: tuple | None) -> str | None:
        if values is None:
            return None
        return _image(names, tuple(decoded(t.columns[i], v) for i, v in zip(t.key, values, strict=True)))

    return json.dumps({"lower": bound(chunk.lower), "upper": bound(chunk.upper)})


def _chunk_size(read: ChunkRead | ChunkColumns) -> int:
    return read.num_rows if isinstance(read, ChunkColumns) else len(read.rows)


def _chunk_images(read: ChunkRead | ChunkColumns) -> tuple[pa.Array | None, pa.Array]:
    """A chunk's ``pk`` (None: the table has no key) and ``after`` JSON texts, each column's
    value texts built once for all its rows."""
    t = read.table
    names = [_jstr(c.name) + ":" for c in t.columns]
    columns = read.columns if isinstance(read, ChunkColumns) else zip(*read.rows, strict=True)
    texts = [_json_texts(values) for values in columns]
    key = sorted(t.key)
    pks = _objects([names[i] for i in key], [texts[i] for i in key]) if key else None
    return pks, _objects(names, texts)


# A string value Arrow may quote as it is: nothing ``encode_basestring`` would escape.
_PLAIN = r"^[^\x00-\x1f\"\\]*$"


def _json_texts(values: Sequence[Any] | pa.Array) -> pa.Array:
    """``_value`` of each value (non-null texts), by Arrow kernels for integers and plain strings."""
    array = values if isinstance(values, pa.Array) else _plain_array(values)
    if array is not None:
        if pa.types.is_integer(array.type):
            return pc.cast(array, pa.string()).fill_null("null")
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            strings = array.cast(pa.string())
            if pc.all(pc.match_substring_regex(strings, _PLAIN)).as_py() is not False:
                return pc.binary_join_element_wise('"', strings, '"', "").fill_null("null")
        if isinstance(values, pa.Array):
            values = values.to_pylist()
    return pa.array([_value(v) for v in values], pa.string())


def _plain_array(values: Sequence[Any]) -> pa.Array | None:
    """``values`` as an Arrow array when all are integers or all strings (and Arrow holds them)."""
    kinds = {type(v) for v in values}
    kinds.discard(type(None))
    try:
        if kinds == {int}:
            return pa.array(values)
        if kinds == {str}:
            return pa.array(values, pa.string())
    except (pa.ArrowInvalid, OverflowError, UnicodeError):
        pass  # integers no Arrow type holds (or text Arrow cannot encode): one by one
    return None


def _objects(names: list[str], texts: list[pa.Array]) -> pa.Array:
    """``{name: text, ...}`` per row."""
    parts: list[Any] = []
    for i, (name, column) in enumerate(zip(names, texts, strict=True)):
        parts += [("{" if i == 0 else ",") + name, column]
    return pc.binary_join_element_wise(*parts, "}", "")


# Leads the snapshot's CREATE TABLE rows: the lake takes the table's schema as of that position.
SNAPSHOT_DDL = "/* pycanal snapshot */ "


def _if_not_exists(create: str, where: str) -> str:
    head = "CREATE TABLE "
    if not create.startswith(head):
        raise RowsError(f"SHOW CREATE TABLE of {where} does not start with {head!r}: {create[:80]!r}")
    return SNAPSHOT_DDL + head + "IF NOT EXISTS " + create[len(head) :]


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


_Text = Callable[[str], str]  # value text -> canonical JSON


class _Conv(NamedTuple):
    """A column's value converter, and the ones for sqlTypes whose text means something else
    (bytes in ISO-8859-1, an ENUM index, a SET bitmask): ``by_sql_type.get(sqlType, fn)``."""

    fn: _Text
    by_sql_type: dict[int, _Text] | None = None


def _base64(text: str) -> str:
    return '{"base64": "' + base64.b64encode(text.encode("latin-1")).decode("ascii") + '"}'


_TEXT_OR_BYTES = _Conv(_jstr, dict.fromkeys(_BINARY_SQL_TYPES, _base64))


def _enum_conv(labels: list[str] | None) -> _Conv:
    names = None if labels is None else ("", *labels)

    def by_index(text: str) -> str:
        index = int(text)
        if names is None:
            return str(index)
        return _jstr(names[index])

    return _Conv(_jstr, {_SQL_INTEGER: by_index})


def _set_conv(labels: list[str] | None) -> _Conv:
    def by_mask(text: str) -> str:
        mask = int(text)
        if labels is None:
            return str(mask)
        if mask >> len(labels):
            raise ValueError(f"SET value {mask} has bits beyond its {len(labels)} labels")
        return json.dumps([m for bit, m in enumerate(labels) if mask >> bit & 1], ensure_ascii=False)

    def by_labels(text: str) -> str:
        return json.dumps(text.split(",") if text else [], ensure_ascii=False)

    return _Conv(by_labels, {_SQL_BIT: by_mask})


def _timestamp_conv(zone: tzinfo | None) -> _Conv:
    if zone is None:
        return _Conv(_jstr)

    @lru_cache(maxsize=4096)
    def to_utc(local: str) -> str:
        if local.startswith("0000-00-00"):
            return local
        naive = datetime.strptime(local, "%Y-%m-%d %H:%M:%S")
        t = calendar.timegm(naive.replace(tzinfo=zone).utctimetuple())
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")

    return _Conv(lambda text: _jstr(to_utc(text[:19]) + text[19:]))


# Decimal(text) formats back to exactly this text (no exponent, sign, leading zero or other
# digits to normalise); Canal's and pycanal's DECIMAL texts (BigDecimal.toPlainString) are so.
_PLAIN_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?").fullmatch


def _decimal(text: str) -> str:
    if _PLAIN_DECIMAL(text):
        return '"' + text + '"'
    return f'"{Decimal(text):f}"'


def _int(text: str) -> str:
    if text.isascii() and text.isdigit() and (text[0] != "0" or len(text) == 1):
        return text  # already what str(int(text)) gives
    return str(int(text))


def _column_conv(mysql_type: str, zone: tzinfo | None) -> _Conv:
    """The converter of one Canal ``mysqlType`` (``int(11) unsigned``, ``enum('a','b')``, ...)."""
    low = mysql_type.strip().lower()
    base = low.split("(", 1)[0].split(None, 1)[0] if low else ""
    if base in _INT_NAMES or base == "year":
        return _Conv(_int)
    if base in ("decimal", "numeric", "dec", "fixed"):
        return _Conv(_decimal)
    if base in ("float", "double", "real"):
        return _Conv(lambda text: repr(float(text)))
    if base in _TEXT_TEMPORAL:
        return _Conv(_jstr)
    if base == "timestamp":
        return _timestamp_conv(zone)
    if base == "enum":
        return _enum_conv(parse_labels(mysql_type) if "(" in low else None)
    if base == "set":
        return _set_conv(parse_labels(mysql_type) if "(" in low else None)
    if base == "json":
        return _Conv(str)
    if base in _TEXT_TYPES:
        return _TEXT_OR_BYTES
    raise ValueError(f"unknown mysqlType {mysql_type!r}")


def _zone(timezone: str | tzinfo | None) -> tzinfo | None:
    if timezone is None or (isinstance(timezone, str) and timezone.upper() in ("UTC", "Z", "+00:00")):
        return None
    return ZoneInfo(timezone) if isinstance(timezone, str) else timezone


# Errors a value conversion raises: reported as RowsError with the column and the position.
_VALUE_ERRORS = (ValueError, IndexError, UnicodeEncodeError)
_ROW_OPS = {pb.INSERT: "INSERT", pb.UPDATE: "UPDATE", pb.DELETE: "DELETE"}
# (name, mysqlType, isKey) of each column of one row image
_Layout = tuple[tuple[str, str, bool], ...]
# read(rowDatas, pks, befores, afters): appends the JSON texts of each row while its images have
# the layout the code was compiled for; returns at the first row that has another column count.
_Reader = Callable[[Iterable[Any], list, list, list], None]


def _layout(columns: Iterable[Any]) -> _Layout:
    return tuple((c.name, c.mysqlType, c.isKey) for c in columns)


def _joined(parts: list[tuple[str, str]]) -> str:
    """Code joining '{', each (literal, variable) pair, ',' between pairs, and '}'."""
    if not parts:
        return repr("{}")
    items = []
    for i, (literal, var) in enumerate(parts):
        items += [repr(("{" if i == 0 else ",") + literal), var]
    return f"join(({', '.join(items)}, '}}'))"


def entry_row_count(entry: pb.Entry, accepts: TableFilter | None) -> int:
    """How many row indexes ``EntryRows`` gives ``entry`` at its position (rows of a table the
    filter takes): what a stream cut inside a position passes on as ``resume``."""
    if entry.entryType != pb.ROWDATA:
        return 0
    change = pb.RowChange.FromString(entry.storeValue)
    h = entry.header
    if change.eventType not in _ROW_OPS or (
        accepts is not None and not accepts.accepts(h.schemaName, h.tableName)
    ):
        return 0
    return len(change.rowDatas)


class EntryRows(_RowSource["pb.Entry | bytes"]):
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
        self._readers: dict[tuple[str, _Layout, _Layout], _Reader] = {}

    @property
    def gtid(self) -> str | None:
        return self._b.gtid

    @property
    def resume(self) -> tuple[str, int, int]:
        return self._b.resume

    def _runs(self, entries: Iterable[pb.Entry | bytes]) -> Iterator[_Run]:
        b = self._b
        for entry in entries:
            if isinstance(entry, bytes | bytearray | memoryview):
                entry = pb.Entry.FromString(entry)
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
                op = _ROW_OPS.get(change.eventType)
                if op is not None:
                    run = self._run(h, op, change.rowDatas)
                    if run is not None:
                        yield run
                elif is_ddl(change.sql):
                    session = change.ddlSchemaName or None
                    yield from b.ddl_runs(change.sql, session, 0, h.logfileName, h.logfileOffset,
                                          h.executeTime // 1000)  # fmt: skip
                    b.gtid = None

    def _run(self, h: pb.Header, op: str, datas: Any) -> _Run | None:
        b = self._b
        schema, table = h.schemaName, h.tableName
        if not datas or not b.wanted(schema, table):
            return None
        pks: list[str | None] = []
        befores: list[str | None] = []
        afters: list[str | None] = []
        try:
            while len(pks) < len(datas):
                done = len(pks)
                self._reader(op, datas[done])(datas[done:] if done else datas, pks, befores, afters)
        except _VALUE_ERRORS:
            self._check(op, datas[len(pks)], f"{schema}.{table} at {h.logfileName}:{h.logfileOffset}")
            raise
        file, offset = h.logfileName, h.logfileOffset
        return _Run(op, schema, table, pks, befores, afters, file, offset, b.take(file, offset, len(pks)),
                    b.gtid, h.executeTime // 1000, None, None)  # fmt: skip

    def _conv(self, mysql_type: str) -> _Conv:
        conv = self._convs.get(mysql_type)
        if conv is None:
            conv = self._convs[mysql_type] = _column_conv(mysql_type, self._zone)
        return conv

    def _check(self, op: str, rd: Any, where: str) -> None:
        """Convert one row column by column, in the compiled reader's order: raise the first
        failure as RowsError naming the column."""
        images = ([rd.beforeColumns] if op != "INSERT" else []) + (
            [rd.afterColumns] if op != "DELETE" else []
        )
        for columns in images:
            for c in columns:
                if not c.isNull:
                    try:
                        conv = self._conv(c.mysqlType)
                        (conv.by_sql_type or {}).get(c.sqlType, conv.fn)(c.value)
                    except _VALUE_ERRORS as exc:
                        raise RowsError(f"column {c.name!r} ({c.mysqlType}) of {where}: {exc}") from None

    def _reader(self, op: str, rd: Any) -> _Reader:
        """The compiled reader of rows laid out as ``rd`` (cached per layout).

        Only the column count of each row is checked against the layout: Canal
        (``LogEventConvert.parseOneRow``) and pycanal (``convert._image``) give every row of a
        RowChange the columns of the event's column bitmap, in table order, each named and typed
        by the event's table metadata, so within a RowChange names, ``mysqlType`` and ``isKey``
        repeat (``isNull``, ``value`` and ``sqlType`` do not: they are read per row). A row with
        another count gets its own reader.
        """
        key = (
            op,
            _layout(rd.beforeColumns) if op != "INSERT" else (),
            _layout(rd.afterColumns) if op != "DELETE" else (),
        )
        read = self._readers.get(key)
        if read is None:
            if len(self._readers) >= 256:
                self._readers.clear()
            read = self._readers[key] = self._compile(*key)
        return read

    def _compile(self, op: str, before: _Layout, after: _Layout) -> _Reader:
        ns: dict[str, Any] = {"join": "".join}
        body: list[str] = []
        images: dict[str, str] = {}
        keys: dict[str, str] = {}  # '"name":' -> text variable; the before image's first, as in a dict merge
        for tag, field, layout, used in (
            ("b", "beforeColumns", before, op != "INSERT"),
            ("a", "afterColumns", after, op != "DELETE"),
        ):
            if not used:
                images[tag] = "None"
                continue
            body += [f"cs = rd.{field}", f"if len(cs) != {len(layout)}:", "    return"]
            if layout:
                body.append(f"{', '.join(f'{tag}{i}' for i in range(len(layout)))}, = cs")
            parts = []
            for i, (name, mysql_type, is_key) in enumerate(layout):
                c, f, t = f"{tag}{i}", f"F{tag}{i}", f"t{tag}{i}"
                try:
                    conv = self._conv(mysql_type)
                except _VALUE_ERRORS as exc:
                    conv = _Conv(_raising(exc))
                ns[f] = conv.fn
                value = f"{f}({c}.value)"
                if conv.by_sql_type:
                    ns[f"G{tag}{i}"] = conv.by_sql_type.get
                    value = f"G{tag}{i}({c}.sqlType, {f})({c}.value)"
                body.append(f"{t} = 'null' if {c}.isNull else {value}")
                literal = _jstr(name) + ":"
                parts.append((literal, t))
                if is_key:
                    keys[literal] = t
            images[tag] = _joined(parts)
        pk = _joined(list(keys.items())) if keys else "None"
        lines = [
            "def read(datas, pks, befores, afters):",
            "    pk_, before_, after_ = pks.append, befores.append, afters.append",
            "    for rd in datas:",
            *("        " + line for line in body),
            f"        pk_({pk})",
            f"        before_({images['b']})",
            f"        after_({images['a']})",
        ]
        exec(
            compile("\n".join(lines) + "\n", f"<entry rows {op} {len(before)}/{len(after)} cols>", "exec"), ns
        )
        return ns["read"]


def _raising(exc: Exception) -> _Text:
    """The converter of a ``mysqlType`` that has none: its values (not NULL) raise the error."""

    def conv(text: str) -> str:
        raise exc.with_traceback(None)

    return conv
