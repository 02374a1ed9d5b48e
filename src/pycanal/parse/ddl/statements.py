"""The statements the DDL parser gives: table DDL in every detail a column's type depends on (the
schema history applies them: ``pycanal.parse.meta``), the database statements, and
``OtherStatement`` for anything that changes no table's columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "AlterAction",
    "AlterDatabase",
    "AlterTable",
    "ColumnDef",
    "CreateDatabase",
    "CreateIndex",
    "CreateTable",
    "Default",
    "DropDatabase",
    "DropIndex",
    "DropTables",
    "OtherStatement",
    "RenameTables",
    "Statement",
    "TableName",
    "TruncateTable",
]


class TableName(NamedTuple):
    schema: str | None
    name: str

    def qualified(self, default_schema: str | None) -> TableName:
        return self if self.schema is not None else TableName(default_schema, self.name)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema is not None else self.name


@dataclass(slots=True)
class Default:
    """A DEFAULT value: kind is null, string, number, bit, hex, bool or expr; text its value."""

    kind: str
    text: str


@dataclass(slots=True)
class ColumnDef:
    """A column definition as written (the schema model resolves it into a column type)."""

    name: str
    type_name: str  # canonical upper-case base type: INT, VARCHAR, NCHAR, NVARCHAR, MEDIUMTEXT, ...
    params: list[str] = field(default_factory=list)  # numbers as text, or ENUM/SET labels
    has_params: bool = False
    unsigned: bool = False
    zerofill: bool = False
    binary: bool = False  # the BINARY attribute: the binary collation of the charset
    byte: bool = False  # CHAR BYTE: a BINARY column
    charset: str | None = None
    collate: str | None = None
    nullable: bool | None = None  # None: not said
    default: Default | None = None  # None: no DEFAULT clause
    auto_increment: bool = False
    primary_key: bool = False
    unique: bool = False
    generated: str | None = None  # VIRTUAL, PERSISTENT or STORED
    invisible: bool = False
    compressed: bool = False
    comment: str | None = None
    on_update: str | None = None
    system_versioning: bool | None = None  # WITH (True) / WITHOUT (False) SYSTEM VERSIONING
    position: tuple[str, str | None] | None = None  # ("FIRST", None) or ("AFTER", column)


@dataclass(slots=True)
class AlterAction:
    """One ALTER TABLE clause.

    ``op``: ADD_COLUMN, DROP_COLUMN, MODIFY_COLUMN, CHANGE_COLUMN, RENAME_COLUMN, ALTER_COLUMN,
    ADD_PRIMARY_KEY, DROP_PRIMARY_KEY, ADD_INDEX, DROP_INDEX, RENAME_INDEX, RENAME_TABLE,
    CONVERT_CHARSET, TABLE_CHARSET, OPTION (no effect on columns) or UNSUPPORTED (changes the
    table in a way the schema model does not follow: the history refuses it).
    """

    op: str
    text: str = ""
    column: ColumnDef | None = None
    name: str | None = None
    new_name: str | None = None
    if_exists: bool = False
    if_not_exists: bool = False
    key_columns: list[tuple[str, int]] | None = None
    table: TableName | None = None
    charset: str | None = None
    collate: str | None = None
    default: Default | None = None
    drop_default: bool = False
    invisible: bool | None = None
    table_option: bool = False  # ENGINE=, COMMENT=, CHARSET=, ...: a table option, not an item


@dataclass(slots=True)
class CreateTable:
    table: TableName
    columns: list[ColumnDef] = field(default_factory=list)
    primary_key: list[tuple[str, int]] | None = None
    charset: str | None = None
    collate: str | None = None
    like: TableName | None = None
    if_not_exists: bool = False
    or_replace: bool = False
    temporary: bool = False
    has_select: bool = False
    unsupported: str | None = None


@dataclass(slots=True)
class AlterTable:
    table: TableName
    actions: list[AlterAction] = field(default_factory=list)
    if_exists: bool = False


@dataclass(slots=True)
class RenameTables:
    pairs: list[tuple[TableName, TableName]]
    if_exists: bool = False


@dataclass(slots=True)
class DropTables:
    tables: list[TableName]
    temporary: bool = False
    if_exists: bool = False


@dataclass(slots=True)
class TruncateTable:
    table: TableName


@dataclass(slots=True)
class CreateIndex:
    table: TableName
    name: str
    kind: str = "INDEX"  # INDEX, UNIQUE, FULLTEXT, SPATIAL


@dataclass(slots=True)
class DropIndex:
    table: TableName
    name: str


@dataclass(slots=True)
class CreateDatabase:
    name: str
    charset: str | None = None
    collate: str | None = None
    if_not_exists: bool = False
    or_replace: bool = False


@dataclass(slots=True)
class AlterDatabase:
    name: str | None
    charset: str | None = None
    collate: str | None = None


@dataclass(slots=True)
class DropDatabase:
    name: str
    if_exists: bool = False


@dataclass(slots=True)
class OtherStatement:
    """Anything that does not change a table's columns (views, triggers, users, DML, ...)."""

    keyword: str
    text: str = ""


Statement = (
    CreateTable
    | AlterTable
    | RenameTables
    | DropTables
    | TruncateTable
    | CreateIndex
    | DropIndex
    | CreateDatabase
    | AlterDatabase
    | DropDatabase
    | OtherStatement
)
