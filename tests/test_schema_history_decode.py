"""The schema history driving ``EventDecoder`` on real MariaDB binlogs: column names with MINIMAL
row metadata across ALTER/RENAME, restarts from older positions, and the TABLE_MAP mismatch paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from pycanal.binlog import EventDecoder
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.events import QueryEvent, RowsEvent
from pycanal.binlog.reader import iter_frames
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import SchemaHistory


def decode(server, start: tuple[str, int], history: SchemaHistory, stop: tuple[str, int] | None = None):
    """Decode the binlog from ``start`` like the EventParser will: DDL into the history, rows out.

    Returns [(table, kind, names, rows)] for the rows events."""
    out = []
    decoder = EventDecoder(table_meta=history.table_meta)
    files = [p for p in server.binlog_files() if p.name >= start[0]]
    for path in files:
        decoder.source, decoder.file = str(path), path.name
        data = Path(path).read_bytes()
        first = start[1] if path.name == start[0] else 4
        for pos, raw in iter_frames(data, str(path)):
            if stop is not None and (path.name, pos) >= stop:
                return out
            if pos < first:
                if raw[4] == E.FORMAT_DESCRIPTION:
                    decoder.decode(raw, pos)
                continue
            history.at((path.name, pos))
            event = decoder.decode(raw, pos)
            if isinstance(event, QueryEvent) and event.query not in ("BEGIN", "COMMIT"):
                history.apply_event(event)
            elif isinstance(event, RowsEvent) and event.schema == "shdec":
                tm = event.table_map
                out.append((event.table, event.kind, list(tm.names or []), event.rows))
    return out


@pytest.fixture
def minimal(mariadb_minimal):
    mariadb_minimal.execute("DROP DATABASE IF EXISTS shdec")
    mariadb_minimal.execute("CREATE DATABASE shdec")
    yield mariadb_minimal
    mariadb_minimal.execute("DROP DATABASE IF EXISTS shdec")


@pytest.fixture
def full(mariadb):
    mariadb.execute("DROP DATABASE IF EXISTS shdec")
    mariadb.execute("CREATE DATABASE shdec")
    yield mariadb
    mariadb.execute("DROP DATABASE IF EXISTS shdec")


FILTER = TableFilter(r"shdec\..*")


def test_minimal_metadata_names_across_ddl_and_restart(minimal, tmp_path):
    db = minimal
    db.execute(
        "CREATE TABLE shdec.t (id int PRIMARY KEY, a varchar(10) CHARACTER SET latin1, n int unsigned, "
        "y year, s int, e enum('x','y'))"
    )
    start = db.current_binlog()
    store = tmp_path / "history.db"
    history = SchemaHistory(store, connect=db.root_connection, filter=FILTER)
    history.start(start)
    db.execute("INSERT INTO shdec.t VALUES (1, 'é', 4000000000, 2001, -5, 'y')")
    before_alter = db.current_binlog()
    db.execute("ALTER TABLE shdec.t RENAME COLUMN a TO a2, ADD COLUMN b int AFTER id")
    db.execute("INSERT INTO shdec.t VALUES (2, 7, 'ü', 1, 2002, -6, 'x')")
    db.execute("ALTER TABLE shdec.t DROP COLUMN n, MODIFY s bigint")
    after_drop = db.current_binlog()
    db.execute("INSERT INTO shdec.t VALUES (3, 8, 'a', 2003, -7, NULL)")
    db.execute("RENAME TABLE shdec.t TO shdec.t2")
    db.execute("INSERT INTO shdec.t2 VALUES (4, 9, 'b', 2004, -8, 'y')")
    db.execute("TRUNCATE TABLE shdec.t2")
    db.execute("INSERT INTO shdec.t2 VALUES (5, 10, 'c', 2005, -9, 'x')")

    expected = [
        ("t", "INSERT", ["id", "a", "n", "y", "s", "e"], [(1, "é", 4000000000, 2001, -5, "y")]),
        ("t", "INSERT", ["id", "b", "a2", "n", "y", "s", "e"], [(2, 7, "ü", 1, 2002, -6, "x")]),
        ("t", "INSERT", ["id", "b", "a2", "y", "s", "e"], [(3, 8, "a", 2003, -7, None)]),
        ("t2", "INSERT", ["id", "b", "a2", "y", "s", "e"], [(4, 9, "b", 2004, -8, "y")]),
        ("t2", "INSERT", ["id", "b", "a2", "y", "s", "e"], [(5, 10, "c", 2005, -9, "x")]),
    ]
    got = decode(db, start, history)
    assert _plain(got) == expected
    history.close()

    # Restart from a position before the ALTER: the schema in force there, the DDL replayed once.
    again = SchemaHistory(store, connect=None, filter=FILTER)
    again.start(before_alter)
    assert [c.name for c in again.find("shdec", "t").columns] == ["id", "a", "n", "y", "s", "e"]
    assert _plain(decode(db, before_alter, again)) == expected[1:]
    assert len(again.store.ddls(None, None)) == 4  # ALTER, ALTER, RENAME, TRUNCATE: once each
    again.close()

    # And from between the two ALTERs.
    third = SchemaHistory(store, connect=None, filter=FILTER)
    third.start(after_drop)
    assert _plain(decode(db, after_drop, third)) == expected[2:]
    third.close()


def _plain(got):
    return [(t, k, n, [tuple(r) for r in rows]) for t, k, n, rows in got]


def test_table_meta_same_object_per_version(minimal):
    db = minimal
    db.execute("CREATE TABLE shdec.v (id int PRIMARY KEY, a int)")
    start = db.current_binlog()
    history = SchemaHistory(None, connect=db.root_connection, filter=FILTER)
    history.start(start)
    db.execute("INSERT INTO shdec.v VALUES (1, 1)")
    db.execute("INSERT INTO shdec.v VALUES (2, 2)")
    db.execute("ALTER TABLE shdec.v ADD COLUMN c int")
    db.execute("INSERT INTO shdec.v VALUES (3, 3, 3)")
    maps = []
    decoder = EventDecoder(table_meta=history.table_meta)
    path = db.binlog_files()[-1]
    decoder.file = path.name
    for pos, raw in iter_frames(path.read_bytes(), str(path)):
        if pos < start[1] and raw[4] != E.FORMAT_DESCRIPTION:
            continue
        event = decoder.decode(raw, pos)
        if isinstance(event, QueryEvent) and event.query not in ("BEGIN", "COMMIT") and pos >= start[1]:
            history.apply(event.query, event.schema or None, (path.name, pos))
        if isinstance(event, RowsEvent) and event.schema == "shdec":
            maps.append(event.table_map)
            event.rows  # noqa: B018 - compile and cache the row decoder
    assert len(maps) == 3
    assert maps[0] is maps[1]  # same schema version: same object, decoders reused
    assert maps[0].decoders
    assert maps[2] is not maps[0] and maps[2].names == ["id", "a", "c"]
    assert maps[0].primary_key == [(0, 0)]
    history.close()


def test_wrong_model_is_reread_and_fixed(minimal):
    db = minimal
    db.execute("CREATE TABLE shdec.w (id int PRIMARY KEY, a varchar(5), b int)")
    start = db.current_binlog()
    alarms = []
    history = SchemaHistory(None, connect=db.root_connection, filter=FILTER, alarm=alarms.append)
    history.start(start)
    # Break the model: one column too few (as after a DDL the history missed).
    table = history.find("shdec", "w")
    del table.columns[2]
    db.execute("INSERT INTO shdec.w VALUES (1, 'x', 2)")
    got = decode(db, start, history)
    assert _plain(got) == [("w", "INSERT", ["id", "a", "b"], [(1, "x", 2)])]
    assert len(alarms) == 1
    assert "shdec.w" in alarms[0] and "the binlog has 3 columns, the schema history 2" in alarms[0]
    assert [c.name for c in history.find("shdec", "w").columns] == ["id", "a", "b"]
    history.close()


def test_wrong_type_in_model_is_reread(minimal):
    db = minimal
    db.execute("CREATE TABLE shdec.w2 (id int PRIMARY KEY, a varchar(5))")
    start = db.current_binlog()
    alarms = []
    history = SchemaHistory(None, connect=db.root_connection, filter=FILTER, alarm=alarms.append)
    history.start(start)
    col = history.find("shdec", "w2").columns[1]
    col.column_type, col.data_type = "bigint(20)", "bigint"  # same count, wrong type
    db.execute("INSERT INTO shdec.w2 VALUES (1, 'abc')")
    assert _plain(decode(db, start, history)) == [("w2", "INSERT", ["id", "a"], [(1, "abc")])]
    assert len(alarms) == 1 and "VARCHAR" in alarms[0] and "`a`" in alarms[0]
    history.close()


def test_full_metadata_name_mismatch_decodes_with_the_binlog_names(full):
    db = full
    db.execute("CREATE TABLE shdec.m (id int PRIMARY KEY, a int)")
    first = db.current_binlog()
    db.execute("INSERT INTO shdec.m VALUES (1, 2)")
    db.execute("ALTER TABLE shdec.m RENAME COLUMN a TO a2")
    db.execute("INSERT INTO shdec.m VALUES (2, 3)")
    # The history starts after the rename (the live schema has a2), but the binlog is read from
    # before it: the TABLE_MAP says `a`. Re-reading the live schema cannot help; the binlog's FULL
    # metadata names the columns, so the row decodes with them (never with the history's `a2`).
    alarms = []
    history = SchemaHistory(None, connect=db.root_connection, filter=FILTER, alarm=alarms.append)
    history.start(db.current_binlog())
    got = _plain(decode(db, first, history))
    assert got == [("m", "INSERT", ["id", "a"], [(1, 2)]), ("m", "INSERT", ["id", "a2"], [(2, 3)])]
    assert "`a`" in alarms[0] and "`a2`" in alarms[0]
    assert f"{first[0]}:" in alarms[1] and "binlog's own FULL metadata" in alarms[1]
    history.close()


def test_full_metadata_signedness_checked(full):
    db = full
    db.execute("CREATE TABLE shdec.sg (id int PRIMARY KEY, y year, a int, b int unsigned)")
    start = db.current_binlog()
    history = SchemaHistory(None, connect=db.root_connection, filter=FILTER)
    history.start(start)
    db.execute("INSERT INTO shdec.sg VALUES (1, 2001, -1, 4000000000)")
    # MariaDB logs YEAR in its SIGNEDNESS bitmap: the history tolerates that reading, and the
    # completed TABLE_MAP carries the schema's signedness so -1 decodes as -1.
    assert _plain(decode(db, start, history)) == [
        ("sg", "INSERT", ["id", "y", "a", "b"], [(1, 2001, -1, 4000000000)])
    ]
    history.close()

    # A model with the wrong signedness, and no live server to fix it: the alarm names the
    # column, and the binlog's FULL metadata (its signedness) decodes the row.
    alarms = []
    broken = SchemaHistory(None, connect=db.root_connection, filter=FILTER, alarm=alarms.append)
    broken.start(start)
    # (Not the last numeric column: after a YEAR, MariaDB's bitmap loses the last column's bit to
    # a reader that skips YEAR, so only the columns before it can be checked.)
    broken.find("shdec", "sg").columns[2].unsigned = True
    broken._connect = None
    assert _plain(decode(db, start, broken)) == [
        ("sg", "INSERT", ["id", "y", "a", "b"], [(1, 2001, -1, 4000000000)])
    ]
    assert "shdec.sg" in alarms[-1] and "`a`" in alarms[-1] and "signedness" in alarms[-1]
    assert "binlog's own FULL metadata" in alarms[-1]
    broken.close()


def test_filtered_tables_are_left_alone(minimal):
    db = minimal
    db.execute("CREATE TABLE shdec.keep (id int PRIMARY KEY)")
    db.execute("CREATE TABLE shdec.skip (id int PRIMARY KEY)")
    start = db.current_binlog()
    history = SchemaHistory(
        None, connect=db.root_connection, filter=TableFilter(r"shdec\..*", r"shdec\.skip")
    )
    history.start(start)
    assert history.find("shdec", "skip") is None
    db.execute("ALTER TABLE shdec.skip ADD COLUMN x int")
    db.execute("INSERT INTO shdec.skip VALUES (1, 2)")
    db.execute("INSERT INTO shdec.keep VALUES (1)")
    got = decode(db, start, history)
    assert [(t, n) for t, _, n, _ in got] == [("skip", []), ("keep", ["id"])]
    assert history.store.ddls(None, None) == []  # the filtered table's DDL is not recorded
    history.close()


def test_minimal_metadata_names_of_a_table_reopened_under_new_ids(minimal, tmp_path):
    """FLUSH TABLES gives the table a new id each time: the history completes the map once per
    version and hands it on under the new id (rows use the right map, the compiled code is
    shared); a rename of a column to one of the same type (the same binlog bytes but the id) is a
    new version with the new name."""
    db = minimal
    db.execute("CREATE TABLE shdec.r (id int PRIMARY KEY, a int)")
    start = db.current_binlog()
    history = SchemaHistory(tmp_path / "history.db", connect=db.root_connection, filter=FILTER)
    history.start(start)
    for i in range(3):
        db.execute(f"INSERT INTO shdec.r VALUES ({i}, {10 * i})")
        db.execute("FLUSH TABLES")
    db.execute("ALTER TABLE shdec.r RENAME COLUMN a TO b")
    db.execute("INSERT INTO shdec.r VALUES (3, 30)")
    maps = []
    decoder = EventDecoder(table_meta=history.table_meta)
    for path in [p for p in db.binlog_files() if p.name >= start[0]]:
        decoder.source, decoder.file = str(path), path.name
        for pos, raw in iter_frames(Path(path).read_bytes(), str(path)):
            if (path.name, pos) < start and raw[4] != E.FORMAT_DESCRIPTION:
                continue
            history.at((path.name, pos))
            event = decoder.decode(raw, pos)
            if (
                isinstance(event, QueryEvent)
                and (path.name, pos) >= start
                and event.query not in ("BEGIN", "COMMIT")
            ):
                history.apply_event(event)
            elif isinstance(event, RowsEvent) and event.schema == "shdec":
                maps.append((event.table_map, event.rows))
    history.close()
    assert [(tm.names, rows) for tm, rows in maps] == [
        (["id", "a"], [(0, 0)]), (["id", "a"], [(1, 10)]), (["id", "a"], [(2, 20)]), (["id", "b"], [(3, 30)])
    ]  # fmt: skip
    assert len({tm.table_id for tm, _ in maps}) == 4
    assert maps[0][0].decoders is maps[1][0].decoders is maps[2][0].decoders
    assert maps[3][0].decoders is not maps[0][0].decoders
