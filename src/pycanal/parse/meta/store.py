"""The schema history's embedded store: one SQLite file per destination.

Two tables:

* ``ddl_history``: every DDL the history applied, with its binlog position (file, offset,
  server id, GTID, timestamp), the session schema, the statement and its classification. One
  row per position: applying the same statement at the same position again (a restart replaying
  the binlog) inserts nothing. A *different* statement at a recorded position means the binlog
  was rewritten under us (a new master, a reset): the rows and snapshots from that position on
  belong to the old timeline and are replaced.
* ``snapshots``: the whole model as JSON, valid for the events at and after its *bound*: it
  contains exactly the DDL recorded before the bound. The first snapshot comes from the live
  server's ``information_schema``; later ones are taken periodically and after a table is
  re-read from the server.

Positions are ordered by (binlog file sequence number, offset); the sequence number is the
numeric extension of the file name (``mysql-bin.000042`` -> 42).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Position", "SchemaStore", "as_position", "file_seq"]

_SEQ_RE = re.compile(r"(\d+)$")


def file_seq(name: str) -> int:
    m = _SEQ_RE.search(name or "")
    return int(m.group(1)) if m else 0


@dataclass(frozen=True, slots=True)
class Position:
    """A binlog position: the event at ``offset`` of ``file`` (server id, GTID and timestamp ride along)."""

    file: str
    offset: int
    server_id: int = 0
    gtid: str | None = None
    timestamp: int = 0

    @property
    def key(self) -> tuple[int, int]:
        return file_seq(self.file), self.offset

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"


def as_position(pos: Any) -> Position:
    """A :class:`Position` from a Position, a ``(file, offset[, server_id, gtid, timestamp])`` tuple,
    or an object with ``file``/``offset`` (or ``pos``), or Canal-style ``journal_name``/``position``."""
    if isinstance(pos, Position):
        return pos
    if isinstance(pos, tuple | list):
        return Position(*pos)
    file = getattr(pos, "file", None) or getattr(pos, "journal_name", None)
    offset = getattr(pos, "offset", None)
    if offset is None:
        offset = getattr(pos, "pos", None)
    if offset is None:
        offset = getattr(pos, "position", None)
    if file is None or offset is None:
        raise TypeError(f"not a binlog position: {pos!r}")
    return Position(
        str(file),
        int(offset),
        int(getattr(pos, "server_id", 0) or 0),
        getattr(pos, "gtid", None) or None,
        int(getattr(pos, "timestamp", 0) or 0),
    )


@dataclass(frozen=True, slots=True)
class DdlRecord:
    file: str
    offset: int
    server_id: int
    gtid: str | None
    timestamp: int
    use_schema: str | None
    sql: str
    ddl_type: str | None
    schema: str | None
    table: str | None
    sql_mode: int = 0
    collation_server: str | None = None

    @property
    def position(self) -> Position:
        return Position(self.file, self.offset, self.server_id, self.gtid, self.timestamp)

    @property
    def key(self) -> tuple[int, int]:
        return file_seq(self.file), self.offset


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    file: str
    bound: int  # offset bound: the snapshot holds the DDL recorded before (file, bound)
    data: dict
    reason: str

    @property
    def key(self) -> tuple[int, int]:
        return file_seq(self.file), self.bound


_SCHEMA = """
CREATE TABLE IF NOT EXISTS ddl_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_seq INTEGER NOT NULL,
    binlog_file TEXT NOT NULL,
    binlog_offset INTEGER NOT NULL,
    server_id INTEGER NOT NULL DEFAULT 0,
    gtid TEXT,
    ts INTEGER NOT NULL DEFAULT 0,
    use_schema TEXT,
    sql_text TEXT NOT NULL,
    ddl_type TEXT,
    sql_schema TEXT,
    sql_table TEXT,
    sql_mode INTEGER NOT NULL DEFAULT 0,
    collation_server TEXT,
    recorded_at REAL NOT NULL,
    UNIQUE (file_seq, binlog_offset)
);
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_seq INTEGER NOT NULL,
    binlog_file TEXT NOT NULL,
    bound INTEGER NOT NULL,
    reason TEXT NOT NULL,
    data TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    UNIQUE (file_seq, bound)
);
CREATE TABLE IF NOT EXISTS store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
FORMAT = "1"


class SchemaStore:
    """SQLite persistence for one destination's schema history (``":memory:"`` for none)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        with self._tx():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self.conn.execute(stmt)
            row = self.conn.execute("SELECT value FROM store_info WHERE key = 'format'").fetchone()
            if row is None:
                self.conn.execute("INSERT INTO store_info VALUES ('format', ?)", (FORMAT,))
            elif row[0] != FORMAT:
                raise RuntimeError(f"schema history store {self.path} has format {row[0]}, expected {FORMAT}")

    def _tx(self):
        return _Transaction(self.conn)

    def close(self) -> None:
        self.conn.close()

    # -- DDL ------------------------------------------------------------------------
    def add_ddl(
        self,
        pos: Position,
        use_schema: str | None,
        sql: str,
        ddl_type: str | None = None,
        schema: str | None = None,
        table: str | None = None,
        sql_mode: int = 0,
        collation_server: str | None = None,
    ) -> bool:
        """Record a DDL at ``pos``. False when the same statement is already recorded there.

        A different statement already recorded at ``pos`` ends the old timeline: the history
        from ``pos`` on (DDL and snapshots) is dropped before the new statement is recorded.
        """
        seq, offset = pos.key
        with self._tx():
            row = self.conn.execute(
                "SELECT sql_text FROM ddl_history WHERE file_seq = ? AND binlog_offset = ?", (seq, offset)
            ).fetchone()
            if row is not None:
                if row[0] == sql:
                    return False
                self._truncate_from(seq, offset)
            self.conn.execute(
                "INSERT INTO ddl_history (file_seq, binlog_file, binlog_offset, server_id, gtid, ts, use_schema, "
                "sql_text, ddl_type, sql_schema, sql_table, sql_mode, collation_server, recorded_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    seq,
                    pos.file,
                    offset,
                    pos.server_id,
                    pos.gtid,
                    pos.timestamp,
                    use_schema,
                    sql,
                    ddl_type,
                    schema,
                    table,
                    sql_mode,
                    collation_server,
                    time.time(),
                ),
            )
        return True

    def _truncate_from(self, seq: int, offset: int) -> None:
        self.conn.execute(
            "DELETE FROM ddl_history WHERE file_seq > ? OR (file_seq = ? AND binlog_offset >= ?)",
            (seq, seq, offset),
        )
        self.conn.execute(
            "DELETE FROM snapshots WHERE file_seq > ? OR (file_seq = ? AND bound > ?)", (seq, seq, offset)
        )

    def ddls(self, start: tuple[int, int] | None, end: tuple[int, int] | None) -> list[DdlRecord]:
        """The DDL recorded at keys ``start <= key < end`` (either bound may be None), in order."""
        where, args = [], []
        if start is not None:
            where.append("(file_seq > ? OR (file_seq = ? AND binlog_offset >= ?))")
            args += [start[0], start[0], start[1]]
        if end is not None:
            where.append("(file_seq < ? OR (file_seq = ? AND binlog_offset < ?))")
            args += [end[0], end[0], end[1]]
        sql = (
            "SELECT binlog_file, binlog_offset, server_id, gtid, ts, use_schema, sql_text, ddl_type, sql_schema, "
            "sql_table, sql_mode, collation_server FROM ddl_history"
        )
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY file_seq, binlog_offset"
        return [DdlRecord(*row) for row in self.conn.execute(sql, args)]

    # -- snapshots ---------------------------------------------------------------------
    def add_snapshot(self, file: str, bound: int, data: dict, reason: str) -> None:
        """Store the model valid from ``(file, bound)`` on (replacing one at the same bound)."""
        with self._tx():
            self.conn.execute(
                "INSERT OR REPLACE INTO snapshots (file_seq, binlog_file, bound, reason, data, recorded_at) "
                "VALUES (?,?,?,?,?,?)",
                (file_seq(file), file, bound, reason, json.dumps(data, separators=(",", ":")), time.time()),
            )

    def latest_snapshot(self, at_most: tuple[int, int] | None = None) -> SnapshotRecord | None:
        """The snapshot with the greatest bound ``<= at_most`` (any bound when None)."""
        sql = "SELECT binlog_file, bound, data, reason FROM snapshots"
        args: list = []
        if at_most is not None:
            sql += " WHERE file_seq < ? OR (file_seq = ? AND bound <= ?)"
            args = [at_most[0], at_most[0], at_most[1]]
        sql += " ORDER BY file_seq DESC, bound DESC LIMIT 1"
        row = self.conn.execute(sql, args).fetchone()
        if row is None:
            return None
        return SnapshotRecord(row[0], row[1], json.loads(row[2]), row[3])

    def earliest_snapshot(self) -> SnapshotRecord | None:
        row = self.conn.execute(
            "SELECT binlog_file, bound, data, reason FROM snapshots ORDER BY file_seq, bound LIMIT 1"
        ).fetchone()
        return None if row is None else SnapshotRecord(row[0], row[1], json.loads(row[2]), row[3])

    def snapshot_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM snapshots").fetchone()[0]

    def prune_snapshots(self, keep: int) -> None:
        """Keep the ``keep`` latest snapshots and the first one (the history's start)."""
        with self._tx():
            self.conn.execute(
                "DELETE FROM snapshots WHERE id NOT IN (SELECT id FROM snapshots ORDER BY file_seq DESC, bound DESC "
                "LIMIT ?) AND id <> (SELECT id FROM snapshots ORDER BY file_seq, bound LIMIT 1)",
                (keep,),
            )


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, *exc: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
