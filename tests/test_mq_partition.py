"""pycanal.mq partitioning, topics and protobuf records, checked against Canal 1.1.8 and Java.

Rules from Canal 1.1.8 (tag canal-1.1.8, commit 0741ccda), connector/core/.../producer/MQMessageUtils.java:
* partitionHash parsing 36-73 (split on , and ;, last ':' past position 0, ``$pk$`` ignoring case,
  columns split on '^', a name with a regex metacharacter 657-661 is a regex), matching 558-577;
* flat partitioning 465-553: DDL and row-less messages to 0, a table-only rule hashes
  ``table.hashCode()``, else per row ``database.hashCode()`` (if canal.mq.database.hash) XOR each
  listed value's ``hashCode()`` (null as ""), partition ``Math.abs(Math.abs(h) % n)``;
* protobuf partitioning 252-347: per row, XOR of the key columns' or the listed (ignoring case,
  629-637) columns' values; every row an entry of its own;
* dynamic topics 139-188 and 579-627, topic partition counts 102-129 and 639-655; the topic's
  '.' to '_' rename and the partition count fallback: CanalKafkaProducer.java:154, 203-206;
* the protobuf record: CanalMessageSerializerUtil.java:25-85 (raw: batch id, no version; else
  version 1, no batch id); raw entries are Canal's default (deployer canal.properties:39).
The oracle tests run Canal's own classes (tests/java/CanalMqOracle.java) and Java's
String.hashCode (tests/java/JavaStringHash.java) with the machine's ``java``.
"""

from __future__ import annotations

import random

import pytest

from mq_support import (
    FLAT_CASES,
    b64,
    canal_oracle,
    col,
    decode,
    java_string_hashes,
    oracle_case,
    parse_packet,
    pycanal_records,
    query_entry,
    rows_entry,
    sample,
    tx_entry,
)
from pycanal.mq import (
    FlatMessage,
    HashMode,
    MQDestination,
    MQOptions,
    build_records,
    entry_partitions,
    flat_partitions,
    hash_mode,
    hash_partition,
    kafka_properties,
    match_topic,
    string_hash,
    topic_partitions,
)
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.wire import encode_varint as varint
from pycanal.protocol.wire import field_bytes

INT_MIN = -(2**31)


# ------------------------------------------------------------------------ String.hashCode
def _hash_corpus() -> list[str]:
    rng = random.Random(39)
    fixed = [
        "",
        "a",
        "id",
        "hello",
        "polygenelubricants",  # hashCode() == Integer.MIN_VALUE
        "Aa",
        "BB",  # a collision pair
        "shop",
        "12345678901234567890",
        "-1",
        "中文",
        "数据库.表",
        "😀",
        "a😀b",
        "\U0010ffff",
        "\ud800",
        "\udfff",
        "x\ud83dy",
        "é\u0301",
        "\x00\x7f\x80\uffff",
        "x" * 10_000,
    ]
    alphabet = "abcXYZ019 _-.'\"\\é中文😀\U0001f680\u2028\x00"
    randoms = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40))) for _ in range(400)]
    ints = [str(rng.randrange(-(2**63), 2**63)) for _ in range(200)]
    return fixed + randoms + ints


def test_string_hash_equals_java() -> None:
    corpus = _hash_corpus()
    java = java_string_hashes(corpus)
    assert [string_hash(s) for s in corpus] == java
    assert min(java) < 0 < max(java)  # both signs, i.e. int32 overflow, were exercised
    assert string_hash("polygenelubricants") == INT_MIN


def test_string_hash_known_values() -> None:
    assert string_hash("") == 0
    assert string_hash("hello") == 99162322
    assert string_hash("Aa") == string_hash("BB") == 2112


@pytest.mark.parametrize(
    ("h", "n", "expected"),
    [
        (7, 3, 1),
        (-7, 3, 1),
        (0, 5, 0),
        # Math.abs(MIN_VALUE) is MIN_VALUE; MIN_VALUE % 3 == -2 in Java; Math.abs(-2) == 2
        (INT_MIN, 3, 2),
        (INT_MIN, 2, 0),
        (INT_MIN, 7, 2),
        (2**31 - 1, 10, 7),
    ],
)
def test_hash_partition_java_arithmetic(h: int, n: int, expected: int) -> None:
    assert hash_partition(h, n) == expected


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        hash_partition(1, 0)


# ------------------------------------------------------------------------ rules
RULE_NAMES = [
    "shop.orders",
    "SHOP.Orders",
    "shop.items",
    "shop2.items",
    "logs.events",
    "a.b",
    "ab.c",
    "x:y.z",
]
HASH_CONFIGS = [
    "",
    "shop.orders:id",
    "shop.orders:$PK$",
    "shop\\..*:id^name,.*\\..*",
    "shop.orders;shop.items:$pk$",
    "shop\\.(orders|items):a^b",
    "shop.orders:",
    ":id",
    "x:y.z:col",
    " shop.orders:id",
    "shop\\.ord.*,shop.items",
    "a|ab.c:id",
    "SHOP\\.ORDERS:Id",
    "[:",
]
TOPIC_CONFIGS = [
    "shop.orders",
    "shop",
    "shop\\..*",
    ".*",
    "t1:shop\\..*,t2:logs",
    "t1: shop.orders ;t2:.*\\..*",
    " shop.orders",
    "a|ab",
    "SHOP",
    ":shop",
    "shop\\.o.*:x",
]
PARTITION_CONFIGS = ["shop_orders:4,.*:3", "shop.*:x,shop_orders:2", "topic:,t", "t:٣", "T:5", "shop_orders"]
TOPIC_NAMES = ["shop_orders", "shop", "t", "T", "logs"]


def _mode_text(mode: HashMode | None) -> str:
    if mode is None:
        return "null"
    if mode.auto_pk:
        return "auto"
    if mode.table:
        return "table"
    return "cols:" + b64("\n".join(mode.columns))


def _try(fn: object) -> str:
    try:
        return "OK\t" + fn()  # type: ignore[operator]
    except Exception:
        return "ERR"


def _rule_cases() -> list[tuple[list[object], object]]:
    cases: list[tuple[list[object], object]] = []
    for cfg in HASH_CONFIGS:
        for name in RULE_NAMES:
            cases.append(
                (["hashmode", b64(name), b64(cfg)], lambda n=name, c=cfg: _mode_text(hash_mode(n, c)))
            )
    for cfg in TOPIC_CONFIGS:
        for name in [*RULE_NAMES, "shop", "logs", "ab"]:
            # matchDynamicTopic is public in Canal; pycanal's topic match is built on it
            from pycanal.mq import match_dynamic_topic

            cases.append(
                (
                    ["matchdyn", b64(name), b64(cfg)],
                    lambda n=name, c=cfg: str(match_dynamic_topic(n, c)).lower(),
                )
            )
    for cfg in PARTITION_CONFIGS:
        for name in TOPIC_NAMES:
            cases.append(
                (
                    ["topicpn", b64(name), b64(cfg)],
                    lambda n=name, c=cfg: str(topic_partitions(n, c)).replace("None", "null"),
                )
            )
    return cases


@pytest.fixture(scope="module")
def rule_oracle() -> list[str]:
    return canal_oracle([case for case, _ in _rule_cases()])


def test_rules_equal_canal(rule_oracle: list[str]) -> None:
    mismatches = []
    for (case, ours), theirs in zip(_rule_cases(), rule_oracle, strict=True):
        got = _try(ours)
        want = "ERR" if theirs.startswith("ERR") else theirs
        if got != want:
            mismatches.append((case, got, want))
    assert not mismatches, mismatches[:10]
    assert len(rule_oracle) > 250


def test_rules_by_hand() -> None:
    assert hash_mode("shop.orders", "shop.orders:$Pk$") == HashMode(auto_pk=True)
    assert hash_mode("SHOP.ORDERS", "shop.orders:id^name") == HashMode(columns=("id", "name"))
    assert hash_mode("shop.orders", "shop.orders") == HashMode(table=True)
    assert hash_mode("shop.orders", "logs.events:id") is None
    assert hash_mode(":id", ":id") == HashMode(table=True)  # colon at 0: a table named ":id"
    assert hash_mode("shop.orders", "shop.orders:") == HashMode(columns=())
    # matchTopics: "topic:regex" names the topic; a bare name gives the name itself, lower-cased
    assert match_topic("Shop.Orders", "shop.orders") == "shop.orders"
    assert match_topic("shop.orders", "t1:logs,t2:shop\\..*") == "t2"
    assert match_topic("shop", "t1:shop\\..*") is None  # a table regex never matches a schema
    assert match_topic("Shop", ".*") == "shop"
    assert topic_partitions("shop_orders", "shop.*:4") == 4
    assert topic_partitions("shop_orders", "shop.*:x,shop_orders:2") is None  # first match wins


# ------------------------------------------------------------------------ flat partitions
def _flat(rows: list[dict[str, str | None]], old: list[dict[str, str | None]] | None = None) -> FlatMessage:
    return FlatMessage(
        id=5,
        database="shop",
        table="orders",
        pk_names=["id"],
        is_ddl=False,
        type="UPDATE" if old else "INSERT",
        es=1,
        ts=2,
        sql="",
        data=rows,
        old=old,
        gtid="",
    )


def test_flat_partition_by_row_hash() -> None:
    rows: list[dict[str, str | None]] = [{"id": str(i), "name": None} for i in range(8)]
    old: list[dict[str, str | None]] = [{"name": f"o{i}"} for i in range(8)]
    parts = flat_partitions(_flat(rows, old), 3, "shop.orders:$pk$", True)
    for i, row in enumerate(rows):
        p = abs(string_hash("shop") ^ string_hash(row["id"] or "")) % 3
        part = parts[p]
        assert part is not None and part.data is not None and part.old is not None
        assert row in part.data and old[i] in part.old
        assert part.data.index(row) == part.old.index(old[i])  # old stays aligned with data
    # without database.hash only the value counts; null and missing columns hash as ""
    parts = flat_partitions(_flat(rows), 4, "shop.orders:id^name^nope", False)
    assert [r for p in parts if p for r in p.data or ()] == sorted(
        rows, key=lambda r: abs(string_hash(r["id"] or "")) % 4
    )


def test_flat_partition_ddl_table_and_unmatched() -> None:
    ddl = FlatMessage(id=1, database="shop", table="orders", is_ddl=True, sql="ALTER ...")
    assert flat_partitions(ddl, 4, ".*\\..*:$pk$", True)[0] is ddl
    msg = _flat([{"id": "1"}])
    assert flat_partitions(msg, 4, "logs.events:id", True) == [msg, None, None, None]
    table_part = abs(string_hash("orders")) % 5  # table name only, no database
    assert flat_partitions(msg, 5, "shop.orders", True)[table_part] is msg


# ------------------------------------------------------------------------ protobuf records
def _explicit_defaults_entry() -> bytes:
    """An INSERT whose columns carry explicit default fields (``isKey: false``, ``updated:
    false``): Canal's proto2 classes keep those when they re-serialize a split entry."""

    def column(index: int, name: str, value: str, key: bool) -> bytes:
        return b"".join(
            (
                b"\x08" + varint(index),
                b"\x10" + varint(12),
                field_bytes(0x1A, name.encode()),
                b"\x20" + (b"\x01" if key else b"\x00"),
                b"\x28\x00",
                b"\x30\x00",
                field_bytes(0x42, value.encode()),
                field_bytes(0x52, b"varchar(8)"),
            )
        )

    rows = b"".join(
        field_bytes(
            0x62,
            field_bytes(0x12, column(0, "id", str(i), True))
            + field_bytes(0x12, column(1, "v", "x" * i, False)),
        )
        for i in range(5)
    )
    change = b"\x08\x00" + b"\x10" + varint(pb.INSERT) + b"\x50\x00" + field_bytes(0x5A, b"") + rows
    header = pb.Header(version=1, executeTime=5, schemaName="shop", tableName="orders", eventType=pb.INSERT)
    return field_bytes(0x0A, header.SerializeToString()) + b"\x10\x02" + field_bytes(0x1A, change)


def _proto_sample() -> list[pb.Entry]:
    return [e for e in sample() if e.header.tableName != "weird"]


PROTO_CASES = {
    **{k: v for k, v in FLAT_CASES.items()},
    "keep-tx": dict(filter_transaction_entry=False),
    "keep-tx-hash": dict(filter_transaction_entry=False, partition_hash=".*\\..*:$pk$", partitions_num=2),
}


@pytest.fixture(scope="module")
def proto_oracle() -> dict[str, str]:
    cases, keys = [], []
    for name, kw in PROTO_CASES.items():
        for raw in (True, False):
            cases.append(oracle_case(_proto_sample(), 12, raw, False, **kw))
            keys.append(f"{name}-{raw}")
    explicit = [pb.Entry.FromString(_explicit_defaults_entry())]
    for name in ("pk-hash", "columns", "dynamic"):
        cases.append(oracle_case(explicit, 13, True, False, **FLAT_CASES[name]))
        keys.append(f"explicit-{name}")
    return dict(zip(keys, canal_oracle(cases), strict=True))


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "parsed"])
@pytest.mark.parametrize("case", list(PROTO_CASES))
def test_protobuf_records_equal_canal(proto_oracle: dict[str, str], case: str, raw: bool) -> None:
    expected = proto_oracle[f"{case}-{raw}"]
    assert expected.startswith("OK"), expected
    got = pycanal_records(_proto_sample(), 12, raw, False, **PROTO_CASES[case])
    assert decode(got) == decode(expected)


@pytest.mark.parametrize("case", ["pk-hash", "columns", "dynamic"])
def test_split_entries_keep_explicit_default_fields(proto_oracle: dict[str, str], case: str) -> None:
    # Entry.FromString() drops nothing, but a proto3 re-serialization would drop "isKey: false";
    # pycanal cuts the stored bytes instead (pycanal.protocol.wire), as Canal's proto2 output keeps them.
    entry = pb.Entry.FromString(_explicit_defaults_entry())
    store = entry.storeValue
    assert pb.RowChange.FromString(store).SerializeToString() != store  # what a proto3 round trip loses
    expected = proto_oracle[f"explicit-{case}"]
    got = pycanal_records([entry], 13, True, False, **FLAT_CASES[case])
    assert decode(got) == decode(expected)
    assert any(b"\x20\x00" in (value or b"") for _, _, value in decode(got))


def test_raw_packet_shape() -> None:
    # serializer's raw branch (CanalMessageSerializerUtil.java:29-60): type, then Messages with the
    # batch id and the stored entries, transaction entries included; no version field.
    entries = [tx_entry(True), rows_entry("shop", "orders", pb.INSERT, [((), (col("id", "1", key=True),))])]
    raw = [e.SerializeToString() for e in entries]
    (record,) = build_records(77, raw, True, MQDestination(topic="t"), MQOptions(flat_message=False), 0)
    assert record.value is not None
    packet, messages, parsed = parse_packet(record.value)
    assert (packet.type, packet.WhichOneof("version_present"), messages.batch_id) == (cp.MESSAGES, None, 77)
    assert list(messages.messages) == raw
    assert record.value.startswith(b"\x18\x07\x2a")


def test_split_packet_shape() -> None:
    # the builder branch (63-77): version 1, Messages without batch id; begin/end filtered.
    entries = [tx_entry(True), rows_entry("shop", "orders", pb.INSERT, [((), (col("id", "1", key=True),))])]
    dest = MQDestination(topic="t", partitions_num=2, partition_hash="shop.orders:$pk$")
    records = build_records(78, entries, False, dest, MQOptions(flat_message=False), 0)
    ((value,),) = [[r.value for r in records]]
    assert value is not None
    packet, messages, parsed = parse_packet(value)
    assert (packet.version, messages.batch_id, [e.entryType for e in parsed]) == (1, 0, [pb.ROWDATA])


def test_entry_partitions_one_row_per_entry() -> None:
    rows = [((), (col("id", str(i), key=True), col("v", "x"))) for i in range(6)]
    entry = rows_entry("shop", "orders", pb.INSERT, rows)
    parts = entry_partitions([entry], 3, "shop.orders:ID", True)
    ids = []
    for p, items in enumerate(parts):
        for data in items:
            change = pb.RowChange.FromString(pb.Entry.FromString(data).storeValue)
            (row,) = change.rowDatas
            value = row.afterColumns[0].value
            assert abs(string_hash("shop") ^ string_hash(value)) % 3 == p
            ids.append(value)
    assert sorted(ids) == [str(i) for i in range(6)]
    ddl = query_entry("shop", "orders", pb.ALTER, "ALTER TABLE orders ADD c int", ddl=True)
    assert entry_partitions([ddl], 3, ".*\\..*:$pk$", True)[0] == [ddl.SerializeToString()]


def test_missing_topic_is_an_error() -> None:
    entry = rows_entry("shop", "orders", pb.INSERT, [((), (col("id", "1"),))])
    with pytest.raises(ValueError, match="canal.mq.topic"):
        build_records(1, [entry], False, MQDestination(topic=None), MQOptions(), 0)
    with pytest.raises(ValueError, match="canal.mq.topic"):
        build_records(1, [entry], False, MQDestination(topic="", dynamic_topic="logs"), MQOptions(), 0)
    (rec,) = build_records(1, [entry], False, MQDestination(topic="", dynamic_topic="x:shop"), MQOptions(), 0)
    assert rec.topic == "x"
    with pytest.raises(ValueError, match="empty topic"):  # Canal would send to topic ""
        build_records(1, [entry], False, MQDestination(topic="t", dynamic_topic=":shop"), MQOptions(), 0)


# ------------------------------------------------------------------------ Kafka client keys
def test_kafka_properties_legacy_names_and_forced_in_flight() -> None:
    # CanalKafkaProducer.java:85-110 (the <= 1.1.4 names copied over kafka.*), 63 (forced in-flight 1)
    props = kafka_properties(
        {
            "kafka.bootstrap.servers": "a:9092",
            "canal.mq.servers": "b:9092",
            "kafka.acks": "all",
            "canal.mq.lingerMs": "",
            "kafka.linger.ms": "1",
            "kafka.max.in.flight.requests.per.connection": "5",
            "canal.mq.topic": "x",
        }
    )
    assert props == {
        "bootstrap.servers": "b:9092",
        "acks": "all",
        "linger.ms": "1",
        "max.in.flight.requests.per.connection": "1",
    }
