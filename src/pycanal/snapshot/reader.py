"""One chunk read in a consistent snapshot, with the binlog position that snapshot is at.

``START TRANSACTION WITH CONSISTENT SNAPSHOT`` takes no lock; MariaDB reports the binlog position
the snapshot corresponds to in ``binlog_snapshot_file`` / ``binlog_snapshot_position`` (what
``mariadb-dump --single-transaction --master-data`` relies on without FLUSH TABLES WITH READ
LOCK). Values come back as the binlog decoder gives them (:mod:`pycanal.binlog.rows`): integers,
``Decimal``, the FLOAT's shortest round-trip value, temporal values as the server's text (the
session in UTC, so TIMESTAMP is UTC as in the binlog), character strings as ``str``, binary ones
as ``bytes``, BIT as an integer, SET as a list of labels. A change row built from a snapshot row
is then byte-identical to one built from an INSERT of the same row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import quote as url_quote

import pymysql
import pymysql.converters
import pymysql.cursors

from pycanal.binlog.values import float32
from pycanal.mysql.tls import TlsSettings, pymysql_tls

from .chunks import INTEGER_TYPES, Chunk, chunk_where
from .tables import SourceColumn, SourceTable, quote, text

__all__ = [
    "ChunkRead",
    "SchemaRead",
    "SnapshotError",
    "connect",
    "read_chunk",
    "read_schema",
    "show_create",
    "snapshot_position",
]

# Encoders only: parameters are escaped as usual, results come back undecoded (text or bytes).
_ENCODERS = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}


class SnapshotError(RuntimeError):
    """A snapshot read that cannot be done, naming the table, chunk and source."""


@dataclass(frozen=True)
class ChunkRead:
    """A chunk's rows (tuples in table column order) as of binlog position (file, pos), read at
    ``seconds`` (the source's clock)."""

    table: SourceTable
    chunk: Chunk
    file: str
    pos: int
    seconds: int
    rows: list[tuple]


@dataclass(frozen=True)
class SchemaRead:
    """``CREATE TABLE`` statements (``SHOW CREATE TABLE``) of tables, at binlog position (file,
    pos), read at ``seconds``: ``creates`` is (schema, table, statement) per table."""

    file: str
    pos: int
    seconds: int
    creates: list[tuple[str, str, str]]


@dataclass(frozen=True)
class Source:
    """The source and the account (SELECT, REPLICATION SLAVE, REPLICATION CLIENT / BINLOG MONITOR);
    ``ssl_mode`` (Canal's ``sslMode`` names) and ``ssl_ca`` (a PEM file of the CAs that
    ``VERIFY_CA``/``VERIFY_IDENTITY`` check against; the system's without it) hold for each of the
    chunk's connections: connectorx's read, the binlog window's replica, PyMySQL's."""

    host: str
    port: int
    user: str
    password: str
    ssl_mode: str = "DISABLED"
    ssl_ca: str = ""

    @property
    def tls(self) -> TlsSettings:
        return source_tls(self.ssl_mode, self.ssl_ca)

    def connect(self, **kwargs: Any) -> pymysql.connections.Connection:
        """:func:`connect` to this source."""
        return connect(self.host, self.port, self.user, self.password, self.tls, **kwargs)

    def url(self, schema: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        auth = f"{url_quote(self.user, safe='')}:{url_quote(self.password, safe='')}"
        url = f"mysql://{auth}@{host}:{self.port}/{url_quote(schema, safe='')}"
        if self.tls.enabled:  # connectorx's own parameters (its TLS is rustls')
            url += f"?ssl-mode={self.tls.mode}"
            if self.ssl_ca:
                url += f"&ssl-ca={url_quote(self.ssl_ca, safe='/')}"
        return url


@functools.lru_cache(maxsize=16)
def source_tls(mode: str, ca: str) -> TlsSettings:
    """The TLS settings of a snapshot's source, one per process and setting: its context (~15 ms
    to build) serves every connection."""
    return TlsSettings(mode, trust_store_url=ca, trust_store_type="PEM" if ca else "", prefix="source ")


def connect(
    host: str, port: int, user: str, password: str, tls: TlsSettings | None = None, **kwargs: Any
) -> pymysql.connections.Connection:
    """A connection for snapshot reads: raw values, the session in UTC; TLS as ``tls`` says, as
    for the snapshot's connectorx and binlog-window connections (none without it: PyMySQL >= 2.2
    would try TLS on its own, building a context per connection, 27 ms of a Spark runner's
    start-up in py-spy)."""
    return pymysql.connect(
        host=host,
        port=port,
        user=user,
        password=password,
        charset="utf8mb4",
        conv=_ENCODERS,
        autocommit=True,
        init_command="SET SESSION time_zone = '+00:00'",
        **(pymysql_tls(tls.context if tls else None, tls.preferred if tls else False) | kwargs),
    )


def _bit(v: bytes) -> int:
    return int.from_bytes(v, "big")


def _float(v: str) -> float:
    return float32(float(v))


def set_labels(v: str) -> list[str]:
    """A SET value's text as the decoder gives it: its labels."""
    return v.split(",") if v else []


# DATA_TYPEs by how a reader selects them (pycanal.snapshot.window shares them).
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
GEOMETRY_TYPES = frozenset({
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection",
})  # fmt: skip
_TEMPORAL = frozenset({"date", "datetime", "timestamp", "time"})


def _column(c: SourceColumn) -> tuple[str, Callable[[Any], Any] | None]:
    """The select expression of a column and the converter of its non-NULL values (None: as is)."""
    name, t = quote(c.name), c.data_type
    if t in INTEGER_TYPES:
        return name, int
    if t in ("decimal", "numeric"):
        return name, Decimal
    if t == "float":
        return f"{name} + 0e0", _float  # widened to DOUBLE: the exact float, not its 6-digit text
    if t in ("double", "real"):
        return name, float
    if t == "bit":
        return name, _bit
    if t in _TEMPORAL or t in TEXT_TYPES or t == "enum":
        return name, None
    if t == "set":
        return name, set_labels
    if t in BINARY_TYPES or t in GEOMETRY_TYPES:
        return name, None
    if t in ("inet4", "inet6", "uuid"):
        return f"CAST({name} AS BINARY)", None  # the binlog carries their binary form
    raise ValueError(f"column {c.name} has type {c.column_type}, which the snapshot cannot read yet")


def decoded(c: SourceColumn, raw: Any) -> Any:
    """A raw value of ``c`` (PyMySQL's text or bytes, as a chunk bound is) in the binlog decoder's
    form, as ``read_chunk`` gives it."""
    conv = _column(c)[1]
    return raw if raw is None or conv is None else conv(raw)


def _select(table: SourceTable, chunk: Chunk) -> tuple[str, list[Any], list[tuple[int, Callable]]]:
    exprs, convs = [], []
    for i, c in enumerate(table.columns):
        try:
            expr, conv = _column(c)
        except ValueError as exc:
            raise SnapshotError(f"{table}: {exc}") from None
        exprs.append(expr)
        if conv is not None:
            convs.append((i, conv))
    where, args = chunk_where(table, chunk)
    return f"SELECT {', '.join(exprs)} FROM {table.qualified} WHERE {where}", args, convs


def _convert(rows: Iterator[tuple], convs: list[tuple[int, Callable]]) -> list[tuple]:
    if not convs:
        return [tuple(r) for r in rows]
    out = []
    for r in rows:
        row = list(r)
        for i, conv in convs:
            v = row[i]
            if v is not None:
                row[i] = conv(v)
        out.append(tuple(row))
    return out


@contextmanager
def _snapshot(conn: Any, what: object) -> Iterator[tuple[Any, str, int, int]]:
    """A consistent-snapshot transaction on ``conn``: (unbuffered cursor, binlog file and
    position it is at, the source's clock in seconds)."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # the next one: a snapshot
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        cur.execute("SELECT UNIX_TIMESTAMP()")
        seconds = int(text(cur.fetchall()[0][0]))
        cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
        status = {text(k): text(v) for k, v in cur.fetchall()}
        file, pos = status.get("Binlog_snapshot_file"), status.get("Binlog_snapshot_position")
        if not file or pos is None:
            raise SnapshotError(
                f"{what}: the source reports no binlog_snapshot_file/position (MariaDB with the binlog "
                "on reports the position of a consistent snapshot; MySQL does not)"
            )
        yield cur, file, int(pos), seconds
    finally:
        try:
            cur.execute("COMMIT")
        finally:
            cur.close()


def snapshot_position(conn: Any, what: object) -> tuple[str, int, int]:
    """The binlog file and position a consistent snapshot opened now is at, and the source's clock
    in seconds: every transaction before that position has committed."""
    with _snapshot(conn, what) as (_cur, file, pos, seconds):
        return file, pos, seconds


def read_chunk(conn: Any, table: SourceTable, chunk: Chunk) -> ChunkRead:
    """Read ``chunk`` of ``table`` in a consistent snapshot (``conn`` from :func:`connect`)."""
    sql, args, convs = _select(table, chunk)
    with _snapshot(conn, chunk) as (cur, file, pos, seconds):
        cur.execute(sql, args)
        rows = _convert(iter(cur), convs)
    return ChunkRead(table, chunk, file, pos, seconds, rows)


def read_schema(conn: Any, tables: list[tuple[str, str]]) -> SchemaRead:
    """The ``CREATE TABLE`` statements of ``tables`` and the binlog position they were read at
    (a table dropped meanwhile is left out: the binlog has its DROP)."""
    creates = []
    with _snapshot(conn, "the snapshot's tables") as (cur, file, pos, seconds):
        for schema, table in tables:
            create = show_create(cur, schema, table)
            if create is not None:
                creates.append((schema, table, create))
    return SchemaRead(file, pos, seconds, creates)


def show_create(cur: Any, schema: str, table: str) -> str | None:
    """The table's ``SHOW CREATE TABLE`` on the cursor ``cur``, None where it does not exist."""
    try:
        cur.execute(f"SHOW CREATE TABLE {quote(schema)}.{quote(table)}")
    except pymysql.err.ProgrammingError as exc:
        if exc.args[0] == 1146:  # ER_NO_SUCH_TABLE
            return None
        raise
    return text(cur.fetchall()[0][1])
