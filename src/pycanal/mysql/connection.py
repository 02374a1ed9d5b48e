"""``ReplicaConnection``: a MySQL/MariaDB replica connection over a socket.

The protocol lives in :mod:`pycanal.mysql.packets` (pure functions and state machines); this module
only moves bytes: connect (TCP, optionally TLS), log in, run the session settings Canal sends,
register as a replica, start a dump (file/position, MySQL GTID set, MariaDB GTID position) and turn
the stream into decoded events with :class:`~pycanal.binlog.decoder.EventDecoder`.

    with ReplicaConnection("127.0.0.1", 3306, "repl", "secret", server_id=1234) as conn:
        conn.dump("mysql-bin.000001", 4)
        for event in conn.events():
            ...                      # conn.position: where to resume after this event

Control queries (SHOW MASTER STATUS, KILL, ...) go over a separate PyMySQL connection, see
:mod:`pycanal.mysql.control`.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import ssl as _ssl
import struct
import threading
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from typing import Any

from ..binlog.constants import LOG_EVENT_ARTIFICIAL_F
from ..binlog.constants import EventType as E
from ..binlog.decoder import EventDecoder
from ..binlog.events import Event
from ..binlog.gtid import MariadbGtidSet, MysqlGtidSet
from . import auth as A
from . import packets as P
from .errors import (
    ConnectionLostError,
    MysqlError,
    ProtocolError,
    ReplicaTimeoutError,
    TLSError,
    dump_error,
)
from .tls import pymysql_tls, tls_context

__all__ = ["BinlogPosition", "ReplicaConnection", "tls_context"]

_EV_HEAD = struct.Struct("<IxxxxxIIH")  # timestamp, (type, server id,) event size, log_pos, flags
_HEARTBEATS = (E.HEARTBEAT, E.HEARTBEAT_V2)


class _ClosedLocally(Exception):
    """Internal: the socket went away because close() was called."""


@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A binlog coordinate: the next event to read is at ``position`` in ``file``."""

    file: str
    position: int

    def __str__(self) -> str:
        return f"{self.file}:{self.position}"


class ReplicaConnection:
    """One replication connection (see the module docstring).

    Parameters:
        host, port, user, password: the source and the replication account.
        server_id: the id this replica registers with; it must differ from every other replica of
            the source (a second replica with the same id makes the server drop the first). Default:
            a random id in ``[2**16, 2**31)``.
        ssl: ``None``/``False`` plain TCP; ``True`` TLS without certificate checks; or an
            ``ssl.SSLContext`` (see :func:`tls_context`). tls_preferred: with ``ssl``, a server
            that does not offer TLS is logged in to in plain TCP instead of refused.
        heartbeat_period: seconds; sent as ``@master_heartbeat_period`` (0 disables heartbeats).
        read_timeout: seconds without any packet on the stream before :class:`ReplicaTimeoutError`;
            default ``heartbeat_period + 10`` like Canal (no timeout when heartbeats are off).
        connect_timeout: for the TCP connect, the login and the queries before the dump.
        decoder: the :class:`EventDecoder` to use (default: a new one, checksum learnt from the stream).
        recv_buffer: the receive buffer size in bytes (grows for larger packets).
        auth_plugin, server_public_key, allow_cleartext: see :class:`~pycanal.mysql.auth.Authenticator`.
        report_host, report_port: what ``COM_REGISTER_SLAVE`` reports (``SHOW SLAVE HOSTS``).
        kill_on_close: :meth:`close` kills the server's dump thread over a separate connection.
        annotate_rows: ask MariaDB for its ANNOTATE_ROWS events (the SQL behind rows events, as
            Canal does); a consumer that drops them anyway (``filter.query.dml``) is spared them.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 3306,
        user: str = "",
        password: str = "",
        *,
        server_id: int | None = None,
        ssl: _ssl.SSLContext | bool | None = None,
        tls_preferred: bool = False,
        heartbeat_period: float = 15.0,
        read_timeout: float | None = None,
        connect_timeout: float = 10.0,
        decoder: EventDecoder | None = None,
        recv_buffer: int = 1 << 20,
        auth_plugin: str | None = None,
        server_public_key: bytes | None = None,
        allow_cleartext: bool = False,
        report_host: str = "",
        report_port: int = 0,
        kill_on_close: bool = True,
        annotate_rows: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.server_id = server_id if server_id is not None else random.randrange(1 << 16, 1 << 31)
        if ssl is True:
            ssl = tls_context()
        self.ssl_context: _ssl.SSLContext | None = ssl or None
        self.tls_preferred = tls_preferred
        self.heartbeat_period = heartbeat_period
        if read_timeout is None and heartbeat_period > 0:
            read_timeout = heartbeat_period + 10.0
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.decoder = decoder if decoder is not None else EventDecoder(f"{host}:{port}")
        self.auth_plugin = auth_plugin
        self.server_public_key = server_public_key
        self.allow_cleartext = allow_cleartext
        self.report_host = report_host
        self.report_port = report_port
        self.kill_on_close = kill_on_close
        self.annotate_rows = annotate_rows

        self.handshake: P.Handshake | None = None
        self.authenticator: A.Authenticator | None = None
        self._sock: socket.socket | None = None
        self._reader = P.PacketReader(recv_buffer)
        self._file = ""
        self._pos = 0
        self.dumping = False
        self.end_of_stream = False
        self._closing = False
        # A socket is closed only where no thread is blocked on it (see _close_socket).
        self._sock_lock = threading.Lock()
        self._waiting = 0  # threads inside recv or select on the socket
        self._orphan: socket.socket | None = None  # shut down, closed by the last such thread
        self.session_ready = False
        self.registered = False
        self.dump_flags = 0

    # ------------------------------------------------------------------ properties
    @property
    def connection_id(self) -> int | None:
        return self.handshake.connection_id if self.handshake else None

    @property
    def server_version(self) -> str:
        return self.handshake.version if self.handshake else ""

    @property
    def is_mariadb(self) -> bool:
        return bool(self.handshake and self.handshake.is_mariadb)

    @property
    def tls(self) -> bool:
        return isinstance(self._sock, _ssl.SSLSocket)

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def position(self) -> BinlogPosition | None:
        """Where the stream stands: the file and the position of the next event (the end of the last
        event read, or the start a rotate announced). ``None`` before the stream names a file."""
        if not self._file:
            return None
        return BinlogPosition(self._file, self._pos)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ReplicaConnection:
        if self._sock is None:
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> ReplicaConnection:
        """Open the TCP connection and log in."""
        if self._sock is not None:
            raise MysqlError("already connected")
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise ConnectionLostError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._closing = False
        self.session_ready = self.registered = self.dumping = self.end_of_stream = False
        self._reader = P.PacketReader(self._reader.capacity)
        try:
            self._login()
        except BaseException:
            self._close_socket()
            raise
        return self

    def _login(self) -> None:
        auth = A.Authenticator(
            self.user,
            self.password,
            tls=self.ssl_context is not None,
            tls_preferred=self.tls_preferred,
            server_public_key=self.server_public_key,
            auth_plugin=self.auth_plugin,
            allow_cleartext=self.allow_cleartext,
        )
        self.authenticator = auth
        reader = self._reader
        reader.seq = 0
        while not auth.done:
            payload = self._read_packet()
            out = auth.receive(payload, (reader.seq - 1) & 0xFF)
            self.handshake = auth.handshake
            if auth.tls_pending:
                self._send_raw(out)
                self._start_tls()
                out = auth.tls_established()
            if out:
                self._send_raw(out)
                reader.seq = auth.next_seq

    def _start_tls(self) -> None:
        assert self._sock is not None and self.ssl_context is not None
        if self._reader.buffered:
            raise ProtocolError("server sent data before the TLS handshake")
        try:
            self._sock = self.ssl_context.wrap_socket(self._sock, server_hostname=self.host)
        except (_ssl.SSLError, OSError) as exc:
            raise TLSError(f"TLS handshake with {self.host}:{self.port} failed: {exc}") from exc

    def close(self) -> None:
        """Close the connection; if a dump was running, kill its server thread (like Canal) so the
        server does not keep a dump thread for a replica that is gone. Idempotent."""
        sock = self._sock
        if sock is None:
            return
        self._closing = True
        was_dumping = self.dumping
        if not was_dumping:
            with contextlib.suppress(OSError, _ssl.SSLError):
                sock.sendall(P.frame_packet(P.com_quit(), 0)[0])
        self._close_socket()
        if was_dumping and self.kill_on_close and self.handshake is not None:
            from . import control

            # Bounded: after a read timeout the source may be hung, and close() must still return.
            limit = min(self.connect_timeout, 5.0)
            with contextlib.suppress(Exception):
                with self.control_connection(
                    connect_timeout=limit, read_timeout=limit, write_timeout=limit
                ) as ctl:
                    control.kill_connection(ctl, self.handshake.connection_id)

    def _close_socket(self) -> None:
        """Shut the socket down, which wakes a thread blocked reading it, and close it; if a
        thread is blocked on it, that thread closes it when it wakes. Closed under a reader, its
        file descriptor could be reused by the next socket the process opens (the dump's kill
        connection, right after) while the reader goes back to poll(): it then waited on that
        socket until its read timeout (seen over TLS: 24 s of a stop)."""
        with self._sock_lock:
            sock, self._sock = self._sock, None
            self.dumping = False
            if sock is None:
                return
            blocked = self._waiting > 0
            if blocked:
                self._orphan = sock
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        if not blocked:
            with contextlib.suppress(OSError):
                sock.close()

    def _hold(self) -> socket.socket | None:
        """The socket, held open for a blocking call on it until :meth:`_release`."""
        with self._sock_lock:
            self._waiting += 1
            return self._sock

    def _release(self) -> None:
        with self._sock_lock:
            self._waiting -= 1
            orphan = None
            if self._waiting == 0:
                orphan, self._orphan = self._orphan, None
        if orphan is not None:
            with contextlib.suppress(OSError):
                orphan.close()

    def control_params(self) -> dict[str, Any]:
        """``pymysql.connect`` keyword arguments for a control connection with the same account."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password.encode("utf-8"),  # as the login sends it (PyMySQL: Latin-1)
            "connect_timeout": self.connect_timeout,
            "autocommit": True,
        }
        return params | pymysql_tls(self.ssl_context, self.tls_preferred)

    def control_connection(self, **kwargs: Any):
        """A new PyMySQL connection with the same account, for control queries."""
        import pymysql

        return pymysql.connect(**{**self.control_params(), **kwargs})

    # ------------------------------------------------------------------ low level I/O
    def _send_raw(self, data: bytes) -> None:
        if self._sock is None:
            raise ConnectionLostError("not connected")
        try:
            self._sock.sendall(data)
        except (OSError, _ssl.SSLError) as exc:
            self._close_socket()
            raise ConnectionLostError(f"send to {self.host}:{self.port} failed: {exc}") from exc

    def _send_command(self, payload: bytes) -> None:
        data, seq = P.frame_packet(payload, 0)
        self._reader.seq = seq
        self._send_raw(data)

    def _recv(self, timeout: float | None) -> None:
        """One recv into the reader's buffer, for at least the bytes the next packet still needs."""
        sock = self._hold()
        try:
            if sock is None:
                if self._closing:
                    raise _ClosedLocally
                raise ConnectionLostError("not connected")
            reader = self._reader
            view = reader.write_buffer(max(reader.needed(), 1))
            try:
                sock.settimeout(timeout)
                n = sock.recv_into(view)
            except TimeoutError:
                raise ReplicaTimeoutError(
                    f"no data from {self.host}:{self.port} for {timeout} s: the source looks dead"
                ) from None
            except (OSError, _ssl.SSLError) as exc:
                self._close_socket()
                if self._closing:
                    raise _ClosedLocally from None
                raise ConnectionLostError(f"connection to {self.host}:{self.port} failed: {exc}") from exc
            finally:
                del view
        finally:
            self._release()
        if n == 0:
            self._close_socket()
            if self._closing:
                raise _ClosedLocally
            raise ConnectionLostError(f"{self.host}:{self.port} closed the connection")
        reader.advance(n)

    def _read_packet(self, timeout: float | None = -1.0) -> bytes:
        if timeout == -1.0:
            timeout = self.connect_timeout
        reader = self._reader
        while True:
            payload = reader.next_packet()
            if payload is not None:
                return payload
            self._recv(timeout)

    # ------------------------------------------------------------------ queries
    def query(self, sql: str | bytes) -> P.QueryResult:
        """Run one statement on this connection (before the dump starts)."""
        if self.dumping:
            raise MysqlError("cannot run a query on a connection that is streaming the binlog")
        self._send_command(P.com_query(sql))
        result = P.QueryResultReader()
        while not result.receive(self._read_packet()):
            pass
        return result.result

    def execute(self, sql: str | bytes) -> P.OkPacket | None:
        """Run a statement and return its OK packet."""
        return self.query(sql).ok

    def setup_session(self) -> None:
        """The session settings Canal sends before a dump (timeouts, binary charset, checksum
        announcement, replica uuid, MariaDB GTID capability, heartbeat period)."""
        for sql in (
            "set wait_timeout=9999999",
            "set net_write_timeout=7200",
            "set net_read_timeout=7200",
            "set names 'binary'",
            # Tell the server we understand the checksum of its binlog (otherwise it refuses to send).
            "set @master_binlog_checksum= @@global.binlog_checksum",
            "set @slave_uuid=uuid()",
            "SET @mariadb_slave_capability='4'",
        ):
            self.execute(sql)
        if self.heartbeat_period > 0:
            self.execute(f"SET @master_heartbeat_period={int(self.heartbeat_period * 1_000_000_000)}")
        self.session_ready = True

    def register_slave(self) -> None:
        """``COM_REGISTER_SLAVE`` with this connection's server id."""
        self._send_command(P.com_register_slave(self.server_id, self.report_host, port=self.report_port))
        payload = self._read_packet()
        P.raise_for_err(payload)
        P.parse_ok(payload)
        self.registered = True

    def _prepare_dump(self) -> None:
        if self._sock is None:
            self.connect()
        if self.dumping:
            raise MysqlError("a dump is already running on this connection")
        if not self.session_ready:
            self.setup_session()
        if not self.registered:
            self.register_slave()

    def _default_flags(self, non_blocking: bool) -> int:
        flags = P.BINLOG_DUMP_NON_BLOCK if non_blocking else 0
        if self.is_mariadb and self.annotate_rows:
            flags |= P.BINLOG_SEND_ANNOTATE_ROWS_EVENT
        return flags

    def _start_stream(self, payload: bytes, file: str, position: int, flags: int) -> None:
        self._send_command(payload)
        self.dumping = True
        self.end_of_stream = False
        self.dump_flags = flags
        self._file, self._pos = file, position
        decoder = self.decoder
        decoder.file = file
        # A new stream: its first event (an artificial ROTATE) comes before the FORMAT_DESCRIPTION
        # that says whether events carry a CRC32, so the decoder checks it both ways; TABLE_MAPs of
        # an earlier stream do not apply.
        decoder.reset_stream()

    def dump(
        self, file: str, position: int = 4, *, non_blocking: bool = False, flags: int | None = None
    ) -> None:
        """Start streaming at ``file``:``position`` (``COM_BINLOG_DUMP``). Connects, sets up the
        session and registers first when that was not done yet. With ``non_blocking`` the server
        ends the stream (EOF) at the current end of its binlog instead of waiting for new events."""
        self._prepare_dump()
        if flags is None:
            flags = self._default_flags(non_blocking)
        self._start_stream(P.com_binlog_dump(file, position, self.server_id, flags), file, position, flags)

    def dump_gtid(
        self, gtid_set: MysqlGtidSet | str, *, non_blocking: bool = False, file: str = "", position: int = 4
    ) -> None:
        """MySQL: stream every transaction not in ``gtid_set`` (``COM_BINLOG_DUMP_GTID``)."""
        if isinstance(gtid_set, str):
            gtid_set = MysqlGtidSet.parse(gtid_set)
        self._prepare_dump()
        flags = P.BINLOG_THROUGH_GTID | (P.BINLOG_DUMP_NON_BLOCK if non_blocking else 0)
        payload = P.com_binlog_dump_gtid(gtid_set.encode(), self.server_id, flags, file, position)
        self._start_stream(payload, file, position if file else 0, flags)

    def dump_mariadb_gtid(self, gtid_pos: MariadbGtidSet | str, *, non_blocking: bool = False) -> None:
        """MariaDB: stream from just after the GTID position ``gtid_pos`` (``domain-server-seq,...``,
        empty for the very start): ``@slave_connect_state`` and the GTID options, then a
        ``COM_BINLOG_DUMP`` with no file name, which the server ignores in GTID mode."""
        if isinstance(gtid_pos, str):
            gtid_pos = MariadbGtidSet.parse(gtid_pos)
        if self._sock is None:
            self.connect()
        if not self.session_ready:
            self.setup_session()
        self.execute(f"SET @slave_connect_state='{gtid_pos}'")
        self.execute("SET @slave_gtid_strict_mode=0")
        self.execute("SET @slave_gtid_ignore_duplicates=0")
        self._prepare_dump()
        flags = self._default_flags(non_blocking)
        self._start_stream(P.com_binlog_dump("", 4, self.server_id, flags), "", 0, flags)

    # ------------------------------------------------------------------ the stream
    def events(self, on_wait: Callable[[], object] | None = None) -> Iterator[Event]:
        """Decoded events of the running dump, in order; :attr:`position` is updated before each
        event is yielded. Ends at an EOF packet (non-blocking dump at the end of the binlog).
        ``on_wait()`` runs whenever every event received so far has been yielded, before the read
        that may block (the parser hands its finished transactions to the store then).

        :meth:`close` from another thread ends the iteration normally.

        Raises :class:`BinlogDumpError` (:class:`BinlogPurgedError` for errno 1236) when the server
        ends the stream with an error, :class:`ReplicaTimeoutError` when nothing arrives within
        :attr:`read_timeout`, :class:`ConnectionLostError` when the connection drops, and the
        decoder's ``BinlogError`` for an event it cannot decode.
        """
        for _data, _pos, event, _ts in self.frames(on_wait):
            yield event  # type: ignore[misc]

    def frames(
        self, on_wait: Callable[[], object] | None = None, undecoded: Container[int] = ()
    ) -> Iterator[tuple[bytes, int, Event | None, int]]:
        """``(bytes, offset, event, timestamp)`` of each event of the running dump, as :meth:`events`
        (the timestamp is the header's); events whose type is in ``undecoded`` are only checked
        here (size, CRC32; ``event`` is None: a parser's second process decodes them). ROTATE and
        FORMAT_DESCRIPTION are always decoded (the stream's file and checksum setting come from
        them)."""
        if not self.dumping:
            raise MysqlError("no dump running: call dump(), dump_gtid() or dump_mariadb_gtid() first")
        reader = self._reader
        decoder = self.decoder
        decode, check = decoder.decode, decoder.check
        take = reader.next_body
        unpack = _EV_HEAD.unpack_from
        recv = self._recv
        timeout = self.read_timeout
        rotate, fde, heartbeats = E.ROTATE, E.FORMAT_DESCRIPTION, _HEARTBEATS
        while True:
            item = take()
            if item is None:
                if on_wait is not None:
                    on_wait()
                try:
                    recv(timeout)
                except _ClosedLocally:
                    return  # close() was called (e.g. from another thread): a normal end
                continue
            head, data = item
            if head != 0x00:
                self._stream_end(head, data)
                return
            ts, size, log_pos, flags = unpack(data, 0)
            typ = data[4]
            if log_pos >= size and not flags & LOG_EVENT_ARTIFICIAL_F and typ not in heartbeats:
                pos = log_pos - size
            elif typ == fde:
                pos = 4  # the FORMAT_DESCRIPTION re-sent (log_pos 0) when a dump starts past it
            else:
                pos = self._pos
            if typ in undecoded and not decoder.renumbers:
                check(data, pos)
                if log_pos and typ not in heartbeats:
                    self._pos = log_pos
                yield data, pos, None, ts
                continue
            event = decode(data, pos)
            typ = event.type  # a pre-GA FORMAT_DESCRIPTION renumbers types
            if typ == rotate:
                self._file = event.next_file  # type: ignore[attr-defined]
                self._pos = event.position  # type: ignore[attr-defined]
                decoder.file = self._file
            elif log_pos and typ not in heartbeats:
                # Artificial events with a log_pos count too: MariaDB's fake GTID_LIST after skipped
                # transactions (GTID dump) carries the position where the stream goes on.
                self._pos = log_pos
            yield data, pos, event, ts

    def wait_readable(self, other: int, timeout: float | None) -> bool:
        """Wait until the stream has bytes to read (True) or the file descriptor ``other`` is
        readable (False, also on timeout)."""
        sock = self._hold()
        try:
            if sock is None:
                return True  # the next read reports the closed connection
            if isinstance(sock, _ssl.SSLSocket) and sock.pending():
                return True
            readable, _, _ = select.select([sock, other], [], [], timeout)
            return sock in readable
        finally:
            self._release()

    def _stream_end(self, head: int, body: bytes) -> None:
        if head == 0xFF:
            err = P.parse_err(body, 0)
            self._close_socket()
            raise dump_error(err.errno, err.sqlstate, err.message)
        if head == 0xFE and len(body) < 8:
            # EOF: the end of a non-blocking dump (or the server stopped the dump, e.g. a second
            # replica registered with the same server id).
            self.end_of_stream = True
            self.dumping = False
            return
        raise ProtocolError(f"unexpected packet 0x{head:02x} ({len(body) + 1} bytes) on the binlog stream")
