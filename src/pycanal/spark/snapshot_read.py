"""The executors' side of ``format("canal")``'s initial snapshot (:mod:`pycanal.spark.snapshot`
plans it): a partition's chunk read from the source with its binlog window, or the tables'
CREATE TABLE rows. With ``snapshotLake`` the chunk's rows are also written as a data file of its
current-state table, and they are staged as a data file of the change log (of their micro-batch,
where its offset numbers it) or else in the stage. Its own module: the query's runner plans
chunks and reads none, and this side's imports (the window's binlog reader, Arrow compute, the
stage) were 0.07 s of the runner's 0.12 s import of the snapshot, on the query's start-up path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pymysql

from pycanal.snapshot import describe, read_chunk, read_schema
from pycanal.snapshot.chunks import Chunk
from pycanal.snapshot.reader import ChunkRead, show_create
from pycanal.snapshot.window import ChunkColumns, read_chunk_window
from pycanal.storage import LakePath

from .canal_options import SnapshotOptions
from .rows import ARROW_SCHEMA, CHUNK, RowPosition
from .snapshot import SnapshotPartition, decode_key
from .snapshot_rows import SnapshotRows
from .stage import stage_rows, staged_row

__all__ = ["read_snapshot_partition"]


def read_snapshot_partition(
    opts: SnapshotOptions, partition: SnapshotPartition, stage: LakePath | None
) -> Iterator[pa.RecordBatch]:
    """The partition's change rows: a chunk's READ rows (its ``STAGED`` row with a ``stage``), or
    the tables' CREATE TABLE rows."""
    with _source(opts) as conn:
        if partition.schema is not None:
            schema_read = read_schema(conn, [(s, t) for s, t in partition.schema])
        else:
            assert partition.chunk is not None
            schema, name, lower, upper = partition.chunk
            chunk = Chunk(schema, name, decode_key(lower), decode_key(upper))
            table = describe(conn, schema, name)
            read: ChunkRead | ChunkColumns
            if opts.reader == "connectorx" and table.key:
                source = opts.source
                server_id = opts.server_ids[partition.slot % len(opts.server_ids)]
                read = read_chunk_window(conn, source, table, chunk, server_id)
            else:  # a table without a key has no keys to reconcile: one consistent snapshot
                read = read_chunk(conn, table, chunk)
            # the typing of its chunk's file, which the driver takes where its model types alike
            create = None
            if opts.lake is not None and table.key:
                with conn.cursor() as cur:
                    create = show_create(cur, schema, name)
    if partition.schema is not None:
        yield from SnapshotRows().batches([schema_read])
        return
    batches = SnapshotRows().batches([read], chunk_file=_chunk_file(opts, create))
    if stage is None:
        yield from batches
        return
    at = RowPosition(read.file, read.pos, 0, None)
    when = datetime.fromtimestamp(read.seconds, UTC)
    database, name = read.table.schema, read.table.name
    if opts.lake is not None and partition.batch is not None:
        # The change log's file of the chunk, written here: the driver commits it as it is.
        from .changelog import write_unnamed

        rows = pa.Table.from_batches(list(batches), ARROW_SCHEMA)
        log = write_unnamed(opts.lake, rows, partition.batch, partition.value)  # its place in the batch
        if log is not None:
            last = rows.slice(rows.num_rows - 1).to_pylist()[0]
            if last["op"] == CHUNK and "file" in json.loads(last["after"]):
                log["chunk"] = last["after"]  # the driver may read the file without the READ rows' images
            yield staged_row(
                opts.lake / "changelog" / log["path"], rows.num_rows, database, name, at, when, log
            )
            return
        batches = iter(rows.to_batches())
    staged = stage_rows(stage, batches, database, name, at, when)
    if staged is not None:
        yield staged


def _chunk_file(opts: SnapshotOptions, create: str | None) -> Any:
    """``SnapshotRows.batches``' ``chunk_file`` for a chunk of the table ``create`` declares."""
    if opts.lake is None or create is None:
        return None
    # Imported here: with the current-state writer it pulls in (cow, merge_source: deltalake, and
    # pandas through pyarrow's first scalar) it took 0.24 s of the 0.31 s of CPU this module's
    # import cost the query's runner, which plans chunks and writes none, before its first offset.
    from .chunk_files import write_chunk_file

    lake = opts.lake
    return lambda read, afters: write_chunk_file(lake, read, create, afters)


_conn: tuple[SnapshotOptions, Any] | None = None  # this process's source connection


@contextmanager
def _source(opts: SnapshotOptions) -> Iterator[Any]:
    """A connection to the source, kept for the process's next chunk (Spark reuses its Python
    workers; a connection costs more CPU than a 50k-row chunk's SELECT). One that failed is closed."""
    global _conn
    conn = _conn[1] if _conn is not None and _conn[0] == opts else None
    _conn = None
    if conn is not None:
        try:
            conn.ping(reconnect=False)
        except pymysql.err.MySQLError:
            _close(conn)
            conn = None
    if conn is None:
        conn = opts.source.connect()
    try:
        yield conn
    except BaseException:
        _close(conn)
        raise
    _conn = (opts, conn)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except pymysql.err.Error:
        pass  # closed already
