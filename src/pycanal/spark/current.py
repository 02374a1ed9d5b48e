"""The current-state tables: one Delta table per source table with a primary key (delta-rs).

``CurrentState.apply`` walks a micro-batch's rows in binlog order. Data rows are grouped per
table until the next DDL statement; each group is one MERGE keeping only the last change per key
(a DELETE deletes, an UPDATE that changes the key deletes the old key). A DDL statement is first
followed by the schema model (``SchemaModel.apply``, the schema history's own code), then carried
to the Delta tables: CREATE makes an empty table, ALTER rewrites it with the new columns (renamed
columns keep their values, added ones get their default, changed types are cast), RENAME moves
it, TRUNCATE deletes all rows, DROP TABLE / DROP DATABASE / a lost primary key retire it (moved
to ``<target>/_pycanal/retired``). Tables without a primary key have no current-state table.

Exactly once: every such action is a numbered *step* of the batch, numbered from the rows alone
(the same in a replay). Each Delta commit carries the transaction id ``(app_id, batch_id *
1_000_000 + step)``, so a replay sees ``transaction_version`` and skips it; the steps done are also
journaled after each one (``on_step``), which covers the file moves that live outside any Delta log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
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
from pycanal.parse.meta import SchemaApplyError, SchemaModel, Table

from .types import ColumnTypeError, arrow_field, column_converter, default_value

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


class ApplyError(RuntimeError):
    """A micro-batch that cannot be applied faithfully (the message says what and where)."""


class BatchRows(NamedTuple):
    """The columns of a micro-batch's change rows, as Python lists, in binlog order."""

    op: list[str]
    database: list[str | None]
    table: list[str | None]
    pk: list[str | None]
    before: list[str | None]
    after: list[str | None]
    file: list[str]
    offset: list[int]
    sql: list[str | None]
    sql_database: list[str | None]


def _segment(name: str) -> str:
    s = quote(name, safe="")
    return s.replace(".", "%2E") if s in (".", "..") else s


def table_path(target_dir: str | Path, database: str, table: str) -> Path:
    """Where the current-state Delta table of ``database.table`` lives."""
    return Path(target_dir) / "current" / _segment(database) / _segment(table)


def read_current(spark: Any, target_dir: str | Path, database: str, table: str) -> Any:
    """The current-state table of ``database.table`` as a Spark DataFrame, read from the live
    file list delta-rs reports (Spark's own Delta connector is not needed)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    dt = DeltaTable(str(table_path(target_dir, database, table)))
    schema = from_arrow_schema(pa.schema(dt.schema().to_arrow()), prefer_timestamp_ntz=True)
    files = dt.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def arrow_schema(table: Table) -> pa.Schema:
    try:
        return pa.schema([arrow_field(c) for c in table.columns])
    except ColumnTypeError as exc:
        raise ApplyError(f"{table.schema}.{table.name}: {exc}") from None


def _columns(schema: pa.Schema) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in Schema.from_arrow(schema).fields]


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
    ) -> None:
        self.root = Path(target_dir)
        self.batch_id = batch_id
        self.model = model
        self.done_step = done_step
        self.on_step = on_step
        self.zero_dates = zero_dates
        self.app_id = app_id
        self.step = 0
        self.warnings: list[str] = []
        self._convs: dict[int, tuple[pa.Schema, list]] = {}

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
        pending: dict[tuple[str, str], list[int]] = {}
        last_ddl = None
        for i, op in enumerate(rows.op):
            if op == "DDL":
                at = (rows.file[i], rows.offset[i])
                if at != last_ddl:  # one statement, one row per table it touches
                    last_ddl = at
                    self._flush(rows, pending)
                    pending = {}
                    self._ddl(rows.sql[i] or "", rows.sql_database[i], f"{at[0]}:{at[1]}")
            elif rows.pk[i] is not None:
                pending.setdefault((rows.database[i], rows.table[i]), []).append(i)
        self._flush(rows, pending)

    def _flush(self, rows: BatchRows, pending: dict[tuple[str, str], list[int]]) -> None:
        for (database, table), idx in pending.items():
            step = self._next()
            if step is not None:
                self._merge(database, table, idx, rows, step)
                self.on_step(step)

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

    def _plan(self, t: Table) -> tuple[pa.Schema, list]:
        plan = self._convs.get(t.uid)
        if plan is None:
            try:
                convs = [column_converter(c, self.zero_dates) for c in t.columns]
            except ColumnTypeError as exc:
                raise ApplyError(f"{t.schema}.{t.name}: {exc}") from None
            plan = self._convs[t.uid] = (arrow_schema(t), convs)
        return plan

    def _merge(self, database: str, table: str, idx: list[int], rows: BatchRows, step: int) -> None:
        first = f"first at {rows.file[idx[0]]}:{rows.offset[idx[0]]}"
        t = self._table(database, table, first)
        keys = [name for name, _ in t.primary_key]
        names = [c.name for c in t.columns]

        def key_of(image: dict, i: int) -> tuple:
            try:
                return tuple(_hashable(image[k]) for k in keys)
            except KeyError as exc:
                raise ApplyError(
                    f"{database}.{table} at {rows.file[i]}:{rows.offset[i]}: the row has no key column {exc}; "
                    f"the schema model's key is {keys}"
                ) from None

        # Keys are compared as parsed values, whatever the spacing of the JSON texts.
        last: dict[tuple, tuple[str, Any]] = {}  # key -> ("U", row index) or ("D", key values)
        for i in idx:
            op, pk = rows.op[i], json.loads(rows.pk[i])
            key = key_of(pk, i)
            if op == "UPDATE":
                old = json.loads(rows.before[i])
                old_key = key_of(old, i)
                if old_key != key:  # the key changed: the old one is deleted
                    last[old_key] = ("D", {k: old[k] for k in keys})
            last[key] = ("D", pk) if op == "DELETE" else ("U", i)
        upserts, deletes, origin = [], [], []  # origin: the row of each upsert
        for kind, v in last.values():
            if kind == "D":
                deletes.append(v)
            else:
                origin.append(v)
                image = json.loads(rows.after[v])
                if len(image) != len(names):
                    raise ApplyError(
                        f"{database}.{table} at {rows.file[v]}:{rows.offset[v]}: the after image has "
                        f"{len(image)} of the {len(names)} columns (binlog_row_image must be FULL for "
                        "current-state tables)"
                    )
                upserts.append(image)
        schema, convs = self._plan(t)
        arrays = []
        for name, conv in zip(names, convs, strict=True):
            try:
                values = [u[name] for u in upserts] + [d.get(name) for d in deletes]
                arrays.append(conv(values))
            except KeyError:
                raise ApplyError(
                    f"{database}.{table} ({first}): the rows have no column `{name}`; the schema model does not "
                    "match the source there"
                ) from None
            except ColumnTypeError as exc:
                at = first
                if exc.index is not None and exc.index < len(origin):
                    at = f"at {rows.file[origin[exc.index]]}:{rows.offset[origin[exc.index]]}"
                raise ApplyError(f"{database}.{table} ({at}): {exc}") from None
            except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
                raise ApplyError(f"{database}.{table} ({first}): column `{name}`: {exc}") from None
        arrays.append(pa.array(["U"] * len(upserts) + ["D"] * len(deletes), pa.string()))
        source = pa.Table.from_arrays(arrays, schema=schema.append(pa.field(_OP, pa.string())))
        dt = self._open(database, table, t)
        if self._committed(dt, step):
            return
        predicate = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in keys)
        (
            dt.merge(source, predicate, source_alias="s", target_alias="t", commit_properties=self._txn(step))
            .when_matched_delete(f"s.{_OP} = 'D'")
            .when_matched_update_all(f"s.{_OP} = 'U'", except_cols=[_OP])
            .when_not_matched_insert_all(f"s.{_OP} = 'U'", except_cols=[_OP])
            .execute()
        )

    def _open(self, database: str, table: str, t: Table) -> DeltaTable:
        path = table_path(self.root, database, table)
        schema = self._plan(t)[0]
        if not DeltaTable.is_deltatable(str(path)):
            write_deltalake(str(path), schema.empty_table(), mode="error", name=f"{database}.{table}")
        dt = DeltaTable(str(path))
        have = [(f.name, str(f.type)) for f in dt.schema().fields]
        if have != _columns(schema):
            raise ApplyError(
                f"current-state table {path} has columns {have}, the schema model of {database}.{table} "
                f"{_columns(schema)}"
            )
        return dt

    # ------------------------------------------------------------------ DDL
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
        before = self.model.copy()
        try:
            warnings = self.model.apply(stmt, session_db)
        except SchemaApplyError as exc:
            raise ApplyError(f"cannot follow the DDL at {where}: {exc}: {sql!r}") from None
        self.warnings += [f"{w} (DDL at {where})" for w in warnings]

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
                path = table_path(self.root, *name)
                if DeltaTable.is_deltatable(str(path)):
                    dt = DeltaTable(str(path))
                    if not self._committed(dt, step):
                        dt.delete(commit_properties=self._txn(step))
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
        schema, convs = self._plan(new)
        dt = DeltaTable(str(path))
        if [(f.name, str(f.type)) for f in dt.schema().fields] == _columns(schema) or self._committed(
            dt, step
        ):
            return
        data = dt.to_pyarrow_table()
        sources = _column_sources(old, stmt)
        arrays = []
        for col, field, conv in zip(new.columns, schema, convs, strict=True):
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
            str(path), rewritten, mode="overwrite", schema_mode="overwrite", commit_properties=self._txn(step)
        )


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
