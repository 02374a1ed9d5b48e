"""Rows staged by executors: written to an Arrow file the driver reads, instead of through Spark.

Through Spark's JVM a change row costs more CPU than decoding it: Arrow into Spark rows in the
executor, and back to Arrow for the driver's ``toArrow``. With a stage (the ``canal`` source's
``stage`` option: a directory the executors and the driver share, like the lake) a partition
writes its rows to a new Arrow IPC file there (LZ4) and gives one ``STAGED`` row instead (the
position and time of its first row, or of the snapshot chunk; ``after`` ``{"rows": n}``; ``sql``
the file's path). ``ChangeApplier`` puts the file's rows in that row's place (``expand_staged``)
before the change log and the current state see the batch, and deletes the file once the batch's
change log is committed. A replayed micro-batch reads its partitions again, into new files; a new
applier empties the stage before its first batch (files of batches that never committed).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .rows import ARROW_SCHEMA, ChangeRow, RowPosition, to_record_batch

__all__ = ["STAGED", "expand_staged", "stage_rows"]

STAGED = "STAGED"


def stage_rows(
    stage: Path,
    batches: Iterator[pa.RecordBatch],
    database: str | None = None,
    table: str | None = None,
    at: RowPosition | None = None,
    when: datetime | None = None,
) -> pa.RecordBatch | None:
    """Write ``batches`` (change rows) to a new file in ``stage``; their ``STAGED`` row (None: no
    rows), at ``at`` and ``when`` or else at the first row's position and time."""
    stage.mkdir(parents=True, exist_ok=True)
    path = stage / f"{uuid.uuid4().hex}.arrow"  # not a table's name: any character may be in it
    tmp = path.with_suffix(".tmp")
    n, first = 0, None
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, ARROW_SCHEMA, options=options) as out:
        for batch in batches:
            if first is None and batch.num_rows:
                first = batch.slice(0, 1).to_pylist()[0]
            out.write_batch(batch)
            n += batch.num_rows
    if first is None:
        tmp.unlink()
        return None
    os.replace(tmp, path)  # whole or not at all
    if at is None:
        at = RowPosition(**first["position"])
    marker = ChangeRow(STAGED, database, table, None, None, json.dumps({"rows": n}), at, when or first["ts"],
                       str(path), None)  # fmt: skip
    return to_record_batch([marker])


def expand_staged(rows: pa.Table) -> tuple[pa.Table, list[Path]]:
    """``rows`` with each ``STAGED`` row replaced by the rows of its file, and the files."""
    op = rows.column("op")
    staged = pc.indices_nonzero(pc.equal(op, STAGED).fill_null(False)).to_pylist()
    if not staged:
        return rows, []
    parts, files, start = [], [], 0
    paths, infos = rows.column("sql"), rows.column("after")
    for i in staged:
        path = Path(paths[i].as_py())
        try:
            with pa.OSFile(str(path), "rb") as source:  # read into memory: the file goes soon
                chunk = pa.ipc.open_file(source).read_all()
        except (OSError, pa.ArrowInvalid) as exc:
            raise RuntimeError(f"the rows staged in {path} cannot be read: {exc}") from None
        want = json.loads(infos[i].as_py())["rows"]
        if chunk.num_rows != want or chunk.schema != ARROW_SCHEMA:
            raise RuntimeError(
                f"the rows staged in {path} are {chunk.num_rows} rows of {chunk.schema}, its STAGED row "
                f"says {want} rows of the change-row schema"
            )
        parts += [rows.slice(start, i - start), chunk]
        files.append(path)
        start = i + 1
    parts.append(rows.slice(start))
    return pa.concat_tables(parts), files
