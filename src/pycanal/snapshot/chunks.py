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
from typing import Any, NamedTuple

from .tables import SourceTable, quote

__all__ = [
    "EXACT_RANGE_TYPES",
    "INTEGER_TYPES",
    "Chunk",
    "EvenRanges",
    "chunk_where",
    "even_ranges",
    "next_upper",
    "plan_chunks",
]

INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
# Key types a range predicate on compares in the order ORDER BY sorts them.
RANGE_KEY_TYPES = INTEGER_TYPES | {
    "decimal", "numeric", "char", "varchar", "binary", "varbinary", "date", "datetime", "timestamp", "time",
}  # fmt: skip
# Range key types whose order a lake of Arrow values has too (numbers, dates and times with a
# date, bytes): not collated text, nor TIME (the lake holds its text).
EXACT_RANGE_TYPES = INTEGER_TYPES | {
    "decimal", "numeric", "binary", "varbinary", "date", "datetime", "timestamp",
}  # fmt: skip
_SPARSE = 4  # an integer key range up to this many times the row count is split evenly


@dataclass(frozen=True)
class Chunk:
    """Rows with ``lower <= key < upper`` (tuples in key order; None: open) of one table."""

    schema: str
    table: str
    lower: tuple | None
    upper: tuple | None

    def __str__(self) -> str:
        return f"{self.schema}.{self.table} chunk [{self.lower}, {self.upper})"


class EvenRanges(NamedTuple):
    """Even ranges of a dense integer key: ``step`` keys from ``low`` on, up to ``high``."""

    low: int
    high: int
    step: int


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


def _rangeable(table: SourceTable) -> bool:
    return bool(table.key) and all(table.columns[i].data_type in RANGE_KEY_TYPES for i in table.key)


def even_ranges(conn: Any, table: SourceTable, chunk_rows: int) -> EvenRanges | None:
    """The even ranges of about ``chunk_rows`` rows for one dense integer key (its range at most
    ``_SPARSE`` times the row estimate), None for any other key or an empty table."""
    if (
        len(table.key) != 1
        or table.columns[table.key[0]].data_type not in INTEGER_TYPES
        or table.rows_estimate < 1
    ):
        return None
    name = quote(table.columns[table.key[0]].name)
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({name}), MAX({name}) FROM {table.qualified}")
        low, high = cur.fetchone()
    if low is None:
        return None
    low, high = int(low), int(high)
    span = high - low + 1
    if span > _SPARSE * table.rows_estimate:
        return None
    return EvenRanges(low, high, max(1, math.ceil(chunk_rows * span / table.rows_estimate)))


def next_upper(
    conn: Any, table: SourceTable, lower: tuple | None, chunk_rows: int, even: EvenRanges | None
) -> tuple | None:
    """The upper bound of the chunk starting at ``lower`` (None: the first chunk), None for the
    last chunk (open above); ``even``: the table's ``even_ranges``."""
    if not _rangeable(table):
        return None  # one chunk: the whole table
    if even is None:
        return next_boundary(conn, table, lower, chunk_rows)
    upper = (even.low if lower is None else int(lower[0])) + even.step
    return None if upper > even.high else (str(upper),)


def plan_chunks(conn: Any, table: SourceTable, chunk_rows: int) -> list[Chunk]:
    """The table's chunks of about ``chunk_rows`` rows (``conn``: PyMySQL, any cursor class;
    values are read raw, as text or bytes)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    even = even_ranges(conn, table, chunk_rows) if _rangeable(table) else None
    chunks: list[Chunk] = []
    lower: tuple | None = None
    while True:
        upper = next_upper(conn, table, lower, chunk_rows, even)
        chunks.append(Chunk(table.schema, table.name, lower, upper))
        if upper is None:
            return chunks
        lower = upper


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
