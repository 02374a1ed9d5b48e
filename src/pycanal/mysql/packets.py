"""The MySQL client/server protocol as pure functions over bytes (no sockets here).

* Framing: :func:`frame_packet` (client → server, splitting payloads of 16 MB and more) and
  :class:`PacketReader` (server → client, a receive buffer that re-joins split payloads).
* Generic replies: :func:`parse_ok`, :func:`parse_err`, :func:`parse_eof`.
* Connection phase: :class:`Handshake` (v10), :func:`handshake_response`, :func:`ssl_request`
  (the login itself, scrambles and plugins: :mod:`pycanal.mysql.auth`).
* Commands: :func:`com_query` (and :class:`QueryResultReader` for its reply), :func:`com_register_slave`,
  :func:`com_binlog_dump`, :func:`com_binlog_dump_gtid`.

Every packet on the wire is ``u24 payload length, u8 sequence id, payload``. A payload of
``0xFFFFFF`` bytes or more is sent as consecutive packets of ``0xFFFFFF`` bytes, the last one shorter
(possibly empty); the sequence id counts packets and restarts at 0 with each command.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import AuthError, ProtocolError, ServerError

MAX_PAYLOAD = 0xFFFFFF

# Capability flags (MySQL and MariaDB share the low 32 bits).
CLIENT_LONG_PASSWORD = 1 << 0  # MariaDB calls it CLIENT_MYSQL: set, the server treats us as a MySQL client
CLIENT_FOUND_ROWS = 1 << 1
CLIENT_LONG_FLAG = 1 << 2
CLIENT_CONNECT_WITH_DB = 1 << 3
CLIENT_NO_SCHEMA = 1 << 4
CLIENT_COMPRESS = 1 << 5
CLIENT_ODBC = 1 << 6
CLIENT_LOCAL_FILES = 1 << 7
CLIENT_IGNORE_SPACE = 1 << 8
CLIENT_PROTOCOL_41 = 1 << 9
CLIENT_INTERACTIVE = 1 << 10
CLIENT_SSL = 1 << 11
CLIENT_IGNORE_SIGPIPE = 1 << 12
CLIENT_TRANSACTIONS = 1 << 13
CLIENT_RESERVED = 1 << 14
CLIENT_SECURE_CONNECTION = 1 << 15
CLIENT_MULTI_STATEMENTS = 1 << 16
CLIENT_MULTI_RESULTS = 1 << 17
CLIENT_PS_MULTI_RESULTS = 1 << 18
CLIENT_PLUGIN_AUTH = 1 << 19
CLIENT_CONNECT_ATTRS = 1 << 20
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
CLIENT_SESSION_TRACK = 1 << 23
CLIENT_DEPRECATE_EOF = 1 << 24

# Server status flags (OK / EOF packets).
SERVER_MORE_RESULTS_EXISTS = 0x0008

# Commands.
COM_QUIT = 0x01
COM_QUERY = 0x03
COM_PING = 0x0E
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

# COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID flags.
BINLOG_DUMP_NON_BLOCK = 0x01  # send EOF at the end of the binlog instead of waiting for more
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB: send ANNOTATE_ROWS events (MySQL: THROUGH_POSITION)
BINLOG_THROUGH_GTID = 0x04  # MySQL COM_BINLOG_DUMP_GTID: a GTID set follows

# Collation ids used in the handshake.
UTF8MB4_GENERAL_CI = 45
BINARY = 63

NATIVE_PASSWORD = "mysql_native_password"
CACHING_SHA2_PASSWORD = "caching_sha2_password"
CLEAR_PASSWORD = "mysql_clear_password"

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


# ------------------------------------------------------------------------------------------ framing
def frame_packet(payload: bytes | bytearray | memoryview, seq: int = 0) -> tuple[bytes, int]:
    """Frame ``payload`` for the wire starting at sequence id ``seq``.

    Returns the bytes to send and the next sequence id. A payload of ``0xFFFFFF`` bytes or more
    becomes several packets; a payload that is an exact multiple of ``0xFFFFFF`` ends with an empty one.
    """
    n = len(payload)
    if n < MAX_PAYLOAD:
        return _U32.pack(n | seq << 24) + bytes(payload), (seq + 1) & 0xFF
    out = bytearray()
    view = memoryview(payload)
    p = 0
    while True:
        chunk = view[p : p + MAX_PAYLOAD]
        out += _U32.pack(len(chunk) | seq << 24)
        out += chunk
        seq = (seq + 1) & 0xFF
        p += len(chunk)
        if len(chunk) < MAX_PAYLOAD:
            return bytes(out), seq


class PacketReader:
    """Receive buffer for server packets (sans-I/O).

    Bytes come in either through :meth:`feed` or, without an extra copy, by ``recv_into`` on the
    view :meth:`write_buffer` returns followed by :meth:`advance`. :meth:`next_packet` returns the next
    complete payload (split payloads re-joined) or ``None``; :meth:`needed` says how many more bytes
    are at least needed for it. Sequence ids are checked: ``seq`` is the id the next packet must carry
    (set it when a command is sent); a mismatch is a :class:`ProtocolError`.
    """

    __slots__ = ("_buf", "_mv", "_start", "_end", "seq")

    def __init__(self, capacity: int = 1 << 20) -> None:
        self._buf = bytearray(capacity)
        self._mv = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self.seq = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not consumed yet."""
        return self._end - self._start

    @property
    def capacity(self) -> int:
        return len(self._buf)

    def write_buffer(self, min_size: int = 1) -> memoryview:
        """Free space after the buffered bytes, at least ``min_size`` bytes (compacting or growing)."""
        cap = len(self._buf)
        start, end = self._start, self._end
        if start == end:
            self._start = self._end = start = end = 0
        free = cap - end
        if free < min_size or (start and free < cap >> 2):
            size = end - start
            if size + min_size > cap:
                new = bytearray(max(cap * 2, size + min_size))
                new[:size] = self._mv[start:end]
                self._buf = new
                self._mv = memoryview(new)
            elif start:
                self._buf[:size] = self._mv[start:end]
            self._start, self._end = 0, size
            end = size
        return self._mv[end:]

    def advance(self, n: int) -> None:
        """``n`` bytes were written at the start of the last :meth:`write_buffer` view."""
        self._end += n

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        view = self.write_buffer(len(data))
        view[: len(data)] = data
        self._end += len(data)

    def needed(self) -> int:
        """A lower bound of the bytes still missing for the next complete packet (0 if it is complete)."""
        buf, p, end = self._buf, self._start, self._end
        while True:
            if end - p < 4:
                return 4 - (end - p)
            length = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
            if end - p - 4 < length:
                return length - (end - p - 4)
            p += 4 + length
            if length < MAX_PAYLOAD:
                return 0

    def next_packet(self) -> bytes | None:
        """The next complete payload (a new ``bytes``), or ``None`` if more bytes are needed."""
        buf, start = self._buf, self._start
        if self._end - start < 4:
            return None
        length = buf[start] | buf[start + 1] << 8 | buf[start + 2] << 16
        stop = start + 4 + length
        if length == MAX_PAYLOAD:
            return self._take_split()
        if stop > self._end:
            return None
        if buf[start + 3] != self.seq:
            raise ProtocolError(f"packet sequence id {buf[start + 3]}, expected {self.seq}")
        self.seq = (self.seq + 1) & 0xFF
        self._start = stop
        return bytes(self._mv[start + 4 : stop])

    def next_body(self) -> tuple[int, bytes] | None:
        """Like :meth:`next_packet` for the binlog stream: ``(first byte, payload without it)``; the
        slice from the receive buffer is the only copy made."""
        buf, start = self._buf, self._start
        if self._end - start < 4:
            return None
        length = buf[start] | buf[start + 1] << 8 | buf[start + 2] << 16
        stop = start + 4 + length
        if length == MAX_PAYLOAD:
            payload = self._take_split()
            return None if payload is None else (payload[0], payload[1:])
        if stop > self._end:
            return None
        if buf[start + 3] != self.seq:
            raise ProtocolError(f"packet sequence id {buf[start + 3]}, expected {self.seq}")
        if not length:
            raise ProtocolError("empty packet on the binlog stream")
        self.seq = (self.seq + 1) & 0xFF
        self._start = stop
        return buf[start + 4], bytes(self._mv[start + 5 : stop])

    def _take_split(self) -> bytes | None:
        """A payload split over several packets, once all of them are here."""
        buf, end = self._buf, self._end
        p = self._start
        chunks: list[tuple[int, int]] = []
        seq = self.seq
        while True:
            if end - p < 4:
                return None
            length = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
            if p + 4 + length > end:
                return None
            if buf[p + 3] != seq:
                raise ProtocolError(f"packet sequence id {buf[p + 3]}, expected {seq}")
            seq = (seq + 1) & 0xFF
            chunks.append((p + 4, p + 4 + length))
            p += 4 + length
            if length < MAX_PAYLOAD:
                break
        mv = self._mv
        payload = b"".join([mv[a:b] for a, b in chunks])
        self.seq = seq
        self._start = p
        return payload


# ------------------------------------------------------------------------------------------ encoding
def lenenc_int(value: int) -> bytes:
    """Length-encoded integer."""
    if value < 251:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + _U16.pack(value)
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + _U64.pack(value)


def read_lenenc_int(data: bytes, pos: int) -> tuple[int | None, int]:
    """Read a length-encoded integer at ``pos``: ``(value, new pos)``; 0xFB (NULL) gives ``None``."""
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFC:
        return _U16.unpack_from(data, pos + 1)[0], pos + 3
    if first == 0xFD:
        return int.from_bytes(data[pos + 1 : pos + 4], "little"), pos + 4
    if first == 0xFE:
        return _U64.unpack_from(data, pos + 1)[0], pos + 9
    if first == 0xFB:
        return None, pos + 1
    raise ProtocolError(f"bad length-encoded integer prefix 0x{first:02x}")


def read_lenenc_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_lenenc_int(data, pos)
    if n is None:
        return None, pos
    if pos + n > len(data):
        raise ProtocolError("length-encoded string overruns the packet")
    return data[pos : pos + n], pos + n


def _cstring(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\0", pos)
    if end < 0:
        return data[pos:], len(data)
    return data[pos:end], end + 1


# ------------------------------------------------------------------------------------------ OK/ERR/EOF
@dataclass(slots=True)
class OkPacket:
    affected_rows: int = 0
    last_insert_id: int = 0
    status: int = 0
    warnings: int = 0
    info: bytes = b""


@dataclass(slots=True)
class ErrPacket:
    errno: int
    sqlstate: str
    message: str

    def error(self) -> ServerError:
        return ServerError(self.errno, self.sqlstate, self.message)


@dataclass(slots=True)
class EofPacket:
    warnings: int = 0
    status: int = 0


def is_ok(payload: bytes) -> bool:
    return bool(payload) and payload[0] == 0x00


def is_err(payload: bytes) -> bool:
    return bool(payload) and payload[0] == 0xFF


def is_eof(payload: bytes) -> bool:
    """0xFE with fewer than 9 bytes: EOF (a 0xFE row starts with an 8-byte length and is longer)."""
    return bool(payload) and payload[0] == 0xFE and len(payload) < 9


def parse_ok(payload: bytes) -> OkPacket:
    if not payload or payload[0] not in (0x00, 0xFE):
        raise ProtocolError(f"expected an OK packet, got {bytes(payload[:1]).hex() or 'nothing'}")
    affected, p = read_lenenc_int(payload, 1)
    insert_id, p = read_lenenc_int(payload, p)
    status = warnings = 0
    if p + 4 <= len(payload):
        status, warnings = struct.unpack_from("<HH", payload, p)
        p += 4
    return OkPacket(affected or 0, insert_id or 0, status, warnings, bytes(payload[p:]))


def parse_err(payload: bytes, offset: int = 1) -> ErrPacket:
    """Parse an ERR packet whose errno starts at ``offset`` (1: after the 0xFF header byte; 0 for
    a body whose header byte was already stripped)."""
    if len(payload) < offset + 2:
        raise ProtocolError("truncated ERR packet")
    errno = _U16.unpack_from(payload, offset)[0]
    p = offset + 2
    sqlstate = "HY000"
    if p < len(payload) and payload[p] == 0x23:  # '#': a PROTOCOL_41 sqlstate follows
        sqlstate = bytes(payload[p + 1 : p + 6]).decode("ascii", "replace")
        p += 6
    message = bytes(payload[p:]).decode("utf-8", "replace")
    return ErrPacket(errno, sqlstate, message)


def parse_eof(payload: bytes) -> EofPacket:
    if len(payload) >= 5:
        warnings, status = struct.unpack_from("<HH", payload, 1)
        return EofPacket(warnings, status)
    return EofPacket()


def raise_for_err(payload: bytes) -> None:
    if payload and payload[0] == 0xFF:
        raise parse_err(payload).error()


# ------------------------------------------------------------------------------------------ handshake
@dataclass(slots=True)
class Handshake:
    """The server's initial handshake (protocol v10)."""

    protocol_version: int
    server_version: str
    connection_id: int
    auth_data: bytes  # the scramble (nonce): part 1 + part 2 without its trailing NUL
    capabilities: int
    charset: int
    status: int
    auth_plugin: str
    mariadb_capabilities: int = 0  # MariaDB's extended capabilities (when CLIENT_MYSQL is not set)

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    @property
    def version(self) -> str:
        """The version without MariaDB's ``5.5.5-`` replication prefix."""
        v = self.server_version
        if v.startswith("5.5.5-") and self.is_mariadb:
            return v[6:]
        return v

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        nums = []
        for piece in self.version.split("-")[0].split(".")[:3]:
            digits = ""
            for ch in piece:
                if not ch.isdigit():
                    break
                digits += ch
            nums.append(int(digits or 0))
        while len(nums) < 3:
            nums.append(0)
        return nums[0], nums[1], nums[2]


def parse_handshake(payload: bytes) -> Handshake:
    """Parse the initial handshake; an ERR packet (e.g. "too many connections") raises ServerError."""
    if not payload:
        raise ProtocolError("empty handshake packet")
    if payload[0] == 0xFF:
        raise parse_err(payload).error()
    if payload[0] != 10:
        raise ProtocolError(f"unsupported handshake protocol version {payload[0]} (need 10)")
    try:
        version, p = _cstring(payload, 1)
        conn_id = _U32.unpack_from(payload, p)[0]
        part1 = bytes(payload[p + 4 : p + 12])
        p += 13  # 8 bytes of scramble and a filler byte
        caps = _U16.unpack_from(payload, p)[0]
        p += 2
        charset = status = 0
        auth_len = 0
        plugin = b""
        part2 = b""
        mariadb_caps = 0
        if p < len(payload):
            charset = payload[p]
            status = _U16.unpack_from(payload, p + 1)[0]
            caps |= _U16.unpack_from(payload, p + 3)[0] << 16
            auth_len = payload[p + 5]
            if not caps & CLIENT_LONG_PASSWORD:  # MariaDB: extended capabilities in the last 4 reserved
                mariadb_caps = _U32.unpack_from(payload, p + 12)[0]
            p += 16  # charset 1, status 2, caps 2, auth length 1, reserved 10
            if caps & CLIENT_SECURE_CONNECTION:
                n = max(13, auth_len - 8)
                part2 = bytes(payload[p : p + n])
                p += n
                if part2.endswith(b"\0"):
                    part2 = part2[:-1]
            if caps & CLIENT_PLUGIN_AUTH:
                plugin, p = _cstring(payload, p)
    except (IndexError, struct.error):
        raise ProtocolError("truncated handshake packet") from None
    return Handshake(
        protocol_version=10,
        server_version=bytes(version).decode("utf-8", "replace"),
        connection_id=conn_id,
        auth_data=part1 + part2,
        capabilities=caps,
        charset=charset,
        status=status,
        auth_plugin=bytes(plugin).decode("ascii", "replace") or NATIVE_PASSWORD,
        mariadb_capabilities=mariadb_caps,
    )


def build_handshake(
    server_version: str,
    connection_id: int,
    auth_data: bytes,
    capabilities: int,
    auth_plugin: str = CACHING_SHA2_PASSWORD,
    charset: int = 255,
    status: int = 0x0002,
) -> bytes:
    """A v10 handshake payload as a server sends it (for tests and fakes): ``auth_data`` is the
    20-byte scramble, sent as 8 bytes, a filler, then the other 12 and a NUL."""
    out = bytearray(b"\x0a")
    out += server_version.encode() + b"\0"
    out += _U32.pack(connection_id)
    out += auth_data[:8] + b"\0"
    out += _U16.pack(capabilities & 0xFFFF)
    out.append(charset)
    out += _U16.pack(status)
    out += _U16.pack(capabilities >> 16 & 0xFFFF)
    out.append(len(auth_data) + 1 if capabilities & CLIENT_PLUGIN_AUTH else 0)
    out += bytes(10)
    if capabilities & CLIENT_SECURE_CONNECTION:
        out += auth_data[8:] + b"\0"
    if capabilities & CLIENT_PLUGIN_AUTH:
        out += auth_plugin.encode() + b"\0"
    return bytes(out)


CLIENT_BASE_CAPABILITIES = (
    CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_PLUGIN_AUTH
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
)


def client_capabilities(server_caps: int, *, tls: bool = False, database: bool = False) -> int:
    """The capability flags pycanal asks for, restricted to what the server offers."""
    want = CLIENT_BASE_CAPABILITIES
    if tls:
        want |= CLIENT_SSL
    if database:
        want |= CLIENT_CONNECT_WITH_DB
    caps = want & server_caps
    missing = (CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION) & ~server_caps
    if missing:
        raise AuthError("server does not speak protocol 4.1 with secure authentication (too old)")
    if tls and not caps & CLIENT_SSL:
        raise AuthError("TLS requested but the server does not offer it (CLIENT_SSL not set)")
    return caps


def ssl_request(capabilities: int, charset: int = UTF8MB4_GENERAL_CI, max_packet: int = 1 << 30) -> bytes:
    """The 32-byte SSL request the client sends before starting TLS (CLIENT_SSL must be set)."""
    return struct.pack("<IIB23x", capabilities, max_packet, charset)


def handshake_response(
    capabilities: int,
    user: str,
    auth_response: bytes,
    auth_plugin: str,
    *,
    database: str | None = None,
    charset: int = UTF8MB4_GENERAL_CI,
    max_packet: int = 1 << 30,
) -> bytes:
    """HandshakeResponse41."""
    out = bytearray(struct.pack("<IIB23x", capabilities, max_packet, charset))
    out += user.encode("utf-8") + b"\0"
    if capabilities & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA:
        out += lenenc_int(len(auth_response)) + auth_response
    elif capabilities & CLIENT_SECURE_CONNECTION:
        if len(auth_response) > 255:
            raise AuthError("auth response longer than 255 bytes needs CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA")
        out.append(len(auth_response))
        out += auth_response
    else:
        out += auth_response + b"\0"
    if capabilities & CLIENT_CONNECT_WITH_DB and database:
        out += database.encode("utf-8") + b"\0"
    if capabilities & CLIENT_PLUGIN_AUTH:
        out += auth_plugin.encode("ascii") + b"\0"
    return bytes(out)


# ------------------------------------------------------------------------------------------ commands
def com_query(sql: str | bytes) -> bytes:
    return bytes((COM_QUERY,)) + (sql.encode("utf-8") if isinstance(sql, str) else sql)


def com_quit() -> bytes:
    return bytes((COM_QUIT,))


def com_ping() -> bytes:
    return bytes((COM_PING,))


def _short_string(value: str, what: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"{what} longer than 255 bytes")
    return bytes((len(raw),)) + raw


def com_register_slave(
    server_id: int,
    host: str = "",
    user: str = "",
    password: str = "",
    port: int = 0,
    rank: int = 0,
    master_id: int = 0,
) -> bytes:
    """``COM_REGISTER_SLAVE``: server id, report host/user/password, port, rank, master id."""
    return (
        struct.pack("<BI", COM_REGISTER_SLAVE, server_id)
        + _short_string(host, "report host")
        + _short_string(user, "report user")
        + _short_string(password, "report password")
        + struct.pack("<HII", port, rank, master_id)
    )


def com_binlog_dump(file: str, position: int, server_id: int, flags: int = 0) -> bytes:
    """``COM_BINLOG_DUMP``: u32 position, u16 flags, u32 server id, file name (rest of the packet)."""
    if not 0 <= position <= 0xFFFFFFFF:
        raise ValueError(f"COM_BINLOG_DUMP position {position} does not fit in 32 bits")
    return struct.pack("<BIHI", COM_BINLOG_DUMP, position, flags, server_id) + file.encode("utf-8")


def com_binlog_dump_gtid(
    gtid_set: bytes,
    server_id: int,
    flags: int = BINLOG_THROUGH_GTID,
    file: str = "",
    position: int = 4,
) -> bytes:
    """``COM_BINLOG_DUMP_GTID``: u16 flags, u32 server id, u32 name length, name, u64 position, then
    (with BINLOG_THROUGH_GTID) u32 length and the encoded GTID set (``MysqlGtidSet.encode()``)."""
    name = file.encode("utf-8")
    out = struct.pack("<BHII", COM_BINLOG_DUMP_GTID, flags, server_id, len(name)) + name
    out += _U64.pack(position)
    if flags & BINLOG_THROUGH_GTID:
        out += _U32.pack(len(gtid_set)) + gtid_set
    return out


# ------------------------------------------------------------------------------------------ results
@dataclass(slots=True)
class QueryResult:
    """A COM_QUERY reply: ``ok`` for a statement without a result set, else ``columns`` and ``rows``
    (text protocol: each value is ``bytes`` or ``None``)."""

    ok: OkPacket | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[bytes | None, ...]] = field(default_factory=list)


class QueryResultReader:
    """Collects the reply to one COM_QUERY (text protocol, CLIENT_DEPRECATE_EOF not negotiated).

    Feed each payload to :meth:`receive`; it returns True when the reply is complete (then read
    :attr:`result`); an ERR packet raises :class:`ServerError`.
    """

    def __init__(self) -> None:
        self.result = QueryResult()
        self._state = "start"
        self._ncols = 0

    def receive(self, payload: bytes) -> bool:
        if not payload:
            raise ProtocolError("empty packet in a query result")
        head = payload[0]
        if head == 0xFF:
            raise parse_err(payload).error()
        state = self._state
        if state == "start":
            if head == 0x00:
                self.result.ok = parse_ok(payload)
                return True
            if head == 0xFB:
                raise ProtocolError("server asks for LOCAL INFILE data: unsupported")
            n, _ = read_lenenc_int(payload, 0)
            self._ncols = n or 0
            self._state = "columns"
            return False
        if state == "columns":
            if is_eof(payload):
                if len(self.result.columns) != self._ncols:
                    raise ProtocolError("column definitions end early")
                self._state = "rows"
                return False
            p = 0
            for _ in range(4):  # catalog, schema, table, org_table
                _, p = read_lenenc_bytes(payload, p)
            name, p = read_lenenc_bytes(payload, p)
            self.result.columns.append((name or b"").decode("utf-8", "replace"))
            return False
        if state == "rows":
            if is_eof(payload):
                return True
            row = []
            p = 0
            for _ in range(self._ncols):
                value, p = read_lenenc_bytes(payload, p)
                row.append(value)
            self.result.rows.append(tuple(row))
            return False
        raise ProtocolError(f"packet after the end of a query result (state {state})")
