"""The initial snapshot: a source's existing rows, read without locks, in primary-key chunks.

Each chunk is read in its own consistent snapshot (``START TRANSACTION WITH CONSISTENT
SNAPSHOT``) together with the binlog position that snapshot corresponds to (MariaDB's
``binlog_snapshot_file`` / ``binlog_snapshot_position``: the point between two commits in binlog
order). The chunk's rows are the table's rows in that key range exactly as of that position P, so
merged into the change stream at P (after every change before P, before every change after it)
they need no reconciliation: DBLog's low/high watermarks collapse to one point. A chunk read
while the stream is still behind P is applied early and the stream's changes up to P replayed
over it; with full row images the replay ends on the same rows.

* :mod:`.tables`: what a source table looks like (columns, primary key) from information_schema;
* :mod:`.chunks`: a table split into key ranges (even ranges for one integer key, boundaries
  sampled from the key's index otherwise) and the SQL predicate of a range;
* :mod:`.reader`: one chunk read at its position, values in the binlog decoder's form; the
  tables' ``CREATE TABLE`` statements at a position (``read_schema``);
* :mod:`.window`: a chunk read by connectorx into Arrow outside any transaction, made exact as of
  the binlog position after the read by dropping the keys the binlog changed around the read
  (imported on its own: it needs the ``spark`` extra's pyarrow and connectorx).
"""

from .chunks import Chunk, plan_chunks
from .reader import ChunkRead, SchemaRead, SnapshotError, read_chunk, read_schema
from .tables import SourceColumn, SourceTable, describe, list_tables

__all__ = [
    "Chunk",
    "ChunkRead",
    "SchemaRead",
    "SnapshotError",
    "SourceColumn",
    "SourceTable",
    "describe",
    "list_tables",
    "plan_chunks",
    "read_chunk",
    "read_schema",
]
