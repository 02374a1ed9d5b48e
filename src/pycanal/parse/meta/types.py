"""Column types: from a DDL column definition to the server's column type, and back to the binlog.

:func:`resolve_column` turns a parsed :class:`~pycanal.parse.ddl.ColumnDef` into the
:class:`~pycanal.parse.meta.model.Column` the server reports in ``information_schema.COLUMNS``
(``COLUMN_TYPE`` text such as ``int(10) unsigned``, ``DATA_TYPE``, nullability, charset,
collation, default), following MariaDB's rules (the flavor ``mysql`` follows MySQL 8 where the two
differ: no integer display widths, native JSON, ``year``).

:func:`binlog_mismatch` says whether a TABLE_MAP column (type code and metadata) can be that
column, e.g. VARCHAR=15 with max byte length ``n * mbmaxlen``, STRING=254 for CHAR/BINARY,
BLOB=252 for the TEXT/BLOB family, NEWDECIMAL with precision/scale, TIME2/DATETIME2/TIMESTAMP2
with the fractional-second precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from ...binlog.charsets import COLLATIONS
from ...binlog.constants import ColumnType as T
from ..ddl import ColumnDef, DdlParseError, Default, tokenize

__all__ = [
    "Charsets",
    "binlog_mismatch",
    "column_params",
    "parse_labels",
    "render_default",
    "resolve_column",
]

MARIADB_BLOB_COMPRESSED = 140
MARIADB_VARCHAR_COMPRESSED = 141

# MariaDB 10.11's compiled charset defaults: charset -> (default collation, max bytes per char).
_BUILTIN_CHARSETS: dict[str, tuple[str, int]] = {
    "armscii8": ("armscii8_general_ci", 1),
    "ascii": ("ascii_general_ci", 1),
    "big5": ("big5_chinese_ci", 2),
    "binary": ("binary", 1),
    "cp1250": ("cp1250_general_ci", 1),
    "cp1251": ("cp1251_general_ci", 1),
    "cp1256": ("cp1256_general_ci", 1),
    "cp1257": ("cp1257_general_ci", 1),
    "cp850": ("cp850_general_ci", 1),
    "cp852": ("cp852_general_ci", 1),
    "cp866": ("cp866_general_ci", 1),
    "cp932": ("cp932_japanese_ci", 2),
    "dec8": ("dec8_swedish_ci", 1),
    "eucjpms": ("eucjpms_japanese_ci", 3),
    "euckr": ("euckr_korean_ci", 2),
    "gb18030": ("gb18030_chinese_ci", 4),
    "gb2312": ("gb2312_chinese_ci", 2),
    "gbk": ("gbk_chinese_ci", 2),
    "geostd8": ("geostd8_general_ci", 1),
    "greek": ("greek_general_ci", 1),
    "hebrew": ("hebrew_general_ci", 1),
    "hp8": ("hp8_english_ci", 1),
    "keybcs2": ("keybcs2_general_ci", 1),
    "koi8r": ("koi8r_general_ci", 1),
    "koi8u": ("koi8u_general_ci", 1),
    "latin1": ("latin1_swedish_ci", 1),
    "latin2": ("latin2_general_ci", 1),
    "latin5": ("latin5_turkish_ci", 1),
    "latin7": ("latin7_general_ci", 1),
    "macce": ("macce_general_ci", 1),
    "macroman": ("macroman_general_ci", 1),
    "sjis": ("sjis_japanese_ci", 2),
    "swe7": ("swe7_swedish_ci", 1),
    "tis620": ("tis620_thai_ci", 1),
    "ucs2": ("ucs2_general_ci", 2),
    "ujis": ("ujis_japanese_ci", 3),
    "utf16": ("utf16_general_ci", 4),
    "utf16le": ("utf16le_general_ci", 4),
    "utf32": ("utf32_general_ci", 4),
    "utf8mb3": ("utf8mb3_general_ci", 3),
    "utf8mb4": ("utf8mb4_general_ci", 4),
}


@dataclass
class Charsets:
    """What the server knows about charsets and collations (builtin MariaDB defaults, or loaded)."""

    default_collation: dict[str, str] = field(default_factory=dict)
    maxlen: dict[str, int] = field(default_factory=dict)
    collation_charset: dict[str, str] = field(default_factory=dict)
    collation_id: dict[str, int] = field(default_factory=dict)

    @classmethod
    def builtin(cls) -> Charsets:
        c = cls()
        for cs, (coll, n) in _BUILTIN_CHARSETS.items():
            c.default_collation[cs] = coll
            c.maxlen[cs] = n
        for cid, (cs, name) in sorted(COLLATIONS.items()):
            c.collation_charset.setdefault(name, cs)
            c.collation_id.setdefault(name, cid)
        return c

    def to_json(self) -> dict:
        return {
            "default_collation": self.default_collation,
            "maxlen": self.maxlen,
            "collation_charset": self.collation_charset,
            "collation_id": self.collation_id,
        }

    @classmethod
    def from_json(cls, data: dict) -> Charsets:
        return cls(
            dict(data["default_collation"]),
            dict(data["maxlen"]),
            dict(data["collation_charset"]),
            dict(data["collation_id"]),
        )

    # -- names ---------------------------------------------------------------------
    @staticmethod
    def charset_name(name: str) -> str:
        n = name.lower()
        return "utf8mb3" if n == "utf8" else n

    @staticmethod
    def collation_name(name: str) -> str:
        n = name.lower()
        return "utf8mb3" + n[4:] if n.startswith("utf8_") else n

    def name_for_id(self, collation_id: int) -> str | None:
        for name, cid in self.collation_id.items():
            if cid == collation_id:
                return name
        return None

    def default_for(self, charset: str) -> str:
        cs = self.charset_name(charset)
        try:
            return self.default_collation[cs]
        except KeyError:
            raise DdlParseError(f"unknown character set {charset!r}") from None

    def charset_of(self, collation: str) -> str:
        coll = self.collation_name(collation)
        cs = self.collation_charset.get(coll)
        if cs is None:
            # Collations follow <charset>_<rest>: good enough for names the tables do not know.
            for cand in sorted(self.default_collation, key=len, reverse=True):
                if coll.startswith(cand + "_") or coll == cand:
                    return cand
            raise DdlParseError(f"unknown collation {collation!r}")
        return cs

    def mbmaxlen(self, charset: str | None) -> int | None:
        if charset is None:
            return None
        return self.maxlen.get(self.charset_name(charset))

    def binary_collation(self, charset: str) -> str:
        cs = self.charset_name(charset)
        if cs == "binary":
            return "binary"
        name = f"{cs}_bin"
        if name in self.collation_charset or name in self.collation_id:
            return name
        raise DdlParseError(f"character set {charset!r} has no binary collation")

    def resolve(self, charset: str | None, collate: str | None) -> tuple[str, str] | None:
        """(charset, collation) from an explicit CHARACTER SET and/or COLLATE, None if neither."""
        if charset is not None and charset.lower() == "default":
            charset = None
        if charset is None and collate is None:
            return None
        if collate is not None:
            coll = self.collation_name(collate)
            cs = self.charset_of(coll)
            if charset is not None and self.charset_name(charset) != cs:
                raise DdlParseError(f"collation {collate!r} is not valid for character set {charset!r}")
            return cs, coll
        cs = self.charset_name(charset)
        return cs, self.default_for(cs)


# ============================================================================ resolution
_INT_WIDTH = {  # data type -> (signed width, unsigned width)
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_INT_NAMES = {"TINYINT": "tinyint", "SMALLINT": "smallint", "MEDIUMINT": "mediumint", "INT": "int",
              "BIGINT": "bigint"}  # fmt: skip
_TEXT_SIZES = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))
_BLOB_SIZES = (("tinyblob", 255), ("blob", 65535), ("mediumblob", 16777215), ("longblob", 4294967295))
TEXT_TYPES = frozenset(n for n, _ in _TEXT_SIZES)
BLOB_TYPES = frozenset(n for n, _ in _BLOB_SIZES)
CHAR_TYPES = frozenset({"char", "varchar", "enum", "set"}) | TEXT_TYPES
_SPATIAL = frozenset({"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                      "multipolygon", "geometrycollection"})  # fmt: skip
_NUMERIC = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double"})
_CURRENT_TIMESTAMP_RE = re.compile(
    r"^(?:current_timestamp|now|localtime|localtimestamp)\s*(?:\(\s*(\d*)\s*\))?$", re.IGNORECASE
)


def _size_for(sizes: tuple[tuple[str, int], ...], nbytes: int) -> str:
    for name, limit in sizes:
        if nbytes <= limit:
            return name
    return sizes[-1][0]


def _quote(label: str) -> str:
    return "'" + label.replace("\\", "\\\\").replace("'", "''") + "'"


def _int_param(col: ColumnDef, k: int, what: str) -> int:
    try:
        return int(col.params[k])
    except (IndexError, ValueError):
        raise DdlParseError(f"bad {what} for column {col.name!r}") from None


@dataclass
class Resolved:
    """A column definition resolved against its table (what the model stores)."""

    column_type: str
    data_type: str
    unsigned: bool
    nullable: bool
    charset: str | None
    collation: str | None
    default: str | None
    labels: list[str] | None
    auto_increment: bool = False
    unique: bool = False


def resolve_column(
    col: ColumnDef,
    table_charset: str,
    table_collation: str,
    charsets: Charsets,
    flavor: str = "mariadb",
) -> Resolved:
    """The server's view of a column definition inside a table with the given default collation."""
    name = col.type_name
    unsigned = col.unsigned or col.zerofill
    suffix = (" unsigned" if unsigned else "") + (" zerofill" if col.zerofill else "")
    nullable = True if col.nullable is None else col.nullable
    auto_increment = col.auto_increment
    unique = col.unique
    charset: str | None = None
    collation: str | None = None
    labels: list[str] | None = None
    mysql = flavor == "mysql"

    def char_charset(default_cs: str | None = None) -> tuple[str, str]:
        explicit = charsets.resolve(col.charset, col.collate)
        if explicit is None:
            if default_cs is not None:
                cs, coll = default_cs, charsets.default_for(default_cs)
            else:
                cs, coll = table_charset, table_collation
        else:
            cs, coll = explicit
        if col.binary and coll != "binary" and col.collate is None:
            coll = charsets.binary_collation(cs)
        return cs, coll

    if name in _INT_NAMES or name in ("BOOL", "SERIAL"):
        if name == "SERIAL":
            dt, unsigned, nullable, auto_increment, unique = "bigint", True, False, True, True
            suffix = " unsigned"
            width = 20
        elif name == "BOOL":
            dt, width = "tinyint", 1
        else:
            dt = _INT_NAMES[name]
            width = (
                _int_param(col, 0, "display width") if col.params else _INT_WIDTH[dt][1 if unsigned else 0]
            )
        if mysql and not col.zerofill and not (dt == "tinyint" and width == 1):
            column_type = dt + suffix
        else:
            column_type = f"{dt}({width}){suffix}"
    elif name in ("FLOAT", "FLOAT4", "DOUBLE"):
        dt = "double" if name == "DOUBLE" else "float"
        if len(col.params) == 1:
            precision = _int_param(col, 0, "FLOAT precision")
            dt = "float" if precision <= 24 else "double"
            column_type = dt + suffix
        elif len(col.params) == 2:
            column_type = f"{dt}({col.params[0]},{col.params[1]}){suffix}"
        else:
            column_type = dt + suffix
    elif name == "DECIMAL":
        m = _int_param(col, 0, "DECIMAL precision") if col.params else 10
        d = _int_param(col, 1, "DECIMAL scale") if len(col.params) > 1 else 0
        dt = "decimal"
        column_type = f"decimal({m},{d}){suffix}"
    elif name == "BIT":
        dt = "bit"
        column_type = f"bit({_int_param(col, 0, 'BIT width') if col.params else 1})"
    elif name in ("DATE", "TIME", "DATETIME", "TIMESTAMP"):
        dt = name.lower()
        fsp = _int_param(col, 0, "fractional seconds precision") if col.params and dt != "date" else 0
        column_type = f"{dt}({fsp})" if fsp else dt
    elif name == "YEAR":
        dt = "year"
        width = _int_param(col, 0, "YEAR width") if col.params else 4
        column_type = "year" if mysql else f"year({width})"
    elif name in ("CHAR", "NCHAR", "VARCHAR", "NVARCHAR"):
        varying = name in ("VARCHAR", "NVARCHAR")
        if varying and not col.params:
            raise DdlParseError(f"VARCHAR column {col.name!r} needs a length")
        length = _int_param(col, 0, "length") if col.params else 1
        if col.byte:
            dt = "varbinary" if varying else "binary"
        else:
            charset, collation = char_charset("utf8mb3" if name.startswith("N") else None)
            dt = "varchar" if varying else "char"
            if charset == "binary":
                dt, charset, collation = ("varbinary" if varying else "binary"), None, None
        column_type = f"{dt}({length})"
    elif name in ("BINARY", "VARBINARY"):
        if name == "VARBINARY" and not col.params:
            raise DdlParseError(f"VARBINARY column {col.name!r} needs a length")
        dt = name.lower()
        column_type = f"{dt}({_int_param(col, 0, 'length') if col.params else 1})"
    elif name in ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"):
        charset, collation = char_charset()
        if name == "TEXT" and col.params:
            nbytes = _int_param(col, 0, "TEXT length") * (charsets.mbmaxlen(charset) or 1)
            dt = _size_for(_TEXT_SIZES, nbytes)
        else:
            dt = name.lower()
        if charset == "binary":
            dt = dt.replace("text", "blob")
            charset = collation = None
        column_type = dt
    elif name in ("TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"):
        if name == "BLOB" and col.params:
            dt = _size_for(_BLOB_SIZES, _int_param(col, 0, "BLOB length"))
        else:
            dt = name.lower()
        column_type = dt
    elif name in ("ENUM", "SET"):
        dt = name.lower()
        labels = list(col.params)
        charset, collation = char_charset()
        column_type = f"{dt}({','.join(_quote(v) for v in labels)})"
    elif name == "JSON":
        if mysql:
            dt = column_type = "json"
        else:
            # MariaDB: JSON is LONGTEXT with utf8mb4_bin (and a json_valid() CHECK).
            dt = column_type = "longtext"
            charset, collation = "utf8mb4", "utf8mb4_bin"
    elif name.lower() in _SPATIAL or name in ("INET4", "INET6", "UUID"):
        dt = column_type = name.lower()
    elif name == "VECTOR":
        dt = "vector"
        column_type = f"vector({_int_param(col, 0, 'VECTOR dimension')})"
    else:  # pragma: no cover - the parser knows no other names
        raise DdlParseError(f"unknown data type {name} for column {col.name!r}")
    if col.compressed and not mysql:
        column_type += " /*M!100301 COMPRESSED*/"
    if col.primary_key:
        nullable = False
    default = render_default(col.default, dt, column_type, nullable, auto_increment)
    return Resolved(column_type, dt, unsigned, nullable, charset, collation, default, labels,
                    auto_increment, unique)  # fmt: skip


def render_default(
    default: Default | None, data_type: str, column_type: str, nullable: bool, auto_increment: bool = False
) -> str | None:
    """``information_schema.COLUMNS.COLUMN_DEFAULT`` as MariaDB (10.2.7+) shows it.

    No DEFAULT clause: ``'NULL'`` for a nullable column, None otherwise. Literals are quoted for
    string and temporal columns, normalised numbers for numeric columns; CURRENT_TIMESTAMP and its
    synonyms become ``current_timestamp()``; other expressions keep their text (best effort).
    """
    if default is None:
        return "NULL" if nullable and not auto_increment else None
    kind, text = default.kind, default.text
    if kind == "null":
        return "NULL"
    if kind == "expr":
        inner = text.strip()
        while inner.startswith("(") and inner.endswith(")"):
            inner = inner[1:-1].strip()
        m = _CURRENT_TIMESTAMP_RE.match(inner)
        if m:
            return f"current_timestamp({m.group(1) or ''})"
        return inner
    if kind == "bit":
        return f"b'{text}'"
    if kind == "hex":
        if data_type in _NUMERIC or data_type == "bit":
            return str(int(text or "0", 16))
        return _quote(bytes.fromhex(text if len(text) % 2 == 0 else "0" + text).decode("latin-1"))
    if data_type in _NUMERIC or data_type == "bit":
        if data_type == "bit" and kind in ("number", "bool"):
            return f"b'{int(Decimal(text)):b}'"
        try:
            value = Decimal(text.strip() or "0")
        except InvalidOperation:
            return _quote(text)
        if data_type == "decimal":
            m = re.search(r"\((\d+),(\d+)\)", column_type)
            scale = int(m.group(2)) if m else 0
            return str(value.quantize(Decimal(1).scaleb(-scale)))
        if data_type in ("float", "double"):
            return _num_text(value)
        return str(int(value))
    if data_type == "year" and kind in ("number", "bool", "string"):
        return text
    return _quote(text)


def _num_text(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


# ============================================================================ column types
_PARAMS_RE = re.compile(r"^[a-z]+\((\d+)(?:,(\d+))?\)")


def column_params(column_type: str) -> tuple[int | None, int | None]:
    """The numbers in ``name(m[,d])`` of a COLUMN_TYPE, or (None, None)."""
    m = _PARAMS_RE.match(column_type)
    if m is None:
        return None, None
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)


def parse_labels(column_type: str) -> list[str]:
    """The labels of an ``enum('a','b')``/``set(...)`` COLUMN_TYPE."""
    start = column_type.find("(")
    end = column_type.rfind(")")
    return [t.value for t in tokenize(column_type[start + 1 : end]) if t.kind == "string"]


_EXPECTED = {
    "tinyint": {T.TINY},
    "smallint": {T.SHORT},
    "mediumint": {T.INT24},
    "int": {T.LONG},
    "bigint": {T.LONGLONG},
    "float": {T.FLOAT},
    "double": {T.DOUBLE},
    "decimal": {T.NEWDECIMAL, T.DECIMAL},
    "bit": {T.BIT},
    "date": {T.DATE, T.NEWDATE},
    "time": {T.TIME, T.TIME2},
    "datetime": {T.DATETIME, T.DATETIME2},
    "timestamp": {T.TIMESTAMP, T.TIMESTAMP2},
    "year": {T.YEAR},
    "char": {T.STRING},
    "binary": {T.STRING},
    "varchar": {T.VARCHAR, T.VAR_STRING, MARIADB_VARCHAR_COMPRESSED},
    "varbinary": {T.VARCHAR, T.VAR_STRING, MARIADB_VARCHAR_COMPRESSED},
    "enum": {T.ENUM},
    "set": {T.SET},
    "json": {T.JSON},
    "inet4": {T.STRING},
    "inet6": {T.STRING},
    "uuid": {T.STRING},
    "vector": {T.VECTOR},
}
for _n in TEXT_TYPES | BLOB_TYPES:
    _EXPECTED[_n] = {T.BLOB, MARIADB_BLOB_COMPRESSED}
for _n in _SPATIAL:
    _EXPECTED[_n] = {T.GEOMETRY}
_BLOB_META = {"tiny": 1, "": 2, "medium": 3, "long": 4}
_FIXED_STRING_LEN = {"inet4": 4, "inet6": 16, "uuid": 16}


def type_name(code: int) -> str:
    try:
        return T(code).name
    except ValueError:
        return {
            MARIADB_BLOB_COMPRESSED: "BLOB_COMPRESSED",
            MARIADB_VARCHAR_COMPRESSED: "VARCHAR_COMPRESSED",
        }.get(code, str(code))


def binlog_mismatch(
    data_type: str, column_type: str, charset: str | None, labels: list[str] | None, t: int, meta: int,
    charsets: Charsets,
) -> str | None:  # fmt: skip
    """Why a TABLE_MAP column (type code ``t``, metadata ``meta``) cannot be this column, or None."""
    expected = _EXPECTED.get(data_type)
    got = f"{type_name(t)} (metadata {meta})"
    if expected is None:
        return None  # a type this table does not know: nothing to check
    if t not in expected:
        return f"binlog type {got} does not fit {column_type!r}"
    p1, p2 = column_params(column_type)
    compressed = t in (MARIADB_BLOB_COMPRESSED, MARIADB_VARCHAR_COMPRESSED)
    want: int | None = None
    if t == T.NEWDECIMAL:
        want = (p1 or 10) << 8 | (p2 or 0)
    elif t in (T.TIME2, T.DATETIME2, T.TIMESTAMP2):
        want = p1 or 0
    elif t == T.BIT:
        bits = p1 or 1
        want = (bits // 8) << 8 | (bits % 8)
    elif data_type in _FIXED_STRING_LEN:
        want = _FIXED_STRING_LEN[data_type]
    elif data_type in ("char", "varchar") and p1 is not None:
        mb = charsets.mbmaxlen(charset)
        if mb is not None:
            want = p1 * mb + (1 if compressed else 0)
    elif data_type in ("binary", "varbinary") and p1 is not None:
        want = p1 + (1 if compressed else 0)
    elif t in (T.BLOB, MARIADB_BLOB_COMPRESSED):
        prefix = data_type[: -len("text")] if data_type.endswith("text") else data_type[: -len("blob")]
        want = _BLOB_META.get(prefix)
    elif t == T.ENUM and labels is not None:
        want = 1 if len(labels) < 256 else 2
    elif t == T.SET and labels is not None:
        want = {0: 1, 1: 1, 2: 2, 3: 3, 4: 4}.get((len(labels) + 7) // 8, 8)
    if want is not None and meta != want:
        return f"binlog type {got} does not fit {column_type!r} (expected metadata {want})"
    return None
