"""A snapshot chunk's rows as a current-state data file, written by the executor that read them.

Applied as change rows, a chunk's rows cross the driver twice more than they need: their JSON
images parsed back into typed columns (``MergeSource.read``, 2.8 us a sysbench row on the driver)
and those columns written again as Parquet (0.75 us), one driver for every executor. With the
source's ``snapshotLake``, the executor that read a chunk also writes its rows typed as the chunk's
current-state table has them, a Parquet file in that table's directory that no log entry names
yet (``write_chunk_file``), and the chunk's ``CHUNK`` row names it (``file`` beside the bounds).
The driver commits the file as it is (``adoptable``, ``cow.KeyedTable.write``'s ``chunks``) in
place of the chunk's ``READ`` rows when the file's columns are the schema model's (same names,
types and labels: the typing is the same code), the table has deletion vectors and an integer
first key column, and nothing else of the round shares the chunk's position; otherwise it applies
the ``READ`` rows as before and deletes the file. The change log still gets every ``READ`` row.

The executor types a column straight from the reader's Arrow array where the image would carry the
same value (integers, text: connectorx's arrays are the decoder's values), and every other column
from the chunk's own images with the driver's reader (``types.read_images``), so both give what
the driver would have built; where that reader refuses the images, no file is written. Zero
dates are typed as the applier's ``zero_dates="null"`` would; such a file is taken only by that
applier (with ``"error"`` the READ rows then fail the batch as they did).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.parse.ddl import DdlParseError, parse_statement
from pycanal.parse.meta import SchemaApplyError, SchemaModel, Table
from pycanal.snapshot.chunks import INTEGER_TYPES
from pycanal.snapshot.reader import TEXT_TYPES, ChunkRead
from pycanal.snapshot.window import ChunkColumns
from pycanal.storage import LakePath, lake_path

from .batch import ApplyError, BatchRows
from .cow import ChunkFile, KeyedTable, write_data_file
from .current import table_path
from .merge_source import MergeSource
from .snapshot_ranges import chunk_bound
from .types import ColumnTypeError, json_type, read_images

__all__ = ["adoptable", "write_chunk_file"]


def _typing(t: Table) -> list[list]:
    """What the typing of each column reads of its definition (a file's columns must be the model's)."""
    return [[c.name, c.column_type, c.data_type, c.unsigned, c.labels] for c in t.columns]


def write_chunk_file(
    lake: LakePath, read: ChunkRead | ChunkColumns, create: str, afters: pa.Array
) -> dict | None:
    """Write the rows of ``read`` (a chunk of a table with a primary key; ``create``: its CREATE
    TABLE statement; ``afters``: its rows' after images) as a data file of its current-state table
    in ``lake``; the ``file`` of its ``CHUNK`` row, or None where the rows cannot be typed here."""
    source = read.table
    model = SchemaModel()
    try:
        model.apply(parse_statement(create), source.schema)
    except (DdlParseError, SchemaApplyError):
        return None
    t = model.table(source.schema, source.name)
    if t is None or not t.primary_key or [c.name for c in t.columns] != [c.name for c in source.columns]:
        return None
    for zero_dates in ("error", "null"):  # "null" only where a zero date is there: see adoptable
        try:
            plan = MergeSource(t, zero_dates)
            data = _typed(plan, read, afters)
            break
        except ColumnTypeError as exc:
            if zero_dates == "null" or "zero date" not in str(exc):
                return None
        except (ApplyError, pa.ArrowException, ValueError):
            return None  # the driver reads the images, and says what is wrong if anything is
    if not data.num_rows:
        return None
    key = t.primary_key[0][0]
    first = plan.schema.field(key).type
    if not pa.types.is_integer(first) or first == pa.uint64():
        return None  # files' ranges are kept of integer keys only (cow)
    directory = table_path(lake, source.schema, source.name)
    directory.mkdir()
    name, size, stats = write_data_file(directory, data, key)
    text = json.dumps(stats, separators=(",", ":"))
    return {"dir": directory.uri, "name": name, "size": size, "stats": text, "rows": data.num_rows,
            "columns": _typing(t), "zero_dates": zero_dates}  # fmt: skip


def _typed(plan: MergeSource, read: ChunkRead | ChunkColumns, afters: pa.Array) -> pa.Table:
    """The chunk's rows as the current-state table types them."""
    t = plan.table
    given = read.columns if isinstance(read, ChunkColumns) else [None] * len(t.columns)
    arrays: list[Any] = []
    for c, values, build in zip(t.columns, given, plan.builds, strict=True):
        dt = c.data_type.lower()
        direct = isinstance(values, pa.Array) and (
            (dt in INTEGER_TYPES and pa.types.is_integer(values.type) and not (dt == "bigint" and c.unsigned))
            or (
                dt in TEXT_TYPES
                and (pa.types.is_string(values.type) or pa.types.is_large_string(values.type))
            )
        )
        arrays.append(build(values.cast(json_type(c))) if direct else None)
    if any(a is None for a in arrays):
        images = read_images(afters, t.columns, complete=True)
        arrays = [
            a if a is not None else build(pa.chunked_array(images.column(c.name).chunks, json_type(c)))
            for a, c, build in zip(arrays, t.columns, plan.builds, strict=True)
        ]
    return pa.table(
        [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays], schema=plan.schema
    )


def adoptable(
    plan: MergeSource, target: KeyedTable, rows: BatchRows, idx: pa.Array, chunks: pa.Array
) -> tuple[list[tuple[int, ChunkFile]], pa.Array, list[LakePath]]:
    """Of the ``CHUNK`` rows ``chunks`` (of the table's rows ``idx``), those whose files the table
    takes as they are (each with its row), ``idx`` without their ``READ`` rows, and the files of the
    others, which nobody will take (their READ rows stand for them)."""
    at_rows = chunks.to_pylist()
    infos = [json.loads(rows.columns["after"][c].as_py()) for c in at_rows]
    if not any("file" in i for i in infos):
        return [], idx, []
    ok = (
        target.writable and target.deletion_vectors and target.vectors and not target.extra
        and target.range_key == target.keys[0] and plan.readable
    )  # fmt: skip
    position = rows.columns["position"]
    op, offsets = rows.columns["op"].take(idx), position.field("offset").take(idx)
    names = position.field("file").take(idx)
    at = [(rows.file[c], rows.offset[c]) for c in at_rows]
    taken: list[tuple[int, ChunkFile]] = []
    drop = pa.repeat(False, len(idx))
    unused = []
    for c, bounds, here in zip(at_rows, infos, at, strict=True):
        info = bounds.get("file")
        if not info:
            continue
        reads = pc.and_(pc.equal(op, "READ"), pc.and_(pc.equal(offsets, here[1]), pc.equal(names, here[0])))
        if not (
            ok and info["dir"] == target.path.uri and info["columns"] == _typing(plan.table)
            and info.get("zero_dates") in ("error", plan.zero_dates)
            and at.count(here) == 1 and pc.sum(reads).as_py() == info["rows"]
            and (target.path / info["name"]).exists()
        ):  # fmt: skip
            unused.append(lake_path(info["dir"]) / info["name"])
            continue
        low, high = (chunk_bound(plan, bounds[end]) for end in ("lower", "upper"))
        taken.append((c, ChunkFile(info["name"], info["size"], info["stats"], info["rows"], low, high)))
        drop = pc.or_(drop, reads)
    if not _disjoint([f for _, f in taken]):
        return [], idx, unused + [target.path / f.name for _, f in taken]
    return taken, idx.filter(pc.invert(drop)), unused


def _disjoint(files: list[ChunkFile]) -> bool:
    """Whether the files' key ranges overlap nowhere (two snapshots of a table in one round may)."""

    def key(bound: list | None) -> tuple:
        return tuple(v.as_py() for v in bound) if bound is not None else ()

    spans = sorted(files, key=lambda f: (f.low is not None, key(f.low)))
    return all(
        a.high is not None and b.low is not None and key(a.high) <= key(b.low)
        for a, b in itertools.pairwise(spans)
    )
