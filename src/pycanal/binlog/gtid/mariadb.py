"""MariaDB GTIDs, GTID sets and GTID events (see :mod:`pycanal.binlog.gtid`)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from ..errors import BinlogError
from ._common import _U32, _U64, _WHITESPACE, _need, _raw, _u

# ---------------------------------------------------------------------------------------------
# MariaDB GTIDs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class MariadbGtid:
    """A MariaDB GTID ``domain_id-server_id-seq_no``."""

    domain_id: int
    server_id: int
    seq_no: int

    def __post_init__(self) -> None:
        for name, limit in (("domain_id", _U32), ("server_id", _U32), ("seq_no", _U64)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"MariadbGtid.{name} must be int, not {type(value).__name__}")
            if not 0 <= value <= limit:
                raise BinlogError(f"MariaDB GTID {name} {value} out of range 0..{limit}")

    @classmethod
    def parse(cls, text: str) -> MariadbGtid:
        if not isinstance(text, str):
            raise TypeError(f"MariaDB GTID text must be str, not {type(text).__name__}")
        parts = text.strip(_WHITESPACE).split("-")
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
            raise BinlogError(f"invalid MariaDB GTID {text!r}: expected domain-server-sequence")
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))

    def __str__(self) -> str:
        return gtid_text(self.domain_id, self.server_id, self.seq_no)


def gtid_text(domain_id: int, server_id: int, seq_no: int) -> str:
    """A MariaDB GTID's text, ``domain_id-server_id-seq_no``."""
    return f"{domain_id}-{server_id}-{seq_no}"


class MariadbGtidSet:
    """A MariaDB replication position: the last GTID of each domain (at most one per domain).

    ``str()`` is the text for ``SET @slave_connect_state='...'`` / ``gtid_slave_pos``: the
    GTIDs sorted by domain, joined by commas.
    """

    __slots__ = ("_by_domain",)

    def __init__(self, gtids: Iterable[MariadbGtid | str] = ()) -> None:
        self._by_domain: dict[int, MariadbGtid] = {}
        for gtid in gtids:
            self.update(gtid)

    @classmethod
    def parse(cls, text: str) -> MariadbGtidSet:
        """Parse ``0-1-100,1-2-5``; empty text is the empty position; a domain may appear once."""
        if not isinstance(text, str):
            raise TypeError(f"MariaDB GTID position must be str, not {type(text).__name__}")
        result = cls()
        if not text.strip(_WHITESPACE):
            return result
        for item in text.split(","):
            gtid = MariadbGtid.parse(item)
            if gtid.domain_id in result._by_domain:
                raise BinlogError(
                    f"invalid MariaDB GTID position {text!r}: domain {gtid.domain_id} appears twice"
                )
            result._by_domain[gtid.domain_id] = gtid
        return result

    def update(self, gtid: MariadbGtid | str) -> None:
        """Make ``gtid`` the position of its domain (replacing any previous one)."""
        if isinstance(gtid, str):
            gtid = MariadbGtid.parse(gtid)
        elif not isinstance(gtid, MariadbGtid):
            raise TypeError(f"expected MariadbGtid or str, not {type(gtid).__name__}")
        self._by_domain[gtid.domain_id] = gtid

    def get(self, domain_id: int) -> MariadbGtid | None:
        return self._by_domain.get(domain_id)

    def copy(self) -> MariadbGtidSet:
        other = MariadbGtidSet()
        other._by_domain = dict(self._by_domain)
        return other

    def __iter__(self) -> Iterator[MariadbGtid]:
        return iter(sorted(self._by_domain.values()))

    def __len__(self) -> int:
        return len(self._by_domain)

    def __contains__(self, gtid: object) -> bool:
        if isinstance(gtid, str):
            gtid = MariadbGtid.parse(gtid)
        return isinstance(gtid, MariadbGtid) and self._by_domain.get(gtid.domain_id) == gtid

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MariadbGtidSet):
            return NotImplemented
        return self._by_domain == other._by_domain

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __str__(self) -> str:
        return ",".join(str(g) for g in self)

    def __repr__(self) -> str:
        return f"MariadbGtidSet({str(self)!r})"


# ---------------------------------------------------------------------------------------------
# MariaDB events
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MariadbXid:
    """The XA transaction id carried by a GTID event of an XA PREPARE / XA COMMIT group."""

    format_id: int
    gtrid: bytes
    bqual: bytes


@dataclass(slots=True)
class MariadbGtidEvent:
    """MariaDB ``GTID_EVENT`` (162): starts an event group (or a standalone statement).

    A decoded event like those of ``pycanal.binlog.events``, not frozen as the GTID values are:
    one is made for every transaction, and a frozen dataclass's ``__init__`` (a
    ``object.__setattr__`` per field) took 1.03 us against 0.18."""

    FL_STANDALONE: ClassVar[int] = 0x01
    FL_GROUP_COMMIT_ID: ClassVar[int] = 0x02
    FL_TRANSACTIONAL: ClassVar[int] = 0x04
    FL_ALLOW_PARALLEL: ClassVar[int] = 0x08
    FL_WAITED: ClassVar[int] = 0x10
    FL_DDL: ClassVar[int] = 0x20
    FL_PREPARED_XA: ClassVar[int] = 0x40
    FL_COMPLETED_XA: ClassVar[int] = 0x80
    # flags_extra (MariaDB 10.8+; thread id 11.5+)
    FL_EXTRA_MULTI_ENGINE: ClassVar[int] = 0x01
    FL_START_ALTER: ClassVar[int] = 0x02
    FL_COMMIT_ALTER: ClassVar[int] = 0x04
    FL_ROLLBACK_ALTER: ClassVar[int] = 0x08
    FL_EXTRA_THREAD_ID: ClassVar[int] = 0x10

    seq_no: int
    domain_id: int
    server_id: int
    flags2: int
    commit_id: int | None = None
    xid: MariadbXid | None = None
    flags_extra: int = 0
    extra_engines: int | None = None
    sa_seq_no: int | None = None
    thread_id: int | None = None

    @property
    def gtid(self) -> MariadbGtid:
        return MariadbGtid(self.domain_id, self.server_id, self.seq_no)

    @property
    def text(self) -> str:
        """``str(self.gtid)`` without making (and range-checking) a :class:`MariadbGtid`: the
        decoder names every transaction's GTID so."""
        return gtid_text(self.domain_id, self.server_id, self.seq_no)

    @property
    def standalone(self) -> bool:
        """No BEGIN..COMMIT follows: the group is one statement (e.g. DDL) with no XID/COMMIT."""
        return bool(self.flags2 & self.FL_STANDALONE)

    @property
    def is_ddl(self) -> bool:
        return bool(self.flags2 & self.FL_DDL)

    @property
    def transactional(self) -> bool:
        return bool(self.flags2 & self.FL_TRANSACTIONAL)

    @property
    def prepared_xa(self) -> bool:
        return bool(self.flags2 & self.FL_PREPARED_XA)

    @property
    def completed_xa(self) -> bool:
        return bool(self.flags2 & self.FL_COMPLETED_XA)


_MARIADB_GTID_HEADER_LEN = 19
_GTID_HEAD = struct.Struct("<QIB")  # seq_no, domain_id, flags2
_NAME = "MariaDB GTID_EVENT"
_XA_PART_MAX = 64
_FL_COMMIT_ID_OR_XA = (
    MariadbGtidEvent.FL_GROUP_COMMIT_ID | MariadbGtidEvent.FL_PREPARED_XA | MariadbGtidEvent.FL_COMPLETED_XA
)


def decode_mariadb_gtid_event(body: bytes | bytearray | memoryview, server_id: int) -> MariadbGtidEvent:
    """Decode a MariaDB ``GTID_EVENT`` body; ``server_id`` is the one of the event header.

    Layout: ``u64 seq_no, u32 domain_id, u8 flags2``; then ``u64 commit_id`` if
    FL_GROUP_COMMIT_ID; then, if FL_PREPARED_XA or FL_COMPLETED_XA, ``u32 formatID,
    u8 gtrid_length, u8 bqual_length, gtrid, bqual``; then, when bytes remain, ``u8 flags_extra``
    followed by ``u8 extra_engines`` (bit 0x01), ``u64 start-alter seq_no`` (bits 0x04/0x08) and
    ``u32 thread_id`` (bit 0x10). The server zero-pads the body to at least 19 bytes, so a pad
    byte reads as ``flags_extra = 0``.
    """
    data = body if type(body) is bytes else _raw(body, "MariaDB GTID_EVENT body")
    n = len(data)
    if n < _MARIADB_GTID_HEADER_LEN:
        raise BinlogError(f"{_NAME}: truncated, {n} byte(s) but at least {_MARIADB_GTID_HEADER_LEN} required")
    seq_no, domain_id, flags2 = _GTID_HEAD.unpack_from(data)
    if type(server_id) is not int or not 0 <= server_id <= _U32:
        _check_server_id(server_id)
    if not flags2 & _FL_COMMIT_ID_OR_XA and not data[13]:  # every transaction's: no extras
        return MariadbGtidEvent(seq_no, domain_id, server_id, flags2)
    pos = 13
    commit_id = None
    if flags2 & MariadbGtidEvent.FL_GROUP_COMMIT_ID:
        commit_id = _u(data, pos, 8, _NAME + " commit_id")
        pos += 8
    xid = None
    if flags2 & (MariadbGtidEvent.FL_PREPARED_XA | MariadbGtidEvent.FL_COMPLETED_XA):
        format_id = _u(data, pos, 4, _NAME + " XA formatID")
        _need(data, pos + 4, 2, _NAME + " XA gtrid/bqual lengths")
        gtrid_len, bqual_len = data[pos + 4], data[pos + 5]
        if gtrid_len > _XA_PART_MAX or bqual_len > _XA_PART_MAX:
            raise BinlogError(
                f"{_NAME}: XA gtrid/bqual lengths {gtrid_len}/{bqual_len} exceed {_XA_PART_MAX}"
            )
        pos += 6
        _need(data, pos, gtrid_len + bqual_len, _NAME + " XA xid data")
        xid = MariadbXid(
            format_id, data[pos : pos + gtrid_len], data[pos + gtrid_len : pos + gtrid_len + bqual_len]
        )
        pos += gtrid_len + bqual_len
    flags_extra = 0
    extra_engines = sa_seq_no = thread_id = None
    if pos < n:
        flags_extra = data[pos]
        pos += 1
        if flags_extra & MariadbGtidEvent.FL_EXTRA_MULTI_ENGINE:
            extra_engines = _u(data, pos, 1, _NAME + " extra_engines")
            pos += 1
        if flags_extra & (MariadbGtidEvent.FL_COMMIT_ALTER | MariadbGtidEvent.FL_ROLLBACK_ALTER):
            sa_seq_no = _u(data, pos, 8, _NAME + " start-alter seq_no")
            pos += 8
        if flags_extra & MariadbGtidEvent.FL_EXTRA_THREAD_ID:
            thread_id = _u(data, pos, 4, _NAME + " thread_id")
            pos += 4
    return MariadbGtidEvent(  # the fields in order (by keyword: 0.2 us more an event)
        seq_no,
        domain_id,
        server_id,
        flags2,
        commit_id,
        xid,
        flags_extra,
        extra_engines,
        sa_seq_no,
        thread_id,
    )


def _check_server_id(server_id: object) -> int:
    if not isinstance(server_id, int) or isinstance(server_id, bool):
        raise TypeError(f"server_id must be int, not {type(server_id).__name__}")
    if not 0 <= server_id <= _U32:
        raise BinlogError(f"server_id {server_id} out of range 0..{_U32}")
    return server_id


@dataclass(frozen=True, slots=True)
class MariadbGtidListEvent:
    """MariaDB ``GTID_LIST_EVENT`` (163): the binlog state when the file was started."""

    FLAG_UNTIL_REACHED: ClassVar[int] = 0x1  # of ``flags`` (bit 28 of the count word)
    FLAG_IGN_GTIDS: ClassVar[int] = 0x2  # bit 29

    gtids: tuple[MariadbGtid, ...]
    flags: int  # the high 4 bits of the count word, shifted down (0..15)

    @property
    def count(self) -> int:
        return len(self.gtids)

    def position(self) -> MariadbGtidSet:
        """The list as a position: per domain the last GTID listed (the most recent one)."""
        return MariadbGtidSet(self.gtids)


def decode_mariadb_gtid_list_event(body: bytes | bytearray | memoryview) -> MariadbGtidListEvent:
    data = _raw(body, "MariaDB GTID_LIST_EVENT body")
    name = "MariaDB GTID_LIST_EVENT"
    word = _u(data, 0, 4, name + " count")
    count = word & ((1 << 28) - 1)
    if count > (len(data) - 4) // 16:
        raise BinlogError(
            f"{name}: truncated, {count} GTID(s) announced ({count * 16} bytes) but "
            f"{len(data) - 4} byte(s) follow the count"
        )
    gtids = []
    for i in range(count):
        p = 4 + 16 * i
        gtids.append(
            MariadbGtid(
                int.from_bytes(data[p : p + 4], "little"),
                int.from_bytes(data[p + 4 : p + 8], "little"),
                int.from_bytes(data[p + 8 : p + 16], "little"),
            )
        )
    return MariadbGtidListEvent(tuple(gtids), word >> 28)


@dataclass(frozen=True, slots=True)
class MariadbBinlogCheckpointEvent:
    """MariaDB ``BINLOG_CHECKPOINT_EVENT`` (161): oldest binlog still needed for XA recovery."""

    filename: str


def decode_binlog_checkpoint_event(body: bytes | bytearray | memoryview) -> MariadbBinlogCheckpointEvent:
    data = _raw(body, "MariaDB BINLOG_CHECKPOINT_EVENT body")
    name = "MariaDB BINLOG_CHECKPOINT_EVENT"
    length = _u(data, 0, 4, name + " name length")
    _need(data, 4, length, name + " file name")
    raw = data[4 : 4 + length]
    try:
        filename = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BinlogError(f"{name}: file name {raw!r} is not valid UTF-8") from None
    return MariadbBinlogCheckpointEvent(filename)
