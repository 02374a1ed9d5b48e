"""Copy-on-write commits written to the Delta log by pycanal (``pycanal.spark.cow``): what delta-rs
reads back equals the changes, the key ranges spare untouched files, a commit by another writer
in between is not lost, and tables that ask more of a writer go through delta-rs' MERGE."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from pycanal.spark import cow
from pycanal.spark.apply import ChangeApplier
from pycanal.spark.arrow import take, take_in_blocks
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.cow import Contents, KeyedTable, unsupported
from pycanal.spark.current import table_path
from pycanal.spark.delta.tablestate import read_rows
from pycanal.spark.rows import ChangeRow, RowPosition
from pycanal.storage import lake_path
from spark_fixtures import arrow_rows

SCHEMA = pa.schema([("id", pa.int32()), ("v", pa.int64()), ("s", pa.string())])


def table(
    tmp_path: Path,
    schema: pa.Schema = SCHEMA,
    keys: tuple[str, ...] = ("id",),
    contents: Contents | None = None,
) -> KeyedTable:
    path = tmp_path / "t"
    write_deltalake(str(path), schema.empty_table(), mode="error")
    return KeyedTable(path, schema, list(keys), "app", contents or Contents())


def rows(pairs: dict[int, int | None]) -> tuple[pa.Table, pa.Table]:
    """upserts (id -> v) and deletes (id -> None)."""
    up = {k: v for k, v in pairs.items() if v is not None}
    upserts = pa.table(
        {"id": pa.array(list(up), pa.int32()), "v": pa.array(list(up.values()), pa.int64()),
         "s": pa.array([f"s{v}" if v % 3 else None for v in up.values()], pa.string())},
        schema=SCHEMA,
    )  # fmt: skip
    deletes = pa.table({"id": pa.array([k for k, v in pairs.items() if v is None], pa.int32())})
    return upserts, deletes


def contents(path: Path) -> dict[int, tuple]:
    data = read_rows(DeltaTable(str(path)))
    out = {}
    for r in data.to_pylist():
        assert r["id"] not in out, f"key {r['id']} twice"
        out[r["id"]] = (r["v"], r["s"])
    return out


@pytest.mark.parametrize("cache", [256 << 20, 0], ids=["rows kept", "rows read back"])
def test_random_changes_read_back_by_delta_rs_equal_the_model(tmp_path: Path, cache: int) -> None:
    t = table(tmp_path, contents=Contents(cache))
    rnd, model = random.Random(7), {}
    for txn in range(1, 41):
        pairs = {}
        for _ in range(rnd.randrange(1, 30)):
            k = rnd.randrange(200) if rnd.random() < 0.7 else 200 + txn * 10 + rnd.randrange(10)
            pairs[k] = None if rnd.random() < 0.2 else rnd.randrange(-(2**40), 2**40)
        upserts, deletes = rows(pairs)
        t.write(upserts, deletes, txn, {"pycanal.batch_id": txn})
        for k, v in pairs.items():
            if v is None:
                model.pop(k, None)
            else:
                model[k] = (v, f"s{v}" if v % 3 else None)
        if txn % 10 == 0:
            assert contents(t.path) == model
    dt = DeltaTable(str(t.path))
    assert dt.version() == 40 and dt.transaction_version("app") == 40
    assert dt.history(1)[0]["operation"] == "MERGE" and dt.history(1)[0]["pycanal.batch_id"] == "40"
    stats = pa.table(dt.get_add_actions(flatten=True)).to_pydict()
    assert sum(stats["num_records"]) == len(model)
    ids = sorted(model)
    assert min(stats["min.id"]) == ids[0] and max(stats["max.id"]) == ids[-1]
    dt.create_checkpoint()  # delta-rs replays the entries into its own checkpoint
    assert contents(t.path) == model
    assert json.loads((t.path / "_delta_log" / "_last_checkpoint").read_text())["version"] == 40


def _checkpoint_rows(path: Path, version: int) -> dict[str, Any]:
    """A checkpoint's rows by action, comparable whoever wrote it (stats parsed, sorted by path)."""
    data = pq.read_table(path / "_delta_log" / f"{version:020d}.checkpoint.parquet").to_pylist()
    out: dict[str, Any] = {"add": {}, "remove": {}, "txn": {}}
    for r in data:
        (kind, action), *_ = [(k, v) for k, v in r.items() if v is not None]
        if kind == "add":
            out["add"][action["path"]] = {**action, "stats": json.loads(action["stats"])}
        elif kind == "remove":
            out["remove"][action["path"]] = action
        elif kind == "txn":
            out["txn"][action["appId"]] = action["version"]
        else:
            out[kind] = action
    return out


def test_checkpoints_from_the_previous_one_equal_delta_rs_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a first checkpoint by delta-rs, the next ones are made from the one before and the
    log entries since (``pycanal.spark.delta.checkpoint``): the same rows delta-rs writes for that
    version, and a reader with only the checkpoint (no JSON entry before it) loads the table."""
    import shutil

    path = tmp_path / "t"
    week = {"delta.deletedFileRetentionDuration": "interval 7 days"}
    write_deltalake(str(path), SCHEMA.empty_table(), mode="error", configuration=week)
    t = KeyedTable(path, SCHEMA, ["id"], "app", Contents(), file_bytes=1500)  # several files, cut and merged
    rnd, model = random.Random(11), {}

    def writes(first: int, last: int) -> None:
        for txn in range(first, last + 1):
            pairs = {
                rnd.randrange(300): None if rnd.random() < 0.3 else rnd.randrange(1000) for _ in range(25)
            }
            t.write(*rows(pairs), txn, {})
            for k, v in pairs.items():
                if v is None:
                    model.pop(k, None)
                else:
                    model[k] = (v, f"s{v}" if v % 3 else None)

    by_delta_rs, real = [], DeltaTable.create_checkpoint

    def spy(self: DeltaTable) -> None:
        by_delta_rs.append(self.version())
        real(self)

    monkeypatch.setattr(DeltaTable, "create_checkpoint", spy)
    writes(1, 10)
    t.checkpoint()  # delta-rs: there is no checkpoint to start from
    writes(11, 30)
    t.checkpoint()
    writes(31, 45)
    t.checkpoint()
    assert by_delta_rs == [10]
    assert json.loads((path / "_delta_log" / "_last_checkpoint").read_text())["version"] == 45

    ref = tmp_path / "ref"
    shutil.copytree(path, ref)
    (ref / "_delta_log" / f"{45:020d}.checkpoint.parquet").unlink()
    (ref / "_delta_log" / "_last_checkpoint").unlink()
    real(DeltaTable(str(ref)))  # delta-rs' checkpoint of the same version
    ours, theirs = _checkpoint_rows(path, 45), _checkpoint_rows(ref, 45)
    assert len(ours["add"]) == len(t.files) > 3 and len(ours["remove"]) > 30
    assert ours == theirs

    only = tmp_path / "only"
    shutil.copytree(path, only)
    for entry in (only / "_delta_log").glob("*.json"):
        entry.unlink()  # a reader has only the checkpoint
    dt = DeltaTable(str(only))
    assert dt.version() == 45 and dt.transaction_version("app") == 45
    assert dt.metadata().configuration == week
    assert contents(only) == model

    # A property change (a metaData action) is not applied to a checkpoint here: delta-rs makes
    # the next one. A compaction (adds and removes) is.
    dt = DeltaTable(str(path))
    dt.alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 8 days"})
    t.reload()
    writes(47, 50)
    t.checkpoint()
    dt.update_incremental()
    assert dt.optimize.compact(target_size=1 << 20)["numFilesRemoved"] > 1
    t.reload()
    writes(52, 55)
    t.checkpoint()
    assert by_delta_rs == [10, 50] and t.version == 55
    dt = DeltaTable(str(path))
    assert dt.metadata().configuration["delta.deletedFileRetentionDuration"] == "interval 8 days"
    assert len(dt.file_uris()) == len(t.files) and contents(path) == model


def test_compaction_is_due_only_where_two_files_fit_in_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cow, "_SMALL_ROWS", 5)  # these files are not small: the writes leave them
    t = table(tmp_path)
    t.write(*rows({k: k for k in range(100)}), 1, {})
    assert not t.compactable(1 << 20)  # one file: nothing to merge
    t.write(*rows({k: k for k in range(100, 110)}), 2, {})  # a second, small file
    assert t.compactable(1 << 20)
    assert not t.compactable(min(f.size for f in t.files.values()) + 1)  # they would not fit in one


def test_the_writes_merge_the_insert_tail(tmp_path: Path) -> None:
    """New keys above every file's range make a file a write; the write that finds _MAX_SMALL
    small files merges them, so a table's file count stays bounded without a compaction (which
    would rewrite its big files too) and compaction is not due for small files."""
    t = table(tmp_path)
    model = {}
    for txn in range(1, 40):
        pairs = {100 * txn + i: txn for i in range(3)}
        t.write(*rows(pairs), txn, {})
        model.update({k: (v, f"s{v}" if v % 3 else None) for k, v in pairs.items()})
        assert len(t.files) <= cow._MAX_SMALL
        assert not t.compactable(1 << 20)
    assert len(DeltaTable(str(t.path)).file_uris()) == len(t.files)
    assert contents(t.path) == model


def test_a_checkpoint_drops_the_tombstones_past_their_retention() -> None:
    from pycanal.spark.delta.checkpoint import next_checkpoint
    from pycanal.spark.delta.expiry import retention_ms
    from pycanal.spark.delta.log import LogState

    assert retention_ms({}) == 7 * 86_400_000
    assert retention_ms({"delta.deletedFileRetentionDuration": "interval 1 hours"}) == 3_600_000
    assert retention_ms({"delta.deletedFileRetentionDuration": "interval 30 minute"}) == 1_800_000
    assert retention_ms({"delta.deletedFileRetentionDuration": "P1D"}) is None  # unread: none dropped
    schema = pa.schema([
        ("add", pa.struct([("path", pa.string()), ("size", pa.int64())])),
        ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64())])),
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
    ])  # fmt: skip
    previous = pa.Table.from_pylist(
        [{"add": {"path": "a", "size": 1}}, {"add": {"path": "b", "size": 2}},
         {"remove": {"path": "old", "deletionTimestamp": 100}}, {"remove": {"path": "new", "deletionTimestamp": 900}},
         {"txn": {"appId": "app", "version": 3}}, {"txn": {"appId": "other", "version": 8}}],
        schema=schema,
    )  # fmt: skip
    entries = [
        [("add", {"path": "c", "size": 3}), ("add", {"path": "d", "size": 4})],
        [("remove", {"path": "a", "deletionTimestamp": 1000}), ("remove", {"path": "d", "deletionTimestamp": 1000})],
        [("add", {"path": "b", "size": 5}),  # b again, with a new deletion vector: live
         ("remove", {"path": "b", "deletionTimestamp": 1000})],
    ]  # fmt: skip
    txns = [
        {"appId": "app", "version": 4, "lastUpdated": 900},
        {"appId": "app", "version": 5, "lastUpdated": 1000},
    ]
    since = LogState(0, removes=[])  # the entries after the checkpoint, replayed
    for entry in entries:
        since.apply(entry)
    since.apply([("txn", t) for t in txns])
    got = next_checkpoint(previous, since, 500)
    rows_by_kind = [next((k, v["path"] if "path" in v else (v["appId"], v["version"])) for k, v in r.items() if v)
                    for r in got.to_pylist()]  # fmt: skip
    assert sorted(rows_by_kind) == [
        ("add", "b"), ("add", "c"), ("remove", "a"), ("remove", "b"), ("remove", "d"), ("remove", "new"),
        ("txn", ("app", 5)), ("txn", ("other", 8)),
    ]  # fmt: skip


def test_key_ranges_spare_the_files_no_changed_key_can_be_in(tmp_path: Path) -> None:
    t = table(tmp_path)
    t.write(*rows({k: k for k in range(100)}), 1, {})
    first = set(t.files)
    t.write(*rows({k: k for k in range(100, 110)}), 2, {})  # new keys above the range: a new file only
    assert first < set(t.files) and len(t.files) == 2
    t.write(*rows({105: None, 106: 1}), 3, {})  # only the second file is rewritten
    assert first < set(t.files) and len(t.files) == 2
    t.write(*rows({5: None}), 4, {})
    assert not first & set(t.files)
    assert len(DeltaTable(str(t.path)).file_uris()) == 2
    assert contents(t.path) == {**{k: (k, f"s{k}" if k % 3 else None) for k in range(110) if k not in (5, 105)},
                                106: (1, "s1")}  # fmt: skip


def test_text_ranges_find_the_files_arrow_order_finds(tmp_path: Path) -> None:
    """A write's keys are compared with files' text bounds in Python (code points): the files
    Arrow's byte order of UTF-8 picks, over keys from several planes."""
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    path = tmp_path / "t"
    write_deltalake(str(path), schema.empty_table(), mode="error")
    t = KeyedTable(path, schema, ["k"], "app", Contents(), file_bytes=256)  # many small files
    rnd = random.Random(5)
    letters = [
        "0",
        "A",
        "Z",
        "a",
        "z",
        "~",
        "\x7f",
        "\xe9",
        "\xff",
        "\u0100",
        "\u4e2d",
        "\uffff",
        "\U0001f600",
    ]

    def word() -> str:
        return "".join(rnd.choice(letters) for _ in range(rnd.randint(1, 4)))

    words = list({word() for _ in range(300)})
    no_deletes = pa.table({"k": pa.array([], pa.string())})
    t.write(pa.table({"k": words, "v": range(len(words))}, schema=schema), no_deletes, 1, {})
    assert len(t.files) > 5
    for _ in range(100):
        probe = pa.array([word() for _ in range(rnd.randint(1, 6))], pa.string())
        arrow = [
            p for p, f in t.files.items()
            if pc.any(pc.and_(pc.greater_equal(probe, f.low), pc.less_equal(probe, f.high))).as_py()
        ]  # fmt: skip
        assert t._touching(pa.table({"k": probe})) == arrow


def test_text_bounds_are_kept_where_they_are_short() -> None:
    """A text column's bounds go to the log where both are at most 32 bytes, whatever the
    values between them; a longer bound drops both."""
    mid = "m" + "x" * 40
    short = cow._stats(pa.table({"k": [1, 2, 3], "s": ["a", mid, "z"]}), "k")
    assert (short["minValues"]["s"], short["maxValues"]["s"]) == ("a", "z")
    long = cow._stats(pa.table({"k": [1, 2], "s": ["a", "z" * 33]}), "k")
    assert "s" not in long["minValues"] and "s" not in long["maxValues"]
    assert (long["minValues"]["k"], long["maxValues"]["k"]) == (1, 2)


def test_files_are_written_without_dictionary_pages(tmp_path: Path) -> None:
    """Every write rewrites the files its keys fall in: hashing each value for dictionary pages
    made a 5,745-row table's write 25% dearer (docs/benchmarks.md, "The lake with many tables")."""
    t = table(tmp_path)
    t.write(*rows({k: k % 4 for k in range(1, 500)}), 1, {})  # v repeats: a dictionary would be used
    (name,) = t.files
    meta = pq.ParquetFile(t.path.local / name).metadata.row_group(0)
    for i in range(meta.num_columns):
        column = meta.column(i)
        assert not column.has_dictionary_page, column.path_in_schema
        assert not {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(column.encodings), column.path_in_schema


def test_composite_and_string_keys(tmp_path: Path) -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.int64()), ("v", pa.string())])
    t = table(tmp_path, schema, ("a", "b"))
    assert t.range_key == "a"  # the first key column's range: a necessary condition for a key
    up = pa.table({"a": ["x", "x", "y"], "b": [1, 2, 1], "v": ["1", "2", "3"]}, schema=schema)
    t.write(up, pa.table({"a": pa.array([], pa.string()), "b": pa.array([], pa.int64())}), 1, {})
    up = pa.table({"a": ["y"], "b": [2], "v": ["4"]}, schema=schema)
    t.write(up, pa.table({"a": ["x"], "b": [2]}), 2, {})
    data = read_rows(DeltaTable(str(t.path))).sort_by([("a", "ascending"), ("b", "ascending")])
    assert data.to_pylist() == [
        {"a": "x", "b": 1, "v": "1"},
        {"a": "y", "b": 1, "v": "3"},
        {"a": "y", "b": 2, "v": "4"},
    ]


def test_a_commit_by_another_writer_in_between_is_kept(tmp_path: Path) -> None:
    t = table(tmp_path)
    t.write(*rows({1: 1, 2: 2}), 1, {})
    extra = pa.table({"id": pa.array([50], pa.int32()), "v": pa.array([50], pa.int64()), "s": ["other"]})
    write_deltalake(str(t.path), extra, mode="append")  # the version t would write next
    t.write(*rows({2: None, 3: 3}), 2, {})
    assert contents(t.path) == {1: (1, "s1"), 3: (3, None), 50: (50, "other")}
    assert DeltaTable(str(t.path)).transaction_version("app") == 2
    assert not list((t.path.local / "_delta_log").glob("*.tmp"))
    live = {Path(u).name for u in DeltaTable(str(t.path)).file_uris()}
    on_disk = {p.name for p in t.path.local.glob("*.parquet")}
    assert live <= on_disk and len(on_disk - live) == 1  # the replaced file; the lost try left none


def test_tables_that_ask_more_of_a_writer_are_not_written(tmp_path: Path) -> None:
    t = table(tmp_path)
    assert t.writable and unsupported(t.dt) is None
    t.dt.alter.add_constraint({"v_positive": "v > 0"})
    assert unsupported(DeltaTable(str(t.path))) == "writer version 3 with features []"  # a CHECK constraint
    assert not KeyedTable(t.path, SCHEMA, ["id"], "app").writable
    float_key = pa.schema([("k", pa.float64()), ("v", pa.int64())])
    assert not table(tmp_path / "f", float_key, ("k",)).writable  # -0.0 and 0.0 are one key in SQL


@pytest.mark.parametrize("config", [{"delta.enableChangeDataFeed": "true"}, {"delta.appendOnly": "true"}])
def test_table_properties_that_need_delta_rs(tmp_path: Path, config: dict[str, str]) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), SCHEMA.empty_table(), configuration=config)
    assert unsupported(DeltaTable(str(path))) is not None


def test_the_rows_kept_stay_within_their_budget() -> None:
    kept = Contents(max_bytes=4000)
    tables = {f"f{i}": pa.table({"x": pa.array(range(100), pa.int64())}) for i in range(6)}  # 800 bytes each
    for name, data in tables.items():
        kept.put(Path(name), data)
    assert kept.get(Path("f0")) is None and kept.get(Path("f1")) is not None  # the oldest went first
    kept.put(Path("f6"), tables["f0"])
    assert kept.get(Path("f2")) is None and kept.get(Path("f1")) is not None  # f1 was used since
    kept.drop(Path("f1"))
    assert kept.get(Path("f1")) is None
    kept.put(Path("big"), pa.table({"x": pa.array(range(1000), pa.int64())}))  # over a quarter: not kept
    assert kept.get(Path("big")) is None


def test_a_constraint_added_in_between_sends_the_table_to_merge(tmp_path: Path) -> None:
    """The applier has the table open as one it writes; a user adds a CHECK constraint: the next
    write finds the version taken, reads the table again and MERGEs instead, which enforces it."""
    root = tmp_path / "lake"
    applier = ChangeApplier(root, schema_ddl="CREATE TABLE db.t (id INT PRIMARY KEY, v INT)", apply_threads=1)
    applier(arrow_rows([change("INSERT", 1, 1, 10), change("INSERT", 2, 2, 20)]), 0)
    path = table_path(root, "db", "t")
    DeltaTable(str(path)).alter.add_constraint({"v_positive": "v > 0"})
    applier(arrow_rows([change("UPDATE", 3, 1, 11, 10), change("INSERT", 4, 3, 30)]), 1)
    table = DeltaTable(str(path))
    assert sorted((r["id"], r["v"]) for r in read_rows(table).to_pylist()) == [
        (1, 11),
        (2, 20),
        (3, 30),
    ]
    assert table.history(1)[0]["engineInfo"].startswith("delta-rs")  # MERGEd by delta-rs
    with pytest.raises(Exception, match="failed validation check"):
        applier(arrow_rows([change("INSERT", 5, 4, -1)]), 2)


def change(op: str, offset: int, key: int, v: int, old: int | None = None) -> ChangeRow:
    image = lambda x: json.dumps({"id": key, "v": x}, separators=(",", ":"))  # noqa: E731
    return ChangeRow(
        op, "db", "t", json.dumps({"id": key}), None if old is None else image(old), image(v),
        RowPosition("mysql-bin.000001", 100 + offset * 10, 0, None), dt.datetime(2026, 11, 25, tzinfo=dt.UTC),
        None, None,
    )  # fmt: skip


def test_a_filesystem_without_hard_links_sends_the_table_to_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some network and FUSE filesystems refuse ``link`` (EPERM): nothing is committed or left
    behind by the try, the table is not written here again, and the applier MERGEs it; the change
    log's commits go through delta-rs."""
    root = tmp_path / "lake"
    applier = ChangeApplier(root, schema_ddl="CREATE TABLE db.t (id INT PRIMARY KEY, v INT)", apply_threads=1)
    applier(arrow_rows([change("INSERT", 1, 1, 10)]), 0)

    def refuse(src: object, dst: object, **kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr("pycanal.storage.local.os.link", refuse)
    applier(arrow_rows([change("INSERT", 2, 2, 20)]), 1)
    path = table_path(root, "db", "t")
    table = DeltaTable(str(path))
    assert sorted((r["id"], r["v"]) for r in read_rows(table).to_pylist()) == [(1, 10), (2, 20)]
    assert table.history(1)[0]["engineInfo"].startswith("delta-rs")
    assert not list((path.local / "_delta_log").glob("*.tmp"))
    assert {p.name for p in path.local.glob("*.parquet")} == {
        Path(u).name for u in table.file_uris()
    }  # no orphan
    # The change log commits through delta-rs there too, with the batch's transaction id.
    changes = ChangeLog(root)
    assert (
        changes.rows() == 2
        and changes.last_batch() == 1
        and DeltaTable(str(changes.dir)).history(1)[0]["engineInfo"].startswith("delta-rs")
    )


def test_text_key_ranges_are_trusted_only_where_pycanal_wrote_them(tmp_path: Path) -> None:
    """A VARCHAR key's bounds spare files too, but only bounds written here are exact (another
    writer may truncate them): its files are rewritten whenever they could hold a changed key."""
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    t = table(tmp_path, schema, ("k",))
    assert t.range_key == "k"
    long = "x" * 40  # bounds longer than the 32 bytes other columns get
    no_deletes = pa.table({"k": pa.array([], pa.string())})
    t.write(
        pa.table({"k": [f"a{long}{i}" for i in range(5)], "v": [1] * 5}, schema=schema), no_deletes, 1, {}
    )
    first = set(t.files)
    t.write(pa.table({"k": [f"m{long}"], "v": [2]}, schema=schema), no_deletes, 2, {})
    assert first < set(t.files)  # "m..." is above the first file's range
    other = pa.table({"k": [f"a{long}2", "zz"], "v": [9, 9]}, schema=schema)
    write_deltalake(str(t.path), other, mode="append")  # another writer: a duplicate key on purpose
    reopened = KeyedTable(t.path, schema, ["k"], "app", Contents())
    theirs = [p for p in reopened.files if not p.startswith("pycanal-")]
    assert len(theirs) == 1 and reopened.files[theirs[0]].low is None  # not trusted
    assert all(reopened.files[p].low is not None for p in first)  # ours: read back from the log
    reopened.write(pa.table({"k": ["zz"], "v": [3]}, schema=schema), no_deletes, 3, {})
    assert theirs[0] not in reopened.files and first <= set(reopened.files)  # theirs rewritten, ours spared
    rows = sorted((r["k"], r["v"]) for r in read_rows(DeltaTable(str(t.path))).to_pylist())
    assert rows.count(("zz", 3)) == 1 and ("zz", 9) not in rows


def test_an_applier_without_kept_rows_writes_the_same_tables(tmp_path: Path) -> None:
    """``cache_bytes=0``: every write reads the files back; the tables are the same."""
    rnd = random.Random(3)
    batches, live = [], set()
    for b in range(6):
        rows = []
        for j in range(40):
            key, off = rnd.randrange(30), b * 100 + j
            if key in live and rnd.random() < 0.3:
                rows.append(change("DELETE", off, key, 0, 0))
                live.discard(key)
            else:
                rows.append(
                    change("UPDATE" if key in live else "INSERT", off, key, off, 0 if key in live else None)
                )
                live.add(key)
        batches.append(rows)
    ddl = "CREATE TABLE db.t (id INT PRIMARY KEY, v INT)"
    kept, read_back = (
        ChangeApplier(tmp_path / "a", schema_ddl=ddl),
        ChangeApplier(tmp_path / "b", schema_ddl=ddl, cache_bytes=0),
    )
    for b, rows in enumerate(batches):
        kept(arrow_rows(rows), b)
        read_back(arrow_rows(rows), b)

    def rows_of(root: Path) -> list[tuple]:
        data = read_rows(DeltaTable(str(table_path(root, "db", "t"))))
        return sorted((r["id"], r["v"]) for r in data.to_pylist())

    assert rows_of(tmp_path / "a") == rows_of(tmp_path / "b") and len(rows_of(tmp_path / "a")) == len(live)


def test_take_in_blocks_is_take() -> None:
    """Any order, blocks or not, many blocks or few: the rows ``take`` gives, and slices (no copy)
    where the order moves a few whole blocks."""
    rng = random.Random(3)
    table = pa.table({"k": range(1000), "s": [f"v{i}" for i in range(1000)]})
    for trial in range(200):
        cuts = sorted(rng.sample(range(1, 1000), rng.choice([1, 3, 10, 300])))
        blocks = [list(range(a, b)) for a, b in zip([0, *cuts], [*cuts, 1000], strict=True)]
        rng.shuffle(blocks)
        order = [i for b in blocks for i in b]
        if trial % 4 == 0:
            order = rng.sample(range(1000), rng.randint(0, 1000))  # not a permutation of blocks
        out = take_in_blocks(table, pa.array(order, pa.uint64()), max_blocks=100)
        assert out.equals(table.take(pa.array(order, pa.int64()))), trial
        moves = 1 + sum(b != a + 1 for a, b in zip(order, order[1:], strict=False))
        if trial % 4 and moves < 100:
            assert out.column("s").num_chunks == moves


def test_take_of_chunked_values_is_take_of_their_array() -> None:
    """Rows in any order (repeated, consecutive, none) out of values in one chunk or many, empty
    chunks among them: one array, the rows the combined array gives."""
    rng = random.Random(5)
    values = [f"v{i}" if i % 7 else None for i in range(1000)]
    whole = pa.array(values)
    for trial in range(300):
        cuts = sorted(rng.sample(range(0, 1001), rng.choice([0, 1, 4, 20])))
        chunked = pa.chunked_array(
            [whole[a:b] for a, b in zip([0, *cuts], [*cuts, 1000], strict=True)], pa.string()
        )
        kind = trial % 3
        if kind == 0:
            rows = rng.choices(range(1000), k=rng.randint(0, 50))
        elif kind == 1:
            start = rng.randrange(1000)
            rows = list(range(start, rng.randint(start, 1000)))
        else:
            rows = sorted(rng.sample(range(1000), rng.randint(1, 400)))
        index = pa.array(rows, pa.int64())
        out = take(chunked, index)
        assert isinstance(out, pa.Array) and out.equals(whole.take(index)), trial


def test_big_files_are_zstd_and_small_ones_snappy(tmp_path: Path) -> None:
    """A file of 1 MiB of rows and up is written with zstd, a smaller one with snappy; the table
    reads back whole across both codecs, by delta-rs and from the files read again."""
    t = table(tmp_path, contents=Contents(0))  # nothing kept: a write reads the files it replaces
    big = {k: k for k in range(60_000)}  # ~22 bytes a row in Arrow: over 1 MiB
    t.write(*rows(big), 1, {})
    small = {k: k + 1 for k in range(100_000, 100_010)}  # beyond the big file's key range: a file of its own
    t.write(*rows(small), 2, {})
    t.write(*rows({100_003: None, 100_020: 9}), 3, {})  # rewrites the small file only
    codecs = {}
    for name, f in t.files.items():
        meta = pq.ParquetFile(tmp_path / "t" / name).metadata
        codec = {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
        assert len(codec) == 1 and name.endswith(f".{next(iter(codec)).lower()}.parquet")
        codecs[f.low] = codec.pop()
    assert codecs == {0: "ZSTD", 100_000: "SNAPPY"}
    want = {
        k: (v, f"s{v}" if v % 3 else None) for k, v in (big | small | {100_020: 9}).items() if k != 100_003
    }
    assert contents(tmp_path / "t") == want


def test_a_table_given_deletion_vectors_is_checkpointed_at_that_version(tmp_path: Path) -> None:
    """``checkpoint.from_log`` makes no checkpoint over a protocol change: without one at the
    version that gives a table vectors, its next checkpoint was delta-rs' (~50 ms of CPU), 200
    tables' within a minute of bench/lake.py."""
    from pycanal.spark.delta.checkpoint import from_log
    from pycanal.spark.delta.log import last_checkpoint

    schema = pa.schema([("id", pa.int32()), ("v", pa.string())])
    write_deltalake(str(tmp_path), schema.empty_table())
    table = KeyedTable(tmp_path, schema, ["id"], "app", deletion_vectors=True)
    assert table.vectors and last_checkpoint(tmp_path / "_delta_log") == (table.version, None)
    table.write(
        pa.table({"id": pa.array([1], pa.int32()), "v": ["a"]}),
        pa.table({"id": pa.array([], pa.int32())}),
        1,
        {},
    )
    assert from_log(lake_path(tmp_path) / "_delta_log", table.version, set(table.files))
