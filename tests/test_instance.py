"""Instance parts without a server: MetaLogPositionManager, EntryEventSink, filter replacement."""

from __future__ import annotations

import threading
import time

from pycanal.instance import CanalInstance
from pycanal.meta import ClientIdentity, MemoryMetaManager
from pycanal.parse.index import FailbackLogPositionManager, MemoryLogPositionManager, MetaLogPositionManager
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition, LogIdentity, LogPosition
from pycanal.sink import EntryEventSink
from pycanal.store import MemoryEventStore
from pycanal.store.event import Event

IDENT = LogIdentity(("127.0.0.1", 3306), -1)


def pos(offset: int, ts: int = 0, ident: LogIdentity = IDENT) -> LogPosition:
    return LogPosition(ident, EntryPosition("mysql-bin.000001", offset, 1, None, ts))


def entry(offset: int, entry_type=pb.ROWDATA) -> pb.Entry:
    e = pb.Entry()
    e.entryType = entry_type
    e.header.logfileName = "mysql-bin.000001"
    e.header.logfileOffset = offset
    e.header.executeTime = 1000 + offset
    e.header.eventType = pb.INSERT
    return e


def test_meta_log_position_manager_is_min_cursor() -> None:
    meta = MemoryMetaManager()
    manager = MetaLogPositionManager(meta)
    manager.start()
    assert meta.is_start()
    assert manager.get_latest_index_by("d") is None
    a, b, c = ClientIdentity("d", 1), ClientIdentity("d", 2), ClientIdentity("d", 3)
    for client in (a, b, c):
        meta.subscribe(client)
    assert manager.get_latest_index_by("d") is None  # no cursors yet
    meta.update_cursor(a, pos(500, ts=100))
    meta.update_cursor(b, pos(200, ts=100))
    assert manager.get_latest_index_by("d").postion.position == 200
    other = LogIdentity(("10.0.0.2", 3306), -1)
    meta.update_cursor(c, pos(900, ts=1, ident=other))  # another source: by timestamp
    assert manager.get_latest_index_by("d").postion.position == 900
    manager.persist_log_position("d", pos(1))  # no-op
    assert manager.get_latest_index_by("d").postion.position == 900
    assert manager.get_latest_index_by("other") is None
    failback = FailbackLogPositionManager(MemoryLogPositionManager(), manager)
    assert failback.get_latest_index_by("d").postion.position == 900
    failback.persist_log_position("d", pos(7))
    assert failback.get_latest_index_by("d").postion.position == 7


def test_sink_drops_heartbeats_and_blocks_while_full() -> None:
    store = MemoryEventStore(buffer_size=4, batch_mode="ITEMSIZE")
    sink = EntryEventSink(store, IDENT, retry_interval=0.02)
    sink.start()
    rec = Event.from_entry  # the sink takes store records (RawEntryConverter.records)
    assert sink.sink([rec(entry(1, pb.HEARTBEAT))])
    assert len(store) == 0
    assert sink.sink(
        [rec(entry(10)), rec(entry(11, pb.HEARTBEAT)), rec(entry(12)), rec(entry(13)), rec(entry(14))]
    )
    assert len(store) == 4
    done = threading.Event()
    threading.Thread(target=lambda: (sink.sink([rec(entry(20))]), done.set()), daemon=True).start()
    time.sleep(0.2)
    assert not done.is_set()  # blocked: the store is full
    batch = store.get(None, 2)
    assert batch.events[0].raw == entry(10).SerializeToString()
    assert batch.events[0].identity == IDENT
    store.ack(batch.position_range.end, batch.position_range.end_seq)
    assert done.wait(2)
    assert len(store) == 3
    # stop releases a blocked put
    store.put([store.new_event(entry(30))])
    result = []
    t = threading.Thread(target=lambda: result.append(sink.sink([rec(entry(40))])), daemon=True)
    t.start()
    time.sleep(0.1)
    sink.stop()
    t.join(2)
    assert result == [False]


def test_subscribe_change_replaces_the_instance_filter() -> None:
    instance = CanalInstance(
        "f",
        parser={"master_address": ("127.0.0.1", 1)},
        filter="db\\.a",
        black_filter="db\\.secret",
    )
    assert instance.filter.accepts("db", "a") and not instance.filter.accepts("db", "b")
    instance.subscribe_change(ClientIdentity("f", 1001))  # no filter: unchanged
    assert instance.filter.accepts("db", "a")
    instance.subscribe_change(ClientIdentity("f", 1001, "db\\..*"))
    assert instance.filter.accepts("db", "b")
    assert not instance.filter.accepts("db", "secret")  # the black filter stays
    assert not instance.is_start
