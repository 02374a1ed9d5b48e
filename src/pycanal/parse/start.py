"""The start-position search of a destination's parser (Canal's ``findStartPosition``): where the
next dump starts, from the stored position, the configured one and the source's binlog (seeds
000/001, ``canal.md`` §1.2):

1. GTID mode: the stored position's GTID set if it has one; else (nothing stored) the configured
   master GTID; else fall through.
2. Stored position (position manager):
   * from the connected address: used as is; but after more than ``dump_error_count_threshold``
     errno-1236 errors, when there is no standby and the source's serverId differs from the stored
     one (a VIP fail-over), search by the stored timestamp minus ``fallback_interval_seconds``;
     with ``auto_reset_latest_pos_mode`` jump to the end; otherwise a clear
     :class:`BinlogPurgedPositionError` (Canal retried the purged position forever). A stored
     position with no file and offset but a timestamp is searched by that timestamp minus the
     fallback interval.
   * from another address (master/standby switch): search by its timestamp minus the fallback
     interval.
3. Nothing stored: the configured position of the connected address (master or standby):
   file+position; file+timestamp (search that file, else offset 4); timestamp only (search the
   binlog files backwards); nothing (or an address matching neither): ``SHOW MASTER STATUS``.
4. When the last run stopped on a rows event whose TABLE_MAP was not seen (the start was inside a
   transaction), the start is moved back to the last transaction begin before it (the file is
   rescanned from offset 4).

A search by timestamp gives the last transaction boundary (a begin, or the end of a transaction
or standalone statement) whose event time is before the timestamp.

Differences from Canal: a DDL or other standalone statement is a boundary for the timestamp
search; a purged stored position with nothing to fall back to is an error, not retried forever.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.constants import LOG_EVENT_ARTIFICIAL_F
from pycanal.binlog.decoder import EventDecoder
from pycanal.mysql import control
from pycanal.mysql.connection import ReplicaConnection
from pycanal.parse.index import LogPositionManager
from pycanal.protocol.position import BINLOG_START_OFFSET, EntryPosition

__all__ = [
    "Address",
    "BinlogPurgedPositionError",
    "PositionNotFoundError",
    "StartPositionError",
    "StartPositionSearch",
    "parse_address",
]

log = logging.getLogger(__name__)

Address = tuple[str, int]


class StartPositionError(Exception):
    """No usable start position."""


class PositionNotFoundError(StartPositionError):
    """A search by timestamp found nothing (Canal's ``PositionNotFoundException``)."""


class BinlogPurgedPositionError(StartPositionError):
    """The stored position keeps failing with errno 1236 and nothing allows a fallback."""


@dataclass(frozen=True, slots=True)
class _Boundary:
    kind: str  # "begin" or "end"
    position: int  # where a stream starting at this boundary begins


def parse_address(address: Address | str) -> Address:
    if isinstance(address, str):
        host, _, port = address.rpartition(":")
        return (host or "127.0.0.1", int(port or 3306))
    host, port = address
    return (str(host), int(port))


class _TransactionTracker:
    """Classifies events as transaction boundaries (for the scans)."""

    def __init__(self) -> None:
        self.in_transaction = False

    def boundary(self, event: ev.Event) -> _Boundary | None:
        if isinstance(event, ev.GtidEvent):
            if event.type == 162 and event.info is not None:  # MariaDB GTID: starts an event group
                self.in_transaction = not event.info.standalone
                return _Boundary("begin", event.pos)
            return None
        if isinstance(event, ev.XidEvent | ev.XaPrepareEvent):
            self.in_transaction = False
            return _Boundary("end", event.next_pos)
        if isinstance(event, ev.QueryEvent) and not isinstance(event, ev.ExecuteLoadQueryEvent):
            q = event.query.strip().upper()
            if q == "BEGIN" or q.startswith("XA START"):
                self.in_transaction = True
                return _Boundary("begin", event.pos)
            if q == "COMMIT" or q == "ROLLBACK":
                self.in_transaction = False
                return _Boundary("end", event.next_pos)
            if not self.in_transaction:
                # A standalone statement (DDL, XA COMMIT, ...): it is its own transaction.
                return _Boundary("end", event.next_pos)
        return None


class StartPositionSearch:
    """The start-position search and the source connections of one destination's parser (see the
    module notes); :class:`~pycanal.parse.parser.MysqlEventParser` sets what it reads."""

    destination: str
    master_address: Address
    standby_address: Address | None
    master_position: EntryPosition | None
    standby_position: EntryPosition | None
    running_address: Address
    gtid_mode: bool
    position_manager: LogPositionManager
    fallback_interval_seconds: int
    connect_timeout: float
    dump_error_count_threshold: int
    dump_error_count: int  # errno-1236 errors since the last fallback
    auto_reset_latest_pos_mode: bool
    need_transaction_position: bool  # the last run stopped inside a transaction
    _schema_position: tuple[str, int] | None  # where the schema history starts after a rewind
    _credentials: dict[Address, tuple[str, str]]
    _tls: dict[Address, tuple[ssl.SSLContext | None, bool]]  # context, TLS only if offered

    # ------------------------------------------------------------------ connections
    def _credentials_for(self, address: Address) -> tuple[str, str]:
        return self._credentials.get(address) or self._credentials[self.master_address]

    def _tls_for(self, address: Address) -> tuple[ssl.SSLContext | None, bool]:
        return self._tls.get(address) or self._tls.get(self.master_address) or (None, False)

    def _control(self, address: Address) -> Any:
        user, password = self._credentials_for(address)
        ctx, preferred = self._tls_for(address)
        return control.connect(
            address[0], address[1], user, password, ssl=ctx, tls_preferred=preferred,
            connect_timeout=self.connect_timeout,
        )  # fmt: skip

    def _replica(
        self,
        address: Address,
        *,
        server_id: int | None,
        decoder: EventDecoder | None = None,
        heartbeat: float = 0.0,
        read_timeout: float | None = None,
    ) -> ReplicaConnection:
        user, password = self._credentials_for(address)
        ctx, preferred = self._tls_for(address)
        return ReplicaConnection(
            address[0],
            address[1],
            user,
            password,
            server_id=server_id,
            ssl=ctx,
            tls_preferred=preferred,
            heartbeat_period=heartbeat,
            read_timeout=read_timeout,
            connect_timeout=self.connect_timeout,
            decoder=decoder,
        )

    # ------------------------------------------------------------------ scans
    def _scan_file(self, address: Address, file: str) -> Iterator[ev.Event]:
        """The events of one binlog file from offset 4 (a non-blocking dump without the artificial
        events), up to its end."""
        conn = self._replica(address, server_id=None, read_timeout=max(self.connect_timeout, 30.0))
        try:
            conn.dump(file, BINLOG_START_OFFSET, non_blocking=True)
            for event in conn.events():
                if isinstance(event, ev.RotateEvent):
                    if event.next_file != file:
                        return  # the end of the file
                    continue
                if event.flags & LOG_EVENT_ARTIFICIAL_F or event.file != file:
                    continue
                if isinstance(event, ev.FormatDescriptionEvent | ev.HeartbeatEvent):
                    continue
                yield event
        finally:
            conn.close()

    def find_as_per_timestamp_in_specific_log_file(
        self, address: Address, timestamp: int, end: EntryPosition | None, file: str
    ) -> EntryPosition | None:
        """The last transaction boundary in ``file`` whose event time is before ``timestamp`` (ms);
        stops at ``end`` in the end file. None when the file has none."""
        tracker = _TransactionTracker()
        found: EntryPosition | None = None
        for event in self._scan_file(address, file):
            if event.timestamp and event.timestamp * 1000 >= timestamp:
                break
            if end is not None and end.journal_name == file and event.pos >= (end.position or 0):
                break
            b = tracker.boundary(event)
            if b is not None:
                found = EntryPosition(file, b.position, event.server_id, None, event.timestamp * 1000)
        return found

    def find_by_start_timestamp(self, address: Address, timestamp: int) -> EntryPosition:
        """Search backwards from the newest binlog file (Canal's ``findByStartTimeStamp``)."""
        with self._control(address) as conn:
            end = self._end_position(conn)
            files = [name for name, _size in control.show_binary_logs(conn)]
        if end.journal_name in files:
            files = files[: files.index(end.journal_name) + 1]
        for file in reversed(files):
            found = self.find_as_per_timestamp_in_specific_log_file(address, timestamp, end, file)
            if found is not None:
                log.warning("%s: found start position %s by timestamp %d", self.destination, found, timestamp)
                return found
        raise PositionNotFoundError(
            f"can't find start position for {self.destination}: no transaction boundary before "
            f"timestamp {timestamp} in the binlog files of {address[0]}:{address[1]}"
        )

    def find_transaction_begin_position(self, address: Address, start: EntryPosition) -> int:
        """The offset of the last transaction begin before ``start`` in its file (rescanned from
        offset 4; Canal's ``findTransactionBeginPosition``)."""
        tracker = _TransactionTracker()
        begin: int | None = None
        for event in self._scan_file(address, start.journal_name or ""):
            if event.pos >= (start.position or 0):
                break
            b = tracker.boundary(event)
            if b is not None and b.kind == "begin":
                begin = b.position
        if begin is None:
            return BINLOG_START_OFFSET
        return begin

    @staticmethod
    def _end_position(conn: Any) -> EntryPosition:
        status = control.show_master_status(conn)
        if status is None:
            raise StartPositionError("binary logging is off on the source (SHOW MASTER STATUS is empty)")
        return EntryPosition(status.file, status.position, control.server_id(conn))

    # ------------------------------------------------------------------ start position
    def find_start_position(self, address: Address | None = None) -> EntryPosition:
        """The position the next dump starts at (see the module notes)."""
        address = address or self.running_address
        if self.gtid_mode:
            stored = self.position_manager.get_latest_index_by(self.destination)
            if stored is not None:
                if stored.postion.gtid:
                    return stored.postion.copy()
            elif self.master_position is not None and self.master_position.gtid:
                return self.master_position.copy()
        start = self._find_start_position_internal(address)
        if self.need_transaction_position:
            log.warning("%s: looking for the transaction begin before %s", self.destination, start)
            begin = self.find_transaction_begin_position(address, start)
            if begin > (start.position or 0):
                raise StartPositionError(f"the transaction begin {begin} is after the start position {start}")
            if begin != start.position:
                log.warning("%s: moved the start from %s to %d", self.destination, start, begin)
                self._schema_position = (start.journal_name or "", start.position or BINLOG_START_OFFSET)
                start = start.copy(position=begin)
            self.need_transaction_position = False
        return start

    def _find_start_position_internal(self, address: Address) -> EntryPosition:
        stored = self.position_manager.get_latest_index_by(self.destination)
        if stored is None:
            return self._find_configured_position(address)
        pos = stored.postion
        if stored.identity.source_address == address:
            if 0 <= self.dump_error_count_threshold < self.dump_error_count:
                with self._control(address) as conn:
                    server_id = control.server_id(conn)
                    end = self._end_position(conn) if self.auto_reset_latest_pos_mode else None
                case2 = (
                    self.standby_address is None and pos.server_id is not None and pos.server_id != server_id
                )
                if case2:
                    ts = (pos.timestamp or 0) - self.fallback_interval_seconds * 1000
                    log.warning(
                        "%s: serverId changed (%s -> %s): searching by timestamp %d",
                        self.destination,
                        pos.server_id,
                        server_id,
                        ts,
                    )
                    found = self.find_by_start_timestamp(address, ts)
                    self.dump_error_count = 0
                    return found
                if end is not None:
                    log.warning("%s: auto reset to the latest position %s", self.destination, end)
                    self.dump_error_count = 0
                    return end
                raise BinlogPurgedPositionError(
                    f"{self.destination}: the stored position {pos} on {address[0]}:{address[1]} failed "
                    f"{self.dump_error_count} times with errno 1236 (binlog purged?) and the source's "
                    f"serverId ({server_id}) is the stored one: reset the position or configure a "
                    "new start"
                )
            if not pos.journal_name and (pos.position or 0) <= 0 and (pos.timestamp or 0) > 0:
                ts = pos.timestamp - self.fallback_interval_seconds * 1000
                return self.find_by_start_timestamp(address, ts)
            log.warning("%s: starting at the last position %s", self.destination, pos)
            return pos.copy()
        # The stored position is from another source: a master/standby switch happened.
        ts = (pos.timestamp or 0) - self.fallback_interval_seconds * 1000
        log.warning(
            "%s: source switched from %s to %s: searching by timestamp %d",
            self.destination,
            stored.identity.source_address,
            address,
            ts,
        )
        return self.find_by_start_timestamp(address, ts)

    def _find_configured_position(self, address: Address) -> EntryPosition:
        configured: EntryPosition | None = None
        if address == self.master_address:
            configured = self.master_position
        elif self.standby_address is not None and address == self.standby_address:
            configured = self.standby_position
        if configured is None:
            with self._control(address) as conn:
                return self._end_position(conn)
        configured = configured.copy()
        if not configured.journal_name:
            if (configured.timestamp or 0) > 0:
                return self.find_by_start_timestamp(address, configured.timestamp)
            with self._control(address) as conn:
                return self._end_position(conn)
        if (configured.position or 0) > 0:
            if configured.server_id is None:
                with self._control(address) as conn:
                    configured.server_id = control.server_id(conn)
            return configured
        found = None
        if (configured.timestamp or 0) > 0:
            with self._control(address) as conn:
                end = self._end_position(conn)
            found = self.find_as_per_timestamp_in_specific_log_file(
                address, configured.timestamp, end, configured.journal_name
            )
        if found is None:
            configured.position = BINLOG_START_OFFSET
            return configured
        return found
