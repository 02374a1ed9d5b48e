"""A micro-batch applied to the current-state tables (``current``), in numbered steps.

``CurrentState.apply`` walks a micro-batch's rows in binlog order. Data rows are grouped per
table until the next DDL statement; each group is one MERGE keeping only the last change per key
(``merge_source``), committed copy-on-write by ``cow.KeyedTable`` (or delta-rs' MERGE for tables
that ask more of a writer), with the deletes a snapshot chunk's key range implies
(``snapshot_ranges``). Between two DDL statements the tables are disjoint writes: on threads, or
in Spark tasks (``executors``).

A DDL statement is first followed by the schema model (``SchemaModel.apply``, the schema
history's own code), then carried to the Delta tables: CREATE makes an empty table, ALTER
rewrites it with the new columns (``tables.rewrite``), RENAME moves it, TRUNCATE deletes all
rows, DROP TABLE / DROP DATABASE / a lost primary key retire it (moved to
``<target>/_pycanal/retired``). Tables without a primary key have no current-state table.

Exactly once: every such action is a numbered *step* of the batch, numbered from the rows alone
(the same in a replay). Each Delta commit carries the transaction id ``(app_id, batch_id *
1_000_000 + step)``, so a replay sees ``transaction_version`` and skips it; the steps done are also
journaled after each one (``on_step``), which covers the file moves that live outside any Delta log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction

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
from pycanal.parse.meta import SchemaApplyError, SchemaModel, Table
from pycanal.storage import LakePath, lake_path

from .arrow import arange, in_range
from .batch import ApplyError, BatchRows, position_order
from .chunk_files import adoptable
from .cow import CONTENTS, WRITER_PROPERTIES, ChunkFile, Contents, KeyedTable
from .current import database_path, table_path
from .delta.rs import delta_table, is_delta_table
from .maintenance import Maintenance
from .merge_source import LAST, OP, MergeSource
from .rows import CHUNK, SNAPSHOT_DDL
from .snapshot_ranges import ranged_key, snapshot_ranges
from .tables import open_table, rewrite

__all__ = [
    "APP_ID",
    "STEPS_PER_BATCH",
    "CurrentState",
    "Failure",
    "MergeContext",
    "MergeWork",
]

APP_ID = "pycanal.apply"
STEPS_PER_BATCH = 1_000_000


class MergeContext(NamedTuple):
    """What every table's write of a round shares (when the writes run elsewhere: ``executors``)."""

    root: LakePath
    batch_id: int
    app_id: str
    zero_dates: str
    lower_case_table_names: int
    maintenance: dict[str, Any] | None  # ``Maintenance.settings()``
    epoch: str  # changes with every DDL: what an executor kept before is dropped
    threads: int  # tables written at once in a task


class MergeWork(NamedTuple):
    """One table's write: its step, its schema, its change rows (binlog order)."""

    database: str
    table: str
    step: int
    model: Table
    rows: pa.Table


Failure = tuple[str, str]  # an exception's type name and message
# Writes a step group's tables elsewhere: each work's failure (None: written) and the upkeep done.
Writer = Callable[[MergeContext, list[MergeWork]], tuple[list[Failure | None], dict[str, int]]]


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _after_chunks(source: pa.Table, plan: MergeSource, taken: list[tuple[int, ChunkFile]]) -> pa.Table:
    """``source`` (with ``LAST``) less the keys of a taken chunk's range whose last change comes
    before the chunk's ``CHUNK`` row: the chunk's file has them as they were then."""
    keys = [source.column(c.name).combine_chunks() for c in plan.keys]
    last = source.column(LAST).combine_chunks()
    drop = pa.repeat(False, source.num_rows)
    for row, f in taken:
        drop = pc.or_(drop, pc.and_(in_range(keys, f.low, f.high), pc.less(last, row)))
    return source.drop_columns([LAST]).filter(pc.invert(drop))


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
        target_dir: str | Path | LakePath,
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
        executors: Writer | None = None,
        epoch: str = "",
    ) -> None:
        self.root = lake_path(target_dir)
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
        # Snapshot chunks' files (chunk_files) committed as they are, and left for their READ rows.
        self.chunk_files = {"taken": 0, "left": 0}
        self._lock = threading.Lock()
        self._sources: dict[int, MergeSource] = {}  # by table definition (uid)

    # ------------------------------------------------------------------ steps
    def _next(self) -> int | None:
        """The next step's number, or None when an earlier attempt did it."""
        self.step += 1
        if self.step >= STEPS_PER_BATCH:
            raise ApplyError(f"micro-batch {self.batch_id} needs more than {STEPS_PER_BATCH} steps")
        return None if self.step <= self.done_step else self.step

    def _metadata(self, step: int) -> dict[str, Any]:
        """What a step's commit carries besides its transaction id."""
        return {"pycanal.batch_id": self.batch_id, "pycanal.step": step}

    def _txn(self, step: int) -> CommitProperties:
        version = self.batch_id * STEPS_PER_BATCH + step
        return CommitProperties(
            app_transactions=[Transaction(self.app_id, version)], custom_metadata=self._metadata(step)
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
                    if name not in self.declared or position_order(*self.declared[name]) < position_order(
                        *at
                    ):
                        self.declared[name] = list(at)
                    if known is not None and not ranged_key(known):
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
        if names and all(
            n in self.declared and position_order(*self.declared[n]) > position_order(*at) for n in names
        ):
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
            t = self._table(database, table, f"first at {rows.at(idx[0].as_py())}")
            works.append(MergeWork(database, table, step, t, rows.columns.table.take(idx)))
        context = MergeContext(
            self.root, self.batch_id, self.app_id, self.zero_dates, self.model.lower_case_table_names,
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
        self._merge(database, table, arange(rows.num_rows), BatchRows(rows), step)

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

    def _source(self, t: Table) -> MergeSource:
        source = self._sources.get(t.uid)
        if source is None:
            source = self._sources[t.uid] = MergeSource(t, self.zero_dates)
        return source

    def _merge(self, database: str, table: str, idx: pa.Array, rows: BatchRows, step: int) -> None:
        first = f"first at {rows.at(idx[0].as_py())}"
        t = self._table(database, table, first)
        plan = self._source(t)
        chunks = idx[:0]
        if rows.chunks:
            is_chunk = pc.equal(rows.columns["op"].take(idx), CHUNK)
            chunks, idx = idx.filter(is_chunk), idx.filter(pc.invert(is_chunk))
        # Built before the table is opened where it can be: a row the model cannot key says so first.
        source = None if len(chunks) else plan.build(database, table, first, idx, rows)
        keys = [name for name, _ in t.primary_key]
        target = self._open(database, table, t)
        version = self.batch_id * STEPS_PER_BATCH + step
        if target.committed(version):
            return
        taken: list[tuple[int, ChunkFile]] = []
        rest = idx  # the rows but those of the chunks taken as files
        if len(chunks):
            taken, rest, unused = adoptable(plan, target, rows, idx, chunks)
            rows.check_images(rest)  # a chunk not taken: its READ rows must have their images
            for path in unused:
                path.unlink()  # a chunk's file the table does not take: its READ rows stand for it
            self._count_chunk_files(0, len(unused))
        try:
            while True:
                if taken:
                    source = _after_chunks(
                        plan.build(database, table, first, rest, rows, last=True), plan, taken
                    )
                    left = chunks.filter(
                        pc.invert(pc.is_in(chunks, value_set=pa.array([c for c, _ in taken])))
                    )
                    source = snapshot_ranges(plan, target, rows, rest, left, source) if len(left) else source
                elif source is None:
                    source = plan.build(database, table, first, idx, rows)
                    source = (
                        snapshot_ranges(plan, target, rows, idx, chunks, source) if len(chunks) else source
                    )
                data = source.drop_columns([OP])
                n = pc.index(source.column(OP), "D").as_py()  # upserts first, then deletes
                n = source.num_rows if n < 0 else n
                upserts, deletes = data.slice(0, n), data.slice(n).select(keys)
                files = [f for _, f in taken]
                if target.writable and target.write(upserts, deletes, version, self._metadata(step), files):
                    self._count_chunk_files(len(files), 0)
                    break
                if taken:  # another writer's commit made the table one this writer may not write
                    self._count_chunk_files(0, len(files))
                    taken, source = [], None
                    for f in files:
                        (target.path / f.name).unlink()
                    rows.check_images(idx)
                    continue  # the chunks' rows from their images, MERGEd
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
                    .when_matched_delete(f"s.{OP} = 'D'")
                    .when_matched_update_all(f"s.{OP} = 'U'", except_cols=[OP])
                    .when_not_matched_insert_all(f"s.{OP} = 'U'", except_cols=[OP])
                    .execute()
                )
                target.reload()
                break
        except BaseException:
            self.tables.pop(str(table_path(self.root, database, table)), None)  # read it again
            raise
        if self.maintenance is not None:
            self.maintenance.after_merge(f"{database}.{table}", target)

    def _count_chunk_files(self, taken: int, left: int) -> None:
        with self._lock:  # tables are written on threads
            self.chunk_files["taken"] += taken
            self.chunk_files["left"] += left

    def _open(self, database: str, table: str, t: Table) -> KeyedTable:
        path = table_path(self.root, database, table)
        target = self.tables.get(str(path))
        if target is None:
            target = open_table(
                path, f"{database}.{table}", t, self._source(t), self.app_id, self.contents, self.maintenance
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
        if is_delta_table(path):
            dt = delta_table(path)
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
                    if not (old is None and new.primary_key and self._adopt(name)):
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
                db_dir = database_path(self.root, stmt.name)
                for child in sorted(db_dir.listdir()):
                    self._retire_path(db_dir / child, step)
                self.on_step(step)
        elif isinstance(stmt, DropIndex) and stmt.name.upper() == "PRIMARY":
            name = qualified(stmt.table)
            step = self._next()
            if name is not None and step is not None:
                self._reconcile(name, before.table(*name), None, step, where)
                self.on_step(step)

    # ------------------------------------------------------------------ table files
    def _adopt(self, name: tuple[str, str]) -> bool:
        """Whether the Delta table at ``name``'s path is one a user made for it (Spark's ``CREATE
        TABLE`` before the pipeline started): this apply never wrote it, so it is kept and written
        from now on (``open_table`` checks its columns and features); one this apply wrote before
        the model knew the table is stale (False: it is retired)."""
        path = table_path(self.root, *name)
        return is_delta_table(path) and delta_table(path).transaction_version(self.app_id) is None

    def _retire(self, name: tuple[str, str], step: int) -> None:
        self._retire_path(table_path(self.root, *name), step)

    def _retire_path(self, path: LakePath, step: int) -> None:
        """Move a current-state table out of the way, keeping it for audit."""
        if not path.exists():
            return
        rel = path.relative_to(self.root / "current")
        path.move_to(self.root / "_pycanal" / "retired" / rel / f"{self.batch_id:020d}-{step:06d}")

    def _move(self, src: tuple[str, str], dst: tuple[str, str], step: int) -> None:
        a, b = table_path(self.root, *src), table_path(self.root, *dst)
        if not a.exists():
            return  # no current-state table, or moved by an earlier attempt
        if b.exists() and a.moving_to() != b:
            self._retire_path(b, step)  # the server refuses to rename onto a table: a stale one
        a.move_to(b)

    def _reconcile(
        self, name: tuple[str, str], old: Table | None, stmt: AlterTable | None, step: int, where: str
    ) -> None:
        """Bring ``name``'s current-state table to the model's definition after a DDL."""
        new = self.model.table(*name)
        path = table_path(self.root, *name)
        exists = is_delta_table(path)
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
        dt = delta_table(path)
        if not self._committed(dt, step):
            label = f"{name[0]}.{name[1]}"
            self.warnings += rewrite(path, dt, label, old, stmt, self._source(new), where, self._txn(step))
