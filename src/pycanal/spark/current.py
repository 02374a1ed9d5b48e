"""The current-state tables: one Delta table per source table with a primary key, under
``<target>/current/<database>/<table>`` (``table_path``), written by ``current_state`` and read by
``read_current`` (Spark) or ``delta.tablestate.read_table`` (Arrow).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
from deltalake import DeltaTable

from .delta.tablestate import table_state

__all__ = ["database_path", "read_current", "table_path"]


def _segment(name: str) -> str:
    s = quote(name, safe="")
    return s.replace(".", "%2E") if s in (".", "..") else s


def database_path(target_dir: str | Path, database: str) -> Path:
    """Where the current-state tables of ``database`` live."""
    return Path(target_dir) / "current" / _segment(database)


@lru_cache(maxsize=4096)  # every merge into a table asks it
def table_path(target_dir: str | Path, database: str, table: str) -> Path:
    """Where the current-state Delta table of ``database.table`` lives."""
    return database_path(target_dir, database) / _segment(table)


def read_current(spark: Any, target_dir: str | Path, database: str, table: str) -> Any:
    """The current-state table of ``database.table`` as a Spark DataFrame, read from its live file
    list (Spark's own Delta connector is not needed): the one ``tablestate`` reads from the last
    checkpoint and the entries after it, or delta-rs' where that does not read the table; rows
    that deletion vectors hide are left out by their files' row index (Spark's
    ``_metadata.row_index``)."""
    import numpy as np
    import pandas as pd
    from pyspark.sql.pandas.types import from_arrow_schema

    path = table_path(target_dir, database, table)
    state = table_state(path)
    if state is not None:
        schema = from_arrow_schema(state.schema, prefer_timestamp_ntz=True)
        if not state.files:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*(str(f) for f in state.files))
    dt = DeltaTable(str(path))
    schema = from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=True)
    files = dt.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    data = spark.read.schema(schema).parquet(*files)
    vectors = pa.table(dt.deletion_vectors())
    if not vectors.num_rows:
        return data
    names, rows = [], []
    for uri, keep in zip(
        vectors["filepath"].to_pylist(), vectors["selection_vector"].to_pylist(), strict=True
    ):
        hidden = np.flatnonzero(~np.asarray(keep, bool))
        names.append(np.full(len(hidden), uri.rsplit("/", 1)[-1], dtype=object))
        rows.append(hidden)
    hidden = spark.createDataFrame(
        pd.DataFrame({"__file": np.concatenate(names), "__row": np.concatenate(rows).astype(np.int64)})
    )
    data = data.select("*", "_metadata.file_name", "_metadata.row_index")
    data = data.withColumnsRenamed({"file_name": "__file", "row_index": "__row"})
    return data.join(hidden, ["__file", "__row"], "left_anti").drop("__file", "__row")
