"""``LocalBinlogParser`` over a private MariaDB's binlog directory (MINIMAL row metadata, several
files): by file+position and by timestamp it gives the same records as the live ``ReplicaStream``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pycanal.binlog.constants import EventType as E
from pycanal.binlog.reader import read_events
from pycanal.parse.canonical import Recorder
from pycanal.parse.filter import TableFilter
from pycanal.parse.local import LocalBinlogParser, binlog_files
from pycanal.parse.meta import SchemaHistory
from pycanal.parse.stream import ReplicaStream, StreamError
from pycanal.testing import PrivateMariaDB

SCHEMA = "pycanal"
T1, T2 = "local_t1", "local_t2"


@dataclass
class Workload:
    db: PrivateMariaDB
    start: tuple[str, int]
    end: tuple[str, int]
    timestamp_ms: int
    batch2_file: str


def write_batch(db: PrivateMariaDB, base: int) -> None:
    with db.root_connection(SCHEMA) as conn, conn.cursor() as cur:
        for i in range(base, base + 4):
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {T1} VALUES (%s, %s, %s)", (i, f"r{i}", 65535 - i))
            cur.execute(f"INSERT INTO {T2} VALUES (%s, 'b')", (i,))
            cur.execute("COMMIT")
        cur.execute(f"UPDATE {T1} SET s = 'upd' WHERE id = %s", (base,))


@pytest.fixture(scope="module")
def workload(mariadb_minimal: PrivateMariaDB) -> Workload:
    db = mariadb_minimal
    for t in (T1, T2):
        db.execute(f"DROP TABLE IF EXISTS `{SCHEMA}`.`{t}`")
    db.execute(f"CREATE TABLE `{SCHEMA}`.`{T1}` (id INT PRIMARY KEY, s VARCHAR(20), u SMALLINT UNSIGNED)")
    db.execute(f"CREATE TABLE `{SCHEMA}`.`{T2}` (id INT PRIMARY KEY, e ENUM('a','b'))")
    db.flush_binary_logs()
    start = db.current_binlog()
    write_batch(db, 10)
    db.flush_binary_logs()
    ts = (int(time.time()) + 1) * 1000
    while time.time() * 1000 < ts + 20:
        time.sleep(0.05)
    batch2_file = db.current_binlog()[0]
    write_batch(db, 20)
    db.flush_binary_logs()
    write_batch(db, 30)
    db.flush_binary_logs()
    write_batch(db, 40)
    return Workload(db, start, db.current_binlog(), ts, batch2_file)


def records(events: Any) -> list[dict[str, Any]]:
    return list(Recorder().records(events))


def stream_records(w: Workload, **kwargs: Any) -> list[dict[str, Any]]:
    d = w.db
    with ReplicaStream(d.host, d.port, d.repl_user, d.repl_password, stop_at_end=True, **kwargs) as s:
        return records(s.events())


def history(w: Workload) -> SchemaHistory:
    return SchemaHistory(None, connect=w.db.repl_connection)


def last_event_end(w: Workload) -> int:
    """Where the workload's last event ends in the end file: MariaDB writes its BINLOG_CHECKPOINT
    events (43 bytes, after a rotation, once the older file's transactions are durable) when it
    gets to it, so the end SHOW MASTER STATUS reports may include some after the last commit."""
    events = read_events(w.db.binlog_dir / w.end[0])
    return max(e.next_pos for e in events if e.type != E.MARIADB_BINLOG_CHECKPOINT and e.next_pos <= w.end[1])


@pytest.fixture(scope="module")
def streamed(workload: Workload) -> list[dict[str, Any]]:
    recs = stream_records(workload, start=workload.start)
    assert recs[-1]["file"] == workload.end[0] and recs[-1]["next_pos"] == last_event_end(workload)
    return recs


def test_by_file_and_position_equals_the_stream(workload: Workload, streamed: list[dict[str, Any]]) -> None:
    parser = LocalBinlogParser(workload.db.binlog_dir, start=workload.start, history=history(workload))
    got = records(parser.events())
    assert got == streamed
    assert len({r["file"] for r in got}) == 4  # followed three rotations
    rows = [r for r in got if r["type"] in ("INSERT", "UPDATE")]
    assert len(rows) == 4 * 9
    t2 = next(r for r in rows if r["table"] == T2)
    assert t2["columns"] == ["id", "e"] and tuple(t2["after"]) == (10, "b")
    # The end of the last file (MariaDB may have added a BINLOG_CHECKPOINT since).
    assert parser.position is not None and parser.position.file == workload.end[0]
    assert parser.position.position >= workload.end[1]


def test_middle_start_equals_the_stream(workload: Workload, streamed: list[dict[str, Any]]) -> None:
    gtids = [i for i, r in enumerate(streamed) if r["type"] == "GTID"]
    rec = streamed[gtids[len(gtids) // 2]]
    start = (rec["file"], rec["pos"])
    got = records(LocalBinlogParser(workload.db.binlog_dir, start=start, history=history(workload)).events())
    assert got == stream_records(workload, start=start)
    assert got == streamed[gtids[len(gtids) // 2] :]


def test_by_timestamp_equals_the_stream(workload: Workload, streamed: list[dict[str, Any]]) -> None:
    parser = LocalBinlogParser(
        workload.db.binlog_dir, timestamp_ms=workload.timestamp_ms, history=history(workload)
    )
    got = records(parser.events())
    d = workload.db
    with ReplicaStream(
        d.host, d.port, d.repl_user, d.repl_password, timestamp_ms=workload.timestamp_ms, stop_at_end=True
    ) as s:
        live = records(s.events())
        live_start = s.start_position
    assert got == live
    assert parser.start_position == live_start
    first = next(i for i, r in enumerate(streamed) if r["file"] == workload.batch2_file)
    assert got == streamed[first:]


def test_timestamp_before_everything_starts_at_the_oldest_file(workload: Workload) -> None:
    parser = LocalBinlogParser(workload.db.binlog_dir, timestamp_ms=1000)
    pos = parser.resolve()
    assert pos.file == binlog_files(workload.db.binlog_dir)[0].name and pos.position == 4


def test_without_history_and_with_filter(workload: Workload, streamed: list[dict[str, Any]]) -> None:
    plain = records(LocalBinlogParser(workload.db.binlog_dir, start=workload.start).events())
    rows = [r for r in plain if r["type"] == "INSERT"]
    assert rows and all(r["columns"] is None for r in rows)  # MINIMAL metadata, no history
    flt = TableFilter(rf"{SCHEMA}\.{T1}")
    got = records(
        LocalBinlogParser(
            workload.db.binlog_dir, start=workload.start, history=history(workload), filter=flt
        ).events()
    )
    assert {r["table"] for r in got if r["type"] in ("INSERT", "UPDATE")} == {T1}
    assert got == [r for r in streamed if r["table"] in (None, T1)]


def test_binlog_files_sorted_by_sequence(tmp_path: Path) -> None:
    for name in ("mysql-bin.000010", "mysql-bin.000009", "mysql-bin.index", "mysql-bin.1000000", "other.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in binlog_files(tmp_path)] == [
        "mysql-bin.000009",
        "mysql-bin.000010",
        "mysql-bin.1000000",
    ]
    with pytest.raises(StreamError):
        LocalBinlogParser(tmp_path / "missing").resolve()
    with pytest.raises(StreamError):
        LocalBinlogParser(tmp_path, start=("mysql-bin.000001", 4)).resolve()
