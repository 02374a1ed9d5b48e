"""DDL: Canal's classification of a statement (:func:`parse_ddl`, Canal's
``DruidDdlParser``/``DdlResult``) and a MySQL/MariaDB DDL parser (:func:`parse_statement`).

* :mod:`.lexer`: the tokens of a statement as the server reads them (comments, executable
  comments, quoting by ``sql_mode``).
* :mod:`.statements`: what the parser gives: table DDL in every detail a column's type depends
  on, database statements, ``OtherStatement``.
* :mod:`.cursor`, :mod:`.columns`, :mod:`.parser`: the hand-written parser (a token cursor,
  column definitions, the statements); what it does not understand raises
  :class:`DdlParseError` rather than guessing.
* :mod:`.classify`: Canal's classification, with sqlglot and the hand parser.
"""

from .classify import DdlResult, DdlType, is_ddl, parse_ddl, preload
from .lexer import (
    MODE_ANSI_QUOTES,
    MODE_NO_BACKSLASH_ESCAPES,
    MODE_REAL_AS_FLOAT,
    DdlParseError,
    Token,
    normalize_sql,
    tokenize,
)
from .parser import parse_statement
from .statements import (
    AlterAction,
    AlterDatabase,
    AlterTable,
    ColumnDef,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    Default,
    DropDatabase,
    DropIndex,
    DropTables,
    OtherStatement,
    RenameTables,
    Statement,
    TableName,
    TruncateTable,
)

__all__ = [
    "MODE_ANSI_QUOTES",
    "MODE_NO_BACKSLASH_ESCAPES",
    "MODE_REAL_AS_FLOAT",
    "AlterAction",
    "AlterDatabase",
    "AlterTable",
    "ColumnDef",
    "CreateDatabase",
    "CreateIndex",
    "CreateTable",
    "DdlParseError",
    "DdlResult",
    "DdlType",
    "Default",
    "DropDatabase",
    "DropIndex",
    "DropTables",
    "OtherStatement",
    "RenameTables",
    "Statement",
    "TableName",
    "Token",
    "TruncateTable",
    "normalize_sql",
    "is_ddl",
    "parse_ddl",
    "parse_statement",
    "preload",
    "tokenize",
]
