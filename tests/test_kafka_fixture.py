"""The private Kafka broker (pycanal.testing.kafka) and the session `kafka` fixture, with a real broker."""

from __future__ import annotations

import logging
import re
import socket
from pathlib import Path

import pytest
from confluent_kafka import Producer

from pycanal.testing import _process as process_module
from pycanal.testing.kafka import KAFKA_VERSION, KafkaStartError, PrivateKafka

REPO_ROOT = Path(__file__).resolve().parent.parent
_log = logging.getLogger(__name__)


def _produce(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": _log})
    errors: list[object] = []
    for partition, value in values:
        producer.produce(topic, value, partition=partition, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None] * len(values)


def test_version_is_the_poms() -> None:
    pom = (REPO_ROOT / "scripts" / "kafka" / "pom.xml").read_text()
    assert re.search(r"<kafka.version>(.*)</kafka.version>", pom).group(1) == KAFKA_VERSION


def test_session_broker_creates_topics_and_serves_records(kafka: PrivateKafka) -> None:
    assert kafka.running and kafka.bootstrap_servers.startswith("127.0.0.1:")
    kafka.create_topic("fixture-three", partitions=3)
    assert kafka.topics()["fixture-three"] == 3
    _produce(kafka.bootstrap_servers, "fixture-three", [(2, b"c"), (0, b"a"), (2, b"d")])
    got = [(r.partition, r.offset, r.value) for r in kafka.records("fixture-three")]
    assert got == [(0, 0, b"a"), (2, 0, b"c"), (2, 1, b"d")]
    assert "__pycanal_ready" not in kafka.topics()


def test_port_clash_retried_auto_create_off_restart_keeps_records_stop_removes_dir(
    kafka_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The broker's first port is taken: Kafka logs the BindException and then ~60 lines of
    # shutdown, and the fixture must still see the clash and move to another port.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = iter([taken])
        real = process_module.free_port
        monkeypatch.setattr(process_module, "free_port", lambda: next(ports, None) or real())
        broker = kafka_factory(auto_create=False, partitions=2)
    assert broker.port != taken
    root = broker.root_dir
    assert root is not None and root.is_dir()
    producer = Producer(broker.client_config(**{"message.timeout.ms": 3000}))
    failures: list[object] = []
    producer.produce("missing", b"x", on_delivery=lambda err, _m: failures.append(err))
    producer.flush(10)
    assert len(failures) == 1 and failures[0] is not None  # no topic, and none made for the send
    assert "missing" not in broker.topics()

    broker.create_topic("kept")
    assert broker.topics()["kept"] == 2
    _produce(broker.bootstrap_servers, "kept", [(0, b"before-kill"), (1, b"other")])
    port, cluster = broker.port, broker.cluster_id
    broker.restart(kill=True)
    assert (broker.port, broker.cluster_id) == (port, cluster)
    _produce(broker.bootstrap_servers, "kept", [(0, b"after-kill")])
    broker.restart()
    values = [(r.partition, r.value) for r in broker.records("kept")]
    assert values == [(0, b"before-kill"), (0, b"after-kill"), (1, b"other")]

    broker.stop()
    assert not broker.running
    assert not root.exists()
    broker.stop()  # idempotent


def test_start_failure_names_the_log(tmp_path: Path) -> None:
    broker = PrivateKafka(properties={"num.network.threads": "many"}, base_dir=tmp_path, keep=True)
    with pytest.raises(KafkaStartError) as info:
        broker.start()
    message = str(info.value)
    assert broker.root_dir is not None and str(broker.root_dir) in message
    assert "num.network.threads" in message
    assert not broker.running
