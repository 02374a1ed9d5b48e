"""A table's MERGE source: the last change per key of its rows in a micro-batch, as the
current-state table types them.

A DELETE deletes its key, an UPDATE that changes the key deletes the old one, and a key that
comes back later is upserted: the source is the upserted rows, then the deleted keys (the other
columns null), and a column ``OP`` saying which (``U``, ``D``). Two builders give the same source:

* ``read``: the images as pyarrow's JSON reader reads them (``types.read_images``: vectorised),
  the last change per key by Arrow ``group_by``; it raises where that could differ from
  ``json.loads`` (non-canonical images, FLOAT or SET keys, ...);
* ``parse``: the images parsed one by one (``json.loads``), which also says what is wrong where
  something is.

``MergeSource.build`` takes the first for ``SMALL`` rows and more, the second otherwise or when
the first raises.
"""

from __future__ import annotations

import json
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.parse.meta import Column, Table

from .arrow import arange, take
from .batch import ApplyError, BatchRows
from .types import (
    ArrowValues,
    ColumnTypeError,
    InexactRead,
    array_converter,
    arrow_field,
    column_converter,
    json_type,
    read_images,
)

__all__ = ["LAST", "OP", "SMALL", "MergeSource"]

OP = "__pycanal_op"  # the source's column: U (upsert) or D (delete)
LAST = "__pycanal_last"  # with ``last=True``: the row (of the batch) of each key's last change
_UPSERT, _DELETE = pa.scalar("U"), pa.scalar("D")
# Below this many rows a table's images are parsed one by one: pyarrow's JSON reader costs ~1 ms a
# call, which 1-row transactions over 200 tables pay 200 times a micro-batch (3-column table:
# 25 rows 4.3x, 250 rows 1.2x faster one by one; 1,000 rows 1.5x slower).
SMALL = 128
_SCAN = json.JSONDecoder().scan_once  # json.loads' own C scanner, without its three Python calls


class MergeSource:
    """The MERGE sources of one table definition ``t`` (``zero_dates``: ``types``' option):
    ``schema``, the current-state table's; ``keys``, its key columns; ``readable``, whether key
    values read by ``read_images`` compare as parsed ones do (``read`` may be used)."""

    def __init__(self, t: Table, zero_dates: str) -> None:
        try:
            self.convs = [column_converter(c, zero_dates) for c in t.columns]  # values json.loads parsed
            self.builds = [array_converter(c, zero_dates) for c in t.columns]  # values read_images read
            self.schema = pa.schema([arrow_field(c) for c in t.columns])
        except ColumnTypeError as exc:
            raise ApplyError(f"{t.schema}.{t.name}: {exc}") from None
        self.table, self.zero_dates = t, zero_dates
        by_name = {c.name: c for c in t.columns}
        self.keys: list[Column] = [by_name[name] for name, _ in t.primary_key if name in by_name]
        self.readable = len(self.keys) == len(t.primary_key) and all(_readable_key(c) for c in self.keys)
        self.source_schema = self.schema.append(pa.field(OP, pa.string()))

    def build(
        self, database: str, table: str, first: str, idx: pa.Array, rows: BatchRows, *, last: bool = False
    ) -> pa.Table:
        """The source of the rows ``idx`` (of ``database.table``, binlog order; ``first``: where
        its rows start, for messages); ``last``: with a column ``LAST``."""
        if self.readable and len(idx) >= SMALL:
            try:
                return self.read(idx, rows, last=last)
            except (pa.ArrowException, ValueError):
                pass  # parsed one by one instead, which also says what is wrong if anything is
        return self.parse(database, table, first, idx, rows, last=last)

    def typed_keys(self, texts: pa.Array, *, images: bool = False) -> pa.Table:
        """The keys of pk texts (or of whole row images) as the current-state table types them."""
        t = self.table
        names = [c.name for c in self.keys]
        if not len(texts):
            return self.schema.empty_table().select(names)
        read = read_images(texts, t.columns if images else self.keys)
        arrays = []
        for c in self.keys:
            build = self.builds[t.columns.index(c)]
            arrays.append(build(pa.chunked_array(read.column(c.name).chunks, json_type(c))))
        return pa.table(dict(zip(names, arrays, strict=True)))

    def _source(
        self, arrays: list[ArrowValues], upserts: int, deletes: int, last: pa.Array | None = None
    ) -> pa.Table:
        """The upserted rows, then the deleted keys; the order is kept by ``snapshot_ranges``, and
        the writer splits the two by it. ``last``: the rows of their last changes."""
        op = pa.concat_arrays([pa.repeat(_UPSERT, upserts), pa.repeat(_DELETE, deletes)])
        source = pa.Table.from_arrays([*arrays, op], schema=self.source_schema)
        return source if last is None else source.append_column(LAST, last)

    def read(self, idx: pa.Array, rows: BatchRows, *, last: bool = False) -> pa.Table:
        """The source from the images as ``read_images`` reads them, which raises where ``parse``
        could differ (it is the same otherwise)."""
        t = self.table
        names = [f"k{j}" for j in range(len(self.keys))]  # no clash with the columns added below
        op = rows.columns["op"].take(idx)
        pk = read_images(take(rows.columns["pk"], idx), self.keys).rename_columns(names)
        updates = pc.indices_nonzero(pc.equal(op, "UPDATE"))
        old = read_images(take(rows.columns["before"], idx.take(updates)), t.columns)
        old = old.select([c.name for c in self.keys]).rename_columns(names)
        if any(c.null_count for c in pk.columns + old.columns):
            raise InexactRead("a key value is null or missing")
        # The changes in binlog order (seq); an UPDATE that changes its key deletes the old one first.
        row = arange(len(idx))
        changes = pk.append_column("row", row).append_column("delete", pc.equal(op, "DELETE"))
        changes = changes.append_column("seq", pc.add(pc.multiply(row, 2), 1))
        moved = pc.indices_nonzero(
            reduce(
                pc.or_, [pc.not_equal(_comparable(old[k]), _comparable(pk[k].take(updates))) for k in names]
            )
        )
        if len(moved):
            moved_row = updates.take(moved).cast(pa.int64())
            old = (
                old.take(moved)
                .append_column("row", moved_row)
                .append_column("delete", pa.repeat(True, len(moved)))
            )
            changes = pa.concat_tables([changes, old.append_column("seq", pc.multiply(moved_row, 2))])
            changes = changes.take(pc.sort_indices(changes["seq"]))
        # The last change per key, in the order of the keys' first changes.
        at = pa.table({**{k: _comparable(changes[k]) for k in names}, "at": arange(changes.num_rows)})
        per_key = at.group_by(names, use_threads=False).aggregate([("at", "min"), ("at", "max")])
        if per_key.num_rows < changes.num_rows:
            changes = changes.take(per_key["at_max"].take(pc.sort_indices(per_key["at_min"])))
        deletes = changes.filter(changes["delete"])
        upserts = changes.filter(pc.invert(changes["delete"]))["row"].combine_chunks()
        after = read_images(take(rows.columns["after"], idx.take(upserts)), t.columns, complete=True)
        key_of = {c.name: k for c, k in zip(self.keys, names, strict=True)}
        arrays = []
        for c, build in zip(t.columns, self.builds, strict=True):
            k = key_of.get(c.name)
            gone = [pa.nulls(deletes.num_rows, json_type(c))] if k is None else deletes[k].chunks
            arrays.append(build(pa.chunked_array(after[c.name].chunks + gone, json_type(c))))
        at = None
        if last:
            at = idx.take(pa.concat_arrays([upserts, deletes["row"].combine_chunks()])).cast(pa.int64())
        return self._source(arrays, after.num_rows, deletes.num_rows, at)

    def parse(
        self, database: str, table: str, first: str, idx: pa.Array, rows: BatchRows, *, last: bool = False
    ) -> pa.Table:
        """The source from the images parsed one by one (``json.loads``)."""
        t = self.table
        keys = [name for name, _ in t.primary_key]
        names = [c.name for c in t.columns]
        ops, pks, befores, afters = (
            take(rows.columns[c], idx).to_pylist() for c in ("op", "pk", "before", "after")
        )
        row = idx.to_pylist()

        def key_of(image: dict, p: int) -> tuple:
            try:
                return tuple(_hashable(image[k]) for k in keys)
            except KeyError as exc:
                raise ApplyError(
                    f"{database}.{table} at {rows.at(row[p])}: the row has no key column {exc}; the schema model's "
                    f"key is {keys}"
                ) from None

        # Keys are compared as parsed values, whatever the spacing of the JSON texts.
        # key -> ("U", p) or ("D", key values), and p; p: index in row
        final: dict[tuple, tuple[str, Any, int]] = {}
        for p, op in enumerate(ops):
            pk = _loads(pks[p])
            key = key_of(pk, p)
            if op == "UPDATE":
                old = _loads(befores[p])
                old_key = key_of(old, p)
                if old_key != key:  # the key changed: the old one is deleted
                    final[old_key] = ("D", {k: old[k] for k in keys}, p)
            final[key] = ("D", pk, p) if op == "DELETE" else ("U", p, p)
        upserts, deletes, origin, gone = [], [], [], []  # origin, gone: the rows of the upserts, deletes
        for kind, v, p in final.values():
            if kind == "D":
                deletes.append(v)
                gone.append(row[p])
            else:
                origin.append(v)
                image = _loads(afters[v])
                if ops[v] == "READ" and image.keys() != set(names):
                    # A snapshot chunk read after a DDL the stream has not brought here yet (it is
                    # before the chunk's position, so it comes): the row as the model has it now.
                    image = {n: image.get(n) for n in names}
                if len(image) != len(names):
                    raise ApplyError(
                        f"{database}.{table} at {rows.at(row[v])}: the after image has {len(image)} of the "
                        f"{len(names)} columns (binlog_row_image must be FULL for current-state tables)"
                    )
                upserts.append(image)
        arrays = []
        for name, conv in zip(names, self.convs, strict=True):
            try:
                values = [u[name] for u in upserts] + [d.get(name) for d in deletes]
                arrays.append(conv(values))
            except KeyError:
                raise ApplyError(
                    f"{database}.{table} ({first}): the rows have no column `{name}`; the schema model does not "
                    "match the source there"
                ) from None
            except ColumnTypeError as exc:
                where = first
                if exc.index is not None and exc.index < len(origin):
                    where = f"at {rows.at(row[origin[exc.index]])}"
                raise ApplyError(f"{database}.{table} ({where}): {exc}") from None
            except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
                raise ApplyError(f"{database}.{table} ({first}): column `{name}`: {exc}") from None
        at = pa.array([row[p] for p in origin] + gone, pa.int64()) if last else None
        return self._source(arrays, len(upserts), len(deletes), at)


def _readable_key(col: Column) -> bool:
    """Not FLOAT/DOUBLE (-0.0 == 0.0 when parsed) nor SET."""
    t = json_type(col)
    return t in (pa.int64(), pa.uint64(), pa.string()) or pa.types.is_struct(t)


def _comparable(values: pa.Array) -> pa.Array:
    """Key values as compared: a binary value by its base64 text (as the parsed ``{"base64": ...}``)."""
    return pc.struct_field(values, [0]) if pa.types.is_struct(values.type) else values


def _loads(text: Any) -> Any:
    """``json.loads(text)``: an image (one JSON value, nothing around it) scanned directly, what
    is not one through ``json.loads`` itself (the same value, or its error). A micro-batch of
    1-row transactions parses two or three tiny images a row, a tenth of the driver's CPU."""
    try:
        value, end = _SCAN(text, 0)
    except Exception:  # noqa: BLE001 - json.loads says what is wrong
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _hashable(v: Any) -> Any:
    if type(v) is dict:
        return json.dumps(v, sort_keys=True)
    if type(v) is list:
        return tuple(v)
    return v
