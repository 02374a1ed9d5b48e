"""The RabbitMQ side of ``bench/mq.py``: the ``rabbitmq.*`` keys both servers get, the consumer that
reads a queue back, and a Canal home whose ``plugin/`` holds Canal 1.1.7's RabbitMQ producer.

Each run gets a fresh durable queue, bound with its own name as the routing key to a durable direct
exchange; the destination's topic (``canal.mq.topic``) is the queue's name, so both servers publish
every message through the exchange to that queue. The bench declares them before the server starts
(the consumer can then wait on the queue), with the arguments both servers declare them with, so
their own declarations are no-ops.

The consumer (:class:`Reader`: pika's ``BlockingConnection``, as the project's tests read RabbitMQ,
with a ``basic_consume`` callback) takes the queue with a prefetch of 2,000 and acknowledges every
500 messages at once (``multiple``): a consumer that loses nothing when it dies, without a round
trip per message. A message body is the bytes a Kafka record's value holds, so it is decoded by
the same function as the Kafka consumer's. Its
ceiling, from a queue filled beforehand with 20,000 flat sbtest UPDATE messages, was 17-20k
messages/s (25-35 us of its CPU each), 7-11k with the machine's load average at 6; prefetch
10,000 with acks of 2,000 was no faster (12k), nor pika's ``consume`` generator: above what the
servers send today, but a flat run nearing issue 39's 30k rows/s would measure the consumer.

Canal's RabbitMQ producer is ``com.alibaba.otter:connector.rabbitmq:1.1.7`` (jar-with-dependencies,
on Maven Central), which ``scripts/setup.sh`` copies into Canal's ``plugin/`` beside Kafka's, as
Canal's own package ships both (:func:`check_plugin`).
"""

from __future__ import annotations

from typing import Any

from pycanal.testing.canal.launcher import CANAL_VERSION, canal_home
from pycanal.testing.rabbitmq import PrivateRabbitMQ

PLUGIN = f"com.alibaba.otter:connector.rabbitmq:{CANAL_VERSION}:jar:jar-with-dependencies"
PLUGIN_JAR = f"connector.rabbitmq-{CANAL_VERSION}-jar-with-dependencies.jar"
PREFETCH, ACK_EVERY = 2000, 500


def keys(rabbit: PrivateRabbitMQ, queue: str) -> dict[str, str]:
    """``canal.properties`` of rabbitMQ mode for a run publishing to ``queue`` (see the docstring).
    The vhost is named: Canal 1.1.7 has no default for it (without one its producer's start fails,
    "Invalid configuration: 'virtualHost' must be non-null"); pycanal's is ``/`` anyway."""
    return {
        "canal.serverMode": "rabbitMQ", "rabbitmq.host": rabbit.address, "rabbitmq.virtual.host": "/",
        "rabbitmq.username": rabbit.user, "rabbitmq.password": rabbit.password,
        "rabbitmq.exchange": f"canal-{queue}", "rabbitmq.queue": queue, "rabbitmq.routingKey": queue,
        "rabbitmq.deliveryMode": "direct",
    }  # fmt: skip


def declare(rabbit: PrivateRabbitMQ, queue: str) -> None:
    """The run's queue, exchange and binding, as :func:`keys` names them."""
    rabbit.declare_queue(queue, f"canal-{queue}", queue)


class Reader:
    """A consumer of ``queue`` (see the module docstring) for ``mq.consume``: registered at once,
    so the broker delivers from the moment it exists."""

    def __init__(self, rabbit: PrivateRabbitMQ, queue: str) -> None:
        self.conn = rabbit.connect()
        self.channel = self.conn.channel()
        self.channel.basic_qos(prefetch_count=PREFETCH)
        self.bodies: list[bytes] = []
        self.tag = self.acked = 0
        self.channel.basic_consume(queue, self._on_message)

    def _on_message(self, _channel: Any, method: Any, _props: Any, body: bytes) -> None:
        self.bodies.append(body)
        self.tag = method.delivery_tag

    def poll(self) -> list[bytes]:
        """The bodies delivered within 0.2 s (pika returns as soon as some were), acknowledged
        ``ACK_EVERY`` at a time."""
        self.conn.process_data_events(time_limit=0.2)
        if self.tag - self.acked >= ACK_EVERY:
            self._ack()
        bodies, self.bodies = self.bodies, []
        return bodies

    def _ack(self) -> None:
        self.channel.basic_ack(self.tag, multiple=True)
        self.acked = self.tag

    def close(self) -> None:
        try:
            if self.tag > self.acked and self.channel.is_open:
                self._ack()
        finally:
            self.conn.close()


def check_plugin() -> None:
    """Canal's RabbitMQ producer must be in its home's ``plugin/`` (``scripts/setup.sh`` puts it there)."""
    jar = canal_home() / "plugin" / PLUGIN_JAR
    if not jar.is_file():
        raise RuntimeError(f"{jar} is missing: run scripts/setup.sh (mvn copies {PLUGIN} there)")
