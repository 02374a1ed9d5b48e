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


def test_partitions_by_table_and_day(tmp_path: Path) -> None:
    # table -> its partition name; `a.b`.`c` and `a`.`b.c` escape alike: one partition, rows in order.
    names = {("a.b", "c"): "a.b.c", ("a", "b.c"): "a.b.c", ("shop", "item"): "shop.item", ("shop", None): "shop",
             ("é/x", "t%"): "%C3%A9%2Fx.t%25"}  # fmt: skip
    rnd = random.Random(7)
    tables = [rnd.choice(list(names)) for _ in range(500)]
    rows = [change(n, *t, DAY + dt.timedelta(seconds=rnd.choice([0, 1]))) for n, t in enumerate(tables)]
    log = ChangeLog(tmp_path)
    files = log.write(pa.Table.from_batches([to_record_batch(rows)]), 42)
    log.commit(42, {"files": files})  # waits for the files, written in the background

    expected: dict[tuple[str, str], list[int]] = {}
    for n, (t, r) in enumerate(zip(tables, rows, strict=True)):
        expected.setdefault((names[t], f"{r.ts:%Y-%m-%d}"), []).append(n)
    assert files == [
        f"table_name={name}/date={day}/part-{42:020d}-{k:05d}.parquet"
        for k, (name, day) in enumerate(sorted(expected))
    ]
    for rel, key in zip(files, sorted(expected), strict=True):
        written = pq.read_table(tmp_path / "changelog" / rel)
        assert written.column("position").combine_chunks().field("row").to_pylist() == expected[key]
        assert set(written.column("batch_id").to_pylist()) == {42}


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
