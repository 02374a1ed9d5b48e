"""A micro-batch's change rows as the current-state apply reads them (``BatchRows``), and the
error of a batch that cannot be applied.

The rows stay Arrow arrays, each column combined into one array on first use, except the images
of a snapshot's micro-batch (one with CHUNK rows): ~50 MB of READ images that its chunk files
stand for, which combined were a tenth of the driver's CPU in ``bench/snapshot.py``; they stay in
their chunks and ``pycanal.spark.arrow.take`` copies out the rows a table reads. ``op``, ``file``
and ``offset`` read like lists, an item becoming a Python value when it is read.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.protocol.position import binlog_file_order

from .rows import CHUNK

__all__ = ["ApplyError", "BatchRows", "ImagesLeftOut", "position_order"]


class ApplyError(RuntimeError):
    """A micro-batch that cannot be applied faithfully (the message says what and where)."""


class ImagesLeftOut(Exception):
    """READ rows read without their images (``stage.expand_staged``'s ``lean``) are to be applied
    as rows: the chunk's current-state file was not taken. The applier reads the batch again."""


class _AsList:
    """An Arrow array read like a list: an item becomes a Python value when it is read."""

    def __init__(self, array: pa.Array) -> None:
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i: int) -> Any:
        return self.array[i].as_py()

    def __contains__(self, value: object) -> bool:
        return pc.any(pc.equal(self.array, value)).as_py() is True


_IMAGES = frozenset({"pk", "before", "after"})


class _Columns(dict):
    """A table's columns as contiguous arrays, each combined on first use; the images chunked
    once ``chunked_images`` is set."""

    def __init__(self, table: pa.Table) -> None:
        super().__init__()
        self.table = table
        self.chunked_images = False

    def __missing__(self, name: str) -> pa.Array | pa.ChunkedArray:
        column = self.table.column(name)
        keep = self.chunked_images and name in _IMAGES
        array = self[name] = column if keep else column.combine_chunks()
        return array


class BatchRows:
    """A micro-batch's change rows in binlog order: its columns as Arrow arrays, and ``op``,
    ``file`` and ``offset`` read like lists."""

    def __init__(self, table: pa.Table) -> None:
        self.columns = _Columns(table)
        position = self.columns["position"]
        self.op = _AsList(self.columns["op"])
        self.file = _AsList(position.field("file"))
        self.offset = _AsList(position.field("offset"))
        self.chunks = pc.any(pc.equal(self.columns["op"], CHUNK)).as_py() is True  # a snapshot chunk's range
        self.columns.chunked_images = self.chunks
        self._imageless: pa.Array | None = None  # READ rows read without images (check_images)

    def check_images(self, idx: pa.Array) -> None:
        """Raise ``ImagesLeftOut`` where a READ row of ``idx`` has no image (a lean read)."""
        if not self.chunks or not len(idx):
            return
        if self._imageless is None:
            op, after = self.columns["op"], self.columns["after"]
            self._imageless = pc.and_(pc.equal(op, "READ"), pc.is_null(after)).combine_chunks()
        if pc.any(self._imageless.take(idx)).as_py():
            raise ImagesLeftOut(f"READ rows without their images, first at {self.at(idx[0].as_py())}")

    def at(self, i: int) -> str:
        """Row ``i``'s binlog position, as messages name it."""
        return f"{self.file[i]}:{self.offset[i]}"

    def at_or_after(self, idx: pa.Array, file: str, offset: int) -> pa.Array:
        """The rows of ``idx`` at binlog position (file, offset) or later."""
        position = self.columns["position"]
        files, offsets = position.field("file").take(idx), position.field("offset").take(idx)
        floor = binlog_file_order(file)
        names = pc.unique(files)
        # per distinct file name: 1 after the floor's file, 0 the same file, -1 before
        side = pa.array(
            [(o > floor) - (o < floor) for o in map(binlog_file_order, names.to_pylist())], pa.int8()
        )
        side = side.take(pc.index_in(files, value_set=names))
        keep = pc.or_(pc.equal(side, 1), pc.and_(pc.equal(side, 0), pc.greater_equal(offsets, offset)))
        return idx.filter(keep)

    def statements(self) -> list[int]:
        """The DDL rows."""
        return pc.indices_nonzero(pc.equal(self.columns["op"], "DDL").fill_null(False)).to_pylist()

    def tables(self, start: int, stop: int) -> list[tuple[str, str, pa.Array]]:
        """The data rows of ``[start, stop)`` with a key: (database, table, row numbers) per table, in
        the order of their first rows."""
        op, pk = (self.columns[c].slice(start, stop - start) for c in ("op", "pk"))
        keyed = pc.or_(pk.is_valid(), pc.equal(op, CHUNK).fill_null(False)) if self.chunks else pk.is_valid()
        data = pc.and_(pc.not_equal(op, "DDL").fill_null(True), keyed)
        rows = pc.add(pc.indices_nonzero(data).cast(pa.int64()), start)
        names = pa.table({c: self.columns[c].take(rows) for c in ("database", "table")})
        # Without threads, groups come in the order of their first rows and keep the rows' order.
        groups = names.append_column("row", rows).group_by(["database", "table"], use_threads=False)
        out = groups.aggregate([("row", "list")])
        return list(
            zip(
                out["database"].to_pylist(),
                out["table"].to_pylist(),
                (v.values for v in out["row_list"]),
                strict=True,
            )
        )


def position_order(file: str, offset: int) -> tuple[str, int, int]:
    """A binlog position as a sortable key."""
    return (*binlog_file_order(file), offset)
