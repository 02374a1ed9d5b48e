"""MySQL GTID sets and events (see :mod:`pycanal.binlog.gtid`).

Binary layouts (all integers little-endian):

GTID set, classic (MySQL 5.6+)::

    u64 n_sids
    n_sids x { 16-byte uuid, u64 n_intervals, n_intervals x { u64 start, u64 end (exclusive) } }

GTID set, tagged (MySQL 8.3+, written when any member has a tag)::

    u64 header = (format << 56) | (n_sids << 8) | format        with format = 1
    n_sids x { 16-byte uuid, varlen tag_length, tag bytes (0-32, lowercase),
               u64 n_intervals, n_intervals x { u64 start, u64 end (exclusive) } }

  The format code sits in the top byte; for the tagged format the count is in bits 8..55 and
  the low byte repeats the format. ``varlen`` is the serialization-library integer described at
  :func:`_read_varlen`; a tag length below 128 is therefore one byte ``length << 1``. Untagged
  members of a tagged set carry tag length 0. Intervals of one member must be sorted and must
  not touch (``start > previous end``), as the server rejects anything else.

GTID_TAGGED_LOG_EVENT body (``mysql::serialization`` message)::

    varlen format_version (= 1)  varlen message_size (counts the whole message, from the
    format_version byte on)  varlen last_non_ignorable_field_id
    then { varlen field_id, field data } in increasing field_id order, optional ones omitted:
      0 gtid_flags u8 | 1 uuid: 16 x varlen u8 | 2 gno: signed varlen | 3 tag: varlen length +
      bytes | 4 last_committed: signed | 5 sequence_number: signed | 6 immediate_commit_timestamp
      | 7 original_commit_timestamp (omitted when equal to 6) | 8 transaction_length
      | 9 immediate_server_version | 10 original_server_version (omitted when equal to 9)
      | 11 commit_group_ticket (omitted when unset); unsigned varlen unless noted.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ..errors import BinlogError
from ..packed import read_packed_int
from ._common import (
    _ANONYMOUS_GTID_LOG_EVENT,
    _GTID_LOG_EVENT,
    _GTID_TAGGED_LOG_EVENT,
    _U8,
    _U32,
    _U64,
    _WHITESPACE,
    GNO_END,
    MAX_GNO,
    TAG_MAX_LENGTH,
    _check_gno,
    _is_uuid_text,
    _need,
    _normalize_tag,
    _raw,
    _read_varlen,
    _read_varlen_signed,
    _u,
    _uuid_bytes,
    _uuid_text,
    _write_varlen,
)

# ---------------------------------------------------------------------------------------------
# MySQL GTID sets
# ---------------------------------------------------------------------------------------------

_Key = tuple[bytes, str]  # (16-byte uuid, tag or "")


def _merge_into(ivs: list[list[int]], start: int, end: int) -> None:
    """Insert half-open ``[start, end)`` into the sorted, merged interval list ``ivs``."""
    i = bisect.bisect_left(ivs, [start, start])
    if i > 0 and ivs[i - 1][1] >= start:
        i -= 1
    j = i
    while j < len(ivs) and ivs[j][0] <= end:
        start = min(start, ivs[j][0])
        end = max(end, ivs[j][1])
        j += 1
    ivs[i:j] = [[start, end]]


class MysqlGtidSet:
    """A MySQL GTID set: for each source (uuid plus optional tag) a set of GNO intervals.

    ``str()`` gives the server's canonical text: members sorted by uuid then tag (untagged
    first), adjacent and overlapping intervals merged, uuids in lowercase, a tag written as
    ``uuid:tag:1-3`` (several tags of one uuid share the uuid: ``uuid:1-5:a:1:b:2-3``). The
    server separates uuids with ``",\\n"``; ``str()`` uses ``","`` so the text fits on one line
    (``to_string(",\\n")`` reproduces the server's output byte for byte).
    """

    __slots__ = ("_members",)

    def __init__(self) -> None:
        self._members: dict[_Key, list[list[int]]] = {}

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """Parse GTID-set text as the server accepts it (e.g. ``@@gtid_executed``).

        Members are separated by commas (newlines and other whitespace are ignored, empty
        members allowed); each is ``uuid`` followed by ``:``-separated items, where an item is
        an interval (``7`` or ``1-5``) or a tag that applies to the intervals after it
        (``uuid:1-5:tag:3``). UUIDs and tags are case-insensitive.
        """
        if not isinstance(text, str):
            raise TypeError(f"GTID set text must be str, not {type(text).__name__}")
        result = cls()
        _GtidTextParser(text, result).run()
        return result

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> MysqlGtidSet:
        """Decode the binary encoding (classic or tagged); the whole of ``data`` must be used."""
        raw = _raw(data, "GTID set")
        result, used = cls._decode_prefix(raw)
        if used != len(raw):
            raise BinlogError(
                f"GTID set encoding: {len(raw) - used} unexpected trailing byte(s) at body byte {used}"
            )
        return result

    @classmethod
    def _decode_prefix(cls, data: bytes) -> tuple[MysqlGtidSet, int]:
        what = "GTID set encoding"
        header = _u(data, 0, 8, what + " header")
        fmt = header >> 56
        if fmt == 0:
            tagged = False
            n_sids = header & ((1 << 56) - 1)
        elif fmt == 1:
            tagged = True
            n_sids = (header >> 8) & ((1 << 48) - 1)
        else:
            raise BinlogError(f"{what}: unknown format {fmt} in the top byte of the member count")
        result = cls()
        pos = 8
        for index in range(n_sids):
            member = f"{what}: member {index + 1} of {n_sids}"
            _need(data, pos, 16 + 8, member)
            uuid = data[pos : pos + 16]
            pos += 16
            tag = ""
            if tagged:
                tag_len, pos = _read_varlen(data, pos, len(data), member + " tag length")
                if tag_len > TAG_MAX_LENGTH:
                    raise BinlogError(f"{member}: tag length {tag_len} exceeds {TAG_MAX_LENGTH}")
                _need(data, pos, tag_len, member + " tag")
                tag = _decode_tag_bytes(data[pos : pos + tag_len], member)
                pos += tag_len
            n_intervals = _u(data, pos, 8, member + " interval count")
            pos += 8
            if n_intervals > (len(data) - pos) // 16:
                raise BinlogError(
                    f"{member}: truncated, {n_intervals} interval(s) announced but only "
                    f"{len(data) - pos} byte(s) remain at body byte {pos}"
                )
            ivs = result._members.setdefault((uuid, tag), [])
            last = 0
            for _ in range(n_intervals):
                start = int.from_bytes(data[pos : pos + 8], "little")
                end = int.from_bytes(data[pos + 8 : pos + 16], "little")
                if start <= last or end <= start or end > GNO_END:
                    raise BinlogError(
                        f"{member}: bad interval [{start}, {end}) at body byte {pos} "
                        "(intervals must be ascending, non-touching, 1 <= start < end <= 2^63-1)"
                    )
                _merge_into(ivs, start, end)
                last = end
                pos += 16
            if not ivs:
                del result._members[(uuid, tag)]
        return result, pos

    def copy(self) -> MysqlGtidSet:
        other = MysqlGtidSet()
        other._members = {k: [iv[:] for iv in v] for k, v in self._members.items()}
        return other

    # -- mutation ----------------------------------------------------------------------------

    def add(self, uuid: str | bytes, gno: int, tag: str | None = None) -> None:
        """Add one GTID (``uuid[:tag]:gno``)."""
        self.add_interval(uuid, gno, gno, tag)

    def add_interval(self, uuid: str | bytes, first: int, last: int, tag: str | None = None) -> None:
        """Add the GNOs ``first..last`` (both inclusive) of one source."""
        key = (_uuid_bytes(uuid), _normalize_tag(tag))
        _check_gno(first, "first GNO")
        _check_gno(last, "last GNO")
        if last < first:
            raise BinlogError(f"invalid GNO interval {first}-{last}: the end is before the start")
        _merge_into(self._members.setdefault(key, []), first, last + 1)

    def update(self, *others: MysqlGtidSet | str) -> None:
        """Add every GTID of ``others`` (sets, or GTID-set text) to this set."""
        for other in others:
            if isinstance(other, str):
                other = MysqlGtidSet.parse(other)
            elif not isinstance(other, MysqlGtidSet):
                raise TypeError(f"cannot merge {type(other).__name__} into a MysqlGtidSet")
            for key, ivs in other._members.items():
                mine = self._members.setdefault(key, [])
                for start, end in ivs:
                    _merge_into(mine, start, end)

    def union(self, *others: MysqlGtidSet | str) -> MysqlGtidSet:
        result = self.copy()
        result.update(*others)
        return result

    def __or__(self, other: object) -> MysqlGtidSet:
        if not isinstance(other, (MysqlGtidSet, str)):
            return NotImplemented
        return self.union(other)

    def __ior__(self, other: object) -> MysqlGtidSet:
        if not isinstance(other, (MysqlGtidSet, str)):
            return NotImplemented
        self.update(other)
        return self

    # -- queries -----------------------------------------------------------------------------

    def contains(self, uuid: str | bytes, gno: int, tag: str | None = None) -> bool:
        """Whether the GTID ``uuid[:tag]:gno`` is in the set."""
        ivs = self._members.get((_uuid_bytes(uuid), _normalize_tag(tag)))
        if not ivs or not isinstance(gno, int):
            return False
        i = bisect.bisect_right(ivs, [gno, GNO_END + 1]) - 1
        return i >= 0 and ivs[i][0] <= gno < ivs[i][1]

    def __contains__(self, gtid: object) -> bool:
        """``"uuid:gno" in s`` / ``"uuid:tag:gno" in s``."""
        if not isinstance(gtid, str):
            return False
        parts = [p.strip(_WHITESPACE) for p in gtid.split(":")]
        if len(parts) not in (2, 3) or not parts[-1].isdigit():
            raise BinlogError(f"invalid GTID {gtid!r}: expected uuid:gno or uuid:tag:gno")
        return self.contains(parts[0], int(parts[-1]), parts[1] if len(parts) == 3 else None)

    def issubset(self, other: MysqlGtidSet) -> bool:
        for key, ivs in self._members.items():
            theirs = other._members.get(key)
            if not theirs:
                return False
            for start, end in ivs:
                i = bisect.bisect_right(theirs, [start, GNO_END + 1]) - 1
                if i < 0 or theirs[i][1] < end:
                    return False
        return True

    def __le__(self, other: object) -> bool:
        if not isinstance(other, MysqlGtidSet):
            return NotImplemented
        return self.issubset(other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, MysqlGtidSet):
            return NotImplemented
        return other.issubset(self)

    def intervals(self, uuid: str | bytes, tag: str | None = None) -> list[tuple[int, int]]:
        """The GNO ranges of one source as inclusive ``(first, last)`` pairs, ascending."""
        ivs = self._members.get((_uuid_bytes(uuid), _normalize_tag(tag)), [])
        return [(start, end - 1) for start, end in ivs]

    def last_gno(self, uuid: str | bytes, tag: str | None = None) -> int:
        """The highest GNO of the source, 0 if it has none."""
        ivs = self._members.get((_uuid_bytes(uuid), _normalize_tag(tag)))
        return ivs[-1][1] - 1 if ivs else 0

    def members(self) -> Iterator[tuple[str, str | None, list[tuple[int, int]]]]:
        """``(uuid, tag or None, inclusive intervals)`` for each source, in canonical order."""
        for uuid, tag in sorted(self._members):
            yield (
                _uuid_text(uuid),
                tag or None,
                [(start, end - 1) for start, end in self._members[(uuid, tag)]],
            )

    @property
    def is_tagged(self) -> bool:
        """True when a member has a tag (``encode()`` then uses the tagged layout)."""
        return any(tag for _, tag in self._members)

    def gtid_count(self) -> int:
        return sum(end - start for ivs in self._members.values() for start, end in ivs)

    def __bool__(self) -> bool:
        return bool(self._members)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MysqlGtidSet):
            return NotImplemented
        return self._members == other._members

    __hash__ = None  # type: ignore[assignment]  # mutable

    # -- output ------------------------------------------------------------------------------

    def to_string(self, separator: str = ",") -> str:
        out: list[str] = []
        prev_uuid: bytes | None = None
        for uuid, tag in sorted(self._members):
            if uuid != prev_uuid:
                if prev_uuid is not None:
                    out.append(separator)
                out.append(_uuid_text(uuid))
                prev_uuid = uuid
            if tag:
                out.append(":" + tag)
            for start, end in self._members[(uuid, tag)]:
                out.append(f":{start}" if end == start + 1 else f":{start}-{end - 1}")
        return "".join(out)

    def __str__(self) -> str:
        return self.to_string(",")

    def __repr__(self) -> str:
        return f"MysqlGtidSet({self.to_string(',')!r})"

    def encode(self) -> bytes:
        """Binary form for ``COM_BINLOG_DUMP_GTID`` / ``PREVIOUS_GTIDS``.

        The classic layout when no member is tagged (every server understands it), otherwise
        the tagged layout of MySQL 8.3+ (older servers reject it).
        """
        keys = sorted(self._members)
        tagged = any(tag for _, tag in keys)
        n = len(keys)
        out = bytearray(((1 << 56) | (n << 8) | 1 if tagged else n).to_bytes(8, "little"))
        for uuid, tag in keys:
            out += uuid
            if tagged:
                raw = tag.encode("ascii")
                out += _write_varlen(len(raw))
                out += raw
            ivs = self._members[(uuid, tag)]
            out += len(ivs).to_bytes(8, "little")
            for start, end in ivs:
                out += start.to_bytes(8, "little")
                out += end.to_bytes(8, "little")
        return bytes(out)


def _decode_tag_bytes(raw: bytes, what: str) -> str:
    if not raw:
        return ""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise BinlogError(f"{what}: tag {raw!r} is not ASCII") from None
    try:
        return _normalize_tag(text)
    except BinlogError as exc:
        raise BinlogError(f"{what}: {exc.message}") from None


class _GtidTextParser:
    """Recursive-descent reader for GTID-set text, following the server's own rules."""

    def __init__(self, text: str, target: MysqlGtidSet) -> None:
        self.text = text
        self.pos = 0
        self.target = target

    def fail(self, why: str) -> BinlogError:
        shown = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        return BinlogError(f"malformed GTID set {shown!r}: {why} at character {self.pos}")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
            self.pos += 1

    def run(self) -> None:
        self.skip_ws()
        while True:
            while self.peek() == ",":
                self.pos += 1
                self.skip_ws()
            if self.pos >= len(self.text):
                return
            self.member()
            self.skip_ws()
            if self.peek() not in (",", ""):
                raise self.fail(f"expected ',' or ':' but found {self.peek()!r}")

    def member(self) -> None:
        chunk = self.text[self.pos : self.pos + 36]
        if not _is_uuid_text(chunk):
            raise self.fail("expected a UUID (8-4-4-4-12 hexadecimal digits)")
        uuid = bytes.fromhex(chunk.replace("-", ""))
        self.pos += 36
        tag = ""
        self.skip_ws()
        while self.peek() == ":":
            self.pos += 1
            self.skip_ws()
            ch = self.peek()
            if ch.isascii() and (ch.isalpha() or ch == "_"):
                start = self.pos
                while self.pos < len(self.text) and (
                    self.text[self.pos].isascii()
                    and (self.text[self.pos].isalnum() or self.text[self.pos] == "_")
                ):
                    self.pos += 1
                word = self.text[start : self.pos]
                if len(word) > TAG_MAX_LENGTH:
                    self.pos = start
                    raise self.fail(f"tag longer than {TAG_MAX_LENGTH} characters")
                tag = word.lower()
            else:
                first = self.number()
                self.skip_ws()
                last = first
                if self.peek() == "-":
                    self.pos += 1
                    self.skip_ws()
                    last = self.number()
                    if last < first:
                        raise self.fail(f"interval {first}-{last} ends before it starts")
                _merge_into(self.target._members.setdefault((uuid, tag), []), first, last + 1)
            self.skip_ws()

    def number(self) -> int:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in "0123456789":
            self.pos += 1
        digits = self.text[start : self.pos]
        if not digits:
            raise self.fail("expected a transaction number or a tag")
        value = int(digits)
        if not 1 <= value <= MAX_GNO:
            self.pos = start
            raise self.fail(f"transaction number {digits} out of range 1..{MAX_GNO}")
        return value


# ---------------------------------------------------------------------------------------------
# MySQL GTID events
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)  # not frozen, for its speed: see MariadbGtidEvent
class MysqlGtidEvent:
    """``GTID_LOG_EVENT`` / ``ANONYMOUS_GTID_LOG_EVENT`` / ``GTID_TAGGED_LOG_EVENT``.

    A field is ``None`` when the server that wrote the event did not write it (5.6 writes only
    flags, uuid and gno; 5.7 adds the logical clock; 8.0.1 the commit timestamps; 8.0.2 the
    transaction length; 8.0.14 the server versions; later 8.0 servers an 8-byte binlog group
    commit ticket, only while one is set). When the original timestamp / server version is not
    written it equals the immediate one, exactly as the server reads it. Timestamps are
    microseconds since the epoch; server versions are ``major * 10000 + minor * 100 + patch``.
    ``uuid`` is lowercase text; ``tag`` is only set for ``GTID_TAGGED_LOG_EVENT``.
    """

    FLAG_MAY_HAVE_SBR: ClassVar[int] = 0x01
    LOGICAL_TIMESTAMP_TYPECODE: ClassVar[int] = 2
    UNDEFINED_SERVER_VERSION: ClassVar[int] = 999999

    event_type: int
    flags: int
    uuid: str
    gno: int
    tag: str | None = None
    lt_type: int | None = None
    last_committed: int | None = None
    sequence_number: int | None = None
    immediate_commit_timestamp: int | None = None
    original_commit_timestamp: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None
    commit_group_ticket: int | None = None

    @property
    def anonymous(self) -> bool:
        return self.event_type == _ANONYMOUS_GTID_LOG_EVENT

    @property
    def tagged(self) -> bool:
        return self.event_type == _GTID_TAGGED_LOG_EVENT

    @property
    def may_have_sbr(self) -> bool:
        """Flag bit 0: the transaction may contain statement-based events (the 5.6 "commit flag")."""
        return bool(self.flags & self.FLAG_MAY_HAVE_SBR)

    @property
    def gtid(self) -> str | None:
        """``uuid:gno`` or ``uuid:tag:gno``; ``None`` for an anonymous transaction."""
        if self.anonymous:
            return None
        return f"{self.uuid}:{self.tag}:{self.gno}" if self.tag else f"{self.uuid}:{self.gno}"


def decode_mysql_gtid_event(
    body: bytes | bytearray | memoryview, event_type: int = _GTID_LOG_EVENT
) -> MysqlGtidEvent:
    """Decode the body of a MySQL event of type 33, 34 or 42."""
    data = _raw(body, "GTID event body")
    event_type = int(event_type)
    if event_type == _GTID_TAGGED_LOG_EVENT:
        return _decode_tagged_gtid(data)
    if event_type not in (_GTID_LOG_EVENT, _ANONYMOUS_GTID_LOG_EVENT):
        raise BinlogError(f"event type {event_type} is not a MySQL GTID event (33, 34 or 42)")
    name = "GTID_LOG_EVENT" if event_type == _GTID_LOG_EVENT else "ANONYMOUS_GTID_LOG_EVENT"
    _need(data, 0, 25, name + " flags/uuid/gno")
    flags = data[0]
    uuid = _uuid_text(data[1:17])
    gno = int.from_bytes(data[17:25], "little", signed=True)
    if event_type == _GTID_LOG_EVENT:
        if not 1 <= gno <= MAX_GNO:
            raise BinlogError(f"{name}: invalid GNO {gno} (must be 1..{MAX_GNO})")
    elif gno != 0:
        raise BinlogError(f"{name}: GNO must be 0, found {gno}")
    fields: dict[str, int] = {}
    pos = 25
    n = len(data)
    if pos < n:
        lt_type = data[pos]
        fields["lt_type"] = lt_type
        pos += 1
        # 5.7.4 and earlier used another typecode and shorter clocks: ignored, as the server does.
        if lt_type == MysqlGtidEvent.LOGICAL_TIMESTAMP_TYPECODE:
            fields["last_committed"] = _u(data, pos, 8, name + " last_committed")
            fields["sequence_number"] = _u(data, pos + 8, 8, name + " sequence_number")
            pos += 16
            if n - pos >= 7:
                immediate = int.from_bytes(data[pos : pos + 7], "little")
                pos += 7
                if immediate & (1 << 55):
                    immediate &= (1 << 55) - 1
                    original = _u(data, pos, 7, name + " original_commit_timestamp")
                    pos += 7
                else:
                    original = immediate
                fields["immediate_commit_timestamp"] = immediate
                fields["original_commit_timestamp"] = original
                if pos < n:
                    fields["transaction_length"], pos = read_packed_int(data, pos)
                if n - pos >= 4:
                    immediate_v = int.from_bytes(data[pos : pos + 4], "little")
                    pos += 4
                    if immediate_v & (1 << 31):
                        immediate_v &= (1 << 31) - 1
                        original_v = _u(data, pos, 4, name + " original_server_version")
                        pos += 4
                    else:
                        original_v = immediate_v
                    fields["immediate_server_version"] = immediate_v
                    fields["original_server_version"] = original_v
                    if n - pos >= 8:
                        fields["commit_group_ticket"] = int.from_bytes(data[pos : pos + 8], "little")
    return MysqlGtidEvent(event_type, flags, uuid, gno, None, **fields)


# Field ids of the GTID_TAGGED_LOG_EVENT message, in the order the server defines them.
_TAGGED_FIELDS = (
    "flags",
    "uuid",
    "gno",
    "tag",
    "last_committed",
    "sequence_number",
    "immediate_commit_timestamp",
    "original_commit_timestamp",
    "transaction_length",
    "immediate_server_version",
    "original_server_version",
    "commit_group_ticket",
)
_SERIALIZATION_FORMAT_VERSION = 1


def _decode_tagged_gtid(data: bytes) -> MysqlGtidEvent:
    name = "GTID_TAGGED_LOG_EVENT"
    end = len(data)
    version, pos = _read_varlen(data, 0, end, name + " format version")
    if version != _SERIALIZATION_FORMAT_VERSION:
        raise BinlogError(f"{name}: unsupported serialization format version {version}")
    size, pos = _read_varlen(data, pos, end, name + " message size")
    if size > end:
        raise BinlogError(f"{name}: truncated, message size {size} but the body has {end} byte(s)")
    last_non_ignorable, pos = _read_varlen(data, pos, end, name + " last non-ignorable field id")
    if size < pos:
        raise BinlogError(f"{name}: message size {size} is smaller than its own header ({pos} bytes)")
    if last_non_ignorable > len(_TAGGED_FIELDS):
        raise BinlogError(
            f"{name}: the message requires field {last_non_ignorable - 1}, unknown to this decoder"
        )
    end = size
    values: dict[str, object] = {}
    expected = 0
    while pos < end:
        field_id, after_id = _read_varlen(data, pos, end, name + " field id")
        if field_id < expected:
            raise BinlogError(f"{name}: field id {field_id} out of order at body byte {pos}")
        if field_id >= len(_TAGGED_FIELDS):
            break  # fields of a newer server, all ignorable (checked above): skip to the end
        field = _TAGGED_FIELDS[field_id]
        what = f"{name} field {field_id} ({field})"
        pos = after_id
        if field == "uuid":
            raw = bytearray()
            for _ in range(16):
                byte, pos = _read_varlen(data, pos, end, what)
                if byte > _U8:
                    raise BinlogError(f"{what}: byte value {byte} out of range")
                raw.append(byte)
            values[field] = _uuid_text(bytes(raw))
        elif field == "tag":
            length, pos = _read_varlen(data, pos, end, what + " length")
            if length > TAG_MAX_LENGTH:
                raise BinlogError(f"{what}: length {length} exceeds {TAG_MAX_LENGTH}")
            if pos + length > end:
                raise BinlogError(f"{what}: truncated, {length} byte(s) needed at body byte {pos}")
            values[field] = _decode_tag_bytes(data[pos : pos + length], what) or None
            pos += length
        elif field in ("gno", "last_committed", "sequence_number"):
            values[field], pos = _read_varlen_signed(data, pos, end, what)
        else:
            value, pos = _read_varlen(data, pos, end, what)
            limit = _U8 if field == "flags" else _U32 if field.endswith("server_version") else _U64
            if value > limit:
                raise BinlogError(f"{what}: value {value} out of range")
            values[field] = value
        expected = field_id + 1
    gno = values.get("gno", 0)
    if not isinstance(gno, int) or not 1 <= gno <= MAX_GNO:
        raise BinlogError(f"{name}: invalid or missing GNO {gno} (must be 1..{MAX_GNO})")
    if "immediate_commit_timestamp" in values:
        values.setdefault("original_commit_timestamp", values["immediate_commit_timestamp"])
    if "immediate_server_version" in values:
        values.setdefault("original_server_version", values["immediate_server_version"])
    return MysqlGtidEvent(
        event_type=_GTID_TAGGED_LOG_EVENT,
        flags=values.pop("flags", 0),  # type: ignore[arg-type]
        uuid=values.pop("uuid", _uuid_text(bytes(16))),  # type: ignore[arg-type]
        **values,  # type: ignore[arg-type]
    )


@dataclass(frozen=True, slots=True)
class MysqlPreviousGtidsEvent:
    """``PREVIOUS_GTIDS_LOG_EVENT``: the GTIDs written before this binlog file."""

    gtid_set: MysqlGtidSet
    tagged: bool  # the body used the tagged (8.3+) layout


def decode_previous_gtids_event(body: bytes | bytearray | memoryview) -> MysqlPreviousGtidsEvent:
    data = _raw(body, "PREVIOUS_GTIDS_LOG_EVENT body")
    try:
        gtid_set = MysqlGtidSet.decode(data)
    except BinlogError as exc:
        raise BinlogError(f"PREVIOUS_GTIDS_LOG_EVENT: {exc.message}") from None
    return MysqlPreviousGtidsEvent(gtid_set, data[7] == 1)
