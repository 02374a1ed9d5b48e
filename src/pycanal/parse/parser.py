"""``MysqlEventParser``: one destination's live binlog parser (Canal's ``MysqlEventParser``).

The parser runs in a thread::

    parser = MysqlEventParser("example", ("db", 3306), "canal", "canal", sink=my_sink)
    parser.start()
    ...
    parser.stop()

and loops: connect, find the start position (:meth:`find_start_position`, Canal's decision table:
:mod:`pycanal.parse.start`), start the schema history there, dump, decode, filter, convert to Canal entries, and
hand them through the transaction buffer to ``sink(records)`` (store records: each entry's bytes
with its position and types, ``RawEntryConverter.records``). ``sink`` blocks until the entries
are accepted and returns True (False or an exception: not accepted). Only after the sink accepted
a batch is the position of its last complete transaction persisted through the position manager.
Whenever the socket has nothing more and everything read is sunk, ``on_idle()`` says so (the
store's waiting get then takes what is there instead of waiting for more).
On any error: ``alarm(destination, message)``, close the dump (killing it on the server), drop the
buffer, sleep with backoff, and start again from the last *persisted* position.

Differences from Canal: the persisted position is the *end* of the transaction's last event
(Canal: its start, so a restart repeats the lone TRANSACTIONEND); heartbeat entries are not handed
to the sink.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.decoder import EventDecoder
from pycanal.binlog.errors import TableIdNotFoundError
from pycanal.mysql.connection import ReplicaConnection
from pycanal.mysql.errors import BinlogPurgedError
from pycanal.mysql.tls import TlsSettings
from pycanal.parse.buffer import TransactionBuffer, TransactionPosition
from pycanal.parse.eventfilter import EventFilters, FieldFilter
from pycanal.parse.filter import TableFilter
from pycanal.parse.index import LogPositionManager, MemoryLogPositionManager
from pycanal.parse.logevent import LogEventConvert
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.parse.start import Address, StartPositionSearch, parse_address
from pycanal.parse.worker import UNDECODED, ConvertWorker
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import BINLOG_START_OFFSET, EntryPosition, LogIdentity, LogPosition
from pycanal.store.event import Event

__all__ = ["MysqlEventParser"]

log = logging.getLogger(__name__)


class MysqlEventParser(StartPositionSearch):
    """One destination's parser (see the module notes).

    Configuration (Canal's keys in brackets):
        destination: the instance name.
        master_address, username, password: the source [canal.instance.master.address,
            canal.instance.dbUsername/dbPassword].
        standby_address, standby_username, standby_password: the standby [canal.instance.standby.*].
        master_tls, standby_tls: :class:`~pycanal.mysql.tls.TlsSettings` of every connection to
            each source [canal.instance.master.sslMode, ...]; default plain TCP (a standby
            without its own: the master's).
        master_position, standby_position: the configured start ``EntryPosition``s (journal name,
            position, timestamp in ms, gtid) [canal.instance.master.journal.name/position/
            timestamp/gtid].
        gtid_mode: [canal.instance.gtidon]. slave_id: the replica's server id
            [canal.instance.mysql.slaveId]; random when None.
        filter, black_filter: Canal's white/black regexes or a :class:`TableFilter`.
        event_filters, field_filter: the other ``canal.instance.filter.*`` keys
            (:mod:`pycanal.parse.eventfilter`).
        transaction_size: [canal.instance.transaction.size]. fallback_interval_seconds:
            [canal.instance.fallbackIntervalInSeconds]. heartbeat_period: seconds
            (``@master_heartbeat_period``); read_timeout: default heartbeat + 10 s.
        detecting_enable, detecting_sql, detecting_interval, detecting_retry_times,
            heartbeat_ha_enable: [canal.instance.detecting.*]: after ``detecting_retry_times``
            consecutive failures of ``detecting_sql`` (run every ``detecting_interval`` s), an
            alarm, and with ``heartbeat_ha_enable`` and a standby, :meth:`do_switch`.
        schema_history: a ``SchemaHistory`` or None; schema_history_path: create one (SQLite).
        sink: ``sink(records) -> bool`` (a list of ``pycanal.store.Event``); blocks until accepted.
        on_idle: ``on_idle()`` when the parser has sunk all the source sent so far.
        position_manager: default a :class:`MemoryLogPositionManager`.
        alarm: ``alarm(destination, message)``; default a logged error.
        dump_error_count_threshold: errno-1236 errors tolerated before the fallbacks (2).
        auto_reset_latest_pos_mode: after the threshold, jump to the end of the binlog (data loss).
        reconnect_interval, max_reconnect_interval: backoff between runs (doubles per failure).
        timezone: TIMESTAMP rendering of the converter.
        parallel: decode and convert in a second process (:mod:`pycanal.parse.worker`)
            [canal.instance.parser.parallel].
        linger: with ``parallel``, how long (s) after the last chunk of events the next one waits
            for more once the socket is quiet [canal.instance.parser.lingerMs].
    """

    def __init__(
        self,
        destination: str,
        master_address: Address | str,
        username: str = "",
        password: str = "",
        *,
        standby_address: Address | str | None = None,
        standby_username: str | None = None,
        standby_password: str | None = None,
        master_tls: TlsSettings | None = None,
        standby_tls: TlsSettings | None = None,
        master_position: EntryPosition | None = None,
        standby_position: EntryPosition | None = None,
        gtid_mode: bool = False,
        slave_id: int | None = None,
        filter: TableFilter | str | None = None,
        black_filter: str | None = None,
        transaction_size: int = 1024,
        fallback_interval_seconds: int = 60,
        heartbeat_period: float = 15.0,
        read_timeout: float | None = None,
        connect_timeout: float = 10.0,
        detecting_enable: bool = False,
        detecting_sql: str = "select 1",
        detecting_interval: float = 5.0,
        detecting_retry_times: int = 3,
        heartbeat_ha_enable: bool = False,
        schema_history: Any = None,
        schema_history_path: str | None = None,
        sink: Callable[[list[Event]], Any] | None = None,
        on_idle: Callable[[], Any] | None = None,
        position_manager: LogPositionManager | None = None,
        alarm: Callable[[str, str], Any] | None = None,
        dump_error_count_threshold: int = 2,
        auto_reset_latest_pos_mode: bool = False,
        reconnect_interval: float = 10.0,
        max_reconnect_interval: float = 60.0,
        timezone: str = "UTC",
        event_filters: EventFilters | None = None,
        field_filter: FieldFilter | None = None,
        parallel: bool = False,
        linger: float = 0.005,
    ) -> None:
        if sink is None:
            raise ValueError("MysqlEventParser needs a sink")
        self.destination = destination
        self.master_address = parse_address(master_address)
        self.standby_address = parse_address(standby_address) if standby_address else None
        self._credentials = {
            self.master_address: (username, password),
        }
        if self.standby_address is not None:
            self._credentials.setdefault(
                self.standby_address,
                (
                    standby_username if standby_username is not None else username,
                    standby_password if standby_password is not None else password,
                ),
            )
        # A context is built once (~15 ms of CPU); a bad keystore fails here, not mid-run.
        self._tls = {}
        for address, tls in ((self.master_address, master_tls), (self.standby_address, standby_tls)):
            if address is not None and tls is not None:
                self._tls.setdefault(address, (tls.context, tls.preferred))
        self.master_position = master_position
        self.standby_position = standby_position
        self.gtid_mode = gtid_mode
        self.slave_id = slave_id if slave_id is not None else random.randrange(1 << 16, 1 << 31)
        if isinstance(filter, TableFilter):
            self.filter = filter
        else:
            self.filter = TableFilter(filter, black_filter)
        self.transaction_size = transaction_size
        self.fallback_interval_seconds = fallback_interval_seconds
        self.heartbeat_period = heartbeat_period
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.detecting_enable = detecting_enable
        self.detecting_sql = detecting_sql
        self.detecting_interval = detecting_interval
        self.detecting_retry_times = detecting_retry_times
        self.heartbeat_ha_enable = heartbeat_ha_enable
        self._history_path = schema_history_path if schema_history is None else None
        self.schema_history = schema_history
        self._open_history()
        self.sink = sink
        self.on_idle = on_idle
        self.position_manager = position_manager or MemoryLogPositionManager()
        self.alarm = alarm
        self.dump_error_count_threshold = dump_error_count_threshold
        self.auto_reset_latest_pos_mode = auto_reset_latest_pos_mode
        self.reconnect_interval = reconnect_interval
        self.max_reconnect_interval = max_reconnect_interval
        self.timezone = timezone
        self.event_filters = event_filters or EventFilters()
        self.field_filter = field_filter if field_filter else None
        self.parallel = parallel
        self.linger = linger
        self._skipped_done = 0  # rows events dropped under filter.table.error by finished runs
        self._convert: LogEventConvert | None = None
        self._worker: ConvertWorker | None = None
        # For the metrics: binlog bytes received, transactions sunk, the binlog time (s) of the
        # last event, and whether the source said it has nothing more (a heartbeat came last).
        self.received_bytes = 0
        self.transactions = 0
        self.last_event_time = 0
        self.caught_up = False

        self.running_address: Address = self.master_address
        self.dump_error_count = 0
        self.need_transaction_position = False
        self._schema_position: tuple[str, int] | None = None  # see _run_once
        self.last_error: BaseException | None = None
        self.last_start_position: EntryPosition | None = None
        self.last_persisted: LogPosition | None = None
        self.runs = 0
        self._lock = threading.RLock()
        self._running = False
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._detector: threading.Thread | None = None
        self._conn: ReplicaConnection | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def skipped_table_errors(self) -> int:
        """Rows events dropped under ``filter.table.error`` (no TABLE_MAP) so far."""
        running = self._worker or self._convert
        return self._skipped_done + (running.skipped_table_errors if running is not None else 0)

    @property
    def is_running(self) -> bool:
        return self._running

    def _open_history(self) -> None:
        """Open the schema history at ``schema_history_path`` (the parser's own: :meth:`stop`
        closes it; a stopped parser holding it in a reference cycle would keep its SQLite file
        open until the collector ran)."""
        if self._history_path is not None and self.schema_history is None:
            from pycanal.parse.meta import SchemaHistory

            self.schema_history = SchemaHistory(
                self._history_path,
                connect=lambda: self._control(self.running_address),
                filter=self.filter,
                alarm=lambda message: self._alarm(f"schema history: {message}"),
            )

    def start(self) -> None:
        with self._lock:
            if self._running:
                raise RuntimeError(f"parser {self.destination} is already running")
            self._open_history()
            self._running = True
            self._stop_event.clear()
            if not self.position_manager.running:
                self.position_manager.start()
            self._thread = threading.Thread(
                target=self._run, name=f"pycanal-parser-{self.destination}", daemon=True
            )
            self._thread.start()
            if self.detecting_enable:
                self._detector = threading.Thread(
                    target=self._detect_loop, name=f"pycanal-detect-{self.destination}", daemon=True
                )
                self._detector.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the loop, kill the dump, and wait for the thread."""
        with self._lock:
            self._running = False
            self._stop_event.set()
            conn = self._conn
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                log.debug("closing the dump connection failed", exc_info=True)
        alive = False  # a thread still running, or this one: it may still use the history
        for thread in (self._thread, self._detector):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)
            alive = alive or (thread is not None and thread.is_alive())
        self._thread = self._detector = None
        if self._history_path is not None and self.schema_history is not None and not alive:
            self.schema_history.close()
            self.schema_history = None

    def do_switch(self) -> None:
        """Switch between master and standby (Canal's ``doSwitch``): the next run connects to the
        other address; the running dump is closed."""
        if self.standby_address is None:
            self._alarm("no standby configured: cannot switch")
            return
        with self._lock:
            old = self.running_address
            self.running_address = self.standby_address if old == self.master_address else self.master_address
            conn = self._conn
        log.warning("%s: switching from %s to %s", self.destination, old, self.running_address)
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                log.debug("closing the dump connection failed", exc_info=True)

    # ------------------------------------------------------------------ running
    def _alarm(self, message: str) -> None:
        if self.alarm is not None:
            try:
                self.alarm(self.destination, message)
                return
            except Exception:  # noqa: BLE001 - an alarm must not break the loop
                log.exception("alarm callback failed")
        log.error("%s: %s", self.destination, message)

    def _flush(self, records: list[Event]) -> bool:
        batch = [r for r in records if r.entry_type != pb.HEARTBEAT]
        if not batch:
            return True
        accepted = self.sink(batch)
        if accepted is not False:
            self.transactions += sum(1 for r in batch if r.entry_type == pb.TRANSACTIONEND)
        if not self._running:
            # Stopping: whatever the sink did, nothing more is persisted.
            raise _Stopping()
        return accepted is not False

    def _persist(self, address: Address, tp: TransactionPosition) -> None:
        position = LogPosition(
            LogIdentity(address, self.slave_id),
            EntryPosition(tp.journal_name, tp.end_position, tp.server_id, tp.gtid or None, tp.timestamp),
        )
        self.position_manager.persist_log_position(self.destination, position)
        self.last_persisted = position

    def _sleep_backoff(self, failures: int) -> None:
        delay = min(self.max_reconnect_interval, self.reconnect_interval * (2 ** max(0, failures - 1)))
        self._stop_event.wait(delay)

    def _run(self) -> None:
        failures = 0
        while self._running:
            try:
                streamed = self._run_once()
                if streamed:
                    failures = 0
                if self._running:
                    raise ConnectionError("the binlog stream ended (another replica with the same slave id?)")
            except _Stopping:
                break
            except Exception as exc:  # noqa: BLE001 - every error restarts the run
                if not self._running:
                    break
                self.last_error = exc
                if isinstance(exc, BinlogPurgedError):
                    self.dump_error_count += 1
                if isinstance(exc, TableIdNotFoundError):
                    # Started inside a transaction: the next start rewinds to its begin.
                    self.need_transaction_position = True
                self._alarm(f"dump error ({type(exc).__name__}): {exc}")
                log.debug("%s: dump error", self.destination, exc_info=True)
            finally:
                with self._lock:
                    conn, self._conn = self._conn, None
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        log.debug("closing the dump connection failed", exc_info=True)
            if not self._running:
                break
            failures += 1
            self._sleep_backoff(failures)

    def _run_once(self) -> bool:
        """One run; returns True once events streamed (for the backoff)."""
        address = self.running_address
        self.runs += 1
        start = self.find_start_position(address)
        self.last_start_position = start
        use_gtid = bool(self.gtid_mode and start.gtid)
        history = self.schema_history
        history_started = False
        if history is not None and start.journal_name and not use_gtid:
            # A rewind to the transaction's begin keeps the schema of the position it rewound
            # from: no DDL lies inside a transaction, and the history may start there.
            at = self._schema_position or (start.journal_name, start.position or BINLOG_START_OFFSET)
            history.start(at)
            history_started = True
        self._schema_position = None
        decoder = EventDecoder(
            f"{address[0]}:{address[1]}",
            table_meta=history.table_meta if history is not None else None,
        )
        conn = self._replica(
            address,
            server_id=self.slave_id,
            decoder=decoder,
            heartbeat=self.heartbeat_period,
            read_timeout=self.read_timeout,
        )
        # The SQL behind rows events is not even fetched when filter.query.dml drops it.
        conn.annotate_rows = not self.event_filters.query_dml
        with self._lock:
            if not self._running:
                return False
            self._conn = conn
        conn.connect()
        gtid_set = None
        if self.gtid_mode:
            from pycanal.binlog.gtid import MariadbGtidSet, MysqlGtidSet

            cls = MariadbGtidSet if conn.is_mariadb else MysqlGtidSet
            gtid_set = cls.parse(start.gtid or "")
        if use_gtid:
            if conn.is_mariadb:
                conn.dump_mariadb_gtid(start.gtid)
            else:
                conn.dump_gtid(start.gtid)
        else:
            conn.dump(start.journal_name or "", start.position or BINLOG_START_OFFSET)
        log.info("%s: dumping %s:%d from %s", self.destination, address[0], address[1], start)
        # Entries are written as bytes with what the buffer, the sink and the store read beside
        # them: nothing is parsed back or serialized again on the way to the store.
        convert = LogEventConvert(
            RawEntryConverter(timezone=self.timezone, gtid_set=gtid_set),
            self.filter,
            self.event_filters,
            self.field_filter,
            lambda message: log.warning("%s: %s", self.destination, message),
        )
        self._convert = convert
        buffer = TransactionBuffer(
            self.transaction_size, self._flush, lambda tp: self._persist(address, tp), deferred=True
        )
        try:
            if self.parallel:
                return self._stream_parallel(conn, decoder, convert, buffer, history, history_started)
            return self._stream(conn, convert, buffer, history, history_started)
        finally:
            buffer.reset()
            self._convert = None
            self._skipped_done += convert.skipped_table_errors

    def _schema_event(self, event: ev.Event, history: Any, started: bool) -> bool:
        """The schema history's part of an event (ROTATE starts it, DDL moves it); whether it is
        started."""
        if isinstance(event, ev.RotateEvent):
            if not started:
                history.start((event.next_file, event.position))
            return True
        if (
            started
            and type(event) is ev.QueryEvent
            and event.query.strip().upper() not in ("BEGIN", "COMMIT", "ROLLBACK")  # type: ignore[attr-defined]
        ):
            history.at((event.file, event.pos))
            history.apply_event(event)
        return started

    def _stream(
        self,
        conn: ReplicaConnection,
        convert: LogEventConvert,
        buffer: TransactionBuffer,
        history: Any,
        history_started: bool,
    ) -> bool:
        """Read, convert and buffer in this thread."""
        streamed = False
        records = convert.records
        schema_types = (ev.RotateEvent, ev.QueryEvent)
        on_idle = self.on_idle

        def on_wait() -> None:  # nothing more to read for now
            buffer.commit()
            if on_idle is not None:
                on_idle()

        for event in conn.events(on_wait=on_wait):
            if not self._running:
                break
            streamed = True
            self.received_bytes += event.size
            if isinstance(event, ev.HeartbeatEvent):
                self.caught_up = True  # the source sends heartbeats only when it has nothing
            elif event.timestamp:
                self.caught_up = False
                self.last_event_time = event.timestamp
            if history is not None and type(event) in schema_types:
                history_started = self._schema_event(event, history, history_started)
            buffer.add_all(records(event))
        if self._running:
            buffer.commit()  # the stream ended (EOF): what was flushed goes to the store
        return streamed

    def _stream_parallel(
        self,
        conn: ReplicaConnection,
        decoder: EventDecoder,
        convert: LogEventConvert,
        buffer: TransactionBuffer,
        history: Any,
        history_started: bool,
    ) -> bool:
        """Read here, decode and convert in the second process (:mod:`pycanal.parse.worker`)."""
        worker = ConvertWorker(
            convert,
            decoder,
            with_meta=history is not None,
            warn=lambda message: log.warning("%s: %s", self.destination, message),
        )
        self._worker = worker
        try:
            if history is not None:
                decoder.table_meta = lambda tm: worker.meta(history.table_meta(tm))
            feed, take = worker.feed, worker.take
            heartbeats = (E.HEARTBEAT, E.HEARTBEAT_V2)
            schema_types = (ev.RotateEvent, ev.QueryEvent)

            linger, on_idle = self.linger, self.on_idle

            def on_wait() -> None:
                # Nothing more to read for now. The open chunk waits for more bytes until
                # `linger` after the last chunk went (a stream of 1-row transactions would be a
                # round trip each; after a quiet spell it goes at once) or that chunk's answer;
                # then what the worker answers goes to the store, waiting for its answers as
                # long as the socket stays quiet.
                if worker.queued:
                    left = worker.sent_at + linger - time.monotonic()
                    if left > 0 and conn.wait_readable(worker.fileno(), left):
                        return
                worker.flush()
                decoder.tables.clear()  # the reading side never decodes the rows that use them
                while True:
                    buffer.add_all(take())
                    buffer.commit()
                    if not self._running:
                        return
                    if not worker.busy:
                        if on_idle is not None:
                            on_idle()
                        return
                    if conn.wait_readable(worker.fileno(), 1.0):
                        return
                    worker.flush()

            streamed = False
            for data, pos, event, ts in conn.frames(on_wait=on_wait, undecoded=UNDECODED):
                if not self._running:
                    break
                streamed = True
                self.received_bytes += len(data)
                if data[4] in heartbeats:
                    self.caught_up = True
                elif ts:
                    self.caught_up = False
                    self.last_event_time = ts
                if event is not None and history is not None and type(event) in schema_types:
                    history_started = self._schema_event(event, history, history_started)
                if feed(data, pos, event):
                    buffer.add_all(take())
            if self._running:
                worker.flush()
                while worker.busy:
                    worker.wait()
                buffer.add_all(take())
                buffer.add_all(take())  # raises the worker's error, if any
                buffer.commit()
            return streamed
        finally:
            self._worker = None
            self._skipped_done += worker.skipped_table_errors
            worker.close()

    # ------------------------------------------------------------------ detecting
    def _detect_once(self, address: Address) -> bool:
        try:
            conn = self._control(address)
            try:
                with conn.cursor() as cur:
                    cur.execute(self.detecting_sql)
                    cur.fetchall()
            finally:
                conn.close()
            return True
        except Exception:  # noqa: BLE001 - any failure counts
            log.debug("%s: detecting SQL failed on %s", self.destination, address, exc_info=True)
            return False

    def _detect_loop(self) -> None:
        failures = 0
        while not self._stop_event.wait(self.detecting_interval):
            address = self.running_address
            if self._detect_once(address):
                failures = 0
                continue
            failures += 1
            if failures < self.detecting_retry_times:
                continue
            failures = 0
            self._alarm(
                f"detecting SQL failed {self.detecting_retry_times} times on {address[0]}:{address[1]}"
            )
            if self.heartbeat_ha_enable and self.standby_address is not None:
                self.do_switch()


class _Stopping(Exception):
    """The parser is stopping: leave the run without persisting."""
