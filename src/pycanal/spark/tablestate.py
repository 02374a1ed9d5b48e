"""A Delta table's live files and rows, read from its last checkpoint and the entries after it.

delta-rs opens a table by listing its whole ``_delta_log`` directory and replaying its last
checkpoint, every tombstone in it included. A current-state table committed to every second
keeps an hour of both (``Maintenance``'s retentions), so opening it costs more the longer it has
been streamed into: around write 100 / 3,600 of a 1,000-row table, delta-rs took 15.8 / 18.9 ms
of CPU to open and read it, this module 3.4 / 3.2 ms (docs/benchmarks.md, stop 34). Here:

* the version comes from ``_last_checkpoint`` and the entries after it, read in order until one
  is missing (an entry is created whole, by a hard link, and versions have no gaps), so nothing
  is listed;
* the checkpoint's row groups that hold only tombstones are not read (``checkpoint`` writes the
  removes in row groups of their own);
* the live files are read with pyarrow: a column a file lacks (added since) as nulls, every
  column cast to the table's schema.

What this does not read as delta-rs would -- no checkpoint and no first entry, partition columns,
column mapping, reader features beyond deletion vectors and ``timestampNtz``, a live file with a
deletion vector, a file outside the table's directory -- makes ``table_state`` None, and
``read_table`` reads through delta-rs instead. A file deleted under the reader (a vacuum after
a newer checkpoint) makes it read the state again.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema

from .checkpoint import checkpoint_parts, checkpoint_rows, entry_actions
from .cow import read_rows

__all__ = ["TableState", "read_table", "table_state"]

_READER_FEATURES = {"deletionVectors", "timestampNtz"}
_ATTEMPTS = 3


@dataclass(frozen=True)
class TableState:
    """A version of a table: its Arrow schema and its live data files (paths under the table)."""

    version: int
    schema: pa.Schema
    files: list[Path]


def table_state(path: str | Path) -> TableState | None:
    """The latest version of the Delta table at ``path`` (the module notes); None where this module
    cannot read it as delta-rs does."""
    log_dir = Path(path) / "_delta_log"
    try:
        last = json.loads((log_dir / "_last_checkpoint").read_text())
        base, parts = int(last["version"]), last.get("parts")
    except FileNotFoundError:
        base, parts = -1, None
    except (ValueError, KeyError):
        return None  # not a pointer this module reads: delta-rs reads the table
    live: dict[str, dict[str, Any]] = {}
    metadata = protocol = None
    for part in checkpoint_parts(log_dir, base, parts) if base >= 0 else []:
        try:
            rows = checkpoint_rows(part, ["add", "metaData", "protocol"])
        except FileNotFoundError:
            return None  # cleaned up after a newer one, or missing: delta-rs reads the table
        for add in rows.column("add").drop_null().to_pylist():
            live[add["path"]] = add
        metadata = _first(rows, "metaData") or metadata
        protocol = _first(rows, "protocol") or protocol
    version = base
    while True:
        try:
            actions = entry_actions(log_dir, version + 1)
        except FileNotFoundError:
            break
        version += 1
        for kind, action in actions:
            if kind == "add":
                live[action["path"]] = action
            elif kind == "remove":
                live.pop(action["path"], None)
            elif kind == "metaData":
                metadata = action
            elif kind == "protocol":
                protocol = action
    if version < _last_version(log_dir):
        return table_state(path)  # entries cleaned up after a newer checkpoint: start from it
    if version < 0 or metadata is None or protocol is None or not _plain(metadata, protocol, live):
        return None
    return TableState(
        version, _arrow_schema(metadata["schemaString"]), [Path(path) / unquote(p) for p in live]
    )


def read_table(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """The rows of the Delta table at ``path`` (``columns`` only, if given): read from its state
    (``table_state``) where it can be, through delta-rs otherwise."""
    for _ in range(_ATTEMPTS):
        state = table_state(path)
        if state is None:
            break
        schema = state.schema
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        try:
            parts = [_read_file(f, schema) for f in state.files]
        except FileNotFoundError:
            continue  # vacuumed since the state was read: a newer version replaced it
        return pa.concat_tables(parts) if parts else schema.empty_table()
    return read_rows(DeltaTable(str(path)), columns)


@functools.lru_cache(maxsize=1024)
def _arrow_schema(schema_string: str) -> pa.Schema:
    """A Delta schema's Arrow schema (delta-rs' conversion; cached, as tables rarely change theirs)."""
    return pa.schema(Schema.from_json(schema_string).to_arrow())


def _last_version(log_dir: Path) -> int:
    try:
        return int(json.loads((log_dir / "_last_checkpoint").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return -1


def _first(rows: pa.Table, column: str) -> dict[str, Any] | None:
    values = rows.column(column).drop_null()
    return values[0].as_py() if len(values) else None


def _plain(metadata: dict[str, Any], protocol: dict[str, Any], live: dict[str, dict[str, Any]]) -> bool:
    """Whether the files alone, read by column name, are the table's rows."""
    configuration = dict(metadata.get("configuration") or {})
    if metadata.get("partitionColumns") or configuration.get("delta.columnMapping.mode", "none") != "none":
        return False
    readers = protocol.get("minReaderVersion", 1)
    if readers > 3 or (readers == 3 and not set(protocol.get("readerFeatures") or []) <= _READER_FEATURES):
        return False
    return not any(a.get("deletionVector") or "://" in p or p.startswith("/") for p, a in live.items())


def _read_file(file: Path, schema: pa.Schema) -> pa.Table:
    data = pq.ParquetFile(file)
    have = set(data.schema_arrow.names)
    rows = data.read(columns=[n for n in schema.names if n in have])
    return pa.Table.from_arrays(
        [
            rows.column(f.name).cast(f.type) if f.name in have else pa.nulls(rows.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )
