"""The change log as a Delta table (files per batch and day, folds by table, exactly-once
commits, refused features) and the position order of a micro-batch, without a server."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pycanal.spark.apply import _sorted
from pycanal.spark.changelog import _PART, APP_ID, ChangeLog, ChangeLogError
from pycanal.spark.delta.commit import commit as commit_entry
from pycanal.spark.rows import ChangeRow, RowPosition, to_record_batch

DAY = dt.datetime(2026, 11, 21, 23, 59, 59, tzinfo=dt.UTC)


def change(
    n: int, database: str | None, table: str | None, ts: dt.datetime, offset: int | None = None
) -> ChangeRow:
    op = "INSERT" if table else "DDL"
    pos = RowPosition("mysql-bin.000001", n if offset is None else offset, n, None)
    return ChangeRow(op, database, table, '{"id":1}', None, '{"id":1}', pos, ts, None, None)


def commit(log: ChangeLog, batch_id: int, rows: list[ChangeRow]) -> None:
    log.write(pa.Table.from_batches([to_record_batch(rows)]), batch_id)
    log.commit(batch_id)  # waits for the files


def positions(log: ChangeLog) -> list[int]:
    """The ``row`` of every committed change row, by batch and position."""
    return log.read().column("position").combine_chunks().field("row").to_pylist()


def delta_rows(log: ChangeLog) -> list[int]:
    """The same through delta-rs, an independent reader of the table."""
    rows = DeltaTable(str(log.dir)).to_pyarrow_table()
    return sorted(rows.column("position").combine_chunks().field("row").to_pylist())


def entries(log: ChangeLog) -> list[list[dict]]:
    return [
        [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(log.log_dir.local.glob("*.json"))
    ]


def test_a_batch_is_a_file_per_day_and_a_fold_clusters_the_day_by_table(tmp_path: Path) -> None:
    # ``a.b``.``c`` and ``a``.``b.c`` have one table_name: one file, rows in order.
    names = {("a.b", "c"): "a.b.c", ("a", "b.c"): "a.b.c", ("shop", "item"): "shop.item", ("shop", None): "shop",
             ("é/x", "t%"): "é/x.t%"}  # fmt: skip
    rnd = random.Random(7)
    tables = [rnd.choice(list(names)) for _ in range(500)]
    rows = [change(n, *t, DAY + dt.timedelta(seconds=rnd.choice([0, 1]))) for n, t in enumerate(tables)]
    log = ChangeLog(tmp_path)
    commit(log, 42, rows[:300])
    commit(log, 43, rows[300:])
    days = ["2026-11-21", "2026-11-22"]
    assert sorted(str(p.relative_to(log.dir)) for p in log.files()) == sorted(
        f"date={d}/batch-{b:020d}.parquet" for b in (42, 43) for d in days
    )
    assert log.batches(-1) == [42, 43] and log.batches(42) == [43] and log.rows() == 500
    assert log.read_batch(42).num_rows == 300 and log.read(41, 42).num_rows == 300  # batch 43's rows not read
    assert log.committed(43) and not log.committed(44) and log.last_batch() == 43
    # Each batch is one commit with its transaction id, every file an append of changed data.
    appends = entries(log)[1:]
    assert [[a["txn"] for a in e if "txn" in a][0]["version"] for e in appends] == [42, 43]
    assert all(a["add"]["dataChange"] for e in appends for a in e if "add" in a)
    before = log.read()
    assert positions(log) == list(range(500)) and delta_rows(log) == list(range(500))

    assert log.fold(43) == {"through": 43, "batches": 2, "rows": 500, "written": 8, "retired": 4}
    files = [str(p.relative_to(log.dir)) for p in log.files()]
    assert len(files) == 8 and all(
        f.startswith(("date=2026-11-21/part-", "date=2026-11-22/part-")) for f in files
    )
    expected: dict[tuple[str, str], list[int]] = {}
    for n, (t, r) in enumerate(zip(tables, rows, strict=True)):
        expected.setdefault((names[t], f"{r.ts:%Y-%m-%d}"), []).append(n)
    got = {}
    for f in log.files():
        written = pq.read_table(f.input_file())
        (name,) = set(written.column("table_name").to_pylist())
        got[(name, f.parent.name[5:])] = written.column("position").combine_chunks().field("row").to_pylist()
    assert got == expected  # one file per table and day, its rows in position order
    fold = entries(log)[-1]
    assert {a["commitInfo"]["operation"] for a in fold if "commitInfo" in a} == {"OPTIMIZE"}
    assert not any(a[k]["dataChange"] for a in fold for k in ("add", "remove") if k in a)  # a stream skips it
    assert log.read().equals(before) and delta_rows(log) == list(range(500))
    assert log.batches(-1) == [42, 43] and log.rows() == 500 and log.folded_through() == 43
    # The replaced files stay for time travel until the retention.
    assert (log.dir / f"date=2026-11-21/batch-{42:020d}.parquet").is_file()
    assert DeltaTable(str(log.dir), version=2).to_pyarrow_table().num_rows == 500


def test_a_table_day_stays_few_files_as_folds_go_on(tmp_path: Path) -> None:
    """Each fold adds a file to a table's day; ``fanout`` files of one level are merged into one
    of the next, until the merge would reach ``target_bytes``: then they stay as they are."""
    log = ChangeLog(tmp_path)
    for b in range(64):
        commit(log, b, [change(b, "shop", "item", DAY)])
        log.fold(b, fanout=4, target_bytes=1 << 30)
    (only,) = log.files()
    assert only.name.startswith(f"part-{0:020d}-{63:020d}-4-")  # 64 = 4^3 one-batch folds: one file
    assert positions(log) == list(range(64)) and delta_rows(log) == list(range(64))

    small = ChangeLog(tmp_path / "small")
    for b in range(40):
        commit(small, b, [change(b, "shop", "item", DAY)])
        small.fold(b, fanout=4, target_bytes=1)  # every merge would be too big
    assert [p.name.split("-")[3] for p in small.files()] == ["1"] * 40 and positions(small) == list(range(40))


def test_a_fold_cut_short_leaves_the_table_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pycanal.spark import changelog

    log = ChangeLog(tmp_path)
    for b in range(6):
        commit(log, b, [change(2 * b, "d", "t", DAY), change(2 * b + 1, "d", "u", DAY)])
    log.fold(2, fanout=2)
    version, live = log.state().version, log.files()
    real, writes = changelog._write_parquet, []

    def crash_at_the_second_file(path: Path, table: pa.Table) -> int:
        writes.append(path)
        if len(writes) == 2:
            raise KeyboardInterrupt("simulated failure")
        return real(path, table)

    monkeypatch.setattr(changelog, "_write_parquet", crash_at_the_second_file)
    with pytest.raises(KeyboardInterrupt):
        ChangeLog(tmp_path).fold(4, fanout=2)
    monkeypatch.undo()
    reader = ChangeLog(tmp_path)
    assert reader.state().version == version and reader.files() == live and not writes[0].exists()
    done = reader.fold(5, fanout=2)
    assert done is not None and (done["through"], done["batches"], done["rows"]) == (5, 3, 6)
    assert positions(reader) == list(range(12)) and delta_rows(reader) == list(range(12))


def test_a_fold_gives_up_when_another_writer_removed_an_input(tmp_path: Path) -> None:
    log = ChangeLog(tmp_path)
    for b in range(3):
        commit(log, b, [change(b, "d", "t", DAY)])
    other = DeltaTable(str(log.dir))
    real = ChangeLog._commit

    def optimize_meanwhile(self: ChangeLog, actions: list, conflict: object = None) -> int | None:
        if any("remove" in a for a in actions):
            other.optimize.compact()  # another writer's OPTIMIZE removes the batch files first
        return real(self, actions, conflict)

    ChangeLog._commit = optimize_meanwhile  # type: ignore[method-assign]
    try:
        assert log.fold(2) is None
    finally:
        ChangeLog._commit = real  # type: ignore[method-assign]
    assert positions(log) == [0, 1, 2] and delta_rows(log) == [0, 1, 2]
    mine = [p for p in log.dir.local.glob("date=*/*") if _PART.fullmatch(str(p.relative_to(log.dir.local)))]
    assert not mine  # what the fold wrote is gone
    assert log.batches(-1) == [0, 1, 2]  # read from the other writer's file


def test_a_batch_is_committed_once(tmp_path: Path) -> None:
    log = ChangeLog(tmp_path)
    assert not log.committed(0) and log.last_batch() is None
    commit(log, 0, [change(0, "d", "t", DAY)])
    assert log.committed(0) and not log.committed(1)  # batch 0 is a batch like any other
    # A batch written but not committed (a crash between the two) is not there; its replay
    # writes the same file and commits it.
    log.write(pa.Table.from_batches([to_record_batch([change(1, "d", "t", DAY)])]), 1)
    log._written.result()
    again = ChangeLog(tmp_path)
    assert not again.committed(1) and positions(again) == [0]
    commit(again, 1, [change(1, "d", "t", DAY)])
    # Another applier committing the same batch later finds it committed: no second commit.
    version = again.state().version
    commit(log, 1, [change(1, "d", "t", DAY)])
    assert log.state().version == version and positions(log) == [0, 1] and delta_rows(log) == [0, 1]
    assert DeltaTable(str(log.dir)).transaction_version(APP_ID) == 1


def test_checkpoints_and_the_retention(tmp_path: Path) -> None:
    retention = {"delta.deletedFileRetentionDuration": "interval 0 hours",
                 "delta.logRetentionDuration": "interval 0 hours"}  # fmt: skip
    log = ChangeLog(tmp_path, properties=retention, checkpoint_every=4)
    for b in range(5):
        commit(log, b, [change(b, "d", "t", DAY)])
    log.fold(4)  # version 6: no checkpoint; the batch files are tombstones
    batch0 = log.dir / f"date=2026-11-21/batch-{0:020d}.parquet"
    assert batch0.is_file()
    for b in range(5, 7):
        commit(log, b, [change(b, "d", "t", DAY)])  # version 8: a checkpoint with the tombstones
    assert json.loads((log.log_dir / "_last_checkpoint").read_text())["version"] == 8
    assert batch0.is_file() and not (log.log_dir / f"{1:020d}.json").exists()  # the log expired
    for b in range(7, 11):
        commit(log, b, [change(b, "d", "t", DAY)])  # version 12: the tombstones past the retention go
    assert not batch0.exists()
    assert positions(ChangeLog(tmp_path)) == list(range(11)) and delta_rows(log) == list(range(11))
    assert ChangeLog(tmp_path).committed(10)  # the transaction id read from the checkpoint


def test_the_writer_refuses_a_feature_it_does_not_keep_and_keeps_a_users_column(tmp_path: Path) -> None:
    from deltalake import Field

    log = ChangeLog(tmp_path)
    commit(log, 0, [change(0, "d", "t", DAY)])
    DeltaTable(str(log.dir)).alter.add_columns([Field("note", "string")])  # a user's column
    commit(log, 1, [change(1, "d", "t", DAY)])
    assert (
        positions(log) == [0, 1]
        and DeltaTable(str(log.dir)).to_pyarrow_table().column("note").null_count == 2
    )

    version = log.state().version
    features = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["variantType"],
                             "writerFeatures": ["appendOnly", "invariants", "variantType"]}}  # fmt: skip
    assert commit_entry(
        log.log_dir, version + 1, [{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, features]
    )
    with pytest.raises(
        ChangeLogError, match=r"changelog: writer version 7 with table features .*variantType"
    ):
        commit(ChangeLog(tmp_path), 2, [change(2, "d", "t", DAY)])
    assert ChangeLog(tmp_path).last_batch() == 1


def test_position_order(tmp_path: Path) -> None:
    ts = DAY
    in_order = pa.Table.from_batches([to_record_batch([change(n, "d", "t", ts, n // 3) for n in range(10)])])
    assert _sorted(in_order) is in_order  # nothing to do
    shuffled = in_order.take(pa.array([3, 0, 9, 1, 2, 8, 4, 7, 5, 6]))
    assert _sorted(shuffled).equals(in_order)
    # Rows at one position keep their order (a stable sort); a null sorts last.
    rows = [change(0, "d", "t", ts, 5)._replace(pk=str(k)) for k in range(4)]
    rows[1] = rows[1]._replace(position=RowPosition("mysql-bin.000001", 5, None, None))  # type: ignore[arg-type]
    rows[2] = rows[2]._replace(position=rows[3].position)
    table = pa.Table.from_batches([to_record_batch(rows)])
    assert _sorted(table).column("pk").to_pylist() == ["0", "2", "3", "1"]


def test_runs_in_position_order_are_put_in_order_as_a_stable_sort_would() -> None:
    """Blocks of rows in order (parallel snapshot chunks, each at its own position) are reordered
    as slices: the result is the stable sort's in every case (a null row number last among its
    offset's rows), and made of slices where the sort moves whole blocks."""
    rng = random.Random(7)

    def stable(table: pa.Table) -> list:
        keyed = [(p["file"], p["offset"], p["row"]) for p in table.column("position").to_pylist()]
        order = sorted(
            range(len(keyed)), key=lambda i: (*keyed[i][:2], keyed[i][2] is None, keyed[i][2] or 0)
        )
        return [table.column("pk")[i].as_py() for i in order]

    for trial in range(300):
        runs = []
        for r in range(rng.randint(1, 6)):
            offset = rng.choice([10, 20, 30, 40, 50, 60]) if trial % 3 else 10 * (r + 1)
            rows = sorted(rng.sample(range(8), rng.randint(1, 4)))
            runs.append([(offset, row) for row in rows])
        rng.shuffle(runs)
        flat = [p for run in runs for p in run]
        rows = [
            change(0, "d", "t", DAY)._replace(pk=str(i), position=RowPosition("mysql-bin.000001", o, r, None))
            for i, (o, r) in enumerate(flat)
        ]
        if trial % 50 == 7:
            rows[0] = rows[0]._replace(position=RowPosition("mysql-bin.000001", 10, None, None))  # type: ignore[arg-type]
        table = pa.Table.from_batches([to_record_batch(rows)])
        out = _sorted(table)
        assert out.column("pk").to_pylist() == stable(table), flat
        if trial % 3 == 0 and trial % 50 != 7 and flat != sorted(flat):  # runs of distinct offsets
            assert out.column("pk").num_chunks > 1  # blocks put in order as slices, no copy


def test_a_change_log_of_the_earlier_layout_is_refused_not_written_over(tmp_path: Path) -> None:
    (tmp_path / "changelog" / "_pycanal_commits").mkdir(parents=True)
    with pytest.raises(ChangeLogError, match="changelog: a change log of pycanal before 2026-11-28"):
        commit(ChangeLog(tmp_path), 0, [change(0, "d", "t", DAY)])


def test_commit_waits_for_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files are written in the background: a failure there fails the commit."""

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    log = ChangeLog(tmp_path)
    log.write(pa.Table.from_batches([to_record_batch([change(0, "d", "t", DAY)])]), 3)
    with pytest.raises(OSError, match="No space left"):
        log.commit(3)
    assert not log.committed(3)


def test_an_executors_file_is_committed_beside_the_batchs_own_and_kept_by_a_fold(tmp_path: Path) -> None:
    """A file an executor wrote for batch 2 (``write_unnamed``) is added by batch 2's commit as it
    is; the batch reads in position order with it; a fold clusters the batches' own files and
    leaves it; a new applier's ``clear_unnamed`` deletes the files of batches never committed."""
    from pycanal.spark.changelog import write_unnamed

    log = ChangeLog(tmp_path)
    commit(log, 1, [change(n, "shop", "order", DAY) for n in range(10)])
    chunk = [change(n, "shop", "item", DAY, offset=100) for n in range(50)]
    info = write_unnamed(tmp_path, pa.Table.from_batches([to_record_batch(chunk)]), 2)
    assert info is not None and info["path"].startswith(f"date=2026-11-21/batch-{2:020d}-")
    own = [change(n, "shop", "order", DAY, offset=50 + n) for n in range(10, 20)]
    log.write(pa.Table.from_batches([to_record_batch(own)]), 2, [info])
    log.commit(2)
    added = [a["add"]["path"] for a in entries(log)[-1] if "add" in a]
    assert sorted(added) == sorted([info["path"], f"date=2026-11-21/batch-{2:020d}.parquet"])
    assert positions(log) == [*range(10), *range(10, 20), *range(50)]  # batch, then position order
    assert (
        log.batches(-1) == [1, 2] and log.rows() == 70 and sorted(delta_rows(log)) == sorted(positions(log))
    )

    assert log.fold(2) == {"through": 2, "batches": 2, "rows": 20, "written": 1, "retired": 2}
    live = sorted(str(p.relative_to(log.dir)) for p in log.files())
    assert info["path"] in live and len(live) == 2  # the order table's part, and the item chunk as it was
    assert positions(log) == [*range(10), *range(10, 20), *range(50)]

    never = write_unnamed(tmp_path, pa.Table.from_batches([to_record_batch(chunk)]), 3)
    stray = write_unnamed(tmp_path, pa.Table.from_batches([to_record_batch(chunk)]), 2)  # a task's retry

    def dated(days: int) -> dict:
        rows = [change(n, "shop", "item", DAY - dt.timedelta(days=days), offset=100) for n in range(5)]
        return write_unnamed(tmp_path, pa.Table.from_batches([to_record_batch(rows)]), 3)

    eve, older = dated(1), dated(2)  # the day before the latest committed day is listed, no older one
    assert log.clear_unnamed() == 2
    assert not (log.dir / never["path"]).exists() and not (log.dir / eve["path"]).exists()
    assert (log.dir / stray["path"]).exists() and (log.dir / older["path"]).exists()
    assert log.rows() == 70


def test_a_batchs_files_read_back_in_the_order_of_their_partitions(tmp_path: Path) -> None:
    """Chunks of two tables read at one binlog position number their rows from 0 each: a batch
    read back from the change log (``catch_up`` after a crash) gives such rows in the order of the
    partitions that wrote them, as the applier first had them, whatever order the log lists the
    files in."""
    from pycanal.spark.changelog import write_unnamed

    log = ChangeLog(tmp_path)
    commit(log, 0, [change(0, "shop", None, DAY)])

    def chunk(table: str, order: int) -> dict:
        rows = [change(n, "shop", table, DAY, offset=700) for n in range(3)]
        return write_unnamed(tmp_path, pa.Table.from_batches([to_record_batch(rows)]), 1, order)

    first, second = chunk("b_item", 4), chunk("a_order", 5)  # partitions 4 and 5 of batch 1
    assert first["path"] < second["path"]
    log.write(pa.Table.from_batches([to_record_batch([])]), 1, [second, first])  # listed out of order
    log.commit(1)
    back = log.read_batch(1)
    assert back["table"].to_pylist() == ["b_item", "a_order"] * 3
    expected = _sorted(pa.concat_tables([pq.read_table(log.dir / f["path"]) for f in (first, second)]))
    assert back["table"].to_pylist() == expected["table"].to_pylist()  # the applier's own order
