"""Deletion vectors in the current-state tables (``KeyedTable(deletion_vectors=True)``,
``pycanal.spark.delta.dv``): what delta-rs' own reader (its DataFusion scan, which applies the vectors)
reads back equals the changes, through restarts, checkpoints, delta-rs' compaction and vacuum;
a change to a big file costs a vector, not a rewrite of the file."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from pycanal.spark import cow
from pycanal.spark.cow import Contents, KeyedTable
from pycanal.spark.delta import dv
from pycanal.spark.delta.log import live_adds
from pycanal.spark.delta.tablestate import read_rows
from pycanal.storage import lake_path
from spark_fixtures import arrow_rows, spark  # noqa: F401

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("v", pa.string())])
COMPOSITE = pa.schema([("a", pa.string()), ("b", pa.int32()), ("v", pa.string())])


def rows(schema: pa.Schema, model: dict, keys: list) -> pa.Table:
    if schema is SCHEMA:
        return pa.table({"id": [k for k in keys], "k": [model[k][0] for k in keys],
                         "v": [model[k][1] for k in keys]}, schema=schema)  # fmt: skip
    return pa.table({"a": [k[0] for k in keys], "b": [k[1] for k in keys], "v": [model[k][1] for k in keys]},
                    schema=schema)  # fmt: skip


def key_table(schema: pa.Schema, keys: list) -> pa.Table:
    if schema is SCHEMA:
        return pa.table({"id": pa.array(keys, pa.int64())})
    return pa.table(
        {"a": pa.array([k[0] for k in keys], pa.string()), "b": pa.array([k[1] for k in keys], pa.int32())}
    )


def read(path: Path, schema: pa.Schema) -> dict:
    data = read_rows(DeltaTable(str(path))).to_pylist()
    out = {}
    for r in data:
        key = r["id"] if schema is SCHEMA else (r["a"], r["b"])
        assert key not in out, f"key {key} twice"
        out[key] = (r.get("k"), r["v"])
    return out


def make_key(schema: pa.Schema, n: int):
    return n if schema is SCHEMA else (f"key-{n % 97:03d}", n)


@pytest.mark.parametrize("schema", [SCHEMA, COMPOSITE], ids=["bigint key", "composite text key"])
def test_random_changes_with_deletion_vectors_read_back_equal_the_model(
    tmp_path: Path, schema: pa.Schema, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cow, "_SMALL_ROWS", 500)  # files of ~1,000 rows get vectors
    path = tmp_path / "t"
    write_deltalake(str(path), schema.empty_table(), mode="error")
    keys = ["id"] if schema is SCHEMA else ["a", "b"]
    open_table = lambda: KeyedTable(path, schema, keys, "app", Contents(), 40_000, deletion_vectors=True)  # noqa: E731
    t = open_table()
    assert t.vectors and "deletionVectors" in DeltaTable(str(path)).protocol().reader_features
    rnd, model, txn = random.Random(5), {}, 1
    load = [make_key(schema, n) for n in range(3000)]
    for k in load:
        model[k] = (None if schema is COMPOSITE else k % 7, f"v{k}" * 3)
    t.write(rows(schema, model, load), key_table(schema, []), txn, {})
    assert len(t.files) >= 2 and min(f.rows for f in t.files.values()) >= 500  # big: vectors, not rewrites
    vectors_seen = 0
    for txn in range(2, 80):
        pairs = {}
        for _ in range(rnd.randrange(1, 12)):
            k = make_key(schema, rnd.randrange(3000) if rnd.random() < 0.8 else 3000 + rnd.randrange(400))
            pairs[k] = (
                None
                if rnd.random() < 0.25
                else (None if schema is COMPOSITE else rnd.randrange(100), f"w{txn}")
            )
        ups = [k for k, v in pairs.items() if v is not None]
        for k, v in pairs.items():
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v
        t.write(
            rows(schema, model, ups), key_table(schema, [k for k, v in pairs.items() if v is None]), txn, {}
        )
        vectors_seen = max(vectors_seen, sum(f.vector is not None for f in t.files.values()))
        if txn % 13 == 0:
            assert read(path, schema) == model
            t = open_table()  # a restart: the files and their vectors read from the log
        if txn == 40:
            DeltaTable(str(path)).create_checkpoint()
        if txn % 20 == 0:
            t.checkpoint()  # ours, from the previous one
    assert vectors_seen >= 2
    assert read(path, schema) == model
    # Delta's protocol: a file with a deletion vector carries numRecords (what readers count it by).
    with_vectors = [
        a for a in live_adds(lake_path(path) / "_delta_log", t.version).values() if a.get("deletionVector")
    ]
    assert with_vectors and all(json.loads(a["stats"])["numRecords"] > 0 for a in with_vectors)
    assert DeltaTable(str(path)).transaction_version("app") == txn
    t.checkpoint()
    assert json.loads((path / "_delta_log" / "_last_checkpoint").read_text())["version"] == t.version
    assert read(path, schema) == model
    # delta-rs' compaction and vacuum keep the hidden rows hidden and the vectors in use
    dt = DeltaTable(str(path))
    dt.optimize.compact(target_size=1 << 20)
    time.sleep(0.01)
    DeltaTable(str(path)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
    )
    assert read(path, schema) == model
    t = open_table()
    t.write(rows(schema, model, []), key_table(schema, [next(iter(model))]), txn + 1, {})
    model.pop(next(iter(model)))
    assert read(path, schema) == model


def test_a_change_to_a_big_file_is_a_vector_and_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), 4 << 20, deletion_vectors=True)
    model = {k: (k, f"{k * 2654435761 % (1 << 64):020x}{k:020x}") for k in range(100_000)}
    t.write(rows(SCHEMA, model, list(model)), key_table(SCHEMA, []), 1, {})
    (big,) = t.files
    model[7] = (1, "changed")
    t.write(rows(SCHEMA, model, [7]), key_table(SCHEMA, [99]), 2, {})
    model.pop(99)
    assert big in t.files and t.files[big].vector is not None and len(t.files) == 2
    assert dv.positions(t.files[big].vector, lake_path(path)).tolist() == [7, 99]
    entry = [
        json.loads(line) for line in (path / "_delta_log" / f"{t.version:020d}.json").read_text().splitlines()
    ]
    removed = [a["remove"] for a in entry if "remove" in a]
    assert [r["path"] for r in removed] == [big] and "deletionVector" not in removed[0]  # it had none
    added = {a["add"]["path"]: a["add"] for a in entry if "add" in a}
    assert (
        added[big]["deletionVector"]["cardinality"] == 2
        and json.loads(added[big]["stats"])["tightBounds"] is False
    )
    assert read(path, SCHEMA) == model
    # a vector too big for the log entry goes to a file of its own
    gone = list(range(1000, 60_000, 7))
    t.write(rows(SCHEMA, model, []), key_table(SCHEMA, gone), 3, {})
    for k in gone:
        model.pop(k)
    assert t.files[big].vector["storageType"] == "u" and list(path.glob("deletion_vector_*.bin"))
    entry = [
        json.loads(line) for line in (path / "_delta_log" / f"{t.version:020d}.json").read_text().splitlines()
    ]
    assert [a["remove"]["deletionVector"]["cardinality"] for a in entry if "remove" in a] == [2]
    assert read(path, SCHEMA) == model
    # past a fifth of its rows hidden, the file is rewritten without them
    t.write(rows(SCHEMA, model, []), key_table(SCHEMA, list(range(60_000, 80_000))), 4, {})
    for k in range(60_000, 80_000):
        model.pop(k)
    assert big not in t.files and all(f.vector is None for f in t.files.values())
    assert read(path, SCHEMA) == model


def test_roaring_bitmap_arrays_round_trip_and_read_run_containers() -> None:
    rnd = np.random.default_rng(3)
    for n in (1, 100, 4096, 4097, 70_000):
        pos = np.unique(rnd.integers(0, 1 << 33, n).astype(np.uint64))
        assert np.array_equal(dv.deserialize(dv.serialize(pos)), pos)
    # a run container, as Java's RoaringBitmap writes {5..9, 70000}: cookie 12347 with 2 containers
    body = bytearray()
    body += (12347 | (1 << 16)).to_bytes(4, "little") + bytes([0b01])  # container 0 is a run
    body += (
        (0).to_bytes(2, "little")
        + (4).to_bytes(2, "little")
        + (1).to_bytes(2, "little")
        + (0).to_bytes(2, "little")
    )
    body += (
        (1).to_bytes(2, "little") + (5).to_bytes(2, "little") + (4).to_bytes(2, "little")
    )  # run: start 5, length 4
    body += (70000 - 65536).to_bytes(2, "little")
    data = (
        dv.MAGIC.to_bytes(4, "little") + (1).to_bytes(8, "little") + (0).to_bytes(4, "little") + bytes(body)
    )
    assert dv.deserialize(data).tolist() == [5, 6, 7, 8, 9, 70000]
    with pytest.raises(dv.DvError):
        dv.deserialize(b"\0" * 16)
    assert dv.z85_decode(dv.z85_encode(b"HelloWorld"), 10) == b"HelloWorld"


def test_spark_reads_a_table_with_deletion_vectors_without_the_rows_they_hide(
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    from pycanal.spark.current import table_path

    path = table_path(tmp_path, "db", "t").local
    path.parent.mkdir(parents=True)
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), 1 << 20, deletion_vectors=True)
    model = {k: (k % 11, f"{k * 2654435761 % (1 << 64):020x}") for k in range(60_000)}
    t.write(rows(SCHEMA, model, list(model)), key_table(SCHEMA, []), 1, {})
    gone = list(range(5, 60_000, 13))
    model[3] = (99, "changed")
    t.write(rows(SCHEMA, model, [3]), key_table(SCHEMA, gone), 2, {})
    for k in gone:
        model.pop(k)
    assert any(f.vector is not None for f in t.files.values())
    got = spark.read.format("delta").load(str(path)).toPandas()  # Delta Lake for Spark applies the vectors
    assert len(got) == len(model)
    assert {r.id: (r.k, r.v) for r in got.itertuples()} == model


def test_a_property_change_by_delta_rs_leaves_the_table_to_the_writer(tmp_path: Path) -> None:
    """delta-rs adds the ``variantType`` feature to a version 7 protocol on any property change
    (the upkeep's retention settings); a table without VARIANT columns stays written here."""
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), deletion_vectors=True)
    DeltaTable(str(path)).alter.set_table_properties({"delta.logRetentionDuration": "interval 2 hours"})
    assert "variantType" in DeltaTable(str(path)).protocol().writer_features
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), deletion_vectors=True)
    assert t.writable and t.vectors
    t.write(rows(SCHEMA, {1: (1, "a")}, [1]), key_table(SCHEMA, []), 1, {})
    assert read(path, SCHEMA) == {1: (1, "a")}


def test_a_checkpoint_without_room_for_vectors_is_not_extended_with_them(tmp_path: Path) -> None:
    """A previous checkpoint whose ``add`` rows have no ``deletionVector`` field (another writer's)
    cannot carry the vectors of the entries since: ``from_log`` leaves the checkpoint to delta-rs
    instead of writing one that would drop them (and bring the hidden rows back)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pycanal.spark.delta.checkpoint import from_log
    from pycanal.spark.delta.log import checkpoint_path

    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), deletion_vectors=True)
    model = {k: (k, f"{k * 2654435761 % (1 << 64):020x}") for k in range(20_000)}
    t.write(rows(SCHEMA, model, list(model)), key_table(SCHEMA, []), 1, {})
    DeltaTable(str(path)).create_checkpoint()
    cp = checkpoint_path(lake_path(path) / "_delta_log", t.version).local
    data = pq.read_table(cp)
    add = data.column("add").combine_chunks()
    fields = [f.with_nullable(True) for f in add.type if f.name != "deletionVector"]
    narrow = pa.StructArray.from_arrays(
        [pc.struct_field(add, f.name) for f in fields], fields=fields, mask=pc.is_null(add)
    )
    pq.write_table(data.set_column(data.schema.get_field_index("add"), "add", narrow), cp)
    t.write(rows(SCHEMA, model, []), key_table(SCHEMA, [5]), 2, {})
    assert any(f.vector is not None for f in t.files.values())
    assert from_log(lake_path(path) / "_delta_log", t.version, set(t.files)) is False
    assert not checkpoint_path(lake_path(path) / "_delta_log", t.version).exists()


def test_truncate_by_delta_rs_empties_a_table_with_vectors_and_writes_go_on(tmp_path: Path) -> None:
    """``TRUNCATE`` is delta-rs' ``delete()`` (``CurrentState._truncate``): on a table with
    vectors it leaves no row behind, and the writer, opened again, writes into it."""
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error")
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), deletion_vectors=True)
    model = {k: (k, f"{k * 2654435761 % (1 << 64):020x}") for k in range(20_000)}
    t.write(rows(SCHEMA, model, list(model)), key_table(SCHEMA, []), 1, {})
    t.write(rows(SCHEMA, model, []), key_table(SCHEMA, [7, 8]), 2, {})
    assert any(f.vector is not None for f in t.files.values())
    DeltaTable(str(path)).delete()
    assert read(path, SCHEMA) == {}
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), deletion_vectors=True)
    t.write(rows(SCHEMA, model, [9]), key_table(SCHEMA, []), 3, {})
    assert read(path, SCHEMA) == {9: model[9]}


ROOT = Path(__file__).resolve().parents[1]


def reading_block(doc: str) -> str:
    """The Python block of ``doc`` (a file of the repository) that reads the lake with delta-rs."""
    text = (ROOT / doc).read_text()
    blocks = [b.split("\n```", 1)[0] for b in text.split("```python\n")[1:]]
    (block,) = [b for b in blocks if "QueryBuilder" in b]
    return block


def order(op: str, offset: int, key: int, status: str | None, old: str | None = None) -> Any:
    import datetime as dt

    from pycanal.spark.rows import ChangeRow, RowPosition

    image = lambda s: None if s is None else json.dumps({"id": key, "status": s})  # noqa: E731
    return ChangeRow(op, "shop", "orders", json.dumps({"id": key}), image(old), image(status),
                     RowPosition("mysql-bin.000001", offset, 0, None), dt.datetime(2026, 11, 28, tzinfo=dt.UTC),
                     None, None)  # fmt: skip


def test_tables_have_vectors_by_default_and_the_documented_reads_apply_them(
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The default ``Maintenance`` (``pycanal pipeline``'s): a current-state table gets the
    ``deletionVectors`` feature and a change to a file of 10,000 rows or more commits a vector;
    the reading blocks of the README and docs/spark.md run as printed on it without the rows the
    vector hides, and the APIs they say refuse such a table or read it wrong do."""
    import pyarrow.parquet as pq
    from deltalake.exceptions import DeltaProtocolError

    from pycanal.spark.apply import ChangeApplier
    from pycanal.spark.current import table_path

    applier = ChangeApplier(
        tmp_path, schema_ddl="CREATE TABLE shop.orders (id INT PRIMARY KEY, status VARCHAR(10))"
    )
    applier(arrow_rows([order("INSERT", 10 + k, k, "new") for k in range(12_000)]), 0)
    applier(
        arrow_rows([order("UPDATE", 20_000, 5, "paid", "new"), order("DELETE", 20_010, 7, None, "new")]), 1
    )
    path = table_path(tmp_path, "shop", "orders")
    dt = DeltaTable(str(path))
    assert "deletionVectors" in dt.protocol().reader_features
    vectors = [
        a["deletionVector"]
        for a in live_adds(path / "_delta_log", dt.version()).values()
        if a.get("deletionVector")
    ]
    assert [v["cardinality"] for v in vectors] == [2]  # the old row 5 and row 7, in the 12,000-row file
    for doc in ("README.md", "docs/spark.md"):
        capsys.readouterr()
        exec(reading_block(doc).replace("/lake/shop", str(tmp_path)), {"spark": spark})
        out = capsys.readouterr().out
        assert "11998" in out and "12000" not in out and "11999" not in out, (doc, out)
    for refuses in (dt.to_pyarrow_table, dt.to_pyarrow_dataset, dt.to_pandas):
        with pytest.raises(DeltaProtocolError, match="deletionVectors"):
            refuses()
    files_read = sum(pq.read_table(f).num_rows for f in dt.file_uris())
    assert files_read == dt.count() == 12_001  # with the rows the vector hides
    assert read_rows(dt).num_rows == 11_999
