"""Rows events -> the serialized bytes of their Canal ``ROWDATA`` Entry, without protobuf objects.

``EntryConverter`` (``pycanal.parse.convert``) builds one protobuf ``Column`` message per value;
that costs more than decoding the row. Canal's server keeps each Entry's serialized bytes in its
store ("raw mode"), so the bytes are all a stream needs. ``RawEntryConverter`` writes them
directly::

    conv = RawEntryConverter(timezone="Asia/Shanghai")
    for event in read_events("mysql-bin.000001"):
        for raw in conv.convert(event):      # list[bytes]
            entry = Entry.FromString(raw)    # only if a message is wanted

The bytes are identical to ``EntryConverter(...).convert(event)[k].SerializeToString()`` (same
options): the protobuf wire format written by hand in the order the protobuf serializer emits
(fields by number; proto3 scalars left out when zero/empty, ``oneof`` members always written
once set). Only rows events (also those inside a TRANSACTION_PAYLOAD) take the fast path; every
other event is converted by an inner ``EntryConverter`` (which also keeps the GTID state the
Header uses) and serialized.

How it is fast
--------------
The column rules (names, isKey, mysqlType, value text, sqlType, NULL sqlType) are the
``EntryConverter``'s own plan for the table: its per-column ``conv(value) -> (sqlType, text)``
functions are called as they are, nothing is re-implemented. Per TABLE_MAP (and options) this
module compiles straight-line Python for INSERT, UPDATE and DELETE rows, like the row decoder
(``pycanal.binlog.rows``) does. Per column it keeps

* the whole encoded ``Column`` (with its RowData field tag and length) for each NULL variant
  (before image; after image updated / not updated), and
* for non-NULL values, everything in front of the value text - RowData tag, Column length,
  index, sqlType, name, isKey, updated, isNull, the value's tag and length - looked up by
  (sqlType, byte length of the value), plus the constant ``mysqlType`` field that follows it.

The code that runs first is specialised per column: ``convert.py``'s converters are recognised
by their code objects (``_int_conv``, ``_fixed``, ``_chars_or_bytes``) and their closure
constants (sqlTypes, widening limit, formatter) are baked in, so an INT is ``b'%d' % v`` and one
look-up of its head by byte length, a str in a text column one ``encode``, a UTC TIMESTAMP its
decoder text, a DECIMAL ``convert._decimal_text`` inlined; any other converter (ENUM, SET,
JSON, bytes in a text column, ...) is called as it is. Per row each column gives three
variables (head, value bytes, ``mysqlType`` field) joined once; an UPDATE's updated flag
compares the UTF-8 bytes of the two texts (equal exactly when the texts are). A ``MISSING``
column (partial row image) makes that code raise ``_Partial``; the event is then written again by
the generic code: per value its ``conv`` call, a UTF-8 encode, two dict look-ups and three
appends. The Header's table part is encoded once per table, its GTID props once per GTID event.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import tzinfo
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog import values
from pycanal.binlog.constants import ColumnType as T
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import BinlogError
from pycanal.binlog.rows import MISSING, ColumnSpec, _Gen
from pycanal.binlog.tablemap import TableMap
from pycanal.parse import convert as _convert
from pycanal.parse.convert import DdlClassifier, EntryConverter, TableIdNotFoundError, entry_text
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.store.event import Event

__all__ = ["RawEntryConverter", "encode_varint"]

_BYTES = [bytes((n,)) for n in range(256)]
_CACHE_LIMIT = 4096  # value lengths whose prefixes are kept (longer ones are built each time)


def encode_varint(n: int) -> bytes:
    """Protobuf base-128 varint; negative numbers as their 64-bit two's complement (10 bytes),
    as protobuf writes negative int32/int64 values."""
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return _BYTES[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, (n >> 7 & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field_bytes(tag: int, data: bytes) -> bytes:
    """A length-delimited field (string, bytes, message)."""
    return _BYTES[tag] + encode_varint(len(data)) + data


def _field_string(tag: int, text: str) -> bytes:
    """A proto3 string field: nothing when empty."""
    return _field_bytes(tag, text.encode("utf-8")) if text else b""


def _field_int(tag: int, n: int) -> bytes:
    """A proto3 integer field: nothing when zero."""
    return _BYTES[tag] + encode_varint(n) if n else b""


def _pair(key: str, value: str) -> bytes:
    return _field_string(0x0A, key) + _field_string(0x12, value)


class _Prefixes(dict):
    """``tag + varint(n)`` by ``n``, built on first use (small ``n`` kept)."""

    def __init__(self, tag: int) -> None:
        super().__init__()
        self.tag = _BYTES[tag]

    def __missing__(self, n: int) -> bytes:
        out = self.tag + encode_varint(n)
        if n < _CACHE_LIMIT:
            self[n] = out
        return out


_ROWDATA = _Prefixes(0x62)  # RowChange.rowDatas (12)


class _ValueHeads(dict):
    """For one column, image side, updated flag and sqlType: by the value's UTF-8 length, every
    byte of the Column field in front of the value text (the ``mysqlType`` field follows it)."""

    def __init__(self, side: bytes, pre: bytes, suffix_len: int) -> None:
        super().__init__()
        self.side = side
        self.pre = pre
        self.fixed = len(pre) + suffix_len

    def __missing__(self, n: int) -> bytes:
        if n:
            value_head = b"\x42" + encode_varint(n)  # Column.value (8)
            body_len = self.fixed + len(value_head) + n
        else:  # proto3 leaves an empty string out
            value_head = b""
            body_len = self.fixed
        out = self.side + encode_varint(body_len) + self.pre + value_head
        if n < _CACHE_LIMIT:
            self[n] = out
        return out


class _TypedHeads(dict):
    """``_ValueHeads`` by sqlType (``conv`` may pick the sqlType per value: unsigned widening,
    bytes in a text column, ENUM/SET labels)."""

    def __init__(self, column: _ColumnCode, side: bytes, updated: bool) -> None:
        super().__init__()
        self.column = column
        self.side = side
        self.updated = updated

    def __missing__(self, sql_type: int) -> _ValueHeads:
        c = self.column
        heads = _ValueHeads(self.side, c.pre(sql_type, self.updated, False), len(c.suffix))
        self[sql_type] = heads
        return heads


class _ColumnCode:
    """The constant encodings of one column of one table."""

    def __init__(self, index: int, name: str, is_key: bool, mysql_type: str, null_type: int) -> None:
        self.index = index
        self.name = _field_string(0x1A, name)
        self.key = b"\x20\x01" if is_key else b""
        self.suffix = _field_string(0x52, mysql_type)  # Column.mysqlType (10)
        before, after = b"\x0a", b"\x12"  # RowData.beforeColumns (1) / afterColumns (2)
        self.before = _TypedHeads(self, before, False)
        self.after_updated = _TypedHeads(self, after, True)
        self.after_same = _TypedHeads(self, after, False)
        self.null_before = self._null(before, null_type, False)
        self.null_updated = self._null(after, null_type, True)
        self.null_same = self._null(after, null_type, False)

    def pre(self, sql_type: int, updated: bool, is_null: bool) -> bytes:
        """Column fields 1-6: index, sqlType, name, isKey, updated, isNull."""
        return b"".join(
            (
                _field_int(0x08, self.index),
                _field_int(0x10, sql_type),
                self.name,
                self.key,
                b"\x28\x01" if updated else b"",
                b"\x30\x01" if is_null else b"\x30\x00",
            )
        )

    def _null(self, side: bytes, sql_type: int, updated: bool) -> bytes:
        return _field_bytes(side[0], self.pre(sql_type, updated, True) + self.suffix)

    def null_head(self, null: bytes) -> bytes:
        """A NULL Column without its trailing ``mysqlType`` field (the fast code appends it)."""
        return null[: len(null) - len(self.suffix)]


# ------------------------------------------------------------------------------ code generation
def _image_lines(n: int, var: str, mode: str) -> list[str]:
    """Lines appending the columns of one row image (``var`` = its value tuple) with ``a``.

    ``mode``: "insert" (after image, all updated), "before" (never updated; also keeps each
    column's text in ``p<i>`` for an UPDATE's after image), "after" (updated = text differs from
    ``p<i>``, the before image's text, None for NULL, ``ABSENT`` if not logged)."""
    if n == 0:
        return []
    targets = ", ".join(f"v{i}" for i in range(n)) + ("," if n == 1 else "")
    lines = [f"{targets} = {var}"]
    keep = mode == "before"
    for i in range(n):
        v = f"v{i}"
        lines.append(f"if {v} is None:")
        if mode == "insert":
            lines.append(f"    a(NU{i})")
        elif mode == "before":
            lines.append(f"    a(NB{i})")
            lines.append(f"    p{i} = None")
        else:
            lines.append(f"    a(NU{i} if p{i} is not None else NS{i})")
        if keep:
            lines.append(f"elif {v} is MISSING:")
            lines.append(f"    p{i} = ABSENT")
            lines.append("else:")
        else:
            lines.append(f"elif {v} is not MISSING:")
        lines.append(f"    t, s = C{i}({v})")
        lines.append("    b = s.encode()")
        if mode == "insert":
            lines.append(f"    a(HU{i}[t][len(b)])")
        elif mode == "before":
            lines.append(f"    a(HB{i}[t][len(b)])")
        else:
            lines.append(f"    a((HU{i} if p{i} != s else HS{i})[t][len(b)])")
        lines.append("    a(b)")
        lines.append(f"    a(S{i})")
        if keep:
            lines.append(f"    p{i} = s")
    return lines


def _compile(plan: list[tuple], columns: list[_ColumnCode], kind: str) -> Any:
    """``encode(rows, out)``: append every row's ``RowChange.rowDatas`` field to list ``out``."""
    n = len(plan)
    ns: dict[str, Any] = {"MISSING": MISSING, "ABSENT": object(), "ROWDATA": _ROWDATA, "join": b"".join}
    for (i, _name, _key, _mysql_type, conv, _null_type), c in zip(plan, columns, strict=True):
        ns[f"C{i}"] = conv
        ns[f"S{i}"] = c.suffix
        ns[f"HB{i}"] = c.before
        ns[f"HU{i}"] = c.after_updated
        ns[f"HS{i}"] = c.after_same
        ns[f"NB{i}"] = c.null_before
        ns[f"NU{i}"] = c.null_updated
        ns[f"NS{i}"] = c.null_same
    if kind == "UPDATE":
        loop = "for before, after in rows:"
        body = _image_lines(n, "before", "before") + _image_lines(n, "after", "after")
    elif kind == "DELETE":
        loop = "for row in rows:"
        body = _image_lines(n, "row", "before")
    else:
        loop = "for row in rows:"
        body = _image_lines(n, "row", "insert")
    lines = [
        "def encode(rows, out):",
        "    put = out.append",
        f"    {loop}",
        "        r = []",
        "        a = r.append",
        *("        " + line for line in body),
        "        r = join(r)",
        "        put(ROWDATA[len(r)])",
        "        put(r)",
    ]
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<raw entry {kind} {n} cols>", "exec"), ns)
    encode = ns["encode"]
    encode.source = src
    return encode


# ------------------------------------------------------------------------------ specialised code
class _Partial(Exception):
    """A row image lacks a column (``MISSING``): the event goes through the generic encoder."""


# The value converters of ``convert.py`` recognised by their code objects; their closure cells
# give the constants (sqlType, formatter). Any other converter is called as it is.
_FIXED_CODE = _convert._fixed(0).__code__
_INT_CODE = _convert._int_conv(0, 0, 0, False).__code__
_UINT_CODE = _convert._int_conv(0, 0, 0, True).__code__
_CHARS_CODE = _convert._chars_or_bytes(0).__code__


def _conv_shape(conv: Any) -> tuple[str, dict[str, Any]]:
    """(shape, closure constants) of one column converter: "fixed" (sqlType, fmt), "int"
    (base), "uint" (base, widened, limit), "chars" (text_type) or "generic"."""
    code = getattr(conv, "__code__", None)
    shape = {_FIXED_CODE: "fixed", _INT_CODE: "int", _UINT_CODE: "uint", _CHARS_CODE: "chars"}.get(code)
    if shape is None or not conv.__closure__:
        return "generic", {}
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in conv.__closure__), strict=True))
    return shape, cells


class _FastGen:
    """Straight-line code for rows without ``MISSING`` columns: per column three variables (head,
    value bytes, ``mysqlType`` field) joined once per row; values formatted per converter shape."""

    def __init__(self, plan: list[tuple], columns: list[_ColumnCode]) -> None:
        self.ns: dict[str, Any] = {
            "MISSING": MISSING,
            "Partial": _Partial,
            "ROWDATA": _ROWDATA,
            "join": b"".join,
        }
        self.shapes = [_conv_shape(p[4]) for p in plan]
        self.columns = columns
        for (i, *_rest), c in zip(plan, columns, strict=True):
            ns = self.ns
            ns[f"C{i}"] = plan[i][4]
            ns[f"S{i}"] = c.suffix
            ns[f"HB{i}"] = c.before
            ns[f"HU{i}"] = c.after_updated
            ns[f"HS{i}"] = c.after_same
            ns[f"NB{i}"] = c.null_head(c.null_before)
            ns[f"NU{i}"] = c.null_head(c.null_updated)
            ns[f"NS{i}"] = c.null_head(c.null_same)

    def heads(self, table: str, i: int, sql_type: int) -> str:
        """Name of the ``_ValueHeads`` of one fixed sqlType (``table`` HB/HU/HS)."""
        name = f"{table}{i}_{sql_type if sql_type >= 0 else f'm{-sql_type}'}"
        if name not in self.ns:
            self.ns[name] = self.ns[f"{table}{i}"][sql_type]
        return name

    def pick(self, mode: str, i: int, sql_type: int | None) -> str:
        """Expression for the heads table (``_ValueHeads``, or by sqlType when None)."""

        def one(table: str) -> str:
            return f"{table}{i}" if sql_type is None else self.heads(table, i, sql_type)

        if mode == "insert":
            return one("HU")
        if mode == "before":
            return one("HB")
        return f"({one('HU')} if p{i} != by{i} else {one('HS')})"

    def image(self, var: str, mode: str, tag: str, keep: bool = False) -> list[str]:
        """Lines setting ``h<tag><i>``/``b<tag><i>`` for each column of tuple ``var``; ``keep``
        (UPDATE before image) also keeps each value's bytes in ``p<i>`` (None for NULL)."""
        n = len(self.columns)
        if n == 0:
            return []
        targets = ", ".join(f"v{i}" for i in range(n)) + ("," if n == 1 else "")
        lines = [f"{targets} = {var}"]
        null = {"insert": "NU{i}", "before": "NB{i}", "after": "(NU{i} if p{i} is not None else NS{i})"}[mode]
        for i in range(n):
            v, b, h = f"v{i}", f"b{tag}{i}", f"h{tag}{i}"
            lines += [f"if {v} is None:", f"    {h} = {null.format(i=i)}", f"    {b} = b''"]
            if keep:
                lines.append(f"    p{i} = None")
            lines += [f"elif {v} is MISSING:", "    raise Partial", "else:"]
            body = self.value_lines(i, mode, v, b, h)
            if keep:
                body.append(f"p{i} = {b}")
            lines += ["    " + line for line in body]
        return lines

    def value_lines(self, i: int, mode: str, v: str, b: str, h: str) -> list[str]:
        """Lines turning the (non-NULL) value ``v`` of column ``i`` into its text bytes ``b``
        and Column head ``h``."""
        shape, cells = self.shapes[i]
        body: list[str] = []
        if shape == "int":
            body += [f"{b} = b'%d' % {v}", f"{h} = {self.pick(mode, i, cells['base'])}[len({b})]"]
        elif shape == "uint":
            self.ns[f"L{i}"] = cells["limit"]
            wide = self.pick(mode, i, cells["widened"])
            base = self.pick(mode, i, cells["base"])
            body += [f"{b} = b'%d' % {v}", f"{h} = ({wide} if {v} >= L{i} else {base})[len({b})]"]
        elif shape == "fixed":
            fmt = cells["fmt"]
            stamps = getattr(fmt, "__self__", None)
            if fmt is str:
                body.append(f"{b} = str({v}).encode()")
            elif isinstance(stamps, _convert._Timestamps) and stamps.convert is None:
                body.append(f"{b} = {v}.encode()")  # UTC: the decoder's text as it is
            elif fmt is _convert._decimal_text:
                body += [
                    f"s = f'{{{v}:f}}'",
                    f"if s[0] == '-' and not {v}:",  # no negative zero
                    "    s = s[1:]",
                    f"{b} = s.encode()",
                ]
            else:
                self.ns[f"F{i}"] = fmt
                body.append(f"{b} = F{i}({v}).encode()")
            body.append(f"{h} = {self.pick(mode, i, cells['sql_type'])}[len({b})]")
        elif shape == "chars":
            body += [
                f"if type({v}) is str:",
                f"    {b} = {v}.encode()",
                f"    {h} = {self.pick(mode, i, cells['text_type'])}[len({b})]",
                "else:",
                f"    t, s = C{i}({v})",
                f"    {b} = s.encode()",
                f"    {h} = {self.pick(mode, i, None)}[t][len({b})]",
            ]
        else:
            body += [
                f"t, s = C{i}({v})",
                f"{b} = s.encode()",
                f"{h} = {self.pick(mode, i, None)}[t][len({b})]",
            ]
        return body

    def compile(self, kind: str) -> Any:
        n = len(self.columns)
        if kind == "UPDATE":
            loop = "for before, after in rows:"
            body = self.image("before", "before", "x", keep=True) + self.image("after", "after", "y")
            parts = [f"hx{i}, bx{i}, S{i}" for i in range(n)] + [f"hy{i}, by{i}, S{i}" for i in range(n)]
        else:
            loop = "for row in rows:"
            body = self.image("row", "before" if kind == "DELETE" else "insert", "x")
            parts = [f"hx{i}, bx{i}, S{i}" for i in range(n)]
        lines = [
            "def encode(rows, out):",
            "    put = out.append",
            f"    {loop}",
            *("        " + line for line in body),
            f"        r = join(({', '.join(parts)}))",
            "        put(ROWDATA[len(r)])",
            "        put(r)",
        ]
        src = "\n".join(lines) + "\n"
        exec(compile(src, f"<raw entry fast {kind} {n} cols>", "exec"), self.ns)
        encode = self.ns["encode"]
        encode.source = src
        return encode


# ------------------------------------------------------------------------------ fused code
_UTF8_TEXT = frozenset((T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB))


def _row_source(e: ev.RowsEvent) -> tuple[Any, bytes] | None:
    """(row decoder, row data) of a rows event whose rows are not decoded yet, else None."""
    if e._rows is not None or e.row_decoder is None:
        return None
    return e.row_decoder, e.row_data


class _FusedGen(_FastGen):
    """``encode(buf, out) -> row count``: the row data bytes straight to ``rowDatas`` fields.

    Per column the value is read as the row decoder (``pycanal.binlog.rows._Gen``) reads it, but
    where the Canal text follows from the bytes no Python value is built: utf8 strings are their
    bytes (checked UTF-8), DATE/DATETIME2/DECIMAL text from digit tables; integers go through
    ``b'%d'``; every other column decodes its value with the decoder's own lines and is then
    formatted like ``_FastGen`` does."""

    def __init__(self, plan: list[tuple], columns: list[_ColumnCode], specs: list[ColumnSpec]) -> None:
        super().__init__(plan, columns)
        self.specs = specs
        self.g = _Gen()
        self.direct = 0  # columns whose text is produced from the bytes

    def column_lines(self, i: int, mode: str, tag: str) -> list[str]:
        c, (shape, cells) = self.specs[i], self.shapes[i]
        v, b, h = f"v{i}", f"b{tag}{i}", f"h{tag}{i}"
        t, meta = c.type, c.meta
        if shape == "chars" and c.codec == "utf-8" and t in _UTF8_TEXT:
            self.direct += 1
            width = meta if t not in (T.VARCHAR, T.VAR_STRING, T.STRING) else (1 if meta < 256 else 2)
            return self.g.length_prefixed(b, width) + [
                f"if not {b}.isascii():",
                f"    {b}.decode()",  # invalid UTF-8 raises, as the decoder does
                f"{h} = {self.pick(mode, i, cells['text_type'])}[len({b})]",
            ]
        fixed_str = shape == "fixed" and cells["fmt"] is str
        if fixed_str and t == T.DATETIME2:
            self.direct += 1
            lines = values.datetime2_lines(meta, v) + [f"pos += {5 + values.frac_size(meta)}"]
            lines.append(f"{b} = {v}.encode()")
        elif fixed_str and t in (T.DATE, T.NEWDATE):
            self.direct += 1
            lines = [
                "x = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16",
                "pos += 3",
                "y = x >> 9",
                f"{b} = f'{{_Y4[y] if y < 10000 else y}}-{{_P2[(x >> 5) & 15]}}-{{_P2[x & 31]}}'.encode()",
            ]
        elif shape == "fixed" and cells["fmt"] is _convert._decimal_text and t == T.NEWDECIMAL:
            self.direct += 1
            precision, scale = meta >> 8, meta & 0xFF
            lines = values.decimal_lines(precision, scale, v, self.g.const)
            last = lines[-1]
            head = f"{v} = _D("
            if not (last.startswith(head) and last.endswith(")")):
                raise ValueError("unexpected DECIMAL decoder source")
            lines[-1] = f"{v} = {last[len(head) : -1]}"
            lines += [
                f"if s and not {v}.strip('-0.'):",  # negative zero: no sign
                f"    {v} = {v}[1:]",
                f"pos += {values.decimal_size(precision, scale)}",
                f"{b} = {v}.encode()",
            ]
        else:
            return self.g.column(c, v) + self.value_lines(i, mode, v, b, h)
        return lines + [f"{h} = {self.pick(mode, i, cells['sql_type'])}[len({b})]"]

    def fused_image(self, mode: str, tag: str, keep: bool = False) -> list[str]:
        n = len(self.columns)
        nbytes = (n + 7) // 8
        read = "buf[pos]" if nbytes == 1 else f"_int(buf[pos:pos + {nbytes}], 'little')"
        lines = [f"nb = {read}", f"pos += {nbytes}"]
        null = {"insert": "NU{i}", "before": "NB{i}", "after": "(NU{i} if p{i} is not None else NS{i})"}[mode]
        for i in range(n):
            lines += [f"if nb & {1 << i}:", f"    h{tag}{i} = {null.format(i=i)}", f"    b{tag}{i} = b''"]
            if keep:
                lines.append(f"    p{i} = None")
            lines.append("else:")
            body = self.column_lines(i, mode, tag)
            if keep:
                body.append(f"p{i} = b{tag}{i}")
            lines += ["    " + line for line in body]
        return lines

    def compile_fused(self, kind: str) -> Any:
        n = len(self.columns)
        if kind == "UPDATE":
            body = self.fused_image("before", "x", keep=True) + self.fused_image("after", "y")
            parts = [f"hx{i}, bx{i}, S{i}" for i in range(n)] + [f"hy{i}, by{i}, S{i}" for i in range(n)]
        else:
            body = self.fused_image("before" if kind == "DELETE" else "insert", "x")
            parts = [f"hx{i}, bx{i}, S{i}" for i in range(n)]
        lines = [
            "def encode(buf, out):",
            "    put = out.append",
            "    pos = 0",
            "    end = len(buf)",
            "    count = 0",
            "    while pos < end:",
            *("        " + line for line in body),
            f"        r = join(({', '.join(parts)}))",
            "        put(ROWDATA[len(r)])",
            "        put(r)",
            "        count += 1",
            "    if pos != end:",
            "        raise ValueError('row data overrun')",
            "    return count",
        ]
        src = "\n".join(lines) + "\n"
        ns = dict(self.g.ns)
        ns.update(self.ns)
        exec(compile(src, f"<raw entry fused {kind} {n} cols>", "exec"), ns)
        encode = ns["encode"]
        encode.source = src
        encode.direct = self.direct
        return encode


_EVENT_TYPES = {"INSERT": pb.INSERT, "UPDATE": pb.UPDATE, "DELETE": pb.DELETE}
_ENTRY_TYPES = {t: b"\x10" + encode_varint(t) for t in pb.EntryType.values()}


class _TableCode:
    """One table's compiled encoders and constant Header/RowChange parts (per converter options)."""

    def __init__(self, plan: list[tuple], tm: TableMap) -> None:
        self.plan = plan
        self.columns = [_ColumnCode(i, name, key, mt, null) for i, name, key, mt, _c, null in plan]
        # Header: schemaName (8), tableName (9)
        self.header_table = _field_string(0x42, tm.schema) + _field_string(0x4A, tm.table)
        # RowChange: eventType (2, oneof: always written), isDdl (10, oneof: false is written)
        self.change_head = {
            kind: b"\x10" + encode_varint(t) + b"\x50\x00" for kind, t in _EVENT_TYPES.items()
        }
        self.header_event_type = {kind: b"\x58" + encode_varint(t) for kind, t in _EVENT_TYPES.items()}
        self._encoders: dict[str, Any] = {}
        self._fast: dict[str, Any] = {}
        self._gen: _FastGen | None = None
        self.tm = tm
        self._fused: dict[Any, Any] = {}

    def encoder(self, kind: str) -> Any:
        """The generic encoder (any row, also with ``MISSING`` columns)."""
        enc = self._encoders.get(kind)
        if enc is None:
            enc = self._encoders[kind] = _compile(self.plan, self.columns, kind)
        return enc

    def encode_rows(self, kind: str, rows: list, out: list[bytes]) -> None:
        """Append the ``rowDatas`` fields of ``rows`` to ``out``."""
        mark = len(out)
        try:
            self.fast_encoder(kind)(rows, out)
        except _Partial:  # a partial row image: every row of the event the generic way
            del out[mark:]
            self.encoder(kind)(rows, out)

    def fused_encoder(self, e: ev.RowsEvent, decode: Any) -> Any:
        """The fused encoder for the rows decoder ``decode`` (one per layout and bitmaps), or
        None when this layout keeps the value path: partial images and PARTIAL_UPDATE rows."""
        try:
            return self._fused[decode]
        except KeyError:
            pass
        enc = None
        n = self.tm.column_count
        full = list(range(n))
        partial_json = e.type == E.PARTIAL_UPDATE_ROWS
        if n and not partial_json and e.before_columns in (None, full) and e.after_columns in (None, full):
            try:
                enc = _FusedGen(self.plan, self.columns, decode.specs).compile_fused(e.kind)
            except (BinlogError, ValueError, KeyError):
                enc = None
        self._fused[decode] = enc
        return enc

    def fast_encoder(self, kind: str) -> Any:
        """The specialised encoder (raises ``_Partial`` at a ``MISSING`` column)."""
        enc = self._fast.get(kind)
        if enc is None:
            if self._gen is None:
                self._gen = _FastGen(self.plan, self.columns)
            enc = self._fast[kind] = self._gen.compile(kind)
        return enc


class RawEntryConverter:
    """``EntryConverter`` that returns each entry's serialized bytes (see the module notes).

    Same options as ``EntryConverter``; ``convert(event)`` returns ``list[bytes]``, equal to
    ``[e.SerializeToString() for e in EntryConverter(...).convert(event)]``. ``entries`` is the
    inner ``EntryConverter`` (non-rows events, GTID state).
    """

    def __init__(
        self,
        *,
        ddl_classifier: DdlClassifier | None = None,
        timezone: str | tzinfo | None = "UTC",
        enum_set: str = "index",
        gtid_set: Any = None,
        filter_query_dml: bool = False,
        fused: bool = True,
    ) -> None:
        self.fused = fused
        self.fused_events = 0  # rows events written by the fused path
        self.rows_converted = 0  # rows written into ROWDATA entries (without decoding them again)
        self.entries = EntryConverter(
            ddl_classifier=ddl_classifier,
            timezone=timezone,
            enum_set=enum_set,
            gtid_set=gtid_set,
            filter_query_dml=filter_query_dml,
        )
        self._code_key = ("pycanal.parse.rawentry", str(timezone), enum_set)
        self._file: str | None = None
        self._file_head = b""
        self._gtid_key: tuple[tuple[tuple[str, str], ...], str] | None = None
        self._gtid_tail: tuple[bytes, bytes] = (b"", b"")

    # ------------------------------------------------------------------ events
    def convert(self, event: ev.Event) -> list[bytes]:
        """The serialized entries of one decoded event (possibly none)."""
        return [r.raw for r in self.records(event)]  # type: ignore[misc]

    def convert_all(self, events: Iterable[ev.Event]) -> Iterator[bytes]:
        for event in events:
            yield from self.convert(event)

    def records(self, event: ev.Event, gtidlog: bool = True) -> list[Event]:
        """The entries of one decoded event as store records: each entry's bytes with what the
        transaction buffer, the sink and the store read (position, entry and event type, rows),
        known here and never parsed back. The events of every transaction (GTID/BEGIN, rows,
        ROWS_QUERY/ANNOTATE_ROWS, XID) are written as bytes; the rest goes through the inner
        ``EntryConverter``. ``gtidlog=False`` leaves GTIDLOG entries out (the transaction buffer
        drops them) but keeps the GTID state."""
        t = type(event)
        if t is ev.RowsEvent:
            return [self._rows_record(event, event.pos, event.size)]  # type: ignore[arg-type]
        if t is ev.TransactionPayloadEvent:
            out: list[Event] = []
            for inner in event.events:  # type: ignore[attr-defined]
                out += self._records(inner, event.pos, event.size, gtidlog)
            return out
        return self._records(event, event.pos, event.size, gtidlog)

    def _records(self, e: ev.Event, pos: int, size: int, gtidlog: bool) -> list[Event]:
        """``records`` for one event at ``pos``/``size`` (its own, or its TRANSACTION_PAYLOAD's)."""
        t = type(e)
        if t is ev.RowsEvent:
            return [self._rows_record(e, pos, size)]  # type: ignore[arg-type]
        if t is ev.XidEvent:
            end = _field_string(0x12, str(e.xid))  # type: ignore[attr-defined]  # transactionId (2)
            return [self._record(e, pos, size, pb.TRANSACTIONEND, b"", b"", pb.UPDATE, end)]
        if t is ev.GtidEvent and not getattr(e.info, "prepared_xa", False):  # type: ignore[attr-defined]
            if not self.entries.track_gtid(e):  # type: ignore[arg-type]
                return []
            out = []
            if gtidlog:  # eventType (11) GTID; storeValue: Pair{gtid}
                gtid = _pair("gtid", e.gtid)  # type: ignore[attr-defined]
                out.append(self._record(e, pos, size, pb.GTIDLOG, b"", b"\x58\x0c", pb.GTID, gtid))
            info = e.info  # type: ignore[attr-defined]
            if e.type == E.MARIADB_GTID and not info.standalone:  # the GTID event opens the transaction
                begin = _field_int(0x20, info.thread_id or 0)  # TransactionBegin.threadId (4)
                out.append(self._record(e, pos, size, pb.TRANSACTIONBEGIN, b"", b"", pb.UPDATE, begin))
            return out
        if t is ev.RowsQueryEvent and not self.entries.filter_query_dml:
            sql = e.query  # type: ignore[attr-defined]
            table = b""
            if e.type == E.ROWS_QUERY:
                table = _field_string(0x4A, self.entries.rows_query_table(sql))
            change = b"\x10\x07" + _field_string(
                0x5A, entry_text(sql)
            )  # RowChange eventType (2) QUERY, sql (11)
            return [self._record(e, pos, size, pb.ROWDATA, table, b"\x58\x07", pb.QUERY, change)]
        if t is ev.QueryEvent and e.query == "BEGIN":  # type: ignore[attr-defined]
            begin = _field_int(0x20, e.thread_id)  # type: ignore[attr-defined]
            return [self._record(e, pos, size, pb.TRANSACTIONBEGIN, b"", b"", pb.UPDATE, begin)]
        out = []
        for entry in self.entries.convert(e):
            if entry.entryType == pb.GTIDLOG and not gtidlog:
                continue
            if entry.entryType != pb.HEARTBEAT and (pos, size) != (e.pos, e.size):
                entry.header.logfileOffset = pos
                entry.header.eventLength = size
            out.append(Event.from_entry(entry))
        return out

    def _record(
        self, e: ev.Event, pos: int, size: int, entry_type: int, table: bytes, event_type_field: bytes,
        event_type: int, value: bytes,
    ) -> Event:  # fmt: skip
        """A record whose Header has no schema (``table``: the tableName field, if any) and no
        rowsCount; ``event_type_field`` is the Header's eventType field (or nothing)."""
        file_head, props, gtid = self._header_state(e)
        header = b"".join(
            (file_head, _field_int(0x18, pos), _stamp(e.server_id, e.timestamp), table, _field_int(0x50, size),
             event_type_field, props, gtid)
        )  # fmt: skip
        # Entry: header (1), entryType (2, a oneof member: always written), storeValue (3)
        data = b"".join((b"\x0a", encode_varint(len(header)), header, _ENTRY_TYPES[entry_type],
                         _field_bytes(0x1A, value) if value else b""))  # fmt: skip
        return Event.record(data, e.file, pos, size, e.timestamp * 1000, e.server_id, self.entries.gtid_text,
                            entry_type, event_type)  # fmt: skip

    def _rows_record(self, e: ev.RowsEvent, pos: int, size: int) -> Event:
        nrows, data = self._rows(e, pos, size)
        return Event.record(data, e.file, pos, size, e.timestamp * 1000, e.server_id, self.entries.gtid_text,
                            pb.ROWDATA, _EVENT_TYPES[e.kind], nrows)  # fmt: skip

    # ------------------------------------------------------------------ rows
    def _table(self, tm: TableMap) -> _TableCode:
        code = tm.decoders.get(self._code_key)
        if code is None:
            code = tm.decoders[self._code_key] = _TableCode(self.entries.column_plan(tm), tm)
        return code

    def _rows(self, e: ev.RowsEvent, pos: int, size: int) -> tuple[int, bytes]:
        """(row count, the entry's bytes)."""
        code = self._code(e)
        nrows, change = self._change(e, code)
        self.rows_converted += nrows
        head, tail = self._header(e, pos, size, code)
        return nrows, entry_bytes(head, nrows, tail, change)

    def _code(self, e: ev.RowsEvent) -> _TableCode:
        tm = e.table_map
        if tm is None:
            raise TableIdNotFoundError(e.table_id, e.file, e.pos)
        return self._table(tm)

    def _change(self, e: ev.RowsEvent, code: _TableCode) -> tuple[int, bytes]:
        """(row count, RowChange bytes): the fused path if it takes the event, else the values."""
        if self.fused:
            source = _row_source(e)
            if source is not None:
                fused = code.fused_encoder(e, source[0])
                if fused is not None:
                    parts = [change_head(code, e.kind, e.table_id)]
                    try:
                        nrows = fused(source[1], parts)
                    except Exception:  # bad row data: the decoder reports it (or decodes it)
                        pass
                    else:
                        self.fused_events += 1
                        return nrows, b"".join(parts)
        return value_change(e, code)

    def _header(self, e: ev.RowsEvent, pos: int, size: int, code: _TableCode) -> tuple[bytes, bytes]:
        """The Header's bytes before its ``rowsCount`` prop and after it (the gtid field)."""
        file_head, props, gtid = self._header_state(e)
        return header_head(file_head, props, code, e.kind, pos, size, e.server_id, e.timestamp), gtid

    def _header_state(self, e: ev.Event) -> tuple[bytes, bytes, bytes]:
        """The Header fields that follow the file and GTID state: version and logfileName, the
        ``curtGtid*`` props, gtid. The same objects while the state stays (``pycanal.parse.pool``
        ships them once per change)."""
        if e.file != self._file:
            self._file = e.file
            self._file_head = b"\x08\x01" + _field_string(0x12, e.file)  # version (1), logfileName (2)
        conv = self.entries
        gtid_key = (tuple(conv.gtid_props), conv.gtid_text)
        if gtid_key != self._gtid_key:
            props = b"".join(_field_bytes(0x62, _pair(k, v)) for k, v in conv.gtid_props)
            self._gtid_tail = (props, _field_string(0x6A, conv.gtid_text))  # props (12), gtid (13)
            self._gtid_key = gtid_key
        return self._file_head, *self._gtid_tail


_STAMPS: dict[tuple[int, int], bytes] = {}


def _stamp(server_id: int, timestamp: int) -> bytes:
    """Header fields serverId (4), serverenCode (5), executeTime (6) and sourceType (7) MYSQL: the
    same for every entry of a second of binlog time."""
    key = (server_id, timestamp)
    out = _STAMPS.get(key)
    if out is None:
        if len(_STAMPS) >= 64:
            _STAMPS.clear()
        out = _STAMPS[key] = b"".join(
            (_field_int(0x20, server_id), b"\x2a\x05UTF-8", _field_int(0x30, timestamp * 1000), b"\x38\x02")
        )
    return out


def header_head(
    file_head: bytes,
    props: bytes,
    code: _TableCode,
    kind: str,
    pos: int,
    size: int,
    server_id: int,
    timestamp: int,
) -> bytes:
    """A rows entry's Header up to its ``rowsCount`` prop (``_header_state`` gives the state)."""
    return b"".join(
        (
            file_head,  # version (1), logfileName (2)
            _field_int(0x18, pos),  # logfileOffset (3)
            _stamp(server_id, timestamp),  # serverId (4) .. sourceType (7)
            code.header_table,  # schemaName (8), tableName (9)
            _field_int(0x50, size),  # eventLength (10)
            code.header_event_type[kind],  # eventType (11)
            props,  # props (12): curtGtid*
        )
    )


def change_head(code: _TableCode, kind: str, table_id: int) -> bytes:
    """RowChange fields in front of ``rowDatas``: tableId (1), eventType (2), isDdl (10)."""
    return _field_int(0x08, table_id) + code.change_head[kind]


def value_change(e: ev.RowsEvent, code: _TableCode) -> tuple[int, bytes]:
    """(row count, RowChange bytes) from the decoded rows (raises the decoder's errors)."""
    rows = e.rows
    parts = [change_head(code, e.kind, e.table_id)]
    code.encode_rows(e.kind, rows, parts)
    return len(rows), b"".join(parts)


def entry_bytes(head: bytes, nrows: int, tail: bytes, change: bytes) -> bytes:
    """A ROWDATA Entry from ``RawEntryConverter._header``'s parts, the row count (the Header's
    ``rowsCount`` prop, left out for none) and the RowChange bytes."""
    count = _field_bytes(0x62, _pair("rowsCount", str(nrows))) if nrows > 0 else b""
    header = b"".join((head, count, tail))
    # Entry: header (1), entryType (2) ROWDATA, storeValue (3)
    return b"".join(
        (b"\x0a", encode_varint(len(header)), header, b"\x10\x02\x1a", encode_varint(len(change)), change)
    )
