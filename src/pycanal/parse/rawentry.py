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

So one value costs its ``conv`` call, a UTF-8 encode, two dict look-ups and three appends. The
Header's table part is encoded once per table, its GTID props once per GTID event.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import tzinfo
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.rows import MISSING
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.convert import DdlClassifier, EntryConverter, TableIdNotFoundError
from pycanal.protocol import EntryProtocol_pb2 as pb

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


_EVENT_TYPES = {"INSERT": pb.INSERT, "UPDATE": pb.UPDATE, "DELETE": pb.DELETE}


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

    def encoder(self, kind: str) -> Any:
        enc = self._encoders.get(kind)
        if enc is None:
            enc = self._encoders[kind] = _compile(self.plan, self.columns, kind)
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
    ) -> None:
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
        if isinstance(event, ev.RowsEvent):
            return [self._rows(event, event.pos, event.size)]
        if isinstance(event, ev.TransactionPayloadEvent):
            out: list[bytes] = []
            for inner in event.events:
                if isinstance(inner, ev.RowsEvent):
                    out.append(self._rows(inner, event.pos, event.size))
                    continue
                for entry in self.entries.convert(inner):
                    if entry.entryType != pb.HEARTBEAT:
                        entry.header.logfileOffset = event.pos
                        entry.header.eventLength = event.size
                    out.append(entry.SerializeToString())
            return out
        return [entry.SerializeToString() for entry in self.entries.convert(event)]

    def convert_all(self, events: Iterable[ev.Event]) -> Iterator[bytes]:
        for event in events:
            yield from self.convert(event)

    # ------------------------------------------------------------------ rows
    def _table(self, tm: TableMap) -> _TableCode:
        code = tm.decoders.get(self._code_key)
        if code is None:
            code = tm.decoders[self._code_key] = _TableCode(self.entries.column_plan(tm), tm)
        return code

    def _rows(self, e: ev.RowsEvent, pos: int, size: int) -> bytes:
        tm = e.table_map
        if tm is None:
            raise TableIdNotFoundError(e.table_id, e.file, e.pos)
        code = self._table(tm)
        kind = e.kind
        rows = e.rows
        # RowChange: tableId (1), eventType (2), isDdl (10), rowDatas (12)
        parts = [_field_int(0x08, e.table_id), code.change_head[kind]]
        code.encoder(kind)(rows, parts)
        change = b"".join(parts)

        if e.file != self._file:
            self._file = e.file
            self._file_head = b"\x08\x01" + _field_string(0x12, e.file)  # version (1), logfileName (2)
        conv = self.entries
        gtid_key = (tuple(conv.gtid_props), conv.gtid_text)
        if gtid_key != self._gtid_key:
            props = b"".join(_field_bytes(0x62, _pair(k, v)) for k, v in conv.gtid_props)
            self._gtid_tail = (props, _field_string(0x6A, conv.gtid_text))
            self._gtid_key = gtid_key
        props, gtid = self._gtid_tail
        nrows = len(rows)
        header = b"".join(
            (
                self._file_head,
                _field_int(0x18, pos),  # logfileOffset (3)
                _field_int(0x20, e.server_id),  # serverId (4)
                b"\x2a\x05UTF-8",  # serverenCode (5)
                _field_int(0x30, e.timestamp * 1000),  # executeTime (6)
                b"\x38\x02",  # sourceType (7) MYSQL
                code.header_table,  # schemaName (8), tableName (9)
                _field_int(0x50, size),  # eventLength (10)
                code.header_event_type[kind],  # eventType (11)
                props,  # props (12): curtGtid*
                _field_bytes(0x62, _pair("rowsCount", str(nrows))) if nrows > 0 else b"",
                gtid,  # gtid (13)
            )
        )
        # Entry: header (1), entryType (2) ROWDATA, storeValue (3)
        return b"".join(
            (
                b"\x0a",
                encode_varint(len(header)),
                header,
                b"\x10\x02\x1a",
                encode_varint(len(change)),
                change,
            )
        )
