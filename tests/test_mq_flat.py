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

import base64
import json

import pytest

from mq_support import b64, canal_oracle, col, query_entry, rows_entry, tx_entry
from pycanal.mq import FlatMessage, MQDestination, MQOptions, build_records, flat_messages
from pycanal.mq.flat import event_type, event_type_name
from pycanal.protocol import EntryProtocol_pb2 as pb

TS = 1_700_000_000_123
WHEN = 1_700_000_000_000


def _id(v: str, **kw: object) -> pb.Column:
    return col("id", v, index=0, sql_type=4, mysql_type="int(11)", key=True, **kw)  # type: ignore[arg-type]


def _name(v: str | None, **kw: object) -> pb.Column:
    return col("name", v, index=1, **kw)  # type: ignore[arg-type]


def _amount(v: str | None, **kw: object) -> pb.Column:
    return col("amount", v, index=2, sql_type=3, mysql_type="decimal(10,2)", **kw)  # type: ignore[arg-type]


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
        [((), (_id("1"), _name("a"), _amount(None))), ((), (_id("2"), _name(None), _amount("9.50")))],
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
            ((_id("1"), _name("a"), _amount("1.00")), (_id("1"), _name("b", updated=True), _amount("1.00"))),
            ((_id("2"), _name("x"), _amount(None)), (_id("2"), _name("x"), _amount("2.00", updated=True))),
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
    before = (_id("5"), _name("gone"), _amount("3.00"))
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
        "shop", "orders", pb.UPDATE, [((_id("1"),), ()), ((_id("2"),), (_id("3", updated=True),))]
    )
    msg = one(entry)
    assert msg.data == [{"id": "3"}]
    assert msg.old == [{}, {"id": "2"}]


def test_transaction_entries_dropped() -> None:
    ins = rows_entry("shop", "orders", pb.INSERT, [((), (_id("1"),))])
    msgs = flat_messages([tx_entry(True), ins, tx_entry(False)], 9, TS)  # 360-364
    assert [m.type for m in msgs] == ["INSERT"]


def test_raw_entries_are_parsed() -> None:
    ins = rows_entry("shop", "orders", pb.INSERT, [((), (_id("1"),))])
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
    assert one(rows_entry("shop", "weird", 99, [((), (_id("1"),))])).type == "UPDATE"


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


def test_from_json_round_trip() -> None:
    entry = rows_entry("shop", "orders", pb.INSERT, [((), (_id("1"), _name(None)))])
    msg = one(entry)
    assert FlatMessage.from_json(msg.to_json()) == msg
    assert json.loads(msg.to_json())["data"] == [{"id": "1", "name": None}]


# ------------------------------------------------------------------------ against Canal itself
def _sample() -> list[pb.Entry]:
    odd = 'q"\\/\b\t\n\x01\x7f\u2028中文😀'
    return [
        tx_entry(True),
        rows_entry(
            "shop",
            "orders",
            pb.INSERT,
            [
                ((), (_id(str(i)), _name(odd if i % 2 else f"n{i}"), _amount(None if i % 3 else "1.5")))
                for i in range(6)
            ],
            gtid="0-1-77",
        ),
        rows_entry(
            "shop",
            "orders",
            pb.UPDATE,
            [
                (
                    (_id("1"), _name("a"), _amount("1.00")),
                    (_id("1"), _name("b", updated=True), _amount("1.00")),
                ),
                ((_id("2"), _name("x"), _amount(None)), (_id("2"), _name("x"), _amount("2", updated=True))),
                (
                    (_id("3"), _name(None), _amount("0")),
                    (_id("30", updated=True), _name("y", updated=True), _amount("0")),
                ),
            ],
        ),
        rows_entry("shop", "orders", pb.DELETE, [((_id("5"), _name("gone"), _amount("3.00")), ())]),
        tx_entry(False),
        query_entry("shop", "orders", pb.ALTER, "ALTER TABLE orders ADD c int", ddl=True, when=WHEN + 5),
        query_entry("shop", "", pb.QUERY, "insert into t values (1)", ddl=False),
        query_entry("newdb", "", pb.CREATE, "CREATE DATABASE newdb", ddl=True),
        rows_entry("logs", "events", pb.INSERT, [((), (col("msg", "x"), col("at", None, index=1)))]),
        rows_entry(
            "Shop2",
            "Items",
            pb.INSERT,
            [
                ((), (col("a", f"k{i}", key=True), col("b", "ü" * i, index=1, key=True), col("c", "v")))
                for i in range(5)
            ],
        ),
        rows_entry(
            "shop", "orders", pb.UPDATE, [((_id("1"),), ()), ((_id("2"),), (_id("3", updated=True),))]
        ),
        rows_entry("shop", "weird", 99, [((), (_id("1"),))]),
    ]


FLAT_CASES = {
    "plain": dict(),
    "fixed-partition": dict(partition=2),
    "pk-hash": dict(partitions_num=3, partition_hash="shop\\..*:$pk$,Shop2.Items:$pk$"),
    "pk-hash-no-db": dict(partitions_num=3, partition_hash=".*\\..*:$pk$", database_hash=False),
    "columns": dict(partitions_num=5, partition_hash="shop.orders:name^id,.*\\..*:b"),
    "columns-case": dict(partitions_num=4, partition_hash="SHOP.ORDERS:ID,shop2.items:A"),
    "column-twice": dict(partitions_num=3, partition_hash="shop.orders:id^id,.*\\..*:$pk$"),
    "no-columns": dict(partitions_num=3, partition_hash="shop.orders:"),
    "table-hash": dict(partitions_num=6, partition_hash="shop.orders,shop2\\..*"),
    "unset-count": dict(partition_hash=".*\\..*:$pk$"),
    "dynamic": dict(
        dynamic_topic="shop.orders,topicx:Shop2\\..*,logs",
        dynamic_topic_partition_num="shop_orders:4,topicx:2",
        partition_hash=".*\\..*:$pk$",
        partitions_num=3,
    ),
    "dynamic-schema": dict(dynamic_topic="t1:shop,t2:.*", partition_hash="shop.orders:id", partitions_num=2),
}


def oracle_case(entries: list[pb.Entry], batch_id: int, raw: bool, flat: bool, **kw: object) -> list[object]:
    def opt(v: object) -> object:
        return "-" if v is None else v

    return [
        "records",
        batch_id,
        int(raw),
        int(flat),
        int(bool(kw.get("database_hash", True))),
        int(bool(kw.get("filter_transaction_entry", True))),
        b64(str(kw.get("topic", "example"))),
        opt(kw.get("partition")),
        opt(kw.get("partitions_num")),
        b64(str(kw.get("partition_hash", ""))),
        b64(str(kw.get("dynamic_topic", ""))),
        b64(str(kw.get("dynamic_topic_partition_num", ""))),
        TS,
        ",".join(b64(e.SerializeToString()) for e in entries),
    ]


def pycanal_records(entries: list[pb.Entry], batch_id: int, raw: bool, flat: bool, **kw: object) -> str:
    """pycanal's records in the oracle's text form (topics sorted, send order kept per topic)."""
    dest = MQDestination(
        topic=str(kw.get("topic", "example")),
        partition=kw.get("partition"),  # type: ignore[arg-type]
        partitions_num=kw.get("partitions_num"),  # type: ignore[arg-type]
        partition_hash=kw.get("partition_hash"),  # type: ignore[arg-type]
        dynamic_topic=kw.get("dynamic_topic"),  # type: ignore[arg-type]
        dynamic_topic_partition_num=kw.get("dynamic_topic_partition_num"),  # type: ignore[arg-type]
    )
    options = MQOptions(
        flat_message=flat,
        database_hash=bool(kw.get("database_hash", True)),
        filter_transaction_entry=bool(kw.get("filter_transaction_entry", True)),
    )
    items: list[bytes | pb.Entry] = [e.SerializeToString() for e in entries] if raw else list(entries)
    try:
        records = build_records(batch_id, items, raw, dest, options, TS)
    except Exception as exc:  # compared with the oracle's ERR line
        return f"ERR\t{type(exc).__name__}"
    records = sorted(records, key=lambda r: r.topic)  # stable: send order within a topic
    parts = [
        f"{b64(r.topic)},{r.partition},{'null' if r.value is None else base64.b64encode(r.value).decode()}"
        for r in records
    ]
    return "OK\t" + "\t".join(parts)


def decode(line: str) -> list[tuple[str, int, bytes | None]]:
    out = []
    for item in line.split("\t")[1:]:
        if not item:
            continue
        topic, part, value = item.split(",")
        out.append(
            (
                base64.b64decode(topic).decode(),
                int(part),
                None if value == "null" else base64.b64decode(value),
            )
        )
    return out


@pytest.fixture(scope="module")
def flat_oracle() -> dict[str, str]:
    names = list(FLAT_CASES)
    lines = canal_oracle(
        [oracle_case(_sample(), 11, raw, True, **FLAT_CASES[n]) for n in names for raw in (True, False)]
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
    got = pycanal_records(_sample(), 11, raw, True, **FLAT_CASES[case])
    assert decode(got) == decode(expected)
    assert got == expected
