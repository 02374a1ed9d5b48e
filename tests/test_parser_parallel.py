"""The parser's second process (``parallel=True``, ``canal.instance.parser.parallel``) against a
private MariaDB: the same records as the inline parser, byte for byte, through DDL that changes
the schema mid-stream (TABLE_MAPs completed by the schema history in order), filters, big and
small transactions and GTID mode; the rewind of a start inside a transaction; a worker killed
mid-stream; no worker left behind."""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pycanal.parse.eventfilter import EventFilters
from pycanal.parse.filter import RegexFilter, TableFilter
from pycanal.parse.index import MemoryLogPositionManager
from pycanal.parse.parser import MysqlEventParser
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition
from pycanal.store.event import Event
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=51) as server:
        yield server


class RecordSink:
    """Every record the parser hands over, as everything the store reads of it."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.lock = threading.Lock()

    def __call__(self, records: list[Event]) -> bool:
        with self.lock:
            self.records += [
                (r.raw, r.journal_name, r.position, r.event_length, r.execute_time, r.server_id, r.gtid,
                 r.entry_type, r.event_type, r.is_ddl, r.rows, r.size)
                for r in records
            ]  # fmt: skip
        return True

    def ends(self) -> int:
        with self.lock:
            return sum(1 for r in self.records if r[7] == pb.TRANSACTIONEND)


def wait_for(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def make_parser(db: PrivateMariaDB, sink, tmp: Path, name: str, **kwargs) -> MysqlEventParser:
    kwargs.setdefault("reconnect_interval", 0.05)
    kwargs.setdefault("max_reconnect_interval", 0.2)
    kwargs.setdefault("position_manager", MemoryLogPositionManager())
    return MysqlEventParser(
        "pp",
        (db.host, db.port),
        db.repl_user,
        db.repl_password,
        sink=sink,
        schema_history_path=str(tmp / f"{name}.sqlite"),
        **kwargs,
    )


def persisted_at(parser: MysqlEventParser, end: tuple[str, int]) -> bool:
    lp = parser.position_manager.get_latest_index_by("pp")
    return lp is not None and (lp.postion.journal_name, lp.postion.position) == end


def workload(db: PrivateMariaDB, schema: str) -> None:
    """Small and big transactions over three tables, DDL that moves columns, statements on no
    table, a filtered table."""
    with db.root_connection() as conn, conn.cursor() as cur:
        for i in range(1, 301):  # 1- to 4-row transactions spread over the tables
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {schema}.a (id, n) VALUES (%s, %s)", (i, i / 4))
            if i % 2:
                cur.execute(f"INSERT INTO {schema}.b VALUES (%s, %s)", (i, "text " * (i % 7)))
            if i % 3 == 0 and i <= 200:
                cur.execute(f"UPDATE {schema}.a SET v = CONCAT('v', id) WHERE id = %s", (i - 1,))
            elif i % 3 == 0:
                cur.execute(f"UPDATE {schema}.a SET n = n + 1 WHERE id = %s", (i - 1,))
            if i % 5 == 0:
                cur.execute(f"INSERT INTO {schema}.skipped (id) VALUES (%s)", (i,))
                cur.execute(f"DELETE FROM {schema}.b WHERE id = %s", (i - 4,))
            cur.execute("COMMIT")
            if i == 100:
                cur.execute(f"ALTER TABLE {schema}.a ADD COLUMN extra INT DEFAULT 7 AFTER id")
            if i == 150:
                cur.execute("CREATE USER IF NOT EXISTS 'pp_user'@'localhost'")
            if i == 200:
                cur.execute(f"ALTER TABLE {schema}.a DROP COLUMN v")
                cur.execute(f"ALTER TABLE {schema}.skipped ADD COLUMN z INT")
        cur.execute("BEGIN")  # one big transaction
        cur.executemany(f"INSERT INTO {schema}.b VALUES (%s, %s)", [(10_000 + i, "big") for i in range(2000)])
        cur.execute("COMMIT")
        cur.execute(f"UPDATE {schema}.b SET s = 'all' WHERE id >= 10000")


@pytest.mark.parametrize("gtid_mode", [False, True], ids=["position", "gtid"])
def test_parallel_records_equal_the_inline_ones(db: PrivateMariaDB, tmp_path: Path, gtid_mode: bool) -> None:
    schema = f"pp_{'g' if gtid_mode else 'p'}"
    db.execute(f"CREATE DATABASE {schema}")
    db.execute(f"CREATE TABLE {schema}.a (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(10,2))")
    db.execute(f"CREATE TABLE {schema}.b (id BIGINT PRIMARY KEY, s TEXT)")
    db.execute(f"CREATE TABLE {schema}.skipped (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    gtid = db.query("SELECT @@global.gtid_binlog_pos")[0][0]
    start = EntryPosition(gtid=gtid) if gtid_mode else EntryPosition(file, pos)
    sinks = {"inline": RecordSink(), "parallel": RecordSink()}
    parsers = {
        name: make_parser(
            db, sinks[name], tmp_path, name, master_position=start, gtid_mode=gtid_mode,
            filter=f"{schema}\\..*,mysql\\..*", black_filter=f"{schema}\\.skipped",
            parallel=name == "parallel",
        )
        for name in sinks
    }  # fmt: skip
    for parser in parsers.values():
        parser.start()
    try:
        # Both streaming (their schema histories loaded) before the DDL runs.
        db.execute(f"INSERT INTO {schema}.b VALUES (0, 'first')")
        for sink in sinks.values():
            wait_for(lambda s=sink: s.ends() >= 1)
        workload(db, schema)
        end = db.current_binlog()
        for parser in parsers.values():
            wait_for(lambda p=parser: persisted_at(p, end))
    finally:
        for parser in parsers.values():
            parser.stop()
    inline, parallel = sinks["inline"].records, sinks["parallel"].records
    assert sinks["inline"].ends() >= 303
    assert len(parallel) == len(inline)
    for i, (want, got) in enumerate(zip(inline, parallel, strict=True)):
        assert got == want, (
            f"record {i} differs: {pb.Entry.FromString(got[0])} vs {pb.Entry.FromString(want[0])}"
        )
    kinds = {pb.Entry.FromString(r[0]).header.eventType for r in parallel}
    assert {pb.INSERT, pb.UPDATE, pb.DELETE, pb.ALTER, pb.QUERY} <= kinds
    tables = {pb.Entry.FromString(r[0]).header.tableName for r in parallel}
    assert "skipped" not in tables
    # The schema history completed every TABLE_MAP: the columns after the DDL have names.
    last = [pb.Entry.FromString(r[0]) for r in parallel if r[7] == pb.ROWDATA and r[8] == pb.INSERT]
    change = pb.RowChange.FromString([e for e in last if e.header.tableName == "a"][-1].storeValue)
    assert [c.name for c in change.rowDatas[0].afterColumns] == ["id", "extra", "n"]
    assert parsers["parallel"].last_persisted.postion == parsers["inline"].last_persisted.postion
    # What the metrics read (the delay, the bytes received): the same either way.
    last_time = max(r[4] for r in inline) // 1000
    for parser in parsers.values():
        assert parser.last_event_time == last_time
        assert parser.received_bytes == parsers["inline"].received_bytes > 0


def test_parallel_start_inside_a_transaction_rewinds(db: PrivateMariaDB, tmp_path: Path) -> None:
    db.execute("CREATE DATABASE IF NOT EXISTS pp_r")
    db.execute("CREATE TABLE pp_r.t (id INT PRIMARY KEY)")
    with db.root_connection() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO pp_r.t VALUES (1)")
        cur.execute("INSERT INTO pp_r.t VALUES (2)")
        cur.execute("COMMIT")
    file, _ = db.current_binlog()
    events = db.query(f"SHOW BINLOG EVENTS IN '{file}'")
    gtid_pos = [int(r[1]) for r in events if r[2] == "Gtid"][-1]
    rows_pos = [int(r[1]) for r in events if r[2].startswith("Write_rows")][-1]
    sink = RecordSink()
    alarms: list[str] = []
    parser = make_parser(
        db, sink, tmp_path, "rewind", master_position=EntryPosition(file, rows_pos), parallel=True,
        filter="pp_r\\..*", alarm=lambda _d, m: alarms.append(m),
    )  # fmt: skip
    parser.start()
    try:
        wait_for(lambda: sink.ends() >= 1, timeout=20)
    finally:
        parser.stop()
    assert any("TableIdNotFoundError" in m for m in alarms), alarms
    assert parser.last_start_position.position == gtid_pos
    rows = [r for r in sink.records if r[7] == pb.ROWDATA and r[8] == pb.INSERT]
    assert sum(r[10] for r in rows) == 2


def test_parallel_worker_killed_mid_stream_loses_and_repeats_nothing(
    db: PrivateMariaDB, tmp_path: Path
) -> None:
    db.execute("CREATE DATABASE IF NOT EXISTS pp_k")
    db.execute("CREATE TABLE pp_k.t (id INT PRIMARY KEY, v VARCHAR(40))")
    file, pos = db.current_binlog()
    sink = RecordSink()
    alarms: list[str] = []
    parser = make_parser(
        db, sink, tmp_path, "kill", master_position=EntryPosition(file, pos), parallel=True,
        filter="pp_k\\..*", alarm=lambda _d, m: alarms.append(m),
    )  # fmt: skip
    parser.start()
    killed = []
    try:
        with db.root_connection() as conn, conn.cursor() as cur:
            for i in range(1, 2001):
                cur.execute("INSERT INTO pp_k.t VALUES (%s, 'x')", (i,))
                if i == 600:
                    wait_for(lambda: parser._worker is not None)
                    killed.append(parser._worker.pid)
                    os.kill(killed[0], signal.SIGKILL)
        end = db.current_binlog()
        wait_for(lambda: persisted_at(parser, end))
    finally:
        parser.stop()
    assert any("ConvertWorkerError" in m for m in alarms), alarms
    ids = []
    for r in sink.records:
        if r[7] == pb.ROWDATA and r[8] == pb.INSERT:
            change = pb.RowChange.FromString(pb.Entry.FromString(r[0]).storeValue)
            ids += [int(row.afterColumns[0].value) for row in change.rowDatas]
    assert ids == list(range(1, 2001))
    with pytest.raises(ProcessLookupError):  # reaped: no zombie, no worker left running
        os.kill(killed[0], 0)


def test_parallel_stop_leaves_no_worker(db: PrivateMariaDB, tmp_path: Path) -> None:
    db.execute("CREATE DATABASE IF NOT EXISTS pp_s")
    db.execute("CREATE TABLE pp_s.t (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    sink = RecordSink()
    parser = make_parser(
        db, sink, tmp_path, "stop", master_position=EntryPosition(file, pos), parallel=True,
        event_filters=EventFilters(query_dml=True),
    )  # fmt: skip
    parser.start()
    try:
        db.execute("INSERT INTO pp_s.t VALUES (1)")
        wait_for(lambda: sink.ends() >= 1)
        pid = parser._worker.pid
    finally:
        parser.stop()
    assert parser._worker is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("parallel", [False, True], ids=["inline", "parallel"])
def test_a_subscription_filter_change_reaches_the_parser(
    db: PrivateMariaDB, tmp_path: Path, parallel: bool
) -> None:
    """A client subscribing with another filter replaces the white list (Canal's subscribeChange):
    the events parsed from then on follow it, in the second process too, and a table's cached
    verdict does not outlive the list it was taken from."""
    schema = f"pp_f{int(parallel)}"
    db.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
    db.execute(f"CREATE TABLE {schema}.a (id INT PRIMARY KEY)")
    db.execute(f"CREATE TABLE {schema}.b (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    sink = RecordSink()
    filt = TableFilter(f"{schema}\\.a")
    parser = make_parser(db, sink, tmp_path, f"filter{parallel}", master_position=EntryPosition(file, pos),
                         parallel=parallel, filter=filt, event_filters=EventFilters(query_dml=True))  # fmt: skip

    def tables() -> list[str]:
        out = []
        for raw, *_ in sink.records:
            e = pb.Entry.FromString(raw)
            if e.entryType == pb.ROWDATA:
                out.append(e.header.tableName)
        return out

    parser.start()
    try:
        db.execute(f"INSERT INTO {schema}.a VALUES (1)")
        db.execute(f"INSERT INTO {schema}.b VALUES (1)")
        wait_for(lambda: sink.ends() >= 2)
        filt.white = RegexFilter(f"{schema}\\.(a|b)", True)  # what CanalInstance.subscribe_change does
        db.execute(f"INSERT INTO {schema}.b VALUES (2)")
        db.execute(f"INSERT INTO {schema}.a VALUES (2)")
        wait_for(lambda: sink.ends() >= 4)
    finally:
        parser.stop()
    assert tables() == ["a", "b", "a"]


def test_heartbeats_say_caught_up_and_events_say_when(db: PrivateMariaDB, tmp_path: Path) -> None:
    """What the delay metric reads: a heartbeat in a quiet spell says the parser is caught up; an
    event after it says it is not, and its time is the last event's."""
    db.execute("CREATE DATABASE IF NOT EXISTS pp_beat")
    db.execute("CREATE TABLE pp_beat.t (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    sink = RecordSink()
    parser = make_parser(db, sink, tmp_path, "beat", master_position=EntryPosition(file, pos), parallel=True,
                         heartbeat_period=0.3)  # fmt: skip
    parser.start()
    try:
        for i in range(2):
            wait_for(lambda: parser.caught_up, timeout=10)
            db.execute(f"INSERT INTO pp_beat.t VALUES ({i})")
            wait_for(lambda i=i: sink.ends() > i, timeout=10)
            assert parser.last_event_time == sink.records[-1][4] // 1000 > 0
    finally:
        parser.stop()


def test_after_a_quiet_spell_a_transaction_goes_at_once(db: PrivateMariaDB, tmp_path: Path) -> None:
    """Transactions 1.2 s apart with a 1 s linger: each comes a linger after the last chunk went,
    so it goes to the second process at once and reaches the sink in well under the linger (a
    linger counted from its own arrival would hold each for a second)."""
    db.execute("CREATE DATABASE IF NOT EXISTS pp_quiet")
    db.execute("CREATE TABLE pp_quiet.t (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    sink = RecordSink()
    parser = make_parser(db, sink, tmp_path, "quiet", master_position=EntryPosition(file, pos),
                         parallel=True, linger=1.0, event_filters=EventFilters(query_dml=True))  # fmt: skip
    parser.start()
    waited = []
    try:
        with db.root_connection("pp_quiet") as conn, conn.cursor() as cur:
            for i in range(4):
                time.sleep(1.2)
                cur.execute(f"INSERT INTO t VALUES ({i})")
                began = time.monotonic()
                wait_for(lambda i=i: sink.ends() > i, timeout=10)
                waited.append(time.monotonic() - began)
    finally:
        parser.stop()
    assert max(waited) < 0.8, waited


@pytest.mark.parametrize("linger", [0.0, 1.0])
def test_a_trickle_of_transactions_waits_the_linger_for_more(
    db: PrivateMariaDB, tmp_path: Path, linger: float
) -> None:
    """Transactions 20 ms apart: without a linger each goes to the second process alone; with one
    of 1 s those that arrive within a second share a chunk (a round trip each is what a trickle
    costs), and all arrive. The chunks a linger allows follow from how long the ten commits took:
    a loaded machine can stretch them past the linger."""
    schema = f"pp_l{int(linger)}"
    db.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
    db.execute(f"CREATE TABLE {schema}.t (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    sink = RecordSink()
    parser = make_parser(db, sink, tmp_path, f"linger{linger}", master_position=EntryPosition(file, pos),
                         parallel=True, linger=linger, event_filters=EventFilters(query_dml=True))  # fmt: skip
    parser.start()
    try:
        db.execute(f"INSERT INTO {schema}.t VALUES (0)")
        wait_for(lambda: sink.ends() >= 1)
        sent = parser._worker.chunks_sent
        with db.root_connection(schema) as conn, conn.cursor() as cur:
            began = time.monotonic()
            for i in range(1, 11):
                cur.execute(f"INSERT INTO t VALUES ({i})")
                time.sleep(0.02)
            took = time.monotonic() - began
        wait_for(lambda: sink.ends() >= 11, timeout=10)
        chunks = parser._worker.chunks_sent - sent
    finally:
        parser.stop()
    if linger:  # a chunk opens at a commit and closes a linger later: one more per linger spanned
        assert chunks <= 1 + math.ceil(took / linger), (chunks, took)
    else:
        assert chunks >= 5, chunks
