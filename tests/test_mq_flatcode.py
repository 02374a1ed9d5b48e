"""pycanal.mq.flatcode: the compiled flat JSON writes the model's bytes (flat_message + to_json).

The model is checked against Canal's own classes in tests/test_mq_flat.py; here the encoder is
compared with it on random entries: every operation, layouts that change between and inside
RowChanges, MINIMAL images, NULLs, updated flags, keys, text that needs escaping, DDL and
statement entries.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mq_support import TS, col, query_entry, rows_entry
from pycanal.mq.flat import entry_changes, flat_message
from pycanal.mq.flatcode import FlatEncoder
from pycanal.protocol import EntryProtocol_pb2 as pb

TEXT = st.text(alphabet=st.sampled_from(list('ab"\\/\b\t\n\x01\x7f\u2028中😀')), max_size=6)
NAMES = ["id", "k", "c", "pad", 'q"x', "名"]


@st.composite
def layouts(draw: st.DrawFn) -> list[tuple[str, int, str, bool]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    return [
        (n, draw(st.sampled_from([4, 12, -5, 3])), draw(st.sampled_from(["int(11)", "char(60)", "text"])),
         draw(st.booleans()))
        for n in names
    ]  # fmt: skip


@st.composite
def images(draw: st.DrawFn, layout: list[tuple[str, int, str, bool]]) -> list[pb.Column]:
    return [
        col(name, draw(st.none() | TEXT), index=i, sql_type=draw(st.sampled_from([sql, sql, 2004])),
            mysql_type=mysql, key=key, updated=draw(st.booleans()))
        for i, (name, sql, mysql, key) in enumerate(layout)
    ]  # fmt: skip


@st.composite
def entries(draw: st.DrawFn) -> pb.Entry:
    kind = draw(st.sampled_from(["rows", "rows", "rows", "ddl", "query"]))
    schema, table = draw(TEXT), draw(st.sampled_from(["t", "u", 'o"\n']))
    gtid = draw(st.sampled_from(["", "0-1-5"]))
    if kind != "rows":
        event = pb.ALTER if kind == "ddl" else pb.QUERY
        return query_entry(schema, table, event, draw(TEXT), ddl=kind == "ddl", gtid=gtid)
    event = draw(st.sampled_from([pb.INSERT, pb.UPDATE, pb.DELETE]))
    before, after = draw(layouts()), draw(layouts())
    rows = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 9)) == 0:  # a row with other columns (what no converter writes)
            other = draw(layouts())
            before, after = (other, after) if draw(st.booleans()) else (before, other)
        rows.append((draw(images(before)) if event != pb.INSERT else [],
                     draw(images(after)) if event != pb.DELETE else []))  # fmt: skip
    entry = rows_entry(schema, table, event, rows, gtid=gtid)
    if draw(st.integers(0, 19)) == 0:  # Canal's proto2 reads a missing eventType as UPDATE
        change = pb.RowChange.FromString(entry.storeValue)
        change.ClearField("eventType")
        entry.storeValue = change.SerializeToString()
    return entry


@settings(max_examples=400, deadline=None)
@given(st.lists(entries(), min_size=1, max_size=6), st.integers(0, 2**40))
def test_the_encoder_writes_the_models_bytes(batch: list[pb.Entry], batch_id: int) -> None:
    encoder = FlatEncoder()  # one for the batch: layouts cached across its entries, as in a worker
    for entry, change in entry_changes(batch):
        expected = flat_message(entry, change, batch_id, TS).to_json()
        got = encoder.encode(entry, change, batch_id, TS)
        shapes = {(len(r.beforeColumns), len(r.afterColumns)) for r in change.rowDatas}
        same = {tuple((c.name, c.mysqlType, c.isKey) for c in (*r.beforeColumns, *r.afterColumns))
                for r in change.rowDatas}  # fmt: skip
        if got is None:  # left to the model: only rows whose column counts change inside a RowChange
            assert len(shapes) > 1
        elif len(same) <= 1:  # converters give every row of a RowChange its event's columns
            assert got == expected


def test_the_usual_rows_are_written_by_the_encoder() -> None:
    """The sysbench shape (an UPDATE of one row, a key, a NULL) never falls back to the model."""
    layout = [("id", 4, "int(11)", True), ("k", 4, "int(11)", False), ("c", 1, "char(120)", False)]
    encoder = FlatEncoder()
    for i in range(3):
        before = [
            col(n, str(i), index=j, sql_type=s, mysql_type=m, key=k) for j, (n, s, m, k) in enumerate(layout)
        ]
        after = [col(n, None if n == "c" else str(i + 1), index=j, sql_type=s, mysql_type=m, key=k,
                     updated=n != "id") for j, (n, s, m, k) in enumerate(layout)]  # fmt: skip
        entry = rows_entry("sbtest", "sbtest1", pb.UPDATE, [(before, after), (after, before)])
        ((entry, change),) = entry_changes([entry])
        got = encoder.encode(entry, change, 9, TS)
        assert got is not None and got == flat_message(entry, change, 9, TS).to_json()
