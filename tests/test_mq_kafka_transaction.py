"""``canal.mq.transaction = true``: exactly once for a ``read_committed`` consumer across kill -9.

* The marks (no I/O): a replay starting anywhere at or before the committed mark drops exactly what
  the broker holds, also inside one binlog event's entries split over batches; another source's
  entries are never dropped. ``routes_to`` finds the topics a destination writes.
* A real broker: a second producer with the same transactional id reads back the first one's
  committed mark and fences it (a fatal SendError); the worker that stops on it with one line is
  tests/test_mq_starter.py's.
* ``pycanal server`` against the private MariaDB and broker, killed with -9 three times while rows
  are written (at an arbitrary moment, frozen inside an open transaction, and replaying right after
  a restart): a read_committed consumer reads every row change once, in binlog order in each
  partition; a read_uncommitted consumer also reads the aborted transaction's records, row changes
  that were then sent again.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mq_kafka_support import (  # noqa: F401
    Server,
    Workload,
    packet_entries,
    proto_rows,
    replay,
    wait_for,
    write_conf,
)
from pycanal.mq import MQDestination
from pycanal.mq.kafka_config import producer_config
from pycanal.mq.mark import MARK_HEADER, BatchMark, MarkTracker
from pycanal.mq.producer import SendError, TransactionalKafkaSender
from pycanal.mq.records import Record, routes_to
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import binlog_file_order
from pycanal.testing import PrivateMariaDB
from pycanal.testing.kafka import PrivateKafka


def _entry(journal: str, offset: int, server_id: int = 1) -> bytes:
    entry = pb.Entry(entryType=pb.ROWDATA)
    entry.header.logfileName, entry.header.logfileOffset, entry.header.serverId = journal, offset, server_id
    return entry.SerializeToString()


# ---------------------------------------------------------------------------------- marks
# Two entries at 20 and three at b.000002:4: one binlog event can give several entries.
STREAM = [
    _entry("b.000001", 10),
    _entry("b.000001", 20),
    _entry("b.000001", 20),
    _entry("b.000001", 30),
    _entry("b.000002", 4),
    _entry("b.000002", 4),
    _entry("b.000002", 4),
    _entry("b.000002", 90),
]


def _send(tracker: MarkTracker, entries: list[bytes], size: int) -> tuple[list[bytes], list[BatchMark]]:
    """What a worker hands the broker, batch by batch, and the batches' marks."""
    sent, marks = [], []
    for i in range(0, len(entries), size):
        fresh, mark = tracker.split(entries[i : i + size])
        sent += fresh
        marks.append(mark)
        tracker.acked(mark)
    return sent, marks


@pytest.mark.parametrize("size", [1, 2, 3])
def test_a_replay_drops_exactly_what_the_broker_committed(size: int) -> None:
    _, marks = _send(MarkTracker("p"), STREAM, size)
    assert [m.seq for m in marks] == list(range(1, len(marks) + 1))
    for done in range(len(STREAM)):  # the broker holds the first done+1 entries
        committed = _send(MarkTracker("p"), STREAM[: done + 1], size)[1][-1]
        for start in range(done + 1):  # the replay starts on an event boundary at or before it
            if start and STREAM[start] == STREAM[start - 1]:
                continue
            for replay_size in (1, 2, 5):
                tracker = MarkTracker("p")
                tracker.resume(committed)
                sent, again = _send(tracker, STREAM[start:], replay_size)
                assert sent == STREAM[done + 1 :], (done, start, replay_size)
                assert again[0].seq == committed.seq + 1
                assert tracker.skipped == done + 1 - start


def test_another_source_is_never_skipped() -> None:
    tracker = MarkTracker("p")
    tracker.resume(BatchMark("p", 7, 1, "b.000009", 4, 1))
    other = [_entry("b.000001", 10, server_id=2), _entry("b.000001", 20)]
    assert tracker.split(other)[0] == other


def test_marks_read_back_only_as_marks() -> None:
    mark = BatchMark("pycanal-shop", 3, 1, "b.000001", 20, 2)
    assert BatchMark.decode(mark.encode()) == mark
    assert [BatchMark.decode(v) for v in (None, b"", b"x", b"[1]", b'{"seq": 1}')] == [None] * 5


def test_routes_to_the_topics_build_records_names() -> None:
    static = MQDestination("shop-topic")
    assert routes_to("shop-topic", static) and not routes_to("shop_topic", static)
    dynamic = MQDestination("fallback.t", dynamic_topic="orders:shop\\.o.*,shop\\.item_.*,stock")
    accepted = ["fallback_t", "orders", "shop_item_x", "shop_item_x_y", "stock"]
    assert [t for t in [*accepted, "shop_o1", "shop", "other"] if routes_to(t, dynamic)] == accepted


# ---------------------------------------------------------------------------------- fencing
def test_a_second_producer_fences_the_first(kafka: PrivateKafka) -> None:
    sfx = uuid.uuid4().hex[:8]
    topic = f"mqtx-fence-{sfx}"
    kafka.create_topic(topic, 2)
    config = producer_config({"bootstrap.servers": kafka.bootstrap_servers})
    old, new = TransactionalKafkaSender(config, sfx), TransactionalKafkaSender(config, sfx)
    assert old.transactional_id == f"pycanal-{sfx}"
    ours = lambda name: name == topic  # noqa: E731
    try:
        assert old.recover(ours) is None
        first = BatchMark(old.transactional_id, 1, 1, "b.000001", 4, 1)
        old.send([Record(topic, 0, b"a"), Record(topic, 1, b"b"), Record(topic, 0, b"c")], first)
        assert new.recover(ours) == first  # read back; and the old producer is fenced
        with pytest.raises(SendError) as failed:
            old.send([Record(topic, 0, b"never")], replace(first, seq=2))
        assert failed.value.fatal
        new.send([Record(topic, 1, b"d")], replace(first, seq=2, offset=8))
    finally:
        old.close(0)
        new.close(0)
    records = kafka.records(topic, committed=True)
    assert [r.value for r in records] == [b"a", b"c", b"b", b"d"]
    assert [BatchMark.decode(dict(r.headers).get(MARK_HEADER)) for r in records] == [
        None,
        first,  # the last record of each partition in a transaction carries the mark
        first,
        replace(first, seq=2, offset=8),
    ]


# ---------------------------------------------------------------------------------- kill -9
def _open_transaction(kafka: PrivateKafka, topic: str, partitions: int, consumers: dict[str, Any]) -> bool:
    """Does a partition hold records of a transaction still open (past its last stable offset)?"""
    from confluent_kafka import TopicPartition

    for p in range(partitions):
        tp = TopicPartition(topic, p)
        stable = consumers["read_committed"].get_watermark_offsets(tp, timeout=5, cached=False)[1]
        if consumers["read_uncommitted"].get_watermark_offsets(tp, timeout=5, cached=False)[1] > stable:
            return True
    return False


def _kill_inside_a_transaction(server: Server, kafka: PrivateKafka, topic: str, partitions: int) -> None:
    """SIGSTOP the server when a transaction of it is open; SIGKILL it if the transaction is still
    open a moment later (a commit already sent would have ended it), else SIGCONT and try again."""
    from confluent_kafka import Consumer

    assert server.proc is not None
    consumers = {
        level: Consumer(kafka.client_config(**{"group.id": "mqtx", "isolation.level": level}))
        for level in ("read_committed", "read_uncommitted")
    }
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if _open_transaction(kafka, topic, partitions, consumers):
                os.kill(server.proc.pid, signal.SIGSTOP)
                time.sleep(0.3)
                if _open_transaction(kafka, topic, partitions, consumers):
                    server.kill()
                    return
                os.kill(server.proc.pid, signal.SIGCONT)
        raise AssertionError("no open transaction caught in 30 s")
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_kill9_mid_stream_is_exactly_once_for_read_committed(
    mariadb: PrivateMariaDB, kafka: PrivateKafka, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = uuid.uuid4().hex[:8]
    topic, partitions = f"mqtx-kill-{sfx}", 3
    work = Workload(mariadb, sfx, seed=37)
    start = mariadb.current_binlog()
    work.create()
    kafka.create_topic(topic, partitions)
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=kafka.bootstrap_servers,
        tables=work.regex,
        canal={
            "canal.mq.transaction": "true",
            "canal.mq.flatMessage": "false",  # entries keep their binlog positions
            "canal.mq.canalBatchSize": 10,
            "canal.file.flush.period": 3000,  # the cursor on disk lags: restarts re-read committed entries
        },
        instance={
            "canal.mq.topic": topic,
            "canal.mq.partitionsNum": partitions,
            "canal.mq.partitionHash": "pycanal\\\\..*:$pk$",
        },
    )
    log = tmp_path / "server.log"

    def resumes() -> int:
        return log.read_text().count("event=mq-transaction-resumed") if log.exists() else 0

    def restart(resumed: bool = True) -> Server:
        """A new server; with ``resumed``, once it has read the committed mark back (its producer
        has fenced the killed one and aborted the transaction that one left open)."""
        before = resumes()
        servers.append(Server(conf, log).start())
        if resumed:
            wait_for("the server's start", lambda: resumes() > before, timeout=60, interval=0.05)
        return servers[-1]

    writing = threading.Event()
    writing.set()

    def writer() -> None:
        k = 0
        while writing.is_set():
            work.round(k)
            k += 1
            time.sleep(0.05)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        server = restart(resumed=False)
        wait_for("the first records", lambda: kafka.records(topic, committed=True), timeout=60, interval=0.2)
        server.kill()  # 1: at an arbitrary moment
        server = restart()
        _kill_inside_a_transaction(server, kafka, topic, partitions)  # 2: its transaction left open
        server = restart()
        server.kill()  # 3: replaying what the broker holds, right after reading the mark back
        server = restart()
        time.sleep(1.0)
    finally:
        writing.clear()
        thread.join()
    expected = sum(work.rows.values())

    def distinct() -> int:
        return len({r.key for r in proto_rows(kafka.records(topic, committed=True))[0]})

    wait_for(f"{expected} distinct row changes", lambda: distinct() >= expected, timeout=90)
    assert server.stop() == 0

    committed = kafka.records(topic, committed=True)
    rows, _ = proto_rows(committed)
    assert len(rows) == len({r.key for r in rows}) == expected  # each row change once
    for name in ("a", "b"):
        assert replay(rows, work.table(name)) == work.state(name)
    for p in range(partitions):  # in binlog order in each partition
        positions = []
        for record in (r for r in committed if r.partition == p):
            for raw in packet_entries(record.value or b"")[1]:
                h = pb.Entry.FromString(raw).header
                positions.append((binlog_file_order(h.logfileName), h.logfileOffset))
        assert positions == sorted(positions), p  # (a rows event gives one entry per row here)
        # a record per partition and store batch (protobuf), a transaction holds one or more: the
        # last of each partition in a transaction carries its mark, so the partition's last one does
        mine = [r for r in committed if r.partition == p]
        marks = [
            BatchMark.decode(dict(r.headers)[MARK_HEADER]) for r in mine if MARK_HEADER in dict(r.headers)
        ]
        assert mine and MARK_HEADER in dict(mine[-1].headers)
        assert all(m is not None and m.producer == "pycanal-shop" for m in marks)
        seqs = [m.seq for m in marks if m is not None]
        assert seqs and seqs == sorted(set(seqs))

    everything = kafka.records(topic)  # read_uncommitted: the aborted transaction's records too
    seen, _ = proto_rows(everything)
    assert len(everything) > len(committed)
    assert len(seen) > len({r.key for r in seen}) == expected

    text = log.read_text()
    skipped = [
        int(n) for n in re.findall(r"event=mq-transaction-skipped destination=shop entries=(\d+)", text)
    ]
    print(
        f"{expected} row changes once in {len(committed)} committed records; read_uncommitted: "
        f"{len(everything)} records, {len(seen) - expected} row changes aborted; "
        f"entries skipped after each restart: {skipped}"
    )
    assert len(skipped) >= 2 and sum(skipped) > 0  # the restarts re-read committed entries
    assert "Traceback" not in text
