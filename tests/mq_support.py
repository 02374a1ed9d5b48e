"""Shared by the pycanal.mq tests: Canal entries built by hand, and the two Java oracles.

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
