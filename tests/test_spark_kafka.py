"""``pycanal pipeline --kafka``: Canal's topics read by Spark's Kafka source into the lake.

* Rows: the records of a binlog's entries, flat and protobuf, give the rows ``EntryRows`` gives
  the entries (``format("canal")``'s), but for what a flat message does not carry (its binlog
  position and GTID); a server's resent rows are dropped. A record of partition 1 without
  pycanal's ``pycanal.order`` header fails rather than apply out of order, and a pipeline given one
  stops with that message in one line, exit 1, nothing written (the ordering itself:
  tests/test_kafka_order.py).
* End to end: ``pycanal server`` processes in kafka mode publish one table each, flat and
  protobuf, with DDL mid-stream; one ``pycanal pipeline --kafka --topic-pattern`` (its own process)
  builds the lake; its driver is SIGKILLed mid-stream and started again from its checkpoint. Every
  table equals its source (read by pycanal and by Spark's Delta), and the change log holds each row
  change once. Four tables, four servers: flat and protobuf, each over one partition (Canal's
  records) and over 6 with ``canal.mq.partitionHash`` on ``$pk$`` and ``canal.mq.partitionOrder``
  (ALTERs mid-stream while the tables' rows spread over the partitions, a key update moving a
  row to another partition).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
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
from pycanal.spark.kafka_order import KAFKA_ROW_SCHEMA, KafkaOrder
from pycanal.spark.kafka_rows import KafkaRows, kafka_changes, staged_changes
from pycanal.spark.rows import ChangeRow, RowPosition
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


def test_staged_rows_equal_the_rows_through_spark(
    spark: Any,  # noqa: F811
    capture: Capture,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The executors' rows handed over as files in the stage (the pipeline's default) are the rows
    ``kafka_changes`` gives through Spark, in the same order; the files are gone after."""
    new, entries = configuration(capture, "index_utc")
    flat = [m.to_json() for m in flat_messages(entries, 1, 0)]
    records = spark.createDataFrame(  # two topics of one partition each: two tasks, two files
        [(topic, 0, i, v, None) for topic in ("t", "u") for i, v in enumerate(flat)],
        "topic STRING, partition INT, offset BIGINT, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>",
    )
    records = records.repartition(2, "topic").sortWithinPartitions("offset")
    through_spark = kafka_changes(records).toArrow()
    staged = staged_changes(records, tmp_path / "stage")
    assert staged.num_rows == 2 * len(list(new().rows(entries))) > 0
    assert staged.cast(through_spark.schema).equals(through_spark)
    assert list((tmp_path / "stage").iterdir()) == []


def _row(op: str, off: int, sql: str | None = None, after: str | None = None) -> ChangeRow:
    key = None if op == "DDL" else after[: after.index(",")] + "}"
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return ChangeRow(op, "d", "t", key, None, after, RowPosition("mysql-bin.000001", off, 0, None), when, sql,
                     "d" if sql else None)  # fmt: skip


def test_a_servers_resent_rows_are_dropped(tmp_path: Path) -> None:
    """A server sends a batch again after a failed send: its rows come again after later ones (here
    an INSERT of the old layout after an ALTER, which the current state cannot take). Each table's
    rows at or before its last position in their partition are dropped, the same on a replay and
    after a restart (the state saved per batch)."""
    sent = [
        _row("DDL", 10, sql="CREATE TABLE t (id INT PRIMARY KEY, v INT)"),
        _row("INSERT", 20, after='{"id":1,"v":1}'),
        _row("DDL", 30, sql="ALTER TABLE t ADD COLUMN w INT"),
        _row("INSERT", 40, after='{"id":2,"v":2,"w":2}'),
    ]
    applier, order = ChangeApplier(tmp_path, zero_dates="null"), KafkaOrder(tmp_path)
    first, state = order.step(_kafka(sent), 0)
    assert first.num_rows == 4
    applier(first, 0)
    order.save(0, state)
    again = _kafka([*sent[1:], _row("INSERT", 50, after='{"id":3,"v":3,"w":3}')])
    second, state = KafkaOrder(tmp_path).step(again, 1)  # after a restart: the saved state
    assert second["position"].combine_chunks().field("offset").to_pylist() == [50]
    applier(second, 1)
    assert KafkaOrder(tmp_path).step(again, 1)[0].equals(second)  # a replay: the same rows
    order.save(1, state)
    assert KafkaOrder(tmp_path).step(again, 2)[0].num_rows == 0
    flat = _row("INSERT", 5, after='{"id":4,"v":4,"w":4}')._replace(
        position=RowPosition("kafka:t:0", 5, 0, None)
    )
    assert order.step(_kafka([flat]), 2)[0].num_rows == 1  # a flat row has no binlog position
    applier.wait()
    assert compare_rows(tmp_path) == {1: {"id": 1, "v": 1, "w": None}, 2: {"id": 2, "v": 2, "w": 2},
                                      3: {"id": 3, "v": 3, "w": 3}}  # fmt: skip


def _kafka(rows: list[ChangeRow]) -> pa.Table:
    """``rows`` as the executors give them: of partition 0 of topic ``t``, without pycanal's header."""
    table = arrow_rows(rows)
    n = table.num_rows
    columns = [pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.nulls(n, pa.int32())]
    return pa.Table.from_arrays([*table.columns, *columns], schema=KAFKA_ROW_SCHEMA)


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
    """``pycanal server`` on ``conf``, up; a metrics port another process took since ``free_port``
    chose it (the suite's other worker starts servers too) is chosen again."""
    for _ in range(3):
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [*PYCANAL, "server", "--conf", str(conf)], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while proc.poll() is None and "event=server-started" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        if proc.poll() is None:
            return proc
        if (
            "canal.metrics.pull.port" not in log.read_text()
            or "Address already in use" not in log.read_text()
        ):
            break
        props = conf / "canal.properties"
        props.write_text(re.sub(r"(?m)^canal\.metrics\.pull\.port = \d+$",
                                f"canal.metrics.pull.port = {free_port()}", props.read_text()))  # fmt: skip
    raise AssertionError(f"the server did not start:\n{log.read_text()[-3000:]}")


def _commits(lake: Path) -> int:
    last = ChangeLog(lake).last_batch()
    return 0 if last is None else last + 1


# The tables, each published by a server of its own: flat or protobuf, over 1 or 6 partitions.
_STREAMS = {"a": (True, 1), "b": (False, 1), "c": (True, 6), "d": (False, 6)}


def test_a_topic_of_one_partition_is_read_by_several_tasks(
    kafka: PrivateKafka,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    """Canal's default topic has one partition: the pipeline's Kafka source cuts its offsets into
    a task per core (local[2]: 2), not one task decoding every record of a micro-batch."""
    from confluent_kafka import Producer

    from pycanal.spark.canal_options import kafka_options
    from pycanal.spark.job import kafka_stream

    topic = f"sk-one-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    producer = Producer(kafka.client_config())
    for i in range(100):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(30) == 0
    seen: list[tuple[int, int]] = []  # (tasks, records) per micro-batch

    def batch(df: Any, _batch_id: int) -> None:
        seen.append((df.rdd.getNumPartitions(), df.count()))

    stream = kafka_stream(spark, kafka_options(kafka.bootstrap_servers, topic))
    query = stream.writeStream.foreachBatch(batch).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert sum(n for _, n in seen) == 100
    assert seen and all(tasks >= 2 for tasks, n in seen if n), seen


def test_pipeline_reads_flat_and_protobuf_topics_exactly_once(
    mariadb: PrivateMariaDB,
    kafka: PrivateKafka,
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the fixture
) -> None:
    sfx = uuid.uuid4().hex[:8]
    work = Workload(mariadb, sfx, seed=39, names=tuple(_STREAMS))
    start = mariadb.current_binlog()
    work.create()
    servers = []
    for name, (flat, partitions) in _STREAMS.items():
        topic = f"sk-{name}-{sfx}"
        kafka.create_topic(topic, partitions)
        hashed = {"canal.mq.partitionsNum": partitions, "canal.mq.partitionHash": ".*\\\\..*:$pk$"}
        conf = write_conf(
            tmp_path / f"conf-{name}",
            mariadb,
            start,
            bootstrap=kafka.bootstrap_servers,
            tables=f"pycanal\\\\.{work.table(name)}",
            canal={
                "canal.mq.flatMessage": str(flat).lower(),
                "canal.mq.canalBatchSize": 50,
                "canal.mq.partitionOrder": str(partitions > 1).lower(),
                "canal.metrics.pull.port": free_port(),  # several servers
            },
            instance={"canal.mq.topic": topic, **(hashed if partitions > 1 else {})},
        )
        servers.append(_server(conf, tmp_path / f"server-{name}.log"))
    lake, log = tmp_path / "lake", tmp_path / "job.log"
    pattern = f"sk-[{''.join(_STREAMS)}]-{sfx}"
    job = _pipeline(lake, kafka, pattern, log)
    writer: threading.Thread | None = None
    halfway, killed = threading.Event(), threading.Event()
    try:
        _wait("the first micro-batch", lambda: _commits(lake) >= 1, job, log, 120)
        assert all(server.poll() is None for server in servers), "a server stopped"

        def write() -> None:
            for k in range(40):
                if k == 20:  # the driver is killed mid-workload however slowly the batches come
                    halfway.set()
                    killed.wait(120)
                work.round(k)
                if k == 15:  # ALTERs while the tables' rows spread over the partitions
                    _alter(work, "ADD COLUMN tag INT NULL")
                if k > 15:
                    for name in _STREAMS:
                        _update(work, name, f"UPDATE {{t}} SET tag = qty WHERE id % 5 = {k % 5}")
                if k == 25:  # key updates amid the rounds' changes: rows move to other partitions
                    for name in ("c", "d"):
                        _update(work, name, "UPDATE {t} SET id = id + 200000 WHERE id IN (7, 8, 25, 61)")
                time.sleep(0.05)
            work.mixed()  # a's ALTER goes through a flat topic, b's 500-row transaction a protobuf one
            _alter(work, "MODIFY qty BIGINT NULL")
            for name in ("c", "d"):
                _update(work, name, "UPDATE {t} SET tag = id WHERE id % 3 = 0")

        writer = threading.Thread(target=write)
        writer.start()
        first = _commits(lake)
        _wait(
            "a few micro-batches",
            lambda: _commits(lake) >= first + 3 or (halfway.is_set() and _commits(lake) > first),
            job,
            log,
            120,
        )
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        killed.set()
        killed_at = _commits(lake)
        time.sleep(1)  # the workload goes on while no driver runs
        job = _pipeline(lake, kafka, pattern, log)
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
        stop_job(job)  # the lake is complete: the checks get the cores
        _stop(servers)
        table = ChangeLog(lake).read()
        rows = table.filter(pc.is_in(table["op"], ops))
        assert rows.num_rows == expected
        position = rows["position"].combine_chunks()
        keys = list(zip(*(position.field(f).to_pylist() for f in ("file", "offset", "row")), strict=True))
        assert len(set(keys)) == len(keys), "a change appears twice in the change log"
        for name, (flat, partitions) in _STREAMS.items():
            mine = pc.equal(rows["table"], work.table(name))
            assert pc.sum(mine).as_py() == work.rows[name]
            # a flat row's position is its record's (Canal's records) or its binlog's (pycanal.order)
            files = {f.startswith("kafka:") for (f, _, _), m in zip(keys, mine.to_pylist(), strict=True) if m}
            assert files == {flat and partitions == 1}, name
        ddl = table.filter(pc.equal(table["op"], "DDL"))["table"].to_pylist()
        for name in _STREAMS:  # CREATE, 2 ALTERs (and mixed()'s for a): once, not once per partition
            assert ddl.count(work.table(name)) == (4 if name == "a" else 3), ddl
        with mariadb.root_connection("pycanal") as conn:
            for name in _STREAMS:
                check = compare_table(conn, lake, "pycanal", work.table(name), "id")
                assert check.equal, f"{name}: {check.first_difference}"
                assert check.source_rows > 0
                check = compare_table(conn, lake, "pycanal", work.table(name), "id", spark=spark)
                assert check.equal, f"{name} read by Spark's Delta: {check.first_difference}"
        assert "applied up to batch" in log.read_text()
        for name in ("c", "d"):  # the rows did spread: every partition has more than the 3 DDL copies
            per = Counter(r.partition for r in kafka.records(f"sk-{name}-{sfx}"))
            assert sorted(per) == list(range(6)) and min(per.values()) > 3, per
    finally:
        killed.set()
        if writer is not None:
            writer.join()
        stop_job(job)
        _stop(servers)


def _stop(servers: list[subprocess.Popen]) -> None:
    for server in servers:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
    for server in servers:
        server.wait(30)


def _alter(work: Workload, change: str) -> None:
    with work.db.root_connection() as conn, conn.cursor() as cur:
        for name in work.names:
            cur.execute(f"ALTER TABLE pycanal.{work.table(name)} {change}")


def _update(work: Workload, name: str, sql: str) -> None:
    with work.db.root_connection() as conn, conn.cursor() as cur:
        work._exec(cur, name, sql)


def test_pipeline_stops_at_a_record_of_partition_1_without_the_order_header(
    kafka: PrivateKafka, tmp_path: Path
) -> None:
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
        f"pycanal job: the query failed: topic '{topic}' partition 1: a record without the pycanal.order"
        in text
    )
    assert ChangeLog(lake).last_batch() is None
