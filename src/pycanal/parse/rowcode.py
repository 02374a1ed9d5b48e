"""Per-table generated code: rows events -> the bytes of their ``RowChange`` (Canal's row images).

Building one protobuf ``Column`` message per value costs more than decoding the row, so the rows
of a table are written as protobuf wire bytes (:mod:`pycanal.protocol.wire`) by straight-line Python
compiled per TABLE_MAP (and converter options), like the row decoder (``pycanal.binlog.rows``)
does. Per column it keeps

* the whole encoded ``Column`` (with its RowData field tag and length) for each NULL variant
  (before image; after image updated / not updated), and
* for non-NULL values, everything in front of the value text - RowData tag, Column length,
  index, sqlType, name, isKey, updated, isNull, the value's tag and length - looked up by
  (sqlType, byte length of the value), plus the constant ``mysqlType`` field that follows it.

The column rules are :mod:`pycanal.parse.columns`' declarative ``ColumnRule``s; the code
generator dispatches on their kind and parameters, so an INTEGER is ``b'%d' % v`` and one look-up
of its head by byte length, an UNSIGNED the same with its widening bound inline, a str in a CHARS
column one ``encode``, a UTC TIMESTAMP its decoder text, a DECIMAL ``decimal_text`` inlined; other
FORMATTED texts call their format, and ENUM, SET, JSON (and bytes in a CHARS column) call the
rule's ``convert``. Per row each column gives three variables (head, value bytes, ``mysqlType``
field) joined once; an UPDATE's updated flag compares the UTF-8 bytes of the two texts (equal
exactly when the texts are).

Three encoders per table and kind:

* fused (:class:`_FusedGen`): the row data bytes straight to ``rowDatas`` fields, for rows not
  decoded yet: utf8 strings are their (checked) bytes, DATE/DATETIME2/DECIMAL text from digit
  tables, other columns decoded by the row decoder's own lines;
* fast (:class:`_FastGen`): the decoded values, no ``MISSING`` column (it raises ``_Partial``);
* generic (:func:`_compile`): any decoded row, partial images included: per value its
  ``convert`` call, a UTF-8 encode, two dict look-ups and three appends.
"""

from __future__ import annotations

import functools
from types import CodeType
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog import values
from pycanal.binlog.constants import ColumnType as T
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import BinlogError
from pycanal.binlog.rows import MISSING, ColumnSpec, _Gen
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.columns import EntryColumn, Kind, Text
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.wire import CACHE_LIMIT, Prefixes, encode_varint, field_bytes, field_int, field_string

__all__ = ["EVENT_TYPES", "TableCode"]

EVENT_TYPES = {"INSERT": pb.INSERT, "UPDATE": pb.UPDATE, "DELETE": pb.DELETE}
_ROWDATA = Prefixes(0x62)  # RowChange.rowDatas (12)


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
        if n < CACHE_LIMIT:
            self[n] = out
        return out


class _TypedHeads(dict):
    """``_ValueHeads`` by sqlType (``convert`` may pick the sqlType per value: unsigned widening,
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

    def __init__(self, column: EntryColumn) -> None:
        self.index = column.index
        self.name = field_string(0x1A, column.name)
        self.key = b"\x20\x01" if column.is_key else b""
        self.suffix = field_string(0x52, column.mysql_type)  # Column.mysqlType (10)
        before, after = b"\x0a", b"\x12"  # RowData.beforeColumns (1) / afterColumns (2)
        self.before = _TypedHeads(self, before, False)
        self.after_updated = _TypedHeads(self, after, True)
        self.after_same = _TypedHeads(self, after, False)
        null_type = column.rule.null_type
        self.null_before = self._null(before, null_type, False)
        self.null_updated = self._null(after, null_type, True)
        self.null_same = self._null(after, null_type, False)

    def pre(self, sql_type: int, updated: bool, is_null: bool) -> bytes:
        """Column fields 1-6: index, sqlType, name, isKey, updated, isNull."""
        return b"".join(
            (
                field_int(0x08, self.index),
                field_int(0x10, sql_type),
                self.name,
                self.key,
                b"\x28\x01" if updated else b"",
                b"\x30\x01" if is_null else b"\x30\x00",
            )
        )

    def _null(self, side: bytes, sql_type: int, updated: bool) -> bytes:
        return field_bytes(side[0], self.pre(sql_type, updated, True) + self.suffix)

    def null_head(self, null: bytes) -> bytes:
        """A NULL Column without its trailing ``mysqlType`` field (the fast code appends it)."""
        return null[: len(null) - len(self.suffix)]


def _namespace(plan: list[EntryColumn], columns: list[_ColumnCode], whole_nulls: bool) -> dict[str, Any]:
    """The generated code's globals: per column ``i`` its ``convert`` (C), ``mysqlType`` field (S),
    value heads (HB/HU/HS: before; after updated / not) and NULL Columns (NB/NU/NS; without their
    ``mysqlType`` field unless ``whole_nulls``)."""
    ns: dict[str, Any] = {"MISSING": MISSING, "ROWDATA": _ROWDATA, "join": b"".join}
    for col, c in zip(plan, columns, strict=True):
        i = col.index
        ns[f"C{i}"] = col.rule.convert
        ns[f"S{i}"] = c.suffix
        ns[f"HB{i}"] = c.before
        ns[f"HU{i}"] = c.after_updated
        ns[f"HS{i}"] = c.after_same
        for name, null in (("NB", c.null_before), ("NU", c.null_updated), ("NS", c.null_same)):
            ns[f"{name}{i}"] = null if whole_nulls else c.null_head(null)
    return ns


@functools.lru_cache(maxsize=1024)
def _code(src: str, name: str) -> CodeType:
    """``src`` compiled once: tables of one column shape have the same source, and their own
    constants in ``ns`` (1,000 tables of one shape compiled it 1,000 times: 11% of a parser's time)."""
    return compile(src, name, "exec")


def _define(src: str, ns: dict[str, Any], name: str) -> Any:
    """Compile ``src`` (which defines ``encode``) in ``ns``; the function keeps its source."""
    exec(_code(src, name), ns)
    encode = ns["encode"]
    encode.source = src
    return encode


# ------------------------------------------------------------------------------ generic code
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


def _images(kind: str) -> tuple[str, list[tuple[str, str, str, bool]]]:
    """(the loop over an event's rows, its row images) for ``kind``. Per image: its variable, its
    mode (see ``_image_lines``), the tag of its generated names, and whether its texts are kept
    for the next image's updated flags (an UPDATE's before image)."""
    if kind == "UPDATE":
        return "for before, after in rows:", [("before", "before", "x", True), ("after", "after", "y", False)]
    return "for row in rows:", [("row", "before" if kind == "DELETE" else "insert", "x", False)]


def _compile(plan: list[EntryColumn], columns: list[_ColumnCode], kind: str) -> Any:
    """``encode(rows, out)``: append every row's ``RowChange.rowDatas`` field to list ``out``."""
    n = len(plan)
    ns = _namespace(plan, columns, whole_nulls=True)
    ns["ABSENT"] = object()
    loop, images = _images(kind)
    body = [line for var, mode, _tag, _keep in images for line in _image_lines(n, var, mode)]
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
    return _define("\n".join(lines) + "\n", ns, f"<raw entry {kind} {n} cols>")


# ------------------------------------------------------------------------------ fast code
class _Partial(Exception):
    """A row image lacks a column (``MISSING``): the event goes through the generic encoder."""


class _FastGen:
    """Straight-line code for rows without ``MISSING`` columns: per column three variables (head,
    value bytes, ``mysqlType`` field) joined once per row; values formatted per rule."""

    def __init__(self, plan: list[EntryColumn], columns: list[_ColumnCode]) -> None:
        self.ns = _namespace(plan, columns, whole_nulls=False)
        self.ns["Partial"] = _Partial
        self.rules = [col.rule for col in plan]
        self.columns = columns

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

    def null_lines(self, i: int, mode: str, tag: str, keep: bool) -> list[str]:
        """Lines for a NULL in column ``i``: its head, no value bytes (``keep``: ``p<i>`` None)."""
        null = {"insert": "NU{i}", "before": "NB{i}", "after": "(NU{i} if p{i} is not None else NS{i})"}[mode]
        lines = [f"    h{tag}{i} = {null.format(i=i)}", f"    b{tag}{i} = b''"]
        if keep:
            lines.append(f"    p{i} = None")
        return lines

    def image(self, var: str, mode: str, tag: str, keep: bool = False) -> list[str]:
        """Lines setting ``h<tag><i>``/``b<tag><i>`` for each column of tuple ``var``; ``keep``
        (UPDATE before image) also keeps each value's bytes in ``p<i>`` (None for NULL)."""
        n = len(self.columns)
        if n == 0:
            return []
        targets = ", ".join(f"v{i}" for i in range(n)) + ("," if n == 1 else "")
        lines = [f"{targets} = {var}"]
        for i in range(n):
            v, b, h = f"v{i}", f"b{tag}{i}", f"h{tag}{i}"
            lines += [f"if {v} is None:", *self.null_lines(i, mode, tag, keep)]
            lines += [f"elif {v} is MISSING:", "    raise Partial", "else:"]
            body = self.value_lines(i, mode, v, b, h)
            if keep:
                body.append(f"p{i} = {b}")
            lines += ["    " + line for line in body]
        return lines

    def value_lines(self, i: int, mode: str, v: str, b: str, h: str) -> list[str]:
        """Lines turning the (non-NULL) value ``v`` of column ``i`` into its text bytes ``b``
        and Column head ``h``."""
        rule = self.rules[i]
        kind = rule.kind
        body: list[str] = []
        if kind is Kind.INTEGER:
            body += [f"{b} = b'%d' % {v}", f"{h} = {self.pick(mode, i, rule.sql_type)}[len({b})]"]
        elif kind is Kind.UNSIGNED:
            self.ns[f"L{i}"] = rule.limit
            wide = self.pick(mode, i, rule.widened)
            base = self.pick(mode, i, rule.sql_type)
            body += [f"{b} = b'%d' % {v}", f"{h} = ({wide} if {v} >= L{i} else {base})[len({b})]"]
        elif kind is Kind.FORMATTED:
            if rule.text is Text.STR:
                body.append(f"{b} = str({v}).encode()")
            elif rule.text is Text.AS_IS:
                body.append(f"{b} = {v}.encode()")
            elif rule.text is Text.DECIMAL:
                body += [
                    f"s = f'{{{v}:f}}'",
                    f"if s[0] == '-' and not {v}:",  # no negative zero
                    "    s = s[1:]",
                    f"{b} = s.encode()",
                ]
            else:
                self.ns[f"F{i}"] = rule.format
                body.append(f"{b} = F{i}({v}).encode()")
            body.append(f"{h} = {self.pick(mode, i, rule.sql_type)}[len({b})]")
        elif kind is Kind.CHARS:
            body += [
                f"if type({v}) is str:",
                f"    {b} = {v}.encode()",
                f"    {h} = {self.pick(mode, i, rule.sql_type)}[len({b})]",
                "else:",
                *("    " + line for line in self.call_lines(i, mode, v, b, h)),
            ]
        else:
            body += self.call_lines(i, mode, v, b, h)
        return body

    def call_lines(self, i: int, mode: str, v: str, b: str, h: str) -> list[str]:
        """Lines calling the rule's ``convert`` (it picks the sqlType)."""
        return [f"t, s = C{i}({v})", f"{b} = s.encode()", f"{h} = {self.pick(mode, i, None)}[t][len({b})]"]

    def row_parts(self, images: list[tuple[str, str, str, bool]]) -> str:
        """The joined parts of one row: per image and column its head, value bytes and
        ``mysqlType`` field."""
        n = len(self.columns)
        return ", ".join(
            f"h{tag}{i}, b{tag}{i}, S{i}" for _var, _mode, tag, _keep in images for i in range(n)
        )

    def compile(self, kind: str) -> Any:
        n = len(self.columns)
        loop, images = _images(kind)
        body = [line for var, mode, tag, keep in images for line in self.image(var, mode, tag, keep)]
        lines = [
            "def encode(rows, out):",
            "    put = out.append",
            f"    {loop}",
            *("        " + line for line in body),
            f"        r = join(({self.row_parts(images)}))",
            "        put(ROWDATA[len(r)])",
            "        put(r)",
        ]
        return _define("\n".join(lines) + "\n", self.ns, f"<raw entry fast {kind} {n} cols>")


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

    def __init__(self, plan: list[EntryColumn], columns: list[_ColumnCode], specs: list[ColumnSpec]) -> None:
        super().__init__(plan, columns)
        self.specs = specs
        self.g = _Gen()
        self.direct = 0  # columns whose text is produced from the bytes

    def column_lines(self, i: int, mode: str, tag: str) -> list[str]:
        c, rule = self.specs[i], self.rules[i]
        v, b, h = f"v{i}", f"b{tag}{i}", f"h{tag}{i}"
        t, meta = c.type, c.meta
        if rule.kind is Kind.CHARS and c.codec == "utf-8" and t in _UTF8_TEXT:
            self.direct += 1
            width = meta if t not in (T.VARCHAR, T.VAR_STRING, T.STRING) else (1 if meta < 256 else 2)
            return self.g.length_prefixed(b, width) + [
                f"if not {b}.isascii():",
                f"    {b}.decode()",  # invalid UTF-8 raises, as the decoder does
                f"{h} = {self.pick(mode, i, rule.sql_type)}[len({b})]",
            ]
        fixed_str = rule.kind is Kind.FORMATTED and rule.text is Text.STR
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
        elif rule.kind is Kind.FORMATTED and rule.text is Text.DECIMAL and t == T.NEWDECIMAL:
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
        return lines + [f"{h} = {self.pick(mode, i, rule.sql_type)}[len({b})]"]

    def fused_image(self, mode: str, tag: str, keep: bool = False) -> list[str]:
        n = len(self.columns)
        nbytes = (n + 7) // 8
        read = "buf[pos]" if nbytes == 1 else f"_int(buf[pos:pos + {nbytes}], 'little')"
        lines = [f"nb = {read}", f"pos += {nbytes}"]
        for i in range(n):
            lines += [f"if nb & {1 << i}:", *self.null_lines(i, mode, tag, keep), "else:"]
            body = self.column_lines(i, mode, tag)
            if keep:
                body.append(f"p{i} = b{tag}{i}")
            lines += ["    " + line for line in body]
        return lines

    def compile_fused(self, kind: str) -> Any:
        n = len(self.columns)
        _loop, images = _images(kind)
        body = [line for _var, mode, tag, keep in images for line in self.fused_image(mode, tag, keep)]
        lines = [
            "def encode(buf, out):",
            "    put = out.append",
            "    pos = 0",
            "    end = len(buf)",
            "    count = 0",
            "    while pos < end:",
            *("        " + line for line in body),
            f"        r = join(({self.row_parts(images)}))",
            "        put(ROWDATA[len(r)])",
            "        put(r)",
            "        count += 1",
            "    if pos != end:",
            "        raise ValueError('row data overrun')",
            "    return count",
        ]
        ns = dict(self.g.ns)
        ns.update(self.ns)
        encode = _define("\n".join(lines) + "\n", ns, f"<raw entry fused {kind} {n} cols>")
        encode.direct = self.direct
        return encode


# ------------------------------------------------------------------------------ one table
class TableCode:
    """One table's compiled encoders and constant Header/RowChange parts (per converter options)."""

    def __init__(self, plan: list[EntryColumn], tm: TableMap) -> None:
        self.plan = plan
        self.columns = [_ColumnCode(col) for col in plan]
        # Header: schemaName (8), tableName (9)
        self.header_table = field_string(0x42, tm.schema) + field_string(0x4A, tm.table)
        # RowChange: eventType (2, oneof: always written), isDdl (10, oneof: false is written)
        self.change_head = {kind: b"\x10" + encode_varint(t) + b"\x50\x00" for kind, t in EVENT_TYPES.items()}
        self.header_event_type = {kind: b"\x58" + encode_varint(t) for kind, t in EVENT_TYPES.items()}
        self._encoders: dict[str, Any] = {}
        self._fast: dict[str, Any] = {}
        self._gen: _FastGen | None = None
        self.tm = tm
        self._fused: dict[Any, Any] = {}

    def change(self, e: ev.RowsEvent, fused: bool) -> tuple[int, bytes, bool]:
        """(row count, RowChange bytes, whether the fused path wrote them): the fused path if
        ``fused`` and it takes the event, else the decoded rows (raising the decoder's errors)."""
        head = field_int(0x08, e.table_id) + self.change_head[e.kind]  # RowChange.tableId (1)
        if fused:
            source = _row_source(e)
            if source is not None:
                encode = self.fused_encoder(e, source[0])
                if encode is not None:
                    parts = [head]
                    try:
                        nrows = encode(source[1], parts)
                    except Exception:  # noqa: BLE001 - bad row data: the decoder reports it (or decodes it)
                        pass
                    else:
                        return nrows, b"".join(parts), True
        rows = e.rows
        parts = [head]
        self.encode_rows(e.kind, rows, parts)
        return len(rows), b"".join(parts), False

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
