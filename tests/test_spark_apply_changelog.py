"""The change log's partitions and the position order of a micro-batch, without a server."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pycanal.spark.apply import _sorted
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.rows import ChangeRow, RowPosition, to_record_batch

DAY = dt.datetime(2026, 11, 21, 23, 59, 59, tzinfo=dt.UTC)


def change(
    n: int, database: str | None, table: str | None, ts: dt.datetime, offset: int | None = None
) -> ChangeRow:
    op = "INSERT" if table else "DDL"
    pos = RowPosition("mysql-bin.000001", n if offset is None else offset, n, None)
    return ChangeRow(op, database, table, '{"id":1}', None, '{"id":1}', pos, ts, None, None)


def commit(log: ChangeLog, batch_id: int, rows: list[ChangeRow]) -> None:
    table = pa.Table.from_batches([to_record_batch(rows)])
    files = log.write(table, batch_id)
    log.commit(batch_id, {"files": files, "rows": table.num_rows})  # waits for the file


def positions(log: ChangeLog) -> list[int]:
    """The ``row`` of every committed change row, file by file as the readers get them."""
    out = []
    for rel in log.files():
        out += (
            pq.ParquetFile(log.dir / rel).read().column("position").combine_chunks().field("row").to_pylist()
        )
    return out


def test_a_batch_is_one_file_and_a_fold_partitions_by_table_and_day(tmp_path: Path) -> None:
    # table -> its partition name; `a.b`.`c` and `a`.`b.c` escape alike: one partition, rows in order.
    names = {("a.b", "c"): "a.b.c", ("a", "b.c"): "a.b.c", ("shop", "item"): "shop.item", ("shop", None): "shop",
             ("é/x", "t%"): "%C3%A9%2Fx.t%25"}  # fmt: skip
    rnd = random.Random(7)
    tables = [rnd.choice(list(names)) for _ in range(500)]
    rows = [change(n, *t, DAY + dt.timedelta(seconds=rnd.choice([0, 1]))) for n, t in enumerate(tables)]
    log = ChangeLog(tmp_path)
    commit(log, 42, rows[:300])
    commit(log, 43, rows[300:])
    assert log.files() == [f"_pycanal_batches/{42:020d}.parquet", f"_pycanal_batches/{43:020d}.parquet"]
    assert log.batch_ids() == [42, 43] and log.rows() == 500

    assert log.fold(43) == {"through": 43, "batches": 2, "rows": 500, "written": 8, "retired": 2}
    expected: dict[tuple[str, str], list[int]] = {}
    for n, (t, r) in enumerate(zip(tables, rows, strict=True)):
        expected.setdefault((names[t], f"{r.ts:%Y-%m-%d}"), []).append(n)
    keys = sorted(expected, key=lambda k: f"table_name={k[0]}/date={k[1]}")
    files = log.files()
    assert files == [f"table_name={name}/date={day}/part-{42:020d}-{43:020d}.parquet" for name, day in keys]
    for rel, key in zip(files, keys, strict=True):
        written = pq.read_table(tmp_path / "changelog" / rel)
        assert written.column("position").combine_chunks().field("row").to_pylist() == expected[key]
        assert written.column("batch_id").to_pylist() == [42 if n < 300 else 43 for n in expected[key]]
    # The markers are gone, the batches still committed; the last change per table is kept.
    assert log.batch_ids() == [] and log.committed(42) and log.committed(43) and not log.committed(44)
    assert log.rows() == 500 and log.last_batch() == 43
    assert log.manifest()["tables"] == dict.fromkeys(["a.b.c", "shop.item", "é/x.t%"], DAY.timestamp() + 1)
    # The batch files are kept for readers that listed them (the retention), then deleted.
    assert (log.dir / f"_pycanal_batches/{42:020d}.parquet").is_file()
    commit(log, 44, rows[:1])
    log.fold(44, retention_seconds=0)
    assert not (log.dir / f"_pycanal_batches/{42:020d}.parquet").exists()
    assert sorted(positions(log)) == sorted([*range(500), 0])


def test_partitions_stay_few_files_as_folds_go_on(tmp_path: Path) -> None:
    """Each fold adds a file to a partition; ``fanout`` files of one level are merged into one of
    the next, until the merge would reach ``target_bytes``: then they stay as they are."""
    log = ChangeLog(tmp_path)
    for b in range(64):
        commit(log, b, [change(b, "shop", "item", DAY)])
        log.fold(b, fanout=4, target_bytes=1 << 30, retention_seconds=0)
    levels = [e[3] for e in log.manifest()["partitions"]["table_name=shop.item/date=2026-11-21"]]
    assert levels == [4]  # 64 = 4^3 one-batch folds: one file
    assert positions(log) == list(range(64))
    # Only the live files (and the manifest's records) are left on disk.
    on_disk = {str(p.relative_to(log.dir)) for p in log.dir.rglob("*.parquet")}
    assert on_disk == set(log.files())

    small = ChangeLog(tmp_path / "small")
    for b in range(40):
        commit(small, b, [change(b, "shop", "item", DAY)])
        small.fold(b, fanout=4, target_bytes=1, retention_seconds=0)  # every merge would be too big
    entries = small.manifest()["partitions"]["table_name=shop.item/date=2026-11-21"]
    assert [e[3] for e in entries] == [0] * 40 and positions(small) == list(range(40))


def test_a_fold_cut_short_is_redone_over_the_same_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pycanal.spark import changelog

    log = ChangeLog(tmp_path)
    for b in range(6):
        commit(log, b, [change(2 * b, "d", "t", DAY), change(2 * b + 1, "d", "u", DAY)])
    log.fold(2, fanout=2, retention_seconds=0)
    real, writes = changelog._write_parquet, []

    def crash_at_the_third_file(path: Path, table: pa.Table) -> int:
        writes.append(path)
        if len(writes) == 3:
            raise KeyboardInterrupt("simulated process death")
        return real(path, table)

    monkeypatch.setattr(changelog, "_write_parquet", crash_at_the_third_file)
    with pytest.raises(KeyboardInterrupt):
        ChangeLog(tmp_path).fold(4, fanout=2, retention_seconds=0)
    monkeypatch.undo()
    # Nothing changed for readers; the next fold (asked for more) first does batches 3-4 again
    # (to the same file names), then batch 5.
    reader = ChangeLog(tmp_path)
    assert reader.folded_through() == 2 and reader.batch_ids() == [3, 4, 5]
    assert sorted(positions(reader)) == list(range(12))
    done = reader.fold(5, fanout=2, retention_seconds=0)
    assert done is not None and (done["through"], done["batches"], done["rows"]) == (5, 3, 6)
    assert sorted(positions(reader)) == list(range(12)) and reader.batch_ids() == []
    on_disk = {str(p.relative_to(reader.dir)) for p in reader.dir.rglob("*.parquet")}
    assert on_disk == set(reader.files())  # nothing of the cut-short attempt is left


def test_a_reader_racing_a_fold_reads_every_row_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = ChangeLog(tmp_path)
    for b in range(4):
        commit(log, b, [change(b, "d", "t", DAY)])
    reader = ChangeLog(tmp_path)
    real = ChangeLog._marker

    def fold_meanwhile(self: ChangeLog, batch_id: int) -> dict:
        if self is reader and not log.folded_through() >= 0:
            log.fold(2)  # after the reader took the manifest: the markers it listed vanish
        return real(self, batch_id)

    monkeypatch.setattr(ChangeLog, "_marker", fold_meanwhile)
    assert positions(reader) == [0, 1, 2, 3] and reader.rows() == 4
    assert reader.folded_through() == 2


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


def test_commit_waits_for_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files are written in the background: a failure there fails the commit, no marker."""

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    log = ChangeLog(tmp_path)
    files = log.write(pa.Table.from_batches([to_record_batch([change(0, "d", "t", DAY)])]), 3)
    with pytest.raises(OSError, match="No space left"):
        log.commit(3, {"files": files})
    assert not log.committed(3)
