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

Its configuration comes from Canal's ``kafka.*`` settings (:mod:`pycanal.mq.kafka_config`); no log
line shows a password.

:class:`KafkaSender` sends one batch's records and waits for each delivery report. Before the first
record to a topic it asks the broker for the topic's metadata (which auto-creates it where the broker
allows, as the Java producer's metadata request does), so a missing topic or a partition the topic
does not have is one clear :class:`SendError` at once instead of a delivery timeout.

:class:`TransactionalKafkaSender` (``canal.mq.transaction = true``, pycanal's own key) sends each
batch as one Kafka transaction with an idempotent producer, and reads back where the last committed
transaction ended (:mod:`pycanal.mq.mark`), so that a ``read_committed`` consumer sees every entry
once across restarts.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .kafka_config import SECRET_KEYS, ProducerConfigError, java_key, transactional_config
from .mark import MARK_HEADER, BatchMark
from .records import Record

__all__ = ["KafkaSender", "SendError", "TransactionalKafkaSender"]

log = logging.getLogger(__name__)
_MILLIS = re.compile(r"\d+ms\b")


class SendError(RuntimeError):
    """Records of a batch were not all delivered; nothing of the batch may be acked. ``fatal``: the
    producer cannot go on (librdkafka's fatal errors: fenced by a newer one with its transactional
    id)."""

    def __init__(self, message: str, topic: str | None = None, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.topic = topic
        self.fatal = fatal


class _ClientLog:
    """librdkafka's log lines into this module's logger. A line it repeats is logged at its level
    once a minute, its repeats at DEBUG: a broker it cannot reach gave ~18 identical "Connect ...
    failed" lines a second (one per reconnect), where the failed send already says so once a try.
    The lines of a refused login (one at each of its reconnects) or a refused authorization are at
    DEBUG: the failed send says it once, with what to check."""

    REPEAT_SECONDS = 60.0

    def __init__(self) -> None:
        self._logged: dict[str, float] = {}  # a line's text -> when it was last logged at its level

    def log(self, level: int, msg: str, *args: Any) -> None:
        text = str(args[-1]) if args else ""
        if "SASL authentication error" in text or "authorization failed" in text:
            level = logging.DEBUG
        elif level > logging.DEBUG:
            now, key = time.monotonic(), _MILLIS.sub("ms", text)  # "(after 0ms in state CONNECT)"
            last = self._logged.get(key)
            if last is not None and now - last < self.REPEAT_SECONDS:
                level = logging.DEBUG
            else:
                if len(self._logged) > 1024:  # texts name brokers and threads: few, but bounded
                    self._logged.clear()
                self._logged[key] = now
        log.log(level, msg, *args)


class KafkaSender:
    """One destination's Kafka producer (see the module docstring).

    Parameters:
        config: librdkafka's configuration (:func:`producer_config`).
        metadata_timeout: seconds to wait for a topic's metadata before a send fails.
    """

    def __init__(self, config: Mapping[str, str], *, metadata_timeout: float = 10.0) -> None:
        self.config = dict(config)
        self.metadata_timeout = metadata_timeout
        self.delivery_timeout = int(self.config["message.timeout.ms"]) / 1000.0
        self._partitions: dict[str, int] = {}
        self._aborted = False
        self._login_error: str | None = None  # the broker refused the login (since the last metadata)
        self._client: Any = self._connect()

    def _connect(self) -> Any:
        from confluent_kafka import KafkaException, Producer

        sender = weakref.ref(self)  # no cycle through the client: a sender is freed when dropped,
        # never by a collection that may run in a forked child (the parser's), where freeing the
        # client's threads crashes it

        def on_error(err: Any) -> None:
            if (alive := sender()) is not None:
                alive._on_error(err)

        try:
            return Producer({**self.config, "logger": _ClientLog(), "error_cb": on_error})
        except KafkaException as exc:
            raise ProducerConfigError(self._config_error(exc.args[0].str())) from None
        except (TypeError, ValueError) as exc:
            raise ProducerConfigError(str(exc)) from None

    @property
    def _producer(self) -> Any:
        """The librdkafka client; made again after a refused login dropped it (:meth:`_drop`)."""
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _drop(self) -> None:
        """Release the client: librdkafka retries a refused login every few tenths of a second
        for as long as it lives, while the worker waits (seconds, doubling) before it tries again."""
        client, self._client = self._client, None
        self._partitions.clear()
        if client is not None:
            try:
                with warnings.catch_warnings():  # a failed client's close warns that it could not abort
                    warnings.simplefilter("ignore")
                    client.purge()
                    client.close(0)
            except Exception:  # noqa: BLE001 - released either way
                log.debug("closing the producer failed", exc_info=True)

    def _config_error(self, text: str) -> str:
        for name, value in self.config.items():  # librdkafka's text never shows a secret either
            if SECRET_KEYS.search(name) and value:
                text = text.replace(value, "***")
        for name in self.config:  # librdkafka quotes a key "so", or `so` where keys conflict
            if f'"{name}"' in text or f"`{name}`" in text:
                value = "***" if SECRET_KEYS.search(name) else repr(self.config[name])
                return f"{java_key(name)}={value}: {text}"
        return f"Kafka producer configuration: {text}"

    @property
    def bootstrap_servers(self) -> str:
        return self.config.get("bootstrap.servers", "")

    @property
    def _who(self) -> str:
        user = self.config.get("sasl.username")
        return f"user {user!r}" if user else "this client"

    def _on_error(self, err: Any) -> None:
        """librdkafka's client-wide errors (served by poll and flush): a refused login is kept, so
        that the send fails at once saying what to check instead of waiting out a timeout (the others
        are dropped, as without this callback: the send that fails reports them)."""
        from confluent_kafka import KafkaError

        if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            self._login_error = err.str()

    def _check_login(self, topic: str | None) -> None:
        """A :class:`SendError` saying what to check once the broker refused the login (the client
        is dropped until the next try)."""
        if self._client is not None:
            with contextlib.suppress(Exception):  # a fatal client raises its error: the caller's
                self._client.poll(0)
        if self._login_error is not None:
            mechanism = self.config.get("sasl.mechanism") or self.config.get("sasl.mechanisms") or "-"
            self._drop()
            self._login_error, error = None, self._login_error
            protocol = self.config.get("security.protocol", "PLAINTEXT")
            raise SendError(
                f"Kafka at {self.bootstrap_servers}: authentication failed for {self._who} ({protocol}, "
                f"{mechanism}): check kafka.sasl.mechanism and kafka.sasl.jaas.config "
                f"(or kafka.sasl.username/password) [{error}]",
                topic,
            )

    def _denied(self, err: Any, reading: bool = False) -> str | None:
        """What an authorization error of the broker says the user lacks (None: not one);
        ``reading``: the marks read back (:class:`TransactionalKafkaSender`)."""
        from confluent_kafka import KafkaError

        needs = {
            KafkaError.TOPIC_AUTHORIZATION_FAILED: (
                "READ on the topic (canal.mq.transaction reads its marks back)"
                if reading
                else "WRITE and DESCRIBE on the topic"
            ),
            KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (
                f"WRITE and DESCRIBE on the transactional id {self.config.get('transactional.id')!r}"
            ),
            KafkaError.CLUSTER_AUTHORIZATION_FAILED: "IDEMPOTENT_WRITE on the cluster",
            KafkaError.GROUP_AUTHORIZATION_FAILED: "READ on its consumer group",
        }.get(err.code())
        return None if needs is None else f"{self._who} is not authorized: it needs {needs} ({err.str()})"

    def _failure(self, where: str, err: Any, topic: str | None, reading: bool = False) -> SendError:
        """The :class:`SendError` of a librdkafka error. An authorization error is not fatal to the
        sender, though librdkafka's transactional client cannot go on after one: that client is
        dropped and the next try makes another (the ACL may have been granted meanwhile)."""
        denied = self._denied(err, reading)
        if denied is None:
            return SendError(f"{where}{err.str()}", topic, fatal=err.fatal())
        if err.fatal():
            self._drop()
        return SendError(f"{where}{denied}", topic)

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
                self._check_login(topic)
                if time.monotonic() < deadline:
                    continue
                raise SendError(
                    f"Kafka at {self.bootstrap_servers} answered no metadata request "
                    f"within {self.metadata_timeout:g}s ({exc.args[0].str()})",
                    topic,
                ) from None
            self._login_error = None  # the broker answered: logged in
            found = meta.topics.get(topic)
            error = found.error if found is not None else None
            denied = self._denied(error) if error is not None else None
            if denied is not None:
                raise SendError(f"topic {topic!r} on the broker {self.bootstrap_servers}: {denied}", topic)
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

    def send(self, records: Sequence[Record], mark: BatchMark | None = None) -> Callable[[], None] | None:
        """Hand every record to the client and return the waiter that returns once the broker
        acknowledged each, raising :class:`SendError` otherwise (then whatever is still queued is
        purged, never sent later behind a resend). The waiter is called before the next send.
        A record's own headers (the parts of a split one) go with it; ``mark`` goes as the
        :data:`~pycanal.mq.mark.MARK_HEADER` header on the last record of each partition."""
        return self._hand_over(records, mark)

    def _hand_over(self, records: Sequence[Record], mark: BatchMark | None) -> Callable[[], None]:
        """:meth:`send`'s work: the records queued in the client, and their waiter."""
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
        from confluent_kafka import KafkaException

        failures: list[tuple[Any, Any]] = []
        delivered = 0

        def report(err: Any, msg: Any) -> None:
            nonlocal delivered
            if err is None:
                delivered += 1
            else:
                failures.append((err, msg))

        marked = ((MARK_HEADER, mark.encode()),) if mark is not None else ()
        ends = set({(r.topic, r.partition): i for i, r in enumerate(records)}.values()) if marked else set()
        producer = self._producer
        try:
            for i, record in enumerate(records):
                while True:
                    try:
                        producer.produce(
                            record.topic,
                            record.value,
                            partition=record.partition,
                            on_delivery=report,
                            headers=list(record.headers + marked if i in ends else record.headers) or None,
                        )
                        break
                    except BufferError:  # librdkafka's queue is full: let deliveries drain it
                        producer.poll(0.05)
                    if failures:
                        break
                producer.poll(0)
                if failures:
                    break
        except KafkaException as exc:  # produce() refused: a fatal state (an idempotent producer)
            self._discard()
            topic = records[0].topic if records else None
            raise self._failure("", exc.args[0], topic) from None
        except Exception:
            self._discard()
            raise

        def delivery() -> None:
            topic = records[0].topic if records else None
            try:
                remaining = self._flush(topic) if not failures else len(producer)
            except KafkaException as exc:
                self._discard()
                raise self._failure("", exc.args[0], topic) from None
            except Exception:
                self._discard()
                raise
            if failures or remaining or delivered != len(records):
                self._discard()
                if failures:
                    err, msg = failures[0]
                    where = f"topic {msg.topic()!r} partition {msg.partition()}"
                    raise self._failure(f"{where}: ", err, msg.topic())
                raise SendError(
                    f"{remaining} of {len(records)} records not delivered to {self.bootstrap_servers} "
                    f"within {self.delivery_timeout + 5.0:g}s",
                    topic,
                )

        return delivery

    def _flush(self, topic: str | None) -> int:
        """Wait for the delivery reports, in short slices so that :meth:`abort` is noticed; the
        number of records still undelivered at the deadline."""
        deadline = time.monotonic() + self.delivery_timeout + 5.0
        while True:
            self._check_aborted(topic)
            remaining = self._producer.flush(min(0.5, max(0.0, deadline - time.monotonic())))
            if remaining:
                self._check_login(topic)
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
            if self._client is not None:
                self._client.purge()
                self._client.flush(0)
        except Exception:  # noqa: BLE001 - the batch fails either way
            log.debug("purging the producer failed", exc_info=True)
        self._partitions.clear()

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (nothing, between batches) and release the client."""
        if self._client is not None:
            self._client.flush(timeout)


# librdkafka's producer-only keys (and the Java names it takes for some): left out of the consumer
# that reads the marks back, which would warn about each.
_PRODUCER_ONLY = frozenset(
    {
        "transactional.id",
        "transaction.timeout.ms",
        "enable.idempotence",
        "enable.gapless.guarantee",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.ms",
        "linger.ms",
        "message.send.max.retries",
        "retries",
        "queue.buffering.backpressure.threshold",
        "compression.codec",
        "compression.type",
        "compression.level",
        "batch.num.messages",
        "batch.size",
        "delivery.report.only.error",
        "sticky.partitioning.linger.ms",
        "request.required.acks",
        "acks",
        "request.timeout.ms",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "partitioner",
        "queuing.strategy",
        "produce.offset.report",
    }
)
# How many offsets before the last stable offset :meth:`TransactionalKafkaSender.recover` reads, one
# window after the other, until it finds a mark of its own in a partition: the newest mark sits in
# the last transaction to that partition, behind at most an aborted one and other writers' records.
_MARK_WINDOWS = (256, 2048, 16384)


class TransactionalKafkaSender(KafkaSender):
    """One destination's transactional producer: each :meth:`send` is one Kafka transaction,
    committed before it returns, whose records carry the batch's mark; :meth:`recover` reads back the
    newest mark the broker committed (see :mod:`pycanal.mq.mark`).

    Parameters:
        config: librdkafka's configuration (:func:`producer_config`); made transactional here
            (:func:`transactional_config`).
        destination: the destination, the end of the ``transactional.id``.
        metadata_timeout: seconds to wait for metadata, for initializing transactions and for an abort.
    """

    def __init__(
        self, config: Mapping[str, str], destination: str, *, metadata_timeout: float = 10.0
    ) -> None:
        super().__init__(transactional_config(config, destination), metadata_timeout=metadata_timeout)
        self.transactional_id = self.config["transactional.id"]
        self._initialized = False
        self._open = False  # a transaction begun and neither committed nor aborted
        self._fatal: SendError | None = None  # the producer cannot go on (fenced)

    def recover(self, topics: Callable[[str], bool]) -> BatchMark | None:
        """The newest mark of this transactional id in the committed records of the topics that
        ``topics`` accepts. The first call initializes transactions, which fences any producer with
        the same id and aborts its open transaction: none of its records can commit any more."""
        from confluent_kafka import KafkaException

        if not self._initialized:
            self._transact(
                "initializing transactions", self._producer.init_transactions, self.metadata_timeout
            )
            self._initialized = True
        try:
            meta = self._producer.list_topics(timeout=self.metadata_timeout)
        except KafkaException as exc:
            self._check_login(None)
            raise self._error("listing the topics", exc.args[0], None) from None
        partitions = [
            (name, p)
            for name, topic in meta.topics.items()
            if not name.startswith("__") and topics(name)
            for p in topic.partitions
        ]
        return max(self._committed_marks(partitions), key=lambda m: m.seq, default=None)

    def send(self, records: Sequence[Record], mark: BatchMark | None = None) -> None:
        """:meth:`KafkaSender.send` in a transaction, committed before this returns and aborted on
        any failure."""
        from confluent_kafka import KafkaException

        topic = records[0].topic if records else None
        if self._fatal is not None:
            raise self._fatal
        if self._open:  # an abort that failed: its transaction must end before the next begins
            self._abort()
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise self._error("beginning a transaction", exc.args[0], topic) from None
        self._open = True
        try:
            self._hand_over(records, mark)()
            self._transact(
                "committing the transaction", self._producer.commit_transaction, self.delivery_timeout, topic
            )
            self._open = False
        except BaseException:
            self._discard()
            if self._fatal is not None:  # whatever the client raised (confluent-kafka 2.16 may
                raise self._fatal from None  # raise a SystemError on a fatal error)
            raise

    def _transact(
        self, what: str, call: Callable[[float], None], timeout: float, topic: str | None = None
    ) -> None:
        """One transactional call, in slices (so that :meth:`abort` is noticed) and again while
        librdkafka calls its error retriable, until ``timeout`` seconds have passed."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout
        while True:
            self._check_aborted(topic)
            try:
                call(min(1.0, max(0.1, deadline - time.monotonic())))
                return
            except KafkaException as exc:
                self._check_login(topic)
                err = exc.args[0]
                if not err.retriable() or time.monotonic() >= deadline:
                    raise self._error(what, err, topic) from None

    def _drop(self) -> None:
        """:meth:`KafkaSender._drop`; the next client initializes transactions again (which aborts
        the open one)."""
        super()._drop()
        self._initialized = False
        self._open = False

    def _error(self, what: str, err: Any, topic: str | None, reading: bool = False) -> SendError:
        return self._failure(f"{what} ({self.transactional_id}): ", err, topic, reading)

    def _abort(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self._producer.abort_transaction(self.metadata_timeout)
        except KafkaException as exc:
            raise self._error("aborting the transaction", exc.args[0], None) from None
        self._open = False

    def _discard(self) -> None:
        """Abort the open transaction (librdkafka purges what is queued): none of it commits. Even
        when stopping, so that read_committed consumers need not wait for the transaction timeout."""
        if self._open:
            try:
                self._abort()
            except SendError as exc:  # tried again before the next transaction begins
                if exc.fatal:
                    self._fatal = exc
                log.debug("aborting the transaction of %s failed", self.transactional_id, exc_info=True)
        self._partitions.clear()

    def _committed_marks(self, partitions: list[tuple[str, int]]) -> list[BatchMark]:
        """Each partition's newest mark of this transactional id, read back from its last stable
        offset with a read_committed consumer (aborted records are passed over), window by window
        (:data:`_MARK_WINDOWS`)."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(
            {
                **{key: value for key, value in self.config.items() if key not in _PRODUCER_ONLY},
                "group.id": self.transactional_id,  # nothing is committed: partitions are assigned
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "logger": log,
            }
        )
        try:
            spans: dict[tuple[str, int], tuple[int, int]] = {}
            for topic, p in partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self.metadata_timeout, cached=False
                )
                if high > low:
                    spans[(topic, p)] = (low, high)
            found: list[BatchMark] = []
            for window in _MARK_WINDOWS:
                if not spans:
                    break
                reads = {tp: (max(low, high - window), high) for tp, (low, high) in spans.items()}
                newest = self._read_marks(consumer, reads)
                found += newest.values()
                spans = {
                    tp: (low, start)
                    for tp, (low, _) in spans.items()
                    if tp not in newest and (start := reads[tp][0]) > low
                }
            return found
        except KafkaException as exc:
            raise self._error("reading the committed marks", exc.args[0], None, reading=True) from None
        finally:
            consumer.close()

    def _read_marks(
        self, consumer: Any, reads: dict[tuple[str, int], tuple[int, int]]
    ) -> dict[tuple[str, int], BatchMark]:
        """The newest own mark of each partition between the offsets ``reads`` gives it."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        consumer.assign([TopicPartition(topic, p, start) for (topic, p), (start, _) in reads.items()])
        newest: dict[tuple[str, int], BatchMark] = {}
        todo = set(reads)
        deadline = time.monotonic() + self.delivery_timeout
        while todo:
            self._check_aborted(None)
            if time.monotonic() > deadline:
                raise SendError(
                    f"reading the committed marks ({self.transactional_id}): {len(todo)} partitions not "
                    f"read within {self.delivery_timeout:g}s"
                )
            for msg in consumer.consume(500, 0.5):
                tp = (msg.topic(), msg.partition())
                if tp not in todo:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
                    todo.discard(tp)
                    continue
                end = reads[tp][1]
                if msg.offset() < end:
                    mark = _header_mark(msg.headers())
                    if mark is not None and mark.producer == self.transactional_id:
                        newest[tp] = mark  # offsets ascend, so do an id's marks
                if msg.offset() + 1 >= end:
                    todo.discard(tp)
        return newest


def _header_mark(headers: Sequence[tuple[str, bytes]] | None) -> BatchMark | None:
    for key, value in headers or ():
        if key == MARK_HEADER:
            return BatchMark.decode(value)
    return None
