"""``canal.serverMode = kafka`` against a real broker (pycanal.testing.kafka) and the private MariaDB.

* In process (Deployer + MQStarter + KafkaSender, the launcher's wiring): each topic partition holds
  exactly the records :func:`pycanal.mq.build_records` made of the store batches, in order, and the
  batches carry every row change MariaDB reported; flat and protobuf, with and without
  ``partitionHash`` on ``$pk$`` over 3 partitions, and ``dynamicTopic``.
* ``pycanal server --conf DIR`` as a process: kill -9 mid-stream and a restart lose nothing
  (duplicates allowed and counted); every record sits on the partition pycanal.mq's rules give it.
* Failures: a missing topic with auto-create off and an unreachable broker are one log line naming
  the destination and the topic, and nothing is acked meanwhile; a bad ``kafka.*`` key or
  ``canal.mq.partitionHash`` stops the start with one line naming it.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from mq_kafka_support import (
    PYCANAL,
    Server,
    Workload,
    check_partitions,
    every_row_once,
    flat_rows,
    proto_rows,
    recorded_run,
    refused_start,
    replay,
    wait_for,
    write_conf,
)
from pycanal.client.printer import message_lines
from pycanal.deployer import Deployer
from pycanal.deployer.mq import kafka_config, mq_destination, mq_options
from pycanal.mq import build_records
from pycanal.mq.consumer import decode_record
from pycanal.mq.producer import KafkaSender
from pycanal.mq.starter import MQStarter
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port
from pycanal.testing.kafka import PrivateKafka

pytestmark = pytest.mark.mariadb


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


# ---------------------------------------------------------------------------------- in process
VARIANTS = {
    "flat-one-partition": (True, {}),
    "flat-pk-hash-3": (True, {"canal.mq.partitionsNum": 3, "canal.mq.partitionHash": "pycanal\\\\..*:$pk$"}),
    "protobuf-raw": (False, {}),
    "protobuf-pk-hash-3": (
        False,
        {"canal.mq.partitionsNum": 3, "canal.mq.partitionHash": "pycanal\\\\..*:$pk$"},
    ),
    "flat-dynamic-topic": (True, {"canal.mq.dynamicTopic": "mqk_dyn_{sfx}:pycanal\\\\.mqk_a_.*"}),
    "protobuf-dynamic-topic-hash": (
        False,
        {
            "canal.mq.dynamicTopic": "pycanal\\\\..*",
            "canal.mq.partitionsNum": 3,
            "canal.mq.partitionHash": "pycanal\\\\..*:$pk$",
        },
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_topics_hold_exactly_the_built_records(
    variant: str, mariadb: PrivateMariaDB, kafka: PrivateKafka, tmp_path: Path
) -> None:
    flat, routing = VARIANTS[variant]
    sfx = _suffix()
    topic = f"mqk-{sfx}"
    routing = {k: str(v).replace("{sfx}", sfx) for k, v in routing.items()}
    partitions = int(routing.get("canal.mq.partitionsNum", 1))
    work = Workload(mariadb, sfx)
    start = mariadb.current_binlog()
    work.create()
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=kafka.bootstrap_servers,
        tables=work.regex,
        canal={"canal.mq.flatMessage": str(flat).lower()},
        instance={"canal.mq.topic": topic, **routing},
    )
    dynamic = "canal.mq.dynamicTopic" in routing
    topics = [topic] if not dynamic else []
    if "mqk_dyn" in routing.get("canal.mq.dynamicTopic", ""):
        topics = [f"mqk_dyn_{sfx}", topic]  # table a to its own topic, b to canal.mq.topic
    elif dynamic:  # db.table, '.' -> '_'; the annotate (QUERY) entries have no table: canal.mq.topic
        topics = [f"pycanal_{work.table('a')}", f"pycanal_{work.table('b')}", topic]
    for name in topics:
        kafka.create_topic(name, partitions)

    built, cfg = recorded_run(conf, work, lambda cfg: KafkaSender(kafka_config(cfg)), build_records)
    expected = sum(work.rows.values())
    want: dict[tuple[str, int], list[bytes | None]] = {}
    for *_, records in built:
        for r in records:
            want.setdefault((r.topic, r.partition), []).append(r.value)
    assert {t for t, _ in want} <= set(topics)
    got: dict[tuple[str, int], list[bytes | None]] = {}
    for name in topics:
        for rec in kafka.records(name):
            got.setdefault((rec.topic, rec.partition), []).append(rec.value)
    assert got == want
    if partitions > 1:
        assert len({p for _, p in got}) == partitions  # rows spread over every partition
    reread = [rec for name in topics for rec in kafka.records(name)]
    rows, _ = flat_rows(reread) if flat else proto_rows(reread)
    assert len(rows) == expected == len({r.key for r in rows})
    assert check_partitions(reread, flat, mq_destination(cfg.instance("shop")), mq_options(cfg)) == len(
        reread
    )


def test_reload_moves_the_destination_to_its_new_topic(
    mariadb: PrivateMariaDB, kafka: PrivateKafka, tmp_path: Path
) -> None:
    """Auto-scan's reload of a changed instance.properties restarts the destination's worker with
    the new ``canal.mq.topic``: what was acked went to the old topic, the rest to the new one."""
    sfx = _suffix()
    old, new = f"mqk-old-{sfx}", f"mqk-new-{sfx}"
    work = Workload(mariadb, sfx, seed=29)
    start = mariadb.current_binlog()
    work.create()
    for name in (old, new):
        kafka.create_topic(name, 1)
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=kafka.bootstrap_servers,
        tables=work.regex,
        canal={"canal.auto.scan": "true"},
        instance={"canal.mq.topic": old},
    )
    deployer = Deployer(conf)
    cfg = deployer.config
    producer = kafka_config(cfg)
    starter = MQStarter(deployer.server, {}, mq_options(cfg), lambda _d: KafkaSender(producer))
    deployer.attach_mq(starter)
    deployer.start(scan_thread=False)
    try:
        work.round(0)
        first = sum(work.rows.values())
        wait_for("the first round", lambda: len(flat_rows(kafka.records(old))[0]) >= first)
        path = conf / "shop" / "instance.properties"
        path.write_text(path.read_text().replace(old, new))
        assert [e.kind for e in deployer.scan_once()] == ["reload"]
        work.round(1)
        expected = sum(work.rows.values())
        wait_for(
            "the second round in the new topic",
            lambda: len({r.key for r in flat_rows(kafka.records(old) + kafka.records(new))[0]}) >= expected,
        )
    finally:
        deployer.stop()
    in_old, in_new = flat_rows(kafka.records(old))[0], flat_rows(kafka.records(new))[0]
    assert len(in_old) == first and len(in_new) >= expected - first
    assert len({r.key for r in in_old + in_new}) == expected


# ---------------------------------------------------------------------------------- the CLI
@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_server_kill9_mid_stream_loses_nothing(
    flat: bool, mariadb: PrivateMariaDB, kafka: PrivateKafka, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    topic = f"mqk-kill-{sfx}"
    work = Workload(mariadb, sfx, seed=11)
    start = mariadb.current_binlog()
    work.create()
    kafka.create_topic(topic, 3)
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=kafka.bootstrap_servers,
        tables=work.regex,
        canal={"canal.mq.flatMessage": str(flat).lower(), "canal.mq.canalBatchSize": 20},
        instance={
            "canal.mq.topic": topic,
            "canal.mq.partitionsNum": 3,
            "canal.mq.partitionHash": "pycanal\\\\..*:$pk$",
        },
    )
    log = tmp_path / "server.log"
    servers.append(Server(conf, log).start())
    killed = threading.Event()

    def writer() -> None:
        # Until 20 rounds after the kill (at most 400): the kill is mid-stream however slowly
        # the server starts on a loaded machine.
        after = 0
        for k in range(400):
            work.round(k)
            time.sleep(0.05)
            after += killed.is_set()
            if after >= 20:
                break

    thread = threading.Thread(target=writer)
    thread.start()
    wait_for("the first records", lambda: len(kafka.records(topic)) > 0, timeout=60, interval=0.2)
    servers[0].kill()  # mid-stream: the writer is still writing
    killed_at = sum(work.rows.values())
    killed.set()
    servers.append(Server(conf, log).start())
    thread.join()
    expected = sum(work.rows.values())
    assert killed_at < expected, "the kill came after the workload; make it longer"

    def unique() -> set[str]:
        rows, _ = flat_rows(kafka.records(topic)) if flat else proto_rows(kafka.records(topic))
        return {r.key for r in rows}

    wait_for(f"{expected} distinct row changes", lambda: len(unique()) >= expected, timeout=120)
    assert servers[1].stop() == 0
    records = kafka.records(topic)
    rows, _ = flat_rows(records) if flat else proto_rows(records)
    keys = {r.key for r in rows}
    duplicates = len(rows) - len(keys)
    print(f"{len(rows)} row changes read, {len(keys)} distinct, {duplicates} resent after kill -9")
    assert len(keys) == expected
    cfg = Deployer(conf).config
    assert check_partitions(records, flat, mq_destination(cfg.instance("shop")), mq_options(cfg)) == len(
        records
    )
    assert "Traceback" not in log.read_text()
    if not flat:  # entries carry their binlog position: replayed in that order, they give the tables
        for name in ("a", "b"):
            assert replay(rows, work.table(name)) == work.state(name)


def test_broker_restart_mid_stream_loses_nothing(
    mariadb: PrivateMariaDB, kafka_factory: Callable[..., PrivateKafka], tmp_path: Path, servers: list[Server]
) -> None:
    broker = kafka_factory()
    sfx = _suffix()
    topic = f"mqk-restart-{sfx}"
    work = Workload(mariadb, sfx, seed=19)
    start = mariadb.current_binlog()
    work.create()
    broker.create_topic(topic, 3)
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=broker.bootstrap_servers,
        tables=work.regex,
        canal={"canal.mq.canalBatchSize": 20},
        instance={
            "canal.mq.topic": topic,
            "canal.mq.partitionsNum": 3,
            "canal.mq.partitionHash": "pycanal\\\\..*:$pk$",
        },
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)

    def writer() -> None:
        for k in range(30):
            work.round(k)
            time.sleep(0.1)

    thread = threading.Thread(target=writer)
    thread.start()
    wait_for("the first records", lambda: len(broker.records(topic)) > 0, timeout=60, interval=0.2)
    broker.restart(kill=True)  # the broker dies under the producer and comes back on the same port
    thread.join()
    expected = sum(work.rows.values())
    wait_for(
        f"{expected} distinct row changes",
        lambda: len({r.key for r in flat_rows(broker.records(topic))[0]}) >= expected,
        timeout=180,
    )
    rows, _ = flat_rows(broker.records(topic))
    print(f"{len(rows)} row changes read, {len({r.key for r in rows})} distinct after a broker kill -9")
    assert len({r.key for r in rows}) == expected
    assert server.proc is not None and server.proc.poll() is None
    assert server.stop() == 0


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_tail_kafka_prints_the_topic(
    flat: bool, mariadb: PrivateMariaDB, kafka: PrivateKafka, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    topic = f"mqk-tail-{sfx}"
    work = Workload(mariadb, sfx, seed=23)
    start = mariadb.current_binlog()
    work.create()
    kafka.create_topic(topic, 1)
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=kafka.bootstrap_servers,
        tables=work.regex,
        canal={"canal.mq.flatMessage": str(flat).lower()},
        instance={"canal.mq.topic": topic},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    work.round(0)
    expected = sum(work.rows.values())
    read = flat_rows if flat else proto_rows
    wait_for(f"{expected} row changes", lambda: len(read(kafka.records(topic))[0]) >= expected)
    assert server.stop() == 0
    # At least once: a batch whose acks timed out on a loaded broker is in the topic twice, so the
    # limit is the topic's rows, and tail stops after the last record that has rows.
    want: list[str] = []
    limit = cut = 0
    for rec in kafka.records(topic):
        message = decode_record(rec.topic, rec.partition, rec.offset, rec.value)
        if flat:
            want.append((rec.value or b"").decode())
        else:
            want += message_lines(message.batch_id, message.entries)
        limit += message.row_count
        if message.row_count:
            cut = len(want)
    want = want[:cut]
    done = subprocess.run(
        [*PYCANAL, "tail", "--kafka", kafka.bootstrap_servers, "--topic", topic, "--limit", str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    batch_time = re.compile(r"(, Time : .*|delay : \d+ms)$")  # the printer's clock, not the message's
    assert [batch_time.sub("", ln) for ln in done.stdout.splitlines()] == [
        batch_time.sub("", ln) for ln in want
    ]


# ---------------------------------------------------------------------------------- failures
def test_missing_topic_with_auto_create_off_is_one_line_and_nothing_acked(
    mariadb: PrivateMariaDB, kafka_factory: Callable[..., PrivateKafka], tmp_path: Path, servers: list[Server]
) -> None:
    broker = kafka_factory(auto_create=False)
    sfx = _suffix()
    topic = f"mqk-missing-{sfx}"
    work = Workload(mariadb, sfx, seed=3)
    start = mariadb.current_binlog()
    work.create()
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=broker.bootstrap_servers,
        tables=work.regex,
        instance={"canal.mq.topic": topic},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    work.round(0)
    wait_for("the send failure", lambda: "event=mq-send-failed" in server.text(), timeout=60)
    line = next(ln for ln in server.text().splitlines() if "event=mq-send-failed" in ln)
    assert "destination=shop" in line and f"topic={topic}" in line and "not on the broker" in line
    assert topic not in broker.topics()
    assert server.proc is not None and server.proc.poll() is None  # still running, retrying
    broker.create_topic(topic, 1)
    work.round(1)
    expected = sum(work.rows.values())
    every_row_once(lambda: broker.records(topic), expected)
    assert "event=mq-send-recovered" in server.text()
    # bounded, backed-off retries: the attempts are few, not a hot loop
    attempts = server.text().count("event=mq-send-failed")
    assert 1 <= attempts <= 12
    assert server.stop() == 0


def test_unreachable_broker_is_one_line_naming_destination_and_topic(
    mariadb: PrivateMariaDB, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    work = Workload(mariadb, sfx, seed=5)
    start = mariadb.current_binlog()
    work.create()
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=f"127.0.0.1:{free_port()}",
        tables=work.regex,
        instance={"canal.mq.topic": f"mqk-nowhere-{sfx}"},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    work.round(0)
    wait_for("the send failure", lambda: "event=mq-send-failed" in server.text(), timeout=60)
    line = next(ln for ln in server.text().splitlines() if "event=mq-send-failed" in ln)
    assert "destination=shop" in line and f"topic=mqk-nowhere-{sfx}" in line
    assert "answered no metadata request" in line
    # librdkafka's "Connect ... failed" once, not at each of its reconnects (~18 a second)
    client_lines = [ln for ln in server.text().splitlines() if "ERROR pycanal.mq.producer" in ln]
    assert client_lines and len(client_lines) <= 3, client_lines[:5]
    t0 = time.monotonic()
    assert server.stop() == 0
    took = time.monotonic() - t0  # a send waiting for the broker does not hold up the stop
    assert took < 10, (took, server.text()[-2000:])  # its stop's lines say which part took the time
    assert "event=mq-worker-stopped destination=shop took=" in server.text()
    assert "event=server-stopped took=" in server.text()
    meta = conf / "data" / "shop" / "meta.dat"
    assert not meta.exists() or '"cursor"' not in meta.read_text()  # nothing acked


@pytest.mark.parametrize(
    ("canal", "instance", "needle"),
    [
        ({"kafka.no.such.setting": "1"}, {}, "kafka.no.such.setting"),
        ({"kafka.max.request.size": "big"}, {}, "kafka.max.request.size"),
        ({}, {"canal.mq.partitionHash": "pycanal\\\\.(:$pk$"}, "canal.mq.partitionHash"),
        ({}, {"canal.mq.topic": ""}, "canal.mq.topic"),
        ({"kafka.transactional.id": "app"}, {}, "canal.mq.transaction"),
        ({"canal.mq.transaction": "true", "kafka.acks": "1"}, {}, "kafka.acks"),
    ],
    ids=["unknown-key", "bad-number", "bad-partition-hash", "no-topic", "id-without-transaction", "acks-1"],
)
def test_bad_settings_stop_the_start_with_one_line(
    canal: dict[str, str], instance: dict[str, str], needle: str, mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    stderr = refused_start(mariadb, tmp_path / "conf", canal, instance).stderr
    assert [line for line in stderr.splitlines() if needle in line], stderr
