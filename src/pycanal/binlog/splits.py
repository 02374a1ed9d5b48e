"""The scan of a binlog file's event headers for the offsets where decoding can restart (the
rules are in :mod:`pycanal.binlog.parallel`'s docstring, which plans parts from this scan).

A module of its own because it is the one loop over every event of a file that runs before any
part is decoded, alone in one process: ``pycanal binlog decode``'s parent, Spark's driver
planning ``format("binlog")``. Interpreted it costs ~0.6 us an event, 2.6 s a GiB of sysbench's
binlog. ``splits.pxd`` types it for Cython, which ``scripts/setup.sh`` compiles beside this file
(``scripts/build_ext.py``) where a C compiler is: this file stays the source, the fallback and
the tests' oracle (``tests/test_splits.py``). The loop reads bytes by index and tables by event
type so that the same lines are fast both ways.
"""

from __future__ import annotations

import struct
from typing import Any

from .constants import HEADER_LEN, MAGIC, PRE_GA_PERMUTATION, ROWS_KIND, ROWS_V2
from .constants import EventType as E

__all__ = ["scan"]

# What the scan does with each event type (an index into a 256-byte table, not set lookups).
_OTHER, _ROWS, _TABLE_MAP, _CONTEXT, _GTID, _QUERY, _END, _PAYLOAD, _FDE, _ENCRYPTION = range(10)


def _kinds() -> bytes:
    kinds = bytearray(256)
    for t in ROWS_KIND:
        kinds[t] = _ROWS
    # Events that belong to the statement after them: a split point moves back over them.
    for t in (E.INTVAR, E.RAND, E.USER_VAR, E.BEGIN_LOAD_QUERY, E.APPEND_BLOCK, E.ROWS_QUERY):
        kinds[t] = _CONTEXT
    kinds[E.MARIADB_ANNOTATE_ROWS] = _CONTEXT
    for t in (E.GTID, E.ANONYMOUS_GTID, E.GTID_TAGGED, E.MARIADB_GTID):
        kinds[t] = _GTID
    for t in (E.QUERY, E.EXECUTE_LOAD_QUERY, E.MARIADB_QUERY_COMPRESSED):
        kinds[t] = _QUERY
    kinds[E.XID] = kinds[E.XA_PREPARE] = _END
    kinds[E.TABLE_MAP] = _TABLE_MAP
    kinds[E.TRANSACTION_PAYLOAD] = _PAYLOAD
    kinds[E.FORMAT_DESCRIPTION] = _FDE
    kinds[E.MARIADB_START_ENCRYPTION] = _ENCRYPTION
    return bytes(kinds)


_KINDS = _kinds()
# The values the loop compares with, as plain ints (typed in splits.pxd).
_HEADER_LEN, _MARIADB_GTID, _QUERY_EVENT = HEADER_LEN, int(E.MARIADB_GTID), int(E.QUERY)
_SAME = bytes(range(256))  # event types as they are numbered
_STMT_END_F = 0x0001
_MARIADB_FL_STANDALONE = 0x01
_CHECKSUM_CRC32 = 1
_U16 = struct.Struct("<H")

# What a QUERY text does to the transaction state.
_Q_STATEMENT, _Q_BEGIN, _Q_END = 0, 1, 2


def _version_tuple(version: bytes) -> tuple[int, int, int]:
    parts = []
    for piece in version.split(b"-")[0].split(b".")[:3]:
        digits = bytes(ch for ch in piece if 48 <= ch <= 57)
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


class _Format:
    """What the scan needs from a FORMAT_DESCRIPTION event (same rules as the decoder):
    ``types`` renumbers event types (pre-GA 5.1), ``flags_at`` is where a rows event's flags
    sit from its start, by (renumbered) type."""

    __slots__ = ("post_header", "crc_len", "types", "flags_at")

    def __init__(self, data: Any = None, pos: int = 0, size: int = 0) -> None:
        self.post_header = b""
        self.crc_len = 0
        self.types = _SAME
        if data is not None and size >= HEADER_LEN + 57:
            self._read(data, pos, size)
        flags_at = bytearray(256)
        for typ in ROWS_KIND:
            ph = self.post_header_len(typ, 0) or (10 if typ in ROWS_V2 else 8)
            flags_at[typ] = HEADER_LEN + (4 if ph == 6 else 6)  # after a 6-byte (old: 4) table id
        self.flags_at = bytes(flags_at)

    def _read(self, data: Any, pos: int, size: int) -> None:
        body = pos + HEADER_LEN
        version = bytes(data[body + 2 : body + 52]).split(b"\0", 1)[0]
        v = _version_tuple(version)
        end = pos + size
        has_alg = v >= (5, 3, 0) if b"mariadb" in version.lower() else v >= (5, 6, 1)
        if has_alg and size >= HEADER_LEN + 57 + 5:
            if data[end - 5] == _CHECKSUM_CRC32:
                self.crc_len = 4
            end -= 5
        post = bytes(data[body + 57 : end])
        if len(post) == 22 and (v[:2] == (5, 2) or (v[:2] == (5, 1) and v[2] <= 15)):
            reordered = bytearray(post)
            types = bytearray(_SAME)
            for old, new in PRE_GA_PERMUTATION.items():
                reordered[new - 1] = post[old - 1]
                types[old] = new
            post = bytes(reordered)
            self.types = bytes(types)
        self.post_header = post

    def post_header_len(self, typ: int, default: int) -> int:
        if 0 < typ <= len(self.post_header):
            return self.post_header[typ - 1]
        return default


def _query_kind(data: Any, pos: int, size: int, fmt: _Format) -> int:
    """BEGIN / XA START, COMMIT / ROLLBACK / XA COMMIT / XA ROLLBACK, or another statement."""
    body = pos + HEADER_LEN
    ph = fmt.post_header_len(E.QUERY, 13)
    if ph < 11 or size < HEADER_LEN + ph:
        return _Q_STATEMENT
    db_len = data[body + 8]
    status_len = _U16.unpack_from(data, body + 11)[0] if ph >= 13 else 0
    q = body + ph + status_len + db_len + 1
    end = pos + size - fmt.crc_len
    head = bytes(data[q : min(q + 12, end)]).upper()
    if head == b"BEGIN" or head.startswith(b"XA START"):
        return _Q_BEGIN
    if head == b"COMMIT" or head == b"ROLLBACK" or head.startswith((b"XA COMMIT", b"XA ROLLBACK")):
        return _Q_END
    return _Q_STATEMENT


def scan(data: Any) -> tuple[list[tuple], list[tuple], int]:
    """Walk the event headers of a file's bytes (magic included): (transaction starts, statement
    starts inside transactions, end), each start ``(offset, transaction_start, gtid_pos,
    fde_pos)`` as :class:`pycanal.binlog.parallel.Part` has them. ``end`` is where the scan
    stopped: the end of the file, or the first damaged event header."""
    n = len(data)
    if n < 4 or bytes(data[:4]) != MAGIC:
        return [], [], min(n, 4)
    buf = data  # typed as bytes in splits.pxd: each byte read below is a C load when compiled
    kinds = _KINDS
    strong: list[tuple] = []
    weak: list[tuple] = []
    fmt = _Format()
    types, flags_at = fmt.types, fmt.flags_at
    fde_pos: int | None = None
    seen_gtid = False  # a file with GTID events starts every transaction with one
    in_txn = False
    began = False  # the transaction's BEGIN is behind us (MariaDB: implied by its GTID event)
    txn_start: int | None = None
    txn_gtid: int | None = None
    clean = True  # no TABLE_MAP pending: the decoder holds no statement state
    stmt_done = False  # the previous event ended a statement inside the transaction
    ctx = -1  # first context event before the coming statement (-1: none)
    pos = 4
    while n - pos >= _HEADER_LEN:
        typ = types[buf[pos + 4]]
        top = buf[pos + 12]  # a Py_ssize_t when compiled: the shift below cannot overflow
        size = buf[pos + 9] | buf[pos + 10] << 8 | buf[pos + 11] << 16 | top << 24
        if size < _HEADER_LEN or size > n - pos:
            break
        kind = kinds[typ]
        if kind == _ROWS:
            off = flags_at[typ]
            clean = off + 2 <= size and buf[pos + off] & _STMT_END_F != 0
            stmt_done = clean and in_txn
        elif kind == _TABLE_MAP:
            if in_txn and stmt_done and clean:
                weak.append((pos if ctx < 0 else ctx, txn_start, txn_gtid, fde_pos))
            clean = stmt_done = False
        elif kind == _CONTEXT:
            if ctx < 0:
                ctx = pos
            pos += size
            continue  # keeps ctx, clean and stmt_done
        elif kind == _GTID:
            if clean:
                strong.append((pos, None, None, fde_pos))
            seen_gtid = in_txn = True
            txn_start = txn_gtid = pos
            began = (
                typ == _MARIADB_GTID
                and size > _HEADER_LEN + 12
                and buf[pos + _HEADER_LEN + 12] & _MARIADB_FL_STANDALONE == 0
            )
            stmt_done = False
        elif kind == _QUERY:
            q = _query_kind(data, pos, size, fmt) if typ == _QUERY_EVENT else _Q_STATEMENT
            start = pos if ctx < 0 else ctx
            if not in_txn:
                if not seen_gtid and clean:
                    strong.append((start, None, None, fde_pos))
                    txn_start, txn_gtid = start, None
                if q == _Q_BEGIN:
                    in_txn = began = True
                stmt_done = False
            elif not began:
                if q == _Q_BEGIN:
                    began = True
                else:  # the GTID's transaction is this one statement
                    in_txn = False
                stmt_done = False
            elif q == _Q_END:
                in_txn = began = stmt_done = False
            elif q == _Q_STATEMENT:
                if stmt_done and clean:
                    weak.append((start, txn_start, txn_gtid, fde_pos))
                stmt_done = clean
            else:
                stmt_done = False
        elif kind == _END:
            in_txn = began = stmt_done = False
        elif kind == _PAYLOAD:
            # A whole transaction in one event: assumed to end its statements (servers write
            # complete transactions into it), so nothing is pending afterwards.
            if not in_txn and clean:
                strong.append((pos, None, None, fde_pos))
            in_txn = began = stmt_done = False
            clean = True
        elif kind == _FDE:
            fmt = _Format(data, pos, size)
            types, flags_at = fmt.types, fmt.flags_at
            fde_pos = pos
            clean = True
            in_txn = began = stmt_done = False
        elif kind == _ENCRYPTION:
            break  # the rest of the file is encrypted: no more headers to read
        ctx = -1
        pos += size
    return strong, weak, pos
