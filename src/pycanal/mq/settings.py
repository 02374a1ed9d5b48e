"""The MQ settings a batch's records depend on, with Canal's defaults, and the Kafka client keys.

``MQOptions`` is ``MQProperties`` (``canal.properties``); ``MQDestination`` is one destination's
``CanalMQConfig`` (``instance.properties``). Both are plain values so the record builder stays
free of configuration loading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LEGACY_KAFKA_KEYS", "MQDestination", "MQOptions", "kafka_properties"]


@dataclass(frozen=True, slots=True)
class MQOptions:
    """``canal.mq.flatMessage``, ``canal.mq.database.hash``, the transaction-entry filter and the
    producer's ``max.request.size``.

    ``filter_transaction_entry`` is ``canal.instance.filter.transaction.entry`` when that key is
    set, else True: Canal's MQ default differs from its TCP default (false). ``max_request_size``
    (None: no limit) splits a larger record across several (:mod:`pycanal.mq.split`).
    """

    flat_message: bool = True
    database_hash: bool = True
    filter_transaction_entry: bool = True
    max_request_size: int | None = None


@dataclass(frozen=True, slots=True)
class MQDestination:
    """One destination's ``canal.mq.topic``, ``partition``, ``partitionsNum``, ``partitionHash``,
    ``dynamicTopic`` and ``dynamicTopicPartitionNum`` (None or "" for unset, as Canal)."""

    topic: str | None
    partition: int | None = None
    partitions_num: int | None = None
    partition_hash: str | None = None
    dynamic_topic: str | None = None
    dynamic_topic_partition_num: str | None = None


# CanalKafkaProducer.loadKafkaProperties: the <= 1.1.4 names, each copied over its kafka.* name.
LEGACY_KAFKA_KEYS: dict[str, str] = {
    "canal.mq.servers": "kafka.bootstrap.servers",
    "canal.mq.acks": "kafka.acks",
    "canal.mq.compressionType": "kafka.compression.type",
    "canal.mq.retries": "kafka.retries",
    "canal.mq.batchSize": "kafka.batch.size",
    "canal.mq.lingerMs": "kafka.linger.ms",
    "canal.mq.maxRequestSize": "kafka.max.request.size",
    "canal.mq.bufferMemory": "kafka.buffer.memory",
    "canal.mq.kafka.kerberos.enable": "kafka.kerberos.enable",
    "canal.mq.kafka.kerberos.krb5.file": "kafka.kerberos.krb5.file",
    "canal.mq.kafka.kerberos.jaas.file": "kafka.kerberos.jaas.file",
}


def kafka_properties(values: Mapping[str, str]) -> dict[str, str]:
    """The Kafka producer's configuration from ``canal.properties`` values, as Canal builds it:
    a non-empty legacy key overrides its ``kafka.*`` name, every ``kafka.*`` key is passed with the
    prefix removed (``kafka.kerberos.*`` included), and ``max.in.flight.requests.per.connection``
    is forced to 1 so a retried batch cannot overtake the next."""
    merged = dict(values)
    for old, new in LEGACY_KAFKA_KEYS.items():
        if merged.get(old):
            merged[new] = merged[old]
    out = {key[len("kafka.") :]: value for key, value in merged.items() if key.startswith("kafka.")}
    out["max.in.flight.requests.per.connection"] = "1"
    return out
