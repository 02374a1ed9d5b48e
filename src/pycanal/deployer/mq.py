"""A conf dir's MQ settings as the MQ layer's values (Canal's ``CanalStarter.buildMQProperties`` and
the instance's ``CanalMQConfig``), and the MQ starter of a deployed server.

* :func:`mq_options`: ``canal.mq.flatMessage``, ``canal.mq.database.hash``, pycanal's
  ``canal.mq.partitionOrder`` and the transaction-entry filter, which in an MQ mode is on unless ``canal.instance.filter.transaction.entry`` is set in
  canal.properties (Canal's MQ default; its TCP default is off).
* :func:`mq_destination`: one destination's ``canal.mq.topic`` and routing keys; a malformed
  ``canal.mq.partitionHash`` / ``dynamicTopic`` / ``dynamicTopicPartitionNum`` is a
  :class:`~pycanal.config.ConfigError` naming the destination and the key.
* :func:`kafka_config`: the producer's librdkafka configuration from the ``kafka.*`` keys (and the
  <= 1.1.4 ``canal.mq.*`` names), where canal.properties, overrides or the environment set them;
  ``kafka.transactional.id`` only with ``canal.mq.transaction = true`` (it is the prefix of each
  destination's transactional id, :func:`pycanal.mq.kafka_config.transactional_config`).
* :func:`rabbitmq_config`: ``canal.serverMode = rabbitMQ``'s ``rabbitmq.*`` keys (and
  ``canal.mq.servers``).
"""

from __future__ import annotations

from typing import Any

from pycanal.config import CanalConfig, ConfigError, InstanceConfig
from pycanal.mq.kafka_config import CANAL_KAFKA_DEFAULTS, ProducerConfigError, producer_config
from pycanal.mq.rules import match_topic, parse_partition_hash, topic_partitions
from pycanal.mq.settings import (
    LEGACY_KAFKA_KEYS,
    RABBITMQ_KEYS,
    MQDestination,
    MQOptions,
    RabbitMQSettings,
    kafka_properties,
    rabbitmq_settings,
)

__all__ = ["MQ_MODES", "kafka_config", "mq_destination", "mq_options", "rabbitmq_config"]

MQ_MODES = ("kafka", "rabbitMQ")
"""The ``canal.serverMode`` values pycanal serves besides ``tcp``."""

_FILTER_KEY = "canal.instance.filter.transaction.entry"


def mq_filter_transaction_entry(cfg: CanalConfig) -> bool:
    """Canal's ``MQProperties.filterTransactionEntry``: the canal.properties value, else on."""
    if cfg.server.lookup(_FILTER_KEY) is None:
        return True
    return bool(cfg[_FILTER_KEY])


def mq_options(cfg: CanalConfig) -> MQOptions:
    """The options; in Kafka mode ``max_request_size`` is what the producer gets as
    ``message.max.bytes`` (``kafka.max.request.size``), so that no record is built larger than it
    refuses."""
    kafka = cfg["canal.serverMode"] == "kafka"
    return MQOptions(
        flat_message=bool(cfg["canal.mq.flatMessage"]),
        database_hash=bool(cfg["canal.mq.database.hash"]),
        filter_transaction_entry=mq_filter_transaction_entry(cfg),
        max_request_size=int(kafka_config(cfg)["message.max.bytes"]) if kafka else None,
        partition_order=kafka and bool(cfg["canal.mq.partitionOrder"]),  # RabbitMQ has no partitions
    )


def mq_destination(ic: InstanceConfig) -> MQDestination:
    dest = MQDestination(
        topic=ic["canal.mq.topic"] or None,
        partition=ic["canal.mq.partition"],
        partitions_num=ic["canal.mq.partitionsNum"],
        partition_hash=ic["canal.mq.partitionHash"] or None,
        dynamic_topic=ic["canal.mq.dynamicTopic"] or None,
        dynamic_topic_partition_num=ic["canal.mq.dynamicTopicPartitionNum"] or None,
    )
    checks: list[tuple[str, str | None, Any]] = [
        ("canal.mq.partitionHash", dest.partition_hash, parse_partition_hash),
        ("canal.mq.dynamicTopic", dest.dynamic_topic, lambda v: match_topic("a.b", v)),
        (
            "canal.mq.dynamicTopicPartitionNum",
            dest.dynamic_topic_partition_num,
            lambda v: topic_partitions("t", v),
        ),
    ]
    for key, value, parse in checks:
        if value:
            try:
                parse(value)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the key's fault
                src = ic.source(key)
                raise ConfigError(
                    f"destination {ic.destination}: {src}: {key}={value!r}: {exc}", key=key, source=src
                ) from None
    if not dest.topic and not dest.dynamic_topic:
        src = ic.source("canal.mq.topic")
        raise ConfigError(
            f"destination {ic.destination}: canal.mq.topic is not set (nor canal.mq.dynamicTopic)",
            key="canal.mq.topic",
            source=src,
        )
    return dest


def kafka_config(cfg: CanalConfig) -> dict[str, str]:
    """librdkafka's configuration (see :func:`pycanal.mq.kafka_config.producer_config`)."""
    names = {key for key in cfg.server.keys_set() if key.startswith("kafka.")}
    names |= {f"kafka.{key}" for key in CANAL_KAFKA_DEFAULTS} | set(LEGACY_KAFKA_KEYS)
    values = {key: raw for key in sorted(names) if (raw := cfg.server.raw(key)) is not None}
    config = producer_config(kafka_properties(values))
    if "transactional.id" in config and not cfg["canal.mq.transaction"]:
        raise ProducerConfigError(
            "kafka.transactional.id is set but canal.mq.transaction is not true: pycanal's "
            "transactional producer needs both (the id is each destination's prefix)"
        )
    return config


def rabbitmq_config(cfg: CanalConfig) -> RabbitMQSettings:
    """The RabbitMQ producer's settings (see :func:`pycanal.mq.settings.rabbitmq_settings`); a bad
    value is a :class:`~pycanal.mq.settings.RabbitMQSettingsError` naming the key."""
    values = {
        key: raw for key in (*RABBITMQ_KEYS, "canal.mq.servers") if (raw := cfg.server.raw(key)) is not None
    }
    return rabbitmq_settings(values)
