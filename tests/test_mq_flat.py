"""pycanal.mq.flat: Canal 1.1.8's FlatMessage, built and serialized byte for byte.

Expected values come from Canal 1.1.8 (tag canal-1.1.8, commit 0741ccda):
* MQMessageUtils.messageConverter, connector/core/.../producer/MQMessageUtils.java:355-454;
* FlatMessage's properties, protocol/.../protocol/FlatMessage.java:15-30;
* the bytes: CanalKafkaProducer.java:251-260, ``JSON.toJSONBytes(flatMessage,
  JSONWriter.Feature.WriteNulls, JSONWriter.Feature.LargeObject)`` with fastjson2 2.0.31 (pom.xml:284).
  (Not fastjson 1's ``WriteMapNullValue``: 1.1.8 serializes with fastjson2.)
The last tests run Canal's own classes on the same entries (tests/java/CanalMqOracle.java with the
connector.core/canal.protocol jars, whose MQ classes are unchanged from 1.1.7 to 1.1.8).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq_support import (
    FLAT_CASES,
    TS,
    amount_col,
    canal_oracle,
    col,
    decode,
    id_col,
    name_col,
    oracle_case,
    pycanal_records,
    query_entry,
    rows_entry,
    sample,
    tx_entry,
)
from pycanal.mq import FlatMessage, flat_messages
from pycanal.mq.flat import event_type, event_type_name
from pycanal.protocol import EntryProtocol_pb2 as pb


def one(entry: pb.Entry, batch_id: int = 7) -> FlatMessage:
    (msg,) = flat_messages([entry], batch_id, TS)
    return msg


# ------------------------------------------------------------------------ the JSON's shape
def test_ddl_bytes_field_order_and_nulls() -> None:
    # messageConverter:368-377 sets id, database, table, isDdl, type, es (the header's executeTime),
    # ts, sql, gtid; for DDL (379) nothing else, so pkNames/sqlType/mysqlType/data/old stay null and
    # WriteNulls writes them. fastjson2 orders a bean's properties by name; getIsDdl() is "isDdl".
    entry = query_entry("shop", "orders", pb.ALTER, "ALTER TABLE orders ADD c int", ddl=True)
    assert one(entry).to_json() == (
        b'{"data":null,"database":"shop","es":1700000000000,"gtid":"","id":7,"isDdl":true,'
        b'"mysqlType":null,"old":null,"pkNames":null,"sql":"ALTER TABLE orders ADD c int","sqlType":null,'
        b'"table":"orders","ts":1700000000123,"type":"ALTER"}'
    )


def test_insert_bytes() -> None:
    # 380-417: sqlType/mysqlType per column name (LinkedHashMap, first-seen order), a NULL column
    # as null (408-409), pkNames from the key columns (403-405); a DML's sql is "" (proto3 default).
    entry = rows_entry(
        "shop",
        "orders",
        pb.INSERT,
        [
            ((), (id_col("1"), name_col("a"), amount_col(None))),
            ((), (id_col("2"), name_col(None), amount_col("9.50"))),
        ],
        gtid="0-1-5",
    )
    assert one(entry, batch_id=3).to_json() == (
        b'{"data":[{"id":"1","name":"a","amount":null},{"id":"2","name":null,"amount":"9.50"}],'
        b'"database":"shop","es":1700000000000,"gtid":"0-1-5","id":3,"isDdl":false,'
        b'"mysqlType":{"id":"int(11)","name":"varchar(64)","amount":"decimal(10,2)"},"old":null,'
        b'"pkNames":["id"],"sql":"","sqlType":{"id":4,"name":12,"amount":3},"table":"orders",'
        b'"ts":1700000000123,"type":"INSERT"}'
    )


def test_update_old_has_only_updated_columns_accumulated_per_entry() -> None:
    # 385: the set of updated names is made once per entry, so a later row's "old" also carries the
    # columns an earlier row updated (424-437); data is the after image.
    entry = rows_entry(
        "shop",
        "orders",
        pb.UPDATE,
        [
            (
                (id_col("1"), name_col("a"), amount_col("1.00")),
                (id_col("1"), name_col("b", updated=True), amount_col("1.00")),
            ),
            (
                (id_col("2"), name_col("x"), amount_col(None)),
                (id_col("2"), name_col("x"), amount_col("2.00", updated=True)),
            ),
        ],
    )
    msg = one(entry)
    assert msg.data == [
        {"id": "1", "name": "b", "amount": "1.00"},
        {"id": "2", "name": "x", "amount": "2.00"},
    ]
    assert msg.old == [{"name": "a"}, {"name": "x", "amount": None}]
    assert b'"old":[{"name":"a"},{"name":"x","amount":null}]' in msg.to_json()


def test_delete_uses_before_image_and_no_old() -> None:
    before = (id_col("5"), name_col("gone"), amount_col("3.00"))
    msg = one(rows_entry("shop", "orders", pb.DELETE, [(before, ())]))  # 396-397
    assert (msg.type, msg.data, msg.old, msg.pk_names) == (
        "DELETE",
        [{"id": "5", "name": "gone", "amount": "3.00"}],
        None,
        ["id"],
    )


def test_pk_names_from_first_row_only_and_none_without_keys() -> None:
    # 403 + 419: key columns are read from the first row only; no key column leaves pkNames null.
    plain = rows_entry("logs", "events", pb.INSERT, [((), (col("msg", "x"),))])
    assert one(plain).pk_names is None
    assert b'"pkNames":null' in one(plain).to_json()


def test_statement_query_has_no_rows() -> None:
    # 388-391: only INSERT/UPDATE/DELETE rows are read; a non-DDL QUERY keeps the null maps.
    msg = one(query_entry("shop", "", pb.QUERY, "insert into t values (1)", ddl=False))
    assert (msg.is_ddl, msg.type, msg.sql, msg.data, msg.sql_type, msg.table) == (
        False,
        "QUERY",
        "insert into t values (1)",
        None,
        None,
        "",
    )


def test_empty_row_adds_no_data_item_but_update_keeps_old() -> None:
    # 420-422 vs 424-437: a row with no columns is not added to data; an UPDATE still adds its old.
    entry = rows_entry(
        "shop", "orders", pb.UPDATE, [((id_col("1"),), ()), ((id_col("2"),), (id_col("3", updated=True),))]
    )
    msg = one(entry)
    assert msg.data == [{"id": "3"}]
    assert msg.old == [{}, {"id": "2"}]


def test_transaction_entries_dropped() -> None:
    ins = rows_entry("shop", "orders", pb.INSERT, [((), (id_col("1"),))])
    msgs = flat_messages([tx_entry(True), ins, tx_entry(False)], 9, TS)  # 360-364
    assert [m.type for m in msgs] == ["INSERT"]


def test_raw_entries_are_parsed() -> None:
    ins = rows_entry("shop", "orders", pb.INSERT, [((), (id_col("1"),))])
    assert flat_messages([ins.SerializeToString()], 1, TS) == flat_messages([ins], 1, TS)


def test_event_type_as_canal_proto2_reads_it() -> None:
    # Canal's Java CanalEntry is proto2 (protocol/.../CanalEntry.java:3427, "optional EventType
    # eventType [default = UPDATE]"), and its EventType has no 0: missing, 0 or an unknown number
    # all read as UPDATE (seen from Java with the oracle's "weird" entry below).
    assert event_type(pb.RowChange(eventType=pb.MHEARTBEAT)) == pb.MHEARTBEAT
    assert event_type(pb.RowChange()) == pb.UPDATE
    assert event_type(pb.RowChange(eventType=0)) == pb.UPDATE
    assert event_type(pb.RowChange(eventType=99)) == pb.UPDATE  # type: ignore[arg-type]
    assert event_type_name(pb.DELETE) == "DELETE"
    assert one(rows_entry("shop", "weird", 99, [((), (id_col("1"),))])).type == "UPDATE"


# ------------------------------------------------------------------------ fastjson2's escaping
ESCAPES = [
    # What fastjson2 2.0.31 writes for a string value (seen from Java, see the oracle test below):
    ('a"b\\c/d', b'"a\\"b\\\\c/d"'),
    ("\b\t\n\f\r", b'"\\b\\t\\n\\f\\r"'),
    ("\x00\x01\x0b\x1a\x1f", b'"\\u0000\\u0001\\u000b\\u001a\\u001f"'),
    ("\x7f\x80\x9f", "\x7f\x80\x9f".encode()),
    ("\u2028\u2029\ufeff", '"\u2028\u2029\ufeff"'.encode()),
    ("中文😀é", '"中文😀é"'.encode()),
    ("\ud800x\udc00", b'"?x?"'),
    ("\ud83d\ude00", '"😀"'.encode()),
]


@pytest.mark.parametrize(("value", "expected"), ESCAPES)
def test_string_escaping(value: str, expected: bytes) -> None:
    msg = FlatMessage(id=1, table=value)
    if expected.startswith(b'"'):
        assert b'"table":' + expected + b"," in msg.to_json()
    else:
        assert b'"table":"' + expected + b'",' in msg.to_json()


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)  # no lone surrogates: ESCAPES has those


@settings(max_examples=500, deadline=None)
@given(_TEXT, _TEXT, st.integers(-(2**63), 2**63 - 1))
def test_orjson_writes_the_stdlib_encoders_bytes(key: str, value: str, number: int) -> None:
    # The stdlib's compact non-ASCII encoder wrote these messages before orjson: the oracle.
    msg = FlatMessage(id=number, table=value, data=[{key: value, "n": None}], sql_type={key: 4})
    expected = json.dumps(msg.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
    assert msg.to_json() == expected
    assert FlatMessage.from_json(expected) == msg


def test_from_json_round_trip() -> None:
    entry = rows_entry("shop", "orders", pb.INSERT, [((), (id_col("1"), name_col(None)))])
    msg = one(entry)
    assert FlatMessage.from_json(msg.to_json()) == msg
    assert json.loads(msg.to_json())["data"] == [{"id": "1", "name": None}]


# ------------------------------------------------------------------------ against Canal itself
@pytest.fixture(scope="module")
def flat_oracle() -> dict[str, str]:
    names = list(FLAT_CASES)
    lines = canal_oracle(
        [oracle_case(sample(), 11, raw, True, **FLAT_CASES[n]) for n in names for raw in (True, False)]
    )
    return {
        f"{n}-{raw}": line
        for (n, raw), line in zip([(n, r) for n in names for r in (True, False)], lines, strict=True)
    }


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "parsed"])
@pytest.mark.parametrize("case", list(FLAT_CASES))
def test_flat_records_equal_canal(flat_oracle: dict[str, str], case: str, raw: bool) -> None:
    expected = flat_oracle[f"{case}-{raw}"]
    assert expected.startswith("OK"), expected
    got = pycanal_records(sample(), 11, raw, True, **FLAT_CASES[case])
    assert decode(got) == decode(expected)
    assert got == expected
