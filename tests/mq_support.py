"""Shared by the pycanal.mq tests: Canal entries built by hand, the two Java oracles, and the
batch and settings both test modules compare with Canal.

The oracles run the machine's ``java`` on ``tests/java/*.java`` (single-file source launch). A
missing ``java`` or missing Canal jars fail the test with what to install; nothing is skipped.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from pycanal.mq import MQDestination, MQOptions, build_records
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb

JAVA_DIR = Path(__file__).resolve().parent / "java"


# ---------------------------------------------------------------------------------- entries
def col(
    name: str,
    value: str | None,
    *,
    index: int = 0,
    sql_type: int = 12,
    mysql_type: str = "varchar(64)",
    key: bool = False,
    updated: bool = False,
) -> pb.Column:
    """A column as Canal's converter writes it: a NULL has ``isNull`` and no value."""
    c = pb.Column(index=index, sqlType=sql_type, name=name, isKey=key, updated=updated, mysqlType=mysql_type)
    if value is None:
        c.isNull = True
    else:
        c.value = value
    return c


def header(
    schema: str, table: str, event: int, *, when: int = 1_700_000_000_000, gtid: str = ""
) -> pb.Header:
    return pb.Header(
        version=1,
        logfileName="mysql-bin.000003",
        logfileOffset=4096,
        serverId=1,
        serverenCode="UTF-8",
        executeTime=when,
        sourceType=pb.MYSQL,
        schemaName=schema,
        tableName=table,
        eventLength=120,
        eventType=event,
        gtid=gtid,
    )


def rows_entry(
    schema: str,
    table: str,
    event: int,
    rows: Iterable[tuple[Sequence[pb.Column], Sequence[pb.Column]]],
    **kw: object,
) -> pb.Entry:
    """A ROWDATA entry; ``rows`` are (before columns, after columns)."""
    change = pb.RowChange(tableId=42, eventType=event, isDdl=False)
    for before, after in rows:
        change.rowDatas.add(beforeColumns=before, afterColumns=after)
    return pb.Entry(
        header=header(schema, table, event, **kw),  # type: ignore[arg-type]
        entryType=pb.ROWDATA,
        storeValue=change.SerializeToString(),
    )


def query_entry(schema: str, table: str, event: int, sql: str, *, ddl: bool, **kw: object) -> pb.Entry:
    """A DDL (``ddl=True``) or a statement-format query entry: SQL and no rows."""
    change = pb.RowChange(eventType=event, isDdl=ddl, sql=sql, ddlSchemaName=schema)
    return pb.Entry(
        header=header(schema, table, event, **kw),  # type: ignore[arg-type]
        entryType=pb.ROWDATA,
        storeValue=change.SerializeToString(),
    )


def tx_entry(begin: bool) -> pb.Entry:
    if begin:
        value = pb.TransactionBegin(threadId=7).SerializeToString()
        kind = pb.TRANSACTIONBEGIN
    else:
        value = pb.TransactionEnd(transactionId="1234").SerializeToString()
        kind = pb.TRANSACTIONEND
    return pb.Entry(header=header("", "", pb.QUERY), entryType=kind, storeValue=value)


def parse_packet(value: bytes) -> tuple[cp.Packet, cp.Messages, list[pb.Entry]]:
    packet = cp.Packet.FromString(value)
    messages = cp.Messages.FromString(packet.body)
    return packet, messages, [pb.Entry.FromString(b) for b in messages.messages]


# ---------------------------------------------------------------------------------- oracles
def java() -> str:
    found = shutil.which("java")
    if not found:
        pytest.fail(
            "java is not on PATH: these tests check pycanal against Java itself "
            "(install a JDK 17+, e.g. openjdk-17-jdk-headless, as scripts/setup.sh does)",
            pytrace=False,
        )
    return found


def _run(args: list[str], stdin: str) -> list[str]:
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}", pytrace=False)
    return proc.stdout.splitlines()


def java_string_hashes(strings: Sequence[str]) -> list[int]:
    """``String.hashCode()`` of each string, computed by Java."""
    stdin = "".join(s.encode("utf-16-be", "surrogatepass").hex() + "\n" for s in strings)
    out = _run([java(), str(JAVA_DIR / "JavaStringHash.java")], stdin)
    assert len(out) == len(strings), out[-5:]
    return [int(line) for line in out]


def canal_lib() -> Path:
    """Canal's jars (connector.core, canal.protocol, fastjson2 ...) as scripts/setup.sh puts them."""
    from pycanal.testing.canal import canal_home

    lib = canal_home() / "lib"
    missing = [
        jar
        for jar in ("connector.core-*.jar", "canal.protocol-*.jar", "fastjson2-*.jar")
        if not any(lib.glob(jar))
    ]
    if missing:
        pytest.fail(
            f"Canal's jars {missing} are not in {lib}: run scripts/setup.sh (mvn copies them there) "
            "or point PYCANAL_CANAL_HOME at a directory with lib/",
            pytrace=False,
        )
    return lib


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def canal_oracle(cases: Sequence[Sequence[object]]) -> list[str]:
    """Run ``CanalMqOracle.java`` over tab-joined cases; one result line per case."""
    stdin = "".join("\t".join(str(f) for f in case) + "\n" for case in cases)
    out = _run([java(), "-cp", f"{canal_lib()}/*", str(JAVA_DIR / "CanalMqOracle.java")], stdin)
    assert len(out) == len(cases), out[-5:]
    return out


# ---------------------------------------------------------------------------------- shared cases
TS = 1_700_000_000_123
WHEN = 1_700_000_000_000


def id_col(v: str, **kw: object) -> pb.Column:
    return col("id", v, index=0, sql_type=4, mysql_type="int(11)", key=True, **kw)  # type: ignore[arg-type]


def name_col(v: str | None, **kw: object) -> pb.Column:
    return col("name", v, index=1, **kw)  # type: ignore[arg-type]


def amount_col(v: str | None, **kw: object) -> pb.Column:
    return col("amount", v, index=2, sql_type=3, mysql_type="decimal(10,2)", **kw)  # type: ignore[arg-type]


def sample() -> list[pb.Entry]:
    odd = 'q"\\/\b\t\n\x01\x7f\u2028中文😀'
    return [
        tx_entry(True),
        rows_entry(
            "shop",
            "orders",
            pb.INSERT,
            [
                (
                    (),
                    (
                        id_col(str(i)),
                        name_col(odd if i % 2 else f"n{i}"),
                        amount_col(None if i % 3 else "1.5"),
                    ),
                )
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
                    (id_col("1"), name_col("a"), amount_col("1.00")),
                    (id_col("1"), name_col("b", updated=True), amount_col("1.00")),
                ),
                (
                    (id_col("2"), name_col("x"), amount_col(None)),
                    (id_col("2"), name_col("x"), amount_col("2", updated=True)),
                ),
                (
                    (id_col("3"), name_col(None), amount_col("0")),
                    (id_col("30", updated=True), name_col("y", updated=True), amount_col("0")),
                ),
            ],
        ),
        rows_entry("shop", "orders", pb.DELETE, [((id_col("5"), name_col("gone"), amount_col("3.00")), ())]),
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
            "shop",
            "orders",
            pb.UPDATE,
            [((id_col("1"),), ()), ((id_col("2"),), (id_col("3", updated=True),))],
        ),
        rows_entry("shop", "weird", 99, [((), (id_col("1"),))]),
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
