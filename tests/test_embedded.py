"""CanalServerWithEmbedded against private MariaDB servers: get_without_ack / ack / rollback,
Canal's errors, several destinations, and a restart resuming from the acked cursor."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from pycanal.instance import CanalInstance
from pycanal.meta import CanalMetaManagerError, ClientIdentity, FileMixedMetaManager, MemoryMetaManager
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition
from pycanal.server import CanalServerError, CanalServerWithEmbedded, Message
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb

ROWS_PER_TXN = 10


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=31) as server:
        yield server


def make_table(db: PrivateMariaDB, name: str) -> EntryPosition:
    db.execute(f"CREATE TABLE pycanal.{name} (id INT PRIMARY KEY, v VARCHAR(40))")
    db.execute(f"CREATE TABLE pycanal.{name}_other (id INT PRIMARY KEY)")
    file, pos = db.current_binlog()
    return EntryPosition(file, pos)


def workload(db: PrivateMariaDB, table: str, start: int, txns: int) -> list[int]:
    conn = db.root_connection("pycanal")
    ids = []
    try:
        with conn.cursor() as cur:
            for t in range(txns):
                rows = [(start + t * ROWS_PER_TXN + i, f"row-{t}-{i}") for i in range(ROWS_PER_TXN)]
                cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows)
                cur.execute(f"INSERT INTO {table}_other VALUES (%s)", (start + t,))  # filtered out
                conn.commit()
                ids += [r[0] for r in rows]
    finally:
        conn.close()
    return ids


def make_instance(db: PrivateMariaDB, dest: str, start: EntryPosition, meta=None, **store) -> CanalInstance:
    store.setdefault("buffer_size", 1024)
    return CanalInstance(
        dest,
        parser={
            "master_address": (db.host, db.port),
            "username": db.repl_user,
            "password": db.repl_password,
            "master_position": start,
            "transaction_size": 256,
            "reconnect_interval": 0.05,
            "max_reconnect_interval": 0.2,
        },
        store=store,
        meta_manager=meta if meta is not None else MemoryMetaManager(),
    )


def row_ids(message: Message, table: str) -> list[int]:
    out = []
    for e in message.parsed_entries():
        if e.entryType != pb.ROWDATA or e.header.tableName != table or e.header.eventType != pb.INSERT:
            continue
        change = pb.RowChange.FromString(e.storeValue)
        for row in change.rowDatas:
            out += [int(c.value) for c in row.afterColumns if c.name == "id"]
    return out


def consume(server, client, table: str, expected: int, *, rollback_every: int = 0, deadline: float = 60.0):
    """get_without_ack with up to 3 outstanding batches; every ``rollback_every``-th round rolls
    back and checks the re-get returns the same entries. Returns the row ids in ack order. No
    batch ever holds a row of ``{table}_other`` (the workload's filtered table)."""
    acked: list[int] = []
    outstanding: list[Message] = []
    rounds = 0
    end = time.monotonic() + deadline
    while len(acked) < expected:
        assert time.monotonic() < end, f"only {len(acked)} of {expected} rows"
        rounds += 1
        msg = server.get_without_ack(client, 50, timeout=0.2)
        if msg.id != -1:
            assert row_ids(msg, f"{table}_other") == []  # the client's filter
            outstanding.append(msg)
            assert server.list_batch_ids(client) == [m.id for m in outstanding]
        if rollback_every and rounds % rollback_every == 0 and outstanding:
            server.rollback(client)
            assert server.list_batch_ids(client) == []
            again: list[bytes] = []
            want = [b for m in outstanding for b in m.entries]
            while len(again) < len(want):
                m = server.get_without_ack(client, 50, timeout=0.2)
                assert m.id != -1
                again += m.entries
                server.ack(client, m.id)
                acked += row_ids(m, table)
            assert again[: len(want)] == want  # the same entries again
            outstanding.clear()
            continue
        if len(outstanding) >= 3 or (msg.id == -1 and outstanding):
            first = outstanding.pop(0)
            server.ack(client, first.id)
            acked += row_ids(first, table)
    return acked


def test_consume_with_acks_and_rollbacks(db: PrivateMariaDB) -> None:
    start = make_table(db, "emb_a")
    server = CanalServerWithEmbedded()
    server.add_instance(make_instance(db, "a", start), lazy=True)
    assert not server.is_start("a")
    client = ClientIdentity("a", 1001, "pycanal\\.emb_a")
    server.subscribe(client)  # lazy start; the client filter replaces the instance's
    assert server.is_start("a")
    try:
        expected = workload(db, "emb_a", 0, 300)
        acked = consume(server, client, "emb_a", len(expected), rollback_every=7)
        assert acked == expected  # every row exactly once, in order
        # After the last row, at most the last transactions' ends: batches end at any entry.
        server.rollback(client)
        while (rest := server.get_without_ack(client, 50, timeout=0.2)).id != -1:
            assert row_ids(rest, "emb_a") == [] and row_ids(rest, "emb_a_other") == []
            server.ack(client, rest.id)
        cursor = server.instance("a").meta_manager.get_cursor(client)
        assert cursor is not None and cursor.postion.journal_name
    finally:
        server.stop()
    assert not server.is_start("a")


def test_a_timed_get_takes_the_end_of_a_backlog_without_waiting_out_its_timeout(db: PrivateMariaDB) -> None:
    """Once the parser has sunk all the source sent, nothing more can fill the batch: the get
    returns what is there instead of waiting its 30 s for 1,000 entries."""
    start = make_table(db, "emb_idle")
    expected = workload(db, "emb_idle", 0, 5)
    server = CanalServerWithEmbedded()
    server.add_instance(make_instance(db, "idle", start))
    client = ClientIdentity("idle", 1001, "pycanal\\.emb_idle")
    server.subscribe(client)
    try:
        for ids in (expected, None):
            ids = ids if ids is not None else workload(db, "emb_idle", 100, 1)  # a later one, alone
            got: list[int] = []
            t0 = time.monotonic()
            while len(got) < len(ids):
                msg = server.get_without_ack(client, 1000, timeout=30)
                assert msg.id != -1
                got += row_ids(msg, "emb_idle")
                server.ack(client, msg.id)
            assert got == ids and time.monotonic() - t0 < 10
    finally:
        server.stop()


def test_errors_and_resubscribe(db: PrivateMariaDB) -> None:
    start = make_table(db, "emb_b")
    server = CanalServerWithEmbedded()
    server.add_instance(make_instance(db, "b", start, batch_mode="ITEMSIZE"), lazy=False)
    client = ClientIdentity("b", 1001, "pycanal\\.emb_b")
    with pytest.raises(CanalServerError, match="should subscribe first"):
        server.get_without_ack(client, 10)
    server.subscribe(client)
    try:
        workload(db, "emb_b", 0, 5)
        time.sleep(0.5)
        m1 = server.get_without_ack(client, 3, timeout=2.0)
        m2 = server.get_without_ack(client, 3, timeout=2.0)
        assert (m1.id, m2.id) == (1, 2) and len(m1) == len(m2) == 3
        assert m1.raw and isinstance(m1.entries[0], bytes)
        with pytest.raises(CanalServerError, match="isn't ack"):
            server.get(client, 3)
        with pytest.raises(CanalMetaManagerError, match="batchId:2 is not the firstly:1"):
            server.ack(client, 2)
        server.ack(client, 1)
        server.ack(client, 2)
        with pytest.raises(CanalServerError, match="batchId:2 is not exist"):
            server.ack(client, 2)
        with pytest.raises(CanalServerError, match="rollback error"):
            server.rollback(client, 9)
        m3 = server.get_without_ack(client, 3, timeout=2.0)
        server.rollback(client, m3.id)
        m4 = server.get_without_ack(client, 3, timeout=2.0)
        assert m4.entries == m3.entries and m4.id == m3.id + 1
        with pytest.raises(CanalServerError, match="isn't ack"):
            server.get(client, 1000, timeout=1.0)
        server.ack(client, m4.id)
        got = server.get(client, 1000, timeout=1.0)  # auto-ack
        assert got.id == m4.id + 1 and server.list_batch_ids(client) == []
        ids = row_ids(got, "emb_b")
        assert ids and ids == list(range(ids[0], ids[0] + len(ids)))
        # unsubscribe / subscribe: the client starts again at the store's first position
        server.unsubscribe(client)
        with pytest.raises(CanalServerError, match="should subscribe first"):
            server.get_without_ack(client, 10)
        server.subscribe(client)
        assert server.get_without_ack(client, 1000, timeout=0.5).id == -1  # cursor: after the last ack
        workload(db, "emb_b", 1000, 1)
        again = server.get_without_ack(client, 1000, timeout=1.0)
        assert again.id == 1 and row_ids(again, "emb_b") == list(range(1000, 1000 + ROWS_PER_TXN))
        # a blocking get (timeout <= 0) of what is there
        server.rollback(client)
        assert server.get_without_ack(client, 1, timeout=0).entries == again.entries[:1]
    finally:
        server.stop()


def test_two_destinations_on_two_servers(db: PrivateMariaDB, mariadb_factory) -> None:
    db2 = mariadb_factory(server_id=32)
    s1 = make_table(db, "emb_c")
    s2 = make_table(db2, "emb_c")
    server = CanalServerWithEmbedded()
    server.add_instance(make_instance(db, "c1", s1))
    server.add_instance(make_instance(db2, "c2", s2))
    c1 = ClientIdentity("c1", 1001, "pycanal\\.emb_c")
    c2 = ClientIdentity("c2", 1002, "pycanal\\.emb_c")
    server.subscribe(c1)
    server.subscribe(c2)
    try:
        e1 = workload(db, "emb_c", 0, 40)
        e2 = workload(db2, "emb_c", 100000, 60)
        assert consume(server, c1, "emb_c", len(e1)) == e1
        assert consume(server, c2, "emb_c", len(e2), rollback_every=5) == e2
        server.stop("c1")
        assert not server.is_start("c1") and server.is_start("c2")
        with pytest.raises(CanalServerError, match="should start first"):
            server.get_without_ack(c1, 10)
    finally:
        server.stop()


def test_restart_resumes_from_acked_cursor(db: PrivateMariaDB, tmp_path) -> None:
    start = make_table(db, "emb_d")
    data_dir = tmp_path / "meta"
    client = ClientIdentity("d", 1001, "pycanal\\.emb_d")

    def new_server() -> CanalServerWithEmbedded:
        server = CanalServerWithEmbedded()
        server.add_instance(make_instance(db, "d", start, meta=FileMixedMetaManager(data_dir, period=0.2)))
        return server

    server = new_server()
    server.subscribe(client)
    expected = workload(db, "emb_d", 0, 200)
    acked: list[int] = []
    acked_entries: list[pb.Entry] = []
    try:
        while len(acked) < len(expected) // 2:
            m = server.get_without_ack(client, 37, timeout=0.5)
            if m.id == -1:
                continue
            server.ack(client, m.id)
            acked += row_ids(m, "emb_d")
            acked_entries += m.parsed_entries()
        unacked = server.get_without_ack(client, 37, timeout=0.5)  # never acked
        assert unacked.id != -1
        cursor = server.instance("d").meta_manager.get_cursor(client)
    finally:
        server.stop()

    # meta.dat holds the cursor, and it names a transaction boundary we received
    doc = json.loads((data_dir / "d" / "meta.dat").read_text())
    saved = doc["clientDatas"][0]["cursor"]["postion"]
    assert (saved["journalName"], saved["position"]) == (cursor.postion.journal_name, cursor.postion.position)
    boundary = [
        e
        for e in acked_entries
        if (e.header.logfileName, e.header.logfileOffset) == (saved["journalName"], saved["position"])
    ]
    assert boundary and boundary[-1].entryType in (pb.TRANSACTIONEND, pb.TRANSACTIONBEGIN)

    server = new_server()
    server.subscribe(client)
    after: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not set(expected) <= set(acked) | set(after):
            assert time.monotonic() < deadline
            m = server.get_without_ack(client, 100, timeout=0.5)
            if m.id != -1:
                server.ack(client, m.id)
                after += row_ids(m, "emb_d")
    finally:
        server.stop()
    # at least once, in order, and duplicates only after the cursor (the unacked batch, or the
    # rest of the transaction the cursor is in)
    assert after == expected[expected.index(after[0]) :]
    dups = set(acked) & set(after)
    cursor_key = (saved["journalName"], saved["position"])
    before_cursor = {
        i
        for e in acked_entries
        if (e.header.logfileName, e.header.logfileOffset) < cursor_key
        for i in row_ids(Message(0, [e], False), "emb_d")
    }
    assert not dups & before_cursor
    assert set(row_ids(unacked, "emb_d")) <= set(after)
