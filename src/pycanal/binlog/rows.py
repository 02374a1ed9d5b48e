"""Row images: a decoder generated per table layout, compiled once and cached.

Decoding field by field through a dispatch table is what makes Python binlog readers slow. Here
each (TABLE_MAP layout, columns-present bitmap) gets straight-line Python source: one
``struct.unpack_from`` per run of fixed-width columns when a row has no NULLs, specialised
DECIMAL/temporal helpers, and no per-field dispatch.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from . import values
from .constants import ColumnType as T
from .errors import BinlogError
from .packed import read_packed_int
from .tablemap import MARIADB_BLOB_COMPRESSED, MARIADB_VARCHAR_COMPRESSED, TableMap


class _Missing:
    """Marks a column absent from a partial (MINIMAL/NOBLOB) row image."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING = _Missing()


class JsonText(str):
    """A JSON column value: its JSON text, so canonical output can embed it as JSON.

    ``tree`` keeps the decoded document where a later partial update (JSON diff) needs it.
    """

    tree: object = None


def json_value(raw: bytes, keep_tree: bool = False) -> JsonText:
    from .jsonb import decode_jsonb, to_json_text

    tree = decode_jsonb(raw)
    text = JsonText(to_json_text(tree))
    if keep_tree:
        text.tree = tree
    return text


class JsonPatch(list):
    """A partially updated JSON column whose before image was not logged (MINIMAL row image):
    only the server's diff is known, as ``[(operation, path, value or None), ...]``."""


def json_patched(before: object, diff: bytes) -> JsonText | JsonPatch:
    """After-image value of a partially updated JSON column: the before document with the diff
    applied, or the diff itself when the before image does not carry the column."""
    from .jsonb import apply_json_diff, parse_json_diff, to_json_text

    if not isinstance(before, JsonText):
        return JsonPatch(parse_json_diff(diff))
    tree = apply_json_diff(before.tree, diff)
    text = JsonText(to_json_text(tree))
    text.tree = tree
    return text


@dataclass(slots=True, frozen=True)
class ColumnSpec:
    """What the row decoder needs to know about one column."""

    type: int
    meta: int
    unsigned: bool = False
    codec: str | None = "?"  # Python codec; None = binary (bytes); "?" = unknown charset
    enum_labels: tuple[str, ...] | None = None
    set_labels: tuple[str, ...] | None = None


def text_unknown(raw: bytes) -> str | bytes:
    """A string column whose charset the binlog did not log: UTF-8 if it is valid, else bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def set_members(mask: int, labels: tuple[str, ...]) -> list[str]:
    if mask >> len(labels):
        raise ValueError(f"SET value {mask} has bits beyond its {len(labels)} labels")
    return [label for bit, label in enumerate(labels) if mask >> bit & 1]


def mariadb_uncompress_column(raw: bytes) -> bytes:
    """MariaDB COMPRESSED columns: a header byte (bit 7 = compressed, bit 3 = raw deflate without
    the zlib wrapper, low 3 bits = width of the big-endian original size), then the data."""
    if not raw:
        return raw
    head = raw[0]
    if not head & 0x80:
        return raw[1:]
    width = head & 0x07
    size = int.from_bytes(raw[1 : 1 + width], "big")
    data = zlib.decompress(raw[1 + width :], -zlib.MAX_WBITS if head & 0x08 else zlib.MAX_WBITS)
    if len(data) != size:
        raise ValueError(f"compressed column expands to {len(data)} bytes, header says {size}")
    return data


_STRUCT_CODES = {T.TINY: "b", T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q", T.FLOAT: "f", T.DOUBLE: "d"}
_FIXED_UNSIGNED = {T.TINY: "B", T.SHORT: "H", T.LONG: "I", T.LONGLONG: "Q"}


class _Gen:
    """Builds the source of one decoder function, with its helper namespace."""

    def __init__(self) -> None:
        self.ns: dict[str, object] = {
            "_v": values,
            "_D": Decimal,
            "_Y4": values.Y4,
            "_P2": values.P2,
            "MISSING": MISSING,
            "BinlogError": BinlogError,
            "_text_unknown": text_unknown,
            "_set_members": set_members,
            "_uncompress": mariadb_uncompress_column,
            "_int": int.from_bytes,
            "_packed": read_packed_int,
            "_json": json_value,
            "_json_patched": json_patched,
        }
        self.n = 0
        self.keep_json_tree = False
        self.partial_bits: dict[int, int] = {}

    def const(self, value: object, prefix: str = "_c") -> str:
        self.n += 1
        name = f"{prefix}{self.n}"
        self.ns[name] = value
        return name

    def struct_code(self, c: ColumnSpec) -> str | None:
        if c.type in _STRUCT_CODES:
            return _FIXED_UNSIGNED.get(c.type, _STRUCT_CODES[c.type]) if c.unsigned else _STRUCT_CODES[c.type]
        if c.type == T.YEAR:
            return "B"
        if c.type == T.ENUM and c.meta in (1, 2):
            return "B" if c.meta == 1 else "H"
        if c.type == T.SET and c.meta in (1, 2, 4, 8):
            return {1: "B", 2: "H", 4: "I", 8: "Q"}[c.meta]
        return None

    def post(self, c: ColumnSpec, v: str) -> list[str]:
        """Lines that turn the raw struct value in ``v`` into the column value."""
        if c.type == T.FLOAT:
            return [f"{v} = _v.float32({v})"]
        if c.type == T.YEAR:
            return [f"{v} = _v.year({v})"]
        if c.type == T.ENUM and c.enum_labels is not None:
            labels = self.const(("",) + c.enum_labels, "_enum")
            return [f"{v} = {labels}[{v}]"]
        if c.type == T.SET and c.set_labels is not None:
            labels = self.const(c.set_labels, "_set")
            return [f"{v} = _set_members({v}, {labels})"]
        return []

    def length_prefixed(self, v: str, width: int) -> list[str]:
        if width == 1:
            return ["n = buf[pos]", f"{v} = buf[pos + 1:pos + 1 + n]", "pos += 1 + n"]
        if width == 2:
            return ["n = buf[pos] | buf[pos + 1] << 8", f"{v} = buf[pos + 2:pos + 2 + n]", "pos += 2 + n"]
        return [
            f"n = _int(buf[pos:pos + {width}], 'little')",
            f"{v} = buf[pos + {width}:pos + {width} + n]",
            f"pos += {width} + n",
        ]

    def text(self, c: ColumnSpec, v: str) -> list[str]:
        if c.codec is None:
            return []
        if c.codec == "?":
            return [f"{v} = _text_unknown({v})"]
        return [f"{v} = {v}.decode({c.codec!r})"]

    def column(self, c: ColumnSpec, v: str) -> list[str]:
        """Lines decoding one non-NULL value of column ``c`` at ``pos`` into ``v``."""
        t, meta = c.type, c.meta
        code = self.struct_code(c)
        if code is not None:
            s = self.const(struct.Struct("<" + code), "_st")
            return [f"{v}, = {s}.unpack_from(buf, pos)", f"pos += {struct.calcsize(code)}"] + self.post(c, v)
        if t == T.INT24:
            return [f"{v} = _int(buf[pos:pos + 3], 'little', signed={not c.unsigned})", "pos += 3"]
        if t == T.NEWDECIMAL:
            precision, scale = meta >> 8, meta & 0xFF
            return values.decimal_lines(precision, scale, v, self.const) + [
                f"pos += {values.decimal_size(precision, scale)}"
            ]
        if t == T.DATETIME2:
            return values.datetime2_lines(meta, v) + [f"pos += {5 + values.frac_size(meta)}"]
        if t == T.TIMESTAMP2:
            return [f"{v} = _v.timestamp2(buf, pos, {meta})", f"pos += {4 + values.frac_size(meta)}"]
        if t == T.TIME2:
            return [f"{v} = _v.time2(buf, pos, {meta})", f"pos += {3 + values.frac_size(meta)}"]
        if t in (T.DATE, T.NEWDATE):
            return [f"{v} = _v.date(buf, pos)", "pos += 3"]
        if t == T.DATETIME:
            return [f"{v} = _v.datetime_old(buf, pos)", "pos += 8"]
        if t == T.TIMESTAMP:
            return [f"{v} = _v.timestamp(buf, pos)", "pos += 4"]
        if t == T.TIME:
            return [f"{v} = _v.time_old(buf, pos)", "pos += 3"]
        if t == T.BIT:
            nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)
            return [f"{v} = _int(buf[pos:pos + {nbytes}], 'big')", f"pos += {nbytes}"]
        if t == T.ENUM or t == T.SET:
            return [f"{v} = _int(buf[pos:pos + {meta}], 'little')", f"pos += {meta}"] + self.post(c, v)
        if t in (T.VARCHAR, T.VAR_STRING):
            return self.length_prefixed(v, 1 if meta < 256 else 2) + self.text(c, v)
        if t == T.STRING:
            lines = self.length_prefixed(v, 1 if meta < 256 else 2)
            if c.codec is None:  # BINARY(n): the server logs it without its trailing 0x00 padding
                return lines + [f"{v} = {v}.ljust({meta}, b'\\0')"]
            return lines + self.text(c, v)
        if t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
            return self.length_prefixed(v, meta) + self.text(c, v)
        if t == T.JSON:
            lines = self.length_prefixed(v, meta)
            bit = self.partial_bits.get(int(v[1:]))
            if bit is not None:
                return lines + [f"{v} = _json_patched(r0[{v[1:]}], {v}) if pb & {1 << bit} else _json({v})"]
            return lines + [f"{v} = _json({v}, {self.keep_json_tree})"]
        if t in (T.GEOMETRY, T.VECTOR):
            return self.length_prefixed(v, meta)
        if t == MARIADB_VARCHAR_COMPRESSED:
            return (
                self.length_prefixed(v, 1 if meta < 256 else 2)
                + [f"{v} = _uncompress({v})"]
                + self.text(c, v)
            )
        if t == MARIADB_BLOB_COMPRESSED:
            return self.length_prefixed(v, meta) + [f"{v} = _uncompress({v})"] + self.text(c, v)
        if t == T.DECIMAL:
            raise BinlogError("old DECIMAL column (pre-5.0.3 table): its length is not in the binlog")
        raise BinlogError(f"unsupported column type {t}")

    def image(self, specs: list[ColumnSpec], present: list[int], ncols: int, out: str) -> list[str]:
        """Lines decoding one row image (NULL bitmap + values) into the tuple ``out``."""
        nbytes = (len(present) + 7) // 8
        read = "buf[pos]" if nbytes == 1 else f"_int(buf[pos:pos + {nbytes}], 'little')"
        lines = [f"nb = {read}", f"pos += {nbytes}", "if not nb:"]
        # Fast path: no NULLs, so runs of fixed-width columns unpack with one struct call.
        fast: list[str] = []
        run: list[tuple[int, str]] = []

        def flush() -> None:
            if not run:
                return
            fmt = "<" + "".join(code for _, code in run)
            s = self.const(struct.Struct(fmt), "_st")
            targets = ", ".join(f"v{i}" for i, _ in run)
            fast.append(f"{targets}{',' if len(run) == 1 else ''} = {s}.unpack_from(buf, pos)")
            fast.append(f"pos += {struct.calcsize(fmt)}")
            for i, _ in run:
                fast.extend(self.post(specs[i], f"v{i}"))
            run.clear()

        for i in present:
            code = self.struct_code(specs[i])
            if code is not None:
                run.append((i, code))
            else:
                flush()
                fast.extend(self.column(specs[i], f"v{i}"))
        flush()
        lines += ["    " + line for line in fast] or ["    pass"]
        lines.append("else:")
        if not present:
            lines.append("    pass")
        for bit, i in enumerate(present):
            lines.append(f"    if nb & {1 << bit}:")
            lines.append(f"        v{i} = None")
            lines.append("    else:")
            lines += ["        " + line for line in self.column(specs[i], f"v{i}")]
        full = [f"v{i}" if i in set(present) else "MISSING" for i in range(ncols)]
        lines.append(f"{out} = ({', '.join(full)}{',' if ncols == 1 else ''})")
        return lines


def build_decoder(
    specs: list[ColumnSpec], before: list[int] | None, after: list[int] | None, partial_json: bool = False
) -> Callable[[bytes, int, int], list]:
    """Compile ``decode(buf, pos, end) -> rows`` for one layout.

    ``before``/``after`` list the column ordinals present in each image; WRITE rows have only
    ``after``, DELETE only ``before``, UPDATE both (each row is then a ``(before, after)`` pair).
    ``partial_json`` is PARTIAL_UPDATE_ROWS: between the images a value-options integer and a
    bitmap (one bit per JSON column of the table) say which JSON values are diffs.
    """
    if before == [] or after == []:
        # A row image of no columns takes no bytes: the loop below would never end.
        raise BinlogError("rows event has a row image with no columns in its bitmap")
    g = _Gen()
    ncols = len(specs)
    body = ["rows = []", "append = rows.append", "while pos < end:"]
    inner: list[str] = []
    if before is not None:
        g.keep_json_tree = partial_json
        inner += g.image(specs, before, ncols, "r0")
        g.keep_json_tree = False
    if partial_json and before is not None:
        json_cols = [i for i, c in enumerate(specs) if c.type == T.JSON]
        nbytes = (len(json_cols) + 7) // 8
        inner += [
            "opts, pos = _packed(buf, pos)",
            "if opts & 1:",
            f"    pb = _int(buf[pos:pos + {nbytes}], 'little')",
            f"    pos += {nbytes}",
            "else:",
            "    pb = 0",
        ]
        g.partial_bits = {i: bit for bit, i in enumerate(json_cols)}
    if after is not None:
        inner += g.image(specs, after, ncols, "r1")
    if before is not None and after is not None:
        inner.append("append((r0, r1))")
    else:
        inner.append("append(r0)" if before is not None else "append(r1)")
    body += ["    " + line for line in inner]
    body += [
        "if pos != end:",
        "    raise BinlogError(f'row data overruns its event by {pos - end} bytes')",
        "return rows",
    ]
    src = "def decode(buf, pos, end):\n" + "\n".join("    " + line for line in body) + "\n"
    exec(compile(src, f"<rows decoder {ncols} cols>", "exec"), g.ns)
    decode = g.ns["decode"]
    decode.source = src  # type: ignore[attr-defined]
    return decode  # type: ignore[return-value]


def column_specs(tm: TableMap, codec_for: Callable[[int], str | None]) -> list[ColumnSpec]:
    """Derive row-decoding specs from a TABLE_MAP (and whatever optional metadata it carries)."""
    specs = []

    def codec(coll: int) -> str | None:
        try:
            return codec_for(coll)
        except KeyError:
            raise BinlogError(
                f"unknown collation id {coll} in the TABLE_MAP of {tm.schema}.{tm.table}"
            ) from None

    for i, (t, meta) in enumerate(zip(tm.types, tm.metas, strict=True)):
        unsigned = bool(tm.unsigned[i]) if tm.unsigned else False
        coll = tm.collations[i] if tm.collations else None
        if t in (T.STRING, T.VARCHAR, T.VAR_STRING, MARIADB_VARCHAR_COMPRESSED):
            codec_name = codec(coll) if coll is not None else "?"
        elif t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, MARIADB_BLOB_COMPRESSED):
            # Without a collation, TEXT and BLOB look alike: keep the bytes.
            codec_name = codec(coll) if coll is not None else None
        else:
            codec_name = None
        enum_labels = tm.enum_labels[i] if tm.enum_labels else None
        set_labels = tm.set_labels[i] if tm.set_labels else None
        specs.append(
            ColumnSpec(
                t,
                meta,
                unsigned,
                codec_name,
                tuple(enum_labels) if enum_labels is not None else None,
                tuple(set_labels) if set_labels is not None else None,
            )
        )
    return specs
