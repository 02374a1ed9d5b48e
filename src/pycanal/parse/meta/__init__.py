"""Table meta with schema history: Canal's TSDB, done better.

* :class:`SchemaModel` -- the in-memory schema (databases, tables, columns as ``information_schema``
  shows them), updated by DDL;
* :func:`load_schema` / :func:`load_table` -- the live server's schema;
* :class:`SchemaStore` -- the SQLite store of every DDL with its binlog position, and snapshots;
* :class:`SchemaHistory` -- all of it together, with the ``table_meta`` hook for ``EventDecoder``.
"""

from .history import SchemaHistory, SchemaHistoryError, SchemaMismatchError
from .loader import load_schema, load_server, load_table
from .model import Column, Database, SchemaApplyError, SchemaModel, Table
from .store import Position, SchemaStore, as_position
from .types import Charsets

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
