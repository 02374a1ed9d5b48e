"""MySQL binary JSON (the JSON column's storage and binlog format) and partial-update JSON diffs.

A JSON column reaches the binlog as MySQL's binary encoding (``sql-common/json_binary.cc``),
and with ``binlog_row_value_options=PARTIAL_JSON`` an UPDATE may log only a list of
JSON_SET/JSON_REPLACE/JSON_REMOVE-style diffs (``sql-common/json_diff.cc``). This module turns
both into plain Python trees and prints trees back as MySQL's JSON text, so that CDC output
matches what ``SELECT json_col`` shows on the source.

Binary layout, all integers little-endian::

    value      ::= type-byte payload
    object     ::= count size key-entry* value-entry* key* value*    (type 0x00 small, 0x01 large)
    array      ::= count size value-entry* value*                    (type 0x02 small, 0x03 large)
    count/size/offsets are uint16 in small containers, uint32 in large ones; offsets are counted
    from the first byte after the container's type byte
    key-entry   ::= key-offset uint16-key-length
    value-entry ::= type-byte (inline-value | offset)
    scalars: 0x04 literal (0 null, 1 true, 2 false), 0x05/0x06 int16/uint16, 0x07/0x08 int32/uint32,
    0x09/0x0a int64/uint64, 0x0b double, 0x0c string = varlen utf8mb4,
    0x0f opaque = field-type-byte varlen bytes
    varlen: 7 bits per byte, low bits first, high bit set means "another byte follows"

Literals and 16-bit integers are stored inside the value entry; 32-bit integers too, but only in
large containers. MySQL's own reader trusts only offsets, never the order of values: in-place
partial updates leave gaps, so this decoder follows offsets the same way.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from decimal import Decimal

from pycanal.binlog.errors import BinlogError
from pycanal.binlog.values import decimal_size, make_decimal_decoder

__all__ = [
    "DIFF_INSERT",
    "DIFF_REMOVE",
    "DIFF_REPLACE",
    "MAX_DEPTH",
    "apply_json_diff",
    "decode_jsonb",
    "parse_json_diff",
    "to_json_text",
]

# MySQL's JSON_DOCUMENT_MAX_DEPTH: the server refuses to build or print documents whose
# arrays/objects nest deeper than this, so deeper binary input can only be corrupt (or hostile).
MAX_DEPTH = 100

# JSON diff operations (enum_json_diff_operation).
DIFF_REPLACE = 0
DIFF_INSERT = 1
DIFF_REMOVE = 2
_DIFF_NAMES = {DIFF_REPLACE: "REPLACE", DIFF_INSERT: "INSERT", DIFF_REMOVE: "REMOVE"}

_SMALL_OBJECT = 0x00
_LARGE_OBJECT = 0x01
_SMALL_ARRAY = 0x02
_LARGE_ARRAY = 0x03
_LITERAL = 0x04
_INT16 = 0x05
_UINT16 = 0x06
_INT32 = 0x07
_UINT32 = 0x08
_INT64 = 0x09
_UINT64 = 0x0A
_DOUBLE = 0x0B
_STRING = 0x0C
_OPAQUE = 0x0F

# enum_field_types codes that give an opaque value a meaning of its own.
_MYSQL_TYPE_TIMESTAMP = 7
_MYSQL_TYPE_DATE = 10
_MYSQL_TYPE_TIME = 11
_MYSQL_TYPE_DATETIME = 12
_MYSQL_TYPE_NEWDECIMAL = 246
_MYSQL_TYPE_VAR_STRING = 253
_TEMPORAL_NAMES = {
    _MYSQL_TYPE_TIMESTAMP: "TIMESTAMP",
    _MYSQL_TYPE_DATE: "DATE",
    _MYSQL_TYPE_TIME: "TIME",
    _MYSQL_TYPE_DATETIME: "DATETIME",
}

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_NUMBERS: dict[int, tuple[struct.Struct, str]] = {
    _INT16: (struct.Struct("<h"), "int16"),
    _UINT16: (_U16, "uint16"),
    _INT32: (struct.Struct("<i"), "int32"),
    _UINT32: (_U32, "uint32"),
    _INT64: (struct.Struct("<q"), "int64"),
    _UINT64: (struct.Struct("<Q"), "uint64"),
    _DOUBLE: (struct.Struct("<d"), "double"),
}
_CONTAINER_NAMES = {
    _SMALL_OBJECT: "small object",
    _LARGE_OBJECT: "large object",
    _SMALL_ARRAY: "small array",
    _LARGE_ARRAY: "large array",
}
# Bytes used by the binary DECIMAL format for a group of 0..9 leftover digits.
_MAX_DECIMAL_DIGITS = 81  # DECIMAL_MAX_POSSIBLE_PRECISION: nine 9-digit words


def _err(message: str, offset: int) -> BinlogError:
    return BinlogError(f"JSON: {message}", offset=offset)


# --------------------------------------------------------------------------- binary decoding


class _Decoder:
    """One pass over one binary JSON value.

    ``budget`` caps the total work at the input size: in a document MySQL wrote, every header,
    key and string occupies bytes of its own, so decoding charges never exceed ``len(buf)``.
    Offsets that point several entries at the same sub-tree (a "billion laughs" bomb that
    would otherwise expand exponentially within the depth limit) run the budget out and fail.
    """

    __slots__ = ("buf", "budget")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.budget = len(buf)

    def charge(self, n: int, offset: int) -> None:
        self.budget -= n
        if self.budget < 0:
            raise _err(
                "offsets make elements share bytes (the value decodes to more data than it holds)",
                offset,
            )

    def need(self, pos: int, n: int, end: int, what: str) -> None:
        if n > end - pos:
            raise _err(f"truncated {what}: needs {n} bytes, {max(end - pos, 0)} available", pos)

    def varlen(self, pos: int, end: int, what: str) -> tuple[int, int]:
        """Read MySQL's 7-bits-per-byte length (at most 5 bytes, value below 2**32)."""
        buf = self.buf
        value = 0
        for i in range(5):
            if pos + i >= end:
                raise _err(f"truncated {what}", pos + i)
            byte = buf[pos + i]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value, pos + i + 1
        raise _err(f"bad {what}: variable-length integer longer than 32 bits", pos)

    def utf8(self, pos: int, length: int, what: str) -> str:
        try:
            return self.buf[pos : pos + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _err(f"{what} is not valid UTF-8 ({exc.reason})", pos + exc.start) from None

    def value(self, type_byte: int, pos: int, end: int, depth: int, type_at: int) -> object:
        """Decode the value of type ``type_byte`` whose payload starts at ``pos`` (limit ``end``)."""
        if type_byte <= _LARGE_ARRAY:
            return self.container(type_byte, pos, end, depth)
        return self.scalar(type_byte, pos, end, type_at, True)

    def scalar(self, type_byte: int, pos: int, end: int, type_at: int, charged: bool) -> object:
        buf = self.buf
        if type_byte == _LITERAL:
            self.need(pos, 1, end, "literal")
            literal = buf[pos]
            if literal == 0:
                return None
            if literal == 1:
                return True
            if literal == 2:
                return False
            raise _err(f"bad literal byte 0x{literal:02x}", pos)
        number = _NUMBERS.get(type_byte)
        if number is not None:
            st, name = number
            self.need(pos, st.size, end, name)
            if charged:
                self.charge(st.size, pos)
            result = st.unpack_from(buf, pos)[0]
            if type_byte == _DOUBLE and not math.isfinite(result):
                raise _err(f"double is {result} (MySQL never stores NaN or infinity)", pos)
            return result
        if type_byte == _STRING:
            length, start = self.varlen(pos, end, "string length")
            self.need(start, length, end, "string")
            self.charge(length, start)
            return self.utf8(start, length, "string")
        if type_byte == _OPAQUE:
            self.need(pos, 1, end, "opaque field type")
            field_type = buf[pos]
            length, start = self.varlen(pos + 1, end, "opaque length")
            self.need(start, length, end, "opaque data")
            self.charge(length, start)
            return _opaque(field_type, buf[start : start + length], start)
        raise _err(f"unknown value type 0x{type_byte:02x}", type_at)

    def container(self, type_byte: int, pos: int, end: int, depth: int) -> object:
        buf = self.buf
        kind = _CONTAINER_NAMES[type_byte]
        if depth >= MAX_DEPTH:
            raise _err(f"arrays/objects nested deeper than {MAX_DEPTH} levels", pos)
        large = type_byte in (_LARGE_OBJECT, _LARGE_ARRAY)
        is_object = type_byte in (_SMALL_OBJECT, _LARGE_OBJECT)
        st = _U32 if large else _U16
        osz = st.size
        self.need(pos, 2 * osz, end, f"{kind} header")
        count = st.unpack_from(buf, pos)[0]
        size = st.unpack_from(buf, pos + osz)[0]
        if size > end - pos:
            raise _err(f"{kind} size {size} exceeds the {end - pos} bytes available", pos + osz)
        key_entry = osz + 2 if is_object else 0
        value_entry = 1 + osz
        header = 2 * osz + count * (key_entry + value_entry)
        if header > size:
            raise _err(f"{kind} of {count} elements needs a {header}-byte header but has size {size}", pos)
        self.charge(header, pos)
        first_value_entry = pos + 2 * osz + count * key_entry
        if not is_object:
            # A plain loop, not a comprehension: one stack frame fewer per nesting level.
            items: list[object] = []
            for i in range(count):
                items.append(self.element(first_value_entry + i * value_entry, pos, size, large, depth))
            return items
        result: dict[str, object] = {}
        for i in range(count):
            entry = pos + 2 * osz + i * key_entry
            key_offset = st.unpack_from(buf, entry)[0]
            key_length = _U16.unpack_from(buf, entry + osz)[0]
            if key_offset < header or key_offset + key_length > size:
                raise _err(
                    f"key #{i} (offset {key_offset}, length {key_length}) lies outside the "
                    f"{kind}'s key area [{header}, {size})",
                    entry,
                )
            self.charge(key_length, pos + key_offset)
            key = self.utf8(pos + key_offset, key_length, "object key")
            if key in result:
                raise _err(f"duplicate object key {key!r}", pos + key_offset)
            result[key] = self.element(first_value_entry + i * value_entry, pos, size, large, depth)
        return result

    def element(self, entry: int, base: int, size: int, large: bool, depth: int) -> object:
        """Decode the element described by the value entry at ``entry`` of the container at ``base``."""
        buf = self.buf
        type_byte = buf[entry]
        entry_end = entry + (5 if large else 3)
        if type_byte in (_LITERAL, _INT16, _UINT16) or (large and type_byte in (_INT32, _UINT32)):
            return self.scalar(type_byte, entry + 1, entry_end, entry, False)
        offset = (_U32 if large else _U16).unpack_from(buf, entry + 1)[0]
        if offset < entry_end - base or offset > size:
            raise _err(
                f"value offset {offset} points outside the container's data area "
                f"[{entry_end - base}, {size}]",
                entry + 1,
            )
        if type_byte <= _LARGE_ARRAY:
            return self.container(type_byte, base + offset, base + size, depth + 1)
        return self.scalar(type_byte, base + offset, base + size, entry, True)


def decode_jsonb(data: bytes | memoryview) -> object:
    """Decode one binary JSON value into dict/list/str/int/float/bool/None/Decimal.

    Objects keep the stored key order (MySQL sorts keys by length, then bytes). Opaque values
    become what MySQL prints for them: DECIMAL -> ``Decimal`` with its scale, DATE ->
    ``"YYYY-MM-DD"``, TIME -> ``"[-]HH:MM:SS.ffffff"``, DATETIME/TIMESTAMP ->
    ``"YYYY-MM-DD HH:MM:SS.ffffff"`` (always six fraction digits, as ``my_TIME_to_str(t, 6)``),
    VAR_STRING -> its text, anything else -> ``"base64:type<N>:<base64>"``.

    An empty input is JSON null: ``json_binary::parse_binary`` reads a zero-length value as the
    null literal, because non-strict/IGNORE inserts store ``''`` for NULL into NOT NULL JSON
    columns. Bytes after the root value are ignored, as MySQL does. Anything malformed raises
    ``BinlogError`` whose ``offset`` is relative to the first byte of ``data``.
    """
    buf = bytes(data)
    if not buf:
        return None
    return _Decoder(buf).value(buf[0], 1, len(buf), 0, 0)


# --------------------------------------------------------------------------- opaque values


def _opaque(field_type: int, data: bytes, at: int) -> object:
    if field_type == _MYSQL_TYPE_NEWDECIMAL:
        return _decimal(data, at)
    if field_type in _TEMPORAL_NAMES:
        return _temporal(field_type, data, at)
    if field_type == _MYSQL_TYPE_VAR_STRING:
        # MySQL prints these as plain JSON strings; if the bytes are not UTF-8, keep them
        # losslessly in the generic opaque form instead of guessing a charset.
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return f"base64:type{field_type}:{_mysql_base64(data)}"


def _mysql_base64(data: bytes) -> str:
    """Base64 as MySQL's ``base64_encode`` writes it: standard alphabet, a newline every 76 chars."""
    text = base64.b64encode(data).decode("ascii")
    return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))


def _decimal(data: bytes, at: int) -> Decimal:
    """Decode ``precision scale decimal2bin(...)``, the binlog's own DECIMAL encoding."""
    if len(data) < 2:
        raise _err(f"DECIMAL opaque value of {len(data)} bytes lacks precision and scale", at)
    precision, scale = data[0], data[1]
    if not 1 <= precision <= _MAX_DECIMAL_DIGITS or scale > precision:
        raise _err(f"DECIMAL has impossible precision {precision} / scale {scale}", at)
    expected = decimal_size(precision, scale)
    if len(data) - 2 != expected:
        raise _err(f"DECIMAL({precision},{scale}) needs {expected} bytes, got {len(data) - 2}", at + 2)
    try:
        return make_decimal_decoder(precision, scale)(bytes(data), 2)
    except ValueError as exc:
        raise _err(f"DECIMAL({precision},{scale}): {exc}", at + 2) from None


def _temporal(field_type: int, data: bytes, at: int) -> str:
    """Format a packed MYSQL_TIME (``TIME_to_longlong_*_packed``) as ``my_TIME_to_str(t, 6)``.

    Fields MySQL could never have written (minute 61, frac >= 10**6, year > 9999, ...) are
    rejected rather than printed, since they can only come from corrupt input.
    """
    name = _TEMPORAL_NAMES[field_type]
    if len(data) != 8:
        raise _err(f"{name} opaque value must be 8 bytes, got {len(data)}", at)
    packed = int.from_bytes(data, "little", signed=True)
    negative = packed < 0
    magnitude = -packed if negative else packed
    frac = magnitude & 0xFFFFFF
    int_part = magnitude >> 24
    if field_type == _MYSQL_TYPE_TIME:
        hour = (int_part >> 12) % 1024
        minute = (int_part >> 6) & 63
        second = int_part & 63
        if minute > 59 or second > 59 or frac > 999_999:
            raise _err(f"TIME has out-of-range fields {hour}:{minute}:{second}.{frac}", at)
        return f"{'-' if negative else ''}{hour:02d}:{minute:02d}:{second:02d}.{frac:06d}"
    if negative:
        raise _err(f"{name} packed value is negative", at)
    ymd = int_part >> 17
    hms = int_part & 0x1FFFF
    day = ymd & 31
    month = (ymd >> 5) % 13
    year = (ymd >> 5) // 13
    hour = hms >> 12
    minute = (hms >> 6) & 63
    second = hms & 63
    if year > 9999 or hour > 23 or minute > 59 or second > 59 or frac > 999_999:
        raise _err(
            f"{name} has out-of-range fields {year}-{month}-{day} {hour}:{minute}:{second}.{frac}",
            at,
        )
    if field_type == _MYSQL_TYPE_DATE:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{frac:06d}"


# --------------------------------------------------------------------------- JSON text

_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}
for _c in range(0x20):
    _ESCAPES.setdefault(_c, f"\\u{_c:04x}")
del _c

# my_gcvt(MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH): the width is DBL_DIG + 4 + max(5, 15).
_GCVT_WIDTH = 34
_MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG


def _quote(text: str) -> str:
    """Quote like MySQL's ``double_quote``: escape only '"', '\\' and controls; keep non-ASCII."""
    return '"' + text.translate(_ESCAPES) + '"'


def _format_double(value: float) -> str:
    """Print a double like MySQL 8.0+ prints a JSON double.

    MySQL calls ``my_gcvt(d, MY_GCVT_ARG_DOUBLE, 34)``: dtoa mode 4 with 34 digits yields the
    shortest round-trip digits (what Python's ``repr`` yields); fixed notation is used while the
    decimal exponent is in [-14, 15] (e.g. 0.000000000000001, 100000000000000), scientific
    otherwise, written without '+' or leading zeros (1e15, 1e-16, 1.5e300). Then ".0" is
    appended when the text has neither '.' nor 'e', so 3.0 prints as "3.0" (5.7 printed "3").
    """
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON representation")
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    negative = value < 0
    width = _GCVT_WIDTH - 1 if negative else _GCVT_WIDTH
    mantissa, _, exponent = repr(abs(value)).partition("e")
    int_digits, _, frac_digits = mantissa.partition(".")
    digits = (int_digits + frac_digits).lstrip("0")
    # The value is 0.<digits> * 10**decpt, as dtoa reports it.
    decpt = len(digits) + int(exponent or 0) - len(frac_digits)
    digits = digits.rstrip("0")
    n = len(digits)
    if decpt <= 0:
        f_len = n - decpt + 2
    elif decpt < n:
        f_len = n + 1
    else:
        f_len = decpt
    have_space = f_len <= width
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_f = (
        have_space
        or (decpt <= width and (decpt >= -1 or (decpt == -2 and (n > 1 or not force_e))) and not force_e)
    ) and (
        not have_space
        or (decpt >= -_MAX_DECPT_FOR_F_FORMAT + 1 and (decpt <= _MAX_DECPT_FOR_F_FORMAT or n > decpt))
    )
    # With at most 17 significant digits and a width of 33-34 my_gcvt never has to drop digits,
    # so its re-rounding branches are not needed here.
    if use_f:
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < n:
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - n)
    else:
        exp10 = decpt - 1
        text = digits[0] + ("." + digits[1:] if n > 1 else "") + "e" + str(exp10)
    if negative:
        text = "-" + text
    if "." not in text and "e" not in text:
        text += ".0"
    return text


class _Token(str):
    """Literal output text on the printer's work stack (as opposed to a string value)."""

    __slots__ = ()


class _Leave:
    """Marks the end of a container on the printer's work stack (for cycle detection)."""

    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident


_OPEN_ARRAY, _CLOSE_ARRAY = _Token("["), _Token("]")
_OPEN_OBJECT, _CLOSE_OBJECT = _Token("{"), _Token("}")
_COMMA = _Token(", ")


def to_json_text(tree: object) -> str:
    """Print a tree as MySQL prints JSON (``Json_wrapper::to_string``).

    Separators are ", " and ": ", non-ASCII is kept, only '"', '\\' and control characters are
    escaped (\\b \\t \\n \\f \\r, others as \\u00xx), a ``Decimal`` is a bare number with all its
    scale digits, a float is printed as MySQL 8.0+ prints a JSON double (shortest round-trip
    digits; fixed notation for decimal exponents -14..15, else ``1e300``/``1e-16``; ".0" added
    to integral values, so ``3.0``). Iterative, so depth is no limit; a cyclic tree or a
    non-JSON type raises ``ValueError``/``TypeError``.
    """
    out: list[str] = []
    stack: list[object] = [tree]
    active: set[int] = set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is _Token:
            out.append(item)  # type: ignore[arg-type]
        elif kind is _Leave:
            active.discard(item.ident)  # type: ignore[attr-defined]
        elif item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, str):
            out.append(_quote(item))
        elif isinstance(item, int):
            out.append(str(int(item)))
        elif isinstance(item, float):
            out.append(_format_double(float(item)))
        elif isinstance(item, Decimal):
            if not item.is_finite():
                raise ValueError(f"{item!r} has no JSON representation")
            out.append(format(item, "f"))
        elif isinstance(item, dict | list | tuple):
            ident = id(item)
            if ident in active:
                raise ValueError("cyclic JSON tree")
            active.add(ident)
            work: list[object]
            if isinstance(item, dict):
                work = [_OPEN_OBJECT]
                for i, (key, child) in enumerate(item.items()):
                    if not isinstance(key, str):
                        raise TypeError(f"JSON object keys must be str, not {type(key).__name__}")
                    if i:
                        work.append(_COMMA)
                    work.append(_Token(_quote(key) + ": "))
                    work.append(child)
                work.append(_CLOSE_OBJECT)
            else:
                work = [_OPEN_ARRAY]
                for i, child in enumerate(item):
                    if i:
                        work.append(_COMMA)
                    work.append(child)
                work.append(_CLOSE_ARRAY)
            stack.append(_Leave(ident))
            stack.extend(reversed(work))
        else:
            raise TypeError(f"{kind.__name__} is not a JSON tree value")
    return "".join(out)


# --------------------------------------------------------------------------- JSON diffs

_Leg = tuple[str, object, bool]  # ("member", name, False) or ("index", n, from_end)
_WHITESPACE = " \t\n\v\f\r"


def _read_lenenc(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    """Read a packed (length-encoded) integer, as ``net_field_length_checked`` does."""
    if pos >= len(buf):
        raise BinlogError(f"JSON diff: truncated {what}", offset=pos)
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise BinlogError(f"JSON diff: bad {what} prefix byte 0x{first:02x}", offset=pos)
    if pos + 1 + width > len(buf):
        raise BinlogError(f"JSON diff: truncated {what}", offset=pos)
    return int.from_bytes(buf[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def _is_unquoted_name(name: str) -> bool:
    """Could ``name`` appear unquoted after '.' in a path MySQL printed?

    MySQL quotes every name that fails its ECMAScript-identifier test, so this only needs to be
    at least as permissive: ASCII must be a letter, '$' or '_' (digits after the first
    character); non-ASCII is accepted because MySQL's own letter test is approximate there.
    """
    if not name:
        return False
    for i, ch in enumerate(name):
        if ch > "\x7f" or ch.isalpha() or ch in "$_" or (i and ch.isdigit()):
            continue
        return False
    return True


def _parse_path(text: str, at: int) -> list[_Leg]:
    """Parse a concrete path (``$``, ``.name``, ``."quoted"``, ``[n]``, ``[last]``, ``[last-n]``).

    Wildcards, ranges and ``**`` are valid MySQL paths but never appear in a diff (a diff names
    one location), so they are rejected. ``at`` is the path's offset, for error messages.
    """

    def fail(reason: str) -> BinlogError:
        return BinlogError(f"JSON diff: bad path {text!r}: {reason}", offset=at)

    n = len(text)
    i = 0

    def skip_ws() -> None:
        nonlocal i
        while i < n and text[i] in _WHITESPACE:
            i += 1

    def number() -> int:
        nonlocal i
        start = i
        while i < n and "0" <= text[i] <= "9":
            i += 1
        if i == start:
            raise fail("array index must be a non-negative integer, 'last' or 'last-N'")
        value = int(text[start:i])
        if value > 0xFFFFFFFF:
            raise fail("array index above 4294967295")
        return value

    skip_ws()
    if i >= n or text[i] != "$":
        raise fail("must start with '$'")
    i += 1
    legs: list[_Leg] = []
    while True:
        skip_ws()
        if i >= n:
            return legs
        ch = text[i]
        if ch == ".":
            i += 1
            skip_ws()
            if i >= n:
                raise fail("member name missing after '.'")
            if text[i] == "*":
                raise fail("wildcards cannot appear in a JSON diff")
            start = i
            if text[i] == '"':
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
                if i >= n:
                    raise fail("unterminated quoted member name")
                i += 1
                quoted = text[start:i]
            else:
                while i < n and text[i] not in _WHITESPACE and text[i] not in "[.*":
                    i += 1
                quoted = '"' + text[start:i] + '"'
            try:
                name = json.loads(quoted)
            except ValueError:
                raise fail(f"bad member name {text[start:i]!r}") from None
            if not isinstance(name, str) or (text[start] != '"' and not _is_unquoted_name(name)):
                raise fail(f"bad member name {text[start:i]!r}")
            legs.append(("member", name, False))
        elif ch == "[":
            i += 1
            skip_ws()
            if i < n and text[i] == "*":
                raise fail("wildcards cannot appear in a JSON diff")
            from_end = text.startswith("last", i)
            if from_end:
                i += 4
                skip_ws()
                if i < n and text[i] == "-":
                    i += 1
                    skip_ws()
                    index = number()
                else:
                    index = 0
            else:
                index = number()
            skip_ws()
            if i >= n or text[i] != "]":
                raise fail("expected ']' (array ranges cannot appear in a JSON diff)")
            i += 1
            legs.append(("index", index, from_end))
        elif ch == "*":
            raise fail("'**' cannot appear in a JSON diff")
        else:
            raise fail(f"unexpected character {ch!r} at position {i}")


def _iter_diffs(buf: bytes) -> list[tuple[int, str, list[_Leg], object, int]]:
    diffs: list[tuple[int, str, list[_Leg], object, int]] = []
    pos = 0
    while pos < len(buf):
        start = pos
        number = len(diffs)
        operation = buf[pos]
        if operation not in _DIFF_NAMES:
            raise BinlogError(f"JSON diff #{number}: unknown operation {operation}", offset=pos)
        path_length, pos = _read_lenenc(buf, pos + 1, f"diff #{number} path length")
        if path_length > len(buf) - pos:
            raise BinlogError(
                f"JSON diff #{number}: path of {path_length} bytes overruns the diff", offset=pos
            )
        try:
            path = buf[pos : pos + path_length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BinlogError(
                f"JSON diff #{number}: path is not valid UTF-8", offset=pos + exc.start
            ) from None
        legs = _parse_path(path, pos)
        pos += path_length
        value: object = None
        if operation != DIFF_REMOVE:
            value_length, pos = _read_lenenc(buf, pos, f"diff #{number} value length")
            if value_length > len(buf) - pos:
                raise BinlogError(
                    f"JSON diff #{number}: value of {value_length} bytes overruns the diff", offset=pos
                )
            try:
                value = decode_jsonb(buf[pos : pos + value_length])
            except BinlogError as exc:
                raise BinlogError(
                    f"diff #{number} value (starting at diff offset {pos}): {exc.message}",
                    offset=pos + (exc.offset or 0),
                ) from None
            pos += value_length
        diffs.append((operation, path, legs, value, start))
    return diffs


def parse_json_diff(diff: bytes | memoryview) -> list[tuple[int, str, object | None]]:
    """List the diffs of a partial JSON update as ``(operation, path, value)``.

    ``diff`` is the column's payload after its 4-byte length (the same framing as a full JSON
    value in a row image): repeated ``op-byte lenenc-path [lenenc-value]``, where ``value`` is
    binary JSON, decoded here (``None`` for REMOVE). Operations are DIFF_REPLACE/INSERT/REMOVE;
    paths are returned as logged (e.g. ``$.a[1]``) after checking they parse.
    """
    return [(op, path, value) for op, path, _legs, value, _at in _iter_diffs(bytes(diff))]


def _deep_copy(tree: object) -> object:
    """Copy dicts and lists (tuples become lists) without recursion; shared nodes stay shared."""
    if not isinstance(tree, dict | list | tuple):
        return tree
    memo: dict[int, object] = {}

    def fresh(node: object) -> object:
        copy: object = {} if isinstance(node, dict) else []
        memo[id(node)] = copy
        pending.append((node, copy))
        return copy

    pending: list[tuple[object, object]] = []
    root = fresh(tree)
    while pending:
        source, target = pending.pop()
        if isinstance(source, dict):
            for key, child in source.items():
                if isinstance(child, dict | list | tuple):
                    child = memo[id(child)] if id(child) in memo else fresh(child)
                target[key] = child  # type: ignore[index]
        else:
            for child in source:  # type: ignore[attr-defined]
                if isinstance(child, dict | list | tuple):
                    child = memo[id(child)] if id(child) in memo else fresh(child)
                target.append(child)  # type: ignore[attr-defined]
    return root


def _key_order(key: str) -> tuple[int, bytes]:
    raw = key.encode("utf-8", "surrogatepass")
    return len(raw), raw


def _array_position(index: int, from_end: bool, length: int) -> tuple[int, bool]:
    """``Json_array_index``: the position a leg names in an array, and whether it exists."""
    if from_end:
        return (length - 1 - index if index < length else 0), index < length
    return min(index, length), index < length


def _apply_one(root: object, operation: int, legs: list[_Leg], value: object, where: str, at: int) -> object:
    def reject(reason: str) -> BinlogError:
        return BinlogError(f"JSON diff {where} does not apply: {reason}", offset=at)

    if not legs:
        if operation == DIFF_REPLACE:
            return value
        raise reject("cannot insert or remove the document root")
    parent = root
    for depth, (leg, name, from_end) in enumerate(legs[:-1]):
        if leg == "member" and isinstance(parent, dict) and name in parent:
            parent = parent[name]
        elif leg == "index" and isinstance(parent, list):
            position, exists = _array_position(name, from_end, len(parent))  # type: ignore[arg-type]
            if not exists:
                raise reject(f"leg {depth + 1} is past the end of an array")
            parent = parent[position]
        else:
            raise reject(f"leg {depth + 1} does not exist in the document")
    leg, name, from_end = legs[-1]
    if isinstance(parent, dict) and leg == "member":
        if operation == DIFF_INSERT:
            if name in parent:
                raise reject("member already exists")
            # Keep MySQL's key order (length, then bytes) so the result matches a decode of the
            # new row image.
            items = list(parent.items())
            new_order = _key_order(name)  # type: ignore[arg-type]
            at_index = next((i for i, (k, _) in enumerate(items) if _key_order(k) > new_order), len(items))
            items.insert(at_index, (name, value))
            parent.clear()
            parent.update(items)
        elif name not in parent:
            raise reject("member does not exist")
        elif operation == DIFF_REPLACE:
            parent[name] = value
        else:
            del parent[name]
        return root
    if isinstance(parent, list) and leg == "index":
        position, exists = _array_position(name, from_end, len(parent))  # type: ignore[arg-type]
        if operation == DIFF_INSERT:
            parent.insert(position, value)
        elif not exists:
            raise reject("array index out of range")
        elif operation == DIFF_REPLACE:
            parent[position] = value
        else:
            del parent[position]
        return root
    raise reject("the path's last leg does not match the type of its parent")


def apply_json_diff(tree: object, diff: bytes | memoryview) -> object:
    """Apply a partial-update diff list to the before-image tree; return the after-image tree.

    Works on a deep copy: ``tree`` is left untouched, since a CDC event still needs the
    before image. Semantics follow MySQL's ``apply_json_diff``: REPLACE needs an existing
    member/element; INSERT adds a missing member (placed in MySQL's key order) or inserts into
    an array at the index, appending if the index is past the end; REMOVE needs an existing
    member/element. ``[last]``/``[last-N]`` count from the end. A diff that does not fit the
    document (MySQL's REJECTED) raises ``BinlogError``. REPLACE of ``$`` replaces the document.
    """
    diffs = _iter_diffs(bytes(diff))
    result = _deep_copy(tree)
    for number, (operation, path, legs, value, at) in enumerate(diffs):
        where = f"#{number} ({_DIFF_NAMES[operation]} {path})"
        result = _apply_one(result, operation, legs, value, where, at)
    return result
