"""``format("binlog")``: a batch Spark source decoding binlog files in parallel into change rows.

    from pycanal.spark import register
    register(spark)
    df = (spark.read.format("binlog")
          .option("tables", "shop\\..*")             # Canal-style regex filter (optional)
          .load("/var/lib/mysql/binlogs"))           # a file, a directory, a glob, or a list

Rows have ``pycanal.spark.row_schema.ROW_SCHEMA``. Each file is cut into parts at offsets where
decoding can restart (``pycanal.binlog.parallel.plan_parts``): a file gets one part per
``maxPartitionBytes`` (default 64 MiB), and files are cut further until there are at least
``minPartitions`` parts (default: the driver's core count, at least 2), so every core works.
Each part is one InputPartition, decoded in an executor's Python worker into Arrow batches.

Table meta (column names and the primary key) comes from the binlog's FULL metadata
(``binlog_row_metadata=FULL``), or from a given schema:

* ``schemaHistory``: a pycanal schema history store (SQLite): the model in force at each part's
  start (the history's first model for parts before its start), DDL inside the part followed in
  memory;
* ``schemaDdl``: CREATE TABLE statements (separated by ``;``, or ``@/path/file.sql``) describing
  the tables as they were at the start of the first file; the planner follows the DDL in the
  files to give each part the model in force at its start.

Other options: ``tablesExclude`` (black-list regex). Files are ordered by name (one server's
``basename.NNNNNN`` sequence); anything else in a directory is not read.
"""

from __future__ import annotations

import glob
import json
import math
import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pycanal.binlog import EventDecoder, read_events
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.events import Event, QueryEvent
from pycanal.binlog.parallel import Part, PartEvents, plan_parts
from pycanal.binlog.reader import check_magic, iter_frames
from pycanal.heap import settle
from pycanal.parse.ddl import is_ddl
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import Position, SchemaHistory

from .event_rows import EventRows
from .row_schema import ROW_SCHEMA
from .schema import history_from, model_from_ddl

__all__ = ["BinlogDataSource", "BinlogPartition", "plan_partitions"]

_BINLOG_NAME = re.compile(r"\.\d+$")
_BATCH_ROWS = 8192
_MIN_PART_BYTES = 64 * 1024  # smaller parts are not worth a task


class BinlogPartition(InputPartition):
    """One part of one binlog file, with the schema model in force at its start (or None)."""

    def __init__(self, index: int, path: str, part: Part, schema: dict | None) -> None:
        super().__init__(index)
        self.index = index
        self.path = path
        self.part = part
        self.schema = schema


def _files(options: dict[str, str]) -> list[Path]:
    raw = options.get("paths")
    specs = json.loads(raw) if raw else []
    if options.get("path"):
        specs.append(options["path"])
    if not specs:
        raise ValueError(
            "format('binlog') needs a path: .load(file, directory or glob) or .option('path', ...)"
        )
    found: list[Path] = []
    for spec in specs:
        p = Path(spec)
        if p.is_dir():
            hits = [q for q in p.iterdir() if q.is_file() and _BINLOG_NAME.search(q.name)]
        elif p.is_file():
            hits = [p]
        else:
            hits = [Path(q) for q in glob.glob(spec) if Path(q).is_file()]
        if not hits:
            raise FileNotFoundError(f"format('binlog'): no binlog files at {spec}")
        found += hits
    unique = {str(q.resolve()): q for q in found}
    return sorted(unique.values(), key=lambda q: (q.name.rsplit(".", 1)[0], _seq(q.name), str(q)))


def _seq(name: str) -> int:
    m = _BINLOG_NAME.search(name)
    return int(m.group(0)[1:]) if m else 0


def _parts_per_file(sizes: list[int], max_bytes: int, min_parts: int) -> list[int]:
    """How many parts to cut each file into: one per ``max_bytes``, more (biggest parts first)
    until there are ``min_parts``, never below ``_MIN_PART_BYTES`` a part."""
    counts = [max(1, math.ceil(s / max_bytes)) for s in sizes]
    while sum(counts) < min_parts:
        i = max(range(len(sizes)), key=lambda k: sizes[k] / counts[k])
        if sizes[i] / (counts[i] + 1) < _MIN_PART_BYTES:
            break
        counts[i] += 1
    return counts


def _lower(options: Any) -> dict[str, str]:
    """Spark option names are case-insensitive."""
    return {k.lower(): v for k, v in options.items()}


def _filter(options: dict[str, str]) -> TableFilter | None:
    white, black = options.get("tables"), options.get("tablesexclude")
    return TableFilter(white, black) if white or black else None


def _ddl_text(value: str) -> str:
    return Path(value[1:]).read_text() if value.startswith("@") else value


def _ddl_events(path: Path) -> Iterator[Event]:
    """The DDL QUERY events of a file, decoding nothing else (the planner's schema scan)."""
    decoder = EventDecoder(str(path), path.name)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        check_magic(data[:4], str(path))
        for pos, raw in iter_frames(data, str(path)):
            typ = raw[4]
            if typ == E.FORMAT_DESCRIPTION:
                decoder.decode(raw, pos)
            elif typ in (E.QUERY, E.MARIADB_QUERY_COMPRESSED):
                e = decoder.decode(raw, pos)
                if isinstance(e, QueryEvent) and is_ddl(e.query):
                    yield e


def _schema_history(
    options: dict[str, str], files: list[Path], accepts: TableFilter | None
) -> SchemaHistory | None:
    """The schema history the parts take their start models from, or None (FULL metadata)."""
    store, ddl = options.get("schemahistory"), options.get("schemaddl")
    if store and ddl:
        raise ValueError("format('binlog'): give schemaHistory or schemaDdl, not both")
    if store:
        if not Path(store).is_file():
            raise FileNotFoundError(f"format('binlog'): schema history store {store} does not exist")
        return SchemaHistory(store, filter=accepts)
    if ddl:
        history = history_from(model_from_ddl(_ddl_text(ddl)), files[0].name, 4, accepts)
        for path in files:
            for e in _ddl_events(path):
                history.apply_event(e)
        return history
    return None


def _model_json(history: SchemaHistory, at: Position) -> dict:
    """The model in force at ``at``; before the history's start, the model it starts with (a
    TABLE_MAP that does not fit it is still an error: ``SchemaHistory.table_meta`` checks)."""
    first = history.store.earliest_snapshot()
    if first is not None and at.key < first.key:
        at = Position(first.file, first.bound)
    return history.schema_at(at).to_json()


def plan_partitions(options: dict[str, str]) -> list[BinlogPartition]:
    """The InputPartitions for ``options`` (see the module docstring), in binlog order."""
    options = _lower(options)
    files = _files(options)
    max_bytes = int(options.get("maxpartitionbytes", 64 << 20))
    min_parts = int(options.get("minpartitions", max(2, os.cpu_count() or 1)))
    if max_bytes < 1 or min_parts < 1:
        raise ValueError("format('binlog'): maxPartitionBytes and minPartitions must be positive")
    counts = _parts_per_file([p.stat().st_size for p in files], max_bytes, min_parts)
    history = _schema_history(options, files, _filter(options))
    out: list[BinlogPartition] = []
    try:
        for path, n in zip(files, counts, strict=True):
            if n == 1:
                parts = [Part(4, None, None, None, 4)]
            else:
                with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    parts = plan_parts(data, n)
            for part in parts:
                schema = None if history is None else _model_json(history, Position(path.name, part.start))
                out.append(BinlogPartition(len(out), str(path), part, schema))
    finally:
        if history is not None:
            history.close()
    return out


def _following(history: SchemaHistory, events: Iterator[Event]) -> Iterator[Event]:
    for e in events:
        if isinstance(e, QueryEvent) and is_ddl(e.query):
            history.apply_event(e)
        yield e


def read_partition(partition: BinlogPartition, accepts: TableFilter | None) -> Iterator[Any]:
    """The change rows of one partition as Arrow record batches."""
    path = Path(partition.path)
    part = partition.part
    history = None
    if partition.schema is not None:
        history = history_from(partition.schema, path.name, part.start, accepts)
    gtid = None
    if part.transaction_start is not None:
        head = PartEvents(str(path), part)
        event = head.transaction_gtid
        head.close()
        gtid = event.gtid if event is not None else None
    decoder = EventDecoder(str(path), path.name, table_meta=history.table_meta if history else None)
    events: Iterator[Event] = read_events(path, part.start, part.stop, decoder)
    if history is not None:
        events = _following(history, events)
    try:
        yield from EventRows(accepts=accepts, gtid=gtid).batches(events, _BATCH_ROWS)
    finally:
        if history is not None:
            history.close()


class BinlogReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = _lower(options)
        self.accepts = _filter(self.options)

    def partitions(self) -> list[BinlogPartition]:
        return plan_partitions(self.options)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, BinlogPartition)
        yield from read_partition(partition, self.accepts)
        settle()  # PySpark's daemon runs a full collection after every task


class BinlogDataSource(DataSource):
    """The ``binlog`` batch source (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "binlog"

    def schema(self) -> str:
        return ROW_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BinlogReader(self.options)
