"""A Delta table read from its last checkpoint and the entries after it (``pycanal.spark.delta.tablestate``):
the version and rows delta-rs reads, at every point of a checkpoint's cycle and across a schema
change; the checkpoint's tombstones in row groups of their own, not read; delta-rs reads what the
module cannot (partitions, deletion vectors); a poller reads the entries committed since its last
read, and starts again from a newer checkpoint when they are gone; a file vacuumed between the
state and its read makes the reader read the state again."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from pycanal.spark.cow import Contents, KeyedTable
from pycanal.spark.delta import log as delta_log
from pycanal.spark.delta import tablestate
from pycanal.spark.delta.log import checkpoint_rows
from pycanal.spark.delta.tablestate import TableReader, read_rows, read_table, table_state
from pycanal.storage import lake_path

SCHEMA = pa.schema([("id", pa.int32()), ("v", pa.int64()), ("s", pa.string())])
NO_DELETES = pa.table({"id": pa.array([], pa.int32())})


def upserts(pairs: dict[int, int]) -> pa.Table:
    return pa.table(
        {"id": pa.array(list(pairs), pa.int32()), "v": pa.array(list(pairs.values()), pa.int64()),
         "s": pa.array([f"s{v}" for v in pairs.values()], pa.string())},
        schema=SCHEMA,
    )  # fmt: skip


def random_write(t: KeyedTable, rnd: random.Random, txn: int, rows: int) -> None:
    """Transaction ``txn``: a delete among ``rows`` keys, an upsert among 10% more; a checkpoint
    every 7."""
    deletes = pa.table({"id": pa.array([rnd.randrange(rows)], pa.int32())})
    t.write(upserts({rnd.randrange(rows * 11 // 10): txn}), deletes, txn, {})
    if txn % 7 == 0:
        t.checkpoint()


def same_as_delta_rs(path: Path, order: str = "id") -> None:
    theirs = DeltaTable(str(path))
    state = table_state(path)
    assert state is not None and state.version == theirs.version()
    ours = read_table(path)
    assert ours.schema == read_rows(theirs).schema
    assert ours.sort_by(order).equals(read_rows(theirs).sort_by(order))


def test_a_streamed_table_reads_as_delta_rs_reads_it_and_skips_the_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents())
    t.write(upserts({k: k for k in range(1000)}), NO_DELETES, 1, {})
    rnd = random.Random(3)
    for txn in range(2, 60):
        random_write(t, rnd, txn, 1000)
        if txn % 5 == 0:  # right after a checkpoint, and 1-6 entries past one
            same_as_delta_rs(path)
    log = path / "_delta_log"
    last = max(log.glob("*.checkpoint.parquet"))
    groups = pq.ParquetFile(last).metadata
    assert groups.num_row_groups == 2 and groups.row_group(1).num_rows > 40  # the tombstones
    kept = checkpoint_rows(lake_path(last), ["add", "remove"])
    assert kept.column("remove").null_count == kept.num_rows and kept.column("add").null_count < kept.num_rows
    assert read_table(path, ["v"]).column_names == ["v"]


def test_files_from_before_a_column_was_added_read_as_nulls(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), upserts({1: 1, 2: 2}))
    wider = pa.table({"id": pa.array([3], pa.int32()), "v": pa.array([3], pa.int64()), "s": ["x"],
                      "d": pa.array([1.5], pa.float64())})  # fmt: skip
    write_deltalake(str(path), wider, mode="append", schema_mode="merge")
    same_as_delta_rs(path)  # no checkpoint: the entries from the first
    assert read_table(path).sort_by("id").column("d").to_pylist() == [None, None, 1.5]
    DeltaTable(str(path)).create_checkpoint()  # delta-rs' own: tombstones and adds in any order
    write_deltalake(str(path), wider, mode="overwrite")
    same_as_delta_rs(path)


def test_what_the_module_does_not_read_goes_through_delta_rs(tmp_path: Path) -> None:
    parts = tmp_path / "p"
    data = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "p": ["a", "b", "a"]})
    write_deltalake(str(parts), data, partition_by=["p"])
    assert table_state(parts) is None
    assert read_table(parts).sort_by("id").to_pylist() == data.to_pylist()

    vectors = tmp_path / "dv"
    write_deltalake(str(vectors), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(vectors, SCHEMA, ["id"], "app", Contents(), deletion_vectors=True)
    t.write(upserts({k: k for k in range(12_000)}), NO_DELETES, 1, {})
    t.write(upserts({5: -5}), pa.table({"id": pa.array([7], pa.int32())}), 2, {})
    assert any(f.vector is not None for f in t.files.values())
    assert table_state(vectors) is None
    got = {r["id"]: r["v"] for r in read_table(vectors).to_pylist()}
    assert len(got) == 11_999 and got[5] == -5 and 7 not in got


def test_a_poller_reads_the_entries_committed_since_its_last_read(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents())
    t.write(upserts({k: k for k in range(100)}), NO_DELETES, 1, {})
    reader = TableReader(path)
    read = []
    real = delta_log.entry_actions
    monkeypatch.setattr(delta_log, "entry_actions", lambda log, v: (read.append(v), real(log, v))[1])
    rnd = random.Random(5)
    for txn in range(2, 30):
        random_write(t, rnd, txn, 100)
        read.clear()
        ours = reader.read()
        assert reader.state is not None and reader.state.version == DeltaTable(str(path)).version()
        assert ours.sort_by("id").equals(read_rows(DeltaTable(str(path))).sort_by("id"))
        if txn > 2:
            assert read == [reader.state.version, reader.state.version + 1]  # the new one, then none
    assert table_state(path, reader.state) is reader.state  # nothing committed since
    assert reader.read() is reader.read() and reader.read(["v"]).column_names == ["v"]

    # the entries after its state cleaned up behind a newer checkpoint (log retention): it starts
    # from that checkpoint
    behind = reader.state
    for txn in range(30, 35):
        t.write(upserts({txn: txn}), NO_DELETES, txn, {})
    t.checkpoint()
    t.write(upserts({35: 35}), NO_DELETES, 35, {})
    log = path / "_delta_log"
    for v in range(behind.version + 1, t.version - 1):
        (log / f"{v:020d}.json").unlink()
    state = table_state(path, behind)
    assert state is not None and state.version == t.version
    assert read_table(path).sort_by("id").equals(read_rows(DeltaTable(str(path))).sort_by("id"))
    assert reader.read().sort_by("id").equals(read_table(path).sort_by("id"))


def test_a_file_vacuumed_between_the_state_and_its_read_makes_it_read_the_state_again(
    tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents())
    t.write(upserts({1: 1, 2: 2}), NO_DELETES, 1, {})
    stale = table_state(path)
    t.write(upserts({1: 10}), NO_DELETES, 2, {})  # rewrites the one file
    fresh = table_state(path)
    assert stale is not None and fresh is not None
    for f in set(stale.files) - set(fresh.files):
        f.unlink()  # as a vacuum after the read of the state would
    states = iter([stale])
    real = tablestate.table_state
    monkeypatch.setattr(tablestate, "table_state", lambda p, since=None: next(states, None) or real(p, since))
    reader = TableReader(path)
    assert reader.read().sort_by("id").to_pylist() == [
        {"id": 1, "v": 10, "s": "s10"},
        {"id": 2, "v": 2, "s": "s2"},
    ]
    assert reader.state is not None and reader.state.version == fresh.version
