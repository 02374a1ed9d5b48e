"""Current-state tables that Delta Lake for Spark created before pycanal saw the source's CREATE
TABLE, with the table features Spark turns on by default or when asked: pycanal takes the table
over and writes it correctly (lake == source, read by pycanal and by Spark's Delta), or refuses
with one line naming the table and the features, leaving the table as Spark made it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from pycanal.spark.apply import ChangeApplier
from pycanal.spark.batch import ApplyError
from pycanal.spark.check import compare_table
from pycanal.spark.current import table_path
from pycanal.spark.maintenance import Maintenance
from pycanal.testing import PrivateMariaDB
from spark_fixtures import arrow_rows, capture, spark  # noqa: F401

pytestmark = pytest.mark.mariadb

# case -> (what Spark's CREATE TABLE adds, the features pycanal refuses; None: it writes the table)
CASES = {
    "defaults": ("", None),
    "vectors": ("TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')", None),
    "change-feed": ("TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')", None),
    "check": ("", None),  # a CHECK constraint, added after
    "clustered": ("CLUSTER BY (id)", "clustering, domainMetadata"),
    "row-tracking": ("TBLPROPERTIES ('delta.enableRowTracking' = 'true')", "domainMetadata, rowTracking"),
    "column-mapping": ("TBLPROPERTIES ('delta.columnMapping.mode' = 'name')", "columnMapping"),
    "v2-checkpoints": ("TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')", "v2Checkpoint"),
    "type-widening": ("TBLPROPERTIES ('delta.enableTypeWidening' = 'true')", "typeWidening"),
    "column-defaults": (
        "TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')",
        "allowColumnDefaults",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_table_spark_created_first(
    case: str,
    mariadb: PrivateMariaDB,
    spark: Any,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    clause, refused = CASES[case]
    db = f"first_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    lake = tmp_path / "lake"
    path = str(table_path(lake, db, "t"))
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT NOT NULL, v STRING, n BIGINT) USING delta {clause}")
    if case == "check":
        spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (id > 0)")
    made = DeltaTable(path).version()
    applier = ChangeApplier(lake, maintenance=Maintenance(checkpoint_every=2, deletion_vectors=True))
    statements = [
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n BIGINT)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_12000",
        "UPDATE t SET v = 'changed' WHERE id % 7 = 0",
        "DELETE FROM t WHERE id % 11 = 0",
        "UPDATE t SET n = -n WHERE id % 5 = 0",
    ]
    batches = [
        capture(mariadb, lambda s=s: mariadb.execute(s, database=db)).rows(f"{db}\\..*") for s in statements
    ]
    if refused is not None:
        with pytest.raises(ApplyError, match=rf"current-state table {path} \({db}\.t\) .*: {refused};"):
            applier(arrow_rows(batches[0]), 0)
        assert DeltaTable(path).version() == made  # nothing written
        assert spark.read.format("delta").load(path).count() == 0
        return
    for b, rows in enumerate(batches):
        applier(arrow_rows(rows), b)
    assert DeltaTable(path).version() > made  # the table Spark made, written
    with mariadb.root_connection(db) as conn:
        for reader in (None, spark):
            check = compare_table(conn, lake, db, "t", "id", spark=reader)
            assert check.equal, check.first_difference
