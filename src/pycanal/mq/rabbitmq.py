"""The RabbitMQ edge of ``canal.serverMode = rabbitMQ``: a batch's messages published, and the batch
counted as sent only when the broker confirmed every one of them.

As ``CanalRabbitMQProducer``: at connect the queue ``rabbitmq.queue`` is declared (durable), and
when ``rabbitmq.exchange``, ``rabbitmq.deliveryMode`` (the exchange's *type*) and
``rabbitmq.routingKey`` are set too, the exchange (durable) and the binding; every message goes to
``rabbitmq.exchange`` with its topic (``canal.mq.topic`` or the dynamic topic, ``.`` -> ``_``) as
the routing key, persistent (delivery mode 2) with content type ``text/plain``.

Beyond Canal, whose producer publishes without confirms and acks the batch at once (a message the
broker drops, or one lost with the connection, is never resent): the channel is in publisher-confirm
mode, the batch's messages are published back to back and :meth:`RabbitMQSender.send` returns only
when the broker confirmed each one; a nack, a connection or channel closed on the way, a message the
exchange routes to no queue (published ``mandatory``, where Canal's is dropped without a word) or no
confirm within ``confirm_timeout`` fails the batch (:class:`~pycanal.mq.producer.SendError`), which
the starter rolls back and sends again on a new connection.

The client is pika, driven by its ``SelectConnection`` in the worker's own thread (pika's blocking
channel waits for each confirm in turn: a round trip per message).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from .mark import BatchMark
from .producer import SendError
from .records import Record
from .settings import RabbitMQSettings

__all__ = ["RabbitMQSender"]

log = logging.getLogger(__name__)


class RabbitMQSender:
    """One destination's RabbitMQ publisher (see the module docstring).

    Parameters:
        settings: the ``rabbitmq.*`` keys (:func:`~pycanal.mq.settings.rabbitmq_settings`).
        destination: the destination it sends for (named in its log lines).
        confirm_timeout: seconds to wait for a connection, or for every confirm of a batch.
    """

    def __init__(
        self, settings: RabbitMQSettings, *, destination: str = "", confirm_timeout: float = 60.0
    ) -> None:
        self.settings, self.destination = settings, destination
        self.confirm_timeout = confirm_timeout
        self._conn: Any = None
        self._loop: Any = None  # the connection's I/O loop, kept while close() waits
        self._channel: Any = None
        self._ready = False
        self._error: str | None = None
        self._pending: set[int] = set()
        self._tag = 0
        self._aborted = False

    # ------------------------------------------------------------------ the Sender contract
    def send(self, records: Sequence[Record], mark: BatchMark | None = None) -> None:
        """Publish every record (``mark`` is the Kafka transaction's: unused) and return once the
        broker confirmed each; raise :class:`SendError` otherwise, the connection then closed so
        nothing of this batch is confirmed behind its resend."""
        import pika

        values = [r for r in records if r.value is not None]  # Canal's serializer's null: nothing to send
        if not values:
            return
        topic = values[0].topic
        try:
            self._ensure_connection(topic)
            props = pika.BasicProperties(content_type="text/plain", delivery_mode=2, priority=0)
            exchange = self.settings.exchange
            for record in values:
                self._channel.basic_publish(exchange, record.topic, record.value, props, mandatory=True)
                self._tag += 1
                self._pending.add(self._tag)
            self._run_until(lambda: not self._pending, topic, "confirmed every message")
        except SendError:
            self._drop()
            raise
        except Exception as exc:
            self._drop()
            raise SendError(f"RabbitMQ at {self.settings.address}: {exc!r}", topic) from None

    def abort(self) -> None:
        """Make a running or later :meth:`send` fail at once (the server is stopping)."""
        self._aborted = True

    def close(self, timeout: float = 10.0) -> None:
        """Close the connection (nothing is in flight between batches)."""
        conn, self._conn = self._conn, None
        self._channel, self._ready = None, False
        if conn is None or conn.is_closed:
            return
        try:
            if not conn.is_closing:
                conn.close()
            deadline = time.monotonic() + timeout
            while not conn.is_closed and time.monotonic() < deadline:
                self._spin(conn, min(0.2, max(0.0, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - closing a broken connection
            log.debug("closing the RabbitMQ connection failed", exc_info=True)

    # ------------------------------------------------------------------ connection
    def _ensure_connection(self, topic: str) -> None:
        conn = self._conn
        if conn is not None:
            self._spin(conn, 0)  # a close the broker sent while idle (heartbeats) is seen now
            if self._ready and conn.is_open and self._channel is not None and self._channel.is_open:
                return
            self._drop()
            log.info(
                "event=rabbitmq-reconnect destination=%s address=%s", self.destination, self.settings.address
            )
        self._connect(topic)

    def _connect(self, topic: str) -> None:
        import pika

        s = self.settings
        params = pika.ConnectionParameters(
            host=s.host,
            port=s.port,
            virtual_host=s.virtual_host,
            credentials=pika.PlainCredentials(s.username, s.password),
            ssl_options=pika.SSLOptions(_tls_context(), s.host) if s.tls else None,
            connection_attempts=1,
            socket_timeout=10,
            stack_timeout=self.confirm_timeout,
        )
        self._error = None
        self._ready = False
        self._pending.clear()
        self._tag = 0
        self._conn = pika.SelectConnection(
            params,
            on_open_callback=self._on_open,
            on_open_error_callback=self._on_open_error,
            on_close_callback=self._on_close,
        )
        self._loop = self._conn.ioloop
        self._run_until(lambda: self._ready, topic, "opened a confirming channel")

    def _on_open(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        self._channel = channel
        channel.add_on_close_callback(self._on_channel_close)
        channel.add_on_return_callback(self._on_return)
        s = self.settings
        steps: list[Any] = []
        if s.queue:
            steps.append(lambda next_: channel.queue_declare(s.queue, durable=True, callback=next_))
        if s.queue and s.exchange and s.exchange_type and s.routing_key:
            steps.append(
                lambda next_: channel.exchange_declare(
                    s.exchange,
                    s.exchange_type,
                    durable=True,
                    auto_delete=False,
                    internal=False,
                    callback=next_,
                )
            )
            steps.append(lambda next_: channel.queue_bind(s.queue, s.exchange, s.routing_key, callback=next_))
        steps.append(lambda next_: channel.confirm_delivery(self._on_confirm, callback=next_))

        def run(_frame: Any = None) -> None:
            if steps:
                steps.pop(0)(run)
            else:
                self._ready = True
                self._stop_loop()

        run()

    def _on_open_error(self, _conn: Any, exc: BaseException) -> None:
        self._fail(self._describe_open_error(exc))

    def _on_close(self, _conn: Any, reason: BaseException) -> None:
        self._fail(f"the connection was closed ({_reason(reason)})")

    def _on_channel_close(self, _channel: Any, reason: BaseException) -> None:
        self._fail(f"the channel was closed ({_reason(reason)}){self._declared_hint()}")

    def _on_return(self, _channel: Any, method: Any, _props: Any, _body: bytes) -> None:
        self._fail(
            f"exchange {method.exchange or '(default)'!r} routed the message with routing key "
            f"{method.routing_key!r} to no queue ({method.reply_code} {method.reply_text}): declare and "
            "bind a queue for it (rabbitmq.queue / rabbitmq.routingKey, or the broker's own bindings)"
        )

    def _on_confirm(self, frame: Any) -> None:
        from pika.spec import Basic

        method = frame.method
        tag = method.delivery_tag
        if isinstance(method, Basic.Nack):
            self._fail(f"the broker nacked message {tag} (rejected, e.g. a queue's length limit)")
            return
        if method.multiple:
            self._pending = {t for t in self._pending if t > tag}
        else:
            self._pending.discard(tag)
        if not self._pending:
            self._stop_loop()

    def _fail(self, message: str) -> None:
        if self._error is None:
            self._error = message
        self._stop_loop()

    def _describe_open_error(self, exc: BaseException) -> str:
        import pika.exceptions as px

        s = self.settings
        chain = _chain(exc)
        login = f"rabbitmq.username={s.username!r} rabbitmq.password='***'"
        if any(isinstance(e, px.ProbableAuthenticationError) for e in chain):
            return f"the broker refused the login {login}: {_reason(chain[-1])}"
        if any(isinstance(e, px.ProbableAccessDeniedError) for e in chain):
            return (
                f"the broker refused rabbitmq.virtual.host={s.virtual_host!r} to {login} "
                f"(no such vhost, or no permission): {_reason(chain[-1])}"
            )
        return f"cannot connect to rabbitmq.host={s.address!r}: {_reason(chain[-1])}"

    def _declared_hint(self) -> str:
        s = self.settings
        names = [f"rabbitmq.queue={s.queue!r}"] if s.queue else []
        if s.exchange:
            names.append(f"rabbitmq.exchange={s.exchange!r}")
        if s.exchange_type:
            names.append(f"rabbitmq.deliveryMode={s.exchange_type!r}")
        return f"; check {' '.join(names)}" if names else ""

    # ------------------------------------------------------------------ the I/O loop
    def _run_until(self, done: Any, topic: str, what: str) -> None:
        """Run the connection's I/O loop in short slices (so :meth:`abort` is noticed) until
        ``done()``; a callback's error or the deadline is a :class:`SendError`."""
        deadline = time.monotonic() + self.confirm_timeout
        while True:
            if self._error is not None:
                raise SendError(f"RabbitMQ at {self.settings.address}: {self._error}", topic)
            if done():
                return
            if self._aborted:
                raise SendError("the producer was stopped before every message was confirmed", topic)
            left = deadline - time.monotonic()
            if left <= 0:
                raise SendError(
                    f"RabbitMQ at {self.settings.address} has not {what} within {self.confirm_timeout:g}s",
                    topic,
                )
            self._spin(self._conn, min(0.5, left))

    def _spin(self, conn: Any, seconds: float) -> None:
        """Serve the connection's I/O for up to ``seconds`` (until a callback stops the loop)."""
        loop = conn.ioloop
        timer = loop.call_later(seconds, loop.stop)
        loop.start()
        loop.remove_timeout(timer)

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.stop()

    def _drop(self) -> None:
        """Forget the connection after a failure (closing it, so no late confirm counts)."""
        self.close(timeout=2.0)
        self._error = None
        self._pending.clear()


def _chain(exc: BaseException) -> list[BaseException]:
    """pika's wrapped connection errors, outermost first (a workflow's ``exceptions``, a phase's
    ``exception``, an error's only argument)."""
    out = [exc]
    while True:
        tries = getattr(exc, "exceptions", None)
        inner = getattr(exc, "exception", None)
        args = getattr(exc, "args", ())
        if tries:
            exc = tries[-1]
        elif isinstance(inner, BaseException):
            exc = inner
        elif len(args) == 1 and isinstance(args[0], BaseException):
            exc = args[0]
        else:
            return out
        out.append(exc)


def _reason(exc: BaseException) -> str:
    """A close reason or socket error as ``code text``."""
    args = getattr(exc, "args", ())
    if len(args) == 2 and isinstance(args[0], int):
        return f"{args[0]} {args[1]}"
    return str(exc) or type(exc).__name__


def _tls_context() -> Any:
    import ssl

    return ssl.create_default_context()
