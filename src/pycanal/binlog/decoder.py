"""Sans-I/O event decoder: one complete event's bytes in, one decoded event out.

The same decoder serves binlog files (``reader``) and the replication stream: it keeps the
state that decoding needs across events (the FORMAT_DESCRIPTION event, whether events carry a
CRC32, the TABLE_MAPs of the current statement) and nothing about where bytes come from.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from . import events as ev
from . import gtid as _gtid
from .charsets import codec_for_collation
from .constants import (
    CHECKSUM_CRC32,
    HEADER_LEN,
    LOG_EVENT_BINLOG_IN_USE_F,
    LOG_EVENT_IGNORABLE_F,
    PRE_GA_PERMUTATION,
    ROWS_KIND,
    ROWS_V2,
)
from .constants import EventType as E
from .errors import BinlogError, TableIdNotFoundError
from .packed import read_packed_int
from .rows import build_decoder, column_specs
from .tablemap import TableMap, decode_table_map
from .values import make_decimal_decoder

_HEADER = struct.Struct("<IBIIIH")
# _HOT: the event types every transaction has, as plain ints: an IntEnum member's lookup
# (``E.XID``) took 0.075 us against 0.012 for the comparison itself, several times an event.
_TABLE_MAP, _ANNOTATE_ROWS, _XID, _MARIADB_GTID, _QUERY, _FORMAT_DESCRIPTION, _PARTIAL_UPDATE_ROWS = map(
    int,
    (E.TABLE_MAP, E.MARIADB_ANNOTATE_ROWS, E.XID, E.MARIADB_GTID, E.QUERY, E.FORMAT_DESCRIPTION,
     E.PARTIAL_UPDATE_ROWS),
)  # fmt: skip
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

_ROWS_COMPRESSED = frozenset(t for t in ROWS_KIND if t >= 166)
_SPECS_KEY = ("pycanal.binlog.decoder", "specs")  # a TableMap's column specs, beside its decoders
_SHARED = ("pycanal.binlog.decoder", "shared")  # in a TableMap's decoders: they are its layout's
# Event types pycanal knows and keeps as bytes: they carry no row change.
_OPAQUE = frozenset(
    {
        E.START_V3,
        E.LOAD,
        E.SLAVE,
        E.CREATE_FILE,
        E.EXEC_LOAD,
        E.NEW_LOAD,
        E.IGNORABLE,
        E.TRANSACTION_CONTEXT,
        E.VIEW_CHANGE,
    }
)
# Default post-header lengths for binlog v4, used until a FORMAT_DESCRIPTION says otherwise.
_DEFAULT_POST_HEADER = {E.QUERY: 13, E.ROTATE: 8, E.TABLE_MAP: 8, E.WRITE_ROWS_V1: 8, E.WRITE_ROWS: 10}

STMT_END_F = 0x0001
_ZSTD = 0
_COMPRESSION_NONE = 255


# What a truncated or corrupt event raises while it is decoded: reported as a BinlogError naming
# the source and the event's offset.
_MALFORMED = (IndexError, struct.error, ValueError, UnicodeDecodeError, KeyError, zlib.error, OverflowError)
_MALFORMED_ROWS = (*_MALFORMED, TypeError)  # a generated row decoder's too


def _version_tuple(version: str) -> tuple[int, int, int]:
    parts = []
    for piece in version.split("-")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def _has_checksum_alg(version: str) -> bool:
    """Servers from MySQL 5.6.1 / MariaDB 5.3 write the checksum algorithm byte in the FDE."""
    v = _version_tuple(version)
    if "mariadb" in version.lower():
        return v >= (5, 3, 0)
    return v >= (5, 6, 1)


class EventDecoder:
    """Decode events one at a time, keeping the cross-event state decoding needs.

    ``source`` names the file or stream in errors. ``checksum`` says whether events end in a
    CRC32: ``None`` learns it from the FORMAT_DESCRIPTION event (files always start with one;
    a replication stream's first artificial ROTATE is checked both ways). ``table_meta``, when
    given, maps each decoded TABLE_MAP to one completed from the schema history (names, signedness,
    charsets, ENUM/SET labels the binlog did not log). Compiled row decoders are kept on the
    TableMap (``decoders``), which every TableMap of the same layout shares whatever its table id.
    """

    def __init__(
        self,
        source: str = "<stream>",
        file: str = "",
        *,
        verify_checksum: bool = True,
        checksum: bool | None = None,
        codec_for: Callable[[int], str | None] = codec_for_collation,
        table_meta: Callable[[TableMap], TableMap] | None = None,
    ) -> None:
        self.source = source
        self.file = file
        self.verify_checksum = verify_checksum
        self.checksum = checksum
        self.codec_for = codec_for
        self.table_meta = table_meta
        self.fde: ev.FormatDescriptionEvent | None = None
        self._post_header = b""
        self._permute: dict[int, int] | None = None
        self.tables: dict[int, TableMap] = {}
        self._table_cache: dict[Any, TableMap] = {}  # by body, and by all of it but the table id
        self._layouts: dict[str, dict] = {}  # TableMap.layout() -> the caches its TableMaps share
        self._compiled: dict[tuple, Callable] = {}  # (column specs, bitmaps, kind, partial) -> decoder
        self._rows_heads: dict[int, tuple] = {}  # rows event type -> its post-header's shape, heads parsed
        self._rows_of = self.rows_of  # every rows event's ``_decode``: one bound method

    def reset_stream(self) -> None:
        """Forget per-stream state before a new dump: the checksum setting is learned again (the
        server's first artificial ROTATE precedes its FORMAT_DESCRIPTION) and TABLE_MAPs clear."""
        self.checksum = None
        self.tables.clear()

    @property
    def renumbers(self) -> bool:
        """Whether the stream's event type numbers are not the logical ones (a pre-GA 5.1 format)."""
        return self._permute is not None

    # ------------------------------------------------------------------ framing
    def check(self, data: bytes, pos: int) -> None:
        """The checks :meth:`decode` makes of an event's frame (length, size, CRC32), without
        decoding it: events decoded in another process are checked where they are read."""
        if len(data) < HEADER_LEN:
            raise BinlogError(f"truncated event header ({len(data)} of {HEADER_LEN} bytes)", self.source, pos)
        size = _U32.unpack_from(data, 9)[0]
        if size != len(data):
            raise BinlogError(
                f"event size {size} does not match the {len(data)} bytes given", self.source, pos
            )
        has_crc = self.checksum
        if has_crc is None:
            has_crc = self._guess_checksum(data)
        if has_crc and self.verify_checksum:
            if size < HEADER_LEN + 4:
                raise BinlogError("event too short to hold its checksum", self.source, pos)
            if _crc32(data) != _CRC32_RESIDUE:
                raise BinlogError(f"CRC32 mismatch in {_type_name(data[4])} event", self.source, pos)

    def decode(self, data: bytes, pos: int) -> ev.Event:
        """Decode one complete event (header, body and checksum if any) read at offset ``pos``."""
        if len(data) < HEADER_LEN:
            raise BinlogError(f"truncated event header ({len(data)} of {HEADER_LEN} bytes)", self.source, pos)
        ts, typ, server_id, size, next_pos, flags = _HEADER.unpack_from(data, 0)
        if size != len(data):
            raise BinlogError(
                f"event size {size} does not match the {len(data)} bytes given", self.source, pos
            )
        if self._permute is not None:
            typ = self._permute.get(typ, typ)
        if typ == _FORMAT_DESCRIPTION:
            return self._format_description(data, ts, server_id, size, next_pos, flags, pos)
        has_crc = self.checksum
        if has_crc is None:
            has_crc = self._guess_checksum(data)
        if has_crc:
            if size < HEADER_LEN + 4:
                raise BinlogError("event too short to hold its checksum", self.source, pos)
            if self.verify_checksum and _crc32(data) != _CRC32_RESIDUE:
                raise BinlogError(f"CRC32 mismatch in {_type_name(typ)} event", self.source, pos)
            body = data[HEADER_LEN:-4]
        else:
            body = data[HEADER_LEN:]
        header = (typ, ts, server_id, size, next_pos, flags, pos, self.file)
        try:
            return self._body(header, body)
        except BinlogError as exc:
            raise exc.at(self.source, pos) from None
        except _MALFORMED as exc:
            raise BinlogError(f"bad {_type_name(typ)} event: {exc}", self.source, pos) from None

    def _guess_checksum(self, data: bytes) -> bool:
        return len(data) >= HEADER_LEN + 4 and _crc32(data) == _CRC32_RESIDUE

    def _format_description(self, data: bytes, ts, server_id, size, next_pos, flags, pos) -> ev.Event:
        try:
            binlog_version = _U16.unpack_from(data, HEADER_LEN)[0]
            server_version = (
                data[HEADER_LEN + 2 : HEADER_LEN + 52].split(b"\0", 1)[0].decode("ascii", "replace")
            )
            create_ts = _U32.unpack_from(data, HEADER_LEN + 52)[0]
            header_len = data[HEADER_LEN + 56]
        except (IndexError, struct.error):
            raise BinlogError("truncated FORMAT_DESCRIPTION event", self.source, pos) from None
        alg: int | None = None
        end = size
        if _has_checksum_alg(server_version):
            if size < HEADER_LEN + 57 + 5:
                raise BinlogError("truncated FORMAT_DESCRIPTION event", self.source, pos)
            alg = data[size - 5]
            end = size - 5
            if alg == CHECKSUM_CRC32 and self.verify_checksum:
                # The server computes the FDE's CRC before it clears the in-use flag on close.
                covered = bytearray(data[:-4])
                covered[17] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF
                if zlib.crc32(covered) != _U32.unpack_from(data, size - 4)[0]:
                    raise BinlogError("CRC32 mismatch in FORMAT_DESCRIPTION event", self.source, pos)
        post = bytes(data[HEADER_LEN + 57 : end])
        self.checksum = alg == CHECKSUM_CRC32
        self._permute = None
        v = _version_tuple(server_version)
        if len(post) == 22 and (v[:2] == (5, 2) or (v[:2] == (5, 1) and v[2] <= 15)):
            self._permute = PRE_GA_PERMUTATION
            reordered = bytearray(post)
            for old, new in PRE_GA_PERMUTATION.items():
                reordered[new - 1] = post[old - 1]
            post = bytes(reordered)
        self._post_header = post
        self._rows_heads.clear()
        self.tables.clear()
        fde = ev.FormatDescriptionEvent(
            E.FORMAT_DESCRIPTION,
            ts,
            server_id,
            size,
            next_pos,
            flags,
            pos,
            self.file,
            binlog_version,
            server_version,
            create_ts,
            header_len,
            post,
            alg,
        )
        self.fde = fde
        return fde

    def post_header_len(self, typ: int) -> int:
        if 0 < typ <= len(self._post_header):
            return self._post_header[typ - 1]
        return _DEFAULT_POST_HEADER.get(typ, 0)

    # ------------------------------------------------------------------ bodies
    def _body(self, h: tuple, body: bytes) -> ev.Event:
        typ = h[0]
        if typ in ROWS_KIND:
            return self._rows(h, body)
        # The types of every transaction first, compared as plain ints (_HOT)
        if typ == _TABLE_MAP:
            return self._table_map(h, body)
        if typ == _ANNOTATE_ROWS:  # MariaDB's default: one per statement
            return ev.RowsQueryEvent(*h, body.decode("utf-8", "surrogateescape"))
        if typ == _XID:
            return ev.XidEvent(*h, _U64.unpack_from(body, 0)[0])
        if typ == _MARIADB_GTID:
            info = _gtid.decode_mariadb_gtid_event(body, h[2])
            return ev.GtidEvent(*h, info.text, info)
        if typ == _QUERY or typ == E.MARIADB_QUERY_COMPRESSED:
            return self._query(h, body, compressed=typ == E.MARIADB_QUERY_COMPRESSED)
        if typ == E.ROTATE:
            ph = self.post_header_len(E.ROTATE)
            position = _U64.unpack_from(body, 0)[0] if ph == 8 else 4
            return ev.RotateEvent(
                *h, position=position, next_file=body[ph:].decode("utf-8", "surrogateescape")
            )
        if typ in (E.GTID, E.ANONYMOUS_GTID, E.GTID_TAGGED):
            info = _gtid.decode_mysql_gtid_event(body, typ)
            return ev.GtidEvent(*h, info.gtid, info)
        if typ == E.PREVIOUS_GTIDS:
            prev = _gtid.decode_previous_gtids_event(body)
            return ev.PreviousGtidsEvent(*h, gtid_set=str(prev.gtid_set), info=prev)
        if typ == E.MARIADB_GTID_LIST:
            glist = _gtid.decode_mariadb_gtid_list_event(body)
            return ev.GtidListEvent(*h, gtid_set=",".join([str(g) for g in glist.gtids]), info=glist)
        if typ == E.MARIADB_BINLOG_CHECKPOINT:
            cp = _gtid.decode_binlog_checkpoint_event(body)
            return ev.BinlogCheckpointEvent(*h, binlog_file=cp.filename)
        if typ == E.ROWS_QUERY:
            return ev.RowsQueryEvent(*h, query=body[1:].decode("utf-8", "surrogateescape"))
        if typ == E.TRANSACTION_PAYLOAD:
            return self._payload(h, body)
        if typ == E.STOP:
            return ev.StopEvent(*h)
        if typ == E.INTVAR:
            return ev.IntvarEvent(*h, kind=body[0], value=_U64.unpack_from(body, 1)[0])
        if typ == E.RAND:
            s1, s2 = struct.unpack_from("<QQ", body, 0)
            return ev.RandEvent(*h, seed1=s1, seed2=s2)
        if typ == E.USER_VAR:
            return self._user_var(h, body)
        if typ == E.HEARTBEAT:
            return ev.HeartbeatEvent(*h, log_file=body.decode("utf-8", "surrogateescape"), log_pos=h[4])
        if typ == E.HEARTBEAT_V2:
            return self._heartbeat_v2(h, body)
        if typ == E.XA_PREPARE:
            one_phase = body[0]
            fmt, glen, blen = struct.unpack_from("<iII", body, 1)
            data = _exact(body, 13, glen + blen)
            return ev.XaPrepareEvent(
                *h, one_phase=bool(one_phase), format_id=fmt, gtrid=data[:glen], bqual=data[glen:]
            )
        if typ == E.INCIDENT:
            incident = _U16.unpack_from(body, 0)[0]
            msg = _exact(body, 3, body[2]) if len(body) > 2 else b""
            return ev.IncidentEvent(*h, incident=incident, message=msg.decode("utf-8", "surrogateescape"))
        if typ in (E.BEGIN_LOAD_QUERY, E.APPEND_BLOCK, E.DELETE_FILE):
            return ev.LoadDataEvent(*h, file_id=_U32.unpack_from(body, 0)[0], data=bytes(body[4:]))
        if typ == E.EXECUTE_LOAD_QUERY:
            return self._query(h, body, execute_load=True)
        if typ == E.MARIADB_START_ENCRYPTION:
            raise BinlogError("encrypted binlog not supported (START_ENCRYPTION event)")
        if typ in _OPAQUE or h[5] & LOG_EVENT_IGNORABLE_F:
            return ev.OpaqueEvent(*h, body=bytes(body))
        raise BinlogError(f"unknown event type {typ}")

    def _query(
        self, h: tuple, body: bytes, *, compressed: bool = False, execute_load: bool = False
    ) -> ev.QueryEvent:
        ph = self.post_header_len(h[0])
        thread_id, exec_time, db_len, error_code = struct.unpack_from("<IIBH", body, 0)
        status_len = _U16.unpack_from(body, 11)[0] if ph >= 13 else 0
        status = _status_vars(_exact(body, ph, status_len))
        p = ph + status_len
        schema = _exact(body, p, db_len).decode("utf-8", "surrogateescape")
        p += db_len + 1
        raw = body[p:]
        if compressed:
            raw = _mariadb_uncompress(raw)
        # Statement text is in the client charset; a binary client sends bytes, kept as latin-1.
        codec = self._text_codec(status.get("charset_client")) or "latin-1"
        query = bytes(raw).decode(codec, "surrogateescape")
        fields = {
            "thread_id": thread_id,
            "exec_time": exec_time,
            "error_code": error_code,
            "schema": schema,
            "query": query,
            "status": status,
        }
        if execute_load:
            file_id, start, end, dup = struct.unpack_from("<IIIB", body, 13)
            return ev.ExecuteLoadQueryEvent(
                *h, **fields, file_id=file_id, fn_pos_start=start, fn_pos_end=end, dup_handling=dup
            )
        return ev.QueryEvent(*h, **fields)

    def _text_codec(self, collation: int | None) -> str | None:
        """The codec for a collation id; UTF-8 when the id is absent or unknown (text, not rows:
        ``surrogateescape`` keeps any byte it cannot decode)."""
        if collation is None:
            return "utf-8"
        try:
            codec = self.codec_for(collation)
        except KeyError:
            return "utf-8"
        return "utf-8" if codec == "?" else codec

    def _table_map(self, h: tuple, body: bytes) -> ev.TableMapEvent:
        key = bytes(body)
        tm = self._table_cache.get(key)
        if tm is None:
            mariadb = self.fde is not None and self.fde.is_mariadb
            ph = self.post_header_len(E.TABLE_MAP)
            width = 4 if ph == 6 else 6
            same = (ph, mariadb, key[width:])  # all but the table id
            known = self._table_cache.get(same)
            if known is None:
                tm = decode_table_map(key, ph, mariadb)
            else:  # the table under a new id: the same map, and the same compiled code
                tm = dataclasses.replace(known, table_id=int.from_bytes(key[:width], "little"), raw=key)
                tm.decoders = known.decoders
            if len(self._table_cache) > 8192:
                self._table_cache.clear()
            self._table_cache[key] = self._table_cache[same] = tm
        if self.table_meta is not None:
            # The schema history fills in what the binlog did not log (names, charsets, labels).
            tm = self.table_meta(tm)
        if _SHARED not in tm.decoders:
            self._share(tm)
        self.tables[tm.table_id] = tm
        return ev.TableMapEvent(*h, tm)

    def _share(self, tm: TableMap) -> None:
        """Give ``tm`` the compiled decoders (and the converters' code) of the TableMaps of its
        layout seen before. The server gives a table a new id each time it opens it anew (FLUSH
        TABLES, more tables than ``table_definition_cache`` holds), and compiling per id made 10,000
        1-row transactions over 1,000 tables ten times slower to decode than over 100."""
        layout = tm.layout()
        shared = self._layouts.get(layout)
        if shared is None:
            if len(self._layouts) > 4096:
                self._layouts.clear()
            shared = self._layouts[layout] = tm.decoders
            shared[_SHARED] = True
        else:
            tm.decoders = shared

    def _rows_head(self, typ: int, body: bytes) -> tuple:
        """All of a rows event before its row images: (table id, flags, extra data, column count,
        kind, columns before and after, the two bitmaps, where the images start). A table's events
        repeat these bytes, so they are parsed once per table and shape: the event's length of
        them is read from its column count, and the parse is looked up by those bytes (0.21 us
        against 0.71 us a parse, timeit on sysbench's WRITE_ROWS)."""
        heads = self._rows_heads.get(typ)
        if heads is None:
            ph = self.post_header_len(typ) or (10 if typ in ROWS_V2 else 8)
            heads = self._rows_heads[typ] = (ph, typ in ROWS_V2, ROWS_KIND[typ] == "UPDATE", {})
        ph, v2, update, parsed = heads
        try:
            q = ph + (body[ph - 2] | body[ph - 1] << 8) - 2 if v2 else ph
            ncols = body[q]
        except IndexError:
            ncols = 251  # too short: the parse below says what is missing
        if ncols < 251:
            end = q + 1 + (ncols + 7 >> 3) * (2 if update else 1)
            if end <= len(body):
                key = body[:end]
                head = parsed.get(key)
                if head is not None:
                    return head
        head = self._parse_rows_head(typ, ph, body)
        if len(parsed) > 4096:
            parsed.clear()
        parsed[body[: head[-1]]] = head
        return head

    def _parse_rows_head(self, typ: int, ph: int, body: bytes) -> tuple:
        id_width = 4 if ph == 6 else 6
        table_id = int.from_bytes(_exact(body, 0, id_width), "little")
        rows_flags = _U16.unpack_from(body, id_width)[0]
        p = ph
        extra = b""
        if typ in ROWS_V2:
            # v2 post-header ends with the length of the extra data, which counts its own 2 bytes.
            extra_len = _U16.unpack_from(body, id_width + 2)[0]
            if extra_len < 2:
                raise BinlogError(f"rows event extra-data length {extra_len} is below 2")
            extra = bytes(_exact(body, ph, extra_len - 2))
            p = ph + extra_len - 2
        ncols, p = read_packed_int(body, p)
        nb = (ncols + 7) // 8
        kind = ROWS_KIND[typ]
        before = after = None
        bitmap1 = bytes(_exact(body, p, nb))
        p += nb
        bitmap2 = b""
        if kind == "UPDATE":
            bitmap2 = bytes(_exact(body, p, nb))
            p += nb
            before, after = _bit_list(bitmap1, ncols), _bit_list(bitmap2, ncols)
        elif kind == "INSERT":
            after = _bit_list(bitmap1, ncols)
        else:
            before = _bit_list(bitmap1, ncols)
        return table_id, rows_flags, extra, ncols, kind, before, after, bitmap1, bitmap2, p

    def _rows(self, h: tuple, body: bytes) -> ev.RowsEvent:
        typ = h[0]
        table_id, rows_flags, extra, ncols, kind, before, after, bitmap1, bitmap2, p = self._rows_head(
            typ, body
        )
        data = body[p:]
        if typ in _ROWS_COMPRESSED:
            data = _mariadb_uncompress(data)
        data = bytes(data)
        tm = self.tables.get(table_id)
        if rows_flags & STMT_END_F:
            self.tables.clear()
        # Positional (kind, table_id, rows_flags, table_map, extra, column_count, before_columns,
        # after_columns), as the other events of every transaction: with keywords a dataclass's
        # __init__ took twice as long (0.68 against 0.36 us for this one).
        event = ev.RowsEvent(*h, kind, table_id, rows_flags, tm, extra, ncols, before, after)
        if tm is None:
            if data:
                raise TableIdNotFoundError(table_id)
            event._rows = []
            return event
        if ncols != tm.column_count:
            raise BinlogError(
                f"rows event has {ncols} columns but the TABLE_MAP of {tm.schema}.{tm.table} has {tm.column_count}"
            )
        partial = typ == _PARTIAL_UPDATE_ROWS
        # Decoders live on the TableMap object: a new schema version is a new object.
        key = (bitmap1, bitmap2, kind, partial)
        decode = tm.decoders.get(key)
        if decode is None:
            specs = tm.decoders.get(_SPECS_KEY)  # once per table: MINIMAL images bring many bitmaps
            if specs is None:
                specs = tm.decoders[_SPECS_KEY] = column_specs(tm, self.codec_for)
            # and once per shape: tables of one column shape (a schema per tenant) share the code
            shape = (tuple(specs), *key)
            decode = self._compiled.get(shape)
            if decode is None:
                decode = build_decoder(specs, before, after, partial_json=partial)
                decode.specs = specs  # type: ignore[attr-defined]
                if len(self._compiled) > 4096:
                    self._compiled.clear()
                self._compiled[shape] = decode
            tm.decoders[key] = decode
        # Decoded on first access (the entry converter's fused code reads the bytes instead), by
        # one bound method kept for all events: a closure per event cost a function object each.
        event._decode = self._rows_of
        event.row_data, event.row_decoder = data, decode
        return event

    def rows_of(self, event: ev.RowsEvent) -> list:
        """The rows of a rows event this decoder made (``RowsEvent.rows`` calls it)."""
        data = event.row_data
        try:
            return event.row_decoder(data, 0, len(data))
        except BinlogError as exc:
            raise exc.at(self.source, event.pos) from None
        except _MALFORMED_ROWS as exc:
            tm = event.table_map
            raise BinlogError(
                f"bad row data for {tm.schema}.{tm.table} in {_type_name(event.type)} event: {exc}",  # type: ignore[union-attr]
                self.source,
                event.pos,
            ) from None

    def _payload(self, h: tuple, body: bytes) -> ev.TransactionPayloadEvent:
        p = 0
        fields = {}
        while p < len(body):
            ftype, p = read_packed_int(body, p)
            if ftype == 0:  # end of the header fields; the payload follows
                break
            flen, p = read_packed_int(body, p)
            value, _ = read_packed_int(_exact(body, p, flen), 0)
            fields[ftype] = value
            p += flen
        payload_size = fields.get(1, len(body) - p)
        compression = fields.get(2, _ZSTD)
        usize = fields.get(3, 0)
        payload = _exact(body, p, payload_size)
        if compression == _ZSTD:
            import zstandard

            try:
                # Streaming, so a corrupt size field never decides how much memory is allocated.
                raw = zstandard.ZstdDecompressor().decompressobj().decompress(bytes(payload))
            except zstandard.ZstdError as exc:
                raise BinlogError(f"TRANSACTION_PAYLOAD does not decompress: {exc}") from None
        elif compression == _COMPRESSION_NONE:
            raw = bytes(payload)
        else:
            raise BinlogError(f"TRANSACTION_PAYLOAD uses unknown compression {compression}")
        if usize and len(raw) != usize:
            raise BinlogError(f"TRANSACTION_PAYLOAD expands to {len(raw)} bytes, header says {usize}")
        inner: list[ev.Event] = []
        saved = self.checksum
        self.checksum = False  # inner events carry no CRC of their own
        try:
            q = 0
            while q < len(raw):
                if len(raw) - q < HEADER_LEN:
                    raise BinlogError("TRANSACTION_PAYLOAD ends inside an event header")
                size = _U32.unpack_from(raw, q + 9)[0]
                if size < HEADER_LEN or q + size > len(raw):
                    raise BinlogError(f"TRANSACTION_PAYLOAD inner event at {q} has bad size {size}")
                inner_event = self.decode(raw[q : q + size], h[6])
                inner_event.next_pos = h[4]
                inner.append(inner_event)
                q += size
        finally:
            self.checksum = saved
        return ev.TransactionPayloadEvent(
            *h, compression=compression, payload_size=payload_size, uncompressed_size=usize, events=inner
        )

    def _user_var(self, h: tuple, body: bytes) -> ev.UserVarEvent:
        n = _U32.unpack_from(body, 0)[0]
        name = _exact(body, 4, n).decode("utf-8", "surrogateescape")
        p = 4 + n
        if body[p]:
            return ev.UserVarEvent(*h, name=name, is_null=True)
        vtype = body[p + 1]
        charset, vlen = struct.unpack_from("<II", body, p + 2)
        raw = _exact(body, p + 10, vlen)
        p += 10 + vlen
        var_flags = body[p] if p < len(body) else 0
        value: Any
        if vtype == 0:
            codec = self._text_codec(charset)
            value = raw if codec is None else raw.decode(codec, "surrogateescape")
        elif vtype == 1:
            value = struct.unpack("<d", raw)[0]
        elif vtype == 2:
            value = int.from_bytes(raw, "little", signed=not var_flags & 1)
        elif vtype == 4:
            value = make_decimal_decoder(raw[0], raw[1])(raw, 2) if len(raw) > 2 else Decimal(0)
        else:
            value = raw
        return ev.UserVarEvent(
            *h, name=name, is_null=False, value_type=vtype, charset=charset, value=value, var_flags=var_flags
        )

    def _heartbeat_v2(self, h: tuple, body: bytes) -> ev.HeartbeatEvent:
        p = 0
        log_file = ""
        log_pos = 0
        while p < len(body):
            ftype, p = read_packed_int(body, p)
            if ftype == 0:
                break
            flen, p = read_packed_int(body, p)
            value = _exact(body, p, flen)
            p += flen
            if ftype == 1:
                log_file = value.decode("utf-8", "surrogateescape")
            elif ftype == 2:
                log_pos = read_packed_int(value, 0)[0]
        return ev.HeartbeatEvent(*h, log_file=log_file, log_pos=log_pos)


def _type_name(typ: int) -> str:
    try:
        return E(typ).name
    except ValueError:
        return f"type-{typ}"


def _exact(buf: bytes, pos: int, n: int) -> bytes:
    """``buf[pos:pos+n]``, or an error if fewer than ``n`` bytes are there."""
    if pos + n > len(buf) or n < 0:
        raise BinlogError(f"field of {n} bytes at body offset {pos} overruns the event ({len(buf)} bytes)")
    return buf[pos : pos + n]


_crc32 = zlib.crc32
# The CRC-32 of any bytes followed by their own CRC-32 (little-endian, as events store it): one
# call over the whole event checks it, with no view of all but its last 4 bytes and no unpack.
_CRC32_RESIDUE = 0x2144DF1C
_BIT_LISTS: dict[tuple[bytes, int], list[int]] = {}


def _bit_list(bitmap: bytes, n: int) -> list[int]:
    """The columns present in a rows event's bitmap; one shared list per bitmap (never mutated):
    a table's events repeat the same few bitmaps."""
    try:
        return _BIT_LISTS[bitmap, n]
    except KeyError:
        out = [i for i in range(n) if bitmap[i >> 3] >> (i & 7) & 1]
        if len(_BIT_LISTS) < 4096:
            _BIT_LISTS[bytes(bitmap), n] = out
        return out


def _mariadb_uncompress(raw: bytes) -> bytes:
    """MariaDB compressed events: header byte (low 3 bits = size width, bits 4-6 = algorithm 0 zlib),
    the uncompressed size big-endian, then a zlib stream."""
    if not raw:
        raise BinlogError("compressed event has no data")
    head = raw[0]
    width = head & 0x07
    if (head >> 4) & 0x07 != 0 or not 1 <= width <= 4:
        raise BinlogError(f"compressed event has an unknown header byte 0x{head:02x}")
    size = int.from_bytes(_exact(raw, 1, width), "big")
    data = zlib.decompress(bytes(raw[1 + width :]))
    if len(data) != size:
        raise BinlogError(f"compressed event expands to {len(data)} bytes, header says {size}")
    return data


# Status variables of QUERY events: code -> fixed length (None: handled specially).
_STATUS_FIXED = {
    0: 4,
    1: 8,
    3: 4,
    4: 6,
    7: 2,
    8: 2,
    9: 8,
    10: 4,
    13: 3,
    16: 1,
    17: 8,
    18: 2,
    19: 1,
    20: 1,
    128: 3,
    129: 8,
    130: 1,
}


def _status_vars(raw: bytes) -> dict[str, Any]:
    """The status variables pycanal uses (charset, sql_mode, time zone, schema list).

    They only inform decoding, and the schema and query follow at a known offset, so an unknown
    code ends the scan rather than failing the event.
    """
    out: dict[str, Any] = {}
    p = 0
    n = len(raw)
    while p < n:
        code = raw[p]
        p += 1
        if code in _STATUS_FIXED:
            size = _STATUS_FIXED[code]
            if p + size > n:
                break
            if code == 4:
                client, conn, server = struct.unpack_from("<HHH", raw, p)
                out["charset_client"] = client
                out["collation_connection"] = conn
                out["collation_server"] = server
            elif code == 1:
                out["sql_mode"] = _U64.unpack_from(raw, p)[0]
            elif code == 0:
                out["flags2"] = _U32.unpack_from(raw, p)[0]
            p += size
        elif code in (5, 6):  # TIME_ZONE, CATALOG_NZ: length byte + text
            ln = raw[p]
            value = raw[p + 1 : p + 1 + ln].decode("utf-8", "replace")
            if code == 5:
                out["time_zone"] = value
            p += 1 + ln
        elif code == 2:  # old CATALOG: length byte + text + NUL
            p += 2 + raw[p]
        elif code == 11:  # INVOKER: user and host, each length-prefixed
            p += 1 + raw[p]
            p += 1 + raw[p]
        elif code == 12:  # UPDATED_DB_NAMES: count then NUL-terminated names
            count = raw[p]
            p += 1
            if count == 254:  # OVER_MAX_DBS_IN_EVENT_MTS
                continue
            names = []
            for _ in range(count):
                end = raw.index(b"\0", p)
                names.append(raw[p:end].decode("utf-8", "replace"))
                p = end + 1
            out["updated_db_names"] = names
        else:
            break
    return out
