"""Delta protocol rules pycanal's log writers keep with other writers about (``pycanal.spark.delta``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pycanal.spark.changelog import ChangeLog
from pycanal.spark.delta import checkpoint
from pycanal.spark.rows import ChangeRow, RowPosition, to_record_batch


def _commit(log: ChangeLog, b: int) -> None:
    import datetime as dt

    pos = RowPosition("mysql-bin.000001", b, 0, None)
    ts = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
    log.write(
        pa.Table.from_batches(
            [to_record_batch([ChangeRow("INSERT", "d", "t", "1", None, "{}", pos, ts, None, None)])]
        ),
        b,
    )
    log.commit(b)


def test_last_checkpoint_never_moves_back_with_two_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = ChangeLog(tmp_path, checkpoint_every=0)
    for b in range(20):
        _commit(log, b)  # versions 1-20
    assert checkpoint.from_log(log.log_dir, 20)  # writer A
    pointer = log.log_dir / "_last_checkpoint"
    assert json.loads(pointer.read_text())["version"] == 20
    # Writer B read the pointer (version 0) before A replaced it, and replaces it after A.
    monkeypatch.setattr(checkpoint, "last_checkpoint", lambda _dir: (0, None))
    assert checkpoint.from_log(log.log_dir, 10)
    monkeypatch.undo()
    assert json.loads(pointer.read_text())["version"] == 20
    assert (log.log_dir / f"{10:020d}.checkpoint.parquet").is_file()
    assert DeltaTable(str(log.dir)).to_pyarrow_table().num_rows == 20 and ChangeLog(tmp_path).rows() == 20


def test_a_file_given_a_new_vector_stays_live_whatever_the_order_of_its_actions() -> None:
    """Delta Lake for Spark's DELETE on a table with deletion vectors commits the file's ``add``
    (new vector) before its ``remove`` (old vector); replayed in file order, the file was gone and
    pycanal's next write lost its rows (tests/test_spark_mixed_writers.py found it)."""
    from pycanal.spark.delta.log import LogState

    old = {"storageType": "u", "pathOrInlineDv": "a", "offset": 1, "sizeInBytes": 40, "cardinality": 3}
    new = {**old, "pathOrInlineDv": "b", "cardinality": 5}
    for order in ([("add", new), ("remove", old)], [("remove", old), ("add", new)]):
        state = LogState(live={"f.parquet": {"path": "f.parquet", "deletionVector": old}})
        state.apply([(kind, {"path": "f.parquet", "deletionVector": dv}) for kind, dv in order])
        assert state.live["f.parquet"]["deletionVector"] == new
