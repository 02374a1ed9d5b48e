"""DDL and rows of one table over several partitions (issue 39, 3c and 6), no broker.

* The producer: ``canal.mq.partitionOrder`` off sends Canal's records (no headers, DDL on partition 0
  alone); on, every partition gets the DDL at its place and each record the ``pycanal.order`` header.
* The producer also sends a key update to its old key's partition, marked in both.
* The reader: the records of 3 partitions cut into two micro-batches at every combination of
  places (one partition past an ALTER or a key update while another is still before it), decoded
  as the executors decode them and ordered by ``kafka_order``: each change once, no row applied
  before a DDL it follows or after a DDL it precedes, each key's changes in order (replayed
  strictly), and the lake equal to the source's last state; a replayed micro-batch gives the same
  rows; resent records dropped per partition, also right after their original.
"""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import pyarrow as pa
import pytest

from mq_support import col, query_entry, rows_entry
from pycanal.mq import MQDestination, MQOptions, build_records
from pycanal.mq.order import ORDER_HEADER, is_moved, read_order
from pycanal.mq.records import Record
from pycanal.mq.split import row_prop
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.spark.apply import ChangeApplier
from pycanal.spark.kafka_order import KAFKA_ROW_SCHEMA, KafkaOrder, order_rows
from pycanal.spark.kafka_rows import decode_batches
from pycanal.spark.rows import RowsError

PARTITIONS = 3
HASH = ".*\\..*:$pk$"


def _id(i: int, **kw: object) -> pb.Column:
    return col("id", str(i), index=0, sql_type=4, mysql_type="int", key=True, **kw)


def _int(name: str, index: int, v: int | None, **kw: object) -> pb.Column:
    return col(name, None if v is None else str(v), index=index, sql_type=4, mysql_type="int", **kw)


def _at(entry: pb.Entry, offset: int) -> pb.Entry:
    entry.header.logfileOffset = offset
    return entry


def _source() -> tuple[list[pb.Entry], dict[int, dict[str, int | None]]]:
    """A table's history with an ALTER in the middle, and its last state."""
    entries = [
        _at(query_entry("d", "t", pb.CREATE, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", ddl=True), 100)
    ]

    def image(i: int, v: int, w: int | None = None, layout: int = 1) -> list[pb.Column]:
        cols = [_id(i), _int("v", 1, v, updated=True)]
        return cols + [_int("w", 2, w, updated=True)] if layout == 2 else cols

    entries.append(_at(rows_entry("d", "t", pb.INSERT, [([], image(i, i)) for i in range(1, 13)]), 200))
    entries.append(
        _at(rows_entry("d", "t", pb.UPDATE, [(image(i, i), image(i, i * 10)) for i in range(1, 7)]), 300)
    )
    entries.append(_at(query_entry("d", "t", pb.ALTER, "ALTER TABLE t ADD COLUMN w INT", ddl=True), 400))
    entries.append(
        _at(rows_entry("d", "t", pb.INSERT, [([], image(i, i, i, 2)) for i in range(13, 19)]), 500)
    )
    updates = [(image(i, i * 10 if i < 7 else i, None, 2), image(i, 0, -i, 2)) for i in range(1, 13)]
    entries.append(_at(rows_entry("d", "t", pb.UPDATE, updates), 600))
    moves = [(image(i, 0, -i, 2), [_id(i + 100, updated=True), *image(i, 0, -i, 2)[1:]]) for i in (4, 6)]
    entries.append(_at(rows_entry("d", "t", pb.UPDATE, moves), 650))  # key updates: rows change partition
    entries.append(_at(rows_entry("d", "t", pb.DELETE, [(image(i, 0, -i, 2), []) for i in (2, 5, 11)]), 700))
    entries.append(_at(rows_entry("d", "t", pb.UPDATE, [(image(104, 0, -4, 2), image(104, 1, -4, 2))]), 800))
    state = {i: {"id": i, "v": 0, "w": -i} for i in range(1, 13) if i not in (2, 4, 5, 6, 11)}
    state |= {i: {"id": i, "v": i, "w": i} for i in range(13, 19)}
    state |= {104: {"id": 104, "v": 1, "w": -4}, 106: {"id": 106, "v": 0, "w": -6}}
    return entries, state


def _records(flat: bool, order: bool = True) -> list[Record]:
    """Each entry a store batch of its own, as the server sends them."""
    dest = MQDestination("t", partitions_num=PARTITIONS, partition_hash=HASH)
    options = MQOptions(flat_message=flat, partition_order=order)
    out: list[Record] = []
    for batch_id, entry in enumerate(_source()[0], 1):
        out += build_records(batch_id, [entry], False, dest, options, 0)
    return out


def _partitions(records: list[Record]) -> list[list[Record]]:
    by: list[list[Record]] = [[] for _ in range(PARTITIONS)]
    for r in records:
        by[r.partition].append(r)
    return by


def _is_ddl(value: bytes | None, flat: bool) -> bool:
    if flat:
        return b'"isDdl":true' in (value or b"")
    body = cp.Messages.FromString(cp.Packet.FromString(value or b"").body)
    return any(pb.RowChange.FromString(pb.Entry.FromString(e).storeValue).isDdl for e in body.messages)


def _entries(value: bytes | None) -> list[pb.Entry]:
    body = cp.Messages.FromString(cp.Packet.FromString(value or b"").body)
    return [pb.Entry.FromString(e) for e in body.messages]


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_canal_bytes_by_default_copies_and_headers_with_partition_order(flat: bool) -> None:
    canal = _records(flat, order=False)
    assert all(not r.headers for r in canal)
    assert [r.partition for r in canal if _is_ddl(r.value, flat)] == [0, 0]
    ordered = _records(flat)
    for partition, records in enumerate(_partitions(ordered)):
        ddl = [i for i, r in enumerate(records) if _is_ddl(r.value, flat)]
        assert len(ddl) == 2 and ddl[0] == 0, partition  # CREATE first, then the ALTER at its place
        for r in records:
            order = read_order(r.headers)
            assert order is not None and order.partitions == PARTITIONS
            assert (order.file is not None) == flat
    # the key updates of 4 (partition 2 -> 1) and 6 (1 -> 0) also go to their old key's partition
    if flat:
        moved = sorted(
            (r.partition, read_order(r.headers).moved) for r in ordered if read_order(r.headers).moved
        )
        assert moved == [(0, (1,)), (1, (0, 1)), (2, (0,))]
        rows = [read_order(r.headers).rows for r in ordered if b'"type":"UPDATE"' in (r.value or b"")]
        assert all(rows)  # subsets of an entry's rows name their indexes
        same = [(r.partition, r.value) for r in ordered if not _is_ddl(r.value, flat) and b"[{" in r.value]
        assert len(same) > len([r for r in canal if not _is_ddl(r.value, flat)])  # Canal's and the copies
    else:  # each one-row entry names its row's index in the whole entry
        entries = [(r.partition, e) for r in ordered for e in _entries(r.value)]
        rows = [(p, e) for p, e in entries if not pb.RowChange.FromString(e.storeValue).isDdl]
        props = sorted(row_prop(e.header) for _, e in rows)
        assert props == sorted([*range(12), *range(6), *range(6), *range(12), 0, 1, 0, 1, *range(3), 0])
        moved = sorted(
            (p, e.header.logfileOffset, row_prop(e.header)) for p, e in rows if is_moved(e.header.props)
        )
        assert moved == [(0, 650, 1), (1, 650, 0), (1, 650, 1), (2, 650, 0)]


def _decode(records: list[tuple[int, Record]]) -> pa.Table:
    """One micro-batch's records (offset, record) as the executors decode them: a task per partition."""
    out = []
    for partition in range(PARTITIONS):
        mine = [(o, r) for o, r in records if r.partition == partition]
        if not mine:
            continue
        batch = pa.RecordBatch.from_pylist(
            [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "offset": o,
                    "value": r.value,
                    "headers": [{"key": k, "value": v} for k, v in r.headers],
                }
                for o, r in mine
            ]  # fmt: skip
        )
        out += list(decode_batches([batch]))
    return pa.Table.from_batches(out, KAFKA_ROW_SCHEMA)


def _applied_in_order(batches: list[pa.Table]) -> list[tuple[str, int, int, str | None, str | None]]:
    """Every applied row (op, offset, row, before, after), in apply order (a batch sorted by
    position, as ``apply_changes`` sorts it)."""
    seq = []
    for table in batches:
        position = table["position"].combine_chunks()
        rows = zip(table["op"].to_pylist(), position.field("offset").to_pylist(),
                   position.field("row").to_pylist(), table["before"].to_pylist(), table["after"].to_pylist(),
                   strict=True)  # fmt: skip
        seq += sorted(rows, key=lambda r: (r[1], r[2]))
    return seq


def _replay(seq: list[tuple[str, int, int, str | None, str | None]]) -> dict[int, dict[str, object]]:
    """The table after the row changes in ``seq``, each strictly on the row it changes: an UPDATE
    of the old key applied after the key moved, or a row of a key before its INSERT, fails."""
    state: dict[int, dict[str, object]] = {}
    for op, off, _, before, after in seq:
        if op in ("UPDATE", "DELETE"):
            old = json.loads(before or "{}")
            assert state.pop(old["id"], None) is not None, f"{op} at {off} of a row not there: {old}"
        if op in ("INSERT", "UPDATE"):
            new = json.loads(after or "{}")
            assert new["id"] not in state, f"{op} at {off} of a row there already: {new}"
            state[new["id"]] = {"w": None, **new}
    return state


def _cuts(records: list[list[Record]]) -> list[tuple[int, ...]]:
    """Every combination of places where the first micro-batch ends, one per partition."""
    return list(itertools.product(*(range(len(p) + 1) for p in records)))


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_partitions_cut_anywhere_apply_in_binlog_order(flat: bool) -> None:
    by = _partitions(_records(flat))
    cuts = _cuts(by)
    assert len(cuts) == 9**3  # every partition cut before, between or after its 8 records

    @functools.cache
    def decoded(partition: int, start: int, end: int) -> pa.Table:  # a task's rows, decoded once
        return _decode(list(enumerate(by[partition], 0))[start:end])

    for cut in cuts:
        first = pa.concat_tables([decoded(p, 0, c) for p, c in enumerate(cut)])
        second = pa.concat_tables([decoded(p, c, len(by[p])) for p, c in enumerate(cut)])
        state = KafkaOrder("/nonexistent").load(0)
        applied = []
        for rows in (first, second):
            rows, state = order_rows(rows, state)
            applied.append(rows)
        assert state[0].num_rows == 0, cut  # nothing held once every partition is read
        seq = _applied_in_order(applied)
        ddl = [(off, i) for i, (op, off, *_) in enumerate(seq) if op == "DDL"]
        assert [off for off, _ in ddl] == [100, 400], cut  # each DDL once
        for i, (op, off, *_) in enumerate(seq):
            for ddl_off, at in ddl:  # a row after its DDL in the binlog comes after it, and before
                assert (off > ddl_off) == (i > at) or op == "DDL", (cut, seq[i])
        changes = [(off, row) for op, off, row, *_ in seq if op != "DDL"]
        assert len(changes) == len(set(changes)) == 12 + 6 + 6 + 12 + 2 + 3 + 1, cut
        assert _replay(seq) == {k: v for k, v in _source()[1].items()}, cut


def test_a_row_after_a_pending_ddl_is_held_until_every_partition_has_it() -> None:
    """Partition 1 is past the ALTER, partition 2 not yet: partition 1's later rows wait (applied
    under the old layout they would fail or lose a column), partition 2's earlier ones go."""
    by = _partitions(_records(flat=False))
    alter = [next(i for i, r in enumerate(p) if i and _is_ddl(r.value, False)) for p in by]
    first = [(o, r) for p in by[:2] for o, r in enumerate(p)]  # partitions 0 and 1 whole
    first += [(o, r) for o, r in enumerate(by[2][: alter[2]])]  # partition 2 up to its ALTER
    state = KafkaOrder("/nonexistent").load(0)
    rows, state = order_rows(_decode(first), state)
    offsets = rows["position"].combine_chunks().field("offset").to_pylist()
    assert max(offsets) < 400 and offsets.count(100) == 1
    assert all(off >= 400 for off in state[0]["position"].combine_chunks().field("offset").to_pylist())
    rest = [(o, r) for o, r in enumerate(by[2]) if o >= alter[2]]
    rows, state = order_rows(_decode(rest), state)
    offsets = rows["position"].combine_chunks().field("offset").to_pylist()
    assert min(offsets) == 400 and offsets.count(400) == 1 and state[0].num_rows == 0


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_the_lake_equals_the_source_with_resends_and_a_replay(flat: bool, tmp_path: Path) -> None:
    """Three micro-batches cut unevenly, each partition's records sent again after later ones (a
    server's resend), the second batch replayed after a crash: the lake is the source's state."""
    by = _partitions(_records(flat))
    cuts = [(2, len(by[1]) - 1, 1), (len(by[0]), len(by[1]), 4)]
    batches: list[list[tuple[int, Record]]] = [[], [], []]
    for p, records in enumerate(by):
        ends = [c[p] for c in cuts] + [len(records)]
        start = 0
        for b, end in enumerate(ends):
            resent = [(o, r) for o, r in enumerate(records[max(0, start - 2) : start], max(0, start - 2))]
            batches[b] += resent + [(o, r) for o, r in enumerate(records[start:end], start)]
            start = max(start, end)
    order, applier = KafkaOrder(tmp_path), ChangeApplier(tmp_path, zero_dates="null")
    for batch_id, records in enumerate(batches):
        rows = _decode(records)
        applied, state = order.step(rows, batch_id)
        applier(applied, batch_id)
        if batch_id == 1:  # killed before the state was saved: Spark replays the batch
            again, state_again = KafkaOrder(tmp_path).step(rows, batch_id)
            assert again.equals(applied) and state_again[1] == state[1]
        order.save(batch_id, state)
    assert state[0].num_rows == 0
    applier.wait()
    from pycanal.spark.current import table_path
    from pycanal.spark.delta.tablestate import read_table

    lake = {r["id"]: r for r in read_table(table_path(tmp_path, "d", "t")).to_pylist()}
    assert lake == _source()[1]
    saved = sorted(p.name for p in (tmp_path / "_pycanal" / "kafka-order").iterdir())
    assert saved == ["1.arrow", "1.json", "2.json"]  # batch 1 held rows back (a key update's copy)


def test_a_record_of_another_partition_needs_the_header() -> None:
    flat = b'{"data":null,"database":"d","es":0,"id":1,"isDdl":false,"type":"QUERY","sql":"x"}'
    record = Record("t", 1, flat)
    with pytest.raises(RowsError, match=f"topic 't' partition 1: a record without the {ORDER_HEADER} header"):
        list(_decode([(0, record)]).to_pylist())
    assert _decode([(0, Record("t", 0, flat))]).num_rows == 0


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_a_record_sent_again_right_after_itself_is_dropped(flat: bool) -> None:
    """A failed send resends a batch at once: in one task the copy follows its original, and still
    numbers its rows as the original did (the header's position, the entry's row indexes)."""
    by = _partitions(_records(flat))
    once = [(o, r) for p in by for o, r in enumerate(p)]
    twice = [(o, r) for p in by for o, r in enumerate(p for r in p for p in (r, r))]
    state = KafkaOrder("/nonexistent").load(0)
    assert order_rows(_decode(twice), state)[0].equals(order_rows(_decode(once), state)[0])
