"""The Kafka producer's configuration from a Canal conf dir (no broker): Canal's ``kafka.*`` keys and
their <= 1.1.4 names, the librdkafka spellings, the MQ options and a destination's routing keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from pycanal.config import CanalConfig, ConfigError
from pycanal.deployer.mq import kafka_config, mq_destination, mq_filter_transaction_entry, mq_options
from pycanal.mq import MQDestination
from pycanal.mq.producer import KafkaSender, ProducerConfigError, producer_config


def _conf(tmp_path: Path, server: str, instance: str = "canal.mq.topic = t\n") -> CanalConfig:
    (tmp_path / "shop").mkdir()
    (tmp_path / "canal.properties").write_text(
        "canal.serverMode = kafka\ncanal.destinations = shop\ncanal.conf.dir = .\n" + server
    )
    (tmp_path / "shop" / "instance.properties").write_text(instance)
    return CanalConfig.load(tmp_path, environ={})


def test_canal_defaults_and_librdkafka_names(tmp_path: Path) -> None:
    config = kafka_config(_conf(tmp_path, ""))
    assert config == {
        "bootstrap.servers": "127.0.0.1:9092",
        "acks": "all",
        "compression.type": "none",
        "batch.size": "16384",
        "linger.ms": "1",
        "message.max.bytes": "1048576",  # max.request.size
        "queue.buffering.max.kbytes": "32768",  # buffer.memory, in KiB
        "max.in.flight.requests.per.connection": "1",
        "retries": "0",
        "message.timeout.ms": "120000",  # the Java client's delivery.timeout.ms default
    }


def test_kafka_keys_legacy_names_and_the_forced_in_flight(tmp_path: Path) -> None:
    cfg = _conf(
        tmp_path,
        "kafka.bootstrap.servers = a:1\n"
        "canal.mq.servers = b:2\n"  # a <= 1.1.4 name wins over its kafka.* key, as in Canal
        "kafka.linger.ms = 20\n"
        "kafka.max.in.flight.requests.per.connection = 5\n"
        "kafka.delivery.timeout.ms = 3000\n"
        "kafka.value.serializer = org.apache.kafka.common.serialization.ByteArraySerializer\n"
        "kafka.client.id = canal\n",  # a librdkafka key of the same name passes as written
    )
    config = kafka_config(cfg)
    assert config["bootstrap.servers"] == "b:2"
    assert config["linger.ms"] == "20"
    assert config["max.in.flight.requests.per.connection"] == "1"
    assert config["message.timeout.ms"] == "3000"
    assert config["client.id"] == "canal"
    assert "value.serializer" not in config
    KafkaSender(config).close(0)  # librdkafka takes every key


def test_environment_overrides_a_shipped_key(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "canal.properties").write_text("canal.destinations = shop\ncanal.conf.dir = .\n")
    (tmp_path / "shop" / "instance.properties").write_text("")
    cfg = CanalConfig.load(tmp_path, environ={"KAFKA_BOOTSTRAP_SERVERS": "env:9"})
    assert kafka_config(cfg)["bootstrap.servers"] == "env:9"


@pytest.mark.parametrize(
    ("properties", "needle"),
    [
        ({"no.such.key": "1"}, "kafka.no.such.key"),
        ({"max.request.size": "big"}, "kafka.max.request.size"),
        ({"kerberos.enable": "true"}, "kafka.kerberos.enable"),
    ],
)
def test_bad_producer_settings_name_the_key(properties: dict[str, str], needle: str) -> None:
    with pytest.raises(ProducerConfigError, match=needle.replace(".", r"\.")):
        KafkaSender(producer_config(properties))


def test_mq_options_and_the_transaction_filter(tmp_path: Path) -> None:
    cfg = _conf(tmp_path, "canal.mq.flatMessage = false\ncanal.mq.database.hash = false\n")
    options = mq_options(cfg)
    assert (options.flat_message, options.database_hash, options.filter_transaction_entry) == (
        False,
        False,
        True,
    )
    assert mq_filter_transaction_entry(cfg) is True


def test_partition_order_is_pycanals_and_off_by_default(tmp_path: Path) -> None:
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    assert mq_options(_conf(tmp_path / "off", "")).partition_order is False
    assert mq_options(_conf(tmp_path / "on", "canal.mq.partitionOrder = true\n")).partition_order is True


def test_transaction_filter_off_when_canal_properties_says_so(tmp_path: Path) -> None:
    cfg = _conf(tmp_path, "canal.instance.filter.transaction.entry = false\n")
    assert mq_options(cfg).filter_transaction_entry is False


def test_destination_routing_keys(tmp_path: Path) -> None:
    cfg = _conf(
        tmp_path,
        "",
        "canal.mq.topic = t\ncanal.mq.partitionsNum = 3\ncanal.mq.partitionHash = db\\\\..*:$pk$\n"
        "canal.mq.dynamicTopic = x:db\\\\.a\ncanal.mq.dynamicTopicPartitionNum = x:6\n",
    )
    assert mq_destination(cfg.instance("shop")) == MQDestination(
        topic="t",
        partition=0,
        partitions_num=3,
        partition_hash="db\\..*:$pk$",
        dynamic_topic="x:db\\.a",
        dynamic_topic_partition_num="x:6",
    )


@pytest.mark.parametrize(
    ("instance", "key"),
    [
        ("canal.mq.topic = t\ncanal.mq.partitionHash = db\\\\.(:$pk$\n", "canal.mq.partitionHash"),
        ("canal.mq.dynamicTopic = db\\\\.(\n", "canal.mq.dynamicTopic"),
        ("", "canal.mq.topic"),
    ],
    ids=["partition-hash", "dynamic-topic", "no-topic"],
)
def test_bad_routing_names_destination_and_key(tmp_path: Path, instance: str, key: str) -> None:
    cfg = _conf(tmp_path, "", instance)
    with pytest.raises(ConfigError, match=rf"destination shop: .*{key.replace('.', '[.]')}"):
        mq_destination(cfg.instance("shop"))
