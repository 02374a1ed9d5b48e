"""TransactionBuffer: Canal's EventTransactionBuffer flush rules and the persisted position.

The first two tests mirror Canal's own ``EventTransactionBufferTest`` (flush on transaction end,
forced flush of a full buffer); the rest pin down the other rules (before a begin, after non-DML
row data, heartbeat, split of a transaction larger than the buffer) and the position handed to
the position manager after each accepted batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pycanal.binlog import read_events
from pycanal.parse.buffer import FlushRejectedError, TransactionBuffer, TransactionPosition
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.protocol import CanalEntry as C
from pycanal.store.event import Event


def entry(
    offset: int, entry_type: int | None = None, event_type: int | None = None, length: int = 10
) -> Event:
    """Like Canal's test ``buildEntry``: file "1", offset, executeTime 40 + offset (a store record)."""
    header = C.Header(
        logfileName="1", logfileOffset=offset, executeTime=40 + offset, eventLength=length, serverId=7
    )
    if event_type is not None:
        header.eventType = event_type
    e = C.Entry(header=header)
    if entry_type is not None:
        e.entryType = entry_type
    return Event.from_entry(e)


class Sink:
    def __init__(self, accept: bool = True) -> None:
        self.batches: list[list[C.Entry]] = []
        self.positions: list[TransactionPosition] = []
        self.accept = accept

    def flush(self, batch: list[Event]) -> bool:
        self.batches.append([r.entry for r in batch])
        return self.accept

    def offsets(self) -> list[list[int]]:
        return [[e.header.logfileOffset for e in b] for b in self.batches]


def make(size: int = 64, accept: bool = True) -> tuple[TransactionBuffer, Sink]:
    sink = Sink(accept)
    return TransactionBuffer(size, sink.flush, sink.positions.append), sink


def test_transaction_flush():
    """Canal ``testTransactionFlush``: buffer 64, transactions of 5 entries -> batches of 5."""
    buf, sink = make(64)
    size = 5
    for i in range(size * 10):
        if i % size == 0:
            buf.add(entry(1 + i, C.TRANSACTIONBEGIN))
        elif (i + 1) % size == 0:
            buf.add(entry(1 + i, C.TRANSACTIONEND))
        else:
            buf.add(entry(1 + i))  # no entryType (ROWDATA), no eventType (UPDATE): DML
    assert [len(b) for b in sink.batches] == [size] * 10
    assert sink.offsets()[0] == [1, 2, 3, 4, 5]
    for batch in sink.batches:
        assert batch[0].entryType == C.TRANSACTIONBEGIN and batch[-1].entryType == C.TRANSACTIONEND
    assert len(buf) == 0
    # one position per batch: its TRANSACTIONEND
    assert [p.position for p in sink.positions] == [5 * k for k in range(1, 11)]
    assert buf.last_position == TransactionPosition("1", 50, 60, 90, 7, "")


def test_force_flush_when_full():
    """Canal ``testForceFlush``: 2 * 64 + 1 row entries -> two batches of exactly 64."""
    buf, sink = make(64)
    for i in range(64 * 2 + 1):
        buf.add(entry(1 + i))
    assert [len(b) for b in sink.batches] == [64, 64]
    assert sink.offsets()[1][0] == 65
    assert len(buf) == 1  # the 129th waits for more
    assert sink.positions == [] and buf.last_position is None  # no transaction end seen


def test_transaction_larger_than_the_buffer_is_split():
    buf, sink = make(4)
    buf.add(entry(0, C.TRANSACTIONBEGIN))
    for i in range(1, 10):
        buf.add(entry(i, C.ROWDATA, C.INSERT))
    buf.add(entry(10, C.TRANSACTIONEND))
    assert sink.offsets() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    # only the piece that holds the end moves the position
    assert [p.position for p in sink.positions] == [10]


def test_end_as_the_first_entry_of_a_batch_still_gives_the_position():
    # Canal's search stops at index 1 and would persist nothing here.
    buf, sink = make(2)
    buf.add(entry(0, C.TRANSACTIONBEGIN))
    buf.add(entry(1, C.ROWDATA, C.UPDATE))
    buf.add(entry(2, C.TRANSACTIONEND))  # full: [0, 1] go first, then [2] on its own
    assert sink.offsets() == [[0, 1], [2]]
    assert [p.position for p in sink.positions] == [2]


def test_begin_flushes_the_previous_entries():
    buf, sink = make()
    buf.add(entry(0, C.ROWDATA, C.INSERT))
    buf.add(entry(1, C.ROWDATA, C.DELETE))
    assert sink.batches == []
    buf.add(entry(2, C.TRANSACTIONBEGIN))
    assert sink.offsets() == [[0, 1]]
    assert len(buf) == 1


@pytest.mark.parametrize(
    "event_type",
    [C.CREATE, C.ALTER, C.ERASE, C.QUERY, C.TRUNCATE, C.RENAME, C.CINDEX, C.DINDEX, C.XACOMMIT, C.XAROLLBACK],
    ids=lambda t: C.EventType.Name(t),
)
def test_non_dml_row_data_flushes_after_itself(event_type):
    buf, sink = make()
    buf.add(entry(0, C.TRANSACTIONBEGIN))
    buf.add(entry(1, C.ROWDATA, C.INSERT))
    buf.add(entry(2, C.ROWDATA, event_type))
    assert sink.offsets() == [[0, 1, 2]]
    assert sink.positions == []  # no transaction end in the batch: nothing to persist
    buf.add(entry(3, C.ROWDATA, C.UPDATE))
    assert len(sink.batches) == 1


def test_ddl_between_transactions_is_a_batch_of_its_own():
    buf, sink = make()
    for e in (
        entry(0, C.TRANSACTIONBEGIN),
        entry(1, C.ROWDATA, C.INSERT),
        entry(2, C.TRANSACTIONEND),
        entry(3, C.ROWDATA, C.ALTER),
        entry(4, C.TRANSACTIONBEGIN),
        entry(5, C.ROWDATA, C.DELETE),
        entry(6, C.TRANSACTIONEND),
    ):
        buf.add(e)
    assert sink.offsets() == [[0, 1, 2], [3], [4, 5, 6]]
    assert [p.position for p in sink.positions] == [2, 6]


def test_heartbeat_flushes():
    buf, sink = make()
    buf.add(entry(0, C.ROWDATA, C.INSERT))
    hb = Event.from_entry(C.Entry(header=C.Header(eventType=C.MHEARTBEAT), entryType=C.HEARTBEAT))
    buf.add(hb)
    assert len(sink.batches) == 1 and sink.batches[0][-1] == hb.entry
    buf.add(hb)  # an idle source: a heartbeat alone is flushed too
    assert len(sink.batches) == 2


def test_gtidlog_entries_are_not_passed_on():
    buf, sink = make()
    buf.add(entry(0, C.GTIDLOG))
    buf.add(entry(1, C.TRANSACTIONBEGIN))
    buf.add(entry(2, C.TRANSACTIONEND))
    assert sink.offsets() == [[1, 2]]


def test_each_end_reports_its_position():
    buf, sink = make(8)
    buf.add(entry(100, C.TRANSACTIONEND, length=31))
    buf.add(entry(131, C.TRANSACTIONEND, length=31))
    assert [p.position for p in sink.positions] == [100, 131]
    p = buf.last_position
    assert (p.journal_name, p.position, p.end_position, p.timestamp, p.server_id) == ("1", 131, 162, 171, 7)


def test_position_is_the_last_end_of_the_batch():
    # An END is normally the last entry of its batch; after a rejected flush later entries join
    # the same batch, and the position is still the batch's last END (not its last entry).
    buf, sink = make(8, accept=False)
    buf.add(entry(0, C.TRANSACTIONBEGIN))
    with pytest.raises(FlushRejectedError):
        buf.add(entry(1, C.TRANSACTIONEND))
    with pytest.raises(FlushRejectedError):
        buf.add(entry(2, C.TRANSACTIONEND))  # still rejected: now two ends buffered
    sink.accept = True
    buf.add(entry(3, C.ROWDATA, C.INSERT))
    buf.add(entry(4, C.ROWDATA, C.CREATE))
    assert sink.offsets()[-1] == [0, 1, 2, 3, 4]
    assert [p.position for p in sink.positions] == [2]


def test_a_rejected_batch_stays_buffered():
    buf, sink = make(accept=False)
    buf.add(entry(0, C.TRANSACTIONBEGIN))
    with pytest.raises(FlushRejectedError):
        buf.add(entry(1, C.TRANSACTIONEND))
    assert len(buf) == 2 and sink.positions == [] and buf.last_position is None
    sink.accept = True
    buf.flush()
    assert sink.offsets()[-1] == [0, 1] and [p.position for p in sink.positions] == [1]


def test_a_failing_callback_keeps_the_entries():
    def boom(batch):
        raise RuntimeError("store closed")

    buf = TransactionBuffer(4, boom)
    buf.add(entry(0, C.TRANSACTIONBEGIN))
    with pytest.raises(RuntimeError, match="store closed"):
        buf.add(entry(1, C.TRANSACTIONEND))
    assert len(buf) == 2
    buf.reset()
    assert len(buf) == 0


@pytest.mark.parametrize("size", [0, -4, 3, 6, 1000, 1023])
def test_size_must_be_a_power_of_two(size):
    with pytest.raises(ValueError, match="power of 2"):
        TransactionBuffer(size, lambda b: None)


@pytest.mark.parametrize("size", [True, 4.0, "4"])
def test_size_must_be_an_int(size):
    with pytest.raises(TypeError):
        TransactionBuffer(size, lambda b: None)


def test_needs_a_callback():
    with pytest.raises(ValueError, match="callback"):
        TransactionBuffer(4)
    assert TransactionBuffer(1, lambda b: None).size == 1


def test_converted_fixture_batches_are_transactions(fixtures_dir: Path):
    """Converter + buffer over a real binlog: one batch per transaction, positions at the XIDs."""
    sink = Sink()
    buf = TransactionBuffer(1024, sink.flush, sink.positions.append)
    conv = RawEntryConverter()
    for event in read_events(fixtures_dir / "binlog-parser" / "mysql-bin.01"):
        buf.add_all(conv.records(event))
    kinds = [[C.EntryType.Name(e.entryType) for e in b] for b in sink.batches]
    assert kinds == [["TRANSACTIONBEGIN", "ROWDATA", "TRANSACTIONEND"]] * 4
    assert [(p.position, p.end_position) for p in sink.positions] == [
        (397, 428),
        (692, 723),
        (967, 998),
        (1226, 1257),
    ]
    assert all(p.journal_name == "mysql-bin.01" for p in sink.positions)


def test_converted_payload_transaction_ends_at_the_payload_end(fixtures_dir: Path):
    """A transaction inside a TRANSACTION_PAYLOAD: the position is the payload's (Canal's rule)."""
    path = fixtures_dir / "rust_mysql_common" / "transaction_compression.000001"
    sink = Sink()
    buf = TransactionBuffer(16, sink.flush, sink.positions.append)
    conv = RawEntryConverter()
    payloads = []
    for event in read_events(path):
        if event.type_name == "TRANSACTION_PAYLOAD":
            payloads.append(event)
        buf.add_all(conv.records(event))
    (payload,) = payloads
    (p,) = sink.positions
    assert (p.position, p.end_position) == (payload.pos, payload.next_pos)


def test_deferred_batches_reach_the_sink_together_at_commit():
    """The parser's mode: flushed batches wait for commit() (or ``size`` entries), then go in one
    call, in order, and the last transaction end among them is persisted."""
    sink = Sink()
    buf = TransactionBuffer(64, sink.flush, sink.positions.append, deferred=True)
    for t in range(3):
        buf.add(entry(10 * t, C.TRANSACTIONBEGIN))
        buf.add(entry(10 * t + 1, C.ROWDATA, C.INSERT))
        buf.add(entry(10 * t + 2, C.ROWDATA, C.QUERY))  # a flush point inside the transaction
        buf.add(entry(10 * t + 3, C.ROWDATA, C.INSERT))
        buf.add(entry(10 * t + 4, C.TRANSACTIONEND))
    assert sink.batches == [] and sink.positions == [] and len(buf) == 15
    buf.commit()
    assert sink.offsets() == [[o + 10 * t for t in range(3) for o in range(5)]]
    assert [p.position for p in sink.positions] == [24] and len(buf) == 0
    buf.commit()  # nothing waiting: no call
    assert len(sink.batches) == 1
    # the size bound hands them over without a commit
    small = Sink()
    buf = TransactionBuffer(4, small.flush, small.positions.append, deferred=True)
    for t in range(2):
        for o, kind in enumerate((C.TRANSACTIONBEGIN, C.ROWDATA, C.TRANSACTIONEND)):
            buf.add(entry(10 * t + o, kind, C.INSERT if kind == C.ROWDATA else None))
    assert small.offsets() == [[0, 1, 2, 10, 11, 12]] and [p.position for p in small.positions] == [12]
