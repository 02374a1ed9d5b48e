"""Alibaba Canal 1.1.7 in kafka mode beside ``pycanal server`` in kafka mode: the same binlog, the same
broker, the same routing (``partitionHash`` on ``$pk$`` over 3 partitions), one topic each; every
partition must hold the same flat messages in the same order, or (protobuf mode) the same entries. Canal's producer is connector.kafka
1.1.7's jar-with-dependencies in Canal's plugin dir (scripts/setup.sh).

Only ``id`` (the batch id: batch boundaries depend on timing) and ``ts`` (the build time) may differ,
and ``mysqlType`` as docs/compatibility.md's ``tsdb-ddl-spelling`` says: Canal's TSDB spells a column
as the DDL it replayed did (``VARCHAR(10)``), pycanal as the server's ``COLUMN_TYPE``
(``varchar(10)``). The tables exist before the start position and the workload runs once both
servers replicate, so both read the tables' columns from the server (``int(11)``), and only the
column the workload's ALTER adds is spelled differently; it is compared case-insensitively, and
every message without such a column must match byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mq_kafka_support import Workload, flat_rows, packet_entries, proto_rows, write_conf
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing.kafka import KafkaRecord, PrivateKafka
from test_canal_reference import KNOWN, compare

pytestmark = pytest.mark.mariadb

PYCANAL = [sys.executable, "-m", "pycanal.cli"]


def _by_partition(records: list[KafkaRecord]) -> dict[int, list[KafkaRecord]]:
    out: dict[int, list[KafkaRecord]] = {}
    for rec in records:
        out.setdefault(rec.partition, []).append(rec)
    return out


def _comparable(rec: KafkaRecord) -> dict[str, Any]:
    msg = json.loads(rec.value or b"")
    msg["id"] = msg["ts"] = None
    if msg.get("mysqlType"):
        msg["mysqlType"] = {k: v.lower() for k, v in msg["mysqlType"].items()}
    return msg


def _wait_stable(
    read: Callable[[], list[KafkaRecord]], least: int, timeout: float = 120.0
) -> list[KafkaRecord]:
    """The records once there are at least ``least`` and no more came for 2 s."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        records = read()
        if len(records) != last:
            last, since = len(records), time.monotonic()
        elif last >= least and time.monotonic() - since > 2.0:
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"{last} records after {timeout:g}s, expected at least {least}")
        time.sleep(0.5)


def _race(
    flat: bool,
    mariadb: PrivateMariaDB,
    kafka: PrivateKafka,
    canal_factory: Callable[..., Any],
    tmp_path: Path,
) -> tuple[list[KafkaRecord], list[KafkaRecord]]:
    """pycanal's records and Canal's, one topic each, for the same workload."""
    sfx = uuid.uuid4().hex[:8]
    work = Workload(mariadb, sfx, seed=17)
    work.create()  # before the start: Canal's TSDB snapshots the tables with SHOW CREATE TABLE
    mariadb.flush_binary_logs()  # Canal moves a MariaDB start back to the file's start: make it ours
    start = mariadb.current_binlog()
    ours, theirs = f"mqk-py-{sfx}", f"mqk-canal-{sfx}"
    for topic in (ours, theirs):
        kafka.create_topic(topic, 3)
    rule = r"pycanal\..*:$pk$"
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=kafka.bootstrap_servers,
        tables=work.regex,
        canal={"canal.mq.flatMessage": str(flat).lower()},
        instance={
            "canal.mq.topic": ours,
            "canal.mq.partitionsNum": 3,
            "canal.mq.partitionHash": rule.replace("\\", "\\\\"),
        },
    )
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*PYCANAL, "server", "--conf", str(conf)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        canal_factory(
            destinations={
                "example": {
                    "filter.regex": rf"pycanal\.mqk_[ab]_{sfx}",
                    "master.journal.name": start[0],
                    "master.position": start[1],
                    "canal.mq.topic": theirs,
                    "canal.mq.partitionsNum": 3,
                    "canal.mq.partitionHash": rule,
                }
            },
            canal_properties={
                "canal.serverMode": "kafka",
                "canal.mq.flatMessage": flat,
                "kafka.bootstrap.servers": kafka.bootstrap_servers,
            },
        )
        # both replicate now, with the tables as created: the workload (and its ALTER) comes after
        work.mixed()
        expected_rows = sum(work.rows.values())
        mine = _wait_stable(lambda: kafka.records(ours), 1)
        rows = flat_rows(mine)[0] if flat else proto_rows(mine)[0]
        assert len(rows) >= expected_rows, log.read_text()[-3000:]
        canal = _wait_stable(lambda: kafka.records(theirs), 1)
        return mine, canal
    finally:
        proc.terminate()
        proc.wait(30)


def test_canal_and_pycanal_send_the_same_flat_messages(
    mariadb: PrivateMariaDB,
    kafka: PrivateKafka,
    canal_factory: Callable[..., Any],
    tmp_path: Path,
) -> None:
    mine, canal = _race(True, mariadb, kafka, canal_factory, tmp_path)
    got, want = _by_partition(mine), _by_partition(canal)
    assert sorted(got) == sorted(want) == [0, 1, 2]
    exact = 0
    for partition in want:
        assert len(got[partition]) == len(want[partition]), partition
        for i, (a, b) in enumerate(zip(got[partition], want[partition], strict=True)):
            mine_msg, canal_msg = _comparable(a), _comparable(b)
            assert mine_msg == canal_msg, (
                f"partition {partition} message {i}:\npycanal {mine_msg}\ncanal   {canal_msg}"
            )
            raw_a, raw_b = json.loads(a.value or b""), json.loads(b.value or b"")
            if raw_a.get("mysqlType") != raw_b.get("mysqlType"):
                assert set(raw_a["mysqlType"]) == set(raw_b["mysqlType"]) and "extra" in raw_a["mysqlType"]
                continue
            # the bytes, once the batch id and build time are Canal's (each with the key after it:
            # a column `id` of type INTEGER is `"id":4,` in sqlType too, seen with batch id 4)
            pinned = (a.value or b"").replace(
                f'"id":{raw_a["id"]},"isDdl"'.encode(), f'"id":{raw_b["id"]},"isDdl"'.encode()
            )
            pinned = pinned.replace(
                f'"ts":{raw_a["ts"]},"type":"'.encode(), f'"ts":{raw_b["ts"]},"type":"'.encode()
            )
            assert pinned == b.value, f"partition {partition} message {i}"
            exact += 1
    print(f"{len(mine)} messages on 3 partitions equal to Canal's, {exact} byte for byte")
    assert exact > len(mine) // 2


def test_canal_and_pycanal_send_the_same_entries_in_protobuf_mode(
    mariadb: PrivateMariaDB,
    kafka: PrivateKafka,
    canal_factory: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """Packets group a batch's entries, and batch boundaries depend on timing: the entries of every
    partition, in order, are compared field by field, each difference one that
    ``test_canal_reference`` knows (docs/compatibility.md)."""
    mine, canal = _race(False, mariadb, kafka, canal_factory, tmp_path)

    def entries(records: list[KafkaRecord]) -> dict[int, list[pb.Entry]]:
        out: dict[int, list[pb.Entry]] = {}
        for rec in records:
            out.setdefault(rec.partition, []).extend(
                pb.Entry.FromString(e) for e in packet_entries(rec.value or b"")[1]
            )
        return out

    got, want = entries(mine), entries(canal)
    assert sorted(got) == sorted(want) == [0, 1, 2]
    unknown, known = [], Counter[str]()
    for partition in want:
        assert len(got[partition]) == len(want[partition]), partition
        for d in compare(f"partition{partition}", want[partition], got[partition]):
            rule = next((k for k in KNOWN if k.match(d)), None)
            if rule is None:
                unknown.append(str(d))
            else:
                known[rule.name] += 1
    entries_seen = sum(len(v) for v in want.values())
    print(f"{entries_seen} entries on 3 partitions equal to Canal's but the known differences {dict(known)}")
    assert not unknown, "\n".join(unknown[:30])
