"""A binlog column as a Canal ``Column``: its sqlType, value text and NULL sqlType (Canal's
``RowsLogBuffer`` + ``LogEventConvert`` rules, ``docs/compatibility.md`` "Values and sqlType").

Each column of a table gets a :class:`ColumnRule`: a declarative rule that names its kind and
parameters (sqlType, unsigned widening, text format) and carries ``convert(value) -> (sqlType,
text)``. The row code generator (:mod:`pycanal.parse.rowcode`) specialises its generated code on
the kind and parameters; every other path (a partial row image, ENUM/SET/JSON values, the tests'
protobuf oracle) calls ``convert``. :class:`ColumnRules` makes the rules of a ``TableMap`` for one
set of converter options (time zone, ENUM/SET as index or label).

The value texts (``java_double_text``, ``decimal_text``) and the TIMESTAMP time zone are here too:
the QUERY entries of USER_VAR events print numbers the same way.
"""

from __future__ import annotations

import calendar
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from pycanal.binlog.constants import ColumnType as T
from pycanal.binlog.rows import JsonPatch
from pycanal.binlog.tablemap import TableMap
from pycanal.binlog.typenames import BLOB_FAMILY, VARCHAR_FAMILY, is_binary, mysql_column_type
from pycanal.parse.canonical import json_value

__all__ = [
    "ColumnRule",
    "ColumnRules",
    "EntryColumn",
    "JavaTypes",
    "Kind",
    "Text",
    "decimal_text",
    "java_double_text",
]


class JavaTypes:
    """The ``java.sql.Types`` codes Canal puts in ``Column.sqlType``."""

    BIT = -7
    TINYINT = -6
    BIGINT = -5
    LONGVARBINARY = -4
    VARBINARY = -3
    BINARY = -2
    CHAR = 1
    DECIMAL = 3
    INTEGER = 4
    SMALLINT = 5
    REAL = 7
    DOUBLE = 8
    VARCHAR = 12
    DATE = 91
    TIME = 92
    TIMESTAMP = 93
    OTHER = 1111
    BLOB = 2004
    CLOB = 2005


J = JavaTypes


# ------------------------------------------------------------------------------ value texts
def java_double_text(x: float) -> str:
    """``x`` laid out like Java's ``Double.toString`` (shortest round-trip digits): plain notation
    with at least one fraction digit for 1e-3 <= |x| < 1e7, else ``d.dddE[-]n``."""
    if x != x:
        return "NaN"
    if x == float("inf"):
        return "Infinity"
    if x == float("-inf"):
        return "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits))
    point = len(ds) + exp  # the decimal point sits after this many digits of ds
    ds = ds.rstrip("0")
    prefix = "-" if sign else ""
    a = abs(x)
    if 1e-3 <= a < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{ds}"
        if point >= len(ds):
            return f"{prefix}{ds}{'0' * (point - len(ds))}.0"
        return f"{prefix}{ds[:point]}.{ds[point:]}"
    return f"{prefix}{ds[0]}.{ds[1:] or '0'}E{point - 1}"


def decimal_text(v: Decimal) -> str:
    """A DECIMAL as Java's ``BigDecimal.toPlainString``: every scale digit, no negative zero."""
    text = f"{v:f}"
    if text.startswith("-") and not v:
        return text[1:]
    return text


def _latin1(v: bytes) -> str:
    return v.decode("latin-1")


def _as_is(v: str) -> str:
    return v


def _year(v: int) -> str:
    return "0000" if v == 0 else str(v)


class _Timestamps:
    """TIMESTAMP text (the decoder's UTC text) -> the same instant in ``zone``."""

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self.convert = lru_cache(maxsize=4096)(self._convert)

    def _convert(self, seconds: str) -> str:
        if seconds.startswith("0000-00-00"):
            return seconds
        epoch = calendar.timegm(
            (
                int(seconds[0:4]),
                int(seconds[5:7]),
                int(seconds[8:10]),
                int(seconds[11:13]),
                int(seconds[14:16]),
                int(seconds[17:19]),
            )
        )
        return datetime.fromtimestamp(epoch, self.zone).strftime("%Y-%m-%d %H:%M:%S")

    def text(self, v: str) -> str:
        return self.convert(v[:19]) + v[19:]


def _zone(timezone: str | tzinfo | None) -> tzinfo | None:
    """``None`` for UTC (the decoder's text is already UTC), else a tzinfo."""
    if timezone is None:
        return None
    if isinstance(timezone, str):
        if timezone.upper() in ("UTC", "Z", "+00:00"):
            return None
        return ZoneInfo(timezone)
    if timezone is UTC or getattr(timezone, "key", None) == "UTC":
        return None
    return timezone


# ------------------------------------------------------------------------------ rules
class Kind(enum.Enum):
    """What a column's rule does with a value."""

    INTEGER = "integer"  # decimal text, sqlType ``sql_type``
    UNSIGNED = "unsigned"  # decimal text, sqlType ``widened`` from ``limit`` up, else ``sql_type``
    FORMATTED = "formatted"  # sqlType ``sql_type``, the text in format ``text``
    CHARS = "chars"  # a str is the text (sqlType ``sql_type``), bytes their ISO-8859-1 text (BLOB)
    ENUM = "enum"  # index or label (``convert``)
    SET = "set"  # bitmask or labels (``convert``)
    JSON = "json"  # JSON text, or a partial update's patch (``convert``)


class Text(enum.Enum):
    """The text format of a FORMATTED rule."""

    STR = "str"  # str(value)
    AS_IS = "as_is"  # the decoder's text itself (a TIMESTAMP in UTC)
    DECIMAL = "decimal"  # decimal_text
    DOUBLE = "double"  # java_double_text
    ZONED = "zoned"  # a TIMESTAMP moved to the configured zone
    YEAR = "year"  # 0000 for the zero year
    LATIN1 = "latin1"  # bytes as ISO-8859-1 text


@dataclass(frozen=True, slots=True, eq=False)
class ColumnRule:
    """One column's value rule (see the module notes). ``convert(value) -> (sqlType, text)`` for a
    non-NULL value; ``null_type`` is the sqlType of NULL (no unsigned widening; a SET's is BLOB);
    ``format`` is a FORMATTED rule's text function."""

    kind: Kind
    sql_type: int
    null_type: int
    convert: Callable[[Any], tuple[int, str]]
    widened: int = 0
    limit: int = 0
    text: Text | None = None
    format: Callable[[Any], str] | None = None


def _integer(sql_type: int) -> ColumnRule:
    return ColumnRule(Kind.INTEGER, sql_type, sql_type, lambda v: (sql_type, str(v)))


def _unsigned(sql_type: int, widened: int, limit: int) -> ColumnRule:
    return ColumnRule(
        Kind.UNSIGNED,
        sql_type,
        sql_type,
        lambda v: (widened if v >= limit else sql_type, str(v)),
        widened=widened,
        limit=limit,
    )


def _formatted(sql_type: int, text: Text, fmt: Callable[[Any], str]) -> ColumnRule:
    return ColumnRule(Kind.FORMATTED, sql_type, sql_type, lambda v: (sql_type, fmt(v)), text=text, format=fmt)


_FORMATS: dict[Text, Callable[[Any], str]] = {
    Text.STR: str,
    Text.DECIMAL: decimal_text,
    Text.DOUBLE: java_double_text,
    Text.YEAR: _year,
    Text.LATIN1: _latin1,
}


def _chars(text_type: int, null_type: int) -> ColumnRule:
    def convert(v: Any) -> tuple[int, str]:
        if type(v) is bytes:
            return J.BLOB, v.decode("latin-1")
        return text_type, v

    return ColumnRule(Kind.CHARS, text_type, null_type, convert)


def _json(v: Any) -> tuple[int, str]:
    if isinstance(v, JsonPatch):
        return J.VARCHAR, json_value(v)
    return J.VARCHAR, str(v)


def _enum(labels: list[str] | None, as_labels: bool) -> ColumnRule:
    if as_labels and labels is not None:
        return ColumnRule(
            Kind.ENUM, J.CHAR, J.CHAR, lambda v: (J.CHAR, v) if type(v) is str else (J.INTEGER, str(v))
        )
    index = {label: n for n, label in reversed(list(enumerate(labels or (), 1)))}
    index.setdefault("", 0)

    def convert(v: Any) -> tuple[int, str]:
        if type(v) is str:
            return J.INTEGER, str(index[v])
        return J.INTEGER, str(v)

    return ColumnRule(Kind.ENUM, J.INTEGER, J.INTEGER, convert)


def _set(labels: list[str] | None, as_labels: bool) -> ColumnRule:
    if as_labels and labels is not None:
        return ColumnRule(
            Kind.SET, J.CHAR, J.CHAR, lambda v: (J.CHAR, ",".join(v)) if type(v) is list else (J.BIT, str(v))
        )
    bits = {label: 1 << n for n, label in reversed(list(enumerate(labels or ())))}

    def convert(v: Any) -> tuple[int, str]:
        if type(v) is list:
            mask = 0
            for member in v:
                mask |= bits[member]
            return J.BIT, str(mask)
        return J.BIT, str(v)

    # Canal: a NULL SET maps through BINARY to BLOB.
    return ColumnRule(Kind.SET, J.BIT, J.BLOB, convert)


_INT_TYPES = {
    # type: (sqlType, widened sqlType, 2^(bits-1))
    T.TINY: (J.TINYINT, J.SMALLINT, 1 << 7),
    T.SHORT: (J.SMALLINT, J.INTEGER, 1 << 15),
    T.INT24: (J.INTEGER, J.INTEGER, 1 << 23),
    T.LONG: (J.INTEGER, J.BIGINT, 1 << 31),
    T.LONGLONG: (J.BIGINT, J.DECIMAL, 1 << 63),
}
# type: (sqlType, text format) of the FORMATTED columns whose rule depends on no option
_FIXED_TYPES = {
    T.FLOAT: (J.REAL, Text.DOUBLE),
    T.DOUBLE: (J.DOUBLE, Text.DOUBLE),
    T.NEWDECIMAL: (J.DECIMAL, Text.DECIMAL),
    T.DECIMAL: (J.DECIMAL, Text.DECIMAL),
    T.BIT: (J.BIT, Text.STR),
    T.DATETIME: (J.TIMESTAMP, Text.STR),
    T.DATETIME2: (J.TIMESTAMP, Text.STR),
    T.TIME: (J.TIME, Text.STR),
    T.TIME2: (J.TIME, Text.STR),
    T.DATE: (J.DATE, Text.STR),
    T.NEWDATE: (J.DATE, Text.STR),
    T.YEAR: (J.VARCHAR, Text.YEAR),
    T.GEOMETRY: (J.BLOB, Text.LATIN1),
    T.VECTOR: (J.BLOB, Text.LATIN1),
}
_TEXT_NAME = re.compile(r"^\s*(tiny|medium|long)?text\b", re.I)


class EntryColumn(NamedTuple):
    """One column of a table's entries: the Column fields that never change, and its rule."""

    index: int
    name: str
    is_key: bool
    mysql_type: str
    rule: ColumnRule


class ColumnRules:
    """The rules of a converter's options: ``timezone`` renders TIMESTAMP columns (a name or
    tzinfo; UTC by default), ``enum_set`` is ``"index"`` (Canal: ENUM index, SET bitmask) or
    ``"label"`` (the labels, where the TableMap knows them). ``key`` tells the options apart
    where per-table code is cached on a ``TableMap``."""

    def __init__(self, timezone: str | tzinfo | None = "UTC", enum_set: str = "index") -> None:
        if enum_set not in ("index", "label"):
            raise ValueError(f"enum_set must be 'index' or 'label', not {enum_set!r}")
        self.key = (str(timezone), enum_set)
        self.enum_labels = enum_set == "label"
        zone = _zone(timezone)
        if zone is None:
            self._timestamp = _formatted(J.TIMESTAMP, Text.AS_IS, _as_is)
        else:
            self._timestamp = _formatted(J.TIMESTAMP, Text.ZONED, _Timestamps(zone).text)

    def plan(self, tm: TableMap) -> list[EntryColumn]:
        """Per column: index, name (``@n`` when unknown), isKey, mysqlType and rule."""
        names = tm.names
        keys = {i for i, _ in tm.primary_key or ()}
        declared = tm.column_types
        return [
            EntryColumn(
                i,
                names[i] if names else f"@{i + 1}",
                i in keys,
                declared[i] if declared else mysql_column_type(tm, i),
                self.rule(tm, i, declared[i] if declared else None),
            )
            for i in range(tm.column_count)
        ]

    def rule(self, tm: TableMap, i: int, declared: str | None) -> ColumnRule:
        """Column ``i``'s rule (``declared``: its type text from the schema history, if known)."""
        t = tm.types[i]
        if t in _INT_TYPES:
            base, widened, limit = _INT_TYPES[t]
            if tm.unsigned and tm.unsigned[i]:
                return _unsigned(base, widened, limit)
            return _integer(base)
        if t in _FIXED_TYPES:
            sql_type, text = _FIXED_TYPES[t]
            return _formatted(sql_type, text, _FORMATS[text])
        if t in (T.TIMESTAMP, T.TIMESTAMP2):
            return self._timestamp
        if t == T.ENUM:
            return _enum(tm.enum_labels[i] if tm.enum_labels else None, self.enum_labels)
        if t == T.SET:
            return _set(tm.set_labels[i] if tm.set_labels else None, self.enum_labels)
        if t in VARCHAR_FAMILY or t == T.STRING:
            text_type = J.VARCHAR if t in VARCHAR_FAMILY else J.CHAR
            return _chars(text_type, J.BLOB if is_binary(tm, i, declared) else text_type)
        if t in BLOB_FAMILY:
            if declared:
                is_text = _TEXT_NAME.match(declared) is not None
            else:
                is_text = is_binary(tm, i, None) is False
            return _chars(J.CLOB, J.CLOB if is_text else J.BLOB)
        if t == T.JSON:
            return ColumnRule(Kind.JSON, J.VARCHAR, J.VARCHAR, _json)
        return _formatted(J.OTHER, Text.STR, str)
