"""The in-memory schema model: databases, tables and columns as ``information_schema`` shows them.

:meth:`SchemaModel.apply` follows a parsed DDL statement the way MariaDB executes it: CREATE TABLE
(also ``LIKE``, ``IF NOT EXISTS``, ``OR REPLACE``), DROP/RENAME/TRUNCATE TABLE, ALTER TABLE column
clauses (ADD/DROP/MODIFY/CHANGE/RENAME COLUMN with FIRST/AFTER, ALTER COLUMN defaults), primary
keys, CONVERT TO CHARACTER SET and default charset changes, CREATE/ALTER/DROP DATABASE. A column's
collation comes from the column, else the table default, else the database default (else the
server's), as on the server.

A statement the model cannot follow raises :class:`SchemaApplyError`. A statement that does not
fit the model (dropping a column the model does not have, altering a table it does not know) is
*drift*: the table is forgotten and a warning returned, so the next TABLE_MAP reloads it from the
live server and checks it; nothing guesses.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ddl import (
    AlterDatabase,
    AlterTable,
    ColumnDef,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DdlParseError,
    DropDatabase,
    DropIndex,
    DropTables,
    OtherStatement,
    RenameTables,
    Statement,
    TableName,
    TruncateTable,
)
from .types import _TEXT_SIZES, TEXT_TYPES, Charsets, _size_for, render_default, resolve_column

__all__ = ["Column", "Database", "SchemaApplyError", "SchemaModel", "Table"]

_uids = itertools.count(1)


def _next_uid() -> int:
    return next(_uids)


class SchemaApplyError(Exception):
    """A DDL statement the schema model cannot follow (it would have to guess)."""


class _Drift(Exception):
    """The statement does not fit the model's table: the model had drifted from the server."""


def _existing(t: Table, name: str, if_exists: bool) -> int | None:
    """The index of ``t``'s column ``name``; None when there is none and IF EXISTS allows that."""
    i = t.index_of(name)
    if i is None and not if_exists:
        raise _Drift(f"column {name!r} does not exist")
    return i


def _free(t: Table, name: str, i: int) -> None:
    """Column ``i`` of ``t`` may take ``name``: no other column has it."""
    j = t.index_of(name)
    if j is not None and j != i:
        raise _Drift(f"column {name!r} already exists")


@dataclass(slots=True)
class Column:
    name: str
    column_type: str  # information_schema COLUMN_TYPE, e.g. "varchar(64)", "bigint(20) unsigned"
    data_type: str  # DATA_TYPE, e.g. "varchar", "bigint"
    nullable: bool = True
    unsigned: bool = False
    charset: str | None = None
    collation: str | None = None
    default: str | None = None  # COLUMN_DEFAULT as MariaDB shows it ('NULL', "'x'", '5', None)
    labels: list[str] | None = None  # ENUM/SET values

    def to_json(self) -> list:
        return [self.name, self.column_type, self.data_type, self.nullable, self.unsigned, self.charset,
                self.collation, self.default, self.labels]  # fmt: skip

    @classmethod
    def from_json(cls, data: list) -> Column:
        return cls(*data)


@dataclass(slots=True)
class Table:
    schema: str
    name: str
    columns: list[Column] = field(default_factory=list)
    charset: str = "utf8mb4"
    collation: str = "utf8mb4_general_ci"
    primary_key: list[tuple[str, int]] = field(default_factory=list)  # (column, prefix length or 0)
    # Changes on every modification: a new uid is a new schema version of the table.
    uid: int = field(default_factory=_next_uid, compare=False)

    def index_of(self, name: str) -> int | None:
        low = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == low:
                return i
        return None

    def column(self, name: str) -> Column | None:
        i = self.index_of(name)
        return None if i is None else self.columns[i]

    @property
    def primary_key_indexes(self) -> list[tuple[int, int]]:
        out = []
        for name, prefix in self.primary_key:
            i = self.index_of(name)
            if i is not None:
                out.append((i, prefix))
        return out

    def copy(self) -> Table:
        t = copy.deepcopy(self)
        t.uid = _next_uid()
        return t

    def to_json(self) -> dict:
        return {
            "schema": self.schema,
            "name": self.name,
            "charset": self.charset,
            "collation": self.collation,
            "primary_key": [list(p) for p in self.primary_key],
            "columns": [c.to_json() for c in self.columns],
        }

    @classmethod
    def from_json(cls, data: dict) -> Table:
        return cls(
            data["schema"],
            data["name"],
            [Column.from_json(c) for c in data["columns"]],
            data["charset"],
            data["collation"],
            [(p[0], p[1]) for p in data["primary_key"]],
        )


@dataclass(slots=True)
class Database:
    name: str
    charset: str
    collation: str


class SchemaModel:
    """Databases and tables (keyed by name, case-sensitive as with ``lower_case_table_names=0``)."""

    def __init__(
        self,
        *,
        flavor: str = "mariadb",
        charsets: Charsets | None = None,
        server_charset: str = "utf8mb4",
        server_collation: str = "utf8mb4_general_ci",
        lower_case_table_names: int = 0,
    ) -> None:
        self.flavor = flavor
        self.charsets = charsets or Charsets.builtin()
        self.server_charset = server_charset
        self.server_collation = server_collation
        self.lower_case_table_names = lower_case_table_names
        self.databases: dict[str, Database] = {}
        self.tables: dict[tuple[str, str], Table] = {}
        self._collation_server: str | None = None

    # -- access ----------------------------------------------------------------------
    def _key(self, schema: str, name: str) -> tuple[str, str]:
        if self.lower_case_table_names:
            return schema.lower(), name.lower()
        return schema, name

    def _db_key(self, name: str) -> str:
        return name.lower() if self.lower_case_table_names else name

    def table(self, schema: str, name: str) -> Table | None:
        return self.tables.get(self._key(schema, name))

    def put_table(self, table: Table) -> None:
        self.tables[self._key(table.schema, table.name)] = table

    def drop_table(self, schema: str, name: str) -> Table | None:
        return self.tables.pop(self._key(schema, name), None)

    def database(self, name: str) -> Database | None:
        return self.databases.get(self._db_key(name))

    def put_database(self, db: Database) -> None:
        self.databases[self._db_key(db.name)] = db

    def copy(self) -> SchemaModel:
        """A deep copy (tables keep their uids: same versions)."""
        m = SchemaModel(
            flavor=self.flavor,
            charsets=self.charsets,
            server_charset=self.server_charset,
            server_collation=self.server_collation,
            lower_case_table_names=self.lower_case_table_names,
        )
        m.databases = {k: copy.copy(v) for k, v in self.databases.items()}
        m.tables = {}
        for k, t in self.tables.items():
            t2 = copy.deepcopy(t)
            t2.uid = t.uid
            m.tables[k] = t2
        return m

    # -- serialisation -----------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "format": 1,
            "flavor": self.flavor,
            "server_charset": self.server_charset,
            "server_collation": self.server_collation,
            "lower_case_table_names": self.lower_case_table_names,
            "charsets": self.charsets.to_json(),
            "databases": [[d.name, d.charset, d.collation] for d in self.databases.values()],
            "tables": [t.to_json() for t in self.tables.values()],
        }

    @classmethod
    def from_json(cls, data: dict) -> SchemaModel:
        m = cls(
            flavor=data["flavor"],
            charsets=Charsets.from_json(data["charsets"]),
            server_charset=data["server_charset"],
            server_collation=data["server_collation"],
            lower_case_table_names=data.get("lower_case_table_names", 0),
        )
        for name, cs, coll in data["databases"]:
            m.put_database(Database(name, cs, coll))
        for t in data["tables"]:
            m.put_table(Table.from_json(t))
        return m

    # -- DDL ---------------------------------------------------------------------------
    def apply(
        self,
        stmt: Statement,
        default_schema: str | None,
        accepts: Callable[[str, str], bool] | None = None,
        collation_server: str | None = None,
    ) -> list[str]:
        """Follow one parsed statement. Returns warnings (tables forgotten because of drift).

        ``accepts(schema, table)`` limits the tables the model keeps (the instance's filter).
        ``collation_server`` is the session's server collation (logged in the QUERY event): the
        default of a CREATE DATABASE that names none. Raises :class:`SchemaApplyError` for a
        statement the model cannot follow.
        """
        ok = accepts or (lambda s, t: True)
        warnings: list[str] = []
        self._collation_server = collation_server
        try:
            self._apply(stmt, default_schema, ok, warnings)
        except DdlParseError as exc:
            raise SchemaApplyError(str(exc)) from None
        return warnings

    def _qualify(self, name: TableName, default_schema: str | None) -> tuple[str, str]:
        schema = name.schema if name.schema is not None else default_schema
        if schema is None:
            raise SchemaApplyError(f"table {name.name!r} has no database and no default database is set")
        return schema, name.name

    def _table_defaults(self, schema: str) -> tuple[str, str]:
        db = self.database(schema)
        if db is not None:
            return db.charset, db.collation
        return self.server_charset, self.server_collation

    def _forget(self, schema: str, name: str, why: str, warnings: list[str]) -> None:
        self.drop_table(schema, name)
        warnings.append(
            f"{schema}.{name}: {why}; the table is forgotten and will be reloaded from the server"
        )

    def _apply(self, stmt: Statement, default_schema: str | None, ok, warnings: list[str]) -> None:
        if isinstance(stmt, CreateTable):
            self._create_table(stmt, default_schema, ok, warnings)
        elif isinstance(stmt, AlterTable):
            self._alter_table(stmt, default_schema, ok, warnings)
        elif isinstance(stmt, RenameTables):
            for old, new in stmt.pairs:
                self._rename(
                    self._qualify(old, default_schema), self._qualify(new, default_schema), ok, warnings
                )
        elif isinstance(stmt, DropTables):
            if not stmt.temporary:
                for t in stmt.tables:
                    self.drop_table(*self._qualify(t, default_schema))
        elif isinstance(stmt, DropIndex):
            if stmt.name.upper() == "PRIMARY":
                schema, name = self._qualify(stmt.table, default_schema)
                table = self.table(schema, name)
                if table is not None:
                    table = table.copy()
                    table.primary_key = []
                    self.put_table(table)
        elif isinstance(stmt, CreateDatabase):
            existing = self.database(stmt.name)
            if existing is not None and stmt.if_not_exists:
                return
            if stmt.or_replace:
                self._drop_database(stmt.name)
            cs_coll = self.charsets.resolve(stmt.charset, stmt.collate)
            if cs_coll is None and self._collation_server is not None:
                cs_coll = self.charsets.resolve(None, self._collation_server)
            cs, coll = cs_coll or (self.server_charset, self.server_collation)
            self.put_database(Database(stmt.name, cs, coll))
        elif isinstance(stmt, AlterDatabase):
            name = stmt.name or default_schema
            if name is None:
                raise SchemaApplyError("ALTER DATABASE without a name and no default database")
            db = self.database(name) or Database(name, *self._table_defaults(name))
            cs_coll = self.charsets.resolve(stmt.charset, stmt.collate)
            if cs_coll is not None:
                db = Database(db.name, *cs_coll)
            self.put_database(db)
        elif isinstance(stmt, DropDatabase):
            self._drop_database(stmt.name)
        elif isinstance(stmt, TruncateTable | CreateIndex | OtherStatement):
            return
        else:  # pragma: no cover - every statement class is listed above
            raise SchemaApplyError(f"unexpected statement {type(stmt).__name__}")

    def _drop_database(self, name: str) -> None:
        self.databases.pop(self._db_key(name), None)
        key = self._db_key(name)
        for k in [k for k in self.tables if k[0] == key]:
            del self.tables[k]

    # -- CREATE TABLE ------------------------------------------------------------------
    def _create_table(self, stmt: CreateTable, default_schema: str | None, ok, warnings: list[str]) -> None:
        if stmt.temporary:
            return  # temporary tables never reach a ROW binlog
        schema, name = self._qualify(stmt.table, default_schema)
        if not ok(schema, name):
            return
        if self.table(schema, name) is not None and stmt.if_not_exists:
            return  # CREATE TABLE IF NOT EXISTS on an existing table changes nothing
        if stmt.unsupported:
            raise SchemaApplyError(f"CREATE TABLE {schema}.{name}: {stmt.unsupported}")
        if stmt.like is not None:
            src = self.table(*self._qualify(stmt.like, default_schema))
            if src is None:
                self._forget(schema, name, f"created LIKE {stmt.like}, which the schema model does not have",
                             warnings)  # fmt: skip
                return
            table = src.copy()
            table.schema, table.name = schema, name
            self.put_table(table)
            return
        if stmt.has_select:
            self._forget(schema, name, "created from a SELECT, whose columns only the server knows", warnings)
            return
        cs_coll = self.charsets.resolve(stmt.charset, stmt.collate)
        charset, collation = cs_coll or self._table_defaults(schema)
        table = Table(schema, name, [], charset, collation, [])
        for cd in stmt.columns:
            if table.index_of(cd.name) is not None:
                raise SchemaApplyError(f"CREATE TABLE {schema}.{name}: duplicate column {cd.name!r}")
            table.columns.append(self._column(cd, table))
        if stmt.primary_key:
            self._set_primary_key(table, stmt.primary_key)
        self.put_table(table)

    def _column(self, cd: ColumnDef, table: Table) -> Column:
        r = resolve_column(cd, table.charset, table.collation, self.charsets, self.flavor)
        return Column(cd.name, r.column_type, r.data_type, r.nullable, r.unsigned, r.charset, r.collation,
                      r.default, r.labels)  # fmt: skip

    @staticmethod
    def _set_primary_key(table: Table, cols: list[tuple[str, int]]) -> None:
        pk = []
        for name, prefix in cols:
            i = table.index_of(name)
            if i is None:
                if not name:
                    continue  # a functional key part
                raise _Drift(f"primary key column {name!r} does not exist")
            col = table.columns[i]
            _make_not_null(col)
            pk.append((col.name, prefix))
        table.primary_key = pk

    # -- RENAME -------------------------------------------------------------------------
    def _rename(self, old: tuple[str, str], new: tuple[str, str], ok, warnings: list[str]) -> None:
        table = self.drop_table(*old)
        if table is None:
            if ok(*new):
                self._forget(
                    *new, f"renamed from {old[0]}.{old[1]}, which the schema model does not have", warnings
                )
            return
        if not ok(*new):
            return
        table = table.copy()
        table.schema, table.name = new
        self.put_table(table)

    # -- ALTER TABLE --------------------------------------------------------------------
    def _alter_table(self, stmt: AlterTable, default_schema: str | None, ok, warnings: list[str]) -> None:
        schema, name = self._qualify(stmt.table, default_schema)
        renames = [a for a in stmt.actions if a.op == "RENAME_TABLE"]
        # An unqualified new name is in the session's database, as everywhere else.
        target = self._qualify(renames[-1].table, default_schema or schema) if renames else (schema, name)
        for a in stmt.actions:
            if a.op == "UNSUPPORTED":
                if ok(schema, name) or ok(*target):
                    raise SchemaApplyError(f"ALTER TABLE {schema}.{name}: {a.name}")
                return
        table = self.table(schema, name)
        if table is None:
            if ok(schema, name) and not stmt.if_exists and not _only_options(stmt):
                self._forget(schema, name, "altered, but the schema model does not have it", warnings)
            if target != (schema, name) and ok(*target):
                self._forget(*target, f"renamed from {schema}.{name}, which the schema model does not have",
                             warnings)  # fmt: skip
            return
        new = table.copy()
        try:
            for a in stmt.actions:
                self._alter_action(new, a)
        except _Drift as exc:
            self.drop_table(schema, name)
            self._forget(*target, f"ALTER TABLE does not fit the schema model ({exc})", warnings)
            return
        if target != (schema, name):
            self.drop_table(schema, name)
            new.schema, new.name = target
            if not ok(*target):
                return
        self.put_table(new)

    def _alter_action(self, t: Table, a) -> None:  # noqa: C901 - one branch per clause
        op = a.op
        if op == "ADD_COLUMN":
            cd = a.column
            if t.index_of(cd.name) is not None:
                if a.if_not_exists:
                    return
                raise _Drift(f"column {cd.name!r} already exists")
            col = self._column(cd, t)
            t.columns.insert(self._position(t, cd.position, len(t.columns)), col)
            if cd.primary_key:
                self._set_primary_key(t, [(col.name, 0)])
        elif op == "DROP_COLUMN":
            i = _existing(t, a.name, a.if_exists)
            if i is None:
                return
            dropped = t.columns.pop(i)
            t.primary_key = [p for p in t.primary_key if p[0].lower() != dropped.name.lower()]
        elif op in ("MODIFY_COLUMN", "CHANGE_COLUMN"):
            cd = a.column
            i = _existing(t, a.name if op == "CHANGE_COLUMN" else cd.name, a.if_exists)
            if i is None:
                return
            _free(t, cd.name, i)
            old = t.columns.pop(i)
            col = self._column(cd, t)
            t.columns.insert(self._position(t, cd.position, i), col)
            t.primary_key = [(col.name if n.lower() == old.name.lower() else n, p) for n, p in t.primary_key]
            if any(n == col.name for n, _ in t.primary_key):
                _make_not_null(col)
            if cd.primary_key:
                self._set_primary_key(t, [(col.name, 0)])
        elif op == "RENAME_COLUMN":
            i = _existing(t, a.name, a.if_exists)
            if i is None:
                return
            _free(t, a.new_name, i)
            old = t.columns[i].name
            t.columns[i].name = a.new_name
            t.primary_key = [(a.new_name if n.lower() == old.lower() else n, p) for n, p in t.primary_key]
        elif op == "ALTER_COLUMN":
            i = _existing(t, a.name, a.if_exists)
            if i is None:
                return
            col = t.columns[i]
            if a.default is not None:
                col.default = render_default(a.default, col.data_type, col.column_type, col.nullable)
            elif a.drop_default:
                col.default = "NULL" if col.nullable else None
        elif op == "ADD_PRIMARY_KEY":
            if t.primary_key:
                raise _Drift("the table already has a primary key")
            self._set_primary_key(t, a.key_columns or [])
        elif op == "DROP_PRIMARY_KEY":
            t.primary_key = []
        elif op == "CONVERT_CHARSET":
            if a.charset.lower() == "default":
                cs, coll = self._table_defaults(t.schema)
                if a.collate is not None:
                    cs, coll = self.charsets.resolve(None, a.collate)
            else:
                cs, coll = self.charsets.resolve(a.charset, a.collate)
            if cs == "binary":
                raise SchemaApplyError("CONVERT TO CHARACTER SET binary changes column types; not followed")
            new_mb = self.charsets.mbmaxlen(cs) or 1
            for col in t.columns:
                if col.charset is None:
                    continue
                if col.data_type in TEXT_TYPES:
                    # The server keeps the length in characters, so a TEXT may grow to MEDIUMTEXT.
                    old_mb = self.charsets.mbmaxlen(col.charset) or 1
                    limit = dict(_TEXT_SIZES)[col.data_type]
                    grown = _size_for(_TEXT_SIZES, (limit // old_mb) * new_mb)
                    if _TEXT_SIZES_ORDER[grown] > _TEXT_SIZES_ORDER[col.data_type]:
                        col.data_type = col.column_type = grown
                col.charset, col.collation = cs, coll
            t.charset, t.collation = cs, coll
        elif op == "TABLE_CHARSET":
            if a.charset is not None and a.charset.lower() == "default" and a.collate is None:
                t.charset, t.collation = self._table_defaults(t.schema)
            else:
                resolved = self.charsets.resolve(a.charset, a.collate)
                if resolved is not None:
                    t.charset, t.collation = resolved
        elif op in ("ADD_INDEX", "DROP_INDEX", "RENAME_INDEX", "OPTION", "RENAME_TABLE"):
            return
        else:  # pragma: no cover
            raise SchemaApplyError(f"unexpected ALTER TABLE clause {op}")

    @staticmethod
    def _position(t: Table, position: tuple[str, str | None] | None, default: int) -> int:
        if position is None:
            return default
        if position[0] == "FIRST":
            return 0
        i = t.index_of(position[1])
        if i is None:
            raise _Drift(f"AFTER column {position[1]!r} does not exist")
        return i + 1


_TEXT_SIZES_ORDER = {name: k for k, (name, _) in enumerate(_TEXT_SIZES)}


def _make_not_null(col: Column) -> None:
    if col.nullable:
        col.nullable = False
        if col.default == "NULL":
            col.default = None


def _only_options(stmt: AlterTable) -> bool:
    return all(a.op in ("OPTION", "ADD_INDEX", "DROP_INDEX", "RENAME_INDEX") for a in stmt.actions)
