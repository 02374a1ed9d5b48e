"""MySQL/MariaDB column types -> Arrow (and so Delta and Spark) types, and canonical values -> Arrow.

The values come from the change rows' JSON images (``pycanal.binlog.canonical`` forms, parsed
with ``json.loads``). The mapping (docs/spark.md has the table) keeps every value exact:

* integers widen where unsigned needs it (``INT UNSIGNED`` -> int64, ``BIGINT UNSIGNED`` and
  ``BIT(64)`` -> decimal(20,0)); ``DECIMAL(p,s)`` -> decimal(p,s), or its exact text when
  p > 38 (Spark's limit); FLOAT -> float32, DOUBLE -> float64;
* DATE -> date32, DATETIME -> timestamp without zone (Spark ``timestamp_ntz``), TIMESTAMP ->
  timestamp UTC; TIME (range +-838:59:59) and zero dates have no Arrow type: TIME is its text,
  zero dates are an error or null (``zero_dates``);
* text -> string, binary -> binary, ENUM -> string, SET -> list<string>, JSON -> string;
  geometry, VECTOR, INET4/INET6/UUID -> binary (the stored bytes).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from pycanal.parse.ddl import DdlParseError, tokenize
from pycanal.parse.meta import Column

__all__ = ["ColumnTypeError", "arrow_field", "column_converter", "default_value"]

_INTS = {
    # data type: (signed, unsigned)
    "tinyint": (pa.int8(), pa.int16()),
    "smallint": (pa.int16(), pa.int32()),
    "mediumint": (pa.int32(), pa.int32()),
    "int": (pa.int32(), pa.int64()),
    "bigint": (pa.int64(), pa.decimal128(20, 0)),
}
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point",
                     "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                     "geometrycollection", "vector", "inet4", "inet6", "uuid"})  # fmt: skip
_PARAMS = re.compile(r"^\w+\((\d+)(?:,(\d+))?\)")
# Characters Spark does not allow in Parquet/Delta column names.
_BAD_NAME = re.compile(r"[ ,;{}()\n\t=]")


class ColumnTypeError(ValueError):
    """A column or value with no faithful Arrow form; ``index``: the value's place in its list."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


def _params(col: Column) -> tuple[int | None, int | None]:
    m = _PARAMS.match(col.column_type)
    if m is None:
        return None, None
    return int(m.group(1)), int(m.group(2)) if m.group(2) is not None else None


def arrow_type(col: Column) -> pa.DataType:
    dt = col.data_type.lower()
    if dt in _INTS:
        return _INTS[dt][1 if col.unsigned else 0]
    if dt == "decimal":
        p, s = _params(col)
        p, s = p or 10, s or 0
        return pa.decimal128(p, s) if p <= 38 else pa.string()
    if dt == "float":
        return pa.float32()
    if dt == "double":
        return pa.float64()
    if dt == "bit":
        p, _ = _params(col)
        return pa.decimal128(20, 0) if (p or 1) > 63 else pa.int64()
    if dt == "year":
        return pa.int16()
    if dt == "date":
        return pa.date32()
    if dt == "datetime":
        return pa.timestamp("us")
    if dt == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if dt in _TEXT or dt in ("time", "json", "enum"):
        return pa.string()
    if dt == "set":
        return pa.list_(pa.string())
    if dt in _BINARY:
        return pa.binary()
    raise ColumnTypeError(f"column `{col.name}`: no Arrow type for MySQL type {col.column_type!r}")


def arrow_field(col: Column) -> pa.Field:
    """The column's Arrow field (always nullable: the target does not enforce NOT NULL)."""
    if _BAD_NAME.search(col.name):
        raise ColumnTypeError(
            f"column name {col.name!r} has a character Spark does not allow in Parquet/Delta names (' ,;{{}}()=' "
            "or a tab/newline)"
        )
    return pa.field(col.name, arrow_type(col))


# ------------------------------------------------------------------------------ values
def _zero_date(text: str) -> bool:
    """A zero date or a date with a zero month or day (MariaDB allows them outside strict modes)."""
    return text[5:7] == "00" or text[8:10] == "00" or text.startswith("0000")


def _temporal(col: Column, target: pa.DataType, zero_dates: str) -> Callable[[list], pa.Array]:
    via = pa.timestamp("us") if pa.types.is_timestamp(target) else target

    def build(values: list) -> pa.Array:
        out = values
        zero = [i for i, v in enumerate(values) if v is not None and _zero_date(v)]
        if zero:
            if zero_dates != "null":
                raise ColumnTypeError(
                    f"column `{col.name}` ({col.column_type}) holds the zero date {values[zero[0]]!r}, which "
                    "Arrow/Spark cannot hold (apply with zero_dates='null' to store NULL instead)",
                    zero[0],
                )
            out = [None if v is not None and _zero_date(v) else v for v in values]
        return pa.array(out, pa.string()).cast(via).cast(target)

    return build


def _binary(col: Column) -> Callable[[list], pa.Array]:
    def conv(i: int, v: Any) -> bytes | None:
        if v is None:
            return None
        if type(v) is dict and "base64" in v:
            return base64.b64decode(v["base64"])
        raise ColumnTypeError(
            f"column `{col.name}` ({col.column_type}): {json.dumps(v)[:100]} is not a binary value", i
        )

    return lambda values: pa.array([conv(i, v) for i, v in enumerate(values)], pa.binary())


def _text(col: Column) -> Callable[[list], pa.Array]:
    def build(values: list) -> pa.Array:
        for i, v in enumerate(values):
            if v is not None and type(v) is not str:
                raise ColumnTypeError(
                    f"column `{col.name}` ({col.column_type}): {json.dumps(v)[:100]} is not text (bytes the "
                    "decoder could not read in the column's charset)",
                    i,
                )
        return pa.array(values, pa.string())

    return build


def _labels(col: Column) -> list[str]:
    if col.labels is None:
        raise ColumnTypeError(f"column `{col.name}` ({col.column_type}): the schema has no ENUM/SET labels")
    return col.labels


def _enum(col: Column) -> Callable[[list], pa.Array]:
    def conv(v: Any) -> str | None:
        if v is None or type(v) is str:
            return v
        return ("", *_labels(col))[v]  # an index: the binlog had no labels

    return lambda values: pa.array([conv(v) for v in values], pa.string())


def _set(col: Column) -> Callable[[list], pa.Array]:
    def conv(v: Any) -> list[str] | None:
        if v is None or type(v) is list:
            return v
        if type(v) is str:
            return v.split(",") if v else []
        labels = _labels(col)  # a bit mask: the binlog had no labels
        return [m for bit, m in enumerate(labels) if v >> bit & 1]

    return lambda values: pa.array([conv(v) for v in values], pa.list_(pa.string()))


def _json(v: Any) -> str | None:
    if v is None or type(v) is str:
        return v  # MariaDB's JSON is LONGTEXT: the text as stored
    return json.dumps(v, ensure_ascii=False)  # MySQL's native JSON: the document, re-serialised


def column_converter(col: Column, zero_dates: str = "error") -> Callable[[list], pa.Array]:
    """``build(values) -> Arrow array`` for one column; ``values`` are parsed canonical values."""
    target = arrow_type(col)
    dt = col.data_type.lower()
    if dt == "date" or dt == "datetime" or dt == "timestamp":
        return _temporal(col, target, zero_dates)
    if dt == "decimal":
        return lambda values: pa.array(values, pa.string()).cast(target)
    if pa.types.is_decimal(target):  # BIGINT UNSIGNED, BIT(64)
        return lambda values: pa.array(values, pa.uint64()).cast(target)
    if dt in _TEXT or dt == "time":
        return _text(col)
    if dt == "json":
        return lambda values: pa.array([_json(v) for v in values], pa.string())
    if dt == "enum":
        return _enum(col)
    if dt == "set":
        return _set(col)
    if dt in _BINARY:
        return _binary(col)
    return lambda values: pa.array(values, target)  # integers, YEAR, BIT, FLOAT, DOUBLE


# ------------------------------------------------------------------------------ defaults
_UNKNOWN = object()


def default_value(col: Column) -> Any:
    """The value existing rows get when the column is added (the canonical form), or raises
    ``ColumnTypeError`` when only the server knows it (an expression such as ``current_timestamp()``)."""
    dt = col.data_type.lower()
    text = col.default
    if text is None:
        if col.nullable:
            return None
        value = _implicit_default(col, dt)
    elif text.upper() == "NULL":
        return None
    else:
        value = _literal(text, dt, col)
    if value is _UNKNOWN:
        raise ColumnTypeError(
            f"column `{col.name}` ({col.column_type}) has the default {text!r}, which only the server can compute"
        )
    return value


def _implicit_default(col: Column, dt: str) -> Any:
    """MariaDB's value for a NOT NULL column without a DEFAULT clause."""
    if dt in _INTS or dt in ("bit", "year", "float", "double"):
        return 0
    if dt == "decimal":
        return "0"
    if dt in _TEXT:
        return ""
    if dt in ("binary",):
        n, _ = _params(col)
        return {"base64": base64.b64encode(bytes(n or 1)).decode()}
    if dt in ("varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return {"base64": ""}
    if dt == "enum":
        return _labels(col)[0]
    if dt == "set":
        return []
    if dt == "date":
        return "0000-00-00"
    if dt == "datetime":
        return "0000-00-00 00:00:00"
    if dt == "time":
        return "00:00:00"
    return _UNKNOWN


def _literal(text: str, dt: str, col: Column) -> Any:
    """A literal DEFAULT as ``information_schema`` shows it (``'abc'``, ``-5``, ``1.50``, ``b'101'``)."""
    try:
        toks = tokenize(text)
    except DdlParseError:
        return _UNKNOWN
    sign = ""
    if len(toks) == 2 and toks[0].value == "-" and toks[1].kind == "number":
        sign, toks = "-", toks[1:]
    if len(toks) != 1:
        return _UNKNOWN
    tok = toks[0]
    if tok.kind == "bit":
        return int(tok.value, 2)
    if tok.kind == "string":
        v = tok.value
        if dt in _BINARY:
            return {"base64": base64.b64encode(v.encode("utf-8")).decode()}
        if dt == "set":
            return v.split(",") if v else []
        if dt not in _INTS and dt not in ("decimal", "float", "double", "year", "bit"):
            return v
    elif tok.kind == "number":
        v = sign + tok.value
    else:
        return _UNKNOWN
    try:
        number = Decimal(int(v, 0)) if v.lstrip("-")[:2].lower() in ("0x", "0b") else Decimal(v)
    except (ValueError, InvalidOperation):
        return _UNKNOWN
    if dt == "decimal":
        return f"{number:f}"
    if dt in ("float", "double"):
        return float(number)
    if number != number.to_integral_value():
        return _UNKNOWN
    return int(number)
