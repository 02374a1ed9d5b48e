"""The MQ worker's loop (``pycanal.mq.starter``) against a store and senders of its own: a send
takes the batches the store holds; the next group is got and built while the broker acknowledges
the one before; a batch is acked only after its records were delivered, in order; a failed send or
delivery rolls back every batch not acked (the one in flight and the one built behind it), which
the store hands out again; a fatal send stops the worker with one line."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from pycanal.mq import MQDestination, MQOptions
from pycanal.mq.mark import BatchMark
from pycanal.mq.producer import SendError
from pycanal.mq.records import Record
from pycanal.mq.starter import MQStarter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.server.embedded import Message


class _Store:
    """``batches`` batches of one row change, handed out under ids from 11 on and acked in order;
    a rollback hands out again, under new ids, every batch not acked (as the store does). With
    ``one_per_get`` a try-get (no timeout) finds nothing, so each group is one batch."""

    def __init__(
        self, batches: int, events: list[tuple[str, int]] | None = None, *, one_per_get: bool = False
    ) -> None:
        change = pb.RowChange(eventType=pb.INSERT)
        change.rowDatas.add().afterColumns.add(name="id", value="1", isKey=True)
        entry = pb.Entry(entryType=pb.ROWDATA, storeValue=change.SerializeToString())
        entry.header.schemaName, entry.header.tableName, entry.header.eventType = "db", "t", pb.INSERT
        self.entry = entry.SerializeToString()
        self.left, self.next_id, self.one_per_get = batches, 10, one_per_get
        self.events = events if events is not None else []
        self.out: list[int] = []
        self.acked: list[int] = []
        self.rolled_back: list[int | None] = []

    def is_start(self, destination: str | None = None) -> bool:
        return True

    def subscribe(self, client: Any) -> None:
        pass

    def get_without_ack(
        self, client: Any, batch_size: int, timeout: float | None = None, unit: Any = None
    ) -> Any:
        if self.left == 0 or (self.one_per_get and timeout is None):
            if timeout is not None:
                time.sleep(0.01)
            return Message(-1, [], True)
        self.left -= 1
        self.next_id += 1
        self.out.append(self.next_id)
        self.events.append(("get", self.next_id))
        return Message(self.next_id, [self.entry], True)

    def ack(self, client: Any, batch_id: int) -> None:
        assert batch_id == self.out.pop(0), "acked out of order"
        self.acked.append(batch_id)
        self.events.append(("ack", batch_id))

    def rollback(self, client: Any, batch_id: int | None = None) -> None:
        self.rolled_back.append(batch_id)
        kept = [b for b in self.out if batch_id is not None and b != batch_id]
        self.left += len(self.out) - len(kept)
        self.out = kept


class _Sender:
    """Each send is numbered and its records kept. A send in ``refuse`` raises; otherwise it returns
    a waiter that logs the delivery, failing for the sends in ``fail``."""

    def __init__(
        self, events: list[tuple[str, int]] | None = None, *, refuse: frozenset[int] = frozenset(),
        fail: frozenset[int] = frozenset(), fatal: bool = False,
    ) -> None:  # fmt: skip
        self.events = events if events is not None else []
        self.refuse, self.fail, self.fatal = refuse, fail, fatal
        self.sends: list[list[Record]] = []

    def send(self, records: Any, mark: BatchMark | None = None) -> Callable[[], None]:
        self.sends.append(list(records))
        n = len(self.sends)
        self.events.append(("send", n))
        if n in self.refuse:
            raise SendError("committing the transaction: fenced" if self.fatal else "the broker went away",
                            "t", fatal=self.fatal)  # fmt: skip

        def waiter() -> None:
            time.sleep(0.02)  # the broker's round trip
            if n in self.fail:
                self.events.append(("failed", n))
                raise SendError("the broker went away", "t")
            self.events.append(("delivered", n))

        return waiter

    def abort(self) -> None:
        pass

    def close(self, timeout: float = 10.0) -> None:
        pass


def _run(store: _Store, sender: _Sender, until: Callable[[], bool]) -> None:
    starter = MQStarter(
        store, {"shop": MQDestination("t")}, MQOptions(), lambda _d: sender, retry_initial=0.01
    )
    starter.start()
    try:
        deadline = time.monotonic() + 10
        while not until() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        starter.stop()


def test_one_send_takes_the_batches_the_store_holds_and_a_failure_rolls_all_back() -> None:
    """A batch goes with those queued behind it in one send (one broker transaction), each acked
    after it; a refused send rolls every one of them back: none is acked unsent."""
    store, sender = _Store(3), _Sender(refuse=frozenset({1}))
    _run(store, sender, lambda: len(store.acked) == 3)
    assert [len(records) for records in sender.sends] == [3, 3]  # all three, twice
    assert store.rolled_back == [None]  # every batch of the failed send
    assert store.acked == [14, 15, 16]  # handed out again under new ids, acked in order


def test_the_next_group_is_built_while_the_broker_acknowledges_one() -> None:
    events: list[tuple[str, int]] = []
    store, sender = _Store(4, events, one_per_get=True), _Sender(events)
    _run(store, sender, lambda: len(store.acked) == 4)
    assert store.acked == [11, 12, 13, 14] and store.rolled_back == []
    at = {event: i for i, event in enumerate(events)}
    for n, batch in enumerate([11, 12, 13, 14], start=1):
        assert at[("send", n)] < at[("delivered", n)] < at[("ack", batch)]
        if batch < 14:  # the next batch was got (and built) before this one's delivery was awaited
            assert at[("get", batch + 1)] < at[("delivered", n)], events
            assert at[("ack", batch)] < at[("send", n + 1)], events  # one group in the producer at a time


def test_a_failed_delivery_rolls_back_the_group_in_flight_and_the_one_behind() -> None:
    events: list[tuple[str, int]] = []
    store, sender = _Store(3, events, one_per_get=True), _Sender(events, fail=frozenset({2}))
    _run(store, sender, lambda: len(store.acked) == 3)
    # 11 delivered and acked; 12's delivery failed with 13 got behind it: both rolled back, never
    # acked, and handed out again as 14 and 15.
    assert store.acked == [11, 14, 15]
    assert store.rolled_back == [None]
    assert ("failed", 2) in events and ("ack", 12) not in events and ("ack", 13) not in events


class _Fenced(_Sender):
    """A transactional sender (the worker reads its committed mark back first) fenced by another."""

    transactional_id = "pycanal-shop"

    def recover(self, topics: Any) -> BatchMark | None:
        return None


def test_a_fatal_send_stops_the_worker_with_one_line(caplog: pytest.LogCaptureFixture) -> None:
    store, sender = _Store(1), _Fenced(refuse=frozenset({1}), fatal=True)
    starter = MQStarter(store, {"shop": MQDestination("t")}, MQOptions(), lambda _d: sender)
    with caplog.at_level(logging.INFO, logger="pycanal.mq.starter"):
        starter.start()
        worker = starter.workers["shop"]
        worker.join(10)
    assert not worker.is_alive()
    assert store.acked == [] and store.rolled_back == [11]
    lines = [r.getMessage() for r in caplog.records if "event=mq-fatal" in r.getMessage()]
    assert len(lines) == 1 and "destination=shop" in lines[0] and "fenced" in lines[0]
    starter.stop()
