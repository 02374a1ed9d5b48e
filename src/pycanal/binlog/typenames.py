"""Column type names as far as a TABLE_MAP tells them (``varchar(64)``, ``bigint unsigned``).

Used where no declared type from the schema history is at hand: Canal's ``mysqlType`` and the
text layout of ``pycanal binlog decode``.
"""

from __future__ import annotations

from .charsets import charset_for_collation
from .constants import ColumnType as T
from .tablemap import MARIADB_BLOB_COMPRESSED, MARIADB_VARCHAR_COMPRESSED, TableMap

_INT_NAMES = {
    T.TINY: "tinyint",
    T.SHORT: "smallint",
    T.INT24: "mediumint",
    T.LONG: "int",
    T.LONGLONG: "bigint",
}
_SIMPLE_NAMES = {
    T.FLOAT: "float",
    T.DOUBLE: "double",
    T.YEAR: "year",
    T.DATE: "date",
    T.NEWDATE: "date",
    T.TIME: "time",
    T.DATETIME: "datetime",
    T.TIMESTAMP: "timestamp",
    T.JSON: "json",
    T.GEOMETRY: "geometry",
    T.DECIMAL: "decimal",
}
_MBMAXLEN = {
    "utf8mb4": 4,
    "utf8mb3": 3,
    "utf8": 3,
    "ucs2": 2,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "gbk": 2,
    "gb2312": 2,
    "gb18030": 4,
    "big5": 2,
    "sjis": 2,
    "cp932": 2,
    "euckr": 2,
    "ujis": 3,
    "eucjpms": 3,
}
BLOB_FAMILY = frozenset({T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, MARIADB_BLOB_COMPRESSED})
VARCHAR_FAMILY = frozenset({T.VARCHAR, T.VAR_STRING, MARIADB_VARCHAR_COMPRESSED})


def _collation(tm: TableMap, i: int) -> int | None:
    return tm.collations[i] if tm.collations else None


def is_binary(tm: TableMap, i: int, declared: str | None) -> bool | None:
    """Whether a character-family column holds bytes: True/False, None if unknown."""
    if declared:
        low = declared.lower()
        return "binary" in low or "blob" in low
    coll = _collation(tm, i)
    if coll is None:
        return None
    return coll == 63


def _quote_label(label: str) -> str:
    return "'" + label.replace("\\", "\\\\").replace("'", "''") + "'"


def mysql_column_type(tm: TableMap, i: int) -> str:
    """Column ``i``'s type text as far as the TABLE_MAP tells it (see the module notes)."""
    t, meta = tm.types[i], tm.metas[i]
    if t in _INT_NAMES:
        text = _INT_NAMES[t]
    elif t == T.NEWDECIMAL:
        text = f"decimal({meta >> 8},{meta & 0xFF})"
    elif t in (T.TIME2, T.DATETIME2, T.TIMESTAMP2):
        base = {T.TIME2: "time", T.DATETIME2: "datetime", T.TIMESTAMP2: "timestamp"}[t]
        text = f"{base}({meta})" if meta else base
    elif t in VARCHAR_FAMILY:
        text = "varbinary" if is_binary(tm, i, None) else "varchar"
        text += f"({meta if text == 'varbinary' else _chars(tm, i, meta)})"
    elif t == T.STRING:
        text = f"binary({meta})" if is_binary(tm, i, None) else f"char({_chars(tm, i, meta)})"
    elif t in BLOB_FAMILY:
        size = {1: "tiny", 2: "", 3: "medium", 4: "long"}.get(meta, "")
        text = size + ("blob" if is_binary(tm, i, None) in (True, None) else "text")
    elif t == T.BIT:
        text = f"bit({(meta >> 8) * 8 + (meta & 0xFF)})"
    elif t in (T.ENUM, T.SET):
        kind = "enum" if t == T.ENUM else "set"
        labels = (tm.enum_labels if t == T.ENUM else tm.set_labels) or None
        members = labels[i] if labels else None
        text = f"{kind}({','.join(_quote_label(m) for m in members)})" if members is not None else kind
    elif t == T.VECTOR:
        dims = tm.vector_dims[i] if tm.vector_dims else None
        text = f"vector({dims})" if dims is not None else "vector"
    else:
        text = _SIMPLE_NAMES.get(t, f"type{t}")
    if tm.unsigned and tm.unsigned[i]:
        text += " unsigned"
    return text


def _chars(tm: TableMap, i: int, nbytes: int) -> int:
    coll = _collation(tm, i)
    if coll is None:
        return nbytes
    try:
        return nbytes // _MBMAXLEN.get(charset_for_collation(coll), 1)
    except KeyError:
        return nbytes
