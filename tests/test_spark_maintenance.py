"""The current-state tables at scale: MERGEs of many tables at once, and the upkeep (compaction,
checkpoints, vacuum) while batches stream in; both keep every exactly-once guarantee: the same
tables as one thread without upkeep, a crash in the middle of a batch replayed to the same end."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from pycanal.spark import cow
from pycanal.spark.apply import ChangeApplier, applied_batch_ids
from pycanal.spark.cow import KeyedTable
from pycanal.spark.current import table_path
from pycanal.spark.current_state import APP_ID
from pycanal.spark.delta import expiry
from pycanal.spark.delta.tablestate import read_rows, read_table
from pycanal.spark.maintenance import Maintenance
from pycanal.spark.rows import ChangeRow, RowPosition
from pycanal.storage import lake_path
from spark_fixtures import arrow_rows

TABLES = 12
DDL = ";\n".join(f"CREATE TABLE db.t{i} (id INT PRIMARY KEY, v INT)" for i in range(TABLES))


def change(op: str, table: int, offset: int, key: int, v: int | None, old: int | None = None) -> ChangeRow:
    image = lambda x: None if x is None else json.dumps({"id": key, "v": x}, separators=(",", ":"))  # noqa: E731
    return ChangeRow(
        op, "db", f"t{table}", json.dumps({"id": key}), image(old), image(v),
        RowPosition("mysql-bin.000001", offset, 0, None), dt.datetime(2026, 11, 25, tzinfo=dt.UTC), None, None,
    )  # fmt: skip


def batches(n: int) -> list[list[ChangeRow]]:
    """``n`` batches of changes to every table: inserts, and in every fourth batch an update and a
    delete of earlier rows (a MERGE rewrites the files it matches: insert-only ones add files)."""
    out, offset = [], 1000
    for b in range(n):
        rows = []
        for t in range(TABLES):
            for k in range(3):
                offset += 10
                rows.append(change("INSERT", t, offset, b * 10 + k, b))
            if b % 4 == 0 and b:
                offset += 10
                rows.append(change("UPDATE", t, offset, (b - 1) * 10, b * 100, b - 1))
                offset += 10
                rows.append(change("DELETE", t, offset, (b - 1) * 10 + 1, None, b - 1))
        out.append(rows)
    return out


def contents(root: Path) -> dict[str, list[tuple]]:
    out = {}
    for t in range(TABLES):
        data = read_rows(DeltaTable(str(table_path(root, "db", f"t{t}"))))
        out[f"t{t}"] = sorted(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))
    return out


@pytest.mark.parametrize("small", [False, True], ids=["compaction merges", "the writes merge"])
def test_upkeep_and_threads_give_the_same_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: bool
) -> None:
    if not small:
        monkeypatch.setattr(cow, "_SMALL_ROWS", 2)  # no file is small: compaction merges them
    work = batches(15)
    plain = ChangeApplier(
        tmp_path / "plain", schema_ddl=DDL, apply_threads=1, maintenance=Maintenance(0, 0, 0)
    )
    upkeep = Maintenance(
        compact_every=3, checkpoint_every=4, vacuum_every=5, retention_hours=0, log_retention_hours=0
    )
    kept = ChangeApplier(tmp_path / "kept", schema_ddl=DDL, apply_threads=8, maintenance=upkeep)
    for batch_id, rows in enumerate(work):
        plain(arrow_rows(rows), batch_id)
        kept(arrow_rows(rows), batch_id)
    assert contents(tmp_path / "kept") == contents(tmp_path / "plain")
    assert upkeep.done["vacuum"] >= TABLES * 2
    if small:
        assert upkeep.done["compact"] == 0  # nothing the writes did not merge: no compaction due
    else:
        assert upkeep.done["compact"] >= TABLES * 4
    for t in range(TABLES):
        path = table_path(tmp_path / "kept", "db", f"t{t}").local
        table = DeltaTable(str(path))
        assert len(table.file_uris()) <= (cow._MAX_SMALL if small else 4)  # merged: not one file per MERGE
        assert table.transaction_version(APP_ID) // 1_000_000 == len(work) - 1  # the ids survive
        log_files = os.listdir(path / "_delta_log")
        assert any(n.endswith(".checkpoint.parquet") for n in log_files)
        assert table.metadata().configuration["delta.logRetentionDuration"] == "interval 0 hours"
        assert sum(n.endswith(".json") for n in log_files) < table.version()  # expired entries gone
        on_disk = [n for n in os.listdir(path) if n.endswith(".parquet")]
        assert len(on_disk) <= len(table.file_uris()) + 4 * 3  # vacuumed (retention 0)
        plain_files = DeltaTable(str(table_path(tmp_path / "plain", "db", f"t{t}"))).file_uris()
        if small:
            assert len(plain_files) <= cow._MAX_SMALL  # merged by the writes, upkeep or not
        else:
            assert len(plain_files) >= len(work) // 2  # without upkeep: files pile up


@pytest.mark.parametrize("crash_at", [1, 5])
def test_a_crash_while_tables_merge_at_once_is_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        crash_at: int) -> None:  # fmt: skip
    work = batches(4)
    clean = ChangeApplier(tmp_path / "clean", schema_ddl=DDL, apply_threads=1)
    for batch_id, rows in enumerate(work):
        clean(arrow_rows(rows), batch_id)

    root = tmp_path / "crashed"
    first = ChangeApplier(root, schema_ddl=DDL, apply_threads=4)
    for batch_id, rows in enumerate(work[:2]):
        first(arrow_rows(rows), batch_id)
    from pycanal.spark import current_state

    real = current_state.CurrentState._merge
    calls = []

    def crashing(self, database, table, idx, rows, step):  # noqa: ANN001, ANN202
        calls.append(table)
        if len(calls) == crash_at:
            raise KeyboardInterrupt("simulated crash in a MERGE")
        return real(self, database, table, idx, rows, step)

    monkeypatch.setattr(current_state.CurrentState, "_merge", crashing)
    with pytest.raises(KeyboardInterrupt):
        ChangeApplier(root, schema_ddl=DDL, apply_threads=4)(arrow_rows(work[2]), 2)
    monkeypatch.undo()
    assert applied_batch_ids(root) == [0, 1]
    again = ChangeApplier(root, schema_ddl=DDL, apply_threads=4)
    again(arrow_rows(work[2]), 2)  # caught up from the change log, then a no-op
    again(arrow_rows(work[3]), 3)
    assert applied_batch_ids(root) == [0, 1, 2, 3]
    assert contents(root) == contents(tmp_path / "clean")


def test_a_table_made_without_the_log_retention_gets_it_at_its_checkpoint(tmp_path: Path) -> None:
    """Tables created before pycanal set ``delta.logRetentionDuration`` (Delta's default: 30 days)."""
    path = tmp_path / "t"
    schema = pa.schema([("id", pa.int32()), ("v", pa.int32())])
    write_deltalake(str(path), schema.empty_table())
    table = KeyedTable(path, schema, ["id"], APP_ID)
    upkeep = Maintenance(
        compact_every=0, checkpoint_every=1, vacuum_every=0, retention_hours=6, log_retention_hours=2
    )
    for n in range(1, 4):
        table.write(
            pa.table({"id": [n], "v": [n]}, schema=schema), pa.table({"id": pa.array([], pa.int32())}), n, {}
        )
        upkeep.after_merge("db.t", table)
    config = DeltaTable(str(path)).metadata().configuration
    assert config["delta.logRetentionDuration"] == "interval 2 hours"
    assert config["delta.deletedFileRetentionDuration"] == "interval 6 hours"
    assert upkeep.done["checkpoint"] == 3
    assert sorted(read_rows(DeltaTable(str(path))).column("id").to_pylist()) == [1, 2, 3]


@pytest.mark.parametrize("hours", [0, 1])
def test_the_checkpoints_delete_the_files_and_entries_past_their_retention(
    tmp_path: Path, hours: int
) -> None:
    """Without a vacuum or a listing: what the checkpoint drops (a tombstone past
    ``retention_hours``, the entries before a checkpoint past ``log_retention_hours``) is deleted."""
    path = tmp_path / "t"
    schema = pa.schema([("id", pa.int32()), ("v", pa.int32())])
    upkeep = Maintenance(
        compact_every=0, checkpoint_every=3, vacuum_every=0, retention_hours=hours, log_retention_hours=hours
    )
    write_deltalake(str(path), schema.empty_table(), configuration=upkeep.table_properties())
    table = KeyedTable(path, schema, ["id"], APP_ID)
    upkeep.after_merge("db.t", table)  # the counter starts at a per-table offset: from here, by 3
    none = pa.table({"id": pa.array([], pa.int32())})
    writes = 40
    for n in range(1, writes + 1):
        table.write(pa.table({"id": [n % 7], "v": [n]}, schema=schema), none, n, {})  # replaces a file
        upkeep.after_merge("db.t", table)
    data = DeltaTable(str(path))
    assert sorted(read_rows(data).column("v").to_pylist()) == list(range(writes - 6, writes + 1))
    assert read_table(path).sort_by("v").equals(read_rows(data).sort_by("v"))
    on_disk = [n for n in os.listdir(path) if n.endswith(".parquet")]
    entries = sorted(n for n in os.listdir(path / "_delta_log") if n.endswith(".json"))
    if hours:  # nothing past its retention: every entry, every file one added
        assert len(entries) == data.version() + 1
        added = {json.loads(line)["add"]["path"] for e in entries
                 for line in (path / "_delta_log" / e).read_text().splitlines() if '"add"' in line}  # fmt: skip
        assert set(on_disk) == added and len(added) > len(data.file_uris()) + writes // 2
        return
    # the live files, and those removed since the checkpoint before the last (up to 2 x 3 writes)
    assert set(data.file_uris()) <= {str(path / n) for n in on_disk}
    assert len(on_disk) <= len(data.file_uris()) + 6
    # the entries from the checkpoint before the last on, and its checkpoint
    assert 3 <= len(entries) <= 7 and int(entries[-1][:20]) == data.version()
    assert len([n for n in os.listdir(path / "_delta_log") if n.endswith(".checkpoint.parquet")]) == 2
    assert DeltaTable(str(path), version=int(entries[0][:20])).version() == int(entries[0][:20])


def test_deletion_vectors_with_upkeep_and_ddl_give_the_same_tables(tmp_path: Path) -> None:
    """``Maintenance(deletion_vectors=True)``: changes to a big table's file become deletion
    vectors; with compaction, checkpoints, vacuum and an ALTER TABLE that rewrites the table in
    between, the tables equal those of a plain applier (no vectors, no upkeep)."""
    import random

    rnd, offset, ts = random.Random(3), 1000, dt.datetime(2026, 11, 26, tzinfo=dt.UTC)

    def at() -> RowPosition:
        nonlocal offset
        offset += 10
        return RowPosition("mysql-bin.000001", offset, 0, None)

    def image(key: int, v: int | None, w: bool) -> str | None:
        return None if v is None else json.dumps({"id": key, "v": v, **({"w": v % 5} if w else {})})

    live: dict[int, int] = {}
    work = [[ChangeRow("INSERT", "db", "t0", json.dumps({"id": k}), None, image(k, k * 7919 % 1_000_003, False),
                       at(), ts, None, None) for k in range(60_000)]]  # fmt: skip
    live.update({k: k * 7919 % 1_000_003 for k in range(60_000)})
    for b in range(1, 16):
        w = b >= 8
        rows = []
        if b == 8:
            rows.append(ChangeRow("DDL", "db", "t0", None, None, None, at(), ts,
                                  "ALTER TABLE t0 ADD COLUMN w INT NOT NULL DEFAULT 3", "db"))  # fmt: skip
        for _ in range(40):
            k = rnd.randrange(62_000)
            pk = json.dumps({"id": k})
            if k in live and rnd.random() < 0.3:
                rows.append(
                    ChangeRow("DELETE", "db", "t0", pk, image(k, live.pop(k), w), None, at(), ts, None, None)
                )
            else:
                op, v = ("UPDATE" if k in live else "INSERT"), rnd.randrange(10**6)
                before = image(k, live[k], w) if k in live else None
                rows.append(ChangeRow(op, "db", "t0", pk, before, image(k, v, w), at(), ts, None, None))
                live[k] = v
        work.append(rows)
    ddl = "CREATE TABLE db.t0 (id INT PRIMARY KEY, v INT)"
    plain = ChangeApplier(  # copy-on-write: the tables vectors must give
        tmp_path / "plain",
        schema_ddl=ddl,
        apply_threads=1,
        maintenance=Maintenance(0, 0, 0, deletion_vectors=False),
    )
    upkeep = Maintenance(compact_every=3, checkpoint_every=4, vacuum_every=5, retention_hours=0, log_retention_hours=0,
                         file_mb=1, deletion_vectors=True)  # fmt: skip
    kept = ChangeApplier(tmp_path / "kept", schema_ddl=ddl, apply_threads=2, maintenance=upkeep)
    path = table_path(tmp_path / "kept", "db", "t0")
    vectors = 0
    for batch_id, rows in enumerate(work):
        plain(arrow_rows(rows), batch_id)
        kept(arrow_rows(rows), batch_id)
        table = kept._tables.get(str(path))
        if table is not None:
            vectors = max(vectors, sum(f.vector is not None for f in table.files.values()))
    assert vectors >= 1 and "deletionVectors" in DeltaTable(str(path)).protocol().reader_features
    assert upkeep.done["checkpoint"] >= 2 and upkeep.done["vacuum"] >= 2
    got = read_rows(DeltaTable(str(path))).sort_by("id")
    want = read_rows(DeltaTable(str(table_path(tmp_path / "plain", "db", "t0")))).sort_by("id")
    assert got.column_names == ["id", "v", "w"] and got.num_rows == len(live)
    assert got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("first", [0, 3])
def test_the_log_expires_before_the_newest_checkpoint_past_its_retention(tmp_path: Path, first: int) -> None:
    """Entries ``first``..20, a second apart, checkpoints at 5, 10 and 15; the cutoff falls after
    entry 12: what is before checkpoint 10 goes, oldest first, and nothing else."""
    log_dir = tmp_path / "_delta_log"
    log_dir.mkdir()
    now = 1_800_000_000
    for v in range(first, 21):
        (log_dir / f"{v:020d}.json").write_text("{}\n")
        os.utime(log_dir / f"{v:020d}.json", (now + v, now + v))
    for v in (5, 10, 15):
        (log_dir / f"{v:020d}.checkpoint.parquet").write_bytes(b"")
    expiry.expire_log(lake_path(log_dir), 15, (now + 12.5) * 1000)
    assert sorted(os.listdir(log_dir)) == sorted(
        [f"{v:020d}.json" for v in range(10, 21)] + [f"{v:020d}.checkpoint.parquet" for v in (10, 15)]
    )
    expiry.expire_log(lake_path(log_dir), 15, (now + 9.5) * 1000)  # no checkpoint past it but the kept one
    assert len(os.listdir(log_dir)) == 13
