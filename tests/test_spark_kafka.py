"""``pycanal pipeline --kafka``: Canal's topics read by Spark's Kafka source into the lake.

* Rows: the records of a binlog's entries, flat and protobuf, give the rows ``EntryRows`` gives
  the entries (``format("canal")``'s), but for what a flat message does not carry (its binlog
  position and GTID); a record of partition 1 fails rather than apply out of order, and a
  pipeline given one stops with that message in one line, exit 1, nothing written.
* End to end: two ``pycanal server`` processes in kafka mode publish one table each, flat and
  protobuf, with DDL mid-stream; one ``pycanal pipeline --kafka --topic-pattern`` (its own process)
  builds the lake; its driver is SIGKILLed mid-stream and started again from its checkpoint. Every
  table equals its source (read by pycanal and by Spark's Delta), and the change log holds each row
  change once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mq_kafka_support import Workload, write_conf
from pipeline_helpers import stop_job
from pycanal.mq.flat import flat_messages
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.spark.apply import ChangeApplier, applied_batch_ids
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.check import compare_table
from pycanal.spark.kafka_rows import KafkaRows, Resends
from pycanal.spark.rows import ChangeRow, RowPosition, RowsError
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port
from pycanal.testing.kafka import PrivateKafka
from spark_fixtures import arrow_rows, spark  # noqa: F401
from test_spark_rows import Capture, capture, configuration  # noqa: F401

pytestmark = pytest.mark.mariadb

PYCANAL = [sys.executable, "-m", "pycanal.cli"]


def _packet(entries: list[pb.Entry]) -> bytes:
    body = cp.Messages(batch_id=1, messages=[e.SerializeToString() for e in entries])
    return cp.Packet(type=cp.MESSAGES, body=body.SerializeToString()).SerializeToString()


@pytest.mark.parametrize("variant", ["index_utc", "label_kolkata"])
def test_records_give_the_rows_of_their_entries(capture: Capture, variant: str) -> None:  # noqa: F811
    new, entries = configuration(capture, variant)
    entries = [e for e in entries if e.entryType != pb.ROWDATA or e.header.schemaName == capture.db]
    expected = list(new().rows(entries))
    zone = "Asia/Kolkata" if variant == "label_kolkata" else "UTC"
    assert list(KafkaRows(timezone=zone).rows([("t", 0, 7, _packet(entries))])) == expected

    records = [("t", 0, i, m.to_json()) for i, m in enumerate(flat_messages(entries, 1, 0))]
    got = list(KafkaRows(timezone=zone).rows(records))
    assert len(got) == len(expected)
    assert {g.position.file for g in got} == {"kafka:t:0"}
    assert {g.position.gtid for g in got} == {None}
    for g, e in zip(got, expected, strict=True):  # all but the binlog position and GTID
        assert g._replace(position=e.position) == e, f"{g}\n!=\n{e}"
    offsets = [(g.position.offset, g.position.row) for g in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def test_a_record_of_partition_1_fails() -> None:
    flat = b'{"data":null,"database":"d","es":0,"id":1,"isDdl":false,"type":"QUERY","sql":"x"}'
    assert list(KafkaRows().rows([("t", 0, 0, flat)])) == []
    with pytest.raises(RowsError, match=r"topic 't' partition 1: .* partition 0 alone"):
        list(KafkaRows().rows([("t", 1, 0, flat)]))


def _row(op: str, off: int, sql: str | None = None, after: str | None = None) -> ChangeRow:
    key = None if op == "DDL" else after[: after.index(",")] + "}"
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return ChangeRow(op, "d", "t", key, None, after, RowPosition("mysql-bin.000001", off, 0, None), when, sql,
                     "d" if sql else None)  # fmt: skip


def test_a_servers_resent_rows_are_dropped(tmp_path: Path) -> None:
    """A server sends a batch again after a failed send: its rows come again after later ones (here
    an INSERT of the old layout after an ALTER, which the current state cannot take). Each table's
    rows at or before its last position are dropped, the same on a replay and after a restart
    (from the saved positions, or from the change log where the save did not happen)."""
    sent = [
        _row("DDL", 10, sql="CREATE TABLE t (id INT PRIMARY KEY, v INT)"),
        _row("INSERT", 20, after='{"id":1,"v":1}'),
        _row("DDL", 30, sql="ALTER TABLE t ADD COLUMN w INT"),
        _row("INSERT", 40, after='{"id":2,"v":2,"w":2}'),
    ]
    applier, resends = ChangeApplier(tmp_path, zero_dates="null"), Resends(tmp_path)
    first = resends.drop(arrow_rows(sent))
    assert first.num_rows == 4
    applier(first, 0)
    resends.save(0, first)
    again = arrow_rows([*sent[1:], _row("INSERT", 50, after='{"id":3,"v":3,"w":3}')])
    assert Resends(tmp_path).drop(again).equals(resends.drop(again))  # saved: the same after a restart
    second = resends.drop(again)
    assert second["position"].combine_chunks().field("offset").to_pylist() == [50]
    applier(second, 1)  # applied, not saved: a restart takes the positions from the change log
    assert Resends(tmp_path).drop(again).num_rows == 0
    flat = _row("INSERT", 5, after='{"id":4,"v":4,"w":4}')._replace(
        position=RowPosition("kafka:t:0", 5, 0, None)
    )
    assert Resends(tmp_path).drop(arrow_rows([flat])).num_rows == 1  # a flat row has no binlog position
    applier.wait()
    assert compare_rows(tmp_path) == {1: {"id": 1, "v": 1, "w": None}, 2: {"id": 2, "v": 2, "w": 2},
                                      3: {"id": 3, "v": 3, "w": 3}}  # fmt: skip


def compare_rows(lake: Path) -> dict[int, dict[str, Any]]:
    from pycanal.spark.current import table_path
    from pycanal.spark.delta.tablestate import read_table

    return {r["id"]: r for r in read_table(table_path(lake, "d", "t")).to_pylist()}


# ---------------------------------------------------------------------------------- end to end
def _wait(what: str, done: Callable[[], bool], job: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert job.poll() is None, f"the job exited ({what}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.3)


def _pipeline(
    lake: Path, kafka: PrivateKafka, pattern: str, log: Path, option: str = "--topic-pattern"
) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [*PYCANAL, "pipeline", "--kafka", kafka.bootstrap_servers, option, pattern]
            + [
                "--lake",
                str(lake),
                "--trigger",
                "500 milliseconds",
                "--master",
                "local[2]",
                "--progress",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and the workers die with it
        )


def _server(conf: Path, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [*PYCANAL, "server", "--conf", str(conf)], stdout=out, stderr=subprocess.STDOUT
        )


def _commits(lake: Path) -> int:
    last = ChangeLog(lake).last_batch()
    return 0 if last is None else last + 1


def test_pipeline_reads_flat_and_protobuf_topics_exactly_once(
    mariadb: PrivateMariaDB,
    kafka: PrivateKafka,
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    sfx = uuid.uuid4().hex[:8]
    work = Workload(mariadb, sfx, seed=39)
    start = mariadb.current_binlog()
    work.create()
    servers = []
    for flat, name in ((True, "a"), (False, "b")):
        topic = f"sk-{name}-{sfx}"
        kafka.create_topic(topic, 1)
        conf = write_conf(
            tmp_path / f"conf-{name}",
            mariadb,
            start,
            bootstrap=kafka.bootstrap_servers,
            tables=f"pycanal\\\\.{work.table(name)}",
            canal={
                "canal.mq.flatMessage": str(flat).lower(),
                "canal.mq.canalBatchSize": 50,
                "canal.metrics.pull.port": free_port(),  # two servers
            },
            instance={"canal.mq.topic": topic},
        )
        servers.append(_server(conf, tmp_path / f"server-{name}.log"))
    lake, log = tmp_path / "lake", tmp_path / "job.log"
    job = _pipeline(lake, kafka, f"sk-[ab]-{sfx}", log)
    writer: threading.Thread | None = None
    try:
        _wait("the first micro-batch", lambda: _commits(lake) >= 1, job, log, 120)
        assert all(server.poll() is None for server in servers), "a server stopped"

        def write() -> None:
            for k in range(40):
                work.round(k)
                time.sleep(0.05)
            work.mixed()  # a's ALTER goes through the flat topic, b's through the protobuf one
            with mariadb.root_connection() as conn, conn.cursor() as cur:
                cur.execute(f"ALTER TABLE pycanal.{work.table('b')} ADD COLUMN extra INT NULL")
                work._exec(cur, "b", "UPDATE {t} SET extra = id WHERE id % 3 = 0")

        writer = threading.Thread(target=write)
        writer.start()
        first = _commits(lake)
        _wait("a few micro-batches", lambda: _commits(lake) >= first + 3, job, log, 60)
        assert writer.is_alive(), "the workload ended before the driver was killed"
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        killed_at = _commits(lake)
        time.sleep(1)  # the workload goes on while no driver runs
        job = _pipeline(lake, kafka, f"sk-[ab]-{sfx}", log)
        writer.join()
        expected = sum(work.rows.values())

        ops = pa.array(["INSERT", "UPDATE", "DELETE"])

        def row_changes() -> int:
            return pc.sum(pc.is_in(ChangeLog(lake).read()["op"], ops)).as_py() or 0

        _wait(f"{expected} row changes in the change log", lambda: row_changes() >= expected, job, log, 120)
        _wait(
            "the current state of the last batch",
            lambda: applied_batch_ids(lake)[-1:] == [ChangeLog(lake).last_batch()],
            job,
            log,
            60,
        )
        assert _commits(lake) > killed_at
        table = ChangeLog(lake).read()
        rows = table.filter(pc.is_in(table["op"], ops))
        assert rows.num_rows == expected
        position = rows["position"].combine_chunks()
        keys = list(zip(*(position.field(f).to_pylist() for f in ("file", "offset", "row")), strict=True))
        assert len(set(keys)) == len(keys), "a change appears twice in the change log"
        assert {f.startswith("kafka:") for f, _, _ in keys} == {True, False}  # flat and protobuf rows
        for name in ("a", "b"):
            mine = pc.equal(rows["table"], work.table(name))
            assert pc.sum(mine).as_py() == work.rows[name]
        ddl = table.filter(pc.equal(table["op"], "DDL"))["table"].to_pylist()
        assert work.table("a") in ddl and work.table("b") in ddl
        with mariadb.root_connection("pycanal") as conn:
            for name in ("a", "b"):
                check = compare_table(conn, lake, "pycanal", work.table(name), "id")
                assert check.equal, f"{name}: {check.first_difference}"
                assert check.source_rows > 0
                check = compare_table(conn, lake, "pycanal", work.table(name), "id", spark=spark)
                assert check.equal, f"{name} read by Spark's Delta: {check.first_difference}"
        assert "applied up to batch" in log.read_text()
    finally:
        if writer is not None:
            writer.join()
        stop_job(job)
        for server in servers:
            server.send_signal(signal.SIGTERM)
            server.wait(30)


def test_pipeline_stops_at_a_record_of_partition_1(kafka: PrivateKafka, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    topic = f"sk-two-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, b'{"data":null,"database":"d","id":1,"isDdl":false,"type":"QUERY"}', partition=1)
    assert producer.flush(30) == 0
    lake, log = tmp_path / "lake", tmp_path / "job.log"
    job = _pipeline(lake, kafka, topic, log, "--topic")
    try:
        assert job.wait(120) == 1, log.read_text()[-3000:]
    finally:
        stop_job(job)
    text = log.read_text()
    assert (
        f"pycanal job: the query failed: topic '{topic}' partition 1: pycanal pipeline --kafka reads" in text
    )
    assert ChangeLog(lake).last_batch() is None
