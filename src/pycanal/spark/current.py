"""The current-state tables: one Delta table per source table with a primary key (delta-rs).

``CurrentState.apply`` walks a micro-batch's rows in binlog order. Data rows are grouped per
table until the next DDL statement; each group is one MERGE keeping only the last change per key
(a DELETE deletes, an UPDATE that changes the key deletes the old key), committed copy-on-write
by ``cow.KeyedTable`` (or delta-rs' MERGE for tables that ask more of a writer). Its source is
built from the row images as pyarrow's JSON reader reads them (``read_images``: vectorised), or,
for few rows or where that could differ from ``json.loads`` (non-canonical images, FLOAT or SET
keys, errors), parsed one by one: the same values either way, and the second way says what is
wrong where something is.

A DDL statement is first followed by the schema model (``SchemaModel.apply``, the schema
history's own code), then carried to the Delta tables: CREATE makes an empty table, ALTER
rewrites it with the new columns (renamed columns keep their values, added ones get their
default, changed types are cast), RENAME moves it, TRUNCATE deletes all rows, DROP TABLE / DROP
DATABASE / a lost primary key retire it (moved to ``<target>/_pycanal/retired``). Tables without a
primary key have no current-state table.

Exactly once: every such action is a numbered *step* of the batch, numbered from the rows alone
(the same in a replay). Each Delta commit carries the transaction id ``(app_id, batch_id *
1_000_000 + step)``, so a replay sees ``transaction_version`` and skips it; the steps done are also
journaled after each one (``on_step``), which covers the file moves that live outside any Delta log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, reduce
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Schema, Transaction, write_deltalake

from pycanal.parse.ddl import (
    AlterTable,
    CreateTable,
    DdlParseError,
    DropDatabase,
    DropIndex,
    DropTables,
    RenameTables,
    TableName,
    TruncateTable,
    parse_ddl,
    parse_statement,
)
from pycanal.parse.meta import Column, SchemaApplyError, SchemaModel, Table
from pycanal.protocol.position import binlog_file_order

from .cow import CONTENTS, WRITER_PROPERTIES, Contents, KeyedTable, read_rows
from .executors import Failure, MergeContext, MergeWork
from .maintenance import Maintenance
from .rows import CHUNK, SNAPSHOT_DDL
from .tablestate import table_state
from .types import (
    ArrowValues,
    ColumnTypeError,
    InexactRead,
    array_converter,
    arrow_field,
    arrow_type,
    column_converter,
    default_value,
    json_type,
    read_images,
)

__all__ = [
    "APP_ID",
    "STEPS_PER_BATCH",
    "ApplyError",
    "BatchRows",
    "CurrentState",
    "read_current",
    "table_path",
]

APP_ID = "pycanal.apply"
STEPS_PER_BATCH = 1_000_000
_OP = "__pycanal_op"
_UPSERT, _DELETE = pa.scalar("U"), pa.scalar("D")  # its values
# Below this many rows a table's images are parsed one by one: pyarrow's JSON reader costs ~1 ms a
# call, which 1-row transactions over 200 tables pay 200 times a micro-batch (3-column table:
# 25 rows 4.3x, 250 rows 1.2x faster one by one; 1,000 rows 1.5x slower).
_SMALL = 128


class ApplyError(RuntimeError):
    """A micro-batch that cannot be applied faithfully (the message says what and where)."""


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


class _Columns(dict):
    """A table's columns as contiguous arrays, each combined on first use (the images, most of
    a batch's bytes, only where a table's rows are read)."""

    def __init__(self, table: pa.Table) -> None:
        super().__init__()
        self.table = table

    def __missing__(self, name: str) -> pa.Array:
        array = self[name] = self.table.column(name).combine_chunks()
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


def _order(file: str, offset: int) -> tuple[str, int, int]:
    """A binlog position as a sortable key."""
    return (*binlog_file_order(file), offset)


def _segment(name: str) -> str:
    s = quote(name, safe="")
    return s.replace(".", "%2E") if s in (".", "..") else s


@lru_cache(maxsize=4096)  # every merge into a table asks it
def table_path(target_dir: str | Path, database: str, table: str) -> Path:
    """Where the current-state Delta table of ``database.table`` lives."""
    return Path(target_dir) / "current" / _segment(database) / _segment(table)


def read_current(spark: Any, target_dir: str | Path, database: str, table: str) -> Any:
    """The current-state table of ``database.table`` as a Spark DataFrame, read from its live file
    list (Spark's own Delta connector is not needed): the one ``tablestate`` reads from the last
    checkpoint and the entries after it, or delta-rs' where that does not read the table; rows
    that deletion vectors hide are left out by their files' row index (Spark's
    ``_metadata.row_index``)."""
    import numpy as np
    import pandas as pd
    from pyspark.sql.pandas.types import from_arrow_schema

    path = table_path(target_dir, database, table)
    state = table_state(path)
    if state is not None:
        schema = from_arrow_schema(state.schema, prefer_timestamp_ntz=True)
        if not state.files:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*(str(f) for f in state.files))
    dt = DeltaTable(str(path))
    schema = from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=True)
    files = dt.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    data = spark.read.schema(schema).parquet(*files)
    vectors = pa.table(dt.deletion_vectors())
    if not vectors.num_rows:
        return data
    names, rows = [], []
    for uri, keep in zip(
        vectors["filepath"].to_pylist(), vectors["selection_vector"].to_pylist(), strict=True
    ):
        hidden = np.flatnonzero(~np.asarray(keep, bool))
        names.append(np.full(len(hidden), uri.rsplit("/", 1)[-1], dtype=object))
        rows.append(hidden)
    hidden = spark.createDataFrame(
        pd.DataFrame({"__file": np.concatenate(names), "__row": np.concatenate(rows).astype(np.int64)})
    )
    data = data.select("*", "_metadata.file_name", "_metadata.row_index")
    data = data.withColumnsRenamed({"file_name": "__file", "row_index": "__row"})
    return data.join(hidden, ["__file", "__row"], "left_anti").drop("__file", "__row")


def arrow_schema(table: Table) -> pa.Schema:
    try:
        return pa.schema([arrow_field(c) for c in table.columns])
    except ColumnTypeError as exc:
        raise ApplyError(f"{table.schema}.{table.name}: {exc}") from None


def _columns(schema: pa.Schema) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in Schema.from_arrow(schema).fields]


class _Plan(NamedTuple):
    schema: pa.Schema  # the current-state table's
    convs: list[Callable[[list], pa.Array]]  # per column: values parsed by json.loads -> Arrow
    builds: list[Callable[[ArrowValues], ArrowValues]]  # per column: values read by read_images -> Arrow
    keys: list[Column]  # the key columns
    readable: bool  # whether read key values compare as parsed ones do (read_images can be used)
    source: pa.Schema  # the MERGE source's: the table's and the operation (_OP)


def _readable_key(col: Column) -> bool:
    """Not FLOAT/DOUBLE (-0.0 == 0.0 when parsed) nor SET."""
    t = json_type(col)
    return t in (pa.int64(), pa.uint64(), pa.string()) or pa.types.is_struct(t)


def _arange(n: int) -> pa.Array:
    """0, 1, ..., n - 1 (without a Python list)."""
    return pc.indices_nonzero(pa.repeat(True, n)).cast(pa.int64())


def _take(values: pa.Array, rows: pa.Array) -> pa.Array:
    """``values.take(rows)``; a slice (no copy) when the rows are consecutive."""
    n = len(rows)
    if n and rows[n - 1].as_py() - rows[0].as_py() == n - 1 and pc.all(pc.less(rows[:-1], rows[1:])).as_py():
        return values.slice(rows[0].as_py(), n)
    return values.take(rows)


def _comparable(values: pa.Array) -> pa.Array:
    """Key values as compared: a binary value by its base64 text (as the parsed ``{"base64": ...}``)."""
    return pc.struct_field(values, [0]) if pa.types.is_struct(values.type) else values


_SCAN = json.JSONDecoder().scan_once  # json.loads' own C scanner, without its three Python calls


def _loads(text: Any) -> Any:
    """``json.loads(text)``: an image (one JSON value, nothing around it) scanned directly, what
    is not one through ``json.loads`` itself (the same value, or its error). A micro-batch of
    1-row transactions parses two or three tiny images a row, a tenth of the driver's CPU."""
    try:
        value, end = _SCAN(text, 0)
    except Exception:  # noqa: BLE001 - json.loads says what is wrong
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _hashable(v: Any) -> Any:
    if type(v) is dict:
        return json.dumps(v, sort_keys=True)
    if type(v) is list:
        return tuple(v)
    return v


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class CurrentState:
    """Apply one micro-batch to the current-state tables (see the module docstring).

    ``model`` is the schema model in force before the batch; it is updated in place by the
    batch's DDL. Steps up to ``done_step`` were done by an earlier attempt of this batch.
    ``threads``: MERGEs of different tables run at once. ``tables``: the open tables by path, kept
    from batch to batch (a table's log is not read again; any DDL empties it); ``contents``: the
    rows of written files kept in memory (default the process's ``cow.CONTENTS``). ``maintenance``:
    the upkeep after each MERGE. ``executors``: writes the tables of a step group elsewhere
    (``executors.run_in_executors`` with its Spark session bound); ``epoch`` names the tables'
    state for them and changes with every DDL statement.
    """

    def __init__(
        self,
        target_dir: str | Path,
        batch_id: int,
        model: SchemaModel,
        *,
        done_step: int = 0,
        on_step: Callable[[int], None] = lambda step: None,
        zero_dates: str = "error",
        app_id: str = APP_ID,
        threads: int = 1,
        tables: dict[str, KeyedTable] | None = None,
        contents: Contents | None = None,
        maintenance: Maintenance | None = None,
        declared: dict[str, list] | None = None,
        executors: Callable[[MergeContext, list[MergeWork]], tuple[list[Failure | None], dict[str, int]]]
        | None = None,
        epoch: str = "",
    ) -> None:
        self.root = Path(target_dir)
        self.executors, self.epoch = executors, epoch
        # "db.table" -> [file, offset] of the snapshot's CREATE TABLE (SNAPSHOT_DDL): the schema
        # there; the stream's changes before it are in the snapshot's chunks (read after it)
        self.declared = declared if declared is not None else {}
        self.threads = threads
        self.tables = tables if tables is not None else {}
        self.contents = contents if contents is not None else CONTENTS
        self.maintenance = maintenance
        self.batch_id = batch_id
        self.model = model
        self.done_step = done_step
        self.on_step = on_step
        self.zero_dates = zero_dates
        self.app_id = app_id
        self.step = 0
        self.warnings: list[str] = []
        self._plans: dict[int, _Plan] = {}

    # ------------------------------------------------------------------ steps
    def _next(self) -> int | None:
        """The next step's number, or None when an earlier attempt did it."""
        self.step += 1
        if self.step >= STEPS_PER_BATCH:
            raise ApplyError(f"micro-batch {self.batch_id} needs more than {STEPS_PER_BATCH} steps")
        return None if self.step <= self.done_step else self.step

    def _txn(self, step: int) -> CommitProperties:
        version = self.batch_id * STEPS_PER_BATCH + step
        return CommitProperties(
            app_transactions=[Transaction(self.app_id, version)],
            custom_metadata={"pycanal.batch_id": self.batch_id, "pycanal.step": step},
        )

    def _committed(self, dt: DeltaTable, step: int) -> bool:
        done = dt.transaction_version(self.app_id)
        return done is not None and done >= self.batch_id * STEPS_PER_BATCH + step

    # ------------------------------------------------------------------ walk
    def apply(self, rows: BatchRows) -> None:
        start, last_ddl = 0, None
        for i in rows.statements():
            at = (rows.file[i], rows.offset[i])
            sql, session_db = (rows.columns[c][i].as_py() for c in ("sql", "sql_database"))
            # One statement, one row per table it touches; snapshot CREATEs share a position.
            if (at, sql) != last_ddl:
                last_ddl = (at, sql)
                self._flush(rows, start, i)
                start = i
                where = f"{at[0]}:{at[1]}"
                if sql and sql.startswith(SNAPSHOT_DDL):
                    database, table = rows.columns["database"][i].as_py(), rows.columns["table"][i].as_py()
                    known = self.model.table(database, table)
                    self._ddl(sql, session_db, where)  # IF NOT EXISTS: a table the model has stays
                    name = f"{database}.{table}"
                    if name not in self.declared or _order(*self.declared[name]) < _order(*at):
                        self.declared[name] = list(at)
                    if known is not None and not _ranged_key(known):
                        # Its chunks carry no key range to delete by: the rows of the table the
                        # source may not have any more (the stream's deletes before the
                        # declaration are skipped) go now, and the chunks bring the table back.
                        step = self._next()
                        if step is not None:
                            self._truncate((database, table), step)
                            self.on_step(step)
                    continue
                covered = self._declared_after(rows, i, sql, at)
                if covered:
                    self.warnings.append(
                        f"DDL at {where} skipped: the snapshot's schema of {covered} is later"
                    )
                else:
                    self._ddl(sql or "", session_db, where)
        self._flush(rows, start, len(rows.op))

    def _declared_after(self, rows: BatchRows, i: int, sql: str | None, at: tuple[str, int]) -> str | None:
        """The tables of the statement at row ``i`` when the snapshot declared all of them after
        ``at`` (the statement is in their declared schema already), else None."""
        names = set()
        for j in range(i, len(rows.op)):
            if (
                rows.op[j] != "DDL"
                or (rows.file[j], rows.offset[j]) != at
                or rows.columns["sql"][j].as_py() != sql
            ):
                break
            table = rows.columns["table"][j].as_py()
            if table is not None:
                names.add(f"{rows.columns['database'][j].as_py()}.{table}")
        if names and all(n in self.declared and _order(*self.declared[n]) > _order(*at) for n in names):
            return ", ".join(sorted(names))
        return None

    def _flush(self, rows: BatchRows, start: int, stop: int) -> None:
        """MERGE the data rows since the last DDL statement, a step per table. The tables are
        disjoint, so their MERGEs run on ``threads`` threads (delta-rs works without the GIL); the
        journal notes the last step once all are done (a replay redoes the group, and the Delta
        transaction id of each MERGE skips those that were committed)."""
        todo = []
        for database, table, idx in rows.tables(start, stop) if stop > start else []:
            since = self.declared.get(f"{database}.{table}")
            if since is not None:  # the stream's rows before the snapshot's schema: in its chunks
                idx = rows.at_or_after(idx, since[0], since[1])
                if not len(idx):
                    continue
            step = self._next()
            if step is not None:
                todo.append((database, table, idx, rows, step))
        if not todo:
            return
        if self.executors is not None:
            self._in_executors(todo)
        elif self.threads <= 1 or len(todo) == 1:
            for args in todo:
                self._merge(*args)
        else:
            with ThreadPoolExecutor(min(self.threads, len(todo)), thread_name_prefix="pycanal-merge") as pool:
                futures = [pool.submit(self._merge, *args) for args in todo]
            for future in futures:  # the first failure in step order
                future.result()
        self.on_step(todo[-1][-1])

    def _in_executors(self, todo: list[tuple[str, str, pa.Array, BatchRows, int]]) -> None:
        """The group's writes by ``self.executors``; the first error in step order is raised."""
        works = []
        for database, table, idx, rows, step in todo:
            i = idx[0].as_py()
            t = self._table(database, table, f"first at {rows.file[i]}:{rows.offset[i]}")
            works.append(MergeWork(database, table, step, t, rows.columns.table.take(idx)))
        context = MergeContext(
            str(self.root), self.batch_id, self.app_id, self.zero_dates, self.model.lower_case_table_names,
            self.maintenance.settings() if self.maintenance is not None else None, self.epoch, self.threads,
        )  # fmt: skip
        errors, done = self.executors(context, works)
        if self.maintenance is not None:
            for what, n in done.items():
                self.maintenance.done[what] += n
        for failure in errors:
            if failure is not None:
                kind, message = failure
                raise (
                    ApplyError(message)
                    if kind == "ApplyError"
                    else RuntimeError(f"in an executor: {kind}: {message}")
                )

    def write_rows(self, database: str, table: str, rows: pa.Table, step: int) -> None:
        """Step ``step``: ``rows`` (change rows of ``database.table``, binlog order) into its
        current-state table (an executor's part of ``_flush``)."""
        self._merge(database, table, _arange(rows.num_rows), BatchRows(rows), step)

    # ------------------------------------------------------------------ merge
    def _table(self, database: str, table: str, where: str) -> Table:
        t = self.model.table(database, table)
        if t is None:
            raise ApplyError(
                f"rows of {database}.{table} ({where}): the table is not in the schema model; give apply_changes "
                "the schema (schema=, schema_ddl= or schema_history=) or start before its CREATE TABLE"
            )
        if not t.primary_key:
            raise ApplyError(
                f"rows of {database}.{table} ({where}) carry a primary key; the schema model has none"
            )
        return t

    def _plan(self, t: Table) -> _Plan:
        plan = self._plans.get(t.uid)
        if plan is None:
            try:
                convs = [column_converter(c, self.zero_dates) for c in t.columns]
                builds = [array_converter(c, self.zero_dates) for c in t.columns]
            except ColumnTypeError as exc:
                raise ApplyError(f"{t.schema}.{t.name}: {exc}") from None
            by_name = {c.name: c for c in t.columns}
            keys = [by_name[name] for name, _ in t.primary_key if name in by_name]
            readable = len(keys) == len(t.primary_key) and all(_readable_key(c) for c in keys)
            schema = arrow_schema(t)
            source = schema.append(pa.field(_OP, pa.string()))
            plan = self._plans[t.uid] = _Plan(schema, convs, builds, keys, readable, source)
        return plan

    def _merge(self, database: str, table: str, idx: pa.Array, rows: BatchRows, step: int) -> None:
        i = idx[0].as_py()
        first = f"first at {rows.file[i]}:{rows.offset[i]}"
        t = self._table(database, table, first)
        plan = self._plan(t)
        chunks = idx[:0]
        if rows.chunks:
            is_chunk = pc.equal(rows.columns["op"].take(idx), CHUNK)
            chunks, idx = idx.filter(is_chunk), idx.filter(pc.invert(is_chunk))
        source = None
        if plan.readable and len(idx) >= _SMALL:
            try:
                source = self._read_source(t, plan, idx, rows)
            except (pa.ArrowException, ValueError):
                pass  # parsed one by one instead, which also says what is wrong if anything is
        if source is None:
            source = self._parse_source(database, table, first, t, plan, idx, rows)
        keys = [name for name, _ in t.primary_key]
        target = self._open(database, table, t)
        version = self.batch_id * STEPS_PER_BATCH + step
        if target.committed(version):
            return
        if len(chunks):
            source = self._snapshot_ranges(t, plan, target, rows, idx, chunks, source)
        try:
            data = source.drop_columns([_OP])
            n = pc.index(source.column(_OP), _DELETE).as_py()  # upserts first (_source), then deletes
            n = source.num_rows if n < 0 else n
            upserts, deletes = data.slice(0, n), data.slice(n).select(keys)
            metadata = {"pycanal.batch_id": self.batch_id, "pycanal.step": step}
            if not (target.writable and target.write(upserts, deletes, version, metadata)):
                predicate = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in keys)
                (
                    target.delta()
                    .merge(
                        source,
                        predicate,
                        source_alias="s",
                        target_alias="t",
                        commit_properties=self._txn(step),
                        writer_properties=WRITER_PROPERTIES,
                    )
                    .when_matched_delete(f"s.{_OP} = 'D'")
                    .when_matched_update_all(f"s.{_OP} = 'U'", except_cols=[_OP])
                    .when_not_matched_insert_all(f"s.{_OP} = 'U'", except_cols=[_OP])
                    .execute()
                )
                target.reload()
        except BaseException:
            self.tables.pop(str(table_path(self.root, database, table)), None)  # read it again
            raise
        if self.maintenance is not None:
            self.maintenance.after_merge(f"{database}.{table}", target)

    def _snapshot_ranges(
        self, t: Table, plan: _Plan, target: KeyedTable, rows: BatchRows, idx: pa.Array, chunks: pa.Array,
        source: pa.Table,
    ) -> pa.Table:  # fmt: skip
        """``source`` with deletes for the keys each snapshot chunk (a ``CHUNK`` row) shows the
        source did not have at its position: in the chunk's key range, in the lake or upserted by
        the batch's earlier rows, not among the chunk's ``READ`` rows and not changed after it."""
        if not plan.readable:
            return source  # a key read one by one (FLOAT, ...): emptied at its declaration if the lake had it
        keys = [c.name for c in plan.keys]
        op = source.column(_OP)
        upserted = source.filter(pc.equal(op, "U")).select(keys)
        gone = []
        ranged = _ranged_key(t)
        for c in chunks.to_pylist():
            at = (rows.file[c], rows.offset[c])
            bounds = json.loads(rows.columns["after"][c].as_py())
            if not ranged and (bounds["lower"] is not None or bounds["upper"] is not None):
                continue  # a range of keys the lake orders otherwise: emptied at its declaration
            low, high = (self._bound(t, plan, bounds[end]) for end in ("lower", "upper"))
            lake = target.key_rows(low and low[0].as_py(), high and high[0].as_py()).cast(upserted.schema)
            candidates = pa.concat_tables([lake, upserted])
            candidates = candidates.filter(_in_range([candidates.column(k) for k in keys], low, high))
            if not candidates.num_rows:
                continue
            later = rows.at_or_after(idx, at[0], at[1] + 1)
            position = rows.columns["position"]
            reads = idx.filter(
                pc.and_(
                    pc.equal(rows.columns["op"].take(idx), "READ"),
                    pc.and_(pc.equal(position.field("offset").take(idx), at[1]),
                            pc.equal(position.field("file").take(idx), at[0])),
                )
            )  # fmt: skip
            updates = later.filter(pc.equal(rows.columns["op"].take(later), "UPDATE"))
            keep = pa.concat_tables([
                self._typed_keys(t, plan, _take(rows.columns["pk"], reads)),
                self._typed_keys(t, plan, _take(rows.columns["pk"], later)),
                self._typed_keys(t, plan, _take(rows.columns["before"], updates), images=True),
            ]).cast(upserted.schema)  # fmt: skip
            gone.append(candidates.join(keep, keys, join_type="left anti"))
        if not gone:
            return source
        drop = pa.concat_tables(gone).group_by(keys, use_threads=False).aggregate([])
        if not drop.num_rows:
            return source
        numbered = source.select(keys).append_column("__row", _arange(source.num_rows))
        hit = numbered.join(drop, keys, join_type="inner").column("__row")
        kept = source.filter(
            pc.invert(pc.and_(pc.is_in(_arange(source.num_rows), value_set=hit), pc.equal(op, "U")))
        )
        extra = drop.join(source.filter(pc.equal(op, "D")).select(keys), keys, join_type="left anti")
        more = pa.table(
            {
                f.name: extra.column(f.name) if f.name in keys else pa.nulls(extra.num_rows, f.type)
                for f in plan.schema
            }
            | {_OP: pa.array(["D"] * extra.num_rows, pa.string())}
        )
        return pa.concat_tables([kept, more.cast(kept.schema)])  # upserts still first

    def _bound(self, t: Table, plan: _Plan, bound: str | list | None) -> list[pa.Scalar] | None:
        """A ``CHUNK`` row's bound as the current-state table types its key: from its key image,
        or (the integer list of lakes written before images) from the numbers."""
        if bound is None:
            return None
        if isinstance(bound, list):
            return [
                pa.scalar(v, plan.schema.field(c.name).type) for v, c in zip(bound, plan.keys, strict=True)
            ]
        key = self._typed_keys(t, plan, pa.array([bound], pa.string()))
        return [key.column(c.name)[0] for c in plan.keys]

    def _typed_keys(self, t: Table, plan: _Plan, texts: pa.Array, *, images: bool = False) -> pa.Table:
        """The keys of pk texts (or of whole row images) as the current-state table types them."""
        names = [c.name for c in plan.keys]
        if not len(texts):
            return plan.schema.empty_table().select(names)
        read = read_images(texts, t.columns if images else plan.keys)
        arrays = []
        for c in plan.keys:
            build = plan.builds[t.columns.index(c)]
            arrays.append(build(pa.chunked_array(read.column(c.name).chunks, json_type(c))))
        return pa.table(dict(zip(names, arrays, strict=True)))

    def _read_source(self, t: Table, plan: _Plan, idx: pa.Array, rows: BatchRows) -> pa.Table:
        """The MERGE source from the images as ``read_images`` reads them, which raises where
        ``_parse_source`` could differ (it is the same otherwise)."""
        names = [f"k{j}" for j in range(len(plan.keys))]  # no clash with the columns added below
        op = rows.columns["op"].take(idx)
        pk = read_images(_take(rows.columns["pk"], idx), plan.keys).rename_columns(names)
        updates = pc.indices_nonzero(pc.equal(op, "UPDATE"))
        old = read_images(_take(rows.columns["before"], idx.take(updates)), t.columns)
        old = old.select([c.name for c in plan.keys]).rename_columns(names)
        if any(c.null_count for c in pk.columns + old.columns):
            raise InexactRead("a key value is null or missing")
        # The changes in binlog order (seq); an UPDATE that changes its key deletes the old one first.
        row = _arange(len(idx))
        changes = pk.append_column("row", row).append_column("delete", pc.equal(op, "DELETE"))
        changes = changes.append_column("seq", pc.add(pc.multiply(row, 2), 1))
        moved = pc.indices_nonzero(
            reduce(
                pc.or_, [pc.not_equal(_comparable(old[k]), _comparable(pk[k].take(updates))) for k in names]
            )
        )
        if len(moved):
            moved_row = updates.take(moved).cast(pa.int64())
            old = (
                old.take(moved)
                .append_column("row", moved_row)
                .append_column("delete", pa.repeat(True, len(moved)))
            )
            changes = pa.concat_tables([changes, old.append_column("seq", pc.multiply(moved_row, 2))])
            changes = changes.take(pc.sort_indices(changes["seq"]))
        # The last change per key, in the order of the keys' first changes.
        at = pa.table({**{k: _comparable(changes[k]) for k in names}, "at": _arange(changes.num_rows)})
        per_key = at.group_by(names, use_threads=False).aggregate([("at", "min"), ("at", "max")])
        if per_key.num_rows < changes.num_rows:
            changes = changes.take(per_key["at_max"].take(pc.sort_indices(per_key["at_min"])))
        deletes = changes.filter(changes["delete"])
        upserts = changes.filter(pc.invert(changes["delete"]))["row"].combine_chunks()
        after = read_images(_take(rows.columns["after"], idx.take(upserts)), t.columns, complete=True)
        key_of = {c.name: k for c, k in zip(plan.keys, names, strict=True)}
        arrays = []
        for c, build in zip(t.columns, plan.builds, strict=True):
            k = key_of.get(c.name)
            gone = [pa.nulls(deletes.num_rows, json_type(c))] if k is None else deletes[k].chunks
            arrays.append(build(pa.chunked_array(after[c.name].chunks + gone, json_type(c))))
        return _source(plan, arrays, after.num_rows, deletes.num_rows)

    def _parse_source(
        self, database: str, table: str, first: str, t: Table, plan: _Plan, idx: pa.Array, rows: BatchRows
    ) -> pa.Table:
        """The MERGE source from the images parsed one by one (``json.loads``)."""
        keys = [name for name, _ in t.primary_key]
        names = [c.name for c in t.columns]
        ops, pks, befores, afters = (
            rows.columns[c].take(idx).to_pylist() for c in ("op", "pk", "before", "after")
        )
        row = idx.to_pylist()

        def at(p: int) -> str:
            return f"{rows.file[row[p]]}:{rows.offset[row[p]]}"

        def key_of(image: dict, p: int) -> tuple:
            try:
                return tuple(_hashable(image[k]) for k in keys)
            except KeyError as exc:
                raise ApplyError(
                    f"{database}.{table} at {at(p)}: the row has no key column {exc}; the schema model's key is {keys}"
                ) from None

        # Keys are compared as parsed values, whatever the spacing of the JSON texts.
        last: dict[tuple, tuple[str, Any]] = {}  # key -> ("U", p) or ("D", key values); p: index in row
        for p, op in enumerate(ops):
            pk = _loads(pks[p])
            key = key_of(pk, p)
            if op == "UPDATE":
                old = _loads(befores[p])
                old_key = key_of(old, p)
                if old_key != key:  # the key changed: the old one is deleted
                    last[old_key] = ("D", {k: old[k] for k in keys})
            last[key] = ("D", pk) if op == "DELETE" else ("U", p)
        upserts, deletes, origin = [], [], []  # origin: the row of each upsert
        for kind, v in last.values():
            if kind == "D":
                deletes.append(v)
            else:
                origin.append(v)
                image = _loads(afters[v])
                if ops[v] == "READ" and image.keys() != set(names):
                    # A snapshot chunk read after a DDL the stream has not brought here yet (it is
                    # before the chunk's position, so it comes): the row as the model has it now.
                    image = {n: image.get(n) for n in names}
                if len(image) != len(names):
                    raise ApplyError(
                        f"{database}.{table} at {at(v)}: the after image has {len(image)} of the {len(names)} "
                        "columns (binlog_row_image must be FULL for current-state tables)"
                    )
                upserts.append(image)
        arrays = []
        for name, conv in zip(names, plan.convs, strict=True):
            try:
                values = [u[name] for u in upserts] + [d.get(name) for d in deletes]
                arrays.append(conv(values))
            except KeyError:
                raise ApplyError(
                    f"{database}.{table} ({first}): the rows have no column `{name}`; the schema model does not "
                    "match the source there"
                ) from None
            except ColumnTypeError as exc:
                where = first
                if exc.index is not None and exc.index < len(origin):
                    where = f"at {at(origin[exc.index])}"
                raise ApplyError(f"{database}.{table} ({where}): {exc}") from None
            except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
                raise ApplyError(f"{database}.{table} ({first}): column `{name}`: {exc}") from None
        return _source(plan, arrays, len(upserts), len(deletes))

    def _open(self, database: str, table: str, t: Table) -> KeyedTable:
        path = table_path(self.root, database, table)
        target = self.tables.get(str(path))
        if target is not None:
            return target
        schema = self._plan(t).schema
        if not DeltaTable.is_deltatable(str(path)):
            properties = self.maintenance.table_properties() if self.maintenance is not None else None
            write_deltalake(
                str(path),
                schema.empty_table(),
                mode="error",
                name=f"{database}.{table}",
                configuration=properties,
            )
            # Born with a checkpoint, so that each later one is made from the one before it
            # (pycanal.spark.checkpoint) instead of by delta-rs replaying the table.
            DeltaTable(str(path)).create_checkpoint()
        keys = [name for name, _ in t.primary_key]
        upkeep = self.maintenance or Maintenance()
        target = KeyedTable(
            path, schema, keys, self.app_id, self.contents, upkeep.file_mb << 20, upkeep.deletion_vectors
        )
        have = [(f.name, str(f.type)) for f in target.dt.schema().fields]
        if have != _columns(schema):
            raise ApplyError(
                f"current-state table {path} has columns {have}, the schema model of {database}.{table} "
                f"{_columns(schema)}"
            )
        self.tables[str(path)] = target
        return target

    # ------------------------------------------------------------------ DDL
    def _close(self, before: SchemaModel) -> None:
        """Close the open tables a statement replaced, moved, changed or retired (the model's
        versions of them differ from ``before``'s); the others stay open (reopening 200 tables
        after every DDL statement cost ~2 s)."""
        changed = []
        for k in before.tables.keys() | self.model.tables.keys():
            old, new = before.tables.get(k), self.model.tables.get(k)
            if old is None or new is None or old.uid != new.uid:
                changed += [t for t in (old, new) if t is not None]
        if not changed:
            return
        fold = str.lower if self.model.lower_case_table_names else str
        gone = {fold(str(table_path(self.root, t.schema, t.name))) for t in changed}
        for path in [p for p in self.tables if fold(p) in gone]:
            del self.tables[path]
        if self.maintenance is not None:
            self.maintenance.forget({f"{t.schema}.{t.name}" for t in changed})

    def _truncate(self, name: tuple[str, str], step: int) -> None:
        path = table_path(self.root, *name)
        self.tables.pop(str(path), None)  # its files change under the cached state
        if DeltaTable.is_deltatable(str(path)):
            dt = DeltaTable(str(path))
            if not self._committed(dt, step):
                dt.delete(commit_properties=self._txn(step))

    def _ddl(self, sql: str, session_db: str | None, where: str) -> None:
        try:
            stmt = parse_statement(sql)
        except DdlParseError as exc:
            known = [
                r for r in parse_ddl(sql, session_db) if r.table and self.model.table(r.schema or "", r.table)
            ]
            if known:
                raise ApplyError(
                    f"cannot read the DDL at {where} on {known[0].schema}.{known[0].table}: {exc}: {sql!r}"
                ) from None
            self.warnings.append(f"DDL at {where} not followed ({exc}): {sql[:200]!r}")
            return
        self.epoch = f"{self.epoch.partition('@')[0]}@{self.batch_id}.{self.step}"  # executors' too
        before = self.model.copy()
        try:
            warnings = self.model.apply(stmt, session_db)
        except SchemaApplyError as exc:
            raise ApplyError(f"cannot follow the DDL at {where}: {exc}: {sql!r}") from None
        self.warnings += [f"{w} (DDL at {where})" for w in warnings]
        self._close(before)

        def qualified(name: TableName, default: str | None = session_db) -> tuple[str, str] | None:
            q = name.qualified(default)
            return None if q.schema is None else (q.schema, q.name)

        if isinstance(stmt, CreateTable) and not stmt.temporary:
            name = qualified(stmt.table)
            step = self._next()
            if name is not None and step is not None:
                old, new = before.table(*name), self.model.table(*name)
                if new is not None and (old is None or old.uid != new.uid):
                    self._retire(name, step)  # a stale table the model did not know
                    if new.primary_key:
                        self._open(*name, new)
                self.on_step(step)
        elif isinstance(stmt, AlterTable):
            name = qualified(stmt.table)
            step = self._next()
            if name is not None and step is not None:
                renames = [a.table for a in stmt.actions if a.op == "RENAME_TABLE" and a.table is not None]
                final = qualified(renames[-1], session_db or name[0]) if renames else name
                if final is not None and final != name:
                    self._move(name, final, step)
                if final is not None:
                    self._reconcile(final, before.table(*name), stmt, step, where)
                self.on_step(step)
        elif isinstance(stmt, RenameTables):
            for old_name, new_name in stmt.pairs:
                step = self._next()
                src, dst = qualified(old_name), qualified(new_name)
                if step is not None and src is not None and dst is not None:
                    self._move(src, dst, step)
                    self.on_step(step)
        elif isinstance(stmt, DropTables) and not stmt.temporary:
            for t in stmt.tables:
                step = self._next()
                name = qualified(t)
                if step is not None and name is not None:
                    self._retire(name, step)
                    self.on_step(step)
        elif isinstance(stmt, TruncateTable):
            name = qualified(stmt.table)
            step = self._next()
            if name is not None and step is not None:
                self._truncate(name, step)
                self.on_step(step)
        elif isinstance(stmt, DropDatabase):
            step = self._next()
            if step is not None:
                db_dir = self.root / "current" / _segment(stmt.name)
                for child in sorted(db_dir.iterdir()) if db_dir.is_dir() else []:
                    self._retire_path(child, step)
                self.on_step(step)
        elif isinstance(stmt, DropIndex) and stmt.name.upper() == "PRIMARY":
            name = qualified(stmt.table)
            step = self._next()
            if name is not None and step is not None:
                self._reconcile(name, before.table(*name), None, step, where)
                self.on_step(step)

    # ------------------------------------------------------------------ table files
    def _retire(self, name: tuple[str, str], step: int) -> None:
        self._retire_path(table_path(self.root, *name), step)

    def _retire_path(self, path: Path, step: int) -> None:
        """Move a current-state table out of the way, keeping it for audit."""
        if not path.exists():
            return
        rel = path.relative_to(self.root / "current")
        dest = self.root / "_pycanal" / "retired" / rel / f"{self.batch_id:020d}-{step:06d}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, dest)

    def _move(self, src: tuple[str, str], dst: tuple[str, str], step: int) -> None:
        a, b = table_path(self.root, *src), table_path(self.root, *dst)
        if not a.exists():
            return  # no current-state table, or moved by an earlier attempt
        if b.exists():
            self._retire_path(b, step)  # the server refuses to rename onto a table: a stale one
        b.parent.mkdir(parents=True, exist_ok=True)
        os.rename(a, b)

    def _reconcile(
        self, name: tuple[str, str], old: Table | None, stmt: AlterTable | None, step: int, where: str
    ) -> None:
        """Bring ``name``'s current-state table to the model's definition after a DDL."""
        new = self.model.table(*name)
        path = table_path(self.root, *name)
        exists = DeltaTable.is_deltatable(str(path))
        if new is None or not new.primary_key:
            if exists:
                self._retire_path(path, step)
                if new is not None:
                    self.warnings.append(
                        f"{name[0]}.{name[1]} lost its primary key at {where}: current-state table retired"
                    )
            return
        if not exists:
            self._open(*name, new)
            if old is not None:
                self.warnings.append(
                    f"{name[0]}.{name[1]} gained a primary key at {where}: its current-state table starts empty "
                    "(earlier rows are in the change log only)"
                )
            return
        plan = self._plan(new)
        schema = plan.schema
        dt = DeltaTable(str(path))
        if [(f.name, str(f.type)) for f in dt.schema().fields] == _columns(schema) or self._committed(
            dt, step
        ):
            return
        data = read_rows(dt)
        sources = _column_sources(old, stmt)
        arrays = []
        for col, field, conv in zip(new.columns, schema, plan.convs, strict=True):
            src = sources.get(col.name.lower())
            try:
                if src is not None and src in data.column_names:
                    arrays.append(pc.cast(data.column(src), field.type))
                    continue
                try:
                    value = default_value(col)
                except ColumnTypeError as exc:
                    self.warnings.append(f"{name[0]}.{name[1]} at {where}: {exc}; existing rows get NULL")
                    value = None
                arrays.append(conv([value] * data.num_rows))
            except (ColumnTypeError, pa.ArrowException, ValueError, TypeError) as exc:
                raise ApplyError(
                    f"{name[0]}.{name[1]} at {where}: cannot carry column `{col.name}` over: {exc}"
                ) from None
        rewritten = pa.Table.from_arrays(arrays, schema=schema)
        write_deltalake(
            str(path),
            rewritten,
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=self._txn(step),
            writer_properties=WRITER_PROPERTIES,
        )


def _ranged_key(t: Table) -> bool:
    """Whether the lake orders ``t``'s key as the source does (integers, DECIMAL, dates, times with
    a date, bytes), so that a snapshot chunk's key range (a ``CHUNK`` row) is tested here."""
    by_name = {c.name: c for c in t.columns}
    return bool(t.primary_key) and all(
        name in by_name and _ordered_as_source(arrow_type(by_name[name])) for name, _ in t.primary_key
    )


def _ordered_as_source(a: pa.DataType) -> bool:
    return (
        pa.types.is_integer(a) or pa.types.is_decimal(a) or pa.types.is_date32(a) or pa.types.is_timestamp(a)
        or pa.types.is_binary(a)
    )  # fmt: skip


def _in_range(columns: list[Any], low: list | None, high: list | None) -> Any:
    """Whether each key (``columns``, lexicographically) is at least ``low`` and below ``high``."""

    def compare(bound: list, strict: Any, last: Any) -> Any:
        values = [  # uint64 past int64
            b if isinstance(b, pa.Scalar) else pa.scalar(b, col.type)
            for col, b in zip(columns, bound, strict=True)
        ]
        mask = last(columns[-1], values[-1])
        for col, b in zip(reversed(columns[:-1]), reversed(values[:-1]), strict=True):
            mask = pc.or_(strict(col, b), pc.and_(pc.equal(col, b), mask))
        return mask

    mask = pa.repeat(True, len(columns[0]) if columns else 0)
    if low is not None:
        mask = pc.and_(mask, compare(low, pc.greater, pc.greater_equal))
    if high is not None:
        mask = pc.and_(mask, compare(high, pc.less, pc.less))
    return mask


def _source(plan: _Plan, arrays: list[ArrowValues], upserts: int, deletes: int) -> pa.Table:
    """The MERGE source: the upserted rows, then the deleted keys (the other columns null). The
    order is kept by ``_snapshot_ranges``, and ``_merge`` splits the two by it."""
    op = pa.concat_arrays([pa.repeat(_UPSERT, upserts), pa.repeat(_DELETE, deletes)])
    return pa.Table.from_arrays([*arrays, op], schema=plan.source)


def _column_sources(old: Table | None, stmt: AlterTable | None) -> dict[str, str]:
    """new column name (lower case) -> the old column its values come from (renames and drops of
    one ALTER apply together, as on the server)."""
    if old is None:
        return {}
    renamed: dict[str, str] = {}
    dropped: set[str] = set()
    for a in stmt.actions if stmt is not None else []:
        if a.op == "RENAME_COLUMN" and a.name and a.new_name:
            renamed[a.name.lower()] = a.new_name
        elif a.op == "CHANGE_COLUMN" and a.name and a.column is not None:
            renamed[a.name.lower()] = a.column.name
        elif a.op == "DROP_COLUMN" and a.name:
            dropped.add(a.name.lower())
    out = {}
    for col in old.columns:
        low = col.name.lower()
        if low not in dropped:
            out[renamed.get(low, col.name).lower()] = col.name
    return out
