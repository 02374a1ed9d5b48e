"""Source vs target: a MySQL/MariaDB table against its current-state Delta table.

:func:`compare_table` reads both sides in key order and normalizes every value to one form
(DECIMAL as exact text, temporal values as ISO text in UTC, SET as a sorted list, JSON re-dumped
with sorted keys, binary as hex) before hashing: equal digests mean equal values, row by row.
The source is read with ``time_zone = '+00:00'`` so TIMESTAMPs compare in UTC.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pycanal.storage import LakePath, lake_path

__all__ = ["TableCheck", "compare_table", "log_difference", "normalize"]


def normalize(v: Any) -> Any:
    """One form for a value read from MariaDB (PyMySQL) or from a Delta table (pyarrow)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, Decimal):
        if v.as_tuple().exponent == 0:  # BIGINT UNSIGNED: DECIMAL(20,0) in the lake, int in MariaDB
            return int(v)
        return format(v.normalize(), "f")
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, set | frozenset | list | tuple):
        return sorted(str(x) for x in v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, str) and v[:1] in "{[":
        try:
            return json.dumps(json.loads(v), sort_keys=True)
        except ValueError:
            return v
    return v


@dataclass(frozen=True, slots=True)
class TableCheck:
    table: str
    source_rows: int
    target_rows: int
    source_digest: str
    target_digest: str
    first_difference: str | None

    @property
    def equal(self) -> bool:
        return self.first_difference is None


def _rows(rows: list[dict[str, Any]], columns: list[str]) -> list[list[Any]]:
    return [[normalize(r.get(c)) for c in columns] for r in rows]


def _digest(rows: list[list[Any]]) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, ensure_ascii=False, default=str).encode())
    return h.hexdigest()[:16]


def compare_table(
    conn: Any, lake: str | Path, database: str, table: str, key: str, spark: Any = None
) -> TableCheck:
    """``database.table`` on ``conn`` (PyMySQL) against its current-state table under ``lake``,
    read by pycanal's own log replay, or with ``spark`` by Delta Lake for Spark
    (``spark.read.format("delta")``: the reader Spark users have, independent of the writer).
    SET columns come from PyMySQL as text (``a,b``) and are split; the target holds lists."""
    from .current import table_path

    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND DATA_TYPE = 'set'",
            (database, table),
        )
        sets = {r[0] for r in cur.fetchall()}
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT * FROM `{database}`.`{table}` ORDER BY `{key}`")
        columns = [d[0] for d in cur.description]
        source = [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]
    for row in source:
        for c in sets & row.keys():
            if isinstance(row[c], str):
                row[c] = [t for t in row[c].split(",") if t]
    path = table_path(lake, database, table)
    if spark is not None:
        target = spark.read.format("delta").load(path.spark_uri).toArrow().to_pylist()
        if (diff := log_difference(spark, path)) is not None:
            return TableCheck(table, len(source), len(target), "", "", diff)
    else:
        from .delta.rs import delta_table
        from .delta.tablestate import read_rows

        target = read_rows(delta_table(path)).to_pylist()
    target.sort(key=lambda r: r[key])
    a, b = _rows(source, columns), _rows(target, columns)
    diff = None
    if len(a) != len(b):
        diff = f"{len(a)} source rows, {len(b)} target rows"
    else:
        for x, y in zip(a, b, strict=True):
            if x != y:
                diff = f"source {x} != target {y}"
                break
    missing = [c for c in columns if target and c not in target[0]]
    if missing and diff is None:
        diff = f"target lacks columns {missing}"
    return TableCheck(table, len(a), len(b), _digest(a), _digest(b), diff)


def log_difference(spark: Any, path: str | Path | LakePath) -> str | None:
    """What Delta Lake for Spark's snapshot of the table at ``path`` (``DESCRIBE DETAIL``: its
    replay of the log) says otherwise than pycanal's replay (``delta.log.LogState``): the live
    files and their bytes, the protocol, the partition columns, the properties, and the rows the
    files' statistics count (less their deletion vectors) against the rows Spark reads; None if
    they agree."""
    from .delta.log import LogState

    path = lake_path(path)
    log_dir = path / "_delta_log"
    state = (LogState.at_checkpoint(log_dir) or LogState()).replay(log_dir)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path.spark_uri}`").first().asDict()
    protocol, metadata = state.protocol or {}, state.metadata or {}
    stats = [json.loads(a["stats"]) if a.get("stats") else {} for a in state.live.values()]
    mine = {
        "numFiles": len(state.live),
        "sizeInBytes": sum(int(a["size"]) for a in state.live.values()),
        "minReaderVersion": protocol.get("minReaderVersion"),
        "minWriterVersion": protocol.get("minWriterVersion"),
        "partitionColumns": list(metadata.get("partitionColumns") or []),
        "properties": dict(metadata.get("configuration") or {}),
    }
    theirs = {k: detail[k] for k in mine}
    theirs["properties"] = dict(theirs["properties"] or {})
    for k in mine:
        if mine[k] != theirs[k]:
            return f"{path}: Spark's Delta log has {k} {theirs[k]!r}, pycanal's {mine[k]!r}"
    if all("numRecords" in s for s in stats):
        rows = sum(int(s["numRecords"]) for s in stats) - sum(
            int((a.get("deletionVector") or {}).get("cardinality", 0)) for a in state.live.values()
        )
        read = spark.read.format("delta").load(path.spark_uri).count()
        if rows != read:
            return f"{path}: the files' statistics count {rows} rows, Spark's Delta reads {read}"
    return None
