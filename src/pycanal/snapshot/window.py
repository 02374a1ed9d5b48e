"""A chunk read by connectorx, made exact by the binlog around the read (DBLog's watermarks).

connectorx (Rust: MySQL's binary protocol straight into Arrow columns) reads a 50,000-row chunk
with an eighth of PyMySQL's CPU, but on its own connection: its rows are not at a known binlog
position. So the read is bracketed, without writing anything to the source:

1. L: the ``binlog_snapshot_position`` of a consistent snapshot opened and closed just before the
   read. Every transaction before L had committed, so the read sees it.
2. The read, one ``SELECT`` (one InnoDB read view).
3. H: the binlog's end after the read (``SHOW MASTER STATUS``). MariaDB writes a transaction to
   the binlog before it commits in the engine, so every transaction the read saw lies before H.
4. The binlog window (L, H] read over a replication connection of its own (its ``server_id`` must
   differ from every other replica's: a second dump with the same id ends the first, MDEV-11177).
   The keys of the table changed there are dropped from the chunk.

A key left in the chunk did not change between L and H, so its row (or its absence) is the same at
every point of the window: the chunk is the key range's rows exactly as of H, and the changes of
the dropped keys come with the stream. A DDL on the table inside the window makes the read start
over (the select list and the window's row images would not agree).

Values are selected in forms connectorx carries exactly and brought to the binlog decoder's form
(as :func:`pycanal.snapshot.read_chunk` gives them): integers and text stay Arrow arrays, the rest
become Python values (``Decimal`` from the decimal's text, the FLOAT's shortest round trip,
TIMESTAMP from ``UNIX_TIMESTAMP`` written out in UTC, BIT as an integer, SET as its labels, INET
and UUID and GEOMETRY in their binary form).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.binlog import events as ev
from pycanal.binlog.decoder import EventDecoder
from pycanal.binlog.rows import MISSING
from pycanal.binlog.tablemap import TableMap
from pycanal.binlog.values import float32
from pycanal.mysql.connection import ReplicaConnection
from pycanal.mysql.errors import MysqlError
from pycanal.parse.ddl import is_ddl
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta.history import SchemaHistory
from pycanal.protocol.position import binlog_file_order

from .chunks import INTEGER_TYPES, Chunk, chunk_where
from .reader import (
    BINARY_TYPES,
    GEOMETRY_TYPES,
    TEXT_TYPES,
    SnapshotError,
    Source,
    set_labels,
    snapshot_position,
)
from .tables import SourceColumn, SourceTable, quote, text

__all__ = ["ChunkColumns", "changed_keys", "read_chunk_window", "select_list"]

_RETRIES = 3  # reads whose window holds a DDL on the table, before giving up


@dataclass(frozen=True)
class ChunkColumns:
    """A chunk's rows as columns (table column order; an Arrow array or a list of values in the
    binlog decoder's form), exactly as of binlog position (file, pos), read at ``seconds`` (the
    source's clock); ``dropped`` rows left out because their key changed in the read's window,
    which began at ``low``."""

    table: SourceTable
    chunk: Chunk
    file: str
    pos: int
    seconds: int
    columns: list[pa.Array | list]
    dropped: int
    low: tuple[str, int]

    @property
    def num_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


_EPOCH = datetime(1970, 1, 1)


def _timestamp(fsp: int) -> Callable[[str], str]:
    """``UNIX_TIMESTAMP``'s text -> the TIMESTAMP's UTC text with ``fsp`` digits (0: the zero value)."""
    zero = "0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")
    unit = Decimal(1).scaleb(-fsp)

    def conv(v: str) -> str:
        d = Decimal(v)
        if d == 0:
            return zero
        seconds = int(d)
        out = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")
        return out + "." + str((d - seconds).quantize(unit))[2:] if fsp else out

    return conv


def _fsp(column_type: str) -> int:
    m = re.search(r"\((\d+)\)", column_type)
    return int(m.group(1)) if m else 0


def _column(c: SourceColumn) -> tuple[str, Callable[[Any], Any] | None]:
    """The select expression of a column for connectorx and the converter of its non-NULL values
    (None: the Arrow array is the decoder's form already, or its Python values are)."""
    name, t = quote(c.name), c.data_type
    if t in INTEGER_TYPES or t in TEXT_TYPES or t in BINARY_TYPES or t in ("enum", "double", "real"):
        return name, None
    if t in ("decimal", "numeric"):
        return f"CAST({name} AS CHAR)", Decimal  # connectorx rounds past 10 places, fails past 28 digits
    if t == "float":
        return f"{name} + 0e0", float32  # widened to DOUBLE, then the FLOAT's shortest round trip
    if t == "bit":
        return f"CAST({name} AS UNSIGNED)", None
    if t in ("date", "datetime", "time"):
        return f"CAST({name} AS CHAR)", None  # zero dates and TIMEs past 24h fail as temporal types
    if t == "timestamp":
        # the stored UTC instant whatever the session's time zone (connectorx cannot set one)
        return f"CAST(UNIX_TIMESTAMP({name}) AS CHAR)", _timestamp(_fsp(c.column_type))
    if t == "set":
        return name, set_labels
    if t in GEOMETRY_TYPES or t in ("inet4", "inet6", "uuid"):
        return f"CAST({name} AS BINARY)", None  # the binlog's form; connectorx cannot read GEOMETRY
    raise ValueError(f"column {c.name} has type {c.column_type}, which the snapshot cannot read yet")


def select_list(table: SourceTable) -> tuple[list[str], list[Callable[[Any], Any] | None]]:
    """The select expressions of ``table``'s columns for connectorx and their value converters."""
    exprs, convs = [], []
    for c in table.columns:
        try:
            expr, conv = _column(c)
        except ValueError as exc:
            raise SnapshotError(f"{table}: {exc}") from None
        exprs.append(expr)
        convs.append(conv)
    return exprs, convs


def _decoder_form(column: pa.Array, conv: Callable[[Any], Any] | None) -> pa.Array | list:
    """Integers and text stay Arrow arrays; other values become the decoder's Python values."""
    if conv is None:
        kind = column.type
        native = pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
        return column if native else column.to_pylist()
    return [None if v is None else conv(v) for v in column.to_pylist()]


def _read_columns(conn: Any, source: Source, table: SourceTable, chunk: Chunk) -> list[pa.Array | list]:
    import connectorx as cx  # the spark extra; only executors reading chunks need it

    exprs, convs = select_list(table)
    where, args = chunk_where(table, chunk)
    with conn.cursor() as cur:  # connectorx takes no parameters: the bounds escaped by PyMySQL
        where = text(cur.mogrify(where, args)) if args else where
    sql = f"SELECT {', '.join(exprs)} FROM {table.qualified} WHERE {where}"
    try:
        result = cx.read_sql(source.url(table.schema), sql, return_type="arrow")
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - connectorx's Rust panics are BaseExceptions
        raise SnapshotError(f"{chunk} from {source.host}:{source.port}: connectorx: {exc}") from None
    if result.num_columns != len(convs):
        raise SnapshotError(f"{chunk}: connectorx returned {result.num_columns} columns for {len(convs)}")
    return [_decoder_form(result.column(i).combine_chunks(), conv) for i, conv in enumerate(convs)]


def _master_position(conn: Any) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    if not row:
        raise SnapshotError("the source reports no binlog position (SHOW MASTER STATUS): is its binlog on?")
    return text(row[0]), int(text(row[1]))


def _before(a: tuple[str, int], b: tuple[str, int]) -> bool:
    return (binlog_file_order(a[0]), a[1]) < (binlog_file_order(b[0]), b[1])


def _hashable(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v  # a SET's labels


def _key(row: tuple, key: tuple[int, ...], fallback: tuple | None = None) -> tuple:
    out = []
    for i in key:
        v = row[i]
        if v is MISSING and fallback is not None:
            v = fallback[i]  # a MINIMAL after image leaves out an unchanged key
        out.append(_hashable(v))
    return tuple(out)


def _rows_keys(e: ev.RowsEvent, key: tuple[int, ...]) -> Iterable[tuple]:
    for r in e.rows:
        if e.kind == "UPDATE":
            before, after = r
            yield _key(before, key)
            yield _key(after, key, before)  # a key change: the old key and the new one
        else:
            yield _key(r, key)


def changed_keys(
    source: Source,
    server_id: int,
    table: SourceTable,
    low: tuple[str, int],
    high: tuple[str, int],
    *,
    timeout: float = 60.0,
) -> set[tuple] | None:
    """The primary keys (tuples in key order, the decoder's values) of ``table``'s rows changed in
    the binlog between ``low`` and ``high`` (both transaction boundaries), read over a replication
    connection registering as ``server_id``; None when a DDL on the table lies in between."""
    history: SchemaHistory | None = None

    def complete(tm: TableMap) -> TableMap:
        """The TABLE_MAP with names, signedness and charsets (binlog_row_metadata below FULL)."""
        nonlocal history
        if tm.names is not None or tm.schema != table.schema or tm.table != table.name:
            return tm
        if history is None:
            exact = f"{re.escape(table.schema)}\\.{re.escape(table.name)}"
            history = SchemaHistory(
                None, connect=lambda: repl.control_connection(), filter=TableFilter(exact)
            )
            history.start(low)
        return history.table_meta(tm)

    repl = ReplicaConnection(
        source.host,
        source.port,
        source.user,
        source.password,
        server_id=server_id,
        heartbeat_period=0,
        read_timeout=timeout,
        decoder=EventDecoder(f"{source.host}:{source.port}", table_meta=complete),
        kill_on_close=False,  # a non-blocking dump ends by itself at the binlog's end
        annotate_rows=False,
        ssl=source.tls.context,
        tls_preferred=source.tls.preferred,
    )
    keys: set[tuple] = set()
    name = table.name.lower()
    try:
        repl.dump(low[0], low[1], non_blocking=True)
        # MariaDB only (L needs binlog_snapshot_position): its compressed rows events decode as
        # rows events, and MySQL's TRANSACTION_PAYLOAD never comes.
        for e in repl.events():
            if isinstance(e, ev.RowsEvent):
                tm = e.table_map
                if tm is not None and tm.schema == table.schema and tm.table == table.name:
                    keys.update(_rows_keys(e, table.key))
            elif isinstance(e, ev.QueryEvent) and is_ddl(e.query) and name in e.query.lower():
                return None
            at = repl.position
            if at is not None and not _before((at.file, at.position), high):
                break
        else:
            raise SnapshotError(
                f"{table}: the binlog ended before {high[0]}:{high[1]}, the position after the chunk's read"
            )
    finally:
        repl.close()
        if history is not None:
            history.close()
    return keys


def _drop(table: SourceTable, columns: list[pa.Array | list], keys: set[tuple]) -> tuple[list, int]:
    """``columns`` without the rows whose key is in ``keys``."""
    key_values = []
    for i in table.key:
        c = columns[i]
        key_values.append([_hashable(v) for v in (c.to_pylist() if isinstance(c, pa.Array) else c)])
    keep = [k not in keys for k in zip(*key_values, strict=True)]
    dropped = keep.count(False)
    if not dropped:
        return columns, 0
    mask = pa.array(keep)
    out: list[pa.Array | list] = []
    for c in columns:
        out.append(
            pc.filter(c, mask) if isinstance(c, pa.Array) else [v for v, k in zip(c, keep, strict=True) if k]
        )
    return out, dropped


def read_chunk_window(
    conn: Any, source: Source, table: SourceTable, chunk: Chunk, server_id: int
) -> ChunkColumns:
    """Read ``chunk`` of ``table`` (which has a primary key) with connectorx, exact as of the
    binlog position after the read (``conn``: a :func:`pycanal.snapshot.reader.connect`
    connection for positions; ``server_id``: the window's replication connection, unique among the
    source's replicas)."""
    if not table.key:
        raise SnapshotError(f"{chunk}: a table without a primary key is read in a consistent snapshot")
    for _ in range(_RETRIES):
        low_file, low_pos, seconds = snapshot_position(conn, chunk)
        low = (low_file, low_pos)
        columns = _read_columns(conn, source, table, chunk)
        high = _master_position(conn)
        if not _before(low, high):
            return ChunkColumns(table, chunk, high[0], high[1], seconds, columns, 0, low)
        try:
            changed = changed_keys(source, server_id, table, low, high)
        except MysqlError as exc:
            raise SnapshotError(
                f"{chunk}: reading the binlog window {low[0]}:{low[1]} - {high[0]}:{high[1]} from "
                f"{source.host}:{source.port} as replica {server_id} failed: {exc} (the connectorx reader "
                "needs REPLICATION SLAVE and a server_id no other replica uses; snapshotReader=pymysql does not)"
            ) from exc
        if changed is None:
            continue  # a DDL on the table during the read: read it again
        dropped = 0
        if changed:
            columns, dropped = _drop(table, columns, changed)
        return ChunkColumns(table, chunk, high[0], high[1], seconds, columns, dropped, low)
    raise SnapshotError(f"{chunk}: a DDL on the table lay in the window of {_RETRIES} reads in a row")
