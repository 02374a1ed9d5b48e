"""Issue 40: the lake on S3 (a real S3 server, S3Proxy). ``pycanal pipeline --lake s3://bucket/prefix``
streams a shop workload with DDL into the change log, the current-state tables, the journal and
Spark's checkpoint, all objects in the bucket (settings from the AWS_* environment); the driver is
SIGKILLed mid-stream and started again. At the end every table equals its source, the change log
holds every row change once, and Spark's Delta reads every table through s3a. Bad lakes (a wrong
endpoint, wrong keys, a missing bucket) are one line naming the lake, the secret never shown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline_helpers import await_exactly_once, binlog_positions, embedded_server, shop_under_way, stop_job
from pycanal.demo import TABLES
from pycanal.spark.apply import ChangeApplier
from pycanal.spark.check import compare_table
from pycanal.spark.current import table_path
from pycanal.spark.delta.rs import delta_table
from pycanal.spark.delta.tablestate import read_rows, read_table
from pycanal.spark.maintenance import Maintenance
from pycanal.storage import lake_path
from pycanal.testing import PrivateMariaDB
from pycanal.testing.s3 import PrivateS3
from spark_fixtures import arrow_rows, capture

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def s3() -> Iterator[PrivateS3]:
    with PrivateS3() as server:
        server.create_bucket("lake")
        yield server
        print(server.logs(200))  # shown when a test fails


@pytest.fixture
def s3_env(s3: PrivateS3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS settings in this process too (the test reads the lake as a user would)."""
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    return s3.env()


@pytest.fixture
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=53, binlog_row_metadata="FULL") as server:
        yield server


def start_job(lake: str, port: int, log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pycanal.cli", "pipeline", "--address", f"127.0.0.1:{port}",
             "--destination", "shop", "--filter", "shop\\..*", "--lake", lake,
             "--trigger", "500 milliseconds", "--master", "local[2]"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ | env,
        )  # fmt: skip


# Spark in a child process: this process's JVM (if another test started it) has no s3a jars.
_SPARK_READS = """
import json, sys, tempfile
from pycanal.spark.current import table_path
from pycanal.spark.session import lake_options, spark_session
from pycanal.storage import lake_path
lake = lake_path(sys.argv[1])
spark = spark_session(tempfile.mkdtemp(prefix="pycanal-s3-read-"), "s3-read", "local[2]", conf=lake_options(lake))
counts = {t: spark.read.format("delta").load(table_path(lake, "shop", t).spark_uri).count() for t in sys.argv[2:]}
spark.stop()
print("COUNTS " + json.dumps(counts))
"""


def test_pipeline_on_s3_survives_a_driver_sigkill_exactly_once(
    db: PrivateMariaDB, s3_env: dict[str, str], tmp_path: Path
) -> None:
    start = db.current_binlog()
    server, tcp = embedded_server(db, "shop", start, "shop\\..*")
    uri = "s3://lake/shop"
    lake = lake_path(uri)
    log = tmp_path / "job.log"
    job = start_job(uri, tcp.port, log, s3_env)
    try:
        work, writer = shop_under_way(db, lake, job, log, seconds=18, timeout=180)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        time.sleep(1)
        job = start_job(uri, tcp.port, log, s3_env)
        writer.join()
        assert work.error is None, work.error
        expected = binlog_positions(db, start)
        await_exactly_once(lake, expected, job, log, 240)
        sources = {}
        with db.root_connection("shop") as conn:
            for table, key in TABLES.items():
                check = compare_table(conn, lake, "shop", table, key)
                assert check.equal, f"{table}: {check.first_difference}"
                assert check.source_rows > 0
                sources[table] = check.source_rows
        stop_job(job)
        read = subprocess.run(
            [sys.executable, "-c", _SPARK_READS, uri, *TABLES],
            capture_output=True, text=True, timeout=300, env=os.environ | s3_env,
        )  # fmt: skip
        assert read.returncode == 0, read.stderr[-3000:]
        counts = json.loads(read.stdout.split("COUNTS ", 1)[1])
        assert counts == sources, "Spark's Delta reads other rows than the source has"
        assert s3_env["AWS_SECRET_ACCESS_KEY"] not in log.read_text()
        # Spark's checkpoint and pycanal's journal are objects of the lake too, nothing went to a
        # local path named after the URI.
        assert (lake / "_checkpoint" / "offsets").exists() and (lake / "_checkpoint" / "commits").exists()
        assert (lake / "_pycanal" / "applied").exists() and (lake / "_delta_log").exists() is False
        assert not Path("s3:").exists() and not (tmp_path / "s3:").exists()
    finally:
        stop_job(job)
        tcp.stop()
        server.stop()


@pytest.mark.parametrize(
    "change, says",
    [
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "error sending request"),
        ({"AWS_SECRET_ACCESS_KEY": "not-the-secret-0123456789"}, "s3://lake/bad"),
        ({}, "bucket 'no-such-bucket' does not exist"),
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "no credentials: set AWS_ACCESS_KEY_ID"),
    ],
    ids=["wrong endpoint", "wrong secret", "missing bucket", "no credentials"],
)
def test_a_bad_lake_is_one_line_naming_it(s3: PrivateS3, change: dict[str, str], says: str) -> None:
    uri = "s3://no-such-bucket/bad" if not change else "s3://lake/bad"
    env = {k: v for k, v in (os.environ | s3.env() | change).items() if v}
    done = subprocess.run(
        [sys.executable, "-m", "pycanal.cli", "pipeline", "--address", "127.0.0.1:11111", "--lake", uri],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "--lake" in lines[0] and says in lines[0], lines[0]
    assert s3.secret_key not in done.stderr and "not-the-secret-0123456789" not in done.stderr


_DDL_WORK = [
    "CREATE TABLE p (id INT PRIMARY KEY, a VARCHAR(10), b INT)",
    "CREATE TABLE gone (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE big (id INT PRIMARY KEY, v INT)",
    "INSERT INTO p VALUES (1, 'one', 10), (2, 'two', 20)",
    "INSERT INTO gone VALUES (1, 1)",
    "INSERT INTO big SELECT seq, seq FROM seq_1_to_12000",  # one file over 10,000 rows: vectors
    "ALTER TABLE p ADD COLUMN d INT NOT NULL DEFAULT 7, RENAME COLUMN a TO name",
    "UPDATE big SET v = -v WHERE id % 1000 = 0",
    "DELETE FROM big WHERE id % 997 = 0",
    "RENAME TABLE p TO q",
    "INSERT INTO q (id, name) VALUES (3, 'three')",
    "TRUNCATE TABLE gone",
    "INSERT INTO gone VALUES (5, 5)",
    "CREATE TABLE again (id INT PRIMARY KEY)",
    "INSERT INTO again VALUES (1)",
    "DROP TABLE again",
    *[f"UPDATE big SET v = v + 1 WHERE id = {k}" for k in range(1, 40)],
]


def test_the_same_changes_make_the_same_lake_on_s3_as_on_disk(
    mariadb: PrivateMariaDB, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """DDL (a rename, a truncate, a drop: moved copies on S3), deletion vectors, checkpoints, log
    expiry and vacuum, applied in 12 batches to a lake on disk and to one in S3: the same rows in
    every table, the same tables retired, and the S3 log's own upkeep done (checkpoints written,
    expired entries deleted)."""
    db = f"s3_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{db}`")

    def run() -> None:
        with mariadb.root_connection(db) as conn, conn.cursor() as cur:
            for sql in _DDL_WORK:
                cur.execute(sql)

    rows = arrow_rows(capture(mariadb, run).rows(f"{db}\\..*"))
    remote = lake_path(f"s3://lake/{db}")
    lakes = {"disk": lake_path(tmp_path / "lake"), "s3": remote}
    for lake in lakes.values():
        upkeep = Maintenance(compact_every=3, checkpoint_every=2, vacuum_every=4, retention_hours=0,
                             log_retention_hours=0, deletion_vectors=True)  # fmt: skip
        applier = ChangeApplier(lake, maintenance=upkeep, apply_threads=2)
        cuts = [rows.num_rows * k // 12 for k in range(13)]
        for batch_id, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
            applier(rows.slice(lo, hi - lo), batch_id)
        applier.wait()
        assert upkeep.done["checkpoint"] and upkeep.done["vacuum"]
    for table in ("q", "gone", "big"):
        disk, s3 = (read_table(table_path(lake, db, table)).sort_by("id") for lake in lakes.values())
        assert s3.equals(disk), table
        assert read_rows(delta_table(table_path(remote, db, table))).sort_by("id").equals(disk)
    assert not table_path(remote, db, "p").exists() and not table_path(remote, db, "again").exists()
    retired = {name: sorted((lake / "_pycanal" / "retired" / db).listdir()) for name, lake in lakes.items()}
    assert retired["s3"] == retired["disk"] == ["again"]
    big = table_path(remote, db, "big") / "_delta_log"
    names = big.listdir()
    assert any(n.endswith(".checkpoint.parquet") for n in names)
    assert "00000000000000000000.json" not in names  # expired past the newest checkpoint
    assert any(n.startswith("deletion_vector_") for n in table_path(remote, db, "big").listdir())
    assert not [n for n in (remote / "current" / db / "q").listdir() if n == "_pycanal_moving_to"]


def test_a_bucket_without_write_access_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A store that lets the keys read but not write (S3Proxy's read-only store): the pipeline stops
    at its start with one line naming the lake, nothing made."""
    with PrivateS3(properties={"s3proxy.read-only-blobstore": "true"}) as store:
        assert store.data_dir is not None
        (store.data_dir / "lake").mkdir()  # the bucket, made behind the server's back
        done = subprocess.run(
            [sys.executable, "-m", "pycanal.cli", "pipeline", "--address", "127.0.0.1:11111", "--lake", "s3://lake/ro"],
            capture_output=True, text=True, timeout=120, env=os.environ | store.env(),
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
        assert lines[0].startswith("pycanal: error: --lake: s3://lake/ro/_pycanal/probe-"), lines[0]
        assert store.secret_key not in done.stderr
        assert list((store.data_dir / "lake").iterdir()) == []


def test_pycanal_and_delta_rs_writing_one_s3_table_lose_no_commit(s3_env: dict[str, str]) -> None:
    """pycanal's writer (upserts and deletes, copy-on-write) and delta-rs (appends of other keys,
    and compaction rewriting pycanal's files) commit to one table in S3 at once: each commit is a
    create-once ``PUT``, a lost race is read again and redone, and at the end the table holds
    every change of both, with pycanal's last transaction id."""
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError

    from pycanal.spark.cow import KeyedTable

    schema = pa.schema([("id", pa.int32()), ("v", pa.int64())])
    path = lake_path(f"s3://lake/two-writers-{uuid.uuid4().hex[:8]}") / "t"
    write_deltalake(path.uri, schema.empty_table(), mode="error")
    ours = KeyedTable(path, schema, ["id"], "app")
    model: dict[int, int] = {}
    theirs: dict[int, int] = {}
    errors: list[BaseException] = []
    compactions: list[int] = []
    lost: list[str] = []
    stop = threading.Event()

    def other_writer() -> None:
        k = 100_000
        while not stop.is_set():
            try:
                rows = pa.table({"id": pa.array([k], pa.int32()), "v": pa.array([k], pa.int64())})
                write_deltalake(path.uri, rows, mode="append")
                theirs[k] = k
                k += 1
                if DeltaTable(path.uri).optimize.compact()["numFilesRemoved"]:
                    compactions.append(k)
            except CommitFailedError as exc:  # lost a race to pycanal's commit: tried again
                lost.append(str(exc)[:80])
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    other = threading.Thread(target=other_writer)
    other.start()
    txn = 0
    try:
        # Until both have committed a good many times (delta-rs' first commit takes a while).
        while txn < 30 or len(theirs) < 3 or not compactions:
            txn += 1
            assert txn <= 400 and not errors, (errors, len(theirs), compactions, lost)
            # A window for the other writer: delta-rs refuses to commit over a concurrent removal of
            # what it read (its serializable check: CommitFailedError, nothing written), so with
            # no pause its appends and compactions never commit.
            time.sleep(0.05 if txn % 4 else 0.3)
            ups = {k: txn * 1000 + k for k in range(txn, txn + 20)}
            dels = [txn - 1] if txn > 1 else []
            model.update(ups)
            for k in dels:
                model.pop(k, None)
            upserts = pa.table(
                {"id": pa.array(list(ups), pa.int32()), "v": pa.array(list(ups.values()), pa.int64())}
            )
            deletes = pa.table({"id": pa.array(dels, pa.int32())})
            assert ours.write(upserts, deletes, txn, {})
    finally:
        stop.set()
        other.join(120)
    assert errors == []
    table = DeltaTable(path.uri)
    got = dict(zip(*(table.to_pyarrow_table().column(c).to_pylist() for c in ("id", "v")), strict=True))
    assert got == {**model, **theirs}
    assert table.transaction_version("app") == txn


def test_snapshot_chunk_files_on_s3(s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot chunks written as data files of their S3 table where they were read
    (``chunk_files``): committed as they are, the lake the same as on disk."""
    from pycanal.spark import cow
    from test_spark_chunk_files import DDL, EXPECTED, _chunk_afters, history, lake_files

    monkeypatch.setattr(cow, "_SMALL_ROWS", 2)  # vectors, not rewrites, for these tiny files
    monkeypatch.setattr(cow, "_PURGE", 1.0)
    lake = f"s3://lake/chunks_{uuid.uuid4().hex[:8]}"
    batches = history(lake)  # type: ignore[arg-type]
    applier = ChangeApplier(lake, schema_ddl=DDL)
    for batch_id, rows in enumerate(batches):
        applier(rows, batch_id)
    path = table_path(lake, "shop", "inv")
    assert read_table(path).sort_by("id").to_pylist() == [
        dict(zip(("id", "v", "name"), r, strict=True)) for r in EXPECTED
    ]
    named = {json.loads(a)["file"]["name"] for a in _chunk_afters(batches)}
    assert len(named) == 2 and named <= lake_files(lake)  # type: ignore[arg-type]
