"""The ``canal.instance.filter.*`` keys beyond the table regexes, from a conf dir to the entries an
embedded client gets (private MariaDB): row kinds, query kinds, columns, transaction entries."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pycanal.deployer.controller import Deployer
from pycanal.meta import ClientIdentity
from pycanal.parse.eventfilter import EventFilters, FieldFilter, FieldFilterError
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=47) as server:
        yield server


def run_workload(db: PrivateMariaDB, table: str) -> tuple[str, int]:
    db.execute(f"CREATE TABLE pycanal.{table} (id INT PRIMARY KEY, v VARCHAR(20), secret VARCHAR(20))")
    start = db.current_binlog()
    db.execute(f"INSERT INTO pycanal.{table} VALUES (1, 'a', 's1'), (2, 'b', 's2')")
    db.execute(f"UPDATE pycanal.{table} SET v = 'bb' WHERE id = 2")
    db.execute(f"DELETE FROM pycanal.{table} WHERE id = 1")
    db.execute(f"ALTER TABLE pycanal.{table} ADD COLUMN w INT")
    db.execute(f"INSERT INTO pycanal.{table} VALUES (3, 'c', 's3', 7)")
    db.execute(f"GRANT SELECT ON pycanal.* TO '{db.repl_user}'@'127.0.0.1'")  # a DCL query entry
    db.execute(f"INSERT INTO pycanal.{table} VALUES (4, 'd', 's4', 8)")  # the end, without DDL
    db.execute(f"ALTER TABLE pycanal.{table} COMMENT = 'end'")  # the end, without rows
    return start


def _is_end(e: pb.Entry, until_row: bool) -> bool:
    if until_row:
        return _ids(e) == [4]
    return e.entryType == pb.ROWDATA and e.header.eventType == pb.ALTER and "'end'" in _change(e).sql


def collect(
    db: PrivateMariaDB, tmp: Path, table: str, start: tuple[str, int], until_row: bool = False, **keys: str
) -> list[pb.Entry]:
    """Every entry an embedded client gets until the workload's end (see ``_is_end``)."""
    root = tmp / "conf"
    (root / "f").mkdir(parents=True)
    (root / "canal.properties").write_text(
        f"canal.destinations = f\ncanal.conf.dir = .\ncanal.auto.scan = false\ncanal.file.data.dir = {tmp}/data\n"
    )
    props = {
        "canal.instance.master.address": f"{db.host}:{db.port}",
        "canal.instance.master.journal.name": start[0],
        "canal.instance.master.position": str(start[1]),
        "canal.instance.dbUsername": db.repl_user,
        "canal.instance.dbPassword": db.repl_password,
        "canal.instance.filter.regex": f"pycanal\\\\.{table}",
        **keys,
    }
    (root / "f" / "instance.properties").write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    entries: list[pb.Entry] = []
    with Deployer(root) as deployer:
        server = deployer.server
        client = ClientIdentity("f", 1001, "")
        server.subscribe(client)
        deadline = time.monotonic() + 30
        while not any(_is_end(e, until_row) for e in entries):
            assert time.monotonic() < deadline, f"no end marker; got {len(entries)} entries"
            msg = server.get(client, 100, timeout=0.2)
            entries += msg.parsed_entries()
    return entries


def _change(e: pb.Entry) -> pb.RowChange:
    return pb.RowChange.FromString(e.storeValue)


def _ids(e: pb.Entry) -> list[int]:
    if e.entryType != pb.ROWDATA or e.header.eventType != pb.INSERT:
        return []
    return [int(c.value) for r in _change(e).rowDatas for c in r.afterColumns if c.name == "id"]


def kinds(entries: list[pb.Entry]) -> list[str]:
    out = []
    for e in entries:
        if e.entryType == pb.ROWDATA:
            out.append(pb.EventType.Name(e.header.eventType))
        elif e.entryType in (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND):
            out.append(pb.EntryType.Name(e.entryType))
    return out


def test_no_filter_baseline(db: PrivateMariaDB, tmp_path: Path) -> None:
    start = run_workload(db, "f_base")
    rows = [k for k in kinds(collect(db, tmp_path, "f_base", start)) if not k.startswith("TRANSACTION")]
    # each rows event comes after its SQL (ANNOTATE_ROWS: a QUERY entry); GRANT has no table: a
    # QUERY entry that passes the table filter
    assert rows == ["QUERY", "INSERT", "QUERY", "UPDATE", "QUERY", "DELETE", "ALTER"] + [
        "QUERY",
        "INSERT",
        "QUERY",
        "QUERY",
        "INSERT",
        "ALTER",
    ]


def test_dml_kind_filters(db: PrivateMariaDB, tmp_path: Path) -> None:
    start = run_workload(db, "f_dml")
    entries = collect(
        db,
        tmp_path,
        "f_dml",
        start,
        **{"canal.instance.filter.dml.update": "true", "canal.instance.filter.dml.delete": "true"},
    )
    rows = [k for k in kinds(entries) if not k.startswith("TRANSACTION")]
    assert rows == [
        "QUERY",
        "INSERT",
        "QUERY",
        "QUERY",
        "ALTER",
        "QUERY",
        "INSERT",
        "QUERY",
        "QUERY",
        "INSERT",
        "ALTER",
    ]


def test_query_filters(db: PrivateMariaDB, tmp_path: Path) -> None:
    start = run_workload(db, "f_query")
    entries = collect(
        db,
        tmp_path,
        "f_query",
        start,
        until_row=True,
        **{
            "canal.instance.filter.query.ddl": "true",
            "canal.instance.filter.query.dcl": "true",
            "canal.instance.filter.query.dml": "true",
        },
    )
    rows = [k for k in kinds(entries) if not k.startswith("TRANSACTION")]
    assert rows == ["INSERT", "UPDATE", "DELETE", "INSERT", "INSERT"]
    # the dropped ALTER still reached the schema history: the row after it has the new column
    after = [e for e in entries if _ids(e) == [3]][0]
    assert [c.name for c in _change(after).rowDatas[0].afterColumns] == ["id", "v", "secret", "w"]


def test_field_filters(db: PrivateMariaDB, tmp_path: Path) -> None:
    start = run_workload(db, "f_field")
    entries = collect(
        db,
        tmp_path,
        "f_field",
        start,
        **{
            "canal.instance.filter.field": "pycanal.f_field:id/V/secret/w",
            "canal.instance.filter.black.field": "PYCANAL.F_FIELD:secret",
        },
    )
    changes = [
        _change(e)
        for e in entries
        if e.entryType == pb.ROWDATA and e.header.eventType in (pb.INSERT, pb.UPDATE, pb.DELETE)
    ]
    images = [
        [(c.index, c.name) for c in image]
        for ch in changes
        for r in ch.rowDatas
        for image in (r.beforeColumns, r.afterColumns)
        if len(image)
    ]
    assert images[0] == [(0, "id"), (1, "v")]  # INSERT 1
    assert [(0, "id"), (1, "v"), (3, "w")] in images  # after the ALTER: the new column kept
    assert all("secret" not in [n for _, n in img] for img in images)


def test_rows_and_transaction_entry_filters(db: PrivateMariaDB, tmp_path: Path) -> None:
    start = run_workload(db, "f_rows")
    entries = collect(
        db,
        tmp_path,
        "f_rows",
        start,
        **{"canal.instance.filter.rows": "true", "canal.instance.filter.transaction.entry": "true"},
    )
    ks = kinds(entries)
    # the first boundary passes (the cursor must move), the ones within 5 s of it do not
    assert 1 <= sum(k.startswith("TRANSACTION") for k in ks) <= 2
    assert [k for k in ks if not k.startswith("TRANSACTION")] == ["QUERY"] * 3 + ["ALTER"] + ["QUERY"] * 3 + [
        "ALTER"
    ]


def test_filter_values() -> None:
    f = EventFilters.from_settings({"rows": True})
    assert f.drops_rows("INSERT") and f.drops_rows("DELETE")
    f = EventFilters.from_settings({"dml.insert": True, "query.dml": True})
    assert f.drops_rows("INSERT") and not f.drops_rows("UPDATE")
    assert f.drops_query(pb.INSERT) and not f.drops_query(pb.ALTER) and not f.drops_query(pb.QUERY)
    # LogEventConvert.parseQueryEvent: filterQueryDdl drops every entry of a QUERY event ...
    f = EventFilters.from_settings({"query.ddl": True})
    assert all(f.drops_query(t) for t in (pb.INSERT, pb.ALTER, pb.QUERY))
    # ... processFilter: filterQueryDcl drops the QUERY type (database statements included), no DDL.
    f = EventFilters.from_settings({"query.dcl": True})
    assert f.drops_query(pb.QUERY) and not f.drops_query(pb.CREATE) and not f.drops_query(pb.UPDATE)
    # LEC:222-239: XA COMMIT / ROLLBACK entries are built before any filter is looked at (seen
    # against Canal 1.1.7, tests/test_canal_reference.py).
    for settings in ({"query.ddl": True}, {"query.dcl": True}, {"query.dml": True}):
        f = EventFilters.from_settings(settings)
        assert not f.drops_query(pb.XACOMMIT) and not f.drops_query(pb.XAROLLBACK)
    with pytest.raises(FieldFilterError, match="canal.instance.filter.field: 'shop' is not"):
        FieldFilter("shop")
    with pytest.raises(FieldFilterError, match="black.field: 'a.b:' names no column"):
        FieldFilter("", "a.b:")
    assert not FieldFilter("", "")


def _event(cls, pos: int, **fields):
    return cls(0, 1700000000, 1, 40, pos + 40, 0, pos, "bin.000001", **fields)


def test_query_filters_on_events_without_a_table() -> None:
    """Canal's LogEventConvert: USER_VAR/INTVAR/RAND entries go only under ``filter.query.dml``;
    a DDL naming several tables passes when any does (the Header names the first)."""
    from pycanal.binlog import events as ev
    from pycanal.parse.filter import TableFilter
    from pycanal.parse.logevent import LogEventConvert
    from pycanal.parse.rawentry import RawEntryConverter

    variables = [
        _event(ev.IntvarEvent, 100, kind=2, value=7),
        _event(ev.RandEvent, 200, seed1=1, seed2=2),
        _event(ev.UserVarEvent, 300, name="v", is_null=False, value_type=2, value=5),
    ]
    drop = _event(ev.QueryEvent, 400, schema="skip", query="DROP TABLE skip.a, keep.b")

    def entries(settings: dict[str, bool], event) -> list[pb.Entry]:
        convert = LogEventConvert(
            RawEntryConverter(), TableFilter(r"keep\..*"), EventFilters.from_settings(settings), None, print
        )
        return [pb.Entry.FromString(r.raw) for r in convert.records(event)]

    for settings, kept in (({"query.dcl": True}, 1), ({"query.ddl": True}, 1), ({"query.dml": True}, 0)):
        assert [len(entries(settings, e)) for e in variables] == [kept] * 3, settings
    (entry,) = entries({}, drop)
    assert (entry.header.schemaName, entry.header.tableName) == ("skip", "a")
    assert entries({}, _event(ev.QueryEvent, 500, schema="skip", query="DROP TABLE skip.a, skip.b")) == []
