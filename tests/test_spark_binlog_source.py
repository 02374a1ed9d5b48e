"""``format("binlog")``: binlog files decoded into change rows by Spark, in parallel.

Eight binlog files from the private MariaDB (one holding a single big transaction) are read:
one InputPartition per file, decoded on both cores (two Python worker processes); files cut
into parts at safe offsets, parts starting inside the transaction (its GTID still on every row);
always the same rows as a sequential local decode. A binlog without column names
(binlog_row_metadata=MINIMAL) needs a schema: CREATE TABLE statements or a schema history store.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pycanal.binlog.events import QueryEvent
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import SchemaHistory
from pycanal.spark.binlog_source import plan_partitions
from pycanal.spark.rows import ChangeRow
from pycanal.testing import PrivateMariaDB
from spark_fixtures import Binlog, capture, spark  # noqa: F401

pytestmark = pytest.mark.mariadb

ROWS_PER_FILE = 6000


def as_dicts(rows: list[ChangeRow]) -> list[dict[str, Any]]:
    return [{**r._asdict(), "position": r.position._asdict()} for r in rows]


def spark_rows(df: Any) -> list[dict[str, Any]]:
    rows = df.toArrow().to_pylist()
    return sorted(rows, key=lambda r: (r["position"]["file"], r["position"]["offset"], r["position"]["row"]))


@dataclasses.dataclass
class Files:
    db: str
    binlog: Binlog
    big: Path  # the file with one big transaction

    @property
    def filter(self) -> str:
        return f"{self.db}\\..*"


@pytest.fixture(scope="module")
def eight_files(mariadb: PrivateMariaDB) -> Files:
    db = f"spark_src_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    mariadb.execute(
        f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2), at DATETIME(3))"
    )

    def values(lo: int, n: int) -> str:
        return ",".join(
            f"({i}, 'item {i}', {i % 997}.25, '2024-01-01 00:00:00.{i % 1000:03d}')"
            for i in range(lo, lo + n)
        )

    def run() -> None:
        with mariadb.root_connection(db) as conn, conn.cursor() as cur:
            for f in range(8):
                base = f * 100_000
                if f == 5:  # one transaction of many statements: parts must start inside it
                    cur.execute("BEGIN")
                    for s in range(0, ROWS_PER_FILE, 200):
                        cur.execute(f"INSERT INTO items VALUES {values(base + s, 200)}")
                    cur.execute("COMMIT")
                else:
                    for s in range(0, ROWS_PER_FILE, 1000):
                        cur.execute(f"INSERT INTO items VALUES {values(base + s, 1000)}")
                    cur.execute(f"UPDATE items SET price = price + 1 WHERE id >= {base} AND id < {base + 50}")
                    cur.execute(f"DELETE FROM items WHERE id >= {base} AND id < {base + 10}")
                if f < 7:
                    cur.execute("FLUSH BINARY LOGS")

    binlog = capture(mariadb, run)
    assert len(binlog.files) == 8
    return Files(db, binlog, binlog.files[5])


def test_eight_files_decode_on_both_cores(spark: Any, eight_files: Files) -> None:  # noqa: F811
    paths = [str(p) for p in eight_files.binlog.files]
    df = spark.read.format("binlog").option("tables", eight_files.filter).load(paths)
    assert df.rdd.getNumPartitions() == 8

    def window(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Per partition: when its task ran, in which worker (defined here: pickled by value)."""
        from pyspark import TaskContext

        t0 = time.time()
        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict(
            {
                "part": [TaskContext.get().partitionId()],
                "pid": [os.getpid()],
                "t0": [t0],
                "t1": [time.time()],
                "n": [n],
            }
        )

    stats = df.mapInArrow(window, "part BIGINT, pid BIGINT, t0 DOUBLE, t1 DOUBLE, n BIGINT").collect()
    assert sorted(s.part for s in stats) == list(range(8))
    assert sum(s.n for s in stats) == 8 * (ROWS_PER_FILE + 60) - 60
    # Both cores: two tasks decoding at the same moment, in different Python workers.
    edges = sorted([(s.t0, 1) for s in stats] + [(s.t1, -1) for s in stats])
    running = [sum(d for _, d in edges[: i + 1]) for i in range(len(edges))]
    assert max(running) == 2, stats
    assert len({s.pid for s in stats}) >= 2
    assert spark_rows(df) == as_dicts(eight_files.binlog.rows(eight_files.filter))


def test_files_cut_into_parts_give_the_same_rows(spark: Any, eight_files: Files) -> None:  # noqa: F811
    options = {"maxPartitionBytes": str(eight_files.big.stat().st_size // 4), "tables": eight_files.filter}
    plan = plan_partitions({**options, "path": str(eight_files.big.parent / "mysql-bin.*")})
    inside = [p for p in plan if p.path == str(eight_files.big) and p.part.transaction_start is not None]
    assert len(inside) >= 2, [p.part for p in plan]

    df = spark.read.format("binlog").options(**options).load([str(p) for p in eight_files.binlog.files])
    assert df.rdd.getNumPartitions() > 8
    got = spark_rows(df)
    assert got == as_dicts(eight_files.binlog.rows(eight_files.filter))
    big = [r for r in got if r["position"]["file"] == eight_files.big.name]
    assert len(big) == ROWS_PER_FILE and len({r["position"]["gtid"] for r in big}) == 1


def test_bad_options_are_clear_errors(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(FileNotFoundError, match=r"no binlog files at .*/nothing-here"):
        plan_partitions({"path": str(tmp_path / "nothing-here")})
    (tmp_path / "mysql-bin.000001").write_bytes(b"\xfebin")
    with pytest.raises(ValueError, match="give schemaHistory or schemaDdl, not both"):
        plan_partitions({"path": str(tmp_path), "schemaHistory": "x", "schemaDdl": "y"})
    with pytest.raises(Exception, match=r"no binlog files at .*/nothing-here"):
        spark.read.format("binlog").load(str(tmp_path / "nothing-here")).collect()


# --------------------------------------------------------------------------- MINIMAL metadata
STATEMENTS = [
    "INSERT INTO t VALUES (1, 'a', 'x'), (2, 'b', 'y,x')",
    "ALTER TABLE t ADD COLUMN n INT DEFAULT 3, RENAME COLUMN name TO title",
    "UPDATE t SET title = 'c', id = 5 WHERE id = 1",
    "DELETE FROM t WHERE id = 2",
]
CREATE = "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(8), tags SET('x','y'))"


def test_minimal_metadata_needs_a_schema(spark: Any, mariadb_minimal: PrivateMariaDB, tmp_path: Path) -> None:  # noqa: F811
    db = f"spark_min_{uuid.uuid4().hex[:8]}"
    server = mariadb_minimal
    server.execute(f"CREATE DATABASE `{db}`")
    server.execute(CREATE, database=db)
    store = tmp_path / "schema.db"
    history = SchemaHistory(store, connect=lambda: server.root_connection(), filter=TableFilter(f"{db}\\..*"))

    def run() -> None:
        history.start(server.current_binlog())  # the model at the start: t as created
        with server.root_connection(db) as conn, conn.cursor() as cur:
            for sql in STATEMENTS:
                cur.execute(sql)

    binlog = capture(server, run)
    for e in binlog.events():  # what a pycanal server does while it streams: record the DDL
        if isinstance(e, QueryEvent):
            history.apply_event(e)
    history.close()
    paths = [str(p) for p in binlog.files]
    reader = spark.read.format("binlog").option("tables", f"{db}\\..*")
    with pytest.raises(
        Exception, match=r"the binlog has no column names \(binlog_row_metadata is not FULL\)"
    ):
        reader.load(paths).collect()

    by_ddl = spark_rows(reader.option("schemaDdl", f"USE `{db}`; {CREATE}").load(paths))
    images = [(r["op"], r["pk"], r["before"], r["after"]) for r in by_ddl]
    assert images == [
        ("INSERT", '{"id":1}', None, '{"id":1,"name":"a","tags":["x"]}'),
        ("INSERT", '{"id":2}', None, '{"id":2,"name":"b","tags":["x", "y"]}'),
        ("DDL", None, None, None),
        (
            "UPDATE",
            '{"id":5}',
            '{"id":1,"title":"a","tags":["x"],"n":3}',
            '{"id":5,"title":"c","tags":["x"],"n":3}',
        ),
        ("DELETE", '{"id":2}', '{"id":2,"title":"b","tags":["x", "y"],"n":3}', None),
    ]
    by_history = spark_rows(
        spark.read.format("binlog")
        .option("tables", f"{db}\\..*")
        .option("schemaHistory", str(store))
        .load(paths)
    )
    assert by_history == by_ddl
