"""A Delta table's live files and rows, read from its last checkpoint and the entries after it.

delta-rs opens a table by listing its whole ``_delta_log`` directory and replaying its last
checkpoint, every tombstone in it included. A current-state table committed to every second
keeps an hour of both (``Maintenance``'s retentions), so opening it costs more the longer it has
been streamed into: around write 100 / 3,600 of a 1,000-row table, delta-rs took 15.8 / 18.9 ms
of CPU to open and read it, this module 3.4 / 3.2 ms (docs/benchmarks.md, "The lake with many
tables"). Here:

* the version comes from ``_last_checkpoint`` and the entries after it, read in order until one
  is missing (``log.LogState``), so nothing is listed;
* the checkpoint's row groups that hold only tombstones are not read (``checkpoint`` writes the
  removes in row groups of their own);
* the live files are read with pyarrow: a column a file lacks (added since) as nulls, every
  column cast to the table's schema.

What this does not read as delta-rs would -- no checkpoint and no first entry, partition columns,
column mapping, reader features beyond deletion vectors and ``timestampNtz``, a live file with a
deletion vector, a file outside the table's directory -- makes ``table_state`` None, and
``read_table`` reads through delta-rs instead (``read_rows``, which applies deletion vectors). A
file deleted under the reader (a vacuum after a newer checkpoint) makes it read the state again.

A poller (``TableReader``, or ``table_state`` given the state it read last) reads only the entries
committed since: asking a table nothing was committed to costs a ``stat`` and a read of
``_last_checkpoint``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema

from pycanal.storage import LakePath, lake_path

from .log import LogState, entry_path, last_checkpoint
from .rs import delta_table

__all__ = ["TableReader", "TableState", "conform", "has_vectors", "read_rows", "read_table", "table_state"]

_READER_FEATURES = {"deletionVectors", "timestampNtz"}
_ATTEMPTS = 3


@dataclass(frozen=True)
class TableState:
    """A version of a table: its Arrow schema and its live data files (paths under the table)."""

    version: int
    schema: pa.Schema
    files: list[LakePath]
    _log: LogState = field(repr=False, compare=False)


def table_state(path: str | LakePath, since: TableState | None = None) -> TableState | None:
    """The latest version of the Delta table at ``path`` (the module notes); None where this module
    cannot read it as delta-rs does. ``since``, a state of the same table read before: only the
    entries after it are read (a poller's cost, as delta-rs' ``update``), unless they have been
    cleaned up after a newer checkpoint."""
    path = lake_path(path)
    log_dir = path / "_delta_log"
    if since is not None:
        if not entry_path(log_dir, since.version + 1).exists() and _last_version(log_dir) <= since.version:
            return since  # nothing committed since (a poller's usual answer)
        log = since._log.copy()
    else:
        log = LogState.at_checkpoint(log_dir)
        if log is None:
            return None  # not a pointer or a checkpoint this module reads: delta-rs reads the table
    log.replay(log_dir)
    if log.version < _last_version(log_dir):
        return table_state(path)  # entries cleaned up after a newer checkpoint: start from it
    if log.version < 0 or log.metadata is None or log.protocol is None or not _plain(log):
        return None
    files = [path / unquote(p) for p in log.live]
    return TableState(log.version, _arrow_schema(log.metadata["schemaString"]), files, log)


class TableReader:
    """Reads one table again and again, each time from the entries added since the last read
    (``table_state``'s ``since``): a poller's reader."""

    def __init__(self, path: str | LakePath) -> None:
        self.path = lake_path(path)
        self.state: TableState | None = None
        self._last: tuple[TableState, list[str] | None, pa.Table] | None = None

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """The table's rows (``columns`` only, if given): from its state where this module reads
        it (the rows read last, if nothing was committed since: a table's files never change),
        through delta-rs otherwise."""
        for _ in range(_ATTEMPTS):
            state = table_state(self.path, self.state)
            if state is None:
                break
            if self._last is not None and self._last[0] is state and self._last[1] == columns:
                return self._last[2]
            schema = state.schema
            if columns is not None:
                schema = pa.schema([schema.field(c) for c in columns])
            try:
                parts = [_read_file(f, schema) for f in state.files]
            except FileNotFoundError:
                self.state = None  # vacuumed since the state was read: a newer version replaced it
                continue
            self.state = state
            rows = pa.concat_tables(parts) if parts else schema.empty_table()
            self._last = (state, columns, rows)
            return rows
        self.state = self._last = None
        return read_rows(delta_table(self.path), columns)


def has_vectors(dt: DeltaTable) -> bool:
    """Whether the table's protocol lets its files have deletion vectors."""
    return "deletionVectors" in (dt.protocol().reader_features or [])


def read_rows(dt: DeltaTable, columns: list[str] | None = None) -> pa.Table:
    """A Delta table's rows through delta-rs, its deletion vectors applied (delta-rs' pyarrow reader
    refuses tables that may have them; its DataFusion scan reads them)."""
    if not has_vectors(dt):
        return dt.to_pyarrow_table(columns=columns)
    schema = pa.schema(dt.schema())
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    return pa.table(dt.scan(columns=columns)).cast(schema)


def read_table(path: str | LakePath, columns: list[str] | None = None) -> pa.Table:
    """The rows of the Delta table at ``path`` (``columns`` only, if given): read from its state
    (``table_state``) where it can be, through delta-rs otherwise."""
    return TableReader(path).read(columns)


@functools.lru_cache(maxsize=1024)
def _arrow_schema(schema_string: str) -> pa.Schema:
    """A Delta schema's Arrow schema (delta-rs' conversion; cached, as tables rarely change theirs)."""
    return pa.schema(Schema.from_json(schema_string).to_arrow())


def _last_version(log_dir: LakePath) -> int:
    try:
        last = last_checkpoint(log_dir)
    except (OSError, ValueError):
        return -1
    return -1 if last is None else last[0]


def _plain(log: LogState) -> bool:
    """Whether the files alone, read by column name, are the table's rows."""
    metadata, protocol = log.metadata or {}, log.protocol or {}
    configuration = dict(metadata.get("configuration") or {})
    if metadata.get("partitionColumns") or configuration.get("delta.columnMapping.mode", "none") != "none":
        return False
    readers = protocol.get("minReaderVersion", 1)
    if readers > 3 or (readers == 3 and not set(protocol.get("readerFeatures") or []) <= _READER_FEATURES):
        return False
    return not any(a.get("deletionVector") or "://" in p or p.startswith("/") for p, a in log.live.items())


def _read_file(file: LakePath, schema: pa.Schema) -> pa.Table:
    data = pq.ParquetFile(file.input_file())
    have = set(data.schema_arrow.names)
    return conform(data.read(columns=[n for n in schema.names if n in have]), schema)


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """A data file's ``rows`` as the table's ``schema`` has them: its columns in the table's order
    and types, a column the file lacks (added to the table after the file was written) as nulls."""
    if rows.schema == schema:
        return rows
    return pa.Table.from_arrays(
        [
            rows.column(f.name).cast(f.type)
            if f.name in rows.column_names
            else pa.nulls(rows.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )
