"""Column definitions of CREATE/ALTER TABLE: the data type as written (``int8``, ``real``,
``float unsigned``, ``national char``, ``long varchar``, spatial and MariaDB types: every detail the
column's type depends on, which sqlglot normalises away or rejects) and its attributes.
"""

from __future__ import annotations

from .cursor import Cursor
from .lexer import MODE_REAL_AS_FLOAT, Token
from .statements import ColumnDef

__all__ = ["ColumnParser"]

_INTEGER_TYPES = {
    "TINYINT": "TINYINT",
    "INT1": "TINYINT",
    "BOOL": "BOOL",
    "BOOLEAN": "BOOL",
    "SMALLINT": "SMALLINT",
    "INT2": "SMALLINT",
    "MEDIUMINT": "MEDIUMINT",
    "INT3": "MEDIUMINT",
    "MIDDLEINT": "MEDIUMINT",
    "INT": "INT",
    "INTEGER": "INT",
    "INT4": "INT",
    "BIGINT": "BIGINT",
    "INT8": "BIGINT",
    "SERIAL": "SERIAL",
}
_SIMPLE_TYPES = {
    **_INTEGER_TYPES,
    "BIT": "BIT",
    "DECIMAL": "DECIMAL",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "FIXED": "DECIMAL",
    "FLOAT": "FLOAT",
    "FLOAT4": "FLOAT4",
    "DOUBLE": "DOUBLE",
    "FLOAT8": "DOUBLE",
    "REAL": "DOUBLE",
    "DATE": "DATE",
    "TIME": "TIME",
    "DATETIME": "DATETIME",
    "TIMESTAMP": "TIMESTAMP",
    "YEAR": "YEAR",
    "VARCHAR": "VARCHAR",
    "VARCHARACTER": "VARCHAR",
    "NVARCHAR": "NVARCHAR",
    "BINARY": "BINARY",
    "VARBINARY": "VARBINARY",
    "TINYBLOB": "TINYBLOB",
    "BLOB": "BLOB",
    "MEDIUMBLOB": "MEDIUMBLOB",
    "LONGBLOB": "LONGBLOB",
    "TINYTEXT": "TINYTEXT",
    "TEXT": "TEXT",
    "MEDIUMTEXT": "MEDIUMTEXT",
    "LONGTEXT": "LONGTEXT",
    "ENUM": "ENUM",
    "SET": "SET",
    "JSON": "JSON",
    "GEOMETRY": "GEOMETRY",
    "POINT": "POINT",
    "LINESTRING": "LINESTRING",
    "POLYGON": "POLYGON",
    "MULTIPOINT": "MULTIPOINT",
    "MULTILINESTRING": "MULTILINESTRING",
    "MULTIPOLYGON": "MULTIPOLYGON",
    "GEOMETRYCOLLECTION": "GEOMETRYCOLLECTION",
    "INET4": "INET4",
    "INET6": "INET6",
    "UUID": "UUID",
    "VECTOR": "VECTOR",
}

# One-word column attributes: the ColumnDef fields each sets.
_WORD_ATTRIBUTES: dict[str, tuple[tuple[str, object], ...]] = {
    "NULL": (("nullable", True),),
    "UNSIGNED": (("unsigned", True),),
    "SIGNED": (),
    "ZEROFILL": (("zerofill", True), ("unsigned", True)),
    "BINARY": (("binary", True),),
    "BYTE": (("byte", True),),
    "ASCII": (("charset", "latin1"),),
    "UNICODE": (("charset", "ucs2"),),
    "AUTO_INCREMENT": (("auto_increment", True),),
    "KEY": (("primary_key", True),),  # in a column definition, KEY means PRIMARY KEY
    "INVISIBLE": (("invisible", True),),
    "VISIBLE": (),
}


class ColumnParser(Cursor):
    """A cursor that reads column definitions (``sql_mode``: REAL_AS_FLOAT makes REAL a FLOAT)."""

    def __init__(self, sql: str, tokens: list[Token], sql_mode: int = 0):
        super().__init__(sql, tokens)
        self.real_as_float = bool(sql_mode & MODE_REAL_AS_FLOAT)

    def data_type(self, col: ColumnDef) -> None:
        w = self.word()
        if w is None:
            raise self.error("expected a data type")
        self.i += 1
        name: str | None
        if w == "NATIONAL":
            if (
                self.accept("VARCHAR")
                or self.accept("CHARACTER", "VARYING")
                or self.accept("CHAR", "VARYING")
            ):
                name = "NVARCHAR"
            elif self.accept("CHAR") or self.accept("CHARACTER"):
                name = "NCHAR"
            else:
                raise self.error("expected CHAR or VARCHAR after NATIONAL")
        elif w == "NCHAR":
            name = "NVARCHAR" if (self.accept("VARYING") or self.accept("VARCHAR")) else "NCHAR"
        elif w in ("CHAR", "CHARACTER"):
            name = "VARCHAR" if self.accept("VARYING") else "CHAR"
        elif w == "DOUBLE":
            self.accept("PRECISION")
            name = "DOUBLE"
        elif w == "LONG":
            if self.accept("VARBINARY"):
                name = "MEDIUMBLOB"
            elif self.accept("CHAR", "VARYING") or self.accept("VARCHAR"):
                name = "MEDIUMTEXT"
            elif self.accept("BINARY"):
                name = "MEDIUMTEXT"
                col.binary = True
            else:
                name = "MEDIUMTEXT"
        elif w == "REAL" and self.real_as_float:
            name = "FLOAT4"
        else:
            name = _SIMPLE_TYPES.get(w)
            if name is None:
                self.i -= 1
                raise self.error("unknown data type")
        col.type_name = name
        if self.punct() == "(":
            self.i += 1
            col.has_params = True
            while True:
                t = self.advance()
                if t.kind == "word" and t.upper.startswith("_") and self.peek() is not None:
                    t = self.advance()  # a charset introducer before an ENUM/SET value
                if t.kind not in ("number", "string"):
                    raise self.error("bad data type parameter")
                col.params.append(t.value)
                if self.accept_punct(","):
                    continue
                self.expect_punct(")")
                break
        elif name in ("ENUM", "SET"):
            raise self.error(f"{name} needs a list of values")

    def column_def(self, in_alter: bool) -> ColumnDef:
        col = ColumnDef(name=self.ident(), type_name="")
        self.data_type(col)
        self.column_attributes(col, in_alter)
        return col

    def column_attributes(self, col: ColumnDef, in_alter: bool) -> None:
        while not self.at_end:
            p = self.punct()
            if p in (",", ")"):
                return
            w = self.word()
            if w is None:
                raise self.error(f"unexpected token in the definition of column {col.name!r}")
            if w == "NOT" and self.word(1) == "NULL":
                self.i += 2
                col.nullable = False
            elif w in _WORD_ATTRIBUTES:
                self.i += 1
                for name, value in _WORD_ATTRIBUTES[w]:
                    setattr(col, name, value)
            elif w in ("CHARSET", "CHARACTER"):
                self.i += 1
                if w == "CHARACTER":
                    self.expect("SET")
                col.charset = self.name_value()
            elif w == "COLLATE":
                self.i += 1
                col.collate = self.name_value()
            elif w == "DEFAULT":
                self.i += 1
                col.default = self.value_expr()
            elif w == "PRIMARY":
                self.i += 1
                self.expect("KEY")
                col.primary_key = True
            elif w == "UNIQUE":
                self.i += 1
                self.accept("KEY") or self.accept("INDEX")
                col.unique = True
            elif w == "COMMENT":
                self.i += 1
                t = self.advance()
                if t.kind != "string":
                    raise self.error("expected a comment string")
                col.comment = t.value
            elif w == "ON" and self.word(1) == "UPDATE":
                self.i += 2
                col.on_update = self.value_expr().text
            elif w in ("GENERATED", "AS"):
                if w == "GENERATED":
                    self.i += 1
                    self.expect("ALWAYS")
                    if self.word() != "AS":
                        raise self.error("expected AS")
                self.i += 1
                if self.word() == "ROW" and self.word(1) in ("START", "END"):
                    # GENERATED ALWAYS AS ROW START/END: system versioning columns.
                    self.i += 2
                    col.generated = "ROW"
                    continue
                self.skip_group()
                col.generated = col.generated or "VIRTUAL"
            elif w in ("VIRTUAL", "PERSISTENT", "STORED"):
                self.i += 1
                col.generated = w
            elif w in ("COLUMN_FORMAT", "STORAGE"):
                self.i += 2
            elif w == "COMPRESSED":
                self.i += 1
                col.compressed = True
                if self.accept_punct("="):
                    self.advance()
            elif w == "SERIAL" and self.word(1) == "DEFAULT" and self.word(2) == "VALUE":
                self.i += 3
                col.nullable = False
                col.auto_increment = True
                col.unique = True
            elif w == "REFERENCES":
                self.i += 1
                self.table_name()
                if self.punct() == "(":
                    self.skip_group()
                while True:
                    if self.accept("MATCH"):
                        self.advance()
                    elif self.word() == "ON" and self.word(1) in ("DELETE", "UPDATE"):
                        self.i += 2
                        if not (self.accept("SET", "NULL") or self.accept("SET", "DEFAULT")):
                            if not self.accept("NO", "ACTION"):
                                self.advance()
                    else:
                        break
            elif w == "CONSTRAINT":
                self.i += 1
                if self.word() != "CHECK":
                    self.ident()
            elif w == "CHECK":
                self.i += 1
                self.skip_group()
            elif w in ("WITH", "WITHOUT") and self.word(1) == "SYSTEM" and self.word(2) == "VERSIONING":
                self.i += 3
                col.system_versioning = w == "WITH"
            elif w in ("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "REF_SYSTEM_ID", "SRID"):
                self.i += 1
                self.accept_punct("=")
                self.advance()
            elif in_alter and w == "FIRST":
                self.i += 1
                col.position = ("FIRST", None)
                return
            elif in_alter and w == "AFTER":
                self.i += 1
                col.position = ("AFTER", self.ident())
                return
            else:
                raise self.error(f"unknown attribute in the definition of column {col.name!r}")
