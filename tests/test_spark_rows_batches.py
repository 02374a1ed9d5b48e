"""``EntryRows`` on hand-built Canal entries: the compiled per-layout readers and ``batches()``.

Rows of one RowChange whose column count changes, partial (MINIMAL) images and the primary key
merged from both, a sqlType that changes per row, conversion errors, DECIMAL texts, and record
batches cut inside an event equal to ``to_record_batch`` of ``rows()``. No server here.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.spark.entry_rows import EntryRows, _decimal, _int
from pycanal.spark.rows import ChangeRow, RowPosition, RowsError, to_record_batch

FILE = "mysql-bin.000001"
TS = 1_700_000_000  # seconds
INT, CHAR, BIT, VARBINARY = 4, 1, -7, -3  # java.sql.Types


def col(
    name: str, mysql_type: str, value: str | None, *, key: bool = False, sql_type: int = CHAR
) -> pb.Column:
    c = pb.Column(name=name, mysqlType=mysql_type, sqlType=sql_type, isKey=key)
    if value is None:
        c.isNull = True
    else:
        c.value = value
    return c


def rowdata(op: int, rows: list[tuple[list, list]], offset: int = 100, table: str = "t") -> bytes:
    change = pb.RowChange(eventType=op)
    for before, after in rows:
        rd = change.rowDatas.add()
        rd.beforeColumns.extend(before)
        rd.afterColumns.extend(after)
    header = pb.Header(
        schemaName="d", tableName=table, logfileName=FILE, logfileOffset=offset, executeTime=TS * 1000
    )
    return entry(pb.ROWDATA, header, change)


def entry(kind: int, header: pb.Header | None = None, body: Any = None) -> bytes:
    e = pb.Entry(entryType=kind, header=header or pb.Header())
    if body is not None:
        e.storeValue = body.SerializeToString()
    return e.SerializeToString()


def ddl(sql: str, offset: int) -> bytes:
    header = pb.Header(
        schemaName="d", tableName="t", logfileName=FILE, logfileOffset=offset, executeTime=TS * 1000
    )
    return entry(
        pb.ROWDATA, header, pb.RowChange(eventType=pb.CREATE, isDdl=True, sql=sql, ddlSchemaName="d")
    )


def images(rows: list[ChangeRow]) -> list[tuple[str | None, str | None, str | None]]:
    return [(r.pk, r.before, r.after) for r in rows]


def test_rows_of_one_change_with_another_column_count() -> None:
    """A row whose images have another column count than the row before gets its own reader.

    (Servers give all rows of a RowChange the same columns; only the count is checked per row.)"""
    key = col("id", "int(11)", "1", key=True, sql_type=INT)
    rows = list(
        EntryRows().rows(
            [
                rowdata(
                    pb.INSERT,
                    [
                        ([], [key, col("v", "varchar(8)", "a"), col("d", "decimal(4,2)", "1.50")]),
                        ([], [col("id", "int(11)", "2", key=True), col("v", "varchar(8)", None)]),
                        ([], [col("id", "int(11)", "3", key=True), col("v", "varchar(8)", "c"),
                              col("d", "decimal(4,2)", "-0.5")]),
                    ],
                )
            ]
        )
    )  # fmt: skip
    assert images(rows) == [
        ('{"id":1}', None, '{"id":1,"v":"a","d":"1.50"}'),
        ('{"id":2}', None, '{"id":2,"v":null}'),
        ('{"id":3}', None, '{"id":3,"v":"c","d":"-0.5"}'),
    ]
    assert [r.position for r in rows] == [RowPosition(FILE, 100, i, None) for i in range(3)]


@pytest.mark.parametrize("change", ["type", "name", "key"])
def test_a_table_whose_columns_change_between_events_keeps_the_count(change: str) -> None:
    """The reader a table's last RowChange took is tried first and checks its layout on the first
    row: a column retyped (INT -> VARCHAR), renamed or made the key with the count unchanged (an
    ALTER whose DDL the server filtered out) gets its own reader, and the old one serves again."""
    old = [col("id", "int(11)", "1", key=True, sql_type=INT), col("v", "int(11)", "5", sql_type=INT)]
    new = {
        "type": [col("id", "int(11)", "2", key=True, sql_type=INT), col("v", "varchar(8)", "5")],
        "name": [col("id", "int(11)", "2", key=True, sql_type=INT), col("w", "int(11)", "5", sql_type=INT)],
        "key": [col("id", "int(11)", "2", sql_type=INT), col("v", "int(11)", "5", key=True, sql_type=INT)],
    }[change]
    again = [col("id", "int(11)", "3", key=True, sql_type=INT), col("v", "int(11)", "7", sql_type=INT)]
    entries = [rowdata(pb.INSERT, [([], cols)], offset=100 + i) for i, cols in enumerate([old, new, again])]
    second = {
        "type": ('{"id":2}', None, '{"id":2,"v":"5"}'),
        "name": ('{"id":2}', None, '{"id":2,"w":5}'),
        "key": ('{"v":5}', None, '{"id":2,"v":5}'),
    }[change]
    assert images(list(EntryRows().rows(entries))) == [
        ('{"id":1}', None, '{"id":1,"v":5}'),
        second,
        ('{"id":3}', None, '{"id":3,"v":7}'),
    ]


def test_partial_images_and_the_key_of_both() -> None:
    """The key takes the before image's key columns (in their order), then the after image's
    others; the after image's value wins. DELETE reads no after image, INSERT no before image."""
    k1, k2 = col("k1", "int", "1", key=True), col("k2", "int", "2", key=True)
    bad = col("n", "int", "not a number")
    entries = [
        rowdata(pb.UPDATE, [([k1, k2], [col("k2", "int", "3", key=True), col("x", "char(1)", "y")])]),
        rowdata(pb.UPDATE, [([k1], [col("k2", "int", "5", key=True)])], offset=110),
        rowdata(pb.UPDATE, [([col("x", "char(1)", "z")], [col("x", "char(1)", "w")])], offset=120),
        rowdata(pb.DELETE, [([k1, col("x", "char(1)", "q")], [bad])], offset=200),
        rowdata(pb.INSERT, [([bad], [k2])], offset=300),
    ]
    assert images(list(EntryRows().rows(entries))) == [
        ('{"k1":1,"k2":3}', '{"k1":1,"k2":2}', '{"k2":3,"x":"y"}'),
        ('{"k1":1,"k2":5}', '{"k1":1}', '{"k2":5}'),
        (None, '{"x":"z"}', '{"x":"w"}'),
        ('{"k1":1}', '{"k1":1,"x":"q"}', None),
        ('{"k2":2}', None, '{"k2":2}'),
    ]


def test_values_whose_meaning_depends_on_the_sql_type() -> None:
    """sqlType is read per row: one ENUM column may carry an index in one row, a label in the next."""
    enum, bits = "enum('a','b')", "set('a','b')"
    raw = "\x00\xff"
    rows = list(
        EntryRows(timezone="Asia/Kolkata").rows(
            [
                rowdata(
                    pb.INSERT,
                    [
                        ([], [col("e", enum, "2", sql_type=INT), col("s", bits, "3", sql_type=BIT),
                              col("b", "varbinary(4)", raw, sql_type=VARBINARY),
                              col("ts", "timestamp(3)", "2024-01-01 05:30:00.125", sql_type=93)]),
                        ([], [col("e", enum, "a"), col("s", bits, "b"), col("b", "varbinary(4)", "ab"),
                              col("ts", "timestamp(3)", None, sql_type=93)]),
                    ],
                )
            ]
        )
    )  # fmt: skip
    assert [r.after for r in rows] == [
        '{"e":"b","s":["a", "b"],"b":{"base64": "AP8="},"ts":"2024-01-01 00:00:00.125"}',
        '{"e":"a","s":["b"],"b":"ab","ts":null}',
    ]


@pytest.mark.parametrize("how", ["rows", "batches"])
def test_conversion_errors_name_the_column(how: str) -> None:
    def run(*rows: tuple[list, list]) -> None:
        builder = EntryRows()
        entries = [rowdata(pb.INSERT, list(rows), offset=99)]
        list(builder.rows(entries) if how == "rows" else builder.batches(entries))

    ok = ([], [col("k", "int", "1", sql_type=INT), col("g", "hologram", None)])
    where = f"d.t at {FILE}:99"
    run(ok)  # an unknown mysqlType is an error only where a value needs converting
    with pytest.raises(RowsError, match=rf"column 'k' \(int\) of {where}: invalid literal for int"):
        run(ok, ok, ([], [col("k", "int", "x", sql_type=INT), col("g", "hologram", None)]))
    with pytest.raises(RowsError, match=rf"column 'g' \(hologram\) of {where}: unknown mysqlType 'hologram'"):
        run(ok, ([], [col("k", "int", "2", sql_type=INT), col("g", "hologram", "x")]))
    with pytest.raises(RowsError, match=rf"column 'e' \(enum\('a'\)\) of {where}: tuple index out of range"):
        run(
            ([], [col("e", "enum('a')", "1", sql_type=INT)]), ([], [col("e", "enum('a')", "2", sql_type=INT)])
        )
    with pytest.raises(
        RowsError, match=rf"column 's' \(set\('a'\)\) of {where}: SET value 2 has bits beyond"
    ):
        run(([], [col("s", "set('a')", "2", sql_type=BIT)]))


def test_decimal_text_as_decimal_formats_it() -> None:
    """The shortcut for plain DECIMAL texts gives exactly ``f'"{Decimal(text):f}"'`` (or its error)."""
    texts = ["0", "-0", "0.00", "-0.00", "00", "007.50", ".5", "5.", "+5", "1e3", "-1E-3", " 1", "1 ", "1_0",
             "\u0661", "1.2.3", "-", "", "-.5", "12345678901234567890.123456789", "-1854551255.46"]  # fmt: skip
    rnd = random.Random(7)
    texts += ["".join(rnd.choice("0123456789-.+e") for _ in range(rnd.randint(1, 7))) for _ in range(5000)]
    for text in texts:
        try:
            want = f'"{Decimal(text):f}"'
        except ArithmeticError as exc:
            with pytest.raises(type(exc)):
                _decimal(text)
        else:
            assert _decimal(text) == want, text


def stream() -> list[bytes]:
    """Two transactions with GTIDs, a filtered table, DDL and two entries at one offset."""

    def ins(first: int, n: int, offset: int, table: str = "t") -> bytes:
        return rowdata(
            pb.INSERT,
            [([], [col("id", "int", str(i), key=True, sql_type=INT), col("c", "char(3)", f"v{i}")])
             for i in range(first, first + n)],
            offset, table,
        )  # fmt: skip

    return [
        ddl("CREATE TABLE t (id INT PRIMARY KEY, c CHAR(3))", 50),
        entry(pb.GTIDLOG, body=pb.Pair(key="gtid", value="0-1-7")),
        ins(0, 5, 100),
        ins(5, 3, 200, "skipped"),
        ins(8, 4, 300),
        ins(12, 2, 300),  # a TRANSACTION_PAYLOAD's rows events share its offset
        entry(pb.TRANSACTIONEND),
        ddl("RENAME TABLE t TO u, u2 TO t", 400),
        ins(14, 6, 500),
    ]


@pytest.mark.parametrize("size", [1, 3, 4, 8192])
def test_batches_equal_the_rows(size: int) -> None:
    from pycanal.parse.filter import TableFilter

    accepts = TableFilter("d\\.(t|u|u2)")
    rows = list(EntryRows(accepts=accepts).rows(stream()))
    assert len(rows) == 1 + 5 + 4 + 2 + 3 + 6 and all(r.table != "skipped" for r in rows)
    assert rows[1].position == RowPosition(FILE, 100, 0, "0-1-7")
    assert [r.position.row for r in rows if r.position.offset in (300, 400)] == [0, 1, 2, 3, 4, 5, 0, 1, 2]
    batches = list(EntryRows(accepts=accepts).batches(stream(), rows_per_batch=size))
    assert [b.num_rows for b in batches] == [min(size, len(rows) - i) for i in range(0, len(rows), size)]
    assert pa.Table.from_batches(batches).equals(pa.Table.from_batches([to_record_batch(rows)]))


def test_batches_continue_a_previous_builder() -> None:
    """A stream cut between two entries at one offset: the second builder continues the row
    numbering and the GTID (``resume``, ``gtid``)."""
    entries = stream()
    cut = 5  # after the first of the two entries at offset 300
    first = EntryRows()
    head = list(first.batches(entries[:cut], rows_per_batch=4))
    tail = list(EntryRows(gtid=first.gtid, resume=first.resume).batches(entries[cut:], rows_per_batch=4))
    assert first.gtid == "0-1-7" and first.resume == (FILE, 300, 4)
    whole = to_record_batch(list(EntryRows().rows(entries)))
    assert pa.Table.from_batches(head + tail).equals(pa.Table.from_batches([whole]))


def test_no_rows_no_batches() -> None:
    assert list(EntryRows().batches([])) == []
    assert to_record_batch([]).num_rows == 0
    with pytest.raises(ValueError, match="rows_per_batch must be positive"):
        EntryRows().batches(stream(), rows_per_batch=0)


@pytest.mark.parametrize(
    ("text", "json_text"),
    [
        ("0", "0"),
        ("7", "7"),
        ("2147483647", "2147483647"),
        ("007", "7"),
        ("-5", "-5"),
        ("+3", "3"),
        ("١٢", "12"),
    ],
)
def test_integer_texts_come_out_canonical(text: str, json_text: str) -> None:
    """Canonical texts are kept as they are, others go through int(): the same JSON either way."""
    assert _int(text) == json_text == json.dumps(int(text))


def test_snapshot_value_texts_by_column_equal_them_one_by_one() -> None:
    """A snapshot chunk's JSON texts come from Arrow kernels for integer and plain string columns:
    the same texts as ``json_text`` of each value, escapes and integers past int64 included."""
    from pycanal.spark.rows import json_text
    from pycanal.spark.snapshot_rows import _json_texts

    rnd = random.Random(7)
    alphabet = ["a", "é", "中", '"', "\\", "\x00", "\n", "\x1f", "\u2028", "😀", " "]
    columns = [
        ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(6))) for _ in range(300)] + [None],
        ["plain", "é", None, ""],
        [rnd.randrange(-(2**63), 2**63) for _ in range(100)] + [None],
        [0, 2**64 - 1, None],
        [-1, 2**64 - 1],  # no Arrow integer type holds both
        [None, None],
        [Decimal("1.50"), None, 1.5, b"\x00\xff", True],
    ]
    for values in columns:
        assert _json_texts(values).to_pylist() == [json_text(v) for v in values], values
