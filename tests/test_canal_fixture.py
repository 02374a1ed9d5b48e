"""The real Alibaba Canal as a test component (pycanal.testing.canal): it starts on the private MariaDB,
serves pycanal's own client, and fails fast and clearly on a bad source or configuration."""

from __future__ import annotations

import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pycanal.client.simple import CanalClientError, SimpleConnector
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing import _process as process_module
from pycanal.testing._process import free_port
from pycanal.testing.canal import CANAL_VERSION, CanalStartError, PrivateCanal

POM = Path(__file__).resolve().parent.parent / "scripts" / "canal" / "pom.xml"


def _changes(conn: SimpleConnector, want: int, timeout: float = 30.0) -> list[tuple[pb.Entry, pb.RowChange]]:
    """Row-change entries (not the statement text Canal sends for MariaDB's ANNOTATE_ROWS) until
    ``want`` rows arrived."""
    out: list[tuple[pb.Entry, pb.RowChange]] = []
    rows = 0
    deadline = time.monotonic() + timeout
    while rows < want:
        assert time.monotonic() < deadline, f"only {rows} of {want} rows from Canal: {out}"
        for entry in conn.get(100, timeout=500).entries:
            if entry.entryType != pb.ROWDATA:
                continue
            change = pb.RowChange.FromString(entry.storeValue)
            if change.isDdl or entry.header.eventType == pb.QUERY:
                continue
            out.append((entry, change))
            rows += len(change.rowDatas)
    return out


def _values(columns: Any) -> dict[str, str | None]:
    return {c.name: None if c.isNull else c.value for c in columns}


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="defaults"),  # file meta, TSDB in H2, no client auth
        pytest.param({"tsdb": False, "meta": "memory", "user": "canal", "passwd": "s3cret"}, id="tsdb-off"),
    ],
)
def test_canal_serves_rows_from_the_current_position(
    mariadb: PrivateMariaDB, canal_factory: Callable[..., PrivateCanal], options: dict[str, Any]
) -> None:
    table = f"canal_fix_{uuid.uuid4().hex[:8]}"
    mariadb.execute(
        f"CREATE TABLE pycanal.{table} (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(8,2), note TEXT)"
    )
    file, pos = mariadb.current_binlog()
    canal = canal_factory(
        destinations={
            "fixture": {
                "filter.regex": rf"pycanal\.{table}",
                "master.journal.name": file,
                "master.position": pos,
            }
        },
        **options,
    )
    assert canal.running and canal.startup_seconds < 60
    assert canal.log_file("fixture").is_file() and canal.log_file().is_file()

    mariadb.execute(
        f"INSERT INTO pycanal.{table} VALUES (1, 'ünï', 12.50, NULL), (2, 'b', -0.05, 'x')",
    )
    mariadb.execute(f"UPDATE pycanal.{table} SET amount = 99.99 WHERE id = 2")
    mariadb.execute(f"DELETE FROM pycanal.{table} WHERE id = 1")

    conn = canal.connector("fixture")
    try:
        conn.subscribe()
        changes = _changes(conn, 4)
    finally:
        conn.disconnect()

    assert [(e.header.schemaName, e.header.tableName) for e, _ in changes] == [("pycanal", table)] * 3
    assert [e.header.eventType for e, _ in changes] == [pb.INSERT, pb.UPDATE, pb.DELETE]
    for entry, _ in changes:
        assert entry.header.logfileName == file and entry.header.logfileOffset >= pos
        assert entry.header.serverId == mariadb.server_id

    inserted = [_values(r.afterColumns) for r in changes[0][1].rowDatas]
    assert inserted == [
        {"id": "1", "name": "ünï", "amount": "12.50", "note": None},
        {"id": "2", "name": "b", "amount": "-0.05", "note": "x"},
    ]
    first = changes[0][1].rowDatas[0].afterColumns
    # With the TSDB Canal takes the type from the DDL it replayed ("INT"), without it from DESC ("int(11)").
    assert [(c.name, c.isKey, c.mysqlType.lower().replace("int(11)", "int")) for c in first] == [
        ("id", True, "int"),
        ("name", False, "varchar(20)"),
        ("amount", False, "decimal(8,2)"),
        ("note", False, "text"),
    ]
    (update,) = changes[1][1].rowDatas
    assert _values(update.beforeColumns)["amount"] == "-0.05"
    assert _values(update.afterColumns)["amount"] == "99.99"
    assert [c.name for c in update.afterColumns if c.updated] == ["amount"]
    (delete,) = changes[2][1].rowDatas
    assert _values(delete.beforeColumns)["id"] == "1" and not delete.afterColumns

    if options.get("user"):
        with pytest.raises(CanalClientError):
            SimpleConnector(canal.address, "fixture", "canal", "wrong", so_timeout=10).connect()

    root = canal.root_dir
    canal.stop()
    assert canal.process is not None and canal.process.returncode is not None
    assert root is not None and not root.exists()


def test_canal_writes_its_conf_dir_from_documented_keys(
    mariadb: PrivateMariaDB, canal_factory: Callable[..., PrivateCanal]
) -> None:
    canal = canal_factory(
        destinations={"a": {"filter.regex": r"pycanal\.nothing_here"}, "b": None},
        instance_properties={"transaction.size": 2048, "filter.query.dml": True},
        canal_properties={"canal.instance.memory.buffer.size": 4096},
        keep=True,
        tsdb=False,
    )
    try:
        assert canal.conf_dir is not None
        names = {str(p.relative_to(canal.conf_dir)) for p in canal.conf_dir.rglob("*") if p.is_file()}
        assert {
            "canal.properties",
            "logback.xml",
            "a/instance.properties",
            "b/instance.properties",
            "spring/base-instance.xml",
            "spring/file-instance.xml",
            "spring/memory-instance.xml",
            "spring/tsdb/h2-tsdb.xml",
        } <= names
        a = (canal.conf_dir / "a" / "instance.properties").read_text()
        # Java properties syntax: Canal reads pycanal\.nothing_here back.
        assert "canal.instance.filter.regex = pycanal\\\\.nothing_here" in a
        assert "canal.instance.transaction.size = 2048" in a and "canal.instance.filter.query.dml = true" in a
        ids = {
            re.search(r"slaveId = (\d+)", (canal.conf_dir / d / "instance.properties").read_text()).group(1)  # type: ignore[union-attr]
            for d in "ab"
        }
        assert len(ids) == 2  # never Canal's host-derived id, which two servers would share
        props = (canal.conf_dir / "canal.properties").read_text()
        assert "canal.destinations = a,b" in props and "canal.instance.memory.buffer.size = 4096" in props
        assert f"canal.port = {canal.port}" in props and "canal.ip = 127.0.0.1" in props
        for d in "ab":
            with canal.connector(d) as conn:
                conn.subscribe()
                assert conn.get(10, timeout=100).id == -1
    finally:
        canal.stop()
        assert canal.root_dir is not None and canal.root_dir.exists()  # keep=True
        shutil.rmtree(canal.root_dir)


def test_wrong_source_address_fails_start_with_canals_error() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(CanalStartError) as info:
        PrivateCanal(f"127.0.0.1:{port}", "repl", "repl", tsdb=False, startup_timeout=60).start()
    assert time.monotonic() - started < 30
    message = str(info.value)
    first = message.splitlines()[0]
    assert f"127.0.0.1:{port}" in first and "Connection refused" in first, message
    assert "example.log" in message  # the tail of Canal's destination log follows


def test_wrong_password_fails_start(mariadb: PrivateMariaDB) -> None:
    with pytest.raises(CanalStartError, match=r"Access denied for user 'repl'"):
        PrivateCanal(f"127.0.0.1:{mariadb.port}", "repl", "not-the-password", tsdb=False).start()


def test_canal_user_without_password_is_refused() -> None:
    """1.1.8's rule (Canal issue #4941), kept by the launcher: a client user needs a password."""
    with pytest.raises(CanalStartError, match=r"canal\.passwd is empty"):
        PrivateCanal("127.0.0.1:1", user="canal", passwd=None, tsdb=False).start()


def test_pom_pins_the_version_the_fixture_names() -> None:
    assert f"<canal.version>{CANAL_VERSION}</canal.version>" in POM.read_text()


def test_port_clash_is_retried_on_another_port(
    mariadb: PrivateMariaDB, canal_factory: Callable[..., PrivateCanal], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = iter([taken, free_port()])
        monkeypatch.setattr(process_module, "free_port", lambda: next(ports))
        canal = canal_factory(tsdb=False)
        assert canal.port != taken
        with canal.connector() as conn:
            conn.subscribe()
