"""The current-state tables: one Delta table per source table with a primary key, under
``<target>/current/<database>/<table>`` (``table_path``), written by ``current_state``, read by
any Delta reader: ``spark.read.format("delta").load(table_path(...).spark_uri)`` (every pycanal
session has Delta Lake for Spark; on S3 the URI is ``s3a://``), delta-rs with ``.uri``,
``delta.tablestate.read_table`` (Arrow, pycanal's own log replay).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from pycanal.storage import LakePath, lake_path

__all__ = ["database_path", "table_path"]


def _segment(name: str) -> str:
    s = quote(name, safe="")
    return s.replace(".", "%2E") if s in (".", "..") else s


def database_path(target_dir: str | Path | LakePath, database: str) -> LakePath:
    """Where the current-state tables of ``database`` live."""
    return lake_path(target_dir) / "current" / _segment(database)


@lru_cache(maxsize=4096)  # every merge into a table asks it
def table_path(target_dir: str | Path | LakePath, database: str, table: str) -> LakePath:
    """Where the current-state Delta table of ``database.table`` lives."""
    return database_path(target_dir, database) / _segment(table)
