"""``SnapshotRows``: READ change rows from snapshot chunks, and a table's CREATE TABLE as a DDL row.

A chunk's rows are at the binlog position it was read at, ``after`` and ``pk`` as an INSERT of the
same row would give them (Debezium's ``r``), each column's value texts built once for all its
rows by Arrow kernels where they can be; after them a ``CHUNK`` row bounds the chunk's key range
(``rows.CHUNK``). A ``read_schema`` gives one DDL row per table, its ``CREATE TABLE IF NOT
EXISTS`` led by ``rows.SNAPSHOT_DDL``: the lake learns the tables that existed before the stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.snapshot.chunks import EXACT_RANGE_TYPES
from pycanal.snapshot.reader import ChunkRead, SchemaRead, decoded
from pycanal.snapshot.window import ChunkColumns

from .arrow import arange
from .rows import (
    ARROW_SCHEMA,
    CHUNK,
    SNAPSHOT_DDL,
    Builder,
    RowsError,
    RowSource,
    Run,
    image_text,
    json_text,
    record_batch,
    run_batches,
)

__all__ = ["SnapshotRows"]


class SnapshotRows(RowSource["ChunkRead | ChunkColumns | SchemaRead"]):
    """READ change rows from snapshot chunks (:func:`pycanal.snapshot.read_chunk`): each row at
    its chunk's binlog position, ``after`` and ``pk`` as an INSERT of the same row would give them
    (Debezium's ``r``); and from a ``read_schema``, one DDL row per table: its ``CREATE TABLE IF
    NOT EXISTS`` (the lake learns tables that existed before the stream). Rows of reads at one
    position are numbered on from each other."""

    def __init__(self, *, resume: tuple[str, int, int] | None = None) -> None:
        self._b = Builder(None, None, resume)

    @property
    def resume(self) -> tuple[str, int, int]:
        return self._b.resume

    def _runs(self, reads: Iterable[ChunkRead | ChunkColumns | SchemaRead]) -> Iterator[Run]:
        for read in reads:
            if isinstance(read, SchemaRead):
                for schema, table, sql in read.creates:
                    sql = _if_not_exists(sql, f"{schema}.{table}")
                    yield Run("DDL", schema, table, [None], [None], [None], read.file, read.pos,
                              self._b.take(read.file, read.pos, 1), None, read.seconds, sql, schema)  # fmt: skip
                continue
            n = _chunk_size(read)
            t = read.table
            if n:
                pks, afters = _chunk_images(read)
                yield Run("READ", t.schema, t.name, pks.to_pylist() if pks is not None else [None] * n,
                          [None] * n, afters.to_pylist(), read.file, read.pos, self._b.take(read.file, read.pos, n),
                          None, read.seconds, None, None)  # fmt: skip
            chunk = self._chunk_run(read, _chunk_bounds(read))
            if chunk is not None:
                yield chunk

    def _chunk_run(self, read: ChunkRead | ChunkColumns, bounds: dict | None) -> Run | None:
        """The chunk's ``CHUNK`` row (numbered after its READ rows) with its ``_chunk_bounds``
        (and its current-state data file, ``chunk_files``), None without them."""
        if bounds is None:
            return None
        t = read.table
        return Run(CHUNK, t.schema, t.name, [None], [None], [json.dumps(bounds)], read.file, read.pos,
                   self._b.take(read.file, read.pos, 1), None, read.seconds, None, None)  # fmt: skip

    def batches(
        self,
        reads: Iterable[ChunkRead | ChunkColumns | SchemaRead],
        rows_per_batch: int = 8192,
        *,
        chunk_file: Callable[[ChunkRead | ChunkColumns, pa.Array], dict | None] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """As ``RowSource.batches``; a chunk's images are built column by column (``_chunk_images``).
        ``chunk_file(read, afters)``: a chunk with a ``CHUNK`` row as a current-state data file
        (``chunk_files.write_chunk_file``), which that row then names."""
        if rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be positive, got {rows_per_batch}")
        for read in reads:
            if isinstance(read, SchemaRead):
                yield from run_batches(self._runs([read]), rows_per_batch)
                continue
            n, t = _chunk_size(read), read.table
            bounds = _chunk_bounds(read)
            if n:
                pks, afters = _chunk_images(read)
                if chunk_file is not None and bounds is not None:
                    file = chunk_file(read, afters)
                    if file is not None:
                        bounds["file"] = file
                first = self._b.take(read.file, read.pos, n)
                for a in range(0, n, rows_per_batch):
                    m = min(rows_per_batch, n - a)
                    nulls = pa.nulls(m, pa.string())
                    yield record_batch(
                        _same("READ", m), _same(t.schema, m), _same(t.name, m),
                        pks.slice(a, m) if pks is not None else nulls, nulls, afters.slice(a, m),
                        _same(read.file, m), _same(read.pos, m, pa.int64()),
                        pc.add(arange(m), first + a).cast(pa.int32()), nulls,
                        _same(read.seconds * 1_000_000, m, _TS), nulls, nulls,
                    )  # fmt: skip
            chunk = self._chunk_run(read, bounds)
            if chunk is not None:
                yield from run_batches([chunk], 1)


_TS, _TEXT = ARROW_SCHEMA.field("ts").type, pa.string()


def _same(value: Any, n: int, kind: pa.DataType = _TEXT) -> pa.Array:
    """``value`` ``n`` times: a chunk's columns that one value fills (built from a Python list of
    8,192 copies: 4.8 ms a batch against 0.5 ms, ~0.5 us a snapshot row)."""
    return pa.repeat(pa.scalar(value, kind), n)


def _chunk_bounds(read: ChunkRead | ChunkColumns) -> dict | None:
    """The ``CHUNK`` row's ``after`` (as a dict) of a chunk whose range a lake can test exactly (keys of
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
        return image_text(names, tuple(decoded(t.columns[i], v) for i, v in zip(t.key, values, strict=True)))

    return {"lower": bound(chunk.lower), "upper": bound(chunk.upper)}


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
    """``json_text`` of each value (non-null texts), by Arrow kernels for integers and plain strings."""
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
    return pa.array([json_text(v) for v in values], pa.string())


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


def _if_not_exists(create: str, where: str) -> str:
    head = "CREATE TABLE "
    if not create.startswith(head):
        raise RowsError(f"SHOW CREATE TABLE of {where} does not start with {head!r}: {create[:80]!r}")
    return SNAPSHOT_DDL + head + "IF NOT EXISTS " + create[len(head) :]
