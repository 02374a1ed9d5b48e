"""ParallelEntryConverter: RawEntryConverter's bytes, in order, with the rows encoded by workers.

Byte-identical entries (and the same error, after the same entries) on every binlog fixture, the
bad ones included, and on live MariaDB binlogs (several tables and layouts, DDL between DML,
INSERT/UPDATE/DELETE, transactions, GTID mode), read from the file and streamed over the replica
protocol; windows of one event up to the defaults. Errors: row data the fused code cannot read
(the decoder's error, file and position), a killed worker and a worker failing outside the
encoding (ConversionWorkerError naming the event). Shutdown: no process left after close, an
exception or garbage collection, and workers hold none of the parent's sockets.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import fixture_expectations as X
import workload
from pycanal.binlog import events as ev
from pycanal.binlog import read_events
from pycanal.binlog.errors import BinlogError
from pycanal.binlog.gtid import MariadbGtidSet, MysqlGtidSet
from pycanal.binlog.parallel import WorkerTraceback
from pycanal.parse.convert import keyword_ddl_classifier
from pycanal.parse.pool import ConversionWorkerError, ParallelEntryConverter, default_workers
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.parse.stream import ReplicaStream
from pycanal.protocol import CanalEntry as C
from pycanal.testing import PrivateMariaDB

DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "binlog"
ALL_FILES = (
    sorted(
        p.relative_to(DIR).as_posix()
        for p in DIR.rglob("*")
        if p.is_file() and p.name not in ("README.md", "SHA256SUMS")
    )
    if DIR.is_dir()
    else []
)

# (pool settings, converter options): every rows event its own window, all through one worker
# (nothing encoded here, row images and entries through the pipe: bigger than a slot), and small
# windows over two workers through shared memory, this process encoding when both are busy
POOLS: list[dict[str, Any]] = [
    {"workers": 1, "window_events": 1, "window_bytes": 1, "depth": 1, "encode_when_busy": False},
    {"workers": 2, "window_events": 3, "depth": 2},
]
OPTIONS: list[dict[str, Any]] = [
    {},
    {"timezone": "America/New_York", "enum_set": "label", "filter_query_dml": True},
]


def inline(
    events: Iterable[ev.Event], **options: Any
) -> tuple[list[bytes], Exception | None, RawEntryConverter]:
    """RawEntryConverter's entries up to the first error (reading or converting), and the error."""
    conv = RawEntryConverter(**options)
    out: list[bytes] = []
    try:
        for e in events:
            out += conv.convert(e)
    except Exception as exc:
        return out, exc, conv
    return out, None, conv


def pooled(pool: ParallelEntryConverter, events: Iterable[ev.Event]) -> tuple[list[bytes], Exception | None]:
    """The pool's entries as a parser drives it (submit, ready; drain at the end) and the first
    error in order: a conversion error comes before the reading error that stopped the input."""
    out: list[bytes] = []
    read_error: Exception | None = None
    it = iter(events)
    try:
        while True:
            try:
                e = next(it)
            except StopIteration:
                break
            except Exception as exc:
                read_error = exc
                break
            pool.submit(e)
            out += [raw for _e, entries in pool.ready() for raw in entries]
        while batch := pool.drain():
            out += [raw for _e, entries in batch for raw in entries]
    except Exception as exc:
        return out, exc
    return out, read_error


def assert_same(expected: list[bytes], got: list[bytes]) -> None:
    assert len(got) == len(expected)
    for k, (want, have) in enumerate(zip(expected, got, strict=True)):
        if want != have:  # show the decoded difference, then fail on the bytes
            assert C.Entry.FromString(have) == C.Entry.FromString(want), f"entry {k}"
            assert have == want, f"entry {k}: same message, different bytes"


def assert_same_error(expected: Exception | None, got: Exception | None) -> None:
    assert type(got) is type(expected)
    assert str(got) == str(expected)


def compare(make_events: Any, pool_settings: dict[str, Any], **options: Any) -> ParallelEntryConverter:
    """Inline and pooled over fresh events (the fused path reads rows not decoded yet)."""
    options.setdefault("ddl_classifier", keyword_ddl_classifier)  # converters copy a gtid_set
    expected, expected_error, conv = inline(make_events(), **options)
    with ParallelEntryConverter(**pool_settings, **options) as pool:
        got, error = pooled(pool, make_events())
        assert_same(expected, got)
        assert_same_error(expected_error, error)
        if error is None:
            assert (pool.fused_events, pool.rows_converted) == (conv.fused_events, conv.rows_converted)
        if not pool.encode_when_busy:
            assert pool.windows_here == 0
        if conv.fused_events:
            assert pool.windows_sent > 0
    return pool


# --------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("name", ALL_FILES)
@pytest.mark.parametrize("setting", range(len(POOLS)))
def test_fixture_bytes_identical(fixtures_dir: Path, name: str, setting: int):
    """Every fixture, the bad ones too: same entries, then the same error."""
    path = fixtures_dir / name
    compare(lambda: read_events(path), POOLS[setting], **OPTIONS[setting])


def test_fixture_set_complete():
    assert len(ALL_FILES) == X.FIXTURE_COUNT
    assert set(X.BAD_FILES) <= set(ALL_FILES)


@pytest.mark.parametrize(
    ("name", "gtid_set"),
    [
        ("mysql-binlog-connector-rust/mysql-bin.000057", MysqlGtidSet),  # TRANSACTION_PAYLOADs
        ("rust_mysql_common/mariadb-bin.000001", MariadbGtidSet),
        ("binlog-parser/mysql-bin.07", MariadbGtidSet),
    ],
)
def test_gtid_mode_bytes_identical(fixtures_dir: Path, name: str, gtid_set: Any):
    """GTID mode: every transaction changes the Header's GTID state the workers are sent."""
    path = fixtures_dir / name
    expected, error, _conv = inline(
        read_events(path), ddl_classifier=keyword_ddl_classifier, gtid_set=gtid_set()
    )
    assert error is None
    pool = ParallelEntryConverter(
        workers=2, window_events=4, ddl_classifier=keyword_ddl_classifier, gtid_set=gtid_set()
    )
    with pool:
        got = list(pool.convert_all(read_events(path)))
        assert pool.fused_events > 0
    assert_same(expected, got)
    assert any(C.Entry.FromString(raw).header.gtid for raw in got)


def test_sakila_through_the_workers(fixtures_dir: Path):
    """Every rows event of sakila is encoded by a worker (the fused path takes them all)."""
    path = fixtures_dir / "mysql-binlog-connector-java" / "mysql-bin.sakila"
    pool = compare(lambda: read_events(path), {"workers": 2, "encode_when_busy": False})
    assert (pool.fused_events, pool.rows_converted) == (1374, 47273)


# --------------------------------------------------------------------------- live MariaDB
SIMPLE = "id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120), d DECIMAL(12,2), t DATETIME"


def _simple_rows(start: int, n: int) -> str:
    return ", ".join(
        f"({i}, {i * 7 % 1000}, '{'é' * (i % 5)}row {i}', {i * 3.25:.2f}, '2024-01-{1 + i % 28:02d} 12:00:{i % 60:02d}')"
        for i in range(start, start + n)
    )


def _mixed_statements(schema: str) -> list[str]:
    """Two tables, big multi-row statements (many rows events each), DDL changing a layout
    between DML, updates, deletes, a transaction over both tables."""
    a, b = f"`{schema}`.`a`", f"`{schema}`.`b`"
    return [
        f"CREATE TABLE {a} ({SIMPLE}) DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE {b} (id BIGINT UNSIGNED PRIMARY KEY, v TEXT, e ENUM('x','y','z'), f DOUBLE)",
        f"INSERT INTO {a} VALUES {_simple_rows(1, 3000)}",
        f"INSERT INTO {b} VALUES (1, 'one', 'x', 1.5), (18446744073709551615, NULL, 'z', -0.0)",
        f"UPDATE {a} SET c = CONCAT(c, '+'), d = -d WHERE id % 3 = 0",
        f"ALTER TABLE {a} ADD COLUMN extra VARCHAR(10) DEFAULT 'new' AFTER k",
        f"INSERT INTO {a} (id, k, c) VALUES (5001, 1, 'after ddl'), (5002, 2, NULL)",
        f"UPDATE {a} SET extra = NULL WHERE id > 2900",
        "BEGIN",
        f"DELETE FROM {a} WHERE id % 5 = 0",
        f"UPDATE {b} SET v = REPEAT('long', 5000) WHERE id = 1",
        f"INSERT INTO {b} VALUES (2, 'two', 'y', 2.5)",
        "COMMIT",
        f"DROP TABLE {b}",
    ]


def _run(mariadb: PrivateMariaDB, statements: list[str]) -> None:
    with mariadb.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for sql in statements:
            cur.execute(sql)
        conn.commit()


@pytest.fixture(scope="module")
def live_binlog(mariadb: PrivateMariaDB) -> tuple[Path, int]:
    """A binlog section with the mixed workload and the every-type workload."""
    schema = f"pool_{uuid.uuid4().hex[:8]}"
    file, pos = mariadb.current_binlog()
    mariadb.execute(f"CREATE DATABASE `{schema}`")
    _run(mariadb, _mixed_statements(schema))
    ddl = [workload.Statement(workload.ALL_TYPES.create_sql(schema))]
    with mariadb.root_connection() as conn:
        conn.autocommit(True)
        workload.run(conn, ddl + workload.generate(workload.ALL_TYPES, schema, seed=11, ops=150))
    mariadb.flush_binary_logs()
    mariadb.execute(f"DROP DATABASE `{schema}`")
    assert mariadb.binlog_dir is not None
    return Path(mariadb.binlog_dir) / file, pos


LIVE_OPTIONS: list[dict[str, Any]] = [
    {},
    {"timezone": "Asia/Shanghai", "enum_set": "label"},
    {"timezone": "Europe/Berlin", "gtid_set": MariadbGtidSet()},
]
LIVE_POOLS: list[dict[str, Any]] = [*POOLS, {}]  # and the defaults


@pytest.mark.parametrize("options", range(len(LIVE_OPTIONS)))
@pytest.mark.parametrize("setting", range(len(LIVE_POOLS)))
def test_live_binlog_bytes_identical(live_binlog: tuple[Path, int], options: int, setting: int):
    path, pos = live_binlog
    pool = compare(
        lambda: read_events(path, start_position=pos), LIVE_POOLS[setting], **LIVE_OPTIONS[options]
    )
    assert pool.fused_events > 100
    assert pool.rows_converted > 4000


def test_live_binlog_layouts_and_kinds(live_binlog: tuple[Path, int]):
    """The live section has what the test claims: several tables and layouts (the ALTER),
    INSERT/UPDATE/DELETE entries, a transaction, GTID events."""
    path, pos = live_binlog
    events = list(read_events(path, start_position=pos))
    rows = [e for e in events if isinstance(e, ev.RowsEvent)]
    assert {e.kind for e in rows} == {"INSERT", "UPDATE", "DELETE"}
    assert len({e.table for e in rows}) >= 3
    assert len({(e.table, e.column_count) for e in rows if e.table == "a"}) == 2
    assert any(isinstance(e, ev.GtidEvent) for e in events)
    assert any(isinstance(e, ev.XidEvent) for e in events)


def test_replica_stream_bytes_identical(mariadb: PrivateMariaDB):
    """Streamed over the replica protocol as the parser reads it (TABLE_MAPs completed by the
    schema history): same entries, through the workers."""
    schema = f"pool_stream_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{schema}`")
    a = f"`{schema}`.`a`"
    mariadb.execute(f"CREATE TABLE {a} ({SIMPLE}) DEFAULT CHARSET=utf8mb4")
    file, pos = mariadb.current_binlog()
    _run(
        mariadb,
        [
            f"INSERT INTO {a} VALUES {_simple_rows(1, 2000)}",
            f"UPDATE {a} SET k = k + 1, t = NULL WHERE id % 2 = 0",
            f"DELETE FROM {a} WHERE id > 1500",
        ],
    )

    def stream_events() -> Any:
        with ReplicaStream(
            mariadb.host,
            mariadb.port,
            mariadb.repl_user,
            mariadb.repl_password,
            start=(file, pos),
            stop_at_end=True,
            heartbeat_period=0,
        ) as stream:
            yield from stream.events()

    try:
        pool = compare(stream_events, {"workers": 2, "window_events": 8}, gtid_set=MariadbGtidSet())
        assert pool.rows_converted == 2000 + 1000 + 500
        assert pool.fused_events > 10
    finally:
        mariadb.execute(f"DROP DATABASE `{schema}`")


# --------------------------------------------------------------------------- windows and idle
def _sakila_events(fixtures_dir: Path) -> list[ev.Event]:
    return list(read_events(fixtures_dir / "mysql-binlog-connector-java" / "mysql-bin.sakila"))


def test_flush_sends_the_partial_window(fixtures_dir: Path):
    """Events wait in the window until it is full; ``flush()`` (input idle) sends it and
    ``ready()`` then returns every submitted event without ``drain()``."""
    events = _sakila_events(fixtures_dir)
    first_rows = next(i for i, e in enumerate(events) if isinstance(e, ev.RowsEvent))
    submitted = events[: first_rows + 3]
    assert sum(isinstance(e, ev.RowsEvent) for e in submitted) < 32
    expected, _error, _conv = inline(submitted, ddl_classifier=keyword_ddl_classifier)
    with ParallelEntryConverter(workers=2, window_events=32, ddl_classifier=keyword_ddl_classifier) as pool:
        got: list[tuple[ev.Event, list[bytes]]] = []
        for e in submitted:
            pool.submit(e)
            got += pool.ready()
        time.sleep(0.2)
        got += pool.ready()
        assert [e for e, _ in got] == submitted[:first_rows]  # the rows events wait for more
        pool.flush()
        deadline = time.monotonic() + 30
        while len(got) < len(submitted) and time.monotonic() < deadline:
            got += pool.ready()
            time.sleep(0.005)
        assert [e for e, _ in got] == submitted
        assert [raw for _e, entries in got for raw in entries] == expected
        assert pool.drain() == []


# --------------------------------------------------------------------------- errors
def test_bad_row_data_is_the_decoders_error(fixtures_dir: Path):
    """Row data the worker's fused code cannot read is decoded in the parent: the decoder's
    error names the file and the event's position, after the entries of every event before."""
    events = _sakila_events(fixtures_dir)
    rows = [e for e in events if isinstance(e, ev.RowsEvent)]
    bad = rows[len(rows) // 2]
    bad.row_data = bad.row_data[:-3]
    expected, expected_error, _conv = inline(events, ddl_classifier=keyword_ddl_classifier)
    assert isinstance(expected_error, BinlogError)
    events = _sakila_events(fixtures_dir)
    bad = [e for e in events if isinstance(e, ev.RowsEvent)][len(rows) // 2]
    bad.row_data = bad.row_data[:-3]
    pool = ParallelEntryConverter(
        workers=2, window_events=7, encode_when_busy=False, ddl_classifier=keyword_ddl_classifier
    )
    with pool:
        got, error = pooled(pool, events)
        pids = pool.pids
    assert_same(expected, got)
    assert_same_error(expected_error, error)
    assert isinstance(error, BinlogError)
    assert error.source.endswith("mysql-bin.sakila") and error.offset == bad.pos
    assert not any(_alive(pid) for pid in pids)  # the error closed the pool


def test_failure_inside_a_transaction_payload(fixtures_dir: Path):
    """An inner rows event without its TABLE_MAP after one that went into the window: the
    payload's error, after the entries of the events before it (nothing of the payload)."""

    def events() -> list[ev.Event]:
        out = list(read_events(fixtures_dir / "mysql-binlog-connector-rust" / "mysql-bin.000057"))
        payload = [e for e in out if isinstance(e, ev.TransactionPayloadEvent)][1]
        inner = [e for e in payload.events if isinstance(e, ev.RowsEvent)]
        assert [e.kind for e in inner] == ["UPDATE", "INSERT"]
        inner[1].table_map = None
        return out

    pool = compare(events, {"workers": 1, "encode_when_busy": False})
    assert pool.windows_sent > 0


def test_killed_worker_names_the_event(fixtures_dir: Path):
    events = _sakila_events(fixtures_dir)
    rows_at = [i for i, e in enumerate(events) if isinstance(e, ev.RowsEvent)]
    pool = ParallelEntryConverter(
        workers=1, window_events=1, encode_when_busy=False, ddl_classifier=keyword_ddl_classifier
    )
    with pool:
        before = events[: rows_at[0] + 1]
        for e in before:
            pool.submit(e)
        assert [e for e, _ in pool.drain()] == before
        (pid,) = pool.pids
        os.kill(pid, signal.SIGKILL)
        _wait_dead(pid)
        victim = events[rows_at[1]]
        for e in events[rows_at[0] + 1 : rows_at[1] + 1]:
            pool.submit(e)
        done: list[tuple[ev.Event, list[bytes]]] = []
        with pytest.raises(ConversionWorkerError) as info:
            while batch := pool.drain():
                done += batch
        assert [e for e, _ in done] == events[rows_at[0] + 1 : rows_at[1]]
    err = info.value
    assert (err.source, err.offset) == (victim.file, victim.pos)
    assert f"pid {pid}" in str(err) and "exited with code -9" in str(err)
    assert str(err).startswith(f"{victim.file}, offset {victim.pos}: ")
    for call in (lambda: pool.submit(events[0]), pool.ready, pool.flush, pool.drain):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def test_worker_failure_outside_encoding_names_the_event(fixtures_dir: Path):
    """A layout the worker cannot load (here its description spoiled): ConversionWorkerError
    naming the event, with the worker's traceback as the cause."""
    events = _sakila_events(fixtures_dir)
    pool = ParallelEntryConverter(
        workers=1, window_events=5, encode_when_busy=False, ddl_classifier=keyword_ddl_classifier
    )
    with pool:
        victim = next(e for e in events if isinstance(e, ev.RowsEvent))
        layouts = pool.converter.layouts
        layouts[victim.row_decoder] = pool.converter._layout(victim, victim.row_decoder)._replace(
            blob=b"spoilt"
        )
        got, error = pooled(pool, events)
    assert isinstance(error, ConversionWorkerError)
    assert (error.source, error.offset) == (victim.file, victim.pos)
    assert isinstance(error.__cause__, WorkerTraceback) and "UnpicklingError" in str(error.__cause__)
    expected, _error, _conv = inline(events[: events.index(victim)], ddl_classifier=keyword_ddl_classifier)
    assert got == expected


# --------------------------------------------------------------------------- shutdown
def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (its parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.01)


def _started_pool(events: list[ev.Event], **settings: Any) -> ParallelEntryConverter:
    pool = ParallelEntryConverter(ddl_classifier=keyword_ddl_classifier, **settings)
    for e in events:
        pool.submit(e)
        pool.ready()
    assert len(pool.pids) == pool.workers
    return pool


def test_close_reaps_the_workers(fixtures_dir: Path):
    events = _sakila_events(fixtures_dir)[:400]
    pool = _started_pool(events, workers=2, window_events=2)
    pids = pool.pids
    assert all(_alive(pid) for pid in pids)
    pool.close()  # with windows still in flight
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)  # exited and reaped
    pool.close()  # idempotent
    assert pool.pids == []


def test_exception_in_with_block_stops_the_workers(fixtures_dir: Path):
    events = _sakila_events(fixtures_dir)[:400]
    pids: list[int] = []
    with pytest.raises(KeyError), ParallelEntryConverter(workers=2, window_events=2) as pool:
        for e in events:
            pool.submit(e)
        pids = pool.pids
        raise KeyError("caller failed")
    assert len(pids) == 2 and not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_dropped_pool_stops_its_workers(fixtures_dir: Path):
    pool = _started_pool(_sakila_events(fixtures_dir)[:400], workers=2, window_events=2)
    pids = pool.pids
    del pool
    gc.collect()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_workers_hold_no_parent_sockets(fixtures_dir: Path):
    """A forked worker keeps stdin/stdout/stderr and its two pipes, nothing else: a socket the
    parent closes is closed."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        pool = _started_pool(_sakila_events(fixtures_dir)[:400], workers=2, window_events=2)
        with pool:
            for pid in pool.pids:
                fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
                assert not [t for t in fds.values() if t.startswith("socket:")]
                assert sorted(t.split(":")[0] for fd, t in fds.items() if fd > 2) == ["pipe", "pipe"]


def test_layouts_let_table_maps_go(fixtures_dir: Path):
    """A long-lived pool keeps no TableMap alive: its layouts go with their row decoders."""
    with ParallelEntryConverter(workers=1, ddl_classifier=keyword_ddl_classifier) as pool:
        events = _sakila_events(fixtures_dir)
        for e in events:
            pool.submit(e)
        while pool.drain():
            pass
        assert len(pool.converter.layouts) > 10
        del events, e
        gc.collect()
        assert len(pool.converter.layouts) == 0


def test_settings_are_checked():
    assert default_workers() >= 1
    for bad in ({"workers": 0}, {"window_events": 0}, {"window_bytes": 0}, {"depth": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ParallelEntryConverter(**bad)
