"""The schema history's store and positions, without a server (the model starts from a seeded snapshot)."""

from __future__ import annotations

import pytest

from pycanal.binlog.constants import ColumnType as T
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import (
    Position,
    SchemaHistory,
    SchemaHistoryError,
    SchemaMismatchError,
    SchemaModel,
    as_position,
)
from pycanal.parse.meta.model import Database

F = "mysql-bin.000007"


def seeded(path, snapshot_every: int = 0, filter: TableFilter | None = None) -> SchemaHistory:
    """A history whose store starts with an empty model (database `d`) valid from F:4."""
    h = SchemaHistory(path, filter=filter, snapshot_every=snapshot_every)
    model = SchemaModel()
    model.put_database(Database("d", "utf8mb4", "utf8mb4_general_ci"))
    h.store.add_snapshot(F, 4, model.to_json(), "test seed")
    h.start((F, 4))
    return h


def names(model: SchemaModel, table: str = "t") -> list[str] | None:
    t = model.table("d", table)
    return None if t is None else [c.name for c in t.columns]


def test_schema_at_before_between_and_after(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (a int)", "d", (F, 100))
    h.apply("ALTER TABLE t ADD b int", "d", (F, 200))
    h.apply("ALTER TABLE t RENAME COLUMN a TO a2", "d", ("mysql-bin.000008", 50))
    h.close()

    again = SchemaHistory(tmp_path / "s.db")
    assert names(again.schema_at((F, 4))) is None
    assert names(again.schema_at((F, 100))) is None  # the DDL at a position is not in force there
    assert names(again.schema_at((F, 101))) == ["a"]
    assert names(again.schema_at((F, 200))) == ["a"]
    assert names(again.schema_at((F, 201))) == ["a", "b"]
    assert names(again.schema_at(("mysql-bin.000008", 4))) == ["a", "b"]
    assert names(again.schema_at(("mysql-bin.000008", 51))) == ["a2", "b"]
    assert names(again.schema_at(("mysql-bin.000010", 4))) == ["a2", "b"]
    with pytest.raises(SchemaHistoryError, match="before the schema history's start"):
        again.schema_at(("mysql-bin.000006", 100))
    again.close()


def test_files_order_by_number_not_text(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (a int)", "d", ("mysql-bin.000009", 10))
    h.apply("ALTER TABLE t ADD b int", "d", ("mysql-bin.000010", 10))
    assert names(h.schema_at(("mysql-bin.000009", 999999))) == ["a"]
    assert names(h.schema_at(("mysql-bin.000010", 11))) == ["a", "b"]
    h.close()


def test_restart_replay_is_idempotent(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (a int)", "d", (F, 100))
    h.apply("ALTER TABLE t ADD b int", "d", (F, 200))
    # The stream re-delivers the last DDL: recorded once, never applied twice.
    h.apply("ALTER TABLE t ADD b int", "d", (F, 200))
    assert names(h.model) == ["a", "b"]
    h.close()

    # A restart from before the ALTER replays it: the model follows, the store does not grow.
    again = SchemaHistory(tmp_path / "s.db")
    again.start((F, 150))
    assert names(again.model) == ["a"]
    again.apply("ALTER TABLE t ADD b int", "d", (F, 200))
    assert names(again.model) == ["a", "b"]
    assert [r.sql for r in again.store.ddls(None, None)] == [
        "CREATE TABLE t (a int)",
        "ALTER TABLE t ADD b int",
    ]
    again.close()


def test_another_timeline_replaces_the_rest(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (a int)", "d", (F, 100))
    h.apply("ALTER TABLE t ADD b int", "d", (F, 200))
    h.apply("ALTER TABLE t ADD c int", "d", (F, 300))
    h.start((F, 150))
    # A different statement at a recorded position: the binlog was rewritten (new master).
    h.apply("ALTER TABLE t ADD z int", "d", (F, 200))
    assert [r.sql for r in h.store.ddls(None, None)] == ["CREATE TABLE t (a int)", "ALTER TABLE t ADD z int"]
    assert names(h.schema_at((F, 1000))) == ["a", "z"]
    h.close()


def test_periodic_snapshots(tmp_path):
    h = seeded(tmp_path / "s.db", snapshot_every=2)
    h.apply("CREATE TABLE t (a int)", "d", (F, 100))
    h.apply("ALTER TABLE t ADD b int", "d", (F, 200))
    h.apply("ALTER TABLE t ADD c int", "d", (F, 300))
    assert h.store.snapshot_count() == 2  # the seed and one after two DDL
    snap = h.store.latest_snapshot()
    assert (snap.file, snap.bound) == (F, 201)
    assert names(h.schema_at((F, 301))) == ["a", "b", "c"]
    h.close()


def test_unreadable_ddl_is_an_error_naming_statement_and_position(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (a int)", "d", (F, 100))
    with pytest.raises(SchemaHistoryError) as info:
        h.apply("ALTER TABLE t FROBNICATE a", "d", (F, 200))
    assert f"{F}:200" in str(info.value) and "FROBNICATE" in str(info.value)
    with pytest.raises(SchemaHistoryError, match="SYSTEM VERSIONING"):
        h.apply("ALTER TABLE t ADD SYSTEM VERSIONING", "d", (F, 300))
    assert names(h.model) == ["a"]
    h.close()


def test_filtered_tables_are_ignored_even_unreadable(tmp_path):
    h = seeded(tmp_path / "s.db", filter=TableFilter(r"d\.keep.*"))
    h.apply("CREATE TABLE other (a int)", "d", (F, 100))
    h.apply("ALTER TABLE other FROBNICATE", "d", (F, 110))  # not of interest: not an error
    h.apply("CREATE TABLE keep1 (a int)", "d", (F, 120))
    assert h.model.table("d", "other") is None and names(h.model, "keep1") == ["a"]
    assert [r.sql for r in h.store.ddls(None, None)] == ["CREATE TABLE keep1 (a int)"]
    # A rename into the filter from outside: the table is unknown until the server is asked.
    alarms = []
    h.alarm = alarms.append
    h.apply("RENAME TABLE other TO keep2", "d", (F, 130))
    assert h.model.table("d", "keep2") is None and "keep2" in alarms[0]
    h.close()


def test_non_ddl_is_not_recorded(tmp_path):
    h = seeded(tmp_path / "s.db")
    for sql in (
        "CREATE VIEW v AS SELECT 1",
        "GRANT SELECT ON *.* TO u",
        "FLUSH TABLES",
        "INSERT INTO t VALUES (1)",
    ):
        h.apply(sql, "d", (F, 100))
    assert h.store.ddls(None, None) == []
    h.apply("CREATE DATABASE e CHARACTER SET latin1", None, (F, 110))  # database DDL counts
    h.apply("CREATE TABLE e.t (a varchar(3))", None, (F, 120))
    assert h.model.table("e", "t").columns[0].collation == "latin1_swedish_ci"
    assert len(h.store.ddls(None, None)) == 2
    h.close()


def test_positions():
    assert as_position((F, 5)) == Position(F, 5)
    assert as_position(Position(F, 5, 3)).server_id == 3
    assert Position("mysql-bin.000010", 4).key > Position("mysql-bin.000009", 99999).key

    class Canal:
        journal_name = F
        position = 77
        server_id = 2
        timestamp = 1000

    assert as_position(Canal()) == Position(F, 77, 2, None, 1000)
    with pytest.raises(TypeError):
        as_position(object())


def _tm(schema, table, types, metas, names=None, unsigned=None):
    return TableMap(1, 1, schema, table, types, metas, [True] * len(types), unsigned=unsigned, names=names,
                    raw=b"raw" + table.encode())  # fmt: skip


def test_table_meta_completes_and_caches(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply(
        "CREATE TABLE t (id int unsigned PRIMARY KEY, v varchar(10), e enum('x','y'), b blob, d decimal(6,2))",
        "d",
        (F, 100),
    )
    tm = _tm("d", "t", [T.LONG, T.VARCHAR, T.ENUM, T.BLOB, T.NEWDECIMAL], [0, 40, 1, 2, 6 << 8 | 2])
    tm.decoders["x"] = "stale"
    done = h.table_meta(tm)
    assert done is not tm and done.decoders == {}
    assert done.names == ["id", "v", "e", "b", "d"]
    assert done.unsigned == [True, False, False, False, False]
    assert done.collations[1] == 45 and done.collations[3] == 63  # utf8mb4_general_ci, binary
    assert done.enum_labels[2] == ["x", "y"] and done.primary_key == [(0, 0)]
    assert h.table_meta(tm) is done  # same version: same object
    h.apply("ALTER TABLE t ADD z int", "d", (F, 200))
    tm2 = _tm(
        "d", "t", [T.LONG, T.VARCHAR, T.ENUM, T.BLOB, T.NEWDECIMAL, T.LONG], [0, 40, 1, 2, 6 << 8 | 2, 0]
    )
    assert h.table_meta(tm2).names[-1] == "z"
    h.close()


@pytest.mark.parametrize(
    ("types", "metas", "names", "unsigned", "fragment"),
    [
        ([T.LONG], [0], None, None, "the binlog has 1 columns, the schema history 2"),
        ([T.LONG, T.LONG], [0, 0], None, None, "column 2 `v`: binlog type LONG"),
        ([T.LONG, T.VARCHAR], [0, 30], None, None, "expected metadata 40"),  # varchar(10) utf8mb4
        ([T.LONG, T.VARCHAR], [0, 40], None, [False, False], "column 1 `id`: the binlog says signed"),
    ],
)
def test_mismatch_without_a_server_is_a_clear_error(tmp_path, types, metas, names, unsigned, fragment):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (id int unsigned, v varchar(10))", "d", (F, 100))
    h.at((F, 500))
    alarms = []
    h.alarm = alarms.append
    with pytest.raises(SchemaMismatchError) as info:
        h.table_meta(_tm("d", "t", types, metas, names, unsigned))
    message = str(info.value)
    assert "d.t" in message and f"{F}:500" in message and fragment in message
    assert "no live server" in message and len(alarms) == 1
    h.close()


def test_mismatch_with_full_metadata_decodes_with_the_binlog_names(tmp_path):
    h = seeded(tmp_path / "s.db")
    h.apply("CREATE TABLE t (id int unsigned, v varchar(10))", "d", (F, 100))
    h.at((F, 500))
    alarms = []
    h.alarm = alarms.append
    tm = _tm("d", "t", [T.LONG, T.VARCHAR], [0, 40], ["id", "w"])
    assert h.table_meta(tm) is tm  # the binlog's own names, never the history's `v`
    assert "the binlog names it `w`" in alarms[-1] and "binlog's own FULL metadata" in alarms[-1]
    assert h.table_meta(tm) is tm and len(alarms) == 2  # cached: no second re-read
    h.close()


def test_table_maps_of_filtered_tables_pass_through(tmp_path):
    h = seeded(tmp_path / "s.db", filter=TableFilter(r"d\.keep"))
    tm = _tm("d", "other", [T.LONG], [0])
    assert h.table_meta(tm) is tm
    h.close()
