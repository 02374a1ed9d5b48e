"""``ReplicaStream``: a live, decoded binlog stream with table meta from the schema history.

The simple building block under the event parser and ``pycanal dump``: one replica connection,
one start position, no reconnects::

    with ReplicaStream("127.0.0.1", 3306, "repl", "secret", start=("mysql-bin.000003", 4),
                       filter=TableFilter(r"shop\\..*"), stop_at_end=True) as stream:
        for event in stream.events():
            ...                  # TABLE_MAPs carry names, signedness and labels from the history

Start (one of): ``start`` = file + position; ``gtid`` = a GTID set (MariaDB ``domain-server-seq``
list or MySQL ``uuid:interval`` set; the stream starts after it); ``timestamp_ms`` = the last
transaction boundary before that time (see :func:`find_position_by_timestamp`); nothing = the
current end of the binlog (``SHOW MASTER STATUS``).

The schema history (SQLite in a temporary directory unless ``history_path`` names a file) is
started at the stream's first position from the live ``information_schema``, every QUERY event
is applied to it, and it completes every TABLE_MAP (``EventDecoder(table_meta=...)``), so rows
get their column names, signedness and ENUM/SET labels even when the server writes MINIMAL row
metadata.

With a filter, TABLE_MAP and rows events of other tables and DDL on other tables are dropped
(Canal's semantics, :class:`~pycanal.parse.filter.TableFilter`); transaction markers stay.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..binlog import events as ev
from ..binlog.decoder import EventDecoder
from ..mysql import control
from ..mysql.connection import BinlogPosition, ReplicaConnection
from .filter import TableFilter
from .meta import SchemaHistory
from .meta.store import file_seq

__all__ = [
    "BinlogPosition",
    "EventGate",
    "ReplicaStream",
    "StreamError",
    "find_position_by_timestamp",
    "last_boundary_before",
    "position_key",
]

# Statements that never change the schema: not worth a DDL parse per transaction.
_TXN_QUERY = re.compile(
    r"^\s*(?:BEGIN|COMMIT|ROLLBACK|XA\s+(?:START|BEGIN|END|COMMIT|ROLLBACK|PREPARE))\b", re.I
)
_BEGIN = re.compile(r"^\s*(?:BEGIN|XA\s+(?:START|BEGIN))\b", re.I)
_END = re.compile(r"^\s*(?:COMMIT|ROLLBACK|XA\s+(?:COMMIT|ROLLBACK))\b", re.I)


class StreamError(Exception):
    """The stream cannot start (no binary log, a bad start position, ...)."""


def position_key(file: str, position: int) -> tuple[int, int]:
    """Order binlog coordinates: (file sequence number, offset)."""
    return file_seq(file), position


# --------------------------------------------------------------------------- transaction boundaries
@dataclass(slots=True)
class _Boundaries:
    """Follows the events of one binlog file and notes the positions between transactions."""

    in_txn: bool = False

    def end_of(self, e: ev.Event) -> bool:
        """Whether ``e`` ends a transaction (or is a statement outside one)."""
        if isinstance(e, ev.GtidEvent):
            if getattr(e.info, "standalone", True) is False:
                self.in_txn = True
            return False
        if isinstance(e, ev.XidEvent | ev.XaPrepareEvent):
            self.in_txn = False
            return True
        if isinstance(e, ev.QueryEvent):
            sql = e.query
            if _BEGIN.match(sql):
                self.in_txn = True
                return False
            if _END.match(sql) or not self.in_txn:
                self.in_txn = False
                return True
        return False


def last_boundary_before(events: Iterable[ev.Event], timestamp_ms: int) -> int | None:
    """The position (in the file the events come from) just after the last transaction that
    committed before ``timestamp_ms``, or None when no transaction of these events did."""
    tracker = _Boundaries()
    found = None
    for e in events:
        if tracker.end_of(e) and e.timestamp * 1000 < timestamp_ms and e.next_pos:
            found = e.next_pos
    return found


def _one_file(events: Iterable[ev.Event], file: str) -> Iterator[ev.Event]:
    """The events of a dump started at ``file``, up to its end (the ROTATE to the next file)."""
    for e in events:
        if isinstance(e, ev.RotateEvent) and e.next_file != file:
            return
        yield e


def find_position_by_timestamp(
    connect: Callable[[], ReplicaConnection], files: list[str], timestamp_ms: int
) -> BinlogPosition:
    """Where to start so that every transaction committed at or after ``timestamp_ms`` is seen and
    none committed before it: the boundary after the last transaction committed before that time.

    ``files`` are the source's binlog files, oldest first (``SHOW BINARY LOGS``); they are scanned
    from the newest backwards, each with its own non-blocking dump. When no transaction in any
    file is older than the timestamp, the start is the oldest file's beginning.
    """
    if not files:
        raise StreamError("the source has no binary log files")
    for file in reversed(files):
        conn = connect()
        try:
            conn.dump(file, 4, non_blocking=True)
            found = last_boundary_before(_one_file(conn.events(), file), timestamp_ms)
        finally:
            conn.close()
        if found is not None:
            return BinlogPosition(file, found)
    return BinlogPosition(files[0], 4)


# --------------------------------------------------------------------------- history + filter
class EventGate:
    """What the stream and the local parser do with each decoded event: QUERY events go to the
    schema history (DDL recorded and applied), and with a filter the events of other tables are
    dropped. :meth:`accept` says whether an event is passed on."""

    def __init__(self, history: SchemaHistory | None, filter: TableFilter | None) -> None:
        self.history = history
        self.filter = filter
        self.gtid: str | None = None

    def accept(self, e: ev.Event) -> bool:
        flt = self.filter
        if isinstance(e, ev.RowsEvent):
            tm = e.table_map
            return flt is None or tm is None or flt.accepts(tm.schema, tm.table)
        if isinstance(e, ev.TableMapEvent):
            tm = e.table_map
            return flt is None or flt.accepts(tm.schema, tm.table)
        if isinstance(e, ev.GtidEvent):
            self.gtid = e.gtid
            return True
        if isinstance(e, ev.QueryEvent):
            if _TXN_QUERY.match(e.query):
                return True
            results: list[Any] = []
            if self.history is not None:
                results = self.history.apply_event(e, self.gtid)
            elif flt is not None:
                from .ddl import parse_ddl

                status = e.status or {}
                results = parse_ddl(e.query, e.schema or None, status.get("sql_mode", 0))
            return flt is None or flt.accepts_ddl(results)
        return True


# --------------------------------------------------------------------------- the stream
class ReplicaStream:
    """A decoded binlog stream from a source (see the module docstring).

    Parameters:
        host, port, user, password: the source and the replication account (it also reads
            ``information_schema`` for the schema history, and runs SHOW MASTER STATUS).
        start: ``(file, position)`` or a :class:`BinlogPosition`.
        gtid: a GTID set to start after (exclusive with ``start`` and ``timestamp_ms``).
        timestamp_ms: start at the last transaction boundary before this time (ms since epoch).
        filter: a :class:`TableFilter` or a white-list pattern.
        stop_at_end: end the stream at the end position SHOW MASTER STATUS reports when it starts.
        history_path: the schema history's SQLite file (default: a temporary directory, removed
            on :meth:`close`).
        server_id, heartbeat_period, read_timeout, ssl: passed to :class:`ReplicaConnection`.
        alarm: called with each correction the schema history made (``SchemaHistory``'s
            ``alarm``; default a logged warning).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 3306,
        user: str = "",
        password: str = "",
        *,
        start: BinlogPosition | tuple[str, int] | None = None,
        gtid: str | None = None,
        timestamp_ms: int | None = None,
        filter: TableFilter | str | None = None,
        stop_at_end: bool = False,
        history_path: str | Path | None = None,
        server_id: int | None = None,
        heartbeat_period: float = 15.0,
        read_timeout: float | None = None,
        ssl: Any = None,
        alarm: Callable[[str], None] | None = None,
    ) -> None:
        if sum(x is not None for x in (start, gtid, timestamp_ms)) > 1:
            raise StreamError("give at most one of start, gtid and timestamp_ms")
        self.host, self.port, self.user, self.password = host, port, user, password
        if start is not None and not isinstance(start, BinlogPosition):
            start = BinlogPosition(str(start[0]), int(start[1]))
        self.requested_start = start
        self.gtid = gtid
        self.timestamp_ms = timestamp_ms
        if isinstance(filter, str):
            filter = TableFilter(filter)
        self.filter = filter
        self.stop_at_end = stop_at_end
        self.server_id = server_id
        self.heartbeat_period = heartbeat_period
        self.read_timeout = read_timeout
        self.ssl = ssl
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        if history_path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="pycanal-history-")
            history_path = Path(self._tmpdir.name) / "schema.db"
        self.history = SchemaHistory(history_path, connect=self._control, filter=filter, alarm=alarm)
        self.gate = EventGate(self.history, filter)
        self.start_position: BinlogPosition | None = None  # resolved (None in GTID mode)
        self.end_position: BinlogPosition | None = None  # SHOW MASTER STATUS at start
        self.conn: ReplicaConnection | None = None
        self._closed = False

    # -- plumbing --------------------------------------------------------------------
    def _control(self) -> Any:
        return control.connect(self.host, self.port, self.user, self.password, ssl=self.ssl)

    def _connection(self, decoder: EventDecoder | None = None) -> ReplicaConnection:
        return ReplicaConnection(
            self.host,
            self.port,
            self.user,
            self.password,
            server_id=self.server_id,
            ssl=self.ssl,
            heartbeat_period=self.heartbeat_period,
            read_timeout=self.read_timeout,
            decoder=decoder,
        )

    @property
    def position(self) -> BinlogPosition | None:
        """Where the stream stands (the position after the last event yielded)."""
        return self.conn.position if self.conn is not None else None

    def __enter__(self) -> ReplicaStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the dump (its server thread is killed) and release the history. Idempotent; may
        be called from another thread to end :meth:`events`."""
        if self._closed:
            return
        self._closed = True
        if self.conn is not None:
            self.conn.close()
        with contextlib.suppress(Exception):
            self.history.close()
        if self._tmpdir is not None:
            with contextlib.suppress(OSError):
                self._tmpdir.cleanup()

    # -- start -------------------------------------------------------------------------
    def resolve(self) -> None:
        """Query the source: the end position, and the start position for every mode but GTID."""
        with contextlib.closing(self._control()) as ctl:
            status = control.show_master_status(ctl)
            if status is None or not status.file:
                raise StreamError(f"binary logging is off on {self.host}:{self.port}")
            self.end_position = BinlogPosition(status.file, status.position)
            files = [name for name, _size in control.show_binary_logs(ctl)]
        if self.requested_start is not None:
            start = self.requested_start
            if start.file not in files:
                raise StreamError(
                    f"binlog file {start.file!r} is not on the source (it has {', '.join(files)})"
                )
            if start.position < 4:
                raise StreamError(f"start position {start.position} is inside the binlog magic")
            self.start_position = start
        elif self.timestamp_ms is not None:
            self.start_position = find_position_by_timestamp(self._connection, files, self.timestamp_ms)
        elif self.gtid is None:
            self.start_position = self.end_position

    def _at_end(self, pos: BinlogPosition | None) -> bool:
        end = self.end_position
        return (
            end is not None
            and pos is not None
            and bool(pos.file)
            and position_key(pos.file, pos.position) >= position_key(end.file, end.position)
        )

    # -- the stream ----------------------------------------------------------------------
    def events(self) -> Iterator[ev.Event]:
        """The decoded events, TABLE_MAPs completed by the schema history, filtered. Ends at
        ``stop_at_end``'s position, when :meth:`close` is called, or with an error."""
        if self.end_position is None:
            self.resolve()
        if self.stop_at_end and self.start_position is not None and self._at_end(self.start_position):
            return
        history = self.history
        started = False

        def table_meta(tm: Any) -> Any:
            return history.table_meta(tm) if started else tm

        decoder = EventDecoder(f"{self.host}:{self.port}", table_meta=table_meta)
        conn = self.conn = self._connection(decoder)
        non_blocking = self.stop_at_end  # the server ends the stream at its end of the binlog
        if self.gtid is not None:
            conn.connect()
            if conn.is_mariadb:
                conn.dump_mariadb_gtid(self.gtid, non_blocking=non_blocking)
            else:
                conn.dump_gtid(self.gtid, non_blocking=non_blocking)
        else:
            assert self.start_position is not None
            conn.dump(self.start_position.file, self.start_position.position, non_blocking=non_blocking)
        accept = self.gate.accept
        stop = self.stop_at_end
        for e in conn.events():
            if not started and isinstance(e, ev.RotateEvent):
                # The stream's first (artificial) ROTATE names where it starts: the history's start.
                pos = BinlogPosition(e.next_file, e.position)
                if self.start_position is None:
                    self.start_position = pos
                history.start((pos.file, pos.position))
                started = True
            if accept(e):
                yield e
            if (
                stop
                and not isinstance(e, ev.RotateEvent | ev.FormatDescriptionEvent)
                and self._at_end(conn.position)
            ):
                break
        conn.close()
