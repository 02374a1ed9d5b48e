"""pycanal.snapshot.window against a private MariaDB: connectorx chunks read every column type as
``read_chunk`` does; keys changed between a read's low and high positions are dropped, found in
the binlog window with full and minimal row metadata; with a writer running, every chunk is the
table exactly as of its high position, less the keys its window changed."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import workload
from pycanal.binlog import read_events
from pycanal.binlog.events import RowsEvent
from pycanal.parse.position import binlog_file_order
from pycanal.snapshot import describe, plan_chunks, read_chunk
from pycanal.snapshot.chunks import Chunk
from pycanal.snapshot.reader import SnapshotError, connect
from pycanal.snapshot.window import ChunkColumns, Source, changed_keys, read_chunk_window
from pycanal.spark.rows import SnapshotRows, to_record_batch
from workload import ALL_TYPES

pytestmark = pytest.mark.mariadb

SCHEMA = "snapw"


@pytest.fixture(scope="module")
def db(mariadb):
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
    mariadb.execute(f"CREATE DATABASE {SCHEMA} CHARACTER SET utf8mb4")
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


def _source(db) -> Source:
    p = db.repl_params()
    return Source(p["host"], p["port"], p["user"], p["password"])


def _conn(db):
    s = _source(db)
    return connect(s.host, s.port, s.user, s.password)


def test_every_column_type_reads_as_read_chunk_gives_it(db):
    """In a session time zone other than UTC too: TIMESTAMPs come as the stored instant."""
    db.execute(ALL_TYPES.create_sql(SCHEMA))
    with db.root_connection() as conn:
        workload.run(conn, workload.generate(ALL_TYPES, SCHEMA, seed=15, ops=300))
    db.execute("SET GLOBAL time_zone = '+05:00'")  # connectorx's sessions start in it
    try:
        with _conn(db) as conn:
            t = describe(conn, SCHEMA, ALL_TYPES.name)
            chunks = plan_chunks(conn, t, 17)
            assert len(chunks) > 3
            want = [read_chunk(conn, t, c) for c in chunks]
            got = [read_chunk_window(conn, _source(db), t, c, 5400) for c in chunks]
    finally:
        db.execute("SET GLOBAL time_zone = SYSTEM")
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


def test_each_chunk_is_the_table_at_its_position_while_a_writer_runs(db):
    """A writer updates, inserts and deletes in the chunks being read; each chunk equals the
    binlog replayed up to its high position in its key range, less exactly the keys changed
    between its low and high positions."""
    db.execute(f"CREATE TABLE {SCHEMA}.hot (id INT PRIMARY KEY, v INT)")
    start = db.flush_binary_logs().name
    db.execute(f"INSERT INTO {SCHEMA}.hot VALUES " + ", ".join(f"({i}, 0)" for i in range(20_000)))
    stop = threading.Event()

    def write() -> None:
        n = 0
        with db.root_connection() as conn, conn.cursor() as cur:
            while not stop.is_set():
                n += 1
                cur.execute(f"UPDATE {SCHEMA}.hot SET v = v + 1 WHERE id = %s", ((n * 7919) % 20_000,))
                cur.execute(f"INSERT INTO {SCHEMA}.hot VALUES (%s, %s)", (20_000 + n, n))
                cur.execute(f"DELETE FROM {SCHEMA}.hot WHERE id = %s", (20_000 + n - 5,))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with _conn(db) as conn:
            t = describe(conn, SCHEMA, "hot")
            reads: list[ChunkColumns] = []
            for lower, upper in ((None, (10_000,)), ((10_000,), None)) * 4:
                reads.append(
                    read_chunk_window(conn, _source(db), t, Chunk(SCHEMA, "hot", lower, upper), 5400)
                )
    finally:
        stop.set()
        writer.join()
    end = db.flush_binary_logs().name
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start) : names.index(end)]]
    assert sum(r.dropped for r in reads) > 0  # the writer changed rows inside windows
    for r in reads:
        high = (binlog_file_order(r.file), r.pos)
        low = (binlog_file_order(r.low[0]), r.low[1])
        state, events = _state_at(db, files, "hot", high)
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
    from pycanal.spark.snapshot import snapshot_options

    def opts(**extra):
        base = {"snapshot": "initial", "source": "h:1", "filter": "d\\..*"}
        return snapshot_options({**base, **extra}, lambda o, name, default: int(o.get(name.lower(), default)))

    assert (opts().reader, opts().server_ids) == ("connectorx", range(5400, 6400))
    assert opts(snapshotserverids="7", snapshotparallelism="1").server_ids == range(7, 8)
    assert opts(snapshotreader="PyMySQL", snapshotserverids="7").reader == "pymysql"
    with pytest.raises(ValueError, match="fewer ids than snapshotParallelism"):
        opts(snapshotserverids="10-12", snapshotparallelism="4")
    with pytest.raises(ValueError, match="snapshotReader must be"):
        opts(snapshotreader="jdbc")
    with pytest.raises(ValueError, match="snapshotServerIds is an id or LOW-HIGH"):
        opts(snapshotserverids="a-b")


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
