"""``format("canal")``'s initial snapshot: chunks planned in the runner, read in executors.

Options: ``snapshot`` (``initial``: the existing rows of the filter's tables first, when the query
starts from no checkpoint; ``never``, the default), ``source`` (HOST:PORT of the MySQL/MariaDB),
``sourceUser``, ``sourcePassword``, ``snapshotChunkRows`` (rows per chunk, 20000),
``snapshotParallelism`` (chunks per micro-batch, each one partition: 2).

The snapshot's progress lives in the stream's offsets, next to the binlog position:
``"snap": {"left": [[db, table], ...], "lower": <key>, "read": [<chunk>, ...]}``: the tables not
finished (the first one being split), the lower bound of its next chunk, and the chunks the
micro-batch ending at this offset reads. The runner splits lazily, a few chunks per micro-batch
(the next boundary is one index query, ``pycanal.snapshot.chunks``), so offsets stay small, a
replayed micro-batch reads the same chunks, and a committed chunk is never read again.

The snapshot's first micro-batch reads nothing of the stream: one partition gives a ``CREATE
TABLE IF NOT EXISTS`` DDL row per table (``SHOW CREATE TABLE``), so the lake's schema model knows
the tables that existed before the stream before any of their changes comes. Then a chunk
partition is read in an executor straight from the source (``read_chunk``: a consistent snapshot
and its binlog position P); its rows are ``READ`` change rows at P. The rows of a chunk read while
the stream is still before P are applied before the stream's changes up to P, which replay over
them and end on the same rows (docs/snapshot.md).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from pycanal.parse.filter import TableFilter
from pycanal.snapshot import (
    ChunkRead,
    SchemaRead,
    SourceTable,
    describe,
    list_tables,
    read_chunk,
    read_schema,
)
from pycanal.snapshot.chunks import INTEGER_TYPES, RANGE_KEY_TYPES, Chunk, next_boundary
from pycanal.snapshot.reader import connect
from pycanal.snapshot.tables import quote

from .rows import SnapshotRows

__all__ = [
    "SnapshotOptions",
    "SnapshotPartition",
    "SnapshotPlanner",
    "read_snapshot_partition",
    "snapshot_options",
    "snapshot_partitions",
]


class SnapshotOptions(NamedTuple):
    host: str
    port: int
    user: str
    password: str
    chunk_rows: int
    parallelism: int


def snapshot_options(options: dict[str, str], number: Any) -> SnapshotOptions | None:
    """The snapshot options (``options``: lower-case keys; ``number(options, name, default)``
    reads a positive integer), None with ``snapshot=never``."""
    mode = options.get("snapshot", "never").lower()
    if mode not in ("initial", "never"):
        raise ValueError(f"format('canal'): option snapshot must be 'initial' or 'never', got {mode!r}")
    if mode == "never":
        return None
    if not options.get("filter"):
        raise ValueError(
            "format('canal'): snapshot=initial needs option filter: the tables to snapshot (the server's own "
            "filter is not visible to a client)"
        )
    source = options.get("source", "")
    host, _, port = source.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(
            f"format('canal'): snapshot=initial needs option source as HOST:PORT, got {source!r}"
        )
    return SnapshotOptions(
        host.strip("[]"),
        int(port),
        options.get("sourceuser", ""),
        options.get("sourcepassword", ""),
        number(options, "snapshotChunkRows", 20_000),
        number(options, "snapshotParallelism", 2),
    )


# Key values in offsets: JSON-able (a bytes value as {"b64": ...}).
def _encode(key: tuple | None) -> list | None:
    if key is None:
        return None
    return [{"b64": base64.b64encode(v).decode()} if isinstance(v, bytes | bytearray) else v for v in key]


def _decode(key: list | None) -> tuple | None:
    if key is None:
        return None
    return tuple(base64.b64decode(v["b64"]) if isinstance(v, dict) else v for v in key)


class SnapshotPlanner:
    """The runner's side: the snapshot state after the next micro-batch."""

    def __init__(self, opts: SnapshotOptions, accepts: TableFilter | None) -> None:
        self.opts = opts
        self.accepts = accepts
        self._conn: Any = None
        self._tables: dict[tuple[str, str], SourceTable] = {}
        self._steps: dict[tuple[str, str], int | None] = {}  # even-range step of a dense integer key

    def _connection(self) -> Any:
        if self._conn is None:
            o = self.opts
            self._conn = connect(o.host, o.port, o.user, o.password)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def start(self) -> dict[str, Any]:
        """The first state: every table of the filter left, none split; its micro-batch reads the
        tables' CREATE TABLE statements (``schema``) and nothing of the stream."""
        tables = [list(t) for t in list_tables(self._connection(), self.accepts)]
        return {"left": tables, "lower": None, "schema": tables}

    def advance(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """The state after the next micro-batch's chunks (its ``read``), None when the snapshot
        has nothing left to read."""
        left = [tuple(t) for t in state["left"]]
        lower = _decode(state.get("lower"))
        read: list[list] = []
        while left and len(read) < self.opts.parallelism:
            schema, name = left[0]
            table = self._table(schema, name)
            upper = self._upper(table, lower) if table is not None else None
            if table is not None:
                read.append([schema, name, _encode(lower), _encode(upper)])
            if upper is None:
                left.pop(0)
                lower = None
            else:
                lower = upper
        if not read:
            return None
        return {"left": [list(t) for t in left], "lower": _encode(lower), "read": read}

    def _table(self, schema: str, name: str) -> SourceTable | None:
        t = self._tables.get((schema, name))
        if t is None:
            try:
                t = self._tables[(schema, name)] = describe(self._connection(), schema, name)
            except LookupError:
                return None  # dropped since the snapshot started: the stream has its DROP
        return t

    def _upper(self, table: SourceTable, lower: tuple | None) -> tuple | None:
        if not table.key or any(table.columns[i].data_type not in RANGE_KEY_TYPES for i in table.key):
            return None  # one chunk: the whole table
        step = self._step(table)
        if step is not None:
            if lower is None:
                low = self._min(table)
                return None if low is None else (str(low + step),)
            upper = int(lower[0]) + step
            return None if upper > self._max(table) else (str(upper),)
        return next_boundary(self._connection(), table, lower, self.opts.chunk_rows)

    def _step(self, table: SourceTable) -> int | None:
        key = (table.schema, table.name)
        if key not in self._steps:
            self._steps[key] = None
            if len(table.key) == 1 and table.columns[table.key[0]].data_type in INTEGER_TYPES:
                low, high = self._min(table), self._max(table)
                if low is not None and table.rows_estimate > 0:
                    span = high - low + 1
                    if span <= 4 * table.rows_estimate:
                        self._steps[key] = max(1, -(-self.opts.chunk_rows * span // table.rows_estimate))
        return self._steps[key]

    def _bound(self, table: SourceTable, fn: str) -> int | None:
        col = quote(table.columns[table.key[0]].name)
        with self._connection().cursor() as cur:
            cur.execute(f"SELECT {fn}({col}) FROM {table.qualified}")
            v = cur.fetchone()[0]
        return None if v is None else int(v)

    def _min(self, table: SourceTable) -> int | None:
        return self._bound(table, "MIN")

    def _max(self, table: SourceTable) -> int:
        high = self._bound(table, "MAX")
        return -(2**64) if high is None else high


class SnapshotPartition(InputPartition):
    """One chunk, ``[schema, table, lower, upper]`` as the offset has it; or (``schema``) the
    CREATE TABLE statements of the snapshot's tables, ``[[schema, table], ...]``."""

    def __init__(self, index: int, chunk: list | None = None, schema: list | None = None) -> None:
        super().__init__(index)
        self.chunk, self.schema = chunk, schema


def snapshot_partitions(start: dict[str, Any], end: dict[str, Any], first: int) -> list[SnapshotPartition]:
    """The snapshot partitions of the micro-batch (start, end], numbered from ``first``."""
    snap = end.get("snap")
    if not isinstance(snap, dict) or snap == start.get("snap"):
        return []
    if "schema" in snap:
        return [SnapshotPartition(first, schema=snap["schema"])]
    return [SnapshotPartition(first + i, chunk=c) for i, c in enumerate(snap.get("read", []))]


def read_snapshot_partition(opts: SnapshotOptions, partition: SnapshotPartition) -> Iterator[pa.RecordBatch]:
    """The partition's change rows: a chunk's READ rows, or the tables' CREATE TABLE rows."""
    with connect(opts.host, opts.port, opts.user, opts.password) as conn:
        if partition.schema is not None:
            read: ChunkRead | SchemaRead = read_schema(conn, [(s, t) for s, t in partition.schema])
        else:
            assert partition.chunk is not None
            schema, name, lower, upper = partition.chunk
            chunk = Chunk(schema, name, partition.value, _decode(lower), _decode(upper))
            read = read_chunk(conn, describe(conn, schema, name), chunk)
    yield from SnapshotRows().batches([read])
