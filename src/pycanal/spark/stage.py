"""Rows staged by executors: written to an Arrow file the driver reads, instead of through Spark.

Through Spark's JVM a change row costs more CPU than decoding it: Arrow into Spark rows in the
executor, and back to Arrow for the driver's ``toArrow``. With a stage (the ``canal`` source's
``stage`` option: a directory the executors and the driver share, like the lake) a partition
writes its rows to a new Arrow IPC file there (LZ4; on S3 an object, its settings from each
process's environment) and gives one ``STAGED`` row instead (the
position and time of its first row, or of the snapshot chunk; ``after`` ``{"rows": n}``; ``sql``
the file's path). ``ChangeApplier`` puts the file's rows in that row's place (``expand_staged``)
before the change log and the current state see the batch, and deletes the file once the batch's
change log is committed. A replayed micro-batch reads its partitions again, into new files; a new
applier empties the stage before its first batch (files of batches that never committed).

A snapshot chunk's rows are staged as a change-log data file instead (``changelog.write_unnamed``,
the ``STAGED`` row's ``after`` then has its ``log`` entry): the change log takes the file as it is
when it was written for the batch being applied, and the driver reads it only for the current state.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pycanal.storage import LakePath, lake_path

from .rows import ARROW_SCHEMA, CHUNK, ChangeRow, RowPosition, to_record_batch

__all__ = ["STAGED", "Staged", "expand_staged", "read_staged", "stage_file", "stage_rows", "staged_row"]

STAGED = "STAGED"


def stage_rows(
    stage: str | LakePath,
    batches: Iterator[pa.RecordBatch],
    database: str | None = None,
    table: str | None = None,
    at: RowPosition | None = None,
    when: datetime | None = None,
) -> pa.RecordBatch | None:
    """Write ``batches`` (change rows) to a new file in ``stage``; their ``STAGED`` row (None: no
    rows), at ``at`` and ``when`` or else at the first row's position and time."""
    first: dict[str, Any] | None = None

    def noting_first(batch: pa.RecordBatch) -> pa.RecordBatch:
        nonlocal first
        if first is None and batch.num_rows:
            first = batch.slice(0, 1).to_pylist()[0]
        return batch

    written = stage_file(stage, ARROW_SCHEMA, map(noting_first, batches))
    if written is None or first is None:
        return None
    path, n = written
    if at is None:
        at = RowPosition(**first["position"])
    return staged_row(path, n, database, table, at, when or first["ts"])


def staged_row(
    path: LakePath,
    rows: int,
    database: str | None,
    table: str | None,
    at: RowPosition,
    when: datetime,
    log: dict[str, Any] | None = None,
) -> pa.RecordBatch:
    """The ``STAGED`` row of ``rows`` change rows in ``path`` (``log``: the file is a change-log
    data file, its ``changelog.write_unnamed`` entry)."""
    info: dict[str, Any] = {"rows": rows} if log is None else {"rows": rows, "log": log}
    marker = ChangeRow(STAGED, database, table, None, None, json.dumps(info), at, when, str(path), None)
    return to_record_batch([marker])


@dataclass(frozen=True)
class Staged:
    """A staged file ``expand_staged`` read: where its ``rows`` rows are in the table it gave
    (from ``start``), and ``log``, the entry of a change-log data file (else None)."""

    path: LakePath
    start: int
    rows: int
    log: dict[str, Any] | None


def expand_staged(
    rows: pa.Table, lean: Callable[[LakePath, dict[str, Any]], bool] | None = None
) -> tuple[pa.Table, list[Staged]]:
    """``rows`` with each ``STAGED`` row replaced by the rows of its file, and the files. A
    snapshot chunk's change-log file for which ``lean(path, log)`` says so is read without its
    READ rows' images (``after`` null there: ``batch.ImagesLeftOut`` where they are needed)."""
    op = rows.column("op")
    staged = pc.indices_nonzero(pc.equal(op, STAGED).fill_null(False)).to_pylist()
    if not staged:
        return rows, []
    parts, files, start, at = [], [], 0, 0
    paths, infos = rows.column("sql"), rows.column("after")
    for i in staged:
        path = lake_path(paths[i].as_py())
        info = json.loads(infos[i].as_py())
        log = info.get("log")
        if log is None:
            chunk = read_staged(path)
        else:
            chunk = _read_logged(path, log.get("chunk") if lean is not None and lean(path, log) else None)
        if chunk.num_rows != info["rows"] or chunk.schema != ARROW_SCHEMA:
            raise RuntimeError(
                f"the rows staged in {path} are {chunk.num_rows} rows of {chunk.schema}, its STAGED row "
                f"says {info['rows']} rows of the change-row schema"
            )
        parts += [rows.slice(start, i - start), chunk]
        at += i - start
        files.append(Staged(path, at, chunk.num_rows, log))
        at += chunk.num_rows
        start = i + 1
    parts.append(rows.slice(start))
    return pa.concat_tables(parts), files


_AFTER = ARROW_SCHEMA.get_field_index("after")


def _read_logged(path: LakePath, chunk: str | None = None) -> pa.Table:
    """The change rows of a change-log data file an executor wrote; with ``chunk`` (the image of
    its last row, a ``CHUNK`` row) without the other rows' images, the bulk of the file."""
    names = ARROW_SCHEMA.names if chunk is None else [n for n in ARROW_SCHEMA.names if n != "after"]
    try:
        with path.input_file() as source:
            table = pq.read_table(source, columns=names)
    except (OSError, pa.ArrowInvalid) as exc:
        raise RuntimeError(f"the rows staged in {path} cannot be read: {exc}") from None
    if chunk is not None:
        n = table.num_rows
        if not n or table.column("op")[n - 1].as_py() != CHUNK:
            raise RuntimeError(f"the rows staged in {path} do not end with their chunk's CHUNK row")
        images = pa.concat_arrays([pa.nulls(n - 1, pa.string()), pa.array([chunk], pa.string())])
        table = table.add_column(_AFTER, "after", images)
    return table.cast(ARROW_SCHEMA)


def stage_file(
    stage: str | LakePath, schema: pa.Schema, batches: Iterable[pa.RecordBatch], prefix: str = ""
) -> tuple[LakePath, int] | None:
    """``batches`` written to a new Arrow IPC file (LZ4) in ``stage``, whole or not at all: its path
    and row count (None, and no file, without rows)."""
    stage = lake_path(stage)
    stage.mkdir()
    path = stage / f"{prefix}{uuid.uuid4().hex}.arrow"  # not a table's name: any character may be in it
    n = 0
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with path.output_stream() as sink, pa.ipc.new_file(sink, schema, options=options) as out:
        for batch in batches:
            out.write_batch(batch)
            n += batch.num_rows
    if not n:
        path.unlink()
        return None
    return path, n


def read_staged(path: LakePath) -> pa.Table:
    """A staged file's rows, read into memory (the file goes soon)."""
    try:
        with path.input_file() as source:
            return pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowInvalid) as exc:
        raise RuntimeError(f"the rows staged in {path} cannot be read: {exc}") from None
