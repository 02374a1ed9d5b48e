"""A table the server reopens under a new table id (FLUSH TABLES; more tables than
``table_definition_cache`` holds) keeps its compiled row code: ``EventDecoder`` gives every
TableMap of one layout the same ``decoders`` (the row decoders, and what the jsonl recorder and the
entry converter keep there), and tables of one column shape share their row decoders."""

from __future__ import annotations

import dataclasses

from pycanal.binlog import read_events
from pycanal.binlog.events import RowsEvent
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.canonical import Recorder, to_json_line
from pycanal.testing.mariadb import PrivateMariaDB


def test_a_table_reopened_under_new_ids_keeps_its_compiled_code(mariadb: PrivateMariaDB) -> None:
    s = mariadb.database
    path = mariadb.flush_binary_logs()
    mariadb.execute(f"CREATE TABLE `{s}`.t_reopen (id INT PRIMARY KEY, c VARCHAR(20))")
    mariadb.execute(f"CREATE TABLE `{s}`.t_same_shape (id INT PRIMARY KEY, c VARCHAR(20))")
    for i in range(3):
        mariadb.execute(f"INSERT INTO `{s}`.t_reopen VALUES ({i}, 'v{i}')")
        mariadb.execute("FLUSH TABLES")
    mariadb.execute(f"INSERT INTO `{s}`.t_same_shape VALUES (5, 'w')")
    mariadb.execute(f"ALTER TABLE `{s}`.t_reopen ADD COLUMN d INT")
    mariadb.execute(f"INSERT INTO `{s}`.t_reopen VALUES (9, 'v9', 7)")
    events = [e for e in read_events(path) if isinstance(e, RowsEvent) and e.schema == s]
    reopen = [e for e in events if e.table == "t_reopen"]
    (other,) = [e for e in events if e.table == "t_same_shape"]
    maps = [e.table_map for e in reopen]
    assert len({tm.table_id for tm in maps[:3]}) == 3  # a new id at each reopening
    assert maps[0].decoders is maps[1].decoders is maps[2].decoders
    assert maps[3].decoders is not maps[0].decoders  # ADD COLUMN: another layout
    assert other.table_map.decoders is not maps[0].decoders  # another table name
    assert other.row_decoder is reopen[0].row_decoder  # one column shape: one row decoder
    assert [e.rows for e in reopen] == [[(0, "v0")], [(1, "v1")], [(2, "v2")], [(9, "v9", 7)]]
    assert other.rows == [(5, "w")]
    # the jsonl recorder's cached line parts are the layout's: each line still names its table
    lines = list(Recorder().lines(read_events(path)))
    assert lines == [to_json_line(r) for r in Recorder().records(read_events(path))]
    assert sum('"table": "t_same_shape"' in line for line in lines) == 1


def test_a_layout_is_everything_but_the_table_id() -> None:
    tm = TableMap(7, 1, "s", "t", [3, 15], [0, 80], [False, True], names=["id", "c"], raw=b"\x07...")
    assert dataclasses.replace(tm, table_id=8, raw=b"\x08...").layout() == tm.layout()
    # what the schema history fills in counts: after a rename the binlog's bytes may be the same
    assert dataclasses.replace(tm, names=["id", "renamed"]).layout() != tm.layout()
    assert dataclasses.replace(tm, column_types=["int(11)", "varchar(20)"]).layout() != tm.layout()
    assert dataclasses.replace(tm, table="u").layout() != tm.layout()
