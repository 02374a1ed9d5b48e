"""A record over ``kafka.max.request.size`` split across records (pycanal.mq.split), no I/O: parts
within the limit, each a valid Canal message with a run of the rows in order, joined back byte for
byte; a row too large alone is one error naming table, position and sizes; a consumer's Joiner;
Spark's row numbering of a cut entry's pieces."""

from __future__ import annotations

import pytest

from pycanal.mq import MQDestination, MQOptions, build_records
from pycanal.mq.flat import FlatMessage
from pycanal.mq.split import (
    HEADROOM,
    PART_HEADER,
    SPLIT_HEADER,
    Joiner,
    RowTooLarge,
    join_parts,
    row_prop,
    split_flat,
    split_packet,
)
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.spark.entry_rows import EntryRows

LIMIT = 65536


def _entry(rows: int, width: int, event: int = pb.INSERT, offset: int = 4, kind: int = pb.ROWDATA) -> bytes:
    change = pb.RowChange(eventType=event, sql="")
    for i in range(rows):
        rd = change.rowDatas.add()
        for image in (rd.beforeColumns, rd.afterColumns) if event == pb.UPDATE else (rd.afterColumns,):
            image.add(name="id", value=str(i), isKey=True, sqlType=4, mysqlType="int")
            image.add(
                name="note", value=f"{i:06d}" + "x" * width, sqlType=2005, mysqlType="text", updated=True
            )
    entry = pb.Entry(entryType=kind, storeValue=change.SerializeToString())
    h = entry.header
    h.schemaName, h.tableName, h.logfileName, h.logfileOffset, h.eventType = (
        "db",
        "t",
        "b.000001",
        offset,
        event,
    )
    h.props.add(key="rowsCount", value=str(rows))
    return entry.SerializeToString()


def _records(entries: list[bytes], flat: bool, limit: int | None = LIMIT, **dest: object):
    options = MQOptions(flat_message=flat, max_request_size=limit)
    return build_records(9, entries, True, MQDestination("t", **dest), options, 1)  # type: ignore[arg-type]


def _rows(record_values: list[bytes], flat: bool) -> list[str]:
    """The id of every row, in record order."""
    out = []
    for value in record_values:
        if flat:
            out += [row["id"] for row in FlatMessage.from_json(value).data or []]
            continue
        for raw in cp.Messages.FromString(cp.Packet.FromString(value).body).messages:
            entry = pb.Entry.FromString(raw)
            if entry.entryType == pb.ROWDATA:
                change = pb.RowChange.FromString(entry.storeValue)
                out += [rd.afterColumns[0].value for rd in change.rowDatas]
    return out


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
@pytest.mark.parametrize("event", [pb.INSERT, pb.UPDATE], ids=["insert", "update"])
def test_a_large_event_is_split_into_parts_within_the_limit(flat: bool, event: int) -> None:
    small = _entry(2, 10, offset=4)
    big = _entry(300, 2000, event, offset=100)
    records = _records([small, big, _entry(1, 10, offset=900)], flat)
    whole = _records([small, big, _entry(1, 10, offset=900)], flat, limit=None)
    split = [r for r in records if r.headers]
    assert len(split) > 5 and all(len(r.value or b"") <= LIMIT - HEADROOM for r in records)
    assert {r.partition for r in records} == {0}
    headers = [dict(r.headers) for r in split]
    assert {h[SPLIT_HEADER] for h in headers} == {headers[0][SPLIT_HEADER]}
    assert [h[PART_HEADER].decode() for h in headers] == [
        f"{i}/{len(split)}" for i in range(1, len(split) + 1)
    ]
    assert _rows([r.value for r in records], flat) == _rows([r.value for r in whole], flat)  # type: ignore[misc]
    assert join_parts([r.value for r in split]) in [r.value for r in whole]  # type: ignore[misc]
    joiner = Joiner()
    joined = [j for r in records if (j := joiner.add(r.topic, 0, 0, r.value, r.headers)) is not None]
    assert [v for _, v in joined] == [r.value for r in whole]
    if flat:  # each part keeps every field but the rows
        first, last = (FlatMessage.from_json(split[i].value or b"") for i in (0, -1))
        assert (first.table, first.pk_names, first.sql_type, first.es) == (
            last.table,
            last.pk_names,
            last.sql_type,
            last.es,
        )
        assert (first.old is None) == (event == pb.INSERT)


def test_protobuf_pieces_of_a_cut_entry_number_their_rows() -> None:
    big = _entry(300, 2000, offset=100)
    (value,) = _records([big], False, limit=None)[0:1]
    parts = split_packet(9, [big], True, True, LIMIT - HEADROOM)
    assert len(parts) > 5
    entries = [cp.Messages.FromString(cp.Packet.FromString(p).body).messages[0] for p in parts]
    firsts = [row_prop(pb.Entry.FromString(e).header) for e in entries]
    counts = [len(pb.RowChange.FromString(pb.Entry.FromString(e).storeValue).rowDatas) for e in entries]
    assert firsts[0] is None and firsts[1:] == [sum(counts[:i]) for i in range(1, len(counts))]
    assert join_parts(parts) == value.value
    # Spark's reader numbers the rows as the whole entry's, even starting at a later piece
    rows = EntryRows()
    (batch,) = rows.batches(entries[1:2])
    assert batch.column("position").to_pylist()[0]["row"] == counts[0]


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_a_row_too_large_alone_names_table_position_and_sizes(flat: bool) -> None:
    with pytest.raises(RowTooLarge) as failed:
        _records([_entry(1, 5, offset=4), _entry(3, 200_000, offset=1234)], flat)
    text = str(failed.value)
    assert "db.t at b.000001:1234" in text and f"over the {LIMIT - HEADROOM}" in text
    assert failed.value.size > 200_000 and failed.value.fatal


def test_split_flat_keeps_a_message_within_the_limit_whole() -> None:
    msg = FlatMessage(1, "db", "t", type="INSERT", data=[{"id": "1"}])
    assert split_flat(msg, 1000, pb.Header()) == [msg.to_json()]


def test_partitioned_parts_stay_on_their_partition() -> None:
    records = _records([_entry(300, 2000)], True, partitions_num=3, partition_hash="db\\.t:$pk$")
    by_split: dict[bytes, set[int]] = {}
    for r in records:
        if r.headers:
            by_split.setdefault(dict(r.headers)[SPLIT_HEADER], set()).add(r.partition)
    assert by_split and all(len(p) == 1 for p in by_split.values())
    assert len({p for ps in by_split.values() for p in ps}) == 3


def test_joiner_drops_a_split_that_broke_off() -> None:
    dropped: list[str] = []
    joiner = Joiner(on_drop=dropped.append)
    a = [b'{"id":1,"data":[{"i":"1"}]}', b'{"id":1,"data":[{"i":"2"}]}']
    h = lambda sid, i: ((SPLIT_HEADER, sid), (PART_HEADER, f"{i}/2".encode()))  # noqa: E731
    assert joiner.add("t", 0, 0, a[0], h(b"1.0", 1)) is None
    assert joiner.add("t", 0, 1, a[0], h(b"2.0", 1)) is None  # a resend starts at part 1 again
    assert joiner.add("t", 1, 2, b"other", None) == (2, b"other")  # another partition: its own
    whole = joiner.add("t", 0, 3, a[1], h(b"2.0", 2))
    assert whole is not None and whole[0] == 1
    assert [r["i"] for r in FlatMessage.from_json(whole[1] or b"").data or []] == ["1", "2"]
    assert joiner.add("t", 0, 4, a[1], h(b"3.0", 2)) is None
    assert len(dropped) == 2 and "broke off" in dropped[0] and "without its first" in dropped[1]


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "protobuf"])
def test_spark_reads_the_parts_as_the_whole(flat: bool) -> None:
    """``pycanal pipeline --kafka`` decodes each part on its own: the same row changes as the whole
    record, also when a micro-batch ends between two parts (a new reader for the rest)."""
    from pycanal.spark.kafka_rows import KafkaRows

    entries = [_entry(300, 2000, pb.UPDATE, offset=100)]
    whole = _records(entries, flat, limit=None)
    parts = _records(entries, flat)
    assert len(parts) > 5

    def rows(records: list, readers: int) -> list[tuple]:
        out = []
        cut = len(records) // 2 if readers == 2 else len(records)
        for chunk in (records[:cut], records[cut:]):
            rows = KafkaRows()
            for batch in rows.batches((r.topic, 0, i, r.value) for i, r in enumerate(chunk)):
                table = batch.to_pydict()
                keep = ("op", "after", "before") if flat else ("op", "after", "before", "position")
                out += list(zip(*(table[k] for k in keep), strict=True))
        return out

    assert rows(parts, 1) == rows(parts, 2) == rows(whole, 1)
