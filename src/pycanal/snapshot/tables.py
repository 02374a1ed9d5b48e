"""Source tables as the snapshot sees them: columns in table order and the primary key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pycanal.parse.filter import TableFilter

__all__ = ["SYSTEM_SCHEMAS", "SourceColumn", "SourceTable", "describe", "list_tables", "quote", "text"]

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str  # information_schema DATA_TYPE, lower case: "int", "varchar", "inet6"
    column_type: str  # COLUMN_TYPE: "int(10) unsigned", "enum('a','b')"


@dataclass(frozen=True)
class SourceTable:
    schema: str
    name: str
    columns: tuple[SourceColumn, ...]
    key: tuple[int, ...]  # primary key column indexes, in the key's order (empty: no primary key)
    rows_estimate: int  # information_schema's TABLE_ROWS (InnoDB: an estimate)

    @property
    def qualified(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}"

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


def _rows(conn: Any, sql: str, args: tuple) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def describe(conn: Any, schema: str, table: str) -> SourceTable:
    """The table's columns and primary key (``conn``: a PyMySQL connection)."""
    cols = _rows(
        conn,
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (schema, table),
    )
    if not cols:
        raise LookupError(f"no table {schema}.{table} on the source")
    columns = tuple(SourceColumn(text(n), text(d).lower(), text(t)) for n, d, t in cols)
    names = [c.name for c in columns]
    key = _rows(
        conn,
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
        (schema, table),
    )
    estimate = _rows(
        conn,
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (schema, table),
    )
    return SourceTable(
        schema,
        table,
        columns,
        tuple(names.index(text(k)) for (k,) in key),
        int(estimate[0][0] or 0) if estimate else 0,
    )


def list_tables(conn: Any, accepts: TableFilter | None = None) -> list[tuple[str, str]]:
    """The source's base tables (system schemas left out) that ``accepts`` takes, sorted."""
    rows = _rows(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
        "ORDER BY TABLE_SCHEMA, TABLE_NAME",
        (),
    )
    out = []
    for schema, table in rows:
        schema, table = text(schema), text(table)
        if schema.lower() in SYSTEM_SCHEMAS:
            continue
        if accepts is None or accepts.accepts(schema, table):
            out.append((schema, table))
    return out


def text(v: Any) -> str:
    """A value of a raw (undecoded) result as text."""
    return v.decode() if isinstance(v, bytes | bytearray) else str(v)
