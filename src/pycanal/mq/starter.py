"""Canal's ``CanalMQStarter``: every destination's store batches sent to the broker, at least once.

One worker thread per destination, subscribed to the embedded server as client 1001 with no filter.
The loop: ``get_without_ack(canal.mq.canalBatchSize, canal.mq.canalGetTimeout ms)`` and the batches
the store already holds behind it (up to 20; Canal sends a batch at a time), their records
(:func:`pycanal.mq.records.build_records`, each batch's as Canal builds them), every record handed to
the producer, then each batch acked once every one of its records is delivered. While the broker
acknowledges a group, the worker gets and builds the next one (Canal waits instead): on
``bench/mq.py``'s sysbench backlog the flat worker spent 3.1 s building and 3.4 s waiting for the
broker, one after the other. When building or sending fails, every batch not acked is rolled back,
so the store hands the same entries out again under new batch ids and they are sent again: a
record may reach the broker twice (at-least-once, as Canal), never zero times, because nothing is
acked before every record of its batch is delivered.

Beyond Canal (whose worker logs the stack trace and fetches again at once: alibaba/canal#3533): each
failure is one log line naming the destination and the topic, and the next try waits, doubling from
``retry_initial`` up to ``retry_max`` seconds, reset by the next delivered batch. A destination whose
instance is not running here (a lazy one, or one another server holds under HA) is waited for, as
Canal's worker does, and gets a new sender when it runs here again.

With a :class:`TransactionalSender` (``canal.mq.transaction = true``) each such send is one broker
transaction carrying its last batch's mark (:mod:`pycanal.mq.mark`), acked once committed. When it starts,
and again after a failed batch (whose commit may have gone through), the worker reads back the
newest committed mark and drops the entries up to it: a ``read_committed`` consumer sees every entry
once. A fatal error of the sender (fenced by another producer with its transactional id) stops the
worker with one log line.

The server and the sender are passed in (:class:`MQServer`, :class:`Sender`), so this module
imports no server and no Kafka client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pycanal.meta import ClientIdentity

from .mark import BatchMark, MarkTracker
from .records import Record, build_records, routes_to
from .settings import MQDestination, MQOptions

__all__ = ["MQ_CLIENT_ID", "MQServer", "MQStarter", "Sender", "TransactionalSender", "WorkerStats"]

log = logging.getLogger(__name__)

_GROUP = 20  # store batches one send takes at most (``_Worker._group``)

MQ_CLIENT_ID = 1001
"""The client id every MQ worker subscribes with (Canal's)."""


class MQServer(Protocol):
    """What a worker needs of :class:`~pycanal.server.embedded.CanalServerWithEmbedded`."""

    def is_start(self, destination: str | None = None) -> bool: ...
    def subscribe(self, client: ClientIdentity) -> None: ...
    def get_without_ack(
        self, client: ClientIdentity, batch_size: int, timeout: float | None = ..., unit: Any = ...
    ) -> Any: ...
    def ack(self, client: ClientIdentity, batch_id: int) -> None: ...
    def rollback(self, client: ClientIdentity, batch_id: int | None = ...) -> None: ...


class Sender(Protocol):
    """A producer edge. :meth:`send` hands the records over and returns either None, once the
    broker acknowledged every record, or a waiter: a call that returns once it has (raising
    otherwise), so that the worker builds the next records meanwhile. A waiter is called before
    the next :meth:`send`."""

    def send(self, records: Sequence[Record], mark: BatchMark | None = ...) -> Callable[[], None] | None: ...
    def abort(self) -> None: ...
    def close(self, timeout: float = ...) -> None: ...


@runtime_checkable
class TransactionalSender(Sender, Protocol):
    """A sender whose :meth:`send` commits the records and their ``mark`` as one transaction, and
    which reads back the newest mark of its ``transactional_id`` from the topics a predicate
    accepts."""

    transactional_id: str

    def recover(self, topics: Callable[[str], bool]) -> BatchMark | None: ...


Builder = Callable[[int, Sequence[Any], bool, MQDestination, MQOptions, int], list[Record]]


@dataclass(slots=True)
class _Pending:
    """A group of store batches sent and not acked yet: ``waiter`` (None: delivered already)
    returns once the broker acknowledged each of its ``records``, or raises."""

    group: list[Any]
    records: int
    waiter: Callable[[], None] | None


@dataclass(slots=True)
class WorkerStats:
    """What a destination's worker did so far (for logs, metrics and tests)."""

    batches: int = 0
    entries: int = 0
    records: int = 0
    failures: int = 0
    last_error: str | None = None


class _Worker(threading.Thread):
    def __init__(self, starter: MQStarter, destination: str, config: MQDestination) -> None:
        super().__init__(name=f"mq-{destination}", daemon=True)
        self.starter = starter
        self.destination = destination
        self.config = config
        self.client = ClientIdentity(destination, MQ_CLIENT_ID, "")
        self.stats = WorkerStats()
        self.stopping = threading.Event()
        self.sender: Sender | None = None
        self.tracker: MarkTracker | None = None  # with a transactional sender
        self._recover = False  # read the committed mark back before the next batch
        self._delay = 0.0

    def run(self) -> None:
        starter = self.starter
        try:
            while not self.stopping.is_set():
                if not starter.server.is_start(self.destination):
                    self.stopping.wait(0.1)  # not started here yet (lazy, or held by another server)
                    continue
                try:
                    if self.sender is None:
                        self.sender = starter.sender_factory(self.destination)
                        if isinstance(self.sender, TransactionalSender):
                            self.tracker = MarkTracker(self.sender.transactional_id)
                            self._recover = True
                    starter.server.subscribe(self.client)
                    log.info(
                        "event=mq-worker-started destination=%s client=%s", self.destination, self.client
                    )
                    self._loop()
                except Exception as exc:  # noqa: BLE001 - the worker must outlive any one failure
                    if not starter.server.is_start(self.destination):  # stopped here (HA, reload)
                        log.info("event=mq-worker-waiting destination=%s", self.destination)
                        self._close_sender()  # its store is gone; another server may take over
                        continue
                    self._failed(None, exc)
        finally:
            self._close_sender()

    def _close_sender(self) -> None:
        sender, self.sender, self.tracker = self.sender, None, None
        if sender is not None:
            try:
                sender.close()
            except Exception:  # noqa: BLE001
                log.debug("closing the %s sender failed", self.destination, exc_info=True)

    def _loop(self) -> None:
        starter, server, client = self.starter, self.starter.server, self.client
        timeout = starter.get_timeout_ms / 1000.0 if starter.get_timeout_ms > 0 else None
        # The group whose records the broker is acknowledging while the next group is built.
        pending: _Pending | None = None
        while not self.stopping.is_set():
            if self._recover:  # before any batch: fences the producer it replaces at once
                try:
                    self._resume()
                except Exception as exc:  # noqa: BLE001
                    if self._give_up(exc):
                        return
                    continue
            message = server.get_without_ack(client, starter.batch_size, timeout)
            if message.id == -1 or not message.entries:
                if pending is not None:  # nothing more to build: the delivery is awaited now
                    self._settle(pending)
                    pending = None
                elif timeout is None:
                    self.stopping.wait(0.1)  # a try-get found nothing: do not spin
                continue
            assert self.sender is not None
            group = self._group(message)
            saved = self.tracker.save() if self.tracker is not None else None
            records: list[Record] = []
            mark = None
            error: Exception | None = None
            try:
                ts = int(time.time() * 1000)
                for batch in group:
                    entries: Sequence[Any] = batch.entries
                    if self.tracker is not None:
                        entries, mark = self._split(batch.entries)
                        self.tracker.acked(mark)  # the next batch of the group follows it
                    if entries:
                        records += starter.builder(
                            batch.id, entries, batch.raw, self.config, starter.options, ts
                        )
            except Exception as exc:  # noqa: BLE001
                error = exc
            if pending is not None:
                settled, pending = self._settle(pending), None
                if not settled:  # rolled back with this group: the store hands both out again
                    if self.tracker is not None:
                        self.tracker.restore(saved)
                    if self.stopping.is_set():
                        return
                    continue
            waiter = None
            if error is None and records:
                try:
                    waiter = self.sender.send(records, mark)
                except Exception as exc:  # noqa: BLE001
                    error = exc
            if error is not None:
                if self.tracker is not None:
                    self.tracker.restore(saved)
                self._rollback(None if len(group) > 1 else message.id)
                self._recover = self.tracker is not None  # the broker may hold part of it, or all
                if self._give_up(error):
                    return
                continue
            pending = _Pending(group, len(records), waiter)
        if pending is not None:  # stopping: what was delivered is acked, the rest rolled back
            self._settle(pending)

    def _settle(self, pending: _Pending) -> bool:
        """Wait for ``pending``'s delivery and ack its batches; on a failure roll back every batch
        not acked (its own and any got since) and report it. True when acked."""
        try:
            if pending.waiter is not None:
                pending.waiter()
        except Exception as exc:  # noqa: BLE001
            self._rollback(None)
            self._recover = self.tracker is not None
            self._give_up(exc)
            return False
        server, client, group = self.starter.server, self.client, pending.group
        for batch in group:
            server.ack(client, batch.id)
        self.stats.batches += len(group)
        self.stats.entries += sum(len(batch.entries) for batch in group)
        self.stats.records += pending.records
        if self._delay:
            log.info("event=mq-send-recovered destination=%s batch=%d", self.destination, group[-1].id)
            self._delay = 0.0
        return True

    def _group(self, first: Any) -> list[Any]:
        """The batches one send takes: ``first`` and those the store holds already behind it
        (try-gets, up to ``_GROUP`` batches: none waits for what is not there). Each send waits for
        the broker (every record acknowledged; with a transactional sender, the commit too: a round
        trip to its coordinator and the markers, ~5 ms here), so one per store batch of 50 entries
        held bench/mq.py's sysbench backlog to 9.8k rows/s flat at least once and transactions to
        0.19x (flat) and 0.47x (protobuf) of that."""
        group = [first]
        while len(group) < _GROUP and not self.stopping.is_set():
            more = self.starter.server.get_without_ack(self.client, self.starter.batch_size, None)
            if more.id == -1 or not more.entries:
                break
            group.append(more)
        return group

    def _resume(self) -> None:
        """Read back the newest mark the broker committed: the entries up to it are skipped."""
        assert isinstance(self.sender, TransactionalSender) and self.tracker is not None
        committed = self.sender.recover(lambda topic: routes_to(topic, self.config))
        self.tracker.resume(committed)
        self._recover = False
        log.info(
            "event=mq-transaction-resumed destination=%s transactional_id=%s committed=%s",
            self.destination,
            self.sender.transactional_id,
            committed or "-",
        )

    def _split(self, entries: Sequence[Any]) -> tuple[Sequence[Any], BatchMark]:
        """The entries the broker does not hold yet and the batch's mark (one log line when the
        entries pass the committed mark)."""
        tracker = self.tracker
        assert tracker is not None
        skipping = tracker.committed is not None
        fresh, mark = tracker.split(entries)
        if skipping and tracker.committed is None:
            log.info(
                "event=mq-transaction-skipped destination=%s entries=%d (committed before)",
                self.destination,
                tracker.skipped,
            )
        return fresh, mark

    def _give_up(self, exc: BaseException) -> bool:
        """Report a failure (nothing, when stopping); True when the worker must end: it is stopping,
        or the sender failed fatally."""
        if self.stopping.is_set():
            return True  # stopped mid-send: rolled back, nothing to report
        if not getattr(exc, "fatal", False):
            self._failed(_failure_topic(exc, self.config), exc)
            return False
        self.stats.failures += 1
        self.stats.last_error = str(exc)
        log.error(
            "event=mq-fatal destination=%s error=%s (nothing more is sent until the destination is "
            "reloaded or the server restarts)",
            self.destination,
            exc,
        )
        self.stopping.set()
        return True

    def _rollback(self, batch_id: int | None) -> None:
        """Roll back ``batch_id`` (None: every batch not acked)."""
        try:
            self.starter.server.rollback(self.client, batch_id)
        except Exception:  # noqa: BLE001 - the next subscribe starts again from the cursor anyway
            log.warning(
                "event=mq-rollback-failed destination=%s batch=%s", self.destination, batch_id, exc_info=True
            )

    def _failed(self, topic: str | None, exc: BaseException) -> None:
        starter = self.starter
        self._delay = min(starter.retry_max, self._delay * 2 if self._delay else starter.retry_initial)
        self.stats.failures += 1
        self.stats.last_error = str(exc)
        log.error(
            "event=mq-send-failed destination=%s topic=%s attempt=%d retry_in=%gs error=%s",
            self.destination,
            topic or "-",
            self.stats.failures,
            self._delay,
            exc,
        )
        self.stopping.wait(self._delay)


def _failure_topic(exc: BaseException, config: MQDestination) -> str | None:
    """The topic a failure concerns: the sender's, else the destination's ``canal.mq.topic``."""
    topic = getattr(exc, "topic", None)
    return topic or config.topic or config.dynamic_topic


class MQStarter:
    """The MQ workers of a server (see the module docstring).

    Parameters:
        server: the embedded server whose destinations are sent.
        destinations: each destination's MQ settings (``canal.mq.topic`` and the routing keys).
        options: ``canal.mq.flatMessage``, ``database.hash`` and the transaction-entry filter.
        sender_factory: a destination's name -> its :class:`Sender` (made in the worker thread, again
            after a failure to make one).
        batch_size: ``canal.mq.canalBatchSize``.
        get_timeout_ms: ``canal.mq.canalGetTimeout``; <= 0: a try-get, with a 100 ms pause when empty.
        retry_initial, retry_max: the wait after the first failure and its bound (seconds).
        builder: the records of a batch (:func:`~pycanal.mq.records.build_records`).
    """

    def __init__(
        self,
        server: MQServer,
        destinations: Mapping[str, MQDestination],
        options: MQOptions,
        sender_factory: Callable[[str], Sender],
        *,
        batch_size: int = 50,
        get_timeout_ms: int = 100,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
        builder: Builder = build_records,
    ) -> None:
        self.server = server
        self.destinations = dict(destinations)
        self.options = options
        self.sender_factory = sender_factory
        self.batch_size = batch_size
        self.get_timeout_ms = get_timeout_ms
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.builder = builder
        self.workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()

    def start(self) -> MQStarter:
        for destination in self.destinations:
            self.start_destination(destination)
        return self

    def start_destination(self, destination: str, config: MQDestination | None = None) -> None:
        """Start (or restart, with new settings) one destination's worker."""
        with self._lock:
            if config is not None:
                self.destinations[destination] = config
            self._stop_worker(destination)
            worker = _Worker(self, destination, self.destinations[destination])
            self.workers[destination] = worker
            worker.start()

    def stop_destination(self, destination: str) -> None:
        with self._lock:
            self._stop_worker(destination)
            self.destinations.pop(destination, None)

    def _stop_worker(self, destination: str, timeout: float = 30.0) -> None:
        worker = self.workers.pop(destination, None)
        if worker is None:
            return
        worker.stopping.set()
        sender = worker.sender  # read once: the worker may be dropping it
        if sender is not None:
            sender.abort()  # a send waiting for an unreachable broker fails now
        began = time.monotonic()
        worker.join(timeout)
        if worker.is_alive():
            log.warning("event=mq-worker-stuck destination=%s", destination)
        else:
            log.info(
                "event=mq-worker-stopped destination=%s took=%.1fs", destination, time.monotonic() - began
            )

    def stop(self) -> None:
        with self._lock:
            for destination in list(self.workers):
                self._stop_worker(destination)

    def stats(self) -> dict[str, WorkerStats]:
        with self._lock:
            return {name: worker.stats for name, worker in self.workers.items()}
