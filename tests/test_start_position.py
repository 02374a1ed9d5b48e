"""Start-position search of MysqlEventParser (seeds 000/001, canal.md §1.2): one test per branch,
against private MariaDB servers."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pycanal.parse.index import FailbackLogPositionManager, LogPositionManagerError, MemoryLogPositionManager
from pycanal.parse.parser import MysqlEventParser
from pycanal.parse.start import PositionNotFoundError
from pycanal.protocol.position import EntryPosition, LogIdentity, LogPosition, min_log_position
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    # A server of its own: the timestamp searches need a binlog nobody else writes to.
    with PrivateMariaDB(server_id=11) as server:
        server.execute("CREATE TABLE pycanal.sp (id INT PRIMARY KEY, v VARCHAR(20))")
        yield server


def make_parser(db: PrivateMariaDB, **kwargs) -> MysqlEventParser:
    kwargs.setdefault("sink", lambda entries: True)
    return MysqlEventParser("sp", (db.host, db.port), db.repl_user, db.repl_password, **kwargs)


_ids = iter(range(1, 10**9))


def insert(db: PrivateMariaDB, n: int = 1) -> None:
    for _ in range(n):
        db.execute("INSERT INTO pycanal.sp VALUES (%s, 'x')", (next(_ids),))


def xid_ends(db: PrivateMariaDB, file: str) -> list[int]:
    rows = db.query(f"SHOW BINLOG EVENTS IN '{file}'")
    return [int(r[4]) for r in rows if r[2] == "Xid"]


def now_ms() -> int:
    return int(time.time() * 1000)


def stored(db: PrivateMariaDB, pos: EntryPosition, address=None) -> MemoryLogPositionManager:
    manager = MemoryLogPositionManager()
    manager.persist_log_position("sp", LogPosition(LogIdentity(address or (db.host, db.port), 1), pos))
    return manager


# ---------------------------------------------------------------------------- positions / managers
def test_log_position_json_round_trip() -> None:
    text = (
        '{"identity":{"slaveId":-1,"sourceAddress":{"address":"mysql","port":3306}},'
        '"postion":{"gtid":"","included":false,"journalName":"mysql-bin.000032","position":696,'
        '"serverId":1,"timestamp":1589189724000}}'
    )
    lp = LogPosition.from_json(text)
    assert lp.identity == LogIdentity(("mysql", 3306), -1)
    assert lp.postion == EntryPosition("mysql-bin.000032", 696, 1, "", 1589189724000)
    assert lp.to_json() == text
    typed = lp.to_dict(with_type=True)
    assert typed["@type"] == "com.alibaba.otter.canal.protocol.position.LogPosition"
    assert LogPosition.from_dict(typed) == lp
    assert EntryPosition("a.000001", 9) < EntryPosition("a.000002", 4) < EntryPosition("a.000002", 5)
    other = LogPosition(LogIdentity(("x", 1)), EntryPosition("a.000001", 1, timestamp=5))
    assert min_log_position(lp, other) is other


def test_failback_manager() -> None:
    class Broken(MemoryLogPositionManager):
        def persist_log_position(self, destination, log_position):
            raise LogPositionManagerError("down")

    primary, secondary = MemoryLogPositionManager(), MemoryLogPositionManager()
    fb = FailbackLogPositionManager(primary, secondary)
    a = LogPosition(LogIdentity(("h", 1)), EntryPosition("f.000001", 4))
    b = LogPosition(LogIdentity(("h", 1)), EntryPosition("f.000001", 8))
    secondary.persist_log_position("d", a)
    assert fb.get_latest_index_by("d") is a  # primary empty -> secondary
    fb.persist_log_position("d", b)
    assert primary.get_latest_index_by("d") is b and fb.get_latest_index_by("d") is b
    fb2 = FailbackLogPositionManager(Broken(), secondary)
    fb2.persist_log_position("d", b)
    assert secondary.get_latest_index_by("d") is b


# ---------------------------------------------------------------------------- stored position
def test_stored_position_same_address_is_used(db: PrivateMariaDB) -> None:
    insert(db)
    file, pos = db.current_binlog()
    manager = stored(db, EntryPosition(file, pos, 11, None, now_ms()))
    parser = make_parser(db, position_manager=manager, master_position=EntryPosition(file, 4))
    assert parser.find_start_position() == EntryPosition(
        file, pos, 11, None, manager.get_latest_index_by("sp").postion.timestamp
    )


def test_stored_position_from_another_address_searches_by_timestamp(db: PrivateMariaDB) -> None:
    insert(db, 2)
    time.sleep(1.1)
    ts = now_ms()
    time.sleep(1.1)
    insert(db, 2)
    file, _ = db.current_binlog()
    expected = xid_ends(db, file)[-3]  # the end of the last transaction before ts
    # Stored on a previous master; its timestamp minus the 60 s fallback is ts.
    manager = stored(db, EntryPosition("old-bin.000009", 1234, 99, None, ts + 60_000), ("10.9.9.9", 3306))
    parser = make_parser(db, position_manager=manager)
    found = parser.find_start_position()
    assert (found.journal_name, found.position) == (file, expected)
    assert found.timestamp < ts


# ---------------------------------------------------------------------------- configured position
def test_configured_file_and_position(db: PrivateMariaDB) -> None:
    file, pos = db.current_binlog()
    parser = make_parser(db, master_position=EntryPosition(file, pos))
    found = parser.find_start_position()
    assert (found.journal_name, found.position, found.server_id) == (file, pos, 11)


def test_configured_standby_position_for_the_standby_address(db: PrivateMariaDB) -> None:
    file, pos = db.current_binlog()
    parser = make_parser(db, master_position=EntryPosition(file, 4))
    parser.master_address = ("10.9.9.9", 3306)  # connected address = the standby
    parser.standby_address = (db.host, db.port)
    parser._credentials[parser.standby_address] = (db.repl_user, db.repl_password)
    parser.standby_position = EntryPosition(file, pos)
    assert parser.find_start_position((db.host, db.port)).position == pos


def test_configured_file_and_timestamp_found(db: PrivateMariaDB) -> None:
    db.flush_binary_logs()
    insert(db, 2)
    time.sleep(1.1)
    ts = now_ms()
    time.sleep(1.1)
    insert(db, 1)
    file, _ = db.current_binlog()
    parser = make_parser(db, master_position=EntryPosition(file, None, timestamp=ts))
    found = parser.find_start_position()
    assert (found.journal_name, found.position) == (file, xid_ends(db, file)[1])


def test_configured_file_and_timestamp_not_found_starts_at_4(db: PrivateMariaDB) -> None:
    file, _ = db.current_binlog()
    parser = make_parser(db, master_position=EntryPosition(file, None, timestamp=1000))
    found = parser.find_start_position()
    assert (found.journal_name, found.position) == (file, 4)


def test_configured_timestamp_only_searches_backwards_across_files(db: PrivateMariaDB) -> None:
    db.flush_binary_logs()
    insert(db, 2)
    first = db.current_binlog()[0]
    db.flush_binary_logs()
    insert(db, 3)
    middle = db.current_binlog()[0]
    time.sleep(1.1)
    ts = now_ms()
    time.sleep(1.1)
    db.flush_binary_logs()
    insert(db, 2)
    db.flush_binary_logs()
    insert(db, 1)
    assert first != middle
    parser = make_parser(db, master_position=EntryPosition(None, None, timestamp=ts))
    found = parser.find_start_position()
    # Two newer files hold nothing before ts; the middle file's last transaction end is the start.
    assert (found.journal_name, found.position) == (middle, xid_ends(db, middle)[-1])
    with pytest.raises(PositionNotFoundError):
        parser.find_by_start_timestamp((db.host, db.port), 1000)


def test_nothing_configured_starts_at_the_end(db: PrivateMariaDB) -> None:
    db.wait_for_binlog_checkpoint()  # after the rotations above: else it can land after the search
    insert(db)
    parser = make_parser(db)
    found = parser.find_start_position()
    assert (found.journal_name, found.position) == db.current_binlog()
    assert found.server_id == 11
    # A configured position without file or timestamp: also the end.
    parser = make_parser(db, master_position=EntryPosition())
    assert parser.find_start_position().position == db.current_binlog()[1]


# ---------------------------------------------------------------------------- GTID mode
def test_gtid_mode_uses_stored_gtid_then_configured_gtid(db: PrivateMariaDB) -> None:
    manager = stored(db, EntryPosition("mysql-bin.000001", 4, 11, "0-11-3", now_ms()))
    parser = make_parser(
        db, gtid_mode=True, position_manager=manager, master_position=EntryPosition(gtid="0-11-1")
    )
    assert parser.find_start_position().gtid == "0-11-3"
    parser = make_parser(db, gtid_mode=True, master_position=EntryPosition(gtid="0-11-1"))
    assert parser.find_start_position().gtid == "0-11-1"
    # A stored position without a gtid (was not in GTID mode): the file position is used.
    manager = stored(db, EntryPosition("mysql-bin.000001", 4, 11, None, now_ms()))
    parser = make_parser(
        db, gtid_mode=True, position_manager=manager, master_position=EntryPosition(gtid="0-11-1")
    )
    found = parser.find_start_position()
    assert found.gtid is None and found.position == 4


# ---------------------------------------------------------------------------- transaction rewind
def test_start_inside_a_transaction_rewinds_to_begin(db: PrivateMariaDB) -> None:
    with db.root_connection() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO pycanal.sp VALUES (%s, 'a')", (next(_ids),))
        cur.execute("INSERT INTO pycanal.sp VALUES (%s, 'b')", (next(_ids),))
        cur.execute("COMMIT")
    file, _ = db.current_binlog()
    events = db.query(f"SHOW BINLOG EVENTS IN '{file}'")
    gtid_pos = [int(r[1]) for r in events if r[2] == "Gtid"][-1]
    rows_pos = [int(r[1]) for r in events if r[2].startswith("Write_rows")][-1]
    parser = make_parser(db, master_position=EntryPosition(file, rows_pos))
    parser.need_transaction_position = True
    found = parser.find_start_position()
    assert (found.journal_name, found.position) == (file, gtid_pos)
    assert parser.need_transaction_position is False
