"""A table split into primary-key ranges, and the SQL predicate of a range.

A chunk is ``lower <= key < upper`` in the key's own order (the index order, the column's
collation), either end open: the first chunk has no lower bound and the last no upper bound, so
the chunks cover every key, including keys written after the plan. Boundaries are key values the
source returned, compared by the source itself: a string key's collation never has to be
reproduced here.

* One integer key whose values are dense enough (its range at most ``_SPARSE`` times the row
  estimate): even ranges of about ``chunk_rows`` rows.
* Any other key (composite, string, temporal, decimal, a sparse or unknown integer range):
  boundaries sampled from the key's index, every ``chunk_rows``-th key
  (``... WHERE key >= b ORDER BY key LIMIT 1 OFFSET chunk_rows``: an index walk, no table scan).
* A key of a type whose order and comparison differ (ENUM, SET, BIT, FLOAT, DOUBLE, JSON) and a
  table without primary key: one chunk, the whole table (still one consistent read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .tables import SourceTable, quote

__all__ = ["INTEGER_TYPES", "RANGE_KEY_TYPES", "Chunk", "chunk_where", "next_boundary", "plan_chunks"]

INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
# Key types a range predicate on compares in the order ORDER BY sorts them.
RANGE_KEY_TYPES = INTEGER_TYPES | {
    "decimal", "numeric", "char", "varchar", "binary", "varbinary", "date", "datetime", "timestamp", "time",
}  # fmt: skip
_SPARSE = 4  # an integer key range up to this many times the row count is split evenly


@dataclass(frozen=True)
class Chunk:
    """Rows with ``lower <= key < upper`` (tuples in key order; None: open) of one table."""

    schema: str
    table: str
    index: int  # 0.. within the table
    lower: tuple | None
    upper: tuple | None

    def __str__(self) -> str:
        return f"{self.schema}.{self.table} chunk {self.index} [{self.lower}, {self.upper})"


def _typed(table: SourceTable, values: tuple) -> list[Any]:
    """Boundary values as parameters the source compares in the key's type: integers and
    decimals as numbers (a quoted number compares as DOUBLE), the rest as returned."""
    out: list[Any] = []
    for i, v in zip(table.key, values, strict=True):
        t = table.columns[i].data_type
        if isinstance(v, str) and t in INTEGER_TYPES:
            v = int(v)
        elif isinstance(v, str) and t in ("decimal", "numeric"):
            v = Decimal(v)
        out.append(v)
    return out


def _compare(table: SourceTable, values: tuple, strict: str, last: str) -> tuple[str, list[Any]]:
    """``key <last> values`` lexicographically: ``(k1 <strict> v1) OR (k1 = v1 AND k2 <last> v2)``,
    written out so the index serves it (row constructors are not always range-optimised)."""
    names = [quote(table.columns[i].name) for i in table.key]
    params = _typed(table, values)
    terms, args = [], []
    for n in range(len(names)):
        eq = [f"{names[j]} = %s" for j in range(n)]
        op = last if n == len(names) - 1 else strict
        terms.append("(" + " AND ".join([*eq, f"{names[n]} {op} %s"]) + ")")
        args += params[: n + 1]
    return "(" + " OR ".join(terms) + ")", args


def chunk_where(table: SourceTable, chunk: Chunk) -> tuple[str, list[Any]]:
    """The chunk's predicate (``TRUE`` for a whole table) and its parameters."""
    parts, args = [], []
    if chunk.lower is not None:
        sql, a = _compare(table, chunk.lower, ">", ">=")
        parts.append(sql)
        args += a
    if chunk.upper is not None:
        sql, a = _compare(table, chunk.upper, "<", "<")
        parts.append(sql)
        args += a
    return (" AND ".join(parts) if parts else "TRUE"), args


def _chunks(table: SourceTable, bounds: list[tuple]) -> list[Chunk]:
    edges: list[tuple | None] = [None, *bounds, None]
    return [
        Chunk(table.schema, table.name, i, lo, hi)
        for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False))
    ]


def plan_chunks(conn: Any, table: SourceTable, chunk_rows: int) -> list[Chunk]:
    """The table's chunks of about ``chunk_rows`` rows (``conn``: PyMySQL, any cursor class;
    values are read raw, as text or bytes)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    if not table.key or any(table.columns[i].data_type not in RANGE_KEY_TYPES for i in table.key):
        return _chunks(table, [])
    names = ", ".join(quote(table.columns[i].name) for i in table.key)
    with conn.cursor() as cur:
        if len(table.key) == 1 and table.columns[table.key[0]].data_type in INTEGER_TYPES:
            cur.execute(f"SELECT MIN({names}), MAX({names}) FROM {table.qualified}")
            low, high = cur.fetchone()
            if low is None:
                return _chunks(table, [])
            low, high = int(low), int(high)
            span = high - low + 1
            if 0 < table.rows_estimate and span <= _SPARSE * table.rows_estimate:
                step = max(1, math.ceil(chunk_rows * span / table.rows_estimate))
                return _chunks(table, [(str(b),) for b in range(low + step, high + 1, step)])
    bounds: list[tuple] = []
    while (b := next_boundary(conn, table, bounds[-1] if bounds else None, chunk_rows)) is not None:
        bounds.append(b)
    return _chunks(table, bounds)


def next_boundary(conn: Any, table: SourceTable, lower: tuple | None, chunk_rows: int) -> tuple | None:
    """The key ``chunk_rows`` keys after ``lower`` (None: the first key) in the key's index
    order: the upper bound of the chunk starting at ``lower``; None when fewer keys are left."""
    names = ", ".join(quote(table.columns[i].name) for i in table.key)
    where, args = ("TRUE", []) if lower is None else _compare(table, lower, ">", ">=")
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {names} FROM {table.qualified} WHERE {where} ORDER BY {names} LIMIT 1 OFFSET %s",
            [*args, chunk_rows],
        )
        row = cur.fetchone()
    return None if row is None else tuple(row)
