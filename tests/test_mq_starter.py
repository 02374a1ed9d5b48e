"""The MQ worker's loop (``pycanal.mq.starter``) against a store and a sender of its own: the next
group of batches is got and built while the broker acknowledges the one before, a batch is acked
only after its records were delivered, in order, and a failed delivery rolls back every batch not
acked (the one in flight and the one built behind it), which the store then hands out again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pycanal.mq import MQDestination, MQOptions
from pycanal.mq.mark import BatchMark
from pycanal.mq.producer import SendError
from pycanal.mq.starter import MQStarter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.server.embedded import Message


def _entry() -> bytes:
    change = pb.RowChange(eventType=pb.INSERT)
    change.rowDatas.add().afterColumns.add(name="id", value="1", isKey=True)
    entry = pb.Entry(entryType=pb.ROWDATA, storeValue=change.SerializeToString())
    entry.header.schemaName, entry.header.tableName, entry.header.eventType = "db", "t", pb.INSERT
    return entry.SerializeToString()


class _Store:
    """``batches`` batches of one entry, one per timed get (a try-get finds nothing: each group is
    one batch); a rollback hands out again, under new ids, every batch not acked."""

    def __init__(self, batches: int, events: list[tuple[str, int]]) -> None:
        self.left, self.events, self.next_id = batches, events, 10
        self.out: list[int] = []
        self.acked: list[int] = []
        self.rolled_back: list[int | None] = []
        self.entry = _entry()

    def is_start(self, destination: str | None = None) -> bool:
        return True

    def subscribe(self, client: Any) -> None:
        pass

    def get_without_ack(
        self, client: Any, batch_size: int, timeout: float | None = None, unit: Any = None
    ) -> Any:
        if timeout is None or self.left == 0:
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
        assert batch_id is None
        self.rolled_back.append(batch_id)
        self.left += len(self.out)
        self.out.clear()


class _Sender:
    """Each send is numbered; its waiter logs the delivery, failing for the sends in ``fail``."""

    def __init__(self, events: list[tuple[str, int]], fail: frozenset[int] = frozenset()) -> None:
        self.events, self.fail, self.sends = events, fail, 0

    def send(self, records: Any, mark: BatchMark | None = None) -> Callable[[], None]:
        self.sends += 1
        n = self.sends
        self.events.append(("send", n))

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


def test_the_next_group_is_built_while_the_broker_acknowledges_one() -> None:
    events: list[tuple[str, int]] = []
    store, sender = _Store(4, events), _Sender(events)
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
    store, sender = _Store(3, events), _Sender(events, fail=frozenset({2}))
    _run(store, sender, lambda: len(store.acked) == 3)
    # 11 delivered and acked; 12's delivery failed with 13 got behind it: both rolled back, never
    # acked, and handed out again as 14 and 15.
    assert store.acked == [11, 14, 15]
    assert store.rolled_back == [None]
    assert ("failed", 2) in events and ("ack", 12) not in events and ("ack", 13) not in events
