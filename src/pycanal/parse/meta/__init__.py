"""Table meta with schema history: Canal's TSDB, done better.

* :class:`SchemaModel` -- the in-memory schema (databases, tables, columns as ``information_schema``
  shows them), updated by DDL;
* :func:`load_schema` / :func:`load_table` -- the live server's schema;
* :class:`SchemaStore` -- the SQLite store of every DDL with its binlog position, and snapshots;
* :class:`SchemaHistory` -- all of it together, with the ``table_meta`` hook for ``EventDecoder``.
"""

from pycanal._lazy import lazy_names

__all__ = [
    "Charsets",
    "Column",
    "Database",
    "Position",
    "SchemaApplyError",
    "SchemaHistory",
    "SchemaHistoryError",
    "SchemaMismatchError",
    "SchemaModel",
    "SchemaStore",
    "Table",
    "as_position",
    "load_schema",
    "load_server",
    "load_table",
]

# Where each name lives, imported on first use: a reader of Canal's entries needs ``.types`` alone
# (``pycanal.spark.entry_rows``, in every Spark Python worker), not the history and the binlog
# decoder behind it.
__getattr__ = lazy_names(
    __name__,
    {
        "Charsets": "types",
        "Column": "model",
        "Database": "model",
        "Position": "store",
        "SchemaApplyError": "model",
        "SchemaHistory": "history",
        "SchemaHistoryError": "history",
        "SchemaMismatchError": "history",
        "SchemaModel": "model",
        "SchemaStore": "store",
        "Table": "model",
        "as_position": "store",
        "load_schema": "loader",
        "load_server": "loader",
        "load_table": "loader",
    },
)
