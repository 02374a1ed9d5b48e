"""Mixed writers: Delta Lake for Spark changes a current-state table between and during pycanal's
writes -- SET TBLPROPERTIES, DELETE, ADD COLUMNS and an UPDATE of the added column, OPTIMIZE,
VACUUM -- and pycanal detects each concurrent commit, keeps it, and the table still equals the
source (less the rows the user deleted; the user's column as Delta's MERGE keeps it: unchanged by
pycanal's updates, null in its inserts, carried through a DDL rewrite)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from pycanal.spark.apply import ChangeApplier
from pycanal.spark.check import compare_table
from pycanal.spark.current import table_path
from pycanal.spark.delta.tablestate import read_rows
from pycanal.spark.maintenance import Maintenance
from pycanal.testing import PrivateMariaDB
from spark_fixtures import arrow_rows, capture, spark  # noqa: F401

pytestmark = pytest.mark.mariadb

ROWS = 12_000  # over cow's 10,000-row threshold: with deletion vectors, changes become vectors


def _rows(session: Any, path: str) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in session.read.format("delta").load(path).toArrow().to_pylist()}


# With deletion vectors (the default) alone: the 12,000-row file takes vectors and the small files
# around it copy-on-write, so both writes meet Spark's commits here; a copy-on-write-only run took
# another 87 s of the suite for no other path (test_spark_cow covers its conflicts without Spark).
def test_spark_commits_between_and_during_pycanal_writes_are_kept(
    mariadb: PrivateMariaDB,
    spark: Any,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    db = f"mixed_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    lake = tmp_path / "lake"
    applier = ChangeApplier(
        lake, maintenance=Maintenance(checkpoint_every=3, compact_every=0, deletion_vectors=True)
    )
    path = str(table_path(lake, db, "t"))
    batch = iter(range(1_000))
    deleted: set[int] = set()  # by the user

    def source(*statements: str) -> None:
        """Run ``statements`` on the source, apply their binlog as one micro-batch, and check the
        table's keys (read by pycanal) are the source's less those the user deleted."""
        run = capture(mariadb, lambda: [mariadb.execute(s, database=db) for s in statements])
        applier(arrow_rows(run.rows(f"{db}\\..*")), next(batch))
        with mariadb.root_connection(db) as conn, conn.cursor() as cur:
            cur.execute("SELECT id FROM t")
            want = {k for (k,) in cur.fetchall()} - deleted
        got = set(read_rows(DeltaTable(path), ["id"]).column("id").to_pylist())
        assert got == want, (statements, sorted(got - want)[:10], sorted(want - got)[:10])

    source(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_{ROWS - 2_000}",
    )
    for low in (ROWS - 1_999, ROWS - 999):  # two more files, for OPTIMIZE to merge
        source(f"INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_{low}_to_{low + 999}")
    # The user's commits land between pycanal's: its open table is behind each time.
    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('team' = 'analytics')")
    source("UPDATE t SET n = n + 1 WHERE id % 97 <> 0 AND id % 7 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 97 = 0")
    deleted.update(range(97, ROWS + 1, 97))
    source(
        "UPDATE t SET v = 'changed' WHERE id % 97 <> 0 AND id % 11 = 0",
        "DELETE FROM t WHERE id % 89 = 0 AND id % 97 <> 0",
    )
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (note STRING COMMENT 'the analysts own it')")
    spark.sql(f"UPDATE delta.`{path}` SET note = concat('u', id) WHERE id % 10 = 1")
    source(
        "UPDATE t SET n = -n WHERE id % 97 <> 0 AND id % 20 = 1",  # keeps the user's note
        f"INSERT INTO t SELECT seq, 'new', seq FROM seq_{ROWS + 1}_to_{ROWS + 50}",  # no note
    )
    source("UPDATE t SET v = 'again' WHERE id % 97 <> 0 AND id % 13 = 0")
    source(
        "ALTER TABLE t ADD COLUMN extra INT DEFAULT 7",
        "UPDATE t SET extra = id WHERE id % 97 <> 0 AND id % 17 = 0",
    )

    # And during them: Spark commits while pycanal's batches are being written.
    stop, done, errors = threading.Event(), {"SET": 0, "OPTIMIZE": 0, "refused": 0}, []

    def user() -> None:
        while not stop.is_set():
            for op, sql in (("SET", f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('round' = '{done['SET']}')"),
                            ("OPTIMIZE", f"OPTIMIZE delta.`{path}`")):  # fmt: skip
                try:
                    spark.sql(sql)
                    done[op] += 1
                except Exception as exc:  # Spark's conflict check refused its commit: a user retries
                    if "Concurrent" not in type(exc).__name__ + str(exc):
                        errors.append(exc)
                    done["refused"] += 1

    thread = threading.Thread(target=user)
    thread.start()
    try:
        for k in range(3, 60):
            if done["SET"] >= 3 or errors:
                break
            source(f"UPDATE t SET n = n + 1 WHERE id % 97 <> 0 AND id % {k} = 0")
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert done["SET"], done  # a Spark commit landed while pycanal was writing
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    source("UPDATE t SET v = 'last' WHERE id % 97 <> 0 AND id % 19 = 0")

    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()]
    for op in ("SET TBLPROPERTIES", "DELETE", "ADD COLUMNS", "UPDATE", "OPTIMIZE", "VACUUM END"):
        assert op in operations, (op, operations)
    got = _rows(spark, path)
    assert not deleted & got.keys(), "rows the user deleted are back"
    notes = {k: r["note"] for k, r in got.items() if r["note"] is not None}
    assert notes == {k: f"u{k}" for k in got if k % 10 == 1 and k <= ROWS}
    properties = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["properties"]
    assert properties["team"] == "analytics"
    # The source forgets the rows the user deleted: then lake == source, by both readers.
    source(f"DELETE FROM t WHERE id % 97 = 0 AND id <= {ROWS}")
    with mariadb.root_connection(db) as conn:
        for reader in (None, spark):
            check = compare_table(conn, lake, db, "t", "id", spark=reader)
            assert check.equal, check.first_difference


def test_a_source_column_named_as_a_users_stops_the_apply_naming_both(
    mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    from deltalake.schema import Field, PrimitiveType

    from pycanal.spark.batch import ApplyError

    db = f"mixed_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    applier = ChangeApplier(tmp_path / "lake")
    path = str(table_path(tmp_path / "lake", db, "t"))

    def source(*statements: str, batch: int) -> None:
        run = capture(mariadb, lambda: [mariadb.execute(s, database=db) for s in statements])
        applier(arrow_rows(run.rows(f"{db}\\..*")), batch)

    source("CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)", batch=0)
    DeltaTable(path).alter.add_columns([Field("note", PrimitiveType("string"))])  # a user's
    source("INSERT INTO t VALUES (2, 2)", batch=1)  # kept: null in the insert
    assert read_rows(DeltaTable(path)).sort_by("id").to_pylist() == [
        {"id": 1, "v": 1, "note": None},
        {"id": 2, "v": 2, "note": None},
    ]
    with pytest.raises(ApplyError, match=rf"{db}\.t at .*column `Note`.*`note` a user added.*{path}"):
        source("ALTER TABLE t ADD COLUMN Note INT", batch=2)
