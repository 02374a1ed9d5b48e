"""Arrow helpers the apply and the current-state writer share: positions, and takes that slice
where the rows they take are blocks of consecutive ones."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["arange", "take", "take_in_blocks"]


def arange(n: int) -> pa.Array:
    """0, 1, ..., n - 1 (int64, without a Python list)."""
    return pc.indices_nonzero(pa.repeat(True, n)).cast(pa.int64())


def take(values: pa.Array, rows: pa.Array) -> pa.Array:
    """``values.take(rows)``; a slice (no copy) when the rows are consecutive."""
    n = len(rows)
    if n and rows[n - 1].as_py() - rows[0].as_py() == n - 1 and pc.all(pc.less(rows[:-1], rows[1:])).as_py():
        return values.slice(rows[0].as_py(), n)
    return values.take(rows)


def take_in_blocks(table: pa.Table, order: pa.Array, max_blocks: int = 256) -> pa.Table:
    """``table.take(order)``; where ``order`` moves whole blocks of consecutive rows (a snapshot's
    chunks, files of disjoint key ranges), as slices of ``table`` in that order, without copying
    the rows (up to ``max_blocks`` blocks)."""
    order = order.cast(pa.int64())
    if len(order) < 2:
        return table.take(order)
    jumps = pc.indices_nonzero(pc.not_equal(pc.subtract(order[1:], order[:-1]), 1)).to_pylist()
    if len(jumps) >= max_blocks:
        return table.take(order)
    starts, stops = [0, *(j + 1 for j in jumps)], [*(j + 1 for j in jumps), len(order)]
    return pa.concat_tables(
        [table.slice(order[a].as_py(), b - a) for a, b in zip(starts, stops, strict=True)]
    )
