"""Reading Canal's topics back: the records of ``canal.serverMode = kafka`` (pycanal's or Canal's) as
the objects the TCP client gives, for ``pycanal tail --kafka`` and for Python consumers.

A record is a flat message when its value is JSON (it starts with ``{``), else a protobuf ``Packet``
of ``Messages``; both shapes can share a topic. :class:`MQMessage` carries either the
:class:`~pycanal.mq.flat.FlatMessage` or the ``Entry`` list with the batch id (0 where Canal wrote
none: split or parsed batches).

    with KafkaConsumer("127.0.0.1:9092", ["example"]) as consumer:
        for message in consumer.messages():
            ...                      # message.flat, or message.entries
            consumer.commit()        # the offsets of what was handed out, as an ack

Offsets are those of a consumer group (``group_id``), committed only by :meth:`commit`: what was not
committed comes again to the group's next consumer, as an unacked batch does over TCP.

A secured Kafka takes the settings the producer takes (``config``): librdkafka's, or the Java
client's ``security.protocol``, ``sasl.mechanism`` and a PLAIN or SCRAM ``sasl.jaas.config``
(:func:`pycanal.mq.kafka_config.sasl_config`). A refused login raises from :meth:`messages` instead of
being retried without end.

A record pycanal split because it was over ``kafka.max.request.size`` (:mod:`pycanal.mq.split`)
is handed out once, whole, when its last part arrives (at its first part's offset; committed past
its last).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb

from .flat import FlatMessage
from .kafka_config import sasl_config
from .split import Joiner

__all__ = ["KafkaConsumer", "MQMessage", "decode_record"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class MQMessage:
    """One record of a Canal topic, decoded."""

    topic: str
    partition: int
    offset: int
    flat: FlatMessage | None = None
    batch_id: int = 0
    entries: list[pb.Entry] = field(default_factory=list)

    @property
    def row_count(self) -> int:
        """Row changes in the record (for limits and progress)."""
        if self.flat is not None:
            return len(self.flat.data or []) if not self.flat.is_ddl else 0
        n = 0
        for entry in self.entries:
            if entry.entryType == pb.ROWDATA:
                n += len(pb.RowChange.FromString(entry.storeValue).rowDatas)
        return n


def decode_record(topic: str, partition: int, offset: int, value: bytes | None) -> MQMessage:
    """A record's value as Canal wrote it: flat JSON or a protobuf ``Packet``."""
    message = MQMessage(topic, partition, offset)
    if not value:
        return message
    if value[:1] == b"{":
        message.flat = FlatMessage.from_json(value)
        return message
    packet = cp.Packet.FromString(value)
    if packet.type != cp.MESSAGES:
        raise ValueError(f"{topic}[{partition}]@{offset}: a Packet of type {packet.type}, not MESSAGES")
    body = cp.Messages.FromString(packet.body)
    message.batch_id = body.batch_id
    message.entries = [pb.Entry.FromString(raw) for raw in body.messages]
    return message


class KafkaConsumer:
    """A consumer of Canal's topics (see the module docstring).

    Parameters:
        bootstrap_servers: the brokers, ``host:port[,host:port]``.
        topics: the topics (a name starting with ``^`` is a regex, librdkafka's convention).
        group_id: the consumer group whose committed offsets say where to start.
        from_beginning: where a group without committed offsets starts (else at the end).
        config: more client settings: librdkafka's, or the Java client's SASL keys (see the module
            docstring; an untranslatable ``sasl.jaas.config`` is a
            :class:`~pycanal.mq.kafka_config.ProducerConfigError`).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topics: Sequence[str],
        *,
        group_id: str = "pycanal",
        from_beginning: bool = True,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        from confluent_kafka import Consumer, KafkaError

        refused: list[Any] = []  # the callback holds this list, not self: no cycle through the client
        self._refused = refused

        def on_error(err: Any) -> None:
            if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
                refused.append(err)

        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest" if from_beginning else "latest",
                "logger": log,
                "error_cb": on_error,
                **sasl_config(dict(config or {}), prefix=""),
            }
        )
        self._consumer.subscribe(list(topics))
        self._next: dict[tuple[str, int], int] = {}  # the offsets to commit: after each handed out
        self._joiner = Joiner()

    def messages(self, timeout: float = 1.0) -> Iterator[MQMessage]:
        """Decoded records as they arrive (a split record whole), without end; an error of the
        client raises (a refused login too)."""
        from confluent_kafka import KafkaException

        while True:
            records = self._consumer.consume(500, timeout)
            if self._refused:
                raise KafkaException(self._refused[0])
            for record in records:
                if record.error() is not None:
                    if record.error().code() == record.error()._PARTITION_EOF:
                        continue
                    raise KafkaException(record.error())
                topic, partition, offset = record.topic(), record.partition(), record.offset()
                whole = self._joiner.add(topic, partition, offset, record.value(), record.headers())
                if whole is None:
                    continue  # a part: the record is handed out with its last
                message = decode_record(topic, partition, whole[0], whole[1])
                self._next[(topic, partition)] = offset + 1
                yield message

    def commit(self) -> None:
        """Commit the offsets after every message handed out so far (synchronously), and no further:
        records fetched but not yet handed out come again to the group's next consumer."""
        from confluent_kafka import TopicPartition

        if self._next:
            offsets = [TopicPartition(t, p, o) for (t, p), o in self._next.items()]
            self._consumer.commit(offsets=offsets, asynchronous=False)
            self._next.clear()

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
