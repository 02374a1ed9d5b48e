"""pycanal.store: Canal's MemoryEventStoreWithBuffer behaviour (mirrors Canal's store tests:
MemoryEventStorePutAndGetTest, MemoryEventStoreMemBatchTest, MemoryEventStoreRollbackAndAckTest,
MemoryEventStoreMultiThreadTest)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition, LogIdentity, LogPosition
from pycanal.store import (
    ITEMSIZE,
    MEMSIZE,
    Event,
    MemoryEventStore,
    StoreConfigError,
    StoreError,
    validate,
)

IDENT = LogIdentity(("127.0.0.1", 3306), 1234)
FILE = "mysql-bin.000001"


def make_entry(offset, entry_type=pb.ROWDATA, event_type=pb.INSERT, ts=None, gtid="", pad=0, ddl_flag=False):
    e = pb.Entry()
    h = e.header
    h.logfileName = FILE
    h.logfileOffset = offset
    h.serverId = 1
    h.executeTime = ts if ts is not None else 1_700_000_000_000 + offset
    h.eventType = event_type
    h.schemaName = "db"
    h.tableName = "t" + "x" * pad
    if gtid:
        h.gtid = gtid
    e.entryType = entry_type
    if entry_type == pb.ROWDATA:
        rc = pb.RowChange()
        rc.eventType = event_type
        if ddl_flag:
            rc.isDdl = True
            rc.sql = "create database x"
        e.storeValue = rc.SerializeToString()
    return e


def ev(offset, kind="row", size=None, gtid="", raw=True):
    entry_type, event_type = {
        "row": (pb.ROWDATA, pb.INSERT),
        "begin": (pb.TRANSACTIONBEGIN, pb.UPDATE),
        "end": (pb.TRANSACTIONEND, pb.UPDATE),
        "ddl": (pb.ROWDATA, pb.ALTER),
    }[kind]
    e = Event.from_entry(make_entry(offset, entry_type, event_type, gtid=gtid), IDENT, raw=raw)
    if size is not None:
        e.size = size
    return e


def txn(first_offset, rows):
    out = [ev(first_offset, "begin")]
    out += [ev(first_offset + 1 + i) for i in range(rows)]
    out.append(ev(first_offset + 1 + rows, "end"))
    return out


def offsets(batch):
    return [e.position for e in batch.events]


# ---------------------------------------------------------------------------- Event


def test_event_from_entry_raw_and_object():
    entry = make_entry(100, pb.ROWDATA, pb.INSERT, gtid="a:1-5")
    raw = Event.from_entry(entry, IDENT, raw=True)
    assert raw.raw == entry.SerializeToString()
    assert raw.size == len(raw.raw)
    assert raw.entry == entry
    assert (raw.journal_name, raw.position, raw.server_id, raw.gtid) == (FILE, 100, 1, "a:1-5")
    assert raw.execute_time == entry.header.executeTime
    assert raw.entry_type == pb.ROWDATA and raw.event_type == pb.INSERT and not raw.is_ddl

    obj = Event.from_entry(entry, IDENT, raw=False)
    assert obj.raw is None and obj.entry is entry
    assert obj.raw_bytes() == entry.SerializeToString()
    assert obj.size == entry.ByteSize()  # no eventLength set
    entry.header.eventLength = 50
    assert Event.from_entry(entry, raw=False).size == 300  # Canal: eventLength * 6

    again = Event.from_raw(raw.raw, IDENT)
    assert again.log_position() == raw.log_position()
    pos = raw.log_position(True)
    assert pos.identity == IDENT and pos.postion.included
    assert pos.postion.journal_name == FILE and pos.postion.position == 100


def test_event_ddl_detection():
    assert ev(1, "ddl").is_ddl
    assert not ev(1, "row").is_ddl
    for t in (pb.CREATE, pb.ALTER, pb.ERASE, pb.RENAME, pb.TRUNCATE, pb.CINDEX, pb.DINDEX):
        assert Event.from_entry(make_entry(1, pb.ROWDATA, t)).is_ddl
    assert not Event.from_entry(make_entry(1, pb.ROWDATA, pb.QUERY)).is_ddl
    # by event type only, as Canal's MemoryEventStoreWithBuffer.isDdl: a database statement's QUERY
    # entry (RowChange.isDdl set) is no DDL of the store
    assert not Event.from_entry(make_entry(1, pb.ROWDATA, pb.QUERY, ddl_flag=True)).is_ddl
    # unset entryType means ROWDATA, unset eventType means UPDATE
    e = pb.Entry()
    e.header.logfileName = FILE
    got = Event.from_raw(e.SerializeToString())
    assert got.entry_type == pb.ROWDATA and got.event_type == pb.UPDATE


def test_event_stub_keeps_position_only():
    e = ev(7)
    s = e.stub()
    assert not s.has_payload and s.entry is None
    assert s.log_position() == e.log_position() and s.size == e.size


# ---------------------------------------------------------------------------- config


def test_buffer_size_must_be_power_of_two():
    for bad in (0, -4, 3, 1000):
        with pytest.raises(StoreConfigError, match="canal.instance.memory.buffer.size"):
            MemoryEventStore(bad)
    with pytest.raises(StoreConfigError, match="batch.mode"):
        MemoryEventStore(16, batch_mode="ROWS")
    with pytest.raises(StoreConfigError, match="memunit"):
        MemoryEventStore(16, buffer_mem_unit=0)
    assert MemoryEventStore(1).buffer_size == 1


def test_validate_transaction_size_names_both_keys():
    store = MemoryEventStore(1024)
    store.validate(1024)
    with pytest.raises(StoreConfigError) as err:
        store.validate(2048)
    msg = str(err.value)
    assert "canal.instance.transaction.size" in msg and "canal.instance.memory.buffer.size" in msg
    with pytest.raises(StoreConfigError, match="canal.instance.transaction.size"):
        validate(0, 16)


def test_from_properties():
    store = MemoryEventStore.from_properties(
        {
            "canal.instance.memory.buffer.size": "64",
            "canal.instance.memory.buffer.memunit": "512",
            "canal.instance.memory.batch.mode": "itemsize",
            "canal.instance.memory.rawEntry": "false",
            "canal.instance.get.ddl.isolation": "true",
            "canal.instance.transaction.size": "64",
        }
    )
    assert (store.buffer_size, store.buffer_mem_unit, store.batch_mode) == (64, 512, ITEMSIZE)
    assert store.ddl_isolation and not store.raw
    assert MemoryEventStore.from_properties({}).batch_mode == MEMSIZE
    with pytest.raises(StoreConfigError, match="canal.instance.transaction.size"):
        MemoryEventStore.from_properties(
            {"canal.instance.memory.buffer.size": "16", "canal.instance.transaction.size": "1024"}
        )
    with pytest.raises(StoreConfigError, match="canal.instance.memory.buffer.size"):
        MemoryEventStore.from_properties({"canal.instance.memory.buffer.size": "lots"})
    with pytest.raises(StoreConfigError, match="canal.instance.get.ddl.isolation"):
        MemoryEventStore.from_properties({"canal.instance.get.ddl.isolation": "maybe"})


def test_oversized_put_is_an_error_not_a_stall():
    store = MemoryEventStore(8)
    with pytest.raises(StoreError, match="canal.instance.transaction.size"):
        store.put([ev(i) for i in range(9)])
    with pytest.raises(StoreError, match="buffer.size"):
        store.get(None, 9)  # a blocking get that can never be filled


# ---------------------------------------------------------------------------- put / get (PutAndGetTest)


def test_one_put():
    store = MemoryEventStore(16)
    assert store.get_first_position() is None and store.get_latest_position() is None
    assert store.try_put(ev(100))
    first, latest = store.get_first_position(), store.get_latest_position()
    assert first.postion.position == 100 and first.postion.included
    assert latest.postion.position == 100 and latest.postion.included
    assert len(store) == 1


def test_full_put():
    store = MemoryEventStore(16)
    for i in range(16):
        assert store.try_put(ev(i))
    assert not store.try_put(ev(16))
    assert not store.put(ev(16), timeout=0.05)
    assert store.get_first_position().postion.position == 0
    assert store.get_latest_position().postion.position == 15


def test_one_put_one_get():
    store = MemoryEventStore(16)
    store.put([ev(5)])
    batch = store.try_get(None, 10)
    assert offsets(batch) == [5]
    rng = batch.position_range
    assert rng.start == rng.end == ev(5).log_position()
    assert rng.ack is None and rng.end_seq == 0
    assert not store.try_get(None, 10)


def test_full_put_batch_get():
    store = MemoryEventStore(16)
    assert store.try_put([ev(i) for i in range(16)])
    b1 = store.get(None, 8)
    b2 = store.get(None, 8)
    assert offsets(b1) == list(range(8)) and offsets(b2) == list(range(8, 16))
    assert (b1.position_range.end_seq, b2.position_range.end_seq) == (7, 15)
    assert b1.position_range.start.postion.position == 0 and b1.position_range.end.postion.position == 7
    assert not store.try_get(None, 8)
    assert not store.try_put(ev(16))  # got but not acked: still occupied
    store.ack(b1.position_range.end, b1.position_range.end_seq)
    assert store.try_put([ev(16 + i) for i in range(8)])
    assert not store.try_put(ev(99))
    assert store.get_first_position() == ev(7).log_position(False)


def test_block_put_one_get():
    store = MemoryEventStore(4)
    store.put([ev(i) for i in range(4)])
    done = threading.Event()

    def producer():
        store.put([ev(4), ev(5)])
        done.set()

    t = threading.Thread(target=producer)
    t.start()
    assert not done.wait(0.1)  # blocked: full
    batch = store.get(None, 1)
    store.ack(batch.position_range.end, batch.position_range.end_seq)
    assert not done.wait(0.1)  # one slot is not enough for two events
    batch = store.get(None, 1)
    store.ack(batch.position_range.end)
    assert done.wait(2)
    t.join(2)
    assert offsets(store.try_get(None, 10)) == [2, 3, 4, 5]


def test_blocking_get_waits_for_full_batch():
    store = MemoryEventStore(64)  # an eighth (8) stays above what waits
    result = []
    t = threading.Thread(target=lambda: result.append(store.get(None, 5)))
    t.start()
    store.put([ev(1), ev(2)])
    time.sleep(0.1)
    assert not result
    store.put([ev(3), ev(4), ev(5), ev(6)])
    t.join(2)
    assert offsets(result[0]) == [1, 2, 3, 4, 5]


def test_get_with_timeout_returns_what_is_there():
    store = MemoryEventStore(64)
    t0 = time.monotonic()
    assert not store.get(None, 10, timeout=0.05)
    store.put([ev(1), ev(2), ev(3)])
    t0 = time.monotonic()
    batch = store.get(None, 10, timeout=0.1)
    assert time.monotonic() - t0 >= 0.09
    assert offsets(batch) == [1, 2, 3]
    store.put([ev(i) for i in range(4, 10)])
    t0 = time.monotonic()
    assert offsets(store.get(None, 3, timeout=5)) == [4, 5, 6]  # full batch: no waiting
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("mode", [ITEMSIZE, MEMSIZE])
def test_a_get_stops_waiting_once_a_put_waits_for_room(mode):
    """Its batch cannot grow before an ack (Canal waits out the timeout with its parser stopped):
    whether the put blocks before the get waits or after. Sixty events handed out and not acked
    keep the events not handed out under an eighth of the store, so that rule stays out of the way."""
    store = MemoryEventStore(64, buffer_mem_unit=100, batch_mode=mode)  # MEMSIZE: 6,400 bytes
    store.put([ev(i, size=10) for i in range(60)])
    held = store.get(None, 60, timeout=1)
    assert offsets(held) == list(range(60))
    result = []
    getter = threading.Thread(target=lambda: result.append(store.get(None, 100, timeout=10)))
    getter.start()  # wants 100 events / 10,000 bytes
    store.put([ev(i, size=10) for i in range(60, 64)])  # every slot, 4 of them not handed out
    time.sleep(0.1)
    assert not result  # no put waits yet: the get waits for more
    t0 = time.monotonic()
    producer = threading.Thread(target=lambda: store.put([ev(64, size=10)]))
    producer.start()
    getter.join(5)
    assert offsets(result[0]) == [60, 61, 62, 63] and time.monotonic() - t0 < 2
    t0 = time.monotonic()
    assert not store.get(None, 100, timeout=0.1)  # everything handed out: nothing to return early
    assert time.monotonic() - t0 >= 0.09
    store.ack(result[0].position_range.end, result[0].position_range.end_seq)
    producer.join(5)
    assert offsets(store.try_get(None, 100)) == [64]


@pytest.mark.parametrize(
    ("mode", "size", "first"),
    # 64 slots, an eighth is 8; MEMSIZE: 6,400 bytes, an eighth is 800 (six events of 150 bytes)
    [(ITEMSIZE, 10, 8), (MEMSIZE, 10, 8), (MEMSIZE, 150, 6)],
)
def test_a_get_stops_waiting_once_an_eighth_of_the_store_waits_for_it(mode, size, first):
    """A batch larger than an eighth of the store (its slots, or its bytes in MEMSIZE mode)
    returns at an eighth: waiting on, it would take the whole store and stop the parser until the
    client acked it (sysbench's 1-row transactions under Canal's defaults: 16,384 slots hold
    ~3.25 MB of a 4 MB batch), and the client would wait longer for its first batch."""
    store = MemoryEventStore(64, buffer_mem_unit=100, batch_mode=mode)
    result = []
    getter = threading.Thread(target=lambda: result.append(store.get(None, 100, timeout=10)))
    getter.start()
    for i in range(first - 1):
        store.put([ev(i, size=size)])
    time.sleep(0.1)
    assert not result  # under an eighth: the get waits for more
    t0 = time.monotonic()
    store.put([ev(first - 1, size=size)])
    getter.join(5)
    assert offsets(result[0]) == list(range(first)) and time.monotonic() - t0 < 2
    # The rest of the store takes puts while the batch is out.
    assert store.try_put([ev(i, size=size) for i in range(first, first + 2)])
    store.ack(result[0].position_range.end, result[0].position_range.end_seq)
    assert offsets(store.try_get(None, 100)) == [first, first + 1]


@pytest.mark.parametrize("mode", [ITEMSIZE, MEMSIZE])
def test_a_get_stops_waiting_once_the_producer_is_idle(mode):
    """The parser read all the source sent: nothing more is coming to fill the batch, so a timed
    get takes what is there (Canal waits out the timeout, at the end of every backlog). A put
    ends the idle spell; with nothing there, an idle producer makes no get return early."""
    store = MemoryEventStore(64, buffer_mem_unit=100, batch_mode=mode)
    store.idle()
    t0 = time.monotonic()
    assert not store.get(None, 10, timeout=0.1)
    assert time.monotonic() - t0 >= 0.09
    result = []
    getter = threading.Thread(target=lambda: result.append(store.get(None, 10, timeout=10)))
    getter.start()
    store.put([ev(1), ev(2)])  # more may follow: the get waits
    time.sleep(0.1)
    assert not result
    t0 = time.monotonic()
    store.idle()
    getter.join(5)
    assert offsets(result[0]) == [1, 2] and time.monotonic() - t0 < 2
    store.put([ev(3)])
    store.idle()  # already idle when the get comes: no wait
    t0 = time.monotonic()
    assert offsets(store.get(None, 10, timeout=10)) == [3] and time.monotonic() - t0 < 2


@pytest.mark.parametrize("mode", [ITEMSIZE, MEMSIZE])
def test_a_get_of_an_empty_one_slot_store_waits(mode):
    """Half of one slot (or of a one-byte budget) is nothing: an empty store still makes a get wait."""
    store = MemoryEventStore(1, buffer_mem_unit=1, batch_mode=mode)
    t0 = time.monotonic()
    assert not store.get(None, 5, timeout=0.1)
    assert time.monotonic() - t0 >= 0.09
    store.put([ev(1, size=10)])
    assert offsets(store.get(None, 5, timeout=5)) == [1]


def test_stop_wakes_blocked_callers():
    store = MemoryEventStore(2)
    store.put([ev(1), ev(2)])
    errors = []

    def blocked_put():
        try:
            store.put(ev(3))
        except StoreError as e:
            errors.append(e)

    t = threading.Thread(target=blocked_put)
    t.start()
    time.sleep(0.05)
    store.stop()
    t.join(2)
    assert len(errors) == 1
    with pytest.raises(StoreError, match="stopped"):
        store.try_get(None, 1)


# ---------------------------------------------------------------------------- ack position rules


def test_ack_point_is_last_transaction_boundary():
    store = MemoryEventStore(32)
    store.put(txn(100, 2) + [ev(200, "begin"), ev(201)])
    batch = store.try_get(None, 32)
    assert batch.position_range.ack == ev(200, "begin").log_position()
    assert batch.position_range.end == ev(201).log_position()


def test_ack_point_skips_begin_with_gtid():
    store = MemoryEventStore(32)
    store.put(
        [ev(1, "begin", gtid="u:1"), ev(2), ev(3, "end", gtid="u:1"), ev(4, "begin", gtid="u:1-2"), ev(5)]
    )
    batch = store.try_get(None, 32)
    assert batch.position_range.ack.postion.position == 3


def test_ack_point_none_or_ddl():
    store = MemoryEventStore(32)
    store.put([ev(1), ev(2)])
    assert store.try_get(None, 32).position_range.ack is None
    store.put([ev(3), ev(4, "ddl"), ev(5)])
    assert store.try_get(None, 32).position_range.ack == ev(4, "ddl").log_position()


# ---------------------------------------------------------------------------- ddl isolation


@pytest.mark.parametrize("mode", [ITEMSIZE, MEMSIZE])
def test_ddl_isolation(mode):
    store = MemoryEventStore(32, buffer_mem_unit=1024, batch_mode=mode, ddl_isolation=True)
    store.put(txn(10, 1) + [ev(20, "ddl"), ev(21, "ddl")] + txn(30, 1))
    assert offsets(store.try_get(None, 20)) == [10, 11, 12]
    assert offsets(store.try_get(None, 20)) == [20]
    assert offsets(store.try_get(None, 20)) == [21]
    assert offsets(store.try_get(None, 20)) == [30, 31, 32]

    plain = MemoryEventStore(32, batch_mode=mode)
    plain.put(txn(10, 1) + [ev(20, "ddl")] + txn(30, 1))
    assert offsets(plain.try_get(None, 20)) == [10, 11, 12, 20, 30, 31, 32]


# ---------------------------------------------------------------------------- rollback / ack (RollbackAndAckTest)


def test_rollback_regets_same_events():
    store = MemoryEventStore(16)
    store.put([ev(i) for i in range(10)])
    b1 = store.get(None, 3)
    b2 = store.get(None, 3)
    store.rollback()
    assert offsets(store.get(None, 3)) == offsets(b1)
    assert offsets(store.get(None, 3)) == offsets(b2)
    store.ack(b1.position_range.end, b1.position_range.end_seq)
    store.rollback()
    again = store.get(None, 3)
    assert offsets(again) == offsets(b2)
    assert [e.raw for e in again.events] == [e.raw for e in b2.events]
    assert store.stats()["get_seq"] == 5


def test_clean_until_frees_and_continues():
    store = MemoryEventStore(8)
    store.put([ev(i) for i in range(8)])
    batch = store.get(None, 4)
    store.clean_until(ev(2).log_position())  # inside the batch, no sequence
    assert store.stats()["ack_seq"] == 2
    assert store.try_put([ev(8), ev(9), ev(10)])
    assert not store.try_put(ev(11))
    store.ack(batch.position_range.end, batch.position_range.end_seq)
    assert offsets(store.get(None, 7)) == [4, 5, 6, 7, 8, 9, 10]
    store.rollback()
    assert offsets(store.try_get(None, 100)) == [4, 5, 6, 7, 8, 9, 10]


def test_ack_errors_and_by_sequence():
    store = MemoryEventStore(8)
    store.put([ev(i) for i in range(6)])
    batch = store.get(None, 4)
    with pytest.raises(StoreError, match="no match ack position"):
        store.ack(ev(5).log_position())  # not got yet
    with pytest.raises(StoreError, match="no match"):
        store.ack(ev(1).log_position(), 3)  # position and sequence disagree
    with pytest.raises(StoreError):
        store.ack(None)
    store.ack(None, 1)
    assert store.stats()["ack_seq"] == 1
    with pytest.raises(StoreError):
        store.ack(ev(0).log_position())  # already acked
    store.ack(batch.position_range.end, batch.position_range.end_seq)
    assert store.stats()["ack_seq"] == 3


def test_ack_frees_payloads_but_keeps_first_position():
    store = MemoryEventStore(8)
    store.put([ev(i) for i in range(5)])
    batch = store.get(None, 3)
    store.ack(batch.position_range.end, batch.position_range.end_seq)
    slots = store._slots
    assert slots[0] is None and slots[1] is None and slots[2] is None
    assert batch.events[2].has_payload  # the consumer's copy is untouched
    assert store.get_first_position() == ev(2).log_position(False)
    assert store.get_latest_position() == ev(4).log_position(True)
    store.ack(*(lambda b: (b.position_range.end, b.position_range.end_seq))(store.get(None, 2)))
    assert store.get_latest_position() == ev(4).log_position(False)
    assert len(store) == 0


def test_included_start_reincludes_unacked_event():
    store = MemoryEventStore(8)
    store.put([ev(i) for i in range(4)])
    store.get(None, 2)
    start = LogPosition(IDENT, EntryPosition(FILE, 1, 1, included=True))
    assert offsets(store.try_get(start, 2)) == [1, 2]
    # at the ack point the start is never re-included
    fresh = MemoryEventStore(8)
    fresh.put([ev(i) for i in range(2)])
    assert offsets(fresh.try_get(start, 1)) == [0]


# ---------------------------------------------------------------------------- MEMSIZE (MemBatchTest)


def mem_store(**kw):
    return MemoryEventStore(16, buffer_mem_unit=100, batch_mode=MEMSIZE, **kw)  # 1600-byte budget


def test_memsize_single_event_over_limit():
    store = mem_store()
    assert store.try_put(ev(1, size=5000))  # empty store: accepted, like Canal
    assert not store.try_put(ev(2, size=1))
    batch = store.try_get(None, 1)
    assert offsets(batch) == [1] and batch.memsize == 5000
    store.ack(batch.position_range.end, batch.position_range.end_seq)
    assert store.try_put(ev(2, size=1))


def test_memsize_full_put():
    store = mem_store()
    for i in range(8):
        assert store.try_put(ev(i, size=200))  # 1600 bytes after the 8th
    assert not store.try_put(ev(8, size=1))
    assert store.stats()["put_mem"] == 1600
    assert len(store) == 8  # slots are not the limit here


def test_memsize_batch_get_by_memory():
    store = mem_store()
    store.put([ev(i, size=100) for i in range(10)])
    # budget 2 * 100 = 200: events are added while the total is <= 200 -> three events
    b1 = store.try_get(None, 2)
    assert offsets(b1) == [0, 1, 2] and b1.memsize == 300
    b2 = store.try_get(None, 5)
    assert offsets(b2) == [3, 4, 5, 6, 7, 8]
    assert offsets(store.try_get(None, 5)) == [9]
    assert store.stats()["get_mem"] == 1000


def test_memsize_blocking_get_waits_for_bytes():
    store = MemoryEventStore(32, buffer_mem_unit=100, batch_mode=MEMSIZE)  # an eighth: 400 bytes
    result = []
    t = threading.Thread(target=lambda: result.append(store.get(None, 3)))  # wants >= 300 bytes
    t.start()
    store.put([ev(1, size=100), ev(2, size=100)])
    time.sleep(0.1)
    assert not result
    store.put(ev(3, size=150))
    t.join(2)
    assert offsets(result[0]) == [1, 2, 3]


def test_memsize_rollback_and_ack():
    store = mem_store()
    store.put([ev(i, size=400) for i in range(4)])
    assert not store.try_put(ev(9, size=1))
    b1 = store.try_get(None, 4)  # 400 <= 400 -> two events
    assert offsets(b1) == [0, 1]
    store.rollback()
    assert store.stats()["get_mem"] == 0
    b1 = store.try_get(None, 4)
    assert offsets(b1) == [0, 1]
    store.ack(b1.position_range.end, b1.position_range.end_seq)
    s = store.stats()
    assert (s["ack_mem"], s["get_mem"], s["put_mem"]) == (800, 800, 1600)
    assert store.try_put(ev(9, size=400))
    assert offsets(store.try_get(None, 100)) == [2, 3, 9]


# ---------------------------------------------------------------------------- MultiThreadTest


@pytest.mark.parametrize("mode", [ITEMSIZE, MEMSIZE])
@pytest.mark.parametrize("ddl_isolation", [False, True])
def test_concurrent_producer_consumer(mode, ddl_isolation):
    rng = random.Random(20240501)
    produced = []
    offset = 4
    while len(produced) < 6000:
        if rng.random() < 0.05:
            produced.append(ev(offset, "ddl"))
            offset += 1
            continue
        t = txn(offset, rng.randint(0, 20))
        produced += t
        offset += len(t)
    store = MemoryEventStore(64, buffer_mem_unit=64, batch_mode=mode, ddl_isolation=ddl_isolation)
    boundaries = {id(e) for e in produced if e.entry_type != pb.ROWDATA or e.is_ddl}
    by_pos = {e.position: e for e in produced}

    def producer():
        prng = random.Random(7)
        i = 0
        while i < len(produced):
            n = prng.randint(1, 40)
            store.put(produced[i : i + n], timeout=30)
            i += n

    received = []
    cursor = None
    batches = rollbacks = 0
    crng = random.Random(11)
    th = threading.Thread(target=producer)
    th.start()
    deadline = time.monotonic() + 60
    while len(received) < len(produced) and time.monotonic() < deadline:
        size = crng.randint(1, 50)
        batch = store.get(None, size, timeout=0.01)
        if not batch:
            continue
        if crng.random() < 0.1:  # drop the batch: it comes again, the same events first
            store.rollback()
            rollbacks += 1
            again = store.try_get(None, size)
            assert offsets(again)[: len(batch)] == offsets(batch)
            batch = again
        if ddl_isolation and any(e.is_ddl for e in batch.events):
            assert len(batch) == 1
        rng_ = batch.position_range
        if rng_.ack is not None:
            assert id(by_pos[rng_.ack.postion.position]) in boundaries
            if cursor is not None:
                assert rng_.ack.postion > cursor.postion
            cursor = rng_.ack
        received += batch.events
        store.ack(rng_.end, rng_.end_seq)
        batches += 1
    th.join(10)
    assert not th.is_alive()
    assert [e.position for e in received] == [e.position for e in produced]
    assert all(a is b for a, b in zip(received, produced, strict=True))
    s = store.stats()
    assert s["put_seq"] == s["get_seq"] == s["ack_seq"] == len(produced) - 1
    assert s["put_mem"] == s["ack_mem"] == sum(e.size for e in produced)
    assert rollbacks > 0 and batches > 10


@pytest.mark.parametrize("mode", [ITEMSIZE, MEMSIZE])
@pytest.mark.parametrize("ddl_isolation", [False, True])
def test_batches_and_counters_are_canals_event_by_event_walk(mode, ddl_isolation):
    """A batch's bytes and rows come from the running sums kept beside the slots and a MEMSIZE
    batch is cut by bisection over them: every batch, its sums and the counters after each put,
    get, ack and rollback are what Canal's walk over the events gives, over many wraps of a small
    ring, with acks at a batch's end (by sequence) and inside it (by position)."""
    rng = random.Random(5)
    unit = 50
    store = MemoryEventStore(16, buffer_mem_unit=unit, batch_mode=mode, ddl_isolation=ddl_isolation)
    kinds = ["row"] * 6 + ["begin", "end", "ddl"]
    events = []
    for offset in range(4, 4000):
        e = ev(offset, rng.choice(kinds), size=rng.randint(1, 120))
        e.rows = rng.randint(0, 3)
        events.append(e)

    mems, rows = [0], [0]  # sums over the first n events
    for e in events:
        mems.append(mems[-1] + e.size)
        rows.append(rows[-1] + e.rows)

    def walk(first, top, batch_size):  # Canal's get: event by event
        out, mem, seq = [], 0, first
        last = top if mode == MEMSIZE else min(first + batch_size - 1, top)
        while seq <= last and mem <= (batch_size * unit if mode == MEMSIZE else mem):
            e = events[seq]
            if ddl_isolation and e.is_ddl and out:
                break
            out.append(e)
            mem += e.size
            seq += 1
            if ddl_isolation and e.is_ddl:
                break
        return out

    put = got = acked = 0  # events put / handed out / acknowledged
    handed = 0
    while acked < len(events):
        n = rng.randint(1, 6)
        if put < len(events) and store.try_put(events[put : put + n]):
            put = min(put + n, len(events))
        batch_size = rng.randint(1, 8)
        batch = store.try_get(None, batch_size)
        want = walk(got, put - 1, batch_size)
        assert [e.position for e in batch.events] == [e.position for e in want]
        assert batch.memsize == mems[got + len(want)] - mems[got]
        got += len(want)
        handed += len(want)
        if want and rng.random() < 0.15:
            store.rollback()
            got = acked
        elif not want and got > acked:  # nothing new: what was handed out is acknowledged
            store.ack(events[got - 1].log_position())
            acked = got
        elif want:
            if rng.random() < 0.5:
                store.ack(batch.position_range.end, batch.position_range.end_seq)
                acked = got
            else:
                k = rng.randint(acked, got - 1)
                store.ack(events[k].log_position())
                acked = k + 1
        s = store.stats()
        assert (s["put_seq"], s["get_seq"], s["ack_seq"]) == (put - 1, got - 1, acked - 1)
        assert (s["put_mem"], s["ack_mem"]) == (mems[put], mems[acked])
        assert (s["put_rows"], s["ack_rows"]) == (rows[put], rows[acked])
        assert len(store) == put - acked
    assert handed > len(events)  # rollbacks handed some out twice
