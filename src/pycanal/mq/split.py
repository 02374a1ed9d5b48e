"""A record too large for the producer, split across several records instead of failing forever
(Canal's alibaba/canal#1179, #5524); and the parts joined back into the record a consumer expects.

The limit is ``kafka.max.request.size`` (librdkafka's ``message.max.bytes``). librdkafka refuses a
record whose value, key and headers plus its worst case of a record's framing (36 bytes: the
varints of ``RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD``) exceed it, and the broker bounds a whole record
batch (a 61-byte batch header more) by its ``message.max.bytes`` (default 1048588). A record's value may therefore take the limit less :data:`HEADROOM`, which
covers both framings, the part headers and a transaction's mark header (:mod:`pycanal.mq.mark`).
A value within that is sent as before, byte for byte; a larger one becomes parts, each within it:

* **Flat**: one message's ``data`` (and ``old``) rows, in order, over several messages that keep
  every other field of the whole: each part is a valid ``FlatMessage`` with a subset of the rows.
* **Protobuf**: the packet's entries over several packets of the same shape (raw, with the batch
  id; or version 1); an entry too large alone has its ``RowChange`` rows cut over several entries.
  A piece after the first carries the header prop :data:`ROW_PROP` (the index of its first row in
  the whole entry), so a reader numbers rows as the whole entry would and can join the pieces.

Every part carries two Kafka headers: :data:`SPLIT_HEADER`, an id shared by the parts, and
:data:`PART_HEADER`, ``i/n``. The parts go one after another to the partition of the whole.
A plain Canal consumer sees one message per part. :class:`Joiner` gives the whole back.

A single row (or an event without rows, a DDL) too large even alone raises :class:`RowTooLarge`.
No I/O here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import orjson

from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.wire import encode_varint, field_bytes, pair, split_around, varint_field

from .flat import FlatMessage
from .packet import entries_packet_bytes, raw_packet_bytes

__all__ = [
    "HEADROOM",
    "PART_HEADER",
    "ROW_PROP",
    "SPLIT_HEADER",
    "Joiner",
    "RowTooLarge",
    "join_parts",
    "part_headers",
    "row_prop",
    "split_flat",
    "split_packet",
    "value_limit",
    "with_row_prop",
]

log = logging.getLogger(__name__)

SPLIT_HEADER = "pycanal.split"
"""The header holding the id the parts of one split record share."""
PART_HEADER = "pycanal.part"
"""The header holding a part's number and the number of parts, ``i/n`` (from 1)."""
ROW_PROP = "pycanal.row"
"""The ``Entry`` header prop of a piece of a cut entry: the index of its first row in the whole."""
HEADROOM = 1024
"""Bytes of ``max.request.size`` kept for Kafka's framing (librdkafka's 36 per record, the record
batch's 61) and the headers (the part headers, a transaction's mark), with room to spare."""

_PART_OVERHEAD = 32  # a packet's own fields around its entries: type, version, batch id, lengths
_ENTRY_HEADER, _ENTRY_STORE, _CHANGE_ROWS = (
    1,
    3,
    12,
)  # field numbers: Entry.header, .storeValue, RowChange.rowDatas
_TAG_STORE, _TAG_ROWS, _TAG_PROPS, _TAG_HEADER = 0x1A, 0x62, 0x62, 0x0A
_TRANSACTION = (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND)


class RowTooLarge(ValueError):
    """One row (or a DDL) does not fit a record even alone: the destination cannot go on past it."""

    fatal = True

    def __init__(self, where: str, size: int, limit: int) -> None:
        super().__init__(
            f"record too large: the smallest record of {where} (one row, or an event without rows) "
            f"is {size} bytes, over the {limit} a record may carry (kafka.max.request.size="
            f"{limit + HEADROOM} less {HEADROOM} for Kafka's framing and headers); raise "
            "kafka.max.request.size and the broker's message.max.bytes"
        )
        self.size = size
        self.limit = limit


def value_limit(max_request_size: int) -> int:
    """The largest record value sent whole or as one part."""
    return max_request_size - HEADROOM


def part_headers(split_id: str, index: int, count: int) -> tuple[tuple[str, bytes], ...]:
    """The Kafka headers of part ``index`` of ``count`` (from 1)."""
    return ((SPLIT_HEADER, split_id.encode()), (PART_HEADER, f"{index}/{count}".encode()))


def _header_where(h: pb.Header) -> str:
    return f"{h.schemaName}.{h.tableName} at {h.logfileName}:{h.logfileOffset}"


# ---------------------------------------------------------------------------------- flat
def _json_size(value: object) -> int:
    """Bytes of ``value`` as :meth:`FlatMessage.to_json` writes it, or more (a lone surrogate)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # a lone surrogate
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return len(text.encode("utf-8", "surrogatepass"))


def split_flat(msg: FlatMessage, limit: int, header: pb.Header) -> list[bytes]:
    """``msg``'s JSON, whole if within ``limit`` bytes, else its rows over parts, each within it.
    ``header`` is its entry's, for the position an error names."""
    whole = msg.to_json()
    if len(whole) <= limit:
        return [whole]
    where = _header_where(header)
    data, old = msg.data or [], msg.old
    if not data or (old is not None and len(old) != len(data)):
        raise RowTooLarge(where, len(whole), limit)
    base = len(replace(msg, data=[], old=[] if old is not None else None).to_json())
    sizes = [
        _json_size(row) + 1 + (_json_size(old[i]) + 1 if old is not None else 0) for i, row in enumerate(data)
    ]
    parts: list[bytes] = []
    for start, end in _groups(sizes, limit - base):
        part = replace(msg, data=data[start:end], old=old[start:end] if old is not None else None).to_json()
        if len(part) > limit:
            raise RowTooLarge(where, len(part), limit)
        parts.append(part)
    return parts


def _groups(sizes: Sequence[int], room: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` runs of items whose sizes add up to at most ``room`` (an item
    larger than ``room`` alone in its run, for the caller to refuse)."""
    runs: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, size in enumerate(sizes):
        if i > start and used + size > room:
            runs.append((start, i))
            start, used = i, 0
        used += size
    if sizes:
        runs.append((start, len(sizes)))
    return runs


# ---------------------------------------------------------------------------------- protobuf
def _field_size(data: bytes) -> int:
    return 1 + len(encode_varint(len(data))) + len(data)


def _where(entry: bytes) -> str:
    return _header_where(pb.Entry.FromString(entry).header)


def split_packet(
    batch_id: int, entries: Sequence[bytes], raw: bool, filter_transaction_entry: bool, limit: int
) -> list[bytes]:
    """The packet of ``entries`` (:func:`pycanal.mq.packet.packet_bytes`' shapes), whole if within
    ``limit`` bytes, else over parts of the same shape, each within it."""

    def packet(group: Sequence[bytes]) -> bytes:
        if raw:
            return raw_packet_bytes(batch_id, group)
        return entries_packet_bytes(group, filter_transaction_entry)

    whole = packet(entries)
    if len(whole) <= limit:
        return [whole]
    if not raw and filter_transaction_entry:
        entries = [e for e in entries if varint_field(e, 2, pb.ROWDATA) not in _TRANSACTION]
    room = limit - _PART_OVERHEAD
    pieces: list[bytes] = []
    for entry in entries:
        pieces += [entry] if _field_size(entry) <= room else _cut_entry(entry, room)
    parts = [packet(pieces[start:end]) for start, end in _groups([_field_size(p) for p in pieces], room)]
    for part in parts:
        if len(part) > limit:
            raise RowTooLarge(_where(cp.Messages.FromString(_body(part)).messages[0]), len(part), limit)
    return parts


def _body(packet: bytes) -> bytes:
    return cp.Packet.FromString(packet).body


def _cut_entry(entry: bytes, room: int) -> list[bytes]:
    """``entry`` as entries of consecutive runs of its rows, each within ``room`` as a packet field."""
    head, stores, tail = split_around(entry, _ENTRY_STORE)
    if len(stores) != 1:
        raise RowTooLarge(_where(entry), _field_size(entry), room + _PART_OVERHEAD)
    change_head, rows, change_tail = split_around(stores[0], _CHANGE_ROWS)
    if len(rows) < 2:
        raise RowTooLarge(_where(entry), _field_size(entry), room + _PART_OVERHEAD)
    # Room for what surrounds the rows: the entry's fields, the change's, their lengths, the prop.
    frame = _field_size(with_row_prop(head, len(rows))) + len(change_head) + len(change_tail) + len(tail) + 16
    out: list[bytes] = []
    for start, end in _groups([_field_size(r) for r in rows], room - frame):
        store = change_head + b"".join(field_bytes(_TAG_ROWS, r) for r in rows[start:end]) + change_tail
        out.append((with_row_prop(head, start) if start else head) + field_bytes(_TAG_STORE, store) + tail)
    return out


def with_row_prop(head: bytes, row: int, *more: tuple[str, str]) -> bytes:
    """An entry's fields before ``storeValue`` with :data:`ROW_PROP` (and ``more`` props) added to
    its header's props."""
    before, headers, after = split_around(head, _ENTRY_HEADER)
    props = b"".join(field_bytes(_TAG_PROPS, pair(k, v)) for k, v in ((ROW_PROP, str(row)), *more))
    return before + field_bytes(_TAG_HEADER, (headers[0] if headers else b"") + props) + after


def row_prop(header: pb.Header) -> int | None:
    """The :data:`ROW_PROP` of an entry's header: it is a piece of a cut entry."""
    for prop in header.props:
        if prop.key == ROW_PROP:
            return int(prop.value)
    return None


def _join_entries(entries: list[bytes]) -> list[bytes]:
    """Entries with each piece of a cut entry joined to the one before it: the whole entry's bytes."""
    out: list[bytes] = []
    for entry in entries:
        if out and row_prop(pb.Entry.FromString(entry).header):
            head, stores, tail = split_around(out[-1], _ENTRY_STORE)
            change_head, rows, change_tail = split_around(stores[0], _CHANGE_ROWS)
            more = split_around(split_around(entry, _ENTRY_STORE)[1][0], _CHANGE_ROWS)[1]
            store = change_head + b"".join(field_bytes(_TAG_ROWS, r) for r in rows + more) + change_tail
            out[-1] = head + field_bytes(_TAG_STORE, store) + tail
        else:
            out.append(entry)
    return out


# ---------------------------------------------------------------------------------- joining
def join_parts(values: Sequence[bytes]) -> bytes:
    """The record the parts ``values`` (in order) were split from, byte for byte."""
    if values[0][:1] == b"{":
        first = FlatMessage.from_json(values[0])
        rest = [FlatMessage.from_json(v) for v in values[1:]]
        data = [row for m in (first, *rest) for row in m.data or []]
        old = None if first.old is None else [row for m in (first, *rest) for row in m.old or []]
        return replace(first, data=data, old=old).to_json()
    packets = [cp.Packet.FromString(v) for v in values]
    bodies = [cp.Messages.FromString(p.body) for p in packets]
    entries = _join_entries([e for body in bodies for e in body.messages])
    if packets[0].version:
        return entries_packet_bytes(entries, False)
    return raw_packet_bytes(bodies[0].batch_id, entries)


def _header(headers: Sequence[tuple[str, bytes | None]] | None, name: str) -> str | None:
    for key, value in headers or ():
        if key == name and value is not None:
            return value.decode("utf-8", "replace")
    return None


@dataclass(slots=True)
class _Pending:
    split_id: str
    count: int
    offset: int
    values: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class Joiner:
    """The records of a consumer's partitions with split records joined: :meth:`add` each record in
    offset order; it returns ``(offset, value)`` of a whole record (the first part's offset), or
    None while parts are missing. A split whose parts break off (a send that failed part way: the
    batch is sent again, from part 1) is dropped with a warning."""

    on_drop: Callable[[str], None] = log.warning
    _pending: dict[tuple[str, int], _Pending] = field(default_factory=dict)

    def add(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
    ) -> tuple[int, bytes | None] | None:
        key = (topic, partition)
        part, split_id = _header(headers, PART_HEADER), _header(headers, SPLIT_HEADER)
        pending = self._pending.get(key)
        if part is None or split_id is None:
            if pending is not None:
                self._drop(key, pending, f"a whole record at offset {offset}")
            return offset, value
        index, count = (int(n) for n in part.split("/"))
        if index == 1:
            if pending is not None:
                self._drop(key, pending, f"part 1 of another at offset {offset}")
            pending = self._pending[key] = _Pending(split_id, count, offset)
        elif pending is None or pending.split_id != split_id or len(pending.values) + 1 != index:
            self.on_drop(f"{topic}[{partition}]@{offset}: part {part} of split {split_id} without its first")
            return None
        pending.values.append(value or b"")
        if index < count:
            return None
        del self._pending[key]
        return pending.offset, join_parts(pending.values)

    def _drop(self, key: tuple[str, int], pending: _Pending, why: str) -> None:
        del self._pending[key]
        self.on_drop(
            f"{key[0]}[{key[1]}]@{pending.offset}: split {pending.split_id} broke off after "
            f"{len(pending.values)} of {pending.count} parts ({why}); it comes again whole"
        )
