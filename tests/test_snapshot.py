"""pycanal.snapshot against a private MariaDB: chunks cover every row once, for every key shape;
a chunk's rows are the table as of the binlog position it reports; every column type reads as
the binlog decoder gives it (READ change rows byte-identical to the binlog's images). The window
reader (connectorx): every column type as ``read_chunk`` gives it; keys changed between a read's
low and high positions are dropped, found in the binlog window with full and minimal row
metadata; with a writer running, every chunk is the table exactly as of its high position, less
the keys its window changed; a DDL on the table in the window reads the chunk again."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import workload
from pycanal.binlog import read_events
from pycanal.binlog.events import RowsEvent
from pycanal.parse.filter import TableFilter
from pycanal.protocol.position import binlog_file_order
from pycanal.snapshot import describe, list_tables, plan_chunks, read_chunk, read_schema
from pycanal.snapshot.chunks import Chunk
from pycanal.snapshot.reader import SnapshotError, Source, connect
from pycanal.snapshot.window import ChunkColumns, changed_keys, read_chunk_window
from pycanal.spark.event_rows import EventRows
from pycanal.spark.rows import to_record_batch
from pycanal.spark.snapshot_rows import SnapshotRows
from workload import ALL_TYPES

SCHEMA = "snap"


@pytest.fixture(scope="module")
def db(mariadb):
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
    mariadb.execute(f"CREATE DATABASE {SCHEMA} CHARACTER SET utf8mb4")
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


def _conn(db):
    p = db.repl_params()
    return connect(p["host"], p["port"], p["user"], p["password"])


def _snapshot(db, table: str, chunk_rows: int):
    with _conn(db) as conn:
        t = describe(conn, SCHEMA, table)
        chunks = plan_chunks(conn, t, chunk_rows)
        return t, chunks, [read_chunk(conn, t, c) for c in chunks]


def _binlog_state(files: list[Path], table: str) -> dict[str, str]:
    """pk JSON -> after image JSON after replaying the binlog's changes of ``table``."""
    state: dict[str, str] = {}
    rows = EventRows(accepts=TableFilter(f"{SCHEMA}\\.{table}"))
    for path in files:
        for r in rows.rows(read_events(path)):
            if r.op == "DELETE":
                state.pop(r.pk, None)
            elif r.op in ("INSERT", "UPDATE"):
                if r.op == "UPDATE":  # a key change: the before image's key goes (id is the key)
                    state.pop('{"id":' + str(json.loads(r.before)["id"]) + "}", None)
                state[r.pk] = r.after
    return state


def test_every_column_type_reads_as_the_binlog_gives_it(db):
    first = db.flush_binary_logs().name
    db.execute(ALL_TYPES.create_sql(SCHEMA))
    with db.root_connection() as conn:
        workload.run(conn, workload.generate(ALL_TYPES, SCHEMA, seed=15, ops=300))
    last = db.flush_binary_logs().name
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(first) : names.index(last)]]
    expected = _binlog_state(files, ALL_TYPES.name)
    assert len(expected) > 50

    t, chunks, reads = _snapshot(db, ALL_TYPES.name, chunk_rows=17)
    assert len(chunks) > 3
    rows = list(SnapshotRows().rows(reads))
    got = {r.pk: r.after for r in rows if r.op == "READ"}
    assert sorted(got) == sorted(expected)
    for pk, image in expected.items():
        assert got[pk] == image, pk
    assert {r.op for r in rows} == {"READ", "CHUNK"}
    # an integer key: each chunk's range in a CHUNK row after its rows, at its position, each
    # bound a key image as the chunk's rows have theirs
    ranges = [(r.position.file, r.position.offset, json.loads(r.after)) for r in rows if r.op == "CHUNK"]
    assert ranges == [
        (
            read.file,
            read.pos,
            {
                "lower": c.lower and f'{{"id":{int(c.lower[0])}}}',
                "upper": c.upper and f'{{"id":{int(c.upper[0])}}}',
            },
        )
        for read, c in zip(reads, chunks, strict=True)
    ]
    # what the Spark source yields: the same rows, built column by column
    batches = pa.Table.from_batches(list(SnapshotRows().batches(reads, 7)))
    assert batches.equals(pa.Table.from_batches([to_record_batch(list(SnapshotRows().rows(reads)))]))


KEY_SHAPES = {
    "k_int": ("id INT PRIMARY KEY, v INT", lambda i: f"({i * 3 - 500}, {i})"),
    "k_ubig": (
        "id BIGINT UNSIGNED PRIMARY KEY, v INT",
        lambda i: f"({18446744073709551615 - i * 7919 if i % 2 else i}, {i})",
    ),
    "k_sparse": ("id BIGINT PRIMARY KEY, v INT", lambda i: f"({i**3 * 1000}, {i})"),
    "k_comp": ("a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)", lambda i: f"({i % 7}, 'b{i:04d}', {i})"),
    "k_str": (
        "s VARCHAR(20) COLLATE utf8mb4_unicode_ci PRIMARY KEY, v INT",
        lambda i: f"('{['a', 'B', 'é', 'Z', 'ß', 'ä'][i % 6]}{i}', {i})",
    ),
    "k_latin": ("s VARCHAR(20) CHARACTER SET latin1 PRIMARY KEY, v INT", lambda i: f"('x{i:05d}é', {i})"),
    "k_none": ("v INT, w INT", lambda i: f"({i}, {i % 3})"),
    "k_dec": (
        "d DECIMAL(12,3) PRIMARY KEY, v INT",
        lambda i: f"({(i * 7919) % 100003 - 50000}.{i % 1000:03d}, {i})",
    ),
    "k_dt": (
        "t DATETIME(6) PRIMARY KEY, v INT",
        lambda i: f"('2026-01-01' + INTERVAL {i * 7919 % 100003} SECOND + INTERVAL {i} MICROSECOND, {i})",
    ),
    "k_bin": (
        "b VARBINARY(16) PRIMARY KEY, v INT",
        lambda i: f"(UNHEX('{(i * 2654435761) % 2**32:x}'), {i})",
    ),
    "k_date_int": (
        "d DATE, n INT, v INT, PRIMARY KEY (d, n)",
        lambda i: f"('2026-01-01' + INTERVAL {i % 37} DAY, {i}, {i})",
    ),
}
RANGED_SHAPES = (
    "k_int",
    "k_ubig",
    "k_sparse",
    "k_dec",
    "k_dt",
    "k_bin",
    "k_date_int",
)  # CHUNK rows for every chunk


@pytest.mark.parametrize("name", sorted(KEY_SHAPES))
def test_chunks_cover_every_row_once(db, name):
    columns, row = KEY_SHAPES[name]
    db.execute(f"CREATE TABLE {SCHEMA}.{name} ({columns})")
    db.execute(f"INSERT INTO {SCHEMA}.{name} VALUES " + ", ".join(row(i) for i in range(1, 1001)))
    t, chunks, reads = _snapshot(db, name, chunk_rows=64)
    if name == "k_none":
        assert t.key == () and len(chunks) == 1
    else:
        assert 8 <= len(chunks) <= 40, len(chunks)
        assert chunks[0].lower is None and chunks[-1].upper is None
    seen = [r for read in reads for r in read.rows]
    assert len(seen) == 1000
    # CHUNK rows where the lake can test the range exactly (integer, DECIMAL, temporal, binary
    # keys), or the whole table
    ranged = bool(t.key) and (len(chunks) == 1 or name in RANGED_SHAPES)
    marks = [r for r in SnapshotRows().rows(reads) if r.op == "CHUNK"]
    assert len(marks) == (len(chunks) if ranged else 0)
    if t.key:
        assert len({tuple(r[i] for i in t.key) for r in seen}) == 1000
    decimals = [tuple(str(v) if isinstance(v, Decimal) else v for v in r) for r in seen]  # the source's text
    assert sorted(decimals) == sorted(tuple(r) for r in _all_rows(db, name))


def _all_rows(db, table):
    p = db.repl_params()
    with connect(p["host"], p["port"], p["user"], p["password"]) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {SCHEMA}.{table}")
        return [
            tuple(int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v for v in r)
            for r in cur.fetchall()
        ]


@contextmanager
def _writing(db, table: str, keys: int, first_new: int) -> Iterator[None]:
    """A writer in ``table`` until the block ends: updates of keys below ``keys``, inserts from
    ``first_new`` on, deletes of its fifth-latest insert."""
    stop = threading.Event()

    def write() -> None:
        n = 0
        with db.root_connection() as conn, conn.cursor() as cur:
            while not stop.is_set():
                n += 1
                cur.execute(f"UPDATE {SCHEMA}.{table} SET v = v + 1 WHERE id = %s", ((n * 7919) % keys,))
                cur.execute(f"INSERT INTO {SCHEMA}.{table} VALUES (%s, %s)", (first_new + n, n))
                cur.execute(f"DELETE FROM {SCHEMA}.{table} WHERE id = %s", (first_new + n - 5,))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join()


def test_a_chunk_is_the_table_at_its_position_while_a_writer_runs(db):
    """Replaying the binlog after a chunk's position over its rows gives the table's final rows:
    the position is exactly the snapshot's (no change before it missing, none after it seen)."""
    db.execute(f"CREATE TABLE {SCHEMA}.hot (id INT PRIMARY KEY, v INT)")
    db.execute(f"INSERT INTO {SCHEMA}.hot VALUES " + ", ".join(f"({i}, 0)" for i in range(200)))
    start = db.flush_binary_logs().name
    with _writing(db, "hot", 200, 1000):
        reads = []
        for _ in range(5):
            reads.append(_snapshot(db, "hot", chunk_rows=10_000)[2][0])
    end = db.flush_binary_logs().name
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start) : names.index(end)]]
    final = {int(r[0]): int(r[1]) for r in _all_rows(db, "hot")}
    assert len({(r.file, r.pos) for r in reads}) > 1  # the writer moved the binlog between reads
    for read in reads:
        state = {int(r[0]): int(r[1]) for r in read.rows}
        for path in files:
            for e in read_events(path):
                if not isinstance(e, RowsEvent) or e.table != "hot":
                    continue
                if (path.name, e.pos) < (read.file, read.pos):
                    continue
                for row in e.rows:
                    if e.kind == "DELETE":
                        del state[row[0]]
                    else:
                        after = row[1] if e.kind == "UPDATE" else row
                        state[after[0]] = after[1]
        assert state == final


def test_list_tables_takes_the_filter_and_leaves_system_schemas_out(db):
    db.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.listed (id INT PRIMARY KEY)")
    with _conn(db) as conn:
        every = list_tables(conn)
        assert (SCHEMA, "listed") in every
        assert not any(s in ("mysql", "information_schema", "performance_schema", "sys") for s, _ in every)
        assert list_tables(conn, TableFilter(f"{SCHEMA}\\.listed")) == [(SCHEMA, "listed")]


def test_binlog_files_order_by_their_number():
    from pycanal.protocol.position import binlog_file_order

    names = ["mysql-bin.1000000", "mysql-bin.999999", "mysql-bin.000010", "odd"]
    assert sorted(names, key=binlog_file_order) == [
        "mysql-bin.000010",
        "mysql-bin.999999",
        "mysql-bin.1000000",
        "odd",
    ]


def test_a_column_type_the_snapshot_cannot_read_is_an_error_naming_it():
    from pycanal.snapshot import SnapshotError, SourceColumn, SourceTable
    from pycanal.snapshot.chunks import Chunk
    from pycanal.snapshot.reader import _select

    t = SourceTable(
        "db", "t", (SourceColumn("id", "int", "int(11)"), SourceColumn("v", "vector", "vector(3)")), (0,), 0
    )
    with pytest.raises(SnapshotError, match=r"db\.t: column v has type vector\(3\)"):
        _select(t, Chunk("db", "t", None, None))


def test_an_executor_keeps_its_source_connection_and_replaces_a_broken_one(db):
    """``format('canal')``'s chunk reads share one connection per Python worker: kept after a read,
    replaced when the source killed it, closed (not kept) when a read failed."""
    from pycanal.spark.canal_options import snapshot_options
    from pycanal.spark.snapshot_read import _source

    p = db.repl_params()
    opts = snapshot_options(
        {"snapshot": "initial", "source": f"{p['host']}:{p['port']}", "sourceuser": p["user"],
         "sourcepassword": p["password"], "filter": f"{SCHEMA}\\..*"}
    )  # fmt: skip
    with _source(opts) as first:
        first.query("SELECT 1")
    with _source(opts) as again:
        assert again is first
    db.execute(f"KILL CONNECTION {first.thread_id()}")
    with _source(opts) as fresh:
        assert fresh is not first
        fresh.query("SELECT 1")
    with pytest.raises(RuntimeError), _source(opts) as failing:
        raise RuntimeError("a chunk read failed")
    assert not failing.open
    with _source(opts) as after:
        assert after is not failing and after.open


def _source(db) -> Source:
    p = db.repl_params()
    return Source(p["host"], p["port"], p["user"], p["password"])


def test_the_window_reader_reads_every_column_type_as_read_chunk_gives_it(db):
    """In a session time zone other than UTC too: TIMESTAMPs come as the stored instant."""
    db.execute("CREATE DATABASE snapw CHARACTER SET utf8mb4")  # the all-types table of its own
    db.execute(ALL_TYPES.create_sql("snapw"))
    with db.root_connection() as conn:
        workload.run(conn, workload.generate(ALL_TYPES, "snapw", seed=15, ops=300))
    db.execute("SET GLOBAL time_zone = '+05:00'")  # connectorx's sessions start in it
    try:
        with _conn(db) as conn:
            t = describe(conn, "snapw", ALL_TYPES.name)
            chunks = plan_chunks(conn, t, 17)
            assert len(chunks) > 3
            want = [read_chunk(conn, t, c) for c in chunks]
            got = [read_chunk_window(conn, _source(db), t, c, 5400) for c in chunks]
    finally:
        db.execute("SET GLOBAL time_zone = SYSTEM")
        db.execute("DROP DATABASE snapw")
    expected = {r.pk: r.after for r in SnapshotRows().rows(want) if r.op == "READ"}
    assert len(expected) > 50
    assert {r.pk: r.after for r in SnapshotRows().rows(got) if r.op == "READ"} == expected
    assert {r.op for r in SnapshotRows().rows(got)} == {"READ", "CHUNK"}
    batches = pa.Table.from_batches(list(SnapshotRows().batches(got, 7)))
    assert batches.equals(pa.Table.from_batches([to_record_batch(list(SnapshotRows().rows(got)))]))


@pytest.mark.parametrize("server", ["mariadb", "mariadb_minimal"])
def test_keys_changed_around_the_read_are_dropped(server, request, monkeypatch):
    """Writes between the low position and the read (the read sees them) and between the read
    and the high position (it does not) drop their keys, old and new, whatever the binlog's row
    metadata; the rows left are the table's at the high position."""
    from pycanal.snapshot import window

    db = request.getfixturevalue(server)
    db.execute("CREATE DATABASE IF NOT EXISTS snapw2")
    db.execute("DROP TABLE IF EXISTS snapw2.k")
    db.execute("CREATE TABLE snapw2.k (id BIGINT UNSIGNED PRIMARY KEY, s VARCHAR(10), v INT)")
    db.execute("INSERT INTO snapw2.k VALUES " + ", ".join(f"({i}, 's{i}', 0)" for i in range(1, 101)))
    big = 18446744073709551615
    position, read = window.snapshot_position, window._read_columns

    def after_low(*args):
        out = position(*args)
        db.execute("UPDATE snapw2.k SET v = 1 WHERE id = 3")  # seen by the read
        db.execute("UPDATE snapw2.other SET v = 1")  # another table: no key of it dropped
        return out

    def after_read(*args):
        out = read(*args)
        db.execute("UPDATE snapw2.k SET v = 2 WHERE id = 5")
        db.execute("DELETE FROM snapw2.k WHERE id = 7")
        db.execute("UPDATE snapw2.k SET id = 200 WHERE id = 9")  # a key change: 9 and 200
        db.execute(f"INSERT INTO snapw2.k VALUES ({big}, 'big', 0)")  # past the chunk
        db.execute("INSERT INTO snapw2.k VALUES (50, 'x', 0) ON DUPLICATE KEY UPDATE v = 3")
        return out

    db.execute("CREATE TABLE IF NOT EXISTS snapw2.other (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT IGNORE INTO snapw2.other VALUES (3, 0), (200, 0)")
    monkeypatch.setattr(window, "snapshot_position", after_low)
    monkeypatch.setattr(window, "_read_columns", after_read)
    with _conn(db) as conn:
        t = describe(conn, "snapw2", "k")
        got = read_chunk_window(conn, _source(db), t, Chunk("snapw2", "k", None, (150,)), 5400)
    ids = got.columns[0].to_pylist()
    assert sorted(ids) == sorted(set(range(1, 101)) - {3, 5, 7, 9, 50})
    assert got.dropped == 5
    assert dict(zip(ids, got.columns[2].to_pylist(), strict=True)) == {i: 0 for i in ids}
    assert got.low < (got.file, got.pos)
    keys = changed_keys(_source(db), 5401, t, got.low, (got.file, got.pos))
    assert keys == {(3,), (5,), (7,), (9,), (200,), (big,), (50,)}


def _state_at(db, files, table: str, upto: tuple[str, int]) -> tuple[dict[int, int], list[tuple[tuple, set]]]:
    """The table's rows (id -> v) replayed from ``files`` up to the position ``upto``, and the
    (position, ids) of every rows event."""
    state: dict[int, int] = {}
    events = []
    for path in files:
        for e in read_events(path):
            if not isinstance(e, RowsEvent) or e.table != table:
                continue
            at = (binlog_file_order(path.name), e.pos)
            ids = set()
            for row in e.rows:
                if e.kind == "DELETE":
                    ids.add(row[0])
                    if at < upto:
                        del state[row[0]]
                else:
                    before, after = row if e.kind == "UPDATE" else (row, row)
                    ids |= {before[0], after[0]}
                    if at < upto:
                        state.pop(before[0], None)
                        state[after[0]] = after[1]
            events.append((at, ids))
    return state, events


def test_each_window_chunk_is_the_table_at_its_position_while_a_writer_runs(db):
    """A writer updates, inserts and deletes in the chunks being read; each chunk equals the
    binlog replayed up to its high position in its key range, less exactly the keys changed
    between its low and high positions."""
    db.execute(f"CREATE TABLE {SCHEMA}.hotw (id INT PRIMARY KEY, v INT)")
    start = db.flush_binary_logs().name
    db.execute(f"INSERT INTO {SCHEMA}.hotw VALUES " + ", ".join(f"({i}, 0)" for i in range(20_000)))
    with _writing(db, "hotw", 20_000, 20_000), _conn(db) as conn:
        t = describe(conn, SCHEMA, "hotw")
        reads: list[ChunkColumns] = []
        # Eight windows at least, more until the writer has committed inside one: a loaded machine
        # can leave the writer's thread no turn during a window.
        for lower, upper in ((None, (10_000,)), ((10_000,), None)) * 20:
            reads.append(read_chunk_window(conn, _source(db), t, Chunk(SCHEMA, "hotw", lower, upper), 5400))
            if len(reads) >= 8 and any(r.dropped for r in reads):
                break
    end = db.flush_binary_logs().name
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start) : names.index(end)]]
    assert sum(r.dropped for r in reads) > 0  # the writer changed rows inside windows
    for r in reads:
        high = (binlog_file_order(r.file), r.pos)
        low = (binlog_file_order(r.low[0]), r.low[1])
        state, events = _state_at(db, files, "hotw", high)
        changed = set().union(*[ids for at, ids in events if low <= at < high])
        lo = r.chunk.lower[0] if r.chunk.lower else -(2**31)
        hi = r.chunk.upper[0] if r.chunk.upper else 2**31
        want = {k: v for k, v in state.items() if lo <= k < hi and k not in changed}
        got = dict(zip(r.columns[0].to_pylist(), r.columns[1].to_pylist(), strict=True))
        assert got == want, (r.low, r.file, r.pos)


def test_a_table_without_a_key_is_refused():
    from pycanal.snapshot import SourceColumn, SourceTable

    t = SourceTable("db", "t", (SourceColumn("v", "int", "int(11)"),), (), 0)
    with pytest.raises(SnapshotError, match="without a primary key"):
        read_chunk_window(None, Source("h", 1, "u", "p"), t, Chunk("db", "t", None, None), 5400)


def test_the_source_url_quotes_the_account():
    assert Source("::1", 3306, "a@b", "p:/w%").url("d b") == "mysql://a%40b:p%3A%2Fw%25@[::1]:3306/d%20b"


def test_the_reader_options():
    from pycanal.spark.canal_options import snapshot_options

    def opts(**extra):
        return snapshot_options({"snapshot": "initial", "source": "h:1", "filter": "d\\..*", **extra})

    assert (opts().reader, opts().server_ids) == ("connectorx", range(5400, 6400))
    assert opts(snapshotserverids="7", snapshotparallelism="1").server_ids == range(7, 8)
    assert opts(snapshotreader="PyMySQL", snapshotserverids="7").reader == "pymysql"
    with pytest.raises(ValueError, match="'10-12': 3 ids, fewer than option snapshotParallelism"):
        opts(snapshotserverids="10-12", snapshotparallelism="4")
    with pytest.raises(ValueError, match="option snapshotReader 'jdbc': must be one of"):
        opts(snapshotreader="jdbc")
    with pytest.raises(ValueError, match="option snapshotServerIds 'a-b': expected LOW-HIGH"):
        opts(snapshotserverids="a-b")
    with pytest.raises(ValueError, match="option snapshotChunkRows: needs option source"):
        snapshot_options({"snapshotchunkrows": "10"})
    assert snapshot_options({"snapshot": "never"}) is None


def test_a_ddl_on_the_table_in_the_window_reads_the_chunk_again(db, monkeypatch):
    """An ALTER of the table between the read and its high position (the select list and the
    window's row images would not agree) makes the executor read the chunk again; a DDL on
    another table does not."""
    from pycanal.snapshot import window

    db.execute(f"CREATE TABLE {SCHEMA}.altered (id INT PRIMARY KEY, v INT)")
    db.execute(f"CREATE TABLE {SCHEMA}.bystander (id INT PRIMARY KEY)")
    db.execute(f"INSERT INTO {SCHEMA}.altered VALUES (1, 1), (2, 2)")
    read, reads = window._read_columns, []

    def read_then(ddl: list[str]):
        def wrapped(*args):
            out = read(*args)
            reads.append(1)
            if len(reads) <= len(ddl):
                db.execute(ddl[len(reads) - 1])
            return out

        return wrapped

    with _conn(db) as conn:
        t = describe(conn, SCHEMA, "altered")
        chunk = Chunk(SCHEMA, "altered", None, None)
        monkeypatch.setattr(
            window, "_read_columns", read_then([f"ALTER TABLE {SCHEMA}.bystander ADD COLUMN w INT"])
        )
        assert read_chunk_window(conn, _source(db), t, chunk, 5400).num_rows == 2
        assert len(reads) == 1
        reads.clear()
        monkeypatch.setattr(
            window, "_read_columns", read_then([f"ALTER TABLE {SCHEMA}.altered ADD COLUMN w INT"])
        )
        got = read_chunk_window(conn, _source(db), t, chunk, 5400)
        assert len(reads) == 2 and got.columns[0].to_pylist() == [1, 2]
        reads.clear()
        ddl = [f"ALTER TABLE {SCHEMA}.altered ADD COLUMN x{i} INT" for i in range(3)]
        monkeypatch.setattr(window, "_read_columns", read_then(ddl))
        with pytest.raises(SnapshotError, match="a DDL on the table lay in the window of 3 reads in a row"):
            read_chunk_window(conn, _source(db), t, chunk, 5400)


def test_a_window_read_without_replication_slave_names_the_chunk_and_the_way_out(db, monkeypatch):
    from pycanal.snapshot import window

    db.execute("CREATE USER IF NOT EXISTS 'noslave'@'%' IDENTIFIED BY 'pw'")
    db.execute("GRANT SELECT, REPLICATION CLIENT ON *.* TO 'noslave'@'%'")
    db.execute(f"CREATE TABLE {SCHEMA}.noslave (id INT PRIMARY KEY)")
    db.execute(f"INSERT INTO {SCHEMA}.noslave VALUES (1), (2)")
    read = window._read_columns

    def read_then_write(*args):
        out = read(*args)
        db.execute(f"INSERT INTO {SCHEMA}.noslave VALUES (3)")  # a window to read
        return out

    monkeypatch.setattr(window, "_read_columns", read_then_write)
    source = Source(db.host, db.port, "noslave", "pw")
    with connect(db.host, db.port, "noslave", "pw") as conn:
        t = describe(conn, SCHEMA, "noslave")
        with pytest.raises(SnapshotError, match=r"as replica 5400 failed: .*snapshotReader=pymysql") as info:
            read_chunk_window(conn, source, t, Chunk(SCHEMA, "noslave", None, None), 5400)
    assert str(info.value).startswith(f"{SCHEMA}.noslave chunk [None, None): reading the binlog window ")
    assert "REPLICATION SLAVE" in str(info.value)


@pytest.mark.parametrize("name", ["k_dec", "k_dt", "k_bin", "k_date_int"])
def test_a_re_snapshot_deletes_by_chunk_range_for_ordered_key_types(db, tmp_path, name):
    """A re-snapshot of a table whose source lost rows without a binlog (drift), with a DECIMAL,
    DATETIME, VARBINARY or (DATE, INT) key: applied chunk by chunk, each chunk's CHUNK row
    deletes the lake's rows of its range the source lacks and no other (the table is not emptied
    at its declaration; a row at a bound stays in its own chunk), and the lake ends equal to it."""
    from deltalake import DeltaTable

    from pycanal.snapshot.chunks import chunk_where
    from pycanal.spark.apply import ChangeApplier
    from pycanal.spark.current import table_path
    from pycanal.spark.delta.tablestate import read_rows

    columns, row = KEY_SHAPES[name]
    table = f"re_{name}"
    db.execute(f"CREATE TABLE {SCHEMA}.{table} ({columns})")
    db.execute(f"INSERT INTO {SCHEMA}.{table} VALUES " + ", ".join(row(i) for i in range(1, 301)))
    db.execute(f"CREATE TABLE {SCHEMA}.{table}_all AS SELECT * FROM {SCHEMA}.{table}")
    applier = ChangeApplier(tmp_path)

    def snapshot_batches():
        with _conn(db) as conn:
            t = describe(conn, SCHEMA, table)
            chunks = plan_chunks(conn, t, 40)
            schema = read_schema(conn, [(SCHEMA, table)])
            return (
                t,
                chunks,
                [[schema, read_chunk(conn, t, chunks[0])]] + [[read_chunk(conn, t, c)] for c in chunks[1:]],
            )

    def lake() -> set[int]:
        return set(read_rows(DeltaTable(str(table_path(tmp_path, SCHEMA, table))), ["v"])["v"].to_pylist())

    def values(source: str, t, chunk) -> set[int]:
        where, args = chunk_where(t, chunk)
        with db.root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT v FROM {SCHEMA}.{source} WHERE {where}", args)
            return {int(v) for (v,) in cur.fetchall()}

    batch = 0
    for reads in snapshot_batches()[2]:
        applier(pa.Table.from_batches([to_record_batch(list(SnapshotRows().rows(reads)))]), batch)
        batch += 1
    assert lake() == set(range(1, 301))
    with db.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SET sql_log_bin = 0")
        cur.execute(f"DELETE FROM {SCHEMA}.{table} WHERE v % 10 = 3 OR v < 4")  # drift
    t, chunks, batches = snapshot_batches()
    assert len(chunks) >= 6
    had = [values(f"{table}_all", t, c) for c in chunks]
    has = [values(table, t, c) for c in chunks]
    for k, reads in enumerate(batches):
        applier(pa.Table.from_batches([to_record_batch(list(SnapshotRows().rows(reads)))]), batch)
        batch += 1
        assert lake() == set().union(*has[: k + 1], *had[k + 1 :]), f"after chunk {k}: {chunks[k]}"
    assert lake() == set(range(1, 301)) - {v for v in range(1, 301) if v % 10 == 3 or v < 4}
