"""Errors of the replica connection: protocol, server (ERR packet), authentication and stream errors."""

from __future__ import annotations

# Server error numbers the replica connection treats specially.
ER_ACCESS_DENIED = 1045
ER_NO_SUCH_THREAD = 1094
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236


class MysqlError(Exception):
    """Base class of every error raised by ``pycanal.mysql``."""


class ProtocolError(MysqlError):
    """The server sent bytes that do not follow the client/server protocol (or a sequence id is off)."""


class ConnectionLostError(MysqlError):
    """The server closed the connection (or the socket failed) while a reply or an event was due."""


class TLSError(ConnectionLostError):
    """The TLS handshake failed (e.g. the server's certificate is not trusted)."""


class ServerError(MysqlError):
    """An ERR packet: ``errno``, ``sqlstate`` (five characters) and the server's ``message``."""

    def __init__(self, errno: int, sqlstate: str, message: str) -> None:
        self.errno = errno
        self.sqlstate = sqlstate
        self.message = message
        super().__init__(f"({errno}, {sqlstate!r}) {message}")

    @classmethod
    def from_err(cls, err: object) -> ServerError:
        """Build from a parsed :class:`~pycanal.mysql.packets.ErrPacket`."""
        return cls(err.errno, err.sqlstate, err.message)  # type: ignore[attr-defined]


class AuthError(MysqlError):
    """The login failed: refused by the server (``errno`` set, e.g. 1045) or impossible on the client
    side (unsupported auth plugin, TLS required but not offered, ...; ``errno`` is ``None``)."""

    def __init__(self, message: str, errno: int | None = None, sqlstate: str | None = None) -> None:
        self.errno = errno
        self.sqlstate = sqlstate
        self.message = message
        super().__init__(message if errno is None else f"({errno}, {sqlstate!r}) {message}")


class BinlogDumpError(ServerError):
    """The server ended the binlog stream with an ERR packet."""


class BinlogPurgedError(BinlogDumpError):
    """errno 1236 (ER_MASTER_FATAL_ERROR_READING_BINLOG): the requested binlog file or GTID position is
    not on the server any more (purged), never existed, or the position is not valid in the file."""


class ReplicaTimeoutError(MysqlError, TimeoutError):
    """No packet (not even a heartbeat) arrived within the read timeout: the source looks dead."""


def dump_error(errno: int, sqlstate: str, message: str) -> BinlogDumpError:
    """The error class for an ERR packet received on the binlog stream."""
    cls = BinlogPurgedError if errno == ER_MASTER_FATAL_ERROR_READING_BINLOG else BinlogDumpError
    return cls(errno, sqlstate, message)
