"""The Kafka edge of ``canal.serverMode = kafka``: records out, and a batch counts as sent only when
the broker acknowledged every one of them.

The client is confluent-kafka (librdkafka), chosen by ``bench/kafka_clients.py``: 200,000 records of
500 bytes to a private Kafka 4.4 broker with Canal's producer settings (acks=all, batch.size=16384,
linger.ms=1, one request in flight), every delivery awaited, 3 alternating rounds on this 2-core
machine (shared with another session's test run, load ~2.3): confluent-kafka 2.16.1 median 72.6k
records/s (56k-104k) using 0.7-1.1 s of CPU in this process; kafka-python 3.0.12 median 6.6k
records/s (5.9k-7.6k) using 20-25 s of CPU -- about 11x, and the CPU kafka-python burns is CPU the
parser needs. librdkafka batches and does the network I/O in its own C threads; the Python side only
hands over bytes.

Canal's keys are the Java client's (``kafka.*`` in canal.properties, with the prefix removed, and the
<= 1.1.4 ``canal.mq.*`` names, see :func:`pycanal.mq.settings.kafka_properties`); librdkafka shares
most of them. :func:`producer_config` translates the ones it names differently and drops the
Java-only ones; any other key goes to librdkafka as written, so its own keys work too, and an
unknown one is an error naming the ``kafka.*`` key.

:class:`KafkaSender` sends one batch's records and waits for each delivery report. Before the first
record to a topic it asks the broker for the topic's metadata (which auto-creates it where the broker
allows, as the Java producer's metadata request does), so a missing topic or a partition the topic
does not have is one clear :class:`SendError` at once instead of a delivery timeout.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .records import Record

__all__ = ["CANAL_KAFKA_DEFAULTS", "KafkaSender", "ProducerConfigError", "SendError", "producer_config"]

log = logging.getLogger(__name__)

CANAL_KAFKA_DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "acks": "all",
    "compression.type": "none",
    "batch.size": "16384",
    "linger.ms": "1",
    "max.request.size": "1048576",
    "buffer.memory": "33554432",
    "max.in.flight.requests.per.connection": "1",
    "retries": "0",
}
"""The ``kafka.*`` values Canal's shipped canal.properties sets: used where a conf dir omits them."""

# Java client names librdkafka spells differently: name -> (librdkafka name, value converter).
_RENAMED: dict[str, tuple[str, Any]] = {
    "max.request.size": ("message.max.bytes", str),
    "buffer.memory": ("queue.buffering.max.kbytes", lambda v: str(max(1, math.ceil(int(v) / 1024)))),
    "delivery.timeout.ms": ("message.timeout.ms", str),
}
# Java-only keys with no librdkafka meaning: the record values are bytes already, and librdkafka
# never blocks a send on metadata.
_JAVA_ONLY = frozenset(
    {"key.serializer", "value.serializer", "max.block.ms", "kerberos.krb5.file", "kerberos.jaas.file"}
)
# A send that cannot be delivered fails after this long unless kafka.delivery.timeout.ms says
# otherwise: the Java client's delivery.timeout.ms default (librdkafka's own is 5 minutes).
_DELIVERY_TIMEOUT_MS = "120000"


class ProducerConfigError(ValueError):
    """A ``kafka.*`` setting the producer cannot take; the message names the key."""


class SendError(RuntimeError):
    """Records of a batch were not all delivered; nothing of the batch may be acked."""

    def __init__(self, message: str, topic: str | None = None) -> None:
        super().__init__(message)
        self.topic = topic


def producer_config(properties: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's configuration from Canal's Kafka properties (``kafka.*`` with the prefix removed,
    as :func:`~pycanal.mq.settings.kafka_properties` returns them; Canal's shipped defaults fill the
    gaps). Kerberos through Canal's own ``kerberos.enable`` is refused: librdkafka takes
    ``sasl.mechanism=GSSAPI`` and ``sasl.kerberos.*`` instead."""
    merged = {**CANAL_KAFKA_DEFAULTS, **properties}
    if merged.get("kerberos.enable", "false").strip().lower() == "true":
        raise ProducerConfigError(
            "kafka.kerberos.enable=true: not supported by pycanal's producer; set kafka.security.protocol, "
            "kafka.sasl.mechanism=GSSAPI and kafka.sasl.kerberos.* (librdkafka's names) instead"
        )
    out: dict[str, str] = {"message.timeout.ms": _DELIVERY_TIMEOUT_MS}
    for key, value in merged.items():
        if key in _JAVA_ONLY or key == "kerberos.enable":
            continue
        if key in _RENAMED:
            name, convert = _RENAMED[key]
            try:
                out[name] = convert(value.strip())
            except ValueError:
                raise ProducerConfigError(f"kafka.{key}={value!r}: not a number") from None
        else:
            out[key] = value.strip()
    out["max.in.flight.requests.per.connection"] = "1"  # as Canal: a resent batch never overtakes
    return out


def _java_key(name: str) -> str:
    """The ``kafka.*`` key a librdkafka configuration name came from (for error messages)."""
    for java, (renamed, _) in _RENAMED.items():
        if renamed == name:
            return f"kafka.{java}"
    return f"kafka.{name}"


class KafkaSender:
    """One destination's Kafka producer (see the module docstring).

    Parameters:
        config: librdkafka's configuration (:func:`producer_config`).
        metadata_timeout: seconds to wait for a topic's metadata before a send fails.
    """

    def __init__(self, config: Mapping[str, str], *, metadata_timeout: float = 10.0) -> None:
        from confluent_kafka import KafkaException, Producer

        self.config = dict(config)
        self.metadata_timeout = metadata_timeout
        self.delivery_timeout = int(self.config["message.timeout.ms"]) / 1000.0
        try:
            self._producer = Producer({**self.config, "logger": log})
        except KafkaException as exc:
            raise ProducerConfigError(self._config_error(exc.args[0].str())) from None
        except (TypeError, ValueError) as exc:
            raise ProducerConfigError(str(exc)) from None
        self._partitions: dict[str, int] = {}
        self._aborted = False

    def _config_error(self, text: str) -> str:
        for name in self.config:
            if f'"{name}"' in text:
                return f"{_java_key(name)}={self.config[name]!r}: {text}"
        return f"Kafka producer configuration: {text}"

    @property
    def bootstrap_servers(self) -> str:
        return self.config.get("bootstrap.servers", "")

    def partitions(self, topic: str) -> int:
        """The topic's partition count from the broker (cached once known)."""
        from confluent_kafka import KafkaException

        known = self._partitions.get(topic)
        if known is not None:
            return known
        deadline = time.monotonic() + self.metadata_timeout
        while True:
            self._check_aborted(topic)
            try:  # in short slices, so that abort() is noticed
                meta = self._producer.list_topics(
                    topic, timeout=min(1.0, max(0.1, deadline - time.monotonic()))
                )
            except KafkaException as exc:
                if time.monotonic() < deadline:
                    continue
                raise SendError(
                    f"Kafka at {self.bootstrap_servers} answered no metadata request "
                    f"within {self.metadata_timeout:g}s ({exc.args[0].str()})",
                    topic,
                ) from None
            found = meta.topics.get(topic)
            error = found.error if found is not None else None
            if found is not None and error is None and found.partitions:
                self._partitions[topic] = len(found.partitions)
                return len(found.partitions)
            if time.monotonic() >= deadline:
                reason = error.str() if error is not None else "no partitions"
                raise SendError(
                    f"topic {topic!r} is not on the broker {self.bootstrap_servers} ({reason}); "
                    "create it, or let the broker auto-create topics",
                    topic,
                )
            time.sleep(0.2)  # an auto-created topic appears within a moment

    def send(self, records: Sequence[Record]) -> None:
        """Send every record and return once the broker acknowledged each; raise :class:`SendError`
        otherwise (then whatever is still queued is purged, never sent later behind a resend)."""
        for topic in dict.fromkeys(r.topic for r in records):
            count = self.partitions(topic)
            bad = next((r.partition for r in records if r.topic == topic and r.partition >= count), None)
            if bad is not None:
                self._partitions.pop(topic, None)  # maybe since grown: asked again next time
                raise SendError(
                    f"partition {bad} of topic {topic!r} does not exist: the topic has {count} "
                    "(canal.mq.partitionsNum / dynamicTopicPartitionNum larger than the topic)",
                    topic,
                )
        failures: list[tuple[Any, Any]] = []
        delivered = 0

        def report(err: Any, msg: Any) -> None:
            nonlocal delivered
            if err is None:
                delivered += 1
            else:
                failures.append((err, msg))

        producer = self._producer
        try:
            for record in records:
                while True:
                    try:
                        producer.produce(
                            record.topic, record.value, partition=record.partition, on_delivery=report
                        )
                        break
                    except BufferError:  # librdkafka's queue is full: let deliveries drain it
                        producer.poll(0.05)
                    if failures:
                        break
                producer.poll(0)
                if failures:
                    break
            remaining = self._flush(records[0].topic if records else None) if not failures else len(producer)
        except Exception:
            self._discard()
            raise
        if failures or remaining or delivered != len(records):
            self._discard()
            if failures:
                err, msg = failures[0]
                where = f"topic {msg.topic()!r} partition {msg.partition()}"
                raise SendError(f"{where}: {err.str()}", msg.topic())
            raise SendError(
                f"{remaining} of {len(records)} records not delivered to {self.bootstrap_servers} "
                f"within {self.delivery_timeout + 5.0:g}s",
                records[0].topic if records else None,
            )

    def _flush(self, topic: str | None) -> int:
        """Wait for the delivery reports, in short slices so that :meth:`abort` is noticed; the
        number of records still undelivered at the deadline."""
        deadline = time.monotonic() + self.delivery_timeout + 5.0
        while True:
            self._check_aborted(topic)
            remaining = self._producer.flush(min(0.5, max(0.0, deadline - time.monotonic())))
            if remaining == 0 or time.monotonic() >= deadline:
                return remaining

    def abort(self) -> None:
        """Make a running or later :meth:`send` fail at once (the server is stopping)."""
        self._aborted = True

    def _check_aborted(self, topic: str | None) -> None:
        if self._aborted:
            raise SendError("the producer was stopped before every record was delivered", topic)

    def _discard(self) -> None:
        """Drop what is queued or in flight so it cannot arrive after the batch is resent."""
        try:
            self._producer.purge()
            self._producer.flush(0)
        except Exception:  # noqa: BLE001 - the batch fails either way
            log.debug("purging the producer failed", exc_info=True)
        self._partitions.clear()

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (nothing, between batches) and release the client."""
        self._producer.flush(timeout)
