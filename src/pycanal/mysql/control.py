"""Control queries over an ordinary PyMySQL connection (never the replication connection).

Every helper takes an open ``pymysql`` connection as its first argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pymysql

from .errors import ER_NO_SUCH_THREAD
from .tls import pymysql_tls

__all__ = [
    "MasterStatus",
    "binlog_checksum",
    "connect",
    "gtid_binlog_pos",
    "gtid_executed",
    "is_mariadb",
    "kill_connection",
    "server_id",
    "server_uuid",
    "server_version",
    "show_binary_logs",
    "show_master_status",
]

_ER_PARSE_ERROR = 1064


def connect(
    host: str,
    port: int = 3306,
    user: str = "",
    password: str = "",
    *,
    ssl: Any = None,
    tls_preferred: bool = False,
    connect_timeout: float = 10.0,
    **kwargs: Any,
) -> pymysql.connections.Connection:
    """A PyMySQL control connection (autocommit). ``ssl``: an ``ssl.SSLContext`` (TLS required,
    or with ``tls_preferred`` used when the server offers it); None: plain TCP, like the
    replication connection."""
    params: dict[str, Any] = {
        "host": host,
        "port": port,
        "user": user,
        "password": password.encode("utf-8"),  # PyMySQL encodes a str as Latin-1
        "connect_timeout": connect_timeout,
        "autocommit": True,
    }
    params.update(pymysql_tls(ssl, tls_preferred))
    params.update(kwargs)
    return pymysql.connect(**params)


def _scalar(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    return None if row is None else row[0]


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def server_version(conn: Any) -> tuple[str, tuple[int, int, int]]:
    """The version string (MariaDB's ``5.5.5-`` prefix removed) and its numeric part."""
    version = _text(conn.get_server_info())
    if version.startswith("5.5.5-") and "mariadb" in version.lower():
        version = version[6:]
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    nums = (int(m[1]), int(m[2]), int(m[3])) if m else (0, 0, 0)
    return version, nums


def is_mariadb(conn: Any) -> bool:
    return "mariadb" in server_version(conn)[0].lower()


@dataclass(frozen=True, slots=True)
class MasterStatus:
    file: str
    position: int
    binlog_do_db: str = ""
    binlog_ignore_db: str = ""
    executed_gtid_set: str = ""  # MySQL only


def _status_statements(conn: Any) -> list[str]:
    version, nums = server_version(conn)
    if "mariadb" in version.lower():
        # MariaDB 10.5.2 added SHOW BINLOG STATUS; SHOW MASTER STATUS remains an alias.
        return ["SHOW BINLOG STATUS", "SHOW MASTER STATUS"] if nums >= (10, 5, 2) else ["SHOW MASTER STATUS"]
    # MySQL 8.2 added SHOW BINARY LOG STATUS; 8.4 removed SHOW MASTER STATUS.
    if nums >= (8, 2, 0):
        return ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"]
    return ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"]


def show_master_status(conn: Any) -> MasterStatus | None:
    """The end of the binlog (``SHOW MASTER STATUS`` or the newer statement that replaces it on the
    server's version); ``None`` when binary logging is off."""
    statements = _status_statements(conn)
    for i, sql in enumerate(statements):
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                names = [d[0].lower() for d in cur.description or ()]
                row = cur.fetchone()
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == _ER_PARSE_ERROR and i + 1 < len(statements):
                continue
            raise
        if row is None:
            return None
        values = dict(zip(names, row, strict=False))
        return MasterStatus(
            file=_text(values.get("file")),
            position=int(values.get("position") or 0),
            binlog_do_db=_text(values.get("binlog_do_db")),
            binlog_ignore_db=_text(values.get("binlog_ignore_db")),
            executed_gtid_set=_text(values.get("executed_gtid_set")).replace("\n", ""),
        )
    return None


def show_binary_logs(conn: Any) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: ``(file name, size)`` of each binlog file, oldest first."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(_text(row[0]), int(row[1])) for row in cur.fetchall()]


def binlog_checksum(conn: Any) -> str:
    """``@@global.binlog_checksum``: ``"CRC32"`` or ``"NONE"``."""
    return _text(_scalar(conn, "SELECT @@global.binlog_checksum")).upper()


def server_id(conn: Any) -> int:
    return int(_scalar(conn, "SELECT @@global.server_id"))


def server_uuid(conn: Any) -> str | None:
    """MySQL's ``@@server_uuid``; ``None`` on MariaDB, which has none."""
    if is_mariadb(conn):
        return None
    return _text(_scalar(conn, "SELECT @@global.server_uuid"))


def gtid_binlog_pos(conn: Any) -> str:
    """MariaDB: ``@@global.gtid_binlog_pos``, the GTID of the last transaction in the binlog per domain."""
    return _text(_scalar(conn, "SELECT @@global.gtid_binlog_pos"))


def gtid_executed(conn: Any) -> str:
    """MySQL: ``@@global.gtid_executed`` (on one line)."""
    return _text(_scalar(conn, "SELECT @@global.gtid_executed")).replace("\n", "")


def kill_connection(conn: Any, connection_id: int) -> bool:
    """``KILL CONNECTION id``; False when the server has no such thread any more."""
    try:
        with conn.cursor() as cur:
            cur.execute(f"KILL CONNECTION {int(connection_id)}")
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_NO_SUCH_THREAD:
            return False
        raise
    except pymysql.err.InternalError as exc:
        if exc.args and exc.args[0] == ER_NO_SUCH_THREAD:
            return False
        raise
    return True
