"""A current-state table as the schema model defines it: created and opened for the writer, and
rewritten to the model's definition after an ALTER.

A new table is created empty with the upkeep's properties and a checkpoint of its first version,
so that each later checkpoint is made from the one before it (``delta.checkpoint``) instead of by
delta-rs replaying the table. An open table's columns must be the model's. A rewrite carries the
rows over (renamed columns keep their values, added ones get their default, changed types are
cast with Arrow) in one overwrite commit; columns a user added to the table (Spark's ``ADD
COLUMNS``) are carried over after the model's.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Schema, write_deltalake

from pycanal.parse.ddl import AlterTable
from pycanal.parse.meta import Table
from pycanal.storage import LakePath

from .batch import ApplyError
from .cow import WRITER_PROPERTIES, Contents, KeyedTable, refused
from .delta.rs import delta_table, is_delta_table, storage
from .delta.tablestate import read_rows
from .maintenance import Maintenance
from .merge_source import MergeSource
from .types import ColumnTypeError, default_value

__all__ = ["delta_columns", "open_table", "rewrite"]


def delta_columns(schema: pa.Schema) -> list[tuple[str, str]]:
    """(name, Delta type) of each column of an Arrow schema: what two tables' columns compare by."""
    return [(f.name, str(f.type)) for f in Schema.from_arrow(schema).fields]


def _columns_of(dt: DeltaTable) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in dt.schema().fields]


def open_table(
    path: LakePath, name: str, t: Table, plan: MergeSource, app_id: str, contents: Contents,
    maintenance: Maintenance | None,
) -> KeyedTable:  # fmt: skip
    """The table ``name`` (``database.table``, defined as ``t``) at ``path`` opened for writing,
    created first where there is none."""
    if not is_delta_table(path):
        properties = maintenance.table_properties() if maintenance is not None else None
        write_deltalake(
            **storage(path),
            data=plan.schema.empty_table(),
            mode="error",
            name=name,
            configuration=properties,
        )
        delta_table(path).create_checkpoint()  # every later checkpoint is made from it
    features = refused(delta_table(path))
    if features:
        raise ApplyError(
            f"current-state table {path} ({name}) has table features pycanal does not write: {features}; "
            "drop it to let pycanal create it, or create it without them (docs/spark.md)"
        )
    upkeep = maintenance or Maintenance()
    keys = [name for name, _ in t.primary_key]
    target = KeyedTable(
        path, plan.schema, keys, app_id, contents, upkeep.file_mb << 20, upkeep.deletion_vectors
    )
    want = delta_columns(plan.schema)
    ours = {c for c, _ in want}
    have = [c for c in _columns_of(target.dt) if c[0] in ours]  # the others are a user's
    if have != want:
        raise ApplyError(f"current-state table {path} has columns {have}, the schema model of {name} {want}")
    return target


def rewrite(
    path: LakePath, dt: DeltaTable, name: str, old: Table | None, stmt: AlterTable | None, plan: MergeSource,
    where: str, commit: CommitProperties,
) -> list[str]:  # fmt: skip
    """Rewrite the table ``name`` at ``path`` (``dt``; defined as ``old`` before the statement
    ``stmt`` at ``where``) to ``plan``'s definition in one commit (``commit``), unless it has those
    columns already; the warnings (a default only the server computes: existing rows get NULL)."""
    schema = plan.schema
    users = _user_columns(dt, old)
    if [c for c in _columns_of(dt) if c[0] not in {f.name for f in users}] == delta_columns(schema):
        return []
    ours = {n.lower(): n for n in schema.names}
    for f in users:
        if f.name.lower() in ours:
            raise ApplyError(
                f"{name} at {where}: the source's new column `{ours[f.name.lower()]}` is named as the column "
                f"`{f.name}` a user added to the current-state table {path}; rename or drop that one"
            )
    data = read_rows(dt)
    sources = _column_sources(old, stmt)
    warnings, arrays = [], []
    for col, field, conv in zip(plan.table.columns, schema, plan.convs, strict=True):
        src = sources.get(col.name.lower())
        try:
            if src is not None and src in data.column_names:
                arrays.append(pc.cast(data.column(src), field.type))
                continue
            try:
                value = default_value(col)
            except ColumnTypeError as exc:
                warnings.append(f"{name} at {where}: {exc}; existing rows get NULL")
                value = None
            arrays.append(conv([value] * data.num_rows))
        except (ColumnTypeError, pa.ArrowException, ValueError, TypeError) as exc:
            raise ApplyError(f"{name} at {where}: cannot carry column `{col.name}` over: {exc}") from None
    arrays += [data.column(f.name).cast(f.type) for f in users]  # a user's: kept, after the model's
    write_deltalake(
        **storage(path),
        data=pa.Table.from_arrays(arrays, schema=pa.schema([*schema, *users])),
        mode="overwrite",
        schema_mode="overwrite",
        commit_properties=commit,
        writer_properties=WRITER_PROPERTIES,
    )
    return warnings


def _user_columns(dt: DeltaTable, old: Table | None) -> list[pa.Field]:
    """The columns of ``dt`` a user added (not the model's ``old`` definition's); none where the
    model had none (every column of the table is then taken for a stale one of pycanal's)."""
    if old is None:
        return []
    model = {c.name for c in old.columns}
    return [f for f in pa.schema(dt.schema().to_arrow()) if f.name not in model]


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
