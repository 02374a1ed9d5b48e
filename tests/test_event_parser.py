"""MysqlEventParser running against private MariaDB servers: streaming, restart from the persisted
position, the transaction rewind, errno 1236 handling and GTID mode."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pycanal.parse.index import MemoryLogPositionManager
from pycanal.parse.parser import MysqlEventParser
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition, LogIdentity, LogPosition
from pycanal.store.event import Event
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=21) as server:
        server.execute("CREATE TABLE pycanal.ep (id INT PRIMARY KEY, v VARCHAR(20))")
        server.execute("CREATE TABLE pycanal.skipme (id INT PRIMARY KEY)")
        yield server


class ListSink:
    def __init__(self) -> None:
        self.entries: list[pb.Entry] = []
        self.lock = threading.Lock()

    def __call__(self, records: list[Event]) -> bool:
        with self.lock:
            self.entries.extend(r.entry for r in records)
        return True

    def ids(self, table: str = "ep") -> list[int]:
        out = []
        with self.lock:
            entries = list(self.entries)
        for e in entries:
            if e.entryType != pb.ROWDATA or e.header.tableName != table:
                continue
            change = pb.RowChange.FromString(e.storeValue)
            if change.isDdl or e.header.eventType != pb.INSERT:
                continue
            for row in change.rowDatas:
                out += [int(c.value) for c in row.afterColumns if c.name == "id"]
        return out


class Alarms:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, destination: str, message: str) -> None:
        self.messages.append(message)


def wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def make_parser(db: PrivateMariaDB, sink, **kwargs) -> MysqlEventParser:
    kwargs.setdefault("reconnect_interval", 0.05)
    kwargs.setdefault("max_reconnect_interval", 0.2)
    return MysqlEventParser("ep", (db.host, db.port), db.repl_user, db.repl_password, sink=sink, **kwargs)


def insert(db: PrivateMariaDB, ids, table: str = "ep") -> None:
    for i in ids:
        db.execute(
            f"INSERT INTO pycanal.{table} VALUES (%s{', %s' if table == 'ep' else ''})",
            (i, "x") if table == "ep" else (i,),
        )


def test_stream_stop_restart_no_loss_no_duplicate(db: PrivateMariaDB) -> None:
    file, pos = db.current_binlog()
    manager = MemoryLogPositionManager()
    sink = ListSink()
    parser = make_parser(
        db, sink, master_position=EntryPosition(file, pos), position_manager=manager, filter="pycanal\\.ep"
    )
    parser.start()
    try:
        insert(db, range(1, 21))
        insert(db, [1], table="skipme")
        wait_for(lambda: len(sink.ids()) == 20)
        end = db.current_binlog()
        wait_for(
            lambda: (
                (lp := manager.get_latest_index_by("ep")) is not None
                and (lp.postion.journal_name, lp.postion.position) == end
            )
        )
    finally:
        parser.stop()
    assert not parser.is_running
    persisted = manager.get_latest_index_by("ep")
    assert persisted is not None and persisted.identity.source_address == (db.host, db.port)
    assert (persisted.postion.journal_name, persisted.postion.position) == db.current_binlog()
    assert sink.ids("skipme") == []  # filtered
    # Written while stopped, then resumed from the persisted position.
    insert(db, range(21, 31))
    sink2 = ListSink()
    parser2 = make_parser(
        db, sink2, master_position=EntryPosition(file, pos), position_manager=manager, filter="pycanal\\.ep"
    )
    parser2.start()
    try:
        insert(db, range(31, 41))
        wait_for(lambda: len(sink2.ids()) == 20)
    finally:
        parser2.stop()
    assert sink.ids() + sink2.ids() == list(range(1, 41))
    kinds = [e.entryType for e in sink2.entries]
    assert kinds[0] == pb.TRANSACTIONBEGIN  # resumed exactly at a transaction boundary


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_the_parser_says_when_it_has_sunk_all_the_source_sent(db: PrivateMariaDB, parallel: bool) -> None:
    """``on_idle`` after the last of a backlog, and after a later transaction, is sunk: the
    store's waiting get then need not wait out its timeout."""
    file, pos = db.current_binlog()
    base = 3000 if parallel else 4000
    insert(db, range(base, base + 50))
    sink = ListSink()
    sunk_at_idle: list[int] = []
    parser = make_parser(
        db,
        sink,
        master_position=EntryPosition(file, pos),
        filter="pycanal\\.ep",
        parallel=parallel,
        on_idle=lambda: sunk_at_idle.append(len(sink.ids())),
    )
    parser.start()
    try:
        wait_for(lambda: bool(sunk_at_idle) and sunk_at_idle[-1] == 50)
        calls = len(sunk_at_idle)
        insert(db, [base + 50])
        wait_for(lambda: len(sunk_at_idle) > calls and sunk_at_idle[-1] == 51)
    finally:
        parser.stop()
    assert sink.ids() == list(range(base, base + 51))


def test_stop_closes_the_schema_history_the_parser_opened(db: PrivateMariaDB, tmp_path) -> None:
    """The parser's own SQLite schema history closes with the parser (dropped open, it waited for
    the collector, which once ran its finalizer in a forked worker); a restart opens it again."""
    file, pos = db.current_binlog()
    sink = ListSink()
    parser = make_parser(
        db, sink, master_position=EntryPosition(file, pos), filter="pycanal\\.ep",
        schema_history_path=str(tmp_path / "tsdb.sqlite"),
    )  # fmt: skip
    for batch in (range(101, 104), range(104, 107)):
        parser.start()
        try:
            insert(db, batch)
            wait_for(lambda b=batch: sink.ids()[-3:] == list(b))
        finally:
            history = parser.schema_history
            parser.stop()
        assert parser.schema_history is None
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            history.store.conn.execute("SELECT 1")


def test_start_inside_transaction_rewinds_and_delivers_the_whole_transaction(db: PrivateMariaDB) -> None:
    with db.root_connection() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO pycanal.ep VALUES (1001, 'a')")
        cur.execute("INSERT INTO pycanal.ep VALUES (1002, 'b')")
        cur.execute("COMMIT")
    file, _ = db.current_binlog()
    events = db.query(f"SHOW BINLOG EVENTS IN '{file}'")
    gtid_pos = [int(r[1]) for r in events if r[2] == "Gtid"][-1]
    rows_pos = [int(r[1]) for r in events if r[2].startswith("Write_rows")][-1]
    sink, alarms = ListSink(), Alarms()
    parser = make_parser(db, sink, master_position=EntryPosition(file, rows_pos), alarm=alarms)
    parser.start()
    try:
        wait_for(lambda: 1002 in sink.ids())
    finally:
        parser.stop()
    assert any("TABLE_MAP" in m for m in alarms.messages)
    assert parser.last_start_position.position == gtid_pos
    assert sink.ids() == [1001, 1002]


def test_gtid_mode_streams_after_the_configured_gtid(db: PrivateMariaDB) -> None:
    insert(db, [2001])
    gtid = db.query("SELECT @@global.gtid_binlog_pos")[0][0]
    insert(db, [2002, 2003])
    sink = ListSink()
    manager = MemoryLogPositionManager()
    parser = make_parser(
        db, sink, gtid_mode=True, master_position=EntryPosition(gtid=gtid), position_manager=manager
    )
    parser.start()
    try:
        wait_for(lambda: sink.ids()[-1:] == [2003])
    finally:
        parser.stop()
    assert sink.ids() == [2002, 2003]
    assert manager.get_latest_index_by("ep").postion.gtid == db.query("SELECT @@global.gtid_binlog_pos")[0][0]
    # Restart in GTID mode: the stored gtid is used, nothing is repeated.
    insert(db, [2004])
    sink2 = ListSink()
    parser = make_parser(
        db, sink2, gtid_mode=True, master_position=EntryPosition(gtid=gtid), position_manager=manager
    )
    parser.start()
    try:
        wait_for(lambda: sink2.ids() == [2004])
    finally:
        parser.stop()


def test_purged_position_counts_1236_then_clear_error_then_serverid_fallback(
    mariadb_factory: Callable[..., PrivateMariaDB],
) -> None:
    server = mariadb_factory(server_id=31)
    server.execute("CREATE TABLE pycanal.ep (id INT PRIMARY KEY, v VARCHAR(20))")
    insert(server, [1])
    old_file, old_pos = server.current_binlog()
    server.flush_binary_logs()
    insert(server, [2, 3])
    time.sleep(1.1)
    ts = int(time.time() * 1000)
    time.sleep(1.1)
    insert(server, [4])
    new_file = server.current_binlog()[0]
    server.execute(f"PURGE BINARY LOGS TO '{new_file}'")
    manager = MemoryLogPositionManager()
    manager.persist_log_position(
        "ep",
        LogPosition(
            LogIdentity((server.host, server.port), 1),
            EntryPosition(old_file, old_pos, 31, None, ts + 60_000),
        ),
    )
    sink, alarms = ListSink(), Alarms()
    parser = make_parser(server, sink, position_manager=manager, alarm=alarms)
    parser.start()
    try:
        wait_for(lambda: any("BinlogPurgedPositionError" in m for m in alarms.messages))
        assert parser.dump_error_count == 3
        assert sum("BinlogPurgedError" in m for m in alarms.messages) == 3
        assert sink.entries == []
        # A VIP fail-over: the source behind the address now has another serverId.
        server.execute("SET GLOBAL server_id = 32")
        wait_for(lambda: 4 in sink.ids())
    finally:
        parser.stop()
    assert parser.dump_error_count == 0
    assert sink.ids() == [4]  # from the last boundary before ts - 0 (stored ts - 60 s)
    assert parser.last_start_position.journal_name == new_file


def test_detecting_failures_switch_to_standby(mariadb_factory: Callable[..., PrivateMariaDB]) -> None:
    master = mariadb_factory(server_id=41)
    standby = mariadb_factory(server_id=42)
    for s in (master, standby):
        s.execute("CREATE TABLE pycanal.ep (id INT PRIMARY KEY, v VARCHAR(20))")
    insert(master, [1])
    insert(standby, [1])
    time.sleep(2.2)  # the stored timestamp minus the 1 s fallback must be after the standby's insert
    sink, alarms = ListSink(), Alarms()
    manager = MemoryLogPositionManager()
    parser = MysqlEventParser(
        "ep",
        (master.host, master.port),
        master.repl_user,
        master.repl_password,
        standby_address=(standby.host, standby.port),
        sink=sink,
        alarm=alarms,
        master_position=EntryPosition(*master.current_binlog()),
        position_manager=manager,
        detecting_enable=True,
        detecting_interval=0.2,
        detecting_retry_times=2,
        heartbeat_ha_enable=True,
        reconnect_interval=0.05,
        max_reconnect_interval=0.2,
        fallback_interval_seconds=1,
    )
    parser.start()
    try:
        insert(master, [2])
        wait_for(lambda: sink.ids() == [2])
        master.stop()
        wait_for(lambda: parser.running_address == (standby.host, standby.port))
        time.sleep(0.3)
        insert(standby, [3])
        try:
            wait_for(lambda: 3 in sink.ids())
        except AssertionError:
            raise AssertionError(alarms.messages[-3:]) from None
    finally:
        parser.stop()
    assert any("detecting SQL failed" in m for m in alarms.messages), alarms.messages[-5:]
    assert manager.get_latest_index_by("ep").identity.source_address == (standby.host, standby.port)


@pytest.mark.parametrize("kill", [False, True], ids=["shutdown", "sigkill"])
def test_source_restart_mid_stream_loses_and_repeats_nothing(kill: bool) -> None:
    # The source restarts (cleanly, or killed as in a crash) while the parser streams a workload:
    # the parser reconnects from its persisted position, and every committed row arrives exactly
    # once (a transaction the crash rolled back never reached the binlog, so it never arrives).
    with PrivateMariaDB(server_id=31) as src:
        src.execute("CREATE TABLE pycanal.ep (id INT PRIMARY KEY, v VARCHAR(20))")
        file, pos = src.current_binlog()
        manager = MemoryLogPositionManager()
        sink = ListSink()
        parser = make_parser(
            src,
            sink,
            master_position=EntryPosition(file, pos),
            position_manager=manager,
            heartbeat_period=1,
            read_timeout=3.0,
        )
        parser.start()
        try:
            insert(src, range(1, 201))
            wait_for(lambda: len(sink.ids()) >= 50)
            src.restart(kill=kill)
            insert(src, range(201, 301))
            expected = sorted(r[0] for r in src.query("SELECT id FROM pycanal.ep"))
            wait_for(lambda: sorted(set(sink.ids())) == expected, timeout=60)
            ids = sink.ids()
            assert len(ids) == len(set(ids)), "a row arrived twice"
            assert expected == list(range(1, 301))
        finally:
            parser.stop()


def test_compressed_binlog_streams() -> None:
    # MariaDB's log_bin_compress writes QUERY/ROWS events as their compressed types (165-171).
    extra = ["--log-bin-compress=ON", "--log-bin-compress-min-len=10"]
    with PrivateMariaDB(server_id=32, extra_args=extra) as src:
        src.execute("CREATE TABLE pycanal.ep (id INT PRIMARY KEY, v VARCHAR(200))")
        file, pos = src.current_binlog()
        sink = ListSink()
        parser = make_parser(src, sink, master_position=EntryPosition(file, pos))
        parser.start()
        try:
            for i in range(1, 31):
                src.execute("INSERT INTO pycanal.ep VALUES (%s, %s)", (i, "compressible " * 10))
            src.execute("UPDATE pycanal.ep SET v = 'short' WHERE id <= 10")
            wait_for(lambda: len(sink.ids()) == 30)
            assert sorted(sink.ids()) == list(range(1, 31))
            types = [r[2] for r in src.query(f"SHOW BINLOG EVENTS IN '{file}'")]
            assert "Write_rows_compressed_v1" in types and "Query_compressed" in types, types
        finally:
            parser.stop()
