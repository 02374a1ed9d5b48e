"""The change row's Spark schema (columns described in :mod:`pycanal.spark.rows`).

Its own module, free of pyarrow: Spark declares a source's schema in a fresh Python process of
its own before a query starts, where importing pyarrow (with numpy) cost 0.13 s of CPU."""

from __future__ import annotations

__all__ = ["ROW_SCHEMA"]

ROW_SCHEMA = (
    "op STRING, database STRING, `table` STRING, pk STRING, before STRING, after STRING, "
    "position STRUCT<file: STRING, offset: BIGINT, row: INT, gtid: STRING>, ts TIMESTAMP, "
    "sql STRING, sql_database STRING"
)
