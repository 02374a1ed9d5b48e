"""A snapshot chunk's key range carried to a current-state table: the keys the source did not
have when the chunk was read are deleted.

A chunk's ``CHUNK`` row (after its ``READ`` rows, at their position) bounds its key range. The
lake's rows in that range, and those the batch upserted before it, that are not among the chunk's
rows and not changed after it were gone from the source: ``snapshot_ranges`` adds their deletes to
the MERGE source. "After" is in the rows' order, not by position: a round applies its
micro-batches one after another, and a later one brings the changes of the keys a connectorx read
left out (its window's, at positions before the chunk's) after the chunk. Only where the lake
orders the key as the source does (``ranged_key``: integers, DECIMAL, dates, times with a date,
bytes) or the chunk is the whole table; a table of another key is emptied where the snapshot
declares it (``current_state``).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.parse.meta import Table

from .arrow import arange, in_range, take
from .batch import BatchRows
from .cow import KeyedTable
from .merge_source import OP, MergeSource
from .types import arrow_type

__all__ = ["chunk_bound", "ranged_key", "snapshot_ranges"]


def ranged_key(t: Table) -> bool:
    """Whether the lake orders ``t``'s key as the source does (integers, DECIMAL, dates, times with
    a date, bytes), so that a snapshot chunk's key range (a ``CHUNK`` row) is tested here."""
    by_name = {c.name: c for c in t.columns}
    return bool(t.primary_key) and all(
        name in by_name and _ordered_as_source(arrow_type(by_name[name])) for name, _ in t.primary_key
    )


def _ordered_as_source(a: pa.DataType) -> bool:
    return (
        pa.types.is_integer(a) or pa.types.is_decimal(a) or pa.types.is_date32(a) or pa.types.is_timestamp(a)
        or pa.types.is_binary(a)
    )  # fmt: skip


def snapshot_ranges(
    plan: MergeSource, target: KeyedTable, rows: BatchRows, idx: pa.Array, chunks: pa.Array, source: pa.Table
) -> pa.Table:
    """``source`` (of the rows ``idx``) with deletes for the keys each snapshot chunk (the
    ``CHUNK`` rows ``chunks``) shows the source did not have at its position: in the chunk's key
    range, in the lake or upserted by the batch's earlier rows, not among the chunk's ``READ``
    rows and not changed after it."""
    if not plan.readable:
        return source  # a key read one by one (FLOAT, ...): emptied at its declaration if the lake had it
    keys = [c.name for c in plan.keys]
    op = source.column(OP)
    upserted = source.filter(pc.equal(op, "U")).select(keys)
    gone = []
    ranged = ranged_key(plan.table)
    for c in chunks.to_pylist():
        at = (rows.file[c], rows.offset[c])
        bounds = json.loads(rows.columns["after"][c].as_py())
        if not ranged and (bounds["lower"] is not None or bounds["upper"] is not None):
            continue  # a range of keys the lake orders otherwise: emptied at its declaration
        low, high = (chunk_bound(plan, bounds[end]) for end in ("lower", "upper"))
        lake = target.key_rows(low and low[0].as_py(), high and high[0].as_py()).cast(upserted.schema)
        candidates = pa.concat_tables([lake, upserted])
        candidates = candidates.filter(in_range([candidates.column(k) for k in keys], low, high))
        if not candidates.num_rows:
            continue
        # After the CHUNK row in the rows' order (the module docstring), not by position.
        later = idx.filter(pc.greater(idx, c))
        position = rows.columns["position"]
        reads = idx.filter(
            pc.and_(
                pc.equal(rows.columns["op"].take(idx), "READ"),
                pc.and_(pc.equal(position.field("offset").take(idx), at[1]),
                        pc.equal(position.field("file").take(idx), at[0])),
            )
        )  # fmt: skip
        updates = later.filter(pc.equal(rows.columns["op"].take(later), "UPDATE"))
        keep = pa.concat_tables([
            plan.typed_keys(take(rows.columns["pk"], reads)),
            plan.typed_keys(take(rows.columns["pk"], later)),
            plan.typed_keys(take(rows.columns["before"], updates), images=True),
        ]).cast(upserted.schema)  # fmt: skip
        gone.append(candidates.join(keep, keys, join_type="left anti"))
    if not gone:
        return source
    drop = pa.concat_tables(gone).group_by(keys, use_threads=False).aggregate([])
    if not drop.num_rows:
        return source
    numbered = source.select(keys).append_column("__row", arange(source.num_rows))
    hit = numbered.join(drop, keys, join_type="inner").column("__row")
    kept = source.filter(
        pc.invert(pc.and_(pc.is_in(arange(source.num_rows), value_set=hit), pc.equal(op, "U")))
    )
    extra = drop.join(source.filter(pc.equal(op, "D")).select(keys), keys, join_type="left anti")
    more = pa.table(
        {
            f.name: extra.column(f.name) if f.name in keys else pa.nulls(extra.num_rows, f.type)
            for f in plan.schema
        }
        | {OP: pa.array(["D"] * extra.num_rows, pa.string())}
    )
    return pa.concat_tables([kept, more.cast(kept.schema)])  # upserts still first


def chunk_bound(plan: MergeSource, bound: str | list | None) -> list[pa.Scalar] | None:
    """A ``CHUNK`` row's bound as the current-state table types its key: from its key image, or
    (the integer list of lakes written before images) from the numbers."""
    if bound is None:
        return None
    if isinstance(bound, list):
        return [pa.scalar(v, plan.schema.field(c.name).type) for v, c in zip(bound, plan.keys, strict=True)]
    key = plan.typed_keys(pa.array([bound], pa.string()))
    return [key.column(c.name)[0] for c in plan.keys]
