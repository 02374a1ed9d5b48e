"""The change row shared by every Spark source: one row per row change or DDL statement, and
what its builders share.

Columns (``row_schema.ROW_SCHEMA`` in Spark, ``ARROW_SCHEMA`` in Arrow, in this order):

* ``op``: INSERT, UPDATE, DELETE, DDL, or READ (a row of the initial snapshot, at the binlog
  position its chunk was read at) and CHUNK (a snapshot chunk's key range, after its READ rows);
* ``database``, ``table``: the changed table (DDL: each table the statement touches, one row
  each; ``table`` is null for database statements);
* ``pk``: the primary key values as a JSON object (``{"id":5}``) taken from the after image
  (before image for DELETE), null when the table has no primary key;
* ``before``, ``after``: the row images as JSON objects keyed by column name, values in the
  canonical form of :mod:`pycanal.parse.canonical` (DECIMAL as an exact string, binary as
  ``{"base64": ...}``, temporal values as the server's text, TIMESTAMP in UTC, SET as a list);
  a column a partial row image does not carry is left out;
* ``position``: ``file``, ``offset`` (of the event), ``row`` (index among the rows at that
  offset) and ``gtid`` (of the transaction, or null); ``(file, offset, row)`` orders all rows;
* ``ts``: the event time (second precision, UTC);
* ``sql``, ``sql_database``: for DDL, the statement and the session's database it ran in
  (needed to resolve unqualified names).

Three builders make them: ``event_rows.EventRows`` from decoded binlog events (the ``binlog``
batch source), ``entry_rows.EntryRows`` from Canal ``Entry`` messages (a Canal or pycanal
server), giving identical rows (docs/spark.md lists the values where the two cannot agree), and
``snapshot_rows.SnapshotRows`` READ rows whose images equal an INSERT's of the same row. Each
gives the rows as ``ChangeRow`` tuples (``rows()``) or as Arrow record batches built column by
column (``batches()``, what the Spark sources yield; equal to ``to_record_batch`` of the rows),
over what this module shares: a builder turns each event into a ``Run`` (the rows of one event
share all columns but ``pk``, ``before``, ``after`` and the row index, so a batch extends those
once per event and builds ``ts`` from integers), numbers rows per position and keeps the GTID
and the filter (``Builder``), and writes values and images as JSON text (``json_text``,
``image_text``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any, Generic, NamedTuple, TypeVar

import pyarrow as pa

from pycanal.binlog.rows import MISSING
from pycanal.parse.canonical import json_value
from pycanal.parse.ddl import parse_ddl
from pycanal.parse.filter import TableFilter

__all__ = [
    "ARROW_SCHEMA",
    "CHUNK",
    "SNAPSHOT_DDL",
    "Builder",
    "ChangeRow",
    "RowPosition",
    "RowSource",
    "RowsError",
    "Run",
    "image_text",
    "json_text",
    "record_batch",
    "run_batches",
    "to_record_batch",
]

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


def record_batch(*columns: Sequence[Any]) -> pa.RecordBatch:
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
    return record_batch(*cols[:6], *pos, *cols[7:])


class Run(NamedTuple):
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


def run_batches(runs: Iterable[Run], size: int) -> Iterator[pa.RecordBatch]:
    """Runs as record batches of ``size`` rows (the last one fewer)."""
    columns: list[list[Any]] = [[] for _ in range(13)]
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 = (c.append for c in columns)
    for r in runs:
        n = len(r.pk)
        if n == 1:  # most events of small transactions: 13 appends, not 13 lists built and extended
            a0(r.op)
            a1(r.database)
            a2(r.table)
            a3(r.pk[0])
            a4(r.before[0])
            a5(r.after[0])
            a6(r.file)
            a7(r.offset)
            a8(r.row)
            a9(r.gtid)
            a10(r.seconds * 1_000_000)
            a11(r.sql)
            a12(r.sql_database)
        else:
            values = (
                [r.op] * n, [r.database] * n, [r.table] * n, r.pk, r.before, r.after, [r.file] * n,
                [r.offset] * n, range(r.row, r.row + n), [r.gtid] * n, [r.seconds * 1_000_000] * n,
                [r.sql] * n, [r.sql_database] * n,
            )  # fmt: skip
            for column, v in zip(columns, values, strict=True):
                column.extend(v)
        while len(columns[0]) >= size:
            yield record_batch(*(c[:size] for c in columns))
            for c in columns:
                del c[:size]
    if columns[0]:
        yield record_batch(*columns)


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


class Builder:
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

    def take(self, file: str, offset: int, n: int, first: int | None = None) -> int:
        """The index of the first of ``n`` (> 0) rows at (file, offset); ``first`` where the rows
        say it (a piece of an entry split across Kafka records, :mod:`pycanal.mq.split`)."""
        if first is not None:
            self._at, self._next = (file, offset), first
        elif (file, offset) != self._at:
            self._at = (file, offset)
            self._next = 0
        row = self._next
        self._next += n
        return row

    def start_at(self, file: str, offset: int) -> None:
        """Number the next rows at (file, offset) from 0: a record that names its position (a flat
        message's ``pycanal.order`` header) numbers its rows the same when it is sent again."""
        self._at, self._next = (file, offset), 0

    def wanted(self, schema: str | None, table: str | None) -> bool:
        return self.accepts is None or self.accepts.accepts(schema, table)

    def ddl_runs(
        self, sql: str, session_db: str | None, sql_mode: int, file: str, offset: int, seconds: int
    ) -> Iterator[Run]:
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
            yield Run("DDL", schema, table, [None], [None], [None], file, offset, self.take(file, offset, 1),
                      self.gtid, seconds, sql, session_db)  # fmt: skip


_In = TypeVar("_In")


class RowSource(ABC, Generic[_In]):
    """``rows()`` and ``batches()``, both over the runs of a builder."""

    _b: Builder

    @abstractmethod
    def _runs(self, source: Iterable[_In]) -> Iterator[Run]: ...

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
        return run_batches(self._runs(source), rows_per_batch)


def json_text(v: Any) -> str:
    """``canonical.json_value`` with its commonest cases first (the row builders' hot path)."""
    t = type(v)
    if t is str:
        return _jstr(v)
    if t is int:
        return str(v)
    if v is None:
        return "null"
    return json_value(v)


def image_text(names: tuple[str, ...], values: tuple) -> str:
    return (
        "{"
        + ",".join([n + json_text(v) for n, v in zip(names, values, strict=True) if v is not MISSING])
        + "}"
    )


# A snapshot chunk's key range (``after``: {"lower": <key image>, "upper": <key image>}, each the
# text of a ``pk`` image of the bound, null: open), after its READ rows at their position: the
# current state's rows in that range that the chunk lacks are deleted there (the source had no
# such row then).
CHUNK = "CHUNK"

# Leads the snapshot's CREATE TABLE rows: the lake takes the table's schema as of that position.
SNAPSHOT_DDL = "/* pycanal snapshot */ "
