"""A Delta table read from its last checkpoint and the entries after it (``pycanal.spark.tablestate``):
the version and rows delta-rs reads, at every point of a checkpoint's cycle and across a schema
change; the checkpoint's tombstones in row groups of their own, not read; delta-rs reads what the
module cannot (partitions, deletion vectors)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from pycanal.spark.checkpoint import checkpoint_rows
from pycanal.spark.cow import Contents, KeyedTable
from pycanal.spark.tablestate import read_table, table_state

SCHEMA = pa.schema([("id", pa.int32()), ("v", pa.int64()), ("s", pa.string())])
NO_DELETES = pa.table({"id": pa.array([], pa.int32())})


def upserts(pairs: dict[int, int]) -> pa.Table:
    return pa.table(
        {"id": pa.array(list(pairs), pa.int32()), "v": pa.array(list(pairs.values()), pa.int64()),
         "s": pa.array([f"s{v}" for v in pairs.values()], pa.string())},
        schema=SCHEMA,
    )  # fmt: skip


def same_as_delta_rs(path: Path, order: str = "id") -> None:
    theirs = DeltaTable(str(path))
    state = table_state(path)
    assert state is not None and state.version == theirs.version()
    ours = read_table(path)
    assert ours.schema == theirs.to_pyarrow_table().schema
    assert ours.sort_by(order).equals(theirs.to_pyarrow_table().sort_by(order))


def test_a_streamed_table_reads_as_delta_rs_reads_it_and_skips_the_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents())
    t.write(upserts({k: k for k in range(1000)}), NO_DELETES, 1, {})
    rnd = random.Random(3)
    for txn in range(2, 60):
        deletes = pa.table({"id": pa.array([rnd.randrange(1000)], pa.int32())})
        t.write(upserts({rnd.randrange(1100): txn}), deletes, txn, {})
        if txn % 7 == 0:
            t.checkpoint()
        if txn % 5 == 0:  # right after a checkpoint, and 1-6 entries past one
            same_as_delta_rs(path)
    log = path / "_delta_log"
    last = max(log.glob("*.checkpoint.parquet"))
    groups = pq.ParquetFile(last).metadata
    assert groups.num_row_groups == 2 and groups.row_group(1).num_rows > 40  # the tombstones
    kept = checkpoint_rows(last, ["add", "remove"])
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
