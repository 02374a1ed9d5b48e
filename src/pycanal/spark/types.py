"""MySQL/MariaDB column types -> Arrow (and so Delta and Spark) types, and canonical values -> Arrow.

The values come from the change rows' JSON images (``pycanal.parse.canonical`` forms), read by
pyarrow's JSON reader (``read_images``) or parsed with ``json.loads`` where that reader could read
them otherwise. The mapping (docs/spark.md has the table) keeps every value exact:

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
import pyarrow.compute as pc
import pyarrow.json as pj

from pycanal.parse.ddl import DdlParseError, tokenize
from pycanal.parse.meta import Column

__all__ = [
    "ArrowValues",
    "ColumnTypeError",
    "InexactRead",
    "array_converter",
    "arrow_field",
    "arrow_type",
    "column_converter",
    "default_value",
    "json_type",
    "read_images",
]

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
# A column's values come parsed by ``json.loads`` (Python values: ``column_converter``) or read by
# pyarrow's JSON reader (an array of the column's ``json_type``: ``array_converter``, ``read_images``);
# where both convert alike, the first builds the array of the second.
_TEMPORAL = frozenset({"date", "datetime", "timestamp"})
_BASE64 = pa.struct([("base64", pa.string())])
ArrowValues = pa.Array | pa.ChunkedArray  # a column's values, in one piece or chunks


def json_type(col: Column) -> pa.DataType:
    """The type ``read_images`` reads the column's canonical JSON values as."""
    target = arrow_type(col)
    dt = col.data_type.lower()
    if dt == "set":
        return pa.list_(pa.string())
    if dt in _BINARY:
        return _BASE64
    if pa.types.is_decimal(target) and dt != "decimal":  # BIGINT UNSIGNED, BIT(64)
        return pa.uint64()
    if pa.types.is_integer(target):
        return pa.int64()
    if pa.types.is_floating(target):
        return pa.float64()  # FLOAT too: json.loads gives doubles, narrowed like pa.array does
    return pa.string()  # DECIMAL, temporal, text


def array_converter(col: Column, zero_dates: str = "error") -> Callable[[ArrowValues], ArrowValues]:
    """``build(values) -> Arrow array`` for one column; ``values`` have the column's ``json_type``."""
    target = arrow_type(col)
    dt = col.data_type.lower()
    if dt in _TEMPORAL:
        return _temporal(col, target, zero_dates)
    if dt in _BINARY:
        return _from_base64
    return lambda values: values.cast(target)  # numbers narrowed or widened, DECIMAL parsed, text as is


def _temporal(col: Column, target: pa.DataType, zero_dates: str) -> Callable[[ArrowValues], ArrowValues]:
    via = pa.timestamp("us") if pa.types.is_timestamp(target) else target

    def build(texts: ArrowValues) -> ArrowValues:
        # A zero date or a date with a zero month or day (MariaDB allows them outside strict modes).
        zero = pc.or_(
            pc.or_(
                pc.equal(pc.utf8_slice_codeunits(texts, 5, 7), "00"),
                pc.equal(pc.utf8_slice_codeunits(texts, 8, 10), "00"),
            ),
            pc.starts_with(texts, "0000"),
        ).fill_null(False)
        if pc.any(zero).as_py():
            if zero_dates != "null":
                first = pc.index(zero, True).as_py()
                raise ColumnTypeError(
                    f"column `{col.name}` ({col.column_type}) holds the zero date {texts[first].as_py()!r}, "
                    "which Arrow/Spark cannot hold (apply with zero_dates='null' to store NULL instead)",
                    first,
                )
            texts = pc.if_else(zero, pa.scalar(None, pa.string()), texts)
        return texts.cast(via).cast(target)

    return build


def _from_base64(values: ArrowValues) -> pa.Array:
    texts = pc.struct_field(values, [0])
    return pa.array([None if t is None else base64.b64decode(t) for t in texts.to_pylist()], pa.binary())


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
    if dt in _TEMPORAL or dt == "decimal" or pa.types.is_decimal(target):
        build, form = array_converter(col, zero_dates), json_type(col)
        return lambda values: build(pa.array(values, form))
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


# ------------------------------------------------------------------------------ JSON images
class InexactRead(ValueError):
    """Images that pyarrow's JSON reader might read otherwise than ``json.loads``."""


_BLOCK = 1 << 20  # the reader's default: blocks for its threads
# Names whose `"<name>":` in an image's text can only be that key: they need no escapes, and have
# no character that could end another string or value there (`"` `:` `[` `]`; `,` `{` `}` and blanks
# arrow_field refuses).
_PLAIN_NAME = re.compile(r'[^"\\:\[\]\x00-\x1f]+')
_WS = r"[ \t\n\r]*"
_FLOAT_LITERAL = (
    rf"{_WS}:{_WS}(NaN|-?Infinity|-?(0|[1-9][0-9]*)(\.[0-9]+([eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)){_WS}[,}}]"
)
_NULL_LITERAL = rf"{_WS}:{_WS}null"


def read_images(texts: pa.Array, columns: list[Column], *, complete: bool = False) -> pa.Table:
    """Row images (JSON object texts, one per row) read by pyarrow's JSON reader, a ``json_type``
    column per column: the values ``json.loads`` gives, or ``InexactRead`` or an Arrow error where
    they could differ. ``complete``: each image must hold every column (the reader gives null for
    a missing one)."""
    schema = pa.schema([pa.field(c.name, json_type(c)) for c in columns])
    if len(texts) == 0:
        return schema.empty_table()
    # A text per line. The reader takes several objects on a line and an object across lines, and
    # crashes on a first line `null`; with each line '{' ... '}' (a '}' and then the next line's '{'
    # cannot be inside an object), one row per line means one object per line, all of it.
    if (
        texts.null_count
        or not pc.all(pc.starts_with(texts, "{")).as_py()
        or not pc.all(pc.ends_with(texts, "}")).as_py()
        or _has_line_feed(texts)
    ):
        raise InexactRead("not one JSON object per text")
    texts.validate(full=True)  # UTF-8, which the reader does not check
    lines = pc.binary_join_element_wise(texts, "", "\n")  # a new array: its data starts at 0
    sizes = pc.binary_length(lines)
    data = lines.buffers()[2][: pc.sum(sizes).as_py()]
    block = max(_BLOCK, pc.max(sizes).as_py())
    read = pj.read_json(
        pa.BufferReader(data),
        read_options=pj.ReadOptions(block_size=block),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
    )
    if read.num_rows != len(texts):
        raise InexactRead("not one JSON object per text")
    for col in columns:
        values = read.column(col.name)
        if values.type == _BASE64 and pc.struct_field(values, [0]).null_count != values.null_count:
            raise InexactRead(f"column `{col.name}`: a binary value without its base64 text")
        if pa.types.is_floating(values.type):
            _check_floats(texts, columns, col, values)
        if complete and values.null_count:
            if not _found(texts.filter(values.is_null().combine_chunks()), columns, col, _NULL_LITERAL):
                raise InexactRead(f"an image without column `{col.name}`")
    return read


def _has_line_feed(texts: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a text (string or large_string, no nulls) holds a line feed: a find over the
    bytes of the values (pc.match_substring took 30 times longer)."""
    for chunk in texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]:
        if len(chunk):
            width = 8 if pa.types.is_large_string(chunk.type) else 4
            offsets = chunk.buffers()[1]
            first, last = (
                int.from_bytes(offsets[i * width : (i + 1) * width], "little", signed=True)
                for i in (chunk.offset, chunk.offset + len(chunk))
            )
            if chunk.buffers()[2][first:last].to_pybytes().find(b"\n") >= 0:
                return True
    return False


def _check_floats(texts: pa.Array, columns: list[Column], col: Column, values: ArrowValues) -> None:
    """``json.loads`` reads an integer literal as an int, which pa.array turns into a float only up
    to 2**53 (2**24 for FLOAT) and without the sign of -0; the reader also takes Inf and -NaN, which
    ``json.loads`` refuses. A value that could come from such a literal must show a float literal."""
    limit = 2.0**24 if arrow_type(col) == pa.float32() else 2.0**53
    odd = pc.or_(
        pc.or_(pc.invert(pc.is_finite(values)), pc.greater_equal(pc.abs(values), limit)),
        pc.and_(pc.equal(values, 0), pc.less(pc.divide(1.0, values), 0)),  # -0
    ).fill_null(False)
    if pc.any(odd).as_py() and not _found(texts.filter(odd.combine_chunks()), columns, col, _FLOAT_LITERAL):
        raise InexactRead(f"column `{col.name}`: a float that may come from an integer literal")


def _found(texts: pa.Array, columns: list[Column], col: Column, value: str) -> bool:
    """Whether each text has ``"<col>"`` followed by ``value`` (a regular expression). For texts
    the reader took with these columns, so their only keys are the columns' names (and ``base64``
    in a binary value, whose value is text): with plain names, what is found is the column."""
    if not all(_PLAIN_NAME.fullmatch(c.name) for c in columns):
        return False
    return pc.all(pc.match_substring_regex(texts, '"' + re.escape(col.name) + '"' + value)).as_py()


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
