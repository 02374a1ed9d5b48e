"""Snapshot chunks written by their executors as current-state data files (``chunk_files``): the
lake the driver commits from them is the lake their ``READ`` rows give (the images path, which
stays the oracle), with the stream's changes before and after the chunk, in one round or several."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pycanal.snapshot.chunks import Chunk
from pycanal.snapshot.tables import SourceColumn, SourceTable
from pycanal.snapshot.window import ChunkColumns
from pycanal.spark import cow
from pycanal.spark.apply import ChangeApplier
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.chunk_files import write_chunk_file
from pycanal.spark.current import table_path
from pycanal.spark.delta.log import live_adds
from pycanal.spark.rows import ChangeRow, RowPosition
from pycanal.spark.snapshot_rows import SnapshotRows
from pycanal.storage import lake_path
from spark_fixtures import arrow_rows
from test_spark_apply import current_rows

CREATE = "CREATE TABLE `inv` (`id` int(11) NOT NULL, `v` int(11) DEFAULT NULL, `name` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))"
DDL = "CREATE TABLE shop.inv (id INT NOT NULL, v INT DEFAULT NULL, name VARCHAR(20) DEFAULT NULL, PRIMARY KEY (id))"
TABLE = SourceTable(
    "shop", "inv", (SourceColumn("id", "int", "int(11)"), SourceColumn("v", "int", "int(11)"),
                    SourceColumn("name", "varchar", "varchar(20)")), (0,), 10,
)  # fmt: skip
BINLOG = "mysql-bin.000007"


def change(op: str, offset: int, key: int, v: int | None = None, old: int | None = None) -> ChangeRow:
    def image(k: int, value: int | None) -> str:
        return json.dumps({"id": k, "v": value, "name": f"n{value}"}, separators=(",", ":"))

    after = None if op == "DELETE" else image(key, v)
    before = (
        image(key, v)
        if op == "DELETE"
        else image(old if old is not None else key, 0)
        if op == "UPDATE"
        else None
    )
    pk = json.dumps({"id": key})
    return ChangeRow(
        op, "shop", "inv", pk, before, after, RowPosition(BINLOG, offset, 0, None),
        dt.datetime(2026, 11, 30, tzinfo=dt.UTC), None, None,
    )  # fmt: skip


def chunk(
    lake: Path | None, offset: int, lower: int | None, upper: int | None, rows: dict[int, int]
) -> pa.Table:
    """A chunk's READ and CHUNK rows at ``offset``; with ``lake``, its file written there."""
    keys = sorted(rows)
    read = ChunkColumns(
        TABLE, Chunk("shop", "inv", None if lower is None else (lower,), None if upper is None else (upper,)),
        BINLOG, offset, 1_700_000_000,
        [pa.array(keys, pa.int32()), pa.array([rows[k] for k in keys], pa.int32()),
         pa.array([f"n{rows[k]}" for k in keys])], 0, (BINLOG, offset - 50),
    )  # fmt: skip
    hook = None if lake is None else (lambda r, afters: write_chunk_file(lake_path(lake), r, CREATE, afters))
    return pa.Table.from_batches(list(SnapshotRows().batches([read], chunk_file=hook)))


def batch(*parts: Any) -> pa.Table:
    return pa.concat_tables([p if isinstance(p, pa.Table) else arrow_rows([p]) for p in parts])


def lake_files(lake: Path) -> set[str]:
    path = table_path(lake, "shop", "inv")
    return set(live_adds(path / "_delta_log", _version(path)))


def _version(path: Any) -> int:
    return max(int(n[:20]) for n in (path / "_delta_log").listdir() if n.endswith(".json"))


def history(lake: Path | None) -> list[pa.Table]:
    return [
        batch(*[change("INSERT", 100 + i, i, i) for i in range(1, 9)]),  # the lake before: 1..8
        batch(
            change("INSERT", 200, 9, 9),  # outside the chunk's range
            change("INSERT", 210, 0, 0),  # inside, gone before the chunk's position
            change("DELETE", 220, 0, 0),
            change("UPDATE", 230, 2, 21),  # inside: the chunk has its row at 500, after the next change
            chunk(lake, 500, None, 5, {1: 10, 2: 22, 3: 30}),  # [-inf, 5): 4 and 0 were not there
            change("UPDATE", 600, 3, 33),  # after the chunk: applied over its row
            change("DELETE", 610, 1, 10),
            change("INSERT", 620, 4, 44),
            change("UPDATE", 630, 7, 77),  # outside
        ),
        batch(
            change("UPDATE", 450, 2, 22),  # before the first chunk's position, in the next micro-batch
            chunk(lake, 900, 5, None, {5: 50, 6: 60, 7: 77, 8: 8}),  # [5, +inf): 9 was not there
        ),
    ]


EXPECTED = [
    (2, 22, "n22"),
    (3, 33, "n33"),
    (4, 44, "n44"),
    (5, 50, "n50"),
    (6, 60, "n60"),
    (7, 77, "n77"),
    (8, 8, "n8"),
]


@pytest.mark.parametrize("rounds", ["one-by-one", "together"])
def test_chunk_files_give_the_lake_their_read_rows_give(
    tmp_path: Path, rounds: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's changes before a chunk (in its range: superseded by it; a key gone before
    it: deleted by its range), after it (over its rows), and outside its range; batches applied
    one by one, and all in one round (catch_up after a crash). The files are committed as they
    are (deletion vectors hide their rows the stream changed after: here files of 2 rows and
    more are not rewritten however many), and the lake
    equals the images path's."""
    monkeypatch.setattr(cow, "_SMALL_ROWS", 2)
    monkeypatch.setattr(cow, "_PURGE", 1.0)
    results = {}
    for name, files in [("images", None), ("files", tmp_path / f"files-{rounds}")]:
        lake = files or tmp_path / f"images-{rounds}"
        batches = history(files)
        if rounds == "one-by-one":
            applier = ChangeApplier(lake, schema_ddl=DDL)
            steps = []
            for batch_id, rows in enumerate(batches):
                applier(rows, batch_id)
                steps.append(current_rows(lake, "shop", "inv"))
            results[f"{name} after each"] = steps
            taken = {"taken": 2, "left": 0} if files else {"taken": 0, "left": 0}
            assert applier.chunk_files == taken
            if files:  # each round's record says what it took
                assert _record(lake, 1)["chunk_files"] == {"taken": 1, "left": 0}
        else:
            ChangeApplier(lake, schema_ddl=DDL)(batches[0], 0)
            log = ChangeLog(lake)
            for batch_id, rows in enumerate(batches[1:], 1):
                log.write(rows, batch_id)
                log.commit(batch_id)
            ChangeApplier(lake, schema_ddl=DDL).catch_up()
        results[name] = current_rows(lake, "shop", "inv")
        if files is not None:
            named = [json.loads(r)["file"]["name"] for r in _chunk_afters(batches)]
            live = lake_files(lake)
            assert set(named) <= live  # committed as they are, not rewritten
    assert results["files"] == results["images"] == (["id", "v", "name"], EXPECTED)
    if rounds == "one-by-one":  # a chunk's row, not an older change of its key before it
        assert results["files after each"] == results["images after each"]
        assert (2, 22, "n22") in results["files after each"][1][1]


def _record(lake: Path, batch_id: int) -> dict:
    return json.loads((lake / "_pycanal" / "applied" / f"{batch_id:020d}.json").read_text())


def _chunk_afters(batches: list[pa.Table]) -> list[str]:
    out = []
    for rows in batches:
        out += [
            a for o, a in zip(rows["op"].to_pylist(), rows["after"].to_pylist(), strict=True) if o == "CHUNK"
        ]
    return out


def test_a_chunk_file_the_model_types_otherwise_is_left_for_the_read_rows(tmp_path: Path) -> None:
    """A file typed from another definition of the table (here ``v`` BIGINT: a DDL between the
    read and the apply) is not taken: the READ rows are applied, and the file is deleted."""
    other = CREATE.replace("`v` int(11)", "`v` bigint(20)")
    keys = [1, 2]
    read = ChunkColumns(
        TABLE, Chunk("shop", "inv", None, None), BINLOG, 500, 1_700_000_000,
        [pa.array(keys, pa.int32()), pa.array([10, 20], pa.int32()), pa.array(["n10", "n20"])], 0, (BINLOG, 450),
    )  # fmt: skip
    rows = pa.Table.from_batches(
        list(
            SnapshotRows().batches(
                [read], chunk_file=lambda r, a: write_chunk_file(lake_path(tmp_path), r, other, a)
            )
        )
    )
    name = json.loads(_chunk_afters([rows])[0])["file"]["name"]
    path = table_path(tmp_path, "shop", "inv") / name
    assert path.exists()
    ChangeApplier(tmp_path, schema_ddl=DDL)(rows, 0)
    assert current_rows(tmp_path, "shop", "inv")[1] == [(1, 10, "n10"), (2, 20, "n20")]
    assert _record(tmp_path, 0)["chunk_files"] == {"taken": 0, "left": 1}
    assert not path.exists() and name not in lake_files(tmp_path)
