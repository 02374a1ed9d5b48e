"""``canal.serverMode = rabbitMQ`` against a real broker (pycanal.testing.rabbitmq) and the private MariaDB.

* In process (Deployer + MQStarter + RabbitMQSender, the launcher's wiring): the queue holds exactly
  the messages of the store batches, in order, and they carry every row change MariaDB reported (a
  DDL mid-stream included); the bodies are byte for byte what Kafka mode sends for the same entries
  without partitions (Canal's RabbitMQ producer ignores ``partitionHash``); persistent, ``text/plain``,
  through ``rabbitmq.exchange`` with the topic as routing key; flat and protobuf.
* ``pycanal server --conf DIR`` as a process: kill -9 of the server mid-stream, and a kill -9 of the
  broker mid-stream, lose nothing.
* Failures: a wrong password is one line naming the destination and ``rabbitmq.username`` /
  ``rabbitmq.password`` (masked), retried with back-off, nothing acked; bad ``rabbitmq.*`` settings
  stop the start with one line naming the key.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mq_kafka_support import (
    Server,
    Workload,
    flat_rows,
    proto_rows,
    recorded_run,
    refused_start,
    replay,
    wait_for,
    write_conf,
)
from pycanal.deployer import Deployer
from pycanal.deployer.mq import mq_destination, mq_options, rabbitmq_config
from pycanal.mq import build_records
from pycanal.mq.rabbitmq import RabbitMQSender
from pycanal.mq.records import build_rabbitmq_records
from pycanal.mq.settings import RabbitMQSettingsError, rabbitmq_settings
from pycanal.mq.starter import MQStarter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing.rabbitmq import PrivateRabbitMQ

pytestmark = pytest.mark.mariadb


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def _conf(
    tmp_path: Path, db: PrivateMariaDB, start: tuple[str, int], work: Workload, *, canal: dict, instance: dict
) -> Path:
    """A conf dir in rabbitMQ mode (``canal`` holds ``_rabbit_keys``) for the workload's tables."""
    return write_conf(
        tmp_path / "conf",
        db,
        start,
        bootstrap="unused:9092",
        tables=work.regex,
        canal=canal,
        instance=instance,
    )


def _rabbit_keys(rabbit: PrivateRabbitMQ, queue: str, **more: str) -> dict[str, str]:
    """canal.properties of rabbitMQ mode: pycanal declares ``queue`` and binds it to a direct
    exchange with the routing key ``queue`` (the destination's topic)."""
    return {
        "canal.serverMode": "rabbitMQ",
        "rabbitmq.host": rabbit.address,
        "rabbitmq.username": rabbit.user,
        "rabbitmq.password": rabbit.password,
        "rabbitmq.exchange": f"canal-{queue}",
        "rabbitmq.queue": queue,
        "rabbitmq.routingKey": queue,
        "rabbitmq.deliveryMode": "direct",
        **more,
    }


def _read(rabbit: PrivateRabbitMQ, queue: str) -> list[Any]:
    """The queue's messages as records ``flat_rows`` / ``proto_rows`` read (``value``)."""
    try:
        return [SimpleNamespace(value=m.body) for m in rabbit.messages(queue)]
    except Exception:  # noqa: BLE001 - not declared yet, or the broker restarting
        return []


# ---------------------------------------------------------------------------------- settings
def test_settings_read_as_canal_reads_them() -> None:
    s = rabbitmq_settings({"rabbitmq.host": "mq.example:5673", "rabbitmq.deliveryMode": "topic"})
    assert (s.host, s.port, s.virtual_host, s.username, s.password) == (
        "mq.example",
        5673,
        "/",
        "guest",
        "guest",
    )
    assert (s.exchange, s.exchange_type, s.tls) == ("", "topic", False)
    s = rabbitmq_settings(
        {"rabbitmq.host": "amqps://u%40x:p@h/v%2Fh", "rabbitmq.password": "set", "canal.mq.servers": ""}
    )
    assert (s.host, s.port, s.username, s.password, s.virtual_host, s.tls) == (
        "h",
        5671,
        "u@x",
        "set",
        "v/h",
        True,
    )
    assert rabbitmq_settings({"canal.mq.servers": "old", "rabbitmq.host": "new"}).address == "old:5672"
    for bad, key in [({}, "rabbitmq.host"), ({"rabbitmq.host": "h:x"}, "rabbitmq.host")]:
        with pytest.raises(RabbitMQSettingsError, match=key):
            rabbitmq_settings(bad)


# ---------------------------------------------------------------------------------- in process
@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_queue_holds_exactly_the_built_messages(
    flat: bool, mariadb: PrivateMariaDB, rabbitmq: PrivateRabbitMQ, tmp_path: Path
) -> None:
    sfx = _suffix()
    queue = f"mqr-{sfx}"
    work = Workload(mariadb, sfx)
    start = mariadb.current_binlog()
    work.create()
    # partitionHash is set and ignored, as by Canal's RabbitMQ producer.
    conf = _conf(
        tmp_path,
        mariadb,
        start,
        work,
        canal={**_rabbit_keys(rabbitmq, queue), "canal.mq.flatMessage": str(flat).lower()},
        instance={
            "canal.mq.topic": queue,
            "canal.mq.partitionsNum": 3,
            "canal.mq.partitionHash": "pycanal\\\\..*:$pk$",
        },
    )
    built, cfg = recorded_run(
        conf, work, lambda cfg: RabbitMQSender(rabbitmq_config(cfg)), build_rabbitmq_records
    )
    expected = sum(work.rows.values())
    messages = rabbitmq.messages(queue)
    assert [m.body for m in messages] == [r.value for *_, records in built for r in records]
    assert {(m.exchange, m.routing_key, m.delivery_mode, m.content_type) for m in messages} == {
        (f"canal-{queue}", queue, 2, "text/plain")
    }
    # Kafka mode's values for the same entries, unpartitioned: the same bytes.
    dest = replace(mq_destination(cfg.instance("shop")), partitions_num=None, partition_hash=None)
    options = replace(mq_options(cfg), max_request_size=None)
    kafka_values = [
        r.value
        for batch_id, entries, raw, ts, _ in built
        for r in build_records(batch_id, entries, raw, dest, options, ts)
    ]
    assert [m.body for m in messages] == kafka_values
    rows, other = flat_rows(_read(rabbitmq, queue)) if flat else proto_rows(_read(rabbitmq, queue))
    assert len(rows) == expected == len({r.key for r in rows})
    if flat:
        assert any(m.type == "ALTER" and m.is_ddl for m in other)
    else:
        assert any(e.header.eventType == pb.ALTER for e in other)


def test_dynamic_topics_are_routing_keys_of_the_default_exchange(
    mariadb: PrivateMariaDB, rabbitmq: PrivateRabbitMQ, tmp_path: Path
) -> None:
    """No ``rabbitmq.exchange``: AMQP's default exchange, each dynamic topic (``db.table`` with
    ``.`` -> ``_``) a queue's name."""
    sfx = _suffix()
    work = Workload(mariadb, sfx, seed=31)
    start = mariadb.current_binlog()
    work.create()
    default = f"mqr-dyn-{sfx}"
    queues = {name: f"pycanal_{work.table(name)}" for name in ("a", "b")}
    for queue in (default, *queues.values()):
        rabbitmq.declare_queue(queue)
    keys = {k: v for k, v in _rabbit_keys(rabbitmq, default).items() if not k.startswith("rabbitmq.")}
    keys |= {"rabbitmq.host": rabbitmq.url}  # user and password from the URI
    conf = _conf(
        tmp_path,
        mariadb,
        start,
        work,
        canal=keys,
        instance={"canal.mq.topic": default, "canal.mq.dynamicTopic": "pycanal\\\\..*"},
    )
    deployer = Deployer(conf)
    cfg = deployer.config
    settings = rabbitmq_config(cfg)
    assert settings.exchange == "" and settings.username == rabbitmq.user
    starter = MQStarter(
        deployer.server,
        {},
        mq_options(cfg),
        lambda _d: RabbitMQSender(settings),
        builder=build_rabbitmq_records,
    )
    deployer.attach_mq(starter)
    deployer.start()
    try:
        work.round(0)
        want = dict(work.rows)
        wait_for(
            "every row change in its table's queue",
            lambda: all(len(flat_rows(_read(rabbitmq, q))[0]) >= want[n] for n, q in queues.items()),
        )
        stats = starter.stats()["shop"]
    finally:
        deployer.stop()
    assert stats.failures == 0, stats.last_error
    for name, queue in queues.items():
        rows, _ = flat_rows(_read(rabbitmq, queue))
        assert {r.table for r in rows} == {work.table(name)} and len(rows) == want[name]
        assert {m.routing_key for m in rabbitmq.messages(queue)} == {queue}


# ---------------------------------------------------------------------------------- the CLI
def _writer(work: Workload, event: threading.Event, rounds_after: int) -> threading.Thread:
    """Rounds until ``rounds_after`` rounds after ``event`` (at most 400): the event falls
    mid-stream however slowly the server starts."""

    def run() -> None:
        after = 0
        for k in range(400):
            work.round(k)
            time.sleep(0.05)
            after += event.is_set()
            if after >= rounds_after:
                break

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_server_kill9_mid_stream_loses_nothing(
    mariadb: PrivateMariaDB, rabbitmq: PrivateRabbitMQ, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    queue = f"mqr-kill-{sfx}"
    work = Workload(mariadb, sfx, seed=11)
    start = mariadb.current_binlog()
    work.create()
    conf = _conf(
        tmp_path,
        mariadb,
        start,
        work,
        canal={
            **_rabbit_keys(rabbitmq, queue),
            "canal.mq.flatMessage": "false",
            "canal.mq.canalBatchSize": 20,
        },
        instance={"canal.mq.topic": queue},
    )
    log = tmp_path / "server.log"
    servers.append(Server(conf, log).start())
    killed = threading.Event()
    thread = _writer(work, killed, 15)
    wait_for("the first messages", lambda: len(_read(rabbitmq, queue)) > 0, timeout=60, interval=0.2)
    servers[0].kill()  # mid-stream: the writer is still writing
    killed_at = sum(work.rows.values())
    killed.set()
    servers.append(Server(conf, log).start())
    thread.join()
    expected = sum(work.rows.values())
    assert killed_at < expected, "the kill came after the workload; make it longer"
    wait_for(
        f"{expected} distinct row changes",
        lambda: len({r.key for r in proto_rows(_read(rabbitmq, queue))[0]}) >= expected,
        timeout=90,
    )
    assert servers[1].stop() == 0
    rows, _ = proto_rows(_read(rabbitmq, queue))
    keys = {r.key for r in rows}
    print(f"{len(rows)} row changes read, {len(keys)} distinct, {len(rows) - len(keys)} resent after kill -9")
    assert len(keys) == expected
    assert "Traceback" not in log.read_text()
    for name in ("a", "b"):  # replayed in binlog order, the entries give the tables
        assert replay(rows, work.table(name)) == work.state(name)


def test_broker_kill9_mid_stream_loses_nothing(
    mariadb: PrivateMariaDB, rabbitmq: PrivateRabbitMQ, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    queue = f"mqr-restart-{sfx}"
    work = Workload(mariadb, sfx, seed=19)
    start = mariadb.current_binlog()
    work.create()
    conf = _conf(
        tmp_path,
        mariadb,
        start,
        work,
        canal={**_rabbit_keys(rabbitmq, queue), "canal.mq.canalBatchSize": 20},
        instance={"canal.mq.topic": queue},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    restarted = threading.Event()
    thread = _writer(work, restarted, 10)
    wait_for("the first messages", lambda: len(_read(rabbitmq, queue)) > 0, timeout=60, interval=0.2)
    rabbitmq.restart(kill=True)  # dies under the producer, back on the same port with its Mnesia
    restarted.set()
    thread.join()
    expected = sum(work.rows.values())
    wait_for(
        f"{expected} distinct row changes",
        lambda: len({r.key for r in flat_rows(_read(rabbitmq, queue))[0]}) >= expected,
        timeout=90,
    )
    rows, _ = flat_rows(_read(rabbitmq, queue))
    print(f"{len(rows)} row changes read, {len({r.key for r in rows})} distinct after a broker kill -9")
    assert len({r.key for r in rows}) == expected
    assert server.proc is not None and server.proc.poll() is None
    assert server.stop() == 0


# ---------------------------------------------------------------------------------- failures
def test_wrong_password_is_one_line_and_nothing_acked(
    mariadb: PrivateMariaDB, rabbitmq: PrivateRabbitMQ, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    queue = f"mqr-denied-{sfx}"
    work = Workload(mariadb, sfx, seed=5)
    start = mariadb.current_binlog()
    work.create()
    conf = _conf(
        tmp_path,
        mariadb,
        start,
        work,
        canal=_rabbit_keys(rabbitmq, queue, **{"rabbitmq.password": "not-the-password"}),
        instance={"canal.mq.topic": queue},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    work.round(0)
    wait_for("two send failures", lambda: server.text().count("event=mq-send-failed") >= 2, timeout=60)
    text = server.text()
    lines = [ln for ln in text.splitlines() if "event=mq-send-failed" in ln]
    assert "destination=shop" in lines[0] and f"topic={queue}" in lines[0]
    assert "rabbitmq.username='pycanal'" in lines[0] and "rabbitmq.password='***'" in lines[0]
    assert "ACCESS_REFUSED" in lines[0]
    assert "not-the-password" not in text and "Traceback" not in text
    assert all(len(ln.splitlines()) == 1 for ln in lines)
    assert server.stop() == 0
    meta = conf / "data" / "shop" / "meta.dat"
    assert not meta.exists() or '"cursor"' not in meta.read_text()  # nothing acked


@pytest.mark.parametrize(
    ("canal", "needle"),
    [
        ({"rabbitmq.host": ""}, "rabbitmq.host is not set"),
        ({"rabbitmq.host": "127.0.0.1:port"}, "rabbitmq.host='127.0.0.1:port'"),
        ({"canal.mq.transaction": "true"}, "canal.mq.transaction"),
    ],
    ids=["no-host", "bad-port", "transaction"],
)
def test_bad_settings_stop_the_start_with_one_line(
    canal: dict[str, str], needle: str, mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    stderr = refused_start(
        mariadb, tmp_path / "conf", {"canal.serverMode": "rabbitMQ", "rabbitmq.host": "127.0.0.1:9", **canal}
    ).stderr
    assert [line for line in stderr.splitlines() if needle in line], stderr
