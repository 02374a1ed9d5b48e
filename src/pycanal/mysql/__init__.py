"""The replica connection: MySQL client/server protocol (``packets``, sans-I/O), the socket edge
(``connection.ReplicaConnection``) and control queries over PyMySQL (``control``)."""

from .connection import BinlogPosition, ReplicaConnection, tls_context
from .errors import (
    AuthError,
    BinlogDumpError,
    BinlogPurgedError,
    ConnectionLostError,
    MysqlError,
    ProtocolError,
    ReplicaTimeoutError,
    ServerError,
    TLSError,
)

__all__ = [
    "AuthError",
    "BinlogDumpError",
    "BinlogPosition",
    "BinlogPurgedError",
    "ConnectionLostError",
    "MysqlError",
    "ProtocolError",
    "ReplicaConnection",
    "ReplicaTimeoutError",
    "ServerError",
    "TLSError",
    "tls_context",
]
