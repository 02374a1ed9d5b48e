"""The MQ settings a batch's records depend on, with Canal's defaults, and the Kafka client keys.

``MQOptions`` is ``MQProperties`` (``canal.properties``); ``MQDestination`` is one destination's
``CanalMQConfig`` (``instance.properties``). Both are plain values so the record builder stays
free of configuration loading. ``RabbitMQSettings`` is ``RabbitMQProducerConfig`` (the
``rabbitmq.*`` keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = [
    "LEGACY_KAFKA_KEYS",
    "MQDestination",
    "MQOptions",
    "RabbitMQSettings",
    "RabbitMQSettingsError",
    "kafka_properties",
    "rabbitmq_settings",
]


@dataclass(frozen=True, slots=True)
class MQOptions:
    """``canal.mq.flatMessage``, ``canal.mq.database.hash``, the transaction-entry filter, the
    producer's ``max.request.size`` and ``canal.mq.partitionOrder``.

    ``filter_transaction_entry`` is ``canal.instance.filter.transaction.entry`` when that key is
    set, else True: Canal's MQ default differs from its TCP default (false). ``max_request_size``
    (None: no limit) splits a larger record across several (:mod:`pycanal.mq.split`).
    ``partition_order`` (``canal.mq.partitionOrder``, pycanal's) copies DDL to every partition of a
    hashed topic and marks the records so a consumer can order the partitions (:mod:`pycanal.mq.order`).
    """

    flat_message: bool = True
    database_hash: bool = True
    filter_transaction_entry: bool = True
    max_request_size: int | None = None
    partition_order: bool = False


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


RABBITMQ_KEYS = (
    "rabbitmq.host",
    "rabbitmq.virtual.host",
    "rabbitmq.exchange",
    "rabbitmq.username",
    "rabbitmq.password",
    "rabbitmq.queue",
    "rabbitmq.routingKey",
    "rabbitmq.deliveryMode",
)
"""Canal's ``RabbitMQConstants`` (all empty in its shipped canal.properties)."""


class RabbitMQSettingsError(ValueError):
    """A ``rabbitmq.*`` value the producer cannot use; the message names the key."""


@dataclass(frozen=True, slots=True)
class RabbitMQSettings:
    """Where and how ``canal.serverMode = rabbitMQ`` publishes.

    ``exchange`` "" is AMQP's default exchange (the routing key names the queue). ``queue``,
    ``routing_key`` and ``exchange_type`` (Canal's ``rabbitmq.deliveryMode``, which Canal passes to
    ``exchangeDeclare`` as the exchange's type) are only for the declarations at connect: Canal
    declares ``queue`` when set, and the exchange and the binding ``queue <- routing_key`` when all
    four are set. Every message's routing key is its topic.
    """

    host: str
    port: int
    virtual_host: str = "/"
    username: str = "guest"
    password: str = "guest"
    exchange: str = ""
    queue: str = ""
    routing_key: str = ""
    exchange_type: str = ""
    tls: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def rabbitmq_settings(values: Mapping[str, str]) -> RabbitMQSettings:
    """The settings from ``canal.properties`` values, as ``CanalRabbitMQProducer.init`` reads them:
    an empty key is unset; ``canal.mq.servers`` (<= 1.1.4) overrides ``rabbitmq.host``, which is an
    ``amqp://`` / ``amqps://`` URI, ``host:port`` or ``host`` (port 5672). Set keys win over the
    URI's user, password and virtual host; the rest default as the AMQP client does (``guest``,
    ``/``) where Canal would pass nulls to it and fail."""

    def get(key: str) -> str:
        return (values.get(key) or "").strip()

    raw = get("canal.mq.servers") or get("rabbitmq.host")
    if not raw:
        raise RabbitMQSettingsError("rabbitmq.host is not set (host, host:port or an amqp:// URI)")
    user = password = vhost = None
    tls = False
    if raw.startswith("amqp"):
        url = urlsplit(raw)
        if url.scheme not in ("amqp", "amqps") or not url.hostname:
            raise RabbitMQSettingsError(f"rabbitmq.host={raw!r}: not an amqp:// or amqps:// URI with a host")
        tls = url.scheme == "amqps"
        host = url.hostname
        try:
            port = url.port or (5671 if tls else 5672)
        except ValueError:
            raise RabbitMQSettingsError(f"rabbitmq.host={raw!r}: the port is not a number") from None
        user = unquote(url.username) if url.username is not None else None
        password = unquote(url.password) if url.password is not None else None
        vhost = unquote(url.path[1:]) if len(url.path) > 1 else None
    else:
        host, sep, port_text = raw.rpartition(":") if ":" in raw else (raw, "", "")
        if not sep:
            port = 5672
        elif not port_text.isdigit() or not host:
            raise RabbitMQSettingsError(f"rabbitmq.host={raw!r}: not host:port")
        else:
            port = int(port_text)
    return RabbitMQSettings(
        host=host,
        port=port,
        virtual_host=get("rabbitmq.virtual.host") or vhost or "/",
        username=get("rabbitmq.username") or user or "guest",
        password=get("rabbitmq.password") or password or "guest",
        exchange=get("rabbitmq.exchange"),
        queue=get("rabbitmq.queue"),
        routing_key=get("rabbitmq.routingKey"),
        exchange_type=get("rabbitmq.deliveryMode"),
        tls=tls,
    )
