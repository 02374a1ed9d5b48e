"""TABLE_MAP_EVENT: column types, per-type metadata and the optional metadata block.

The optional metadata (MySQL 8 ``binlog_row_metadata``, MariaDB 10.5+) gives signedness,
charsets, names, ENUM/SET labels, primary key, geometry types, visibility and vector dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from .charsets import codec_for_collation
from .constants import ColumnType as T
from .errors import BinlogError
from .packed import read_packed_bytes, read_packed_int

# Column types whose values are numbers with a sign (MySQL's SIGNEDNESS covers exactly these).
NUMERIC_TYPES = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.NEWDECIMAL, T.FLOAT, T.DOUBLE})
# MariaDB's YEAR is a TINYINT underneath and has a SIGNEDNESS bit of its own.
MARIADB_NUMERIC_TYPES = NUMERIC_TYPES | {T.YEAR}
# Types that carry a collation in DEFAULT_CHARSET/COLUMN_CHARSET (ENUM/SET have their own lists).
# The server counts GEOMETRY (a BLOB underneath) and VECTOR here too, with the binary collation.
CHARACTER_TYPES = frozenset(
    {T.STRING, T.VAR_STRING, T.VARCHAR, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY, T.VECTOR}
)
ENUM_SET_TYPES = frozenset({T.ENUM, T.SET})
BLOB_TYPES = frozenset({T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
# MariaDB's compressed column types (VARCHAR/BLOB ... COMPRESSED), logged as their own codes.
MARIADB_BLOB_COMPRESSED = 140
MARIADB_VARCHAR_COMPRESSED = 141

# Optional metadata field types.
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12
VECTOR_DIMENSIONALITY = 13


@dataclass(slots=True)
class TableMap:
    """A decoded TABLE_MAP body. Lists are indexed by column ordinal; None means 'not logged'."""

    table_id: int
    flags: int
    schema: str
    table: str
    types: list[int]
    metas: list[int]
    nullable: list[bool]
    unsigned: list[bool] | None = None
    collations: list[int | None] | None = None
    names: list[str] | None = None
    enum_labels: list[list[str] | None] | None = None
    set_labels: list[list[str] | None] | None = None
    primary_key: list[tuple[int, int]] | None = None
    geometry_types: list[int | None] | None = None
    visible: list[bool] | None = None
    vector_dims: list[int | None] | None = None
    # Declared column types (``varchar(64)``, ``bigint(20) unsigned``) from the schema history.
    column_types: list[str] | None = None
    raw: bytes = field(default=b"", repr=False)
    # Compiled row decoders for this layout, keyed by the rows event's column bitmaps.
    decoders: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def column_count(self) -> int:
        return len(self.types)

    def layout(self) -> str:
        """Every field but the table id (and the raw body holding it), as a key: TableMaps of one
        layout decode and convert alike, whatever id the server gave the table this time."""
        return repr(tuple(getattr(self, name) for name in _LAYOUT_FIELDS))


_LAYOUT_FIELDS = tuple(f.name for f in fields(TableMap) if f.name not in ("table_id", "raw", "decoders"))


def _real_string_type(meta0: int, meta1: int) -> tuple[int, int]:
    """STRING metadata hides ENUM/SET and CHAR lengths over 255 in its first byte."""
    if (meta0 & 0x30) != 0x30:
        return meta0 | 0x30, meta1 | (((meta0 & 0x30) ^ 0x30) << 4)
    return meta0, meta1


def _read_metas(buf: bytes, pos: int, end: int, raw_types: bytes) -> tuple[list[int], list[int]]:
    types: list[int] = []
    metas: list[int] = []
    for t in raw_types:
        if t in (
            T.FLOAT,
            T.DOUBLE,
            T.BLOB,
            T.GEOMETRY,
            T.JSON,
            T.TIMESTAMP2,
            T.DATETIME2,
            T.TIME2,
            T.VECTOR,
            MARIADB_BLOB_COMPRESSED,
        ):
            meta = buf[pos]
            pos += 1
        elif t in (T.VARCHAR, T.VAR_STRING, MARIADB_VARCHAR_COMPRESSED):
            meta = buf[pos] | buf[pos + 1] << 8
            pos += 2
        elif t == T.BIT:
            meta = buf[pos] | buf[pos + 1] << 8  # low byte: bits % 8, high byte: whole bytes
            pos += 2
        elif t == T.NEWDECIMAL:
            meta = buf[pos] << 8 | buf[pos + 1]  # precision << 8 | scale
            pos += 2
        elif t in (T.STRING, T.ENUM, T.SET):
            t, meta = _real_string_type(buf[pos], buf[pos + 1])
            pos += 2
        else:
            meta = 0
        if pos > end:
            raise BinlogError("TABLE_MAP column metadata overruns its block")
        types.append(t)
        metas.append(meta)
    return types, metas


def _bits_msb(buf: bytes, pos: int, end: int, n: int) -> list[bool]:
    if pos + (n + 7) // 8 > end:
        raise BinlogError("TABLE_MAP optional bitmap truncated")
    return [bool(buf[pos + i // 8] & (0x80 >> (i % 8))) for i in range(n)]


def decode_table_map(body: bytes, post_header_len: int, mariadb: bool = False) -> TableMap:
    """Decode a TABLE_MAP body (header and checksum removed); ``mariadb`` if a MariaDB wrote it."""
    if post_header_len == 6:
        table_id = int.from_bytes(body[0:4], "little")
    else:
        table_id = int.from_bytes(body[0:6], "little")
    flags = int.from_bytes(body[post_header_len - 2 : post_header_len], "little")
    pos = post_header_len
    n = body[pos]
    schema = body[pos + 1 : pos + 1 + n].decode("utf-8")
    pos += n + 2  # length byte, name, NUL
    n = body[pos]
    table = body[pos + 1 : pos + 1 + n].decode("utf-8")
    pos += n + 2
    ncols, pos = read_packed_int(body, pos)
    raw_types = body[pos : pos + ncols]
    if len(raw_types) != ncols:
        raise BinlogError("TABLE_MAP column types truncated")
    pos += ncols
    meta_len, pos = read_packed_int(body, pos)
    meta_end = pos + meta_len
    if meta_end > len(body):
        raise BinlogError("TABLE_MAP metadata block overruns the event")
    types, metas = _read_metas(body, pos, meta_end, raw_types)
    pos = meta_end
    nullable = _bits_lsb(body, pos, ncols)
    pos += (ncols + 7) // 8
    tm = TableMap(table_id, flags, schema, table, types, metas, nullable, raw=bytes(body))
    if pos < len(body):
        _read_optional(tm, body, pos, MARIADB_NUMERIC_TYPES if mariadb else NUMERIC_TYPES)
    return tm


def _bits_lsb(buf: bytes, pos: int, n: int) -> list[bool]:
    if pos + (n + 7) // 8 > len(buf):
        raise BinlogError("bitmap truncated")
    return [bool(buf[pos + i // 8] & (1 << (i % 8))) for i in range(n)]


def _read_optional(tm: TableMap, buf: bytes, pos: int, numeric_types: frozenset[int]) -> None:
    types = tm.types
    n = len(types)
    numeric = [i for i, t in enumerate(types) if t in numeric_types]
    chars = [
        i
        for i, t in enumerate(types)
        if t in CHARACTER_TYPES or t in (MARIADB_VARCHAR_COMPRESSED, MARIADB_BLOB_COMPRESSED)
    ]
    enums = [i for i, t in enumerate(types) if t == T.ENUM]
    sets = [i for i, t in enumerate(types) if t == T.SET]
    enum_sets = [i for i, t in enumerate(types) if t in ENUM_SET_TYPES]
    geoms = [i for i, t in enumerate(types) if t == T.GEOMETRY]
    vectors = [i for i, t in enumerate(types) if t == T.VECTOR]
    end_all = len(buf)
    while pos < end_all:
        kind = buf[pos]
        length, pos = read_packed_int(buf, pos + 1)
        end = pos + length
        if end > end_all:
            raise BinlogError(f"TABLE_MAP optional metadata field {kind} overruns the event")
        if kind == SIGNEDNESS:
            flags = _bits_msb(buf, pos, end, len(numeric))
            tm.unsigned = [False] * n
            for i, u in zip(numeric, flags, strict=True):
                tm.unsigned[i] = u and types[i] != T.YEAR  # MariaDB's YEAR bit says nothing useful
        elif kind in (DEFAULT_CHARSET, ENUM_AND_SET_DEFAULT_CHARSET):
            cols = chars if kind == DEFAULT_CHARSET else enum_sets
            default, p = read_packed_int(buf, pos)
            per = {}
            while p < end:
                idx, p = read_packed_int(buf, p)
                coll, p = read_packed_int(buf, p)
                if idx >= len(cols):
                    raise BinlogError("TABLE_MAP charset exception names a column that does not exist")
                per[cols[idx]] = coll
            _set_collations(tm, {c: per.get(c, default) for c in cols})
        elif kind in (COLUMN_CHARSET, ENUM_AND_SET_COLUMN_CHARSET):
            cols = chars if kind == COLUMN_CHARSET else enum_sets
            values = _packed_list(buf, pos, end)
            if len(values) != len(cols):
                raise BinlogError("TABLE_MAP column charset count does not match the character columns")
            _set_collations(tm, dict(zip(cols, values, strict=True)))
        elif kind == COLUMN_NAME:
            names = []
            p = pos
            while p < end:
                raw, p = read_packed_bytes(buf, p)
                names.append(raw.decode("utf-8"))
            if len(names) != n:
                raise BinlogError(f"TABLE_MAP has {len(names)} column names for {n} columns")
            tm.names = names
        elif kind in (SET_STR_VALUE, ENUM_STR_VALUE):
            cols = sets if kind == SET_STR_VALUE else enums
            lists = []
            p = pos
            while p < end:
                count, p = read_packed_int(buf, p)
                labels = []
                for _ in range(count):
                    raw, p = read_packed_bytes(buf, p)
                    labels.append(raw)
                lists.append(labels)
            if len(lists) != len(cols):
                raise BinlogError("TABLE_MAP label lists do not match the ENUM/SET columns")
            target: list[list[str] | None] = [None] * n
            for i, labels in zip(cols, lists, strict=True):
                target[i] = labels
            if kind == SET_STR_VALUE:
                tm.set_labels = target
            else:
                tm.enum_labels = target
        elif kind == GEOMETRY_TYPE:
            tm.geometry_types = _spread(n, geoms, _packed_list(buf, pos, end))
        elif kind == SIMPLE_PRIMARY_KEY:
            tm.primary_key = [(i, 0) for i in _packed_list(buf, pos, end)]
        elif kind == PRIMARY_KEY_WITH_PREFIX:
            vals = _packed_list(buf, pos, end)
            tm.primary_key = list(zip(vals[0::2], vals[1::2], strict=True))
        elif kind == COLUMN_VISIBILITY:
            tm.visible = _bits_msb(buf, pos, end, n)
        elif kind == VECTOR_DIMENSIONALITY:
            tm.vector_dims = _spread(n, vectors, _packed_list(buf, pos, end))
        # Unknown kinds are future additions the server marks as optional: skipping them loses
        # nothing the row images need, because row decoding depends only on types and metas.
        pos = end
    # Labels are logged in their column's charset, whose field comes after theirs.
    for labels in (tm.enum_labels, tm.set_labels):
        for i, raw in enumerate(labels or ()):
            if raw is not None:
                coll = tm.collations[i] if tm.collations else None
                codec = codec_for_collation(coll) if coll is not None else "utf-8"
                labels[i] = [b.decode(codec or "utf-8") for b in raw]


def _packed_list(buf: bytes, pos: int, end: int) -> list[int]:
    out = []
    while pos < end:
        v, pos = read_packed_int(buf, pos)
        out.append(v)
    if pos != end:
        raise BinlogError("TABLE_MAP optional metadata field overruns its length")
    return out


def _spread(n: int, cols: list[int], values: list[int]) -> list[int | None]:
    if len(values) != len(cols):
        raise BinlogError("TABLE_MAP optional metadata count does not match its columns")
    out: list[int | None] = [None] * n
    for i, v in zip(cols, values, strict=True):
        out[i] = v
    return out


def _set_collations(tm: TableMap, per_column: dict[int, int]) -> None:
    if tm.collations is None:
        tm.collations = [None] * len(tm.types)
    for i, c in per_column.items():
        tm.collations[i] = c
