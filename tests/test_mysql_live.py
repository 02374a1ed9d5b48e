"""ReplicaConnection against a private MariaDB: login (TCP, TLS, auth switch), dumps, rotation,
heartbeats, GTID resume, >16 MB events, errno 1236, KILL on close and the dead-source timeout."""

from __future__ import annotations

import hashlib
import os
import signal
import ssl
import threading
import time

import pymysql
import pytest

from pycanal.binlog.constants import LOG_EVENT_ARTIFICIAL_F
from pycanal.binlog.constants import EventType as E
from pycanal.mysql import (
    AuthError,
    BinlogPurgedError,
    ReplicaConnection,
    ReplicaTimeoutError,
    TLSError,
    control,
    tls_context,
)
from tls_support import make_certs

pytestmark = pytest.mark.mariadb

# SHOW BINLOG EVENTS names of the event types a MariaDB ROW binlog holds.
SHOW_NAMES = {
    E.FORMAT_DESCRIPTION: "Format_desc",
    E.MARIADB_GTID_LIST: "Gtid_list",
    E.MARIADB_BINLOG_CHECKPOINT: "Binlog_checkpoint",
    E.MARIADB_GTID: "Gtid",
    E.QUERY: "Query",
    E.MARIADB_ANNOTATE_ROWS: "Annotate_rows",
    E.TABLE_MAP: "Table_map",
    E.WRITE_ROWS_V1: "Write_rows_v1",
    E.UPDATE_ROWS_V1: "Update_rows_v1",
    E.DELETE_ROWS_V1: "Delete_rows_v1",
    E.XID: "Xid",
    E.ROTATE: "Rotate",
    E.STOP: "Stop",
}


def replica(db, **kwargs) -> ReplicaConnection:
    params = {"heartbeat_period": 1.0, **kwargs}
    return ReplicaConnection(db.host, db.port, db.repl_user, db.repl_password, **params)


def read_until(events, pred, timeout: float = 20.0):
    """Events up to and including the first one matching ``pred``."""
    deadline = time.monotonic() + timeout
    seen = []
    for ev in events:
        seen.append(ev)
        if pred(ev):
            return seen
        assert time.monotonic() < deadline, (
            f"no matching event in {timeout}s; saw {[e.type_name for e in seen]}"
        )
    raise AssertionError(f"stream ended first; saw {[e.type_name for e in seen]}")


def dump_threads(db) -> dict[int, str]:
    return {row[0]: row[1] for row in db.query("SHOW PROCESSLIST") if row[4] == "Binlog Dump"}


# ------------------------------------------------------------------------------------------ login
def test_login_native_password_and_session_queries(mariadb):
    with replica(mariadb) as conn:
        assert conn.is_mariadb
        assert conn.handshake.auth_plugin == "mysql_native_password"
        assert conn.authenticator.plugins_used == ["mysql_native_password"]
        assert conn.server_version.startswith(mariadb.version.split("-")[0])
        assert not conn.tls
        result = conn.query("SELECT CURRENT_USER(), CONNECTION_ID(), NULL")
        user, cid, null = result.rows[0]
        assert user == b"repl@127.0.0.1"
        assert int(cid) == conn.connection_id
        assert null is None
        conn.setup_session()
        rows = conn.query(
            "SELECT @master_binlog_checksum, @mariadb_slave_capability, @master_heartbeat_period"
        )
        assert rows.rows == [(b"CRC32", b"4", b"1000000000")]
        assert conn.query("SELECT @@session.wait_timeout, @@session.net_read_timeout").rows == [
            (b"9999999", b"7200")
        ]


def test_login_wrong_password(mariadb):
    with pytest.raises(AuthError) as info:
        ReplicaConnection(mariadb.host, mariadb.port, mariadb.repl_user, "wrong").connect()
    assert info.value.errno == 1045


def test_auth_switch_live(mariadb):
    # Answer the handshake as a MySQL 8 client would (caching_sha2_password): MariaDB switches to the
    # account's plugin with an auth switch request.
    with replica(mariadb, auth_plugin="caching_sha2_password") as conn:
        assert conn.authenticator.plugins_used == ["caching_sha2_password", "mysql_native_password"]
        assert conn.query("SELECT 1").rows == [(b"1",)]


def test_control_helpers(mariadb):
    with mariadb.repl_connection() as ctl:
        assert control.is_mariadb(ctl)
        status = control.show_master_status(ctl)
        assert (status.file, status.position) == mariadb.current_binlog()
        logs = control.show_binary_logs(ctl)
        assert logs[-1][0] == status.file
        assert control.binlog_checksum(ctl) == "CRC32"
        assert control.server_id(ctl) == mariadb.server_id
        assert control.server_uuid(ctl) is None
        assert control.gtid_binlog_pos(ctl) == mariadb.query("SELECT @@global.gtid_binlog_pos")[0][0]


# ------------------------------------------------------------------------------------------ TLS
def test_login_and_dump_over_tls(mariadb_factory, tmp_path):
    certs = make_certs(tmp_path)
    ca = certs.ca
    db = mariadb_factory(extra_args=certs.server_args())
    with db.root_connection() as root, root.cursor() as cur:
        cur.execute("CREATE USER 'tlsrepl'@'127.0.0.1' IDENTIFIED BY 'tlspw' REQUIRE SSL")
        cur.execute("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'tlsrepl'@'127.0.0.1'")
    db.execute("CREATE TABLE pycanal.tls_t (id INT PRIMARY KEY, v VARCHAR(20))")
    db.execute("INSERT INTO pycanal.tls_t VALUES (1, 'over tls')")
    file = db.binlog_files()[0].name

    # The account requires TLS: a plain login is refused.
    with pytest.raises(AuthError) as info:
        ReplicaConnection(db.host, db.port, "tlsrepl", "tlspw").connect()
    assert info.value.errno == 1045

    for ctx in (True, tls_context(verify=True, cafile=str(ca))):
        with ReplicaConnection(db.host, db.port, "tlsrepl", "tlspw", ssl=ctx, heartbeat_period=1) as conn:
            assert conn.tls
            cipher = conn.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'").rows[0][1]
            assert cipher
            conn.dump(file, 4, non_blocking=True)
            rows = [ev.rows for ev in conn.events() if ev.type == E.WRITE_ROWS_V1]
            assert rows == [[(1, "over tls")]]
            assert conn.end_of_stream

    # A context that does not trust the server's CA fails the TLS handshake.
    with pytest.raises(TLSError, match="(?i)certificate"):
        ReplicaConnection(db.host, db.port, "tlsrepl", "tlspw", ssl=ssl.create_default_context()).connect()


# ------------------------------------------------------------------------------------------ dumps
def test_dump_from_4_matches_show_binlog_events(mariadb):
    first = mariadb.flush_binary_logs().name
    mariadb.execute(
        "CREATE TABLE pycanal.live_cmp (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), b BLOB, j JSON)"
    )
    with mariadb.root_connection("pycanal") as c, c.cursor() as cur:
        for i in range(20):
            cur.execute(
                "INSERT INTO live_cmp VALUES (%s, %s, %s, %s, %s)", (i, f"v{i}", i / 4, b"\x00" * i, "[1]")
            )
        c.begin()
        cur.execute("UPDATE live_cmp SET v = CONCAT(v, '!') WHERE id < 10")
        cur.execute("DELETE FROM live_cmp WHERE id >= 15")
        c.commit()
    mariadb.flush_binary_logs()
    mariadb.execute("INSERT INTO pycanal.live_cmp VALUES (100, 'second file', 1, NULL, NULL)")
    mariadb.wait_for_binlog_checkpoint()

    got: dict[str, list[tuple[int, str, int]]] = {}
    nrows = 0
    with replica(mariadb) as conn:
        conn.dump(first, 4, non_blocking=True)
        for ev in conn.events():
            if ev.flags & LOG_EVENT_ARTIFICIAL_F:
                assert ev.type == E.ROTATE and ev.next_pos == 0
                assert conn.position.file == ev.next_file and conn.position.position == 4
                continue
            got.setdefault(ev.file, []).append((ev.pos, SHOW_NAMES[ev.type], ev.next_pos))
            assert conn.position.position == ev.next_pos or ev.type == E.ROTATE
            if ev.type in (E.WRITE_ROWS_V1, E.UPDATE_ROWS_V1, E.DELETE_ROWS_V1):
                nrows += len(ev.rows)
        end = conn.position
    assert conn.end_of_stream
    status = mariadb.current_binlog()
    assert (end.file, end.position) == status
    files = [p.name for p in mariadb.binlog_files()]
    files = files[files.index(first) :]
    assert list(got) == files
    for name in files:
        expected = [(r[1], r[2], r[4]) for r in mariadb.query(f"SHOW BINLOG EVENTS IN '{name}'")]
        assert got[name] == expected
    assert nrows == 20 + 10 + 5 + 1


def test_flush_binary_logs_mid_stream(mariadb):
    mariadb.execute("CREATE TABLE IF NOT EXISTS pycanal.live_rot (id INT PRIMARY KEY)")
    file, pos = mariadb.current_binlog()
    with replica(mariadb) as conn:
        conn.dump(file, pos)
        events = conn.events()
        mariadb.execute("INSERT INTO pycanal.live_rot VALUES (1)")
        read_until(events, lambda e: e.type == E.XID)
        assert conn.position.file == file
        new_file = mariadb.flush_binary_logs().name
        mariadb.execute("INSERT INTO pycanal.live_rot VALUES (2)")
        seen = read_until(events, lambda e: e.type == E.XID)
        kinds = [(e.type, e.flags & LOG_EVENT_ARTIFICIAL_F) for e in seen if e.type not in (E.HEARTBEAT,)]
        rotate = next(e for e in seen if e.type == E.ROTATE)
        # The real ROTATE at the end of the old file, then the new file from its FORMAT_DESCRIPTION.
        assert rotate.file == file and rotate.next_file == new_file and rotate.position == 4
        assert not rotate.flags & LOG_EVENT_ARTIFICIAL_F
        fde = next(e for e in seen if e.type == E.FORMAT_DESCRIPTION)
        assert (fde.file, fde.pos) == (new_file, 4)
        assert kinds.index((E.ROTATE, 0)) < kinds.index((E.FORMAT_DESCRIPTION, 0))
        rows = [e for e in seen if e.type == E.WRITE_ROWS_V1]
        assert [r.rows for r in rows] == [[(2,)]] and rows[0].file == new_file
        assert (conn.position.file, conn.position.position) == mariadb.current_binlog()


def test_heartbeats_on_an_idle_server(mariadb):
    file, pos = mariadb.current_binlog()
    with replica(mariadb, heartbeat_period=1.0) as conn:
        conn.dump(file, pos)
        events = conn.events()
        start = time.monotonic()
        beats = []
        for ev in events:
            if ev.type == E.HEARTBEAT:
                beats.append((time.monotonic(), ev, conn.position))
                if len(beats) == 3:
                    break
            assert time.monotonic() - start < 15
        gaps = [b[0] - a[0] for a, b in zip(beats, beats[1:], strict=False)]
        assert all(0.5 < g < 2.5 for g in gaps), gaps
        # A heartbeat names the source's binlog coordinate, which is where the stream stands (a
        # Binlog_checkpoint written late after an earlier FLUSH may have moved it past `pos`).
        for _, ev, at in beats:
            assert (ev.log_file, ev.log_pos) == (at.file, at.position)
            assert at.file == file and at.position >= pos


def test_mariadb_gtid_dump_resumes_after_the_given_gtid(mariadb):
    mariadb.execute("CREATE TABLE IF NOT EXISTS pycanal.live_gtid (id INT PRIMARY KEY)")
    gtids = []
    for i in range(3):
        mariadb.execute(f"INSERT INTO pycanal.live_gtid VALUES ({i})")
        gtids.append(mariadb.query("SELECT @@global.gtid_binlog_pos")[0][0])
    with replica(mariadb) as conn:
        conn.dump_mariadb_gtid(gtids[0], non_blocking=True)
        events = list(conn.events())
    seen_gtids = [e.gtid for e in events if e.type == E.MARIADB_GTID]
    assert seen_gtids == gtids[1:]
    rows = [e.rows for e in events if e.type == E.WRITE_ROWS_V1]
    assert rows == [[(1,)], [(2,)]]
    assert (
        conn.position is not None and (conn.position.file, conn.position.position) == mariadb.current_binlog()
    )
    # The position of the first real event is where the fake GTID_LIST said the stream goes on.
    fake = [e for e in events if e.type == E.MARIADB_GTID_LIST and e.flags & LOG_EVENT_ARTIFICIAL_F]
    first_gtid = next(e for e in events if e.type == E.MARIADB_GTID)
    if fake:
        assert fake[-1].next_pos == first_gtid.pos


def test_event_larger_than_16_mb(mariadb_factory):
    db = mariadb_factory(extra_args=["--max-allowed-packet=256M"])
    db.execute("CREATE TABLE pycanal.big (id INT PRIMARY KEY, b LONGBLOB)")
    file, pos = db.current_binlog()
    blob = hashlib.sha256(b"seed").digest() * (20 * 1024 * 1024 // 32)
    with db.root_connection("pycanal", max_allowed_packet=64 * 1024 * 1024) as c, c.cursor() as cur:
        cur.execute("INSERT INTO big VALUES (1, %s)", (blob,))
    with replica(db, recv_buffer=64 * 1024) as conn:
        conn.dump(file, pos, non_blocking=True)
        events = list(conn.events())
    [rows_event] = [e for e in events if e.type == E.WRITE_ROWS_V1]
    assert rows_event.size > 0xFFFFFF
    [(rid, value)] = rows_event.rows
    assert rid == 1 and len(value) == len(blob) and value == blob
    assert (conn.position.file, conn.position.position) == db.current_binlog()


def test_purged_binlog_gives_errno_1236(mariadb_factory):
    db = mariadb_factory()
    first = db.current_binlog()[0]
    db.execute("CREATE TABLE pycanal.p (id INT PRIMARY KEY)")
    db.flush_binary_logs()
    db.execute("INSERT INTO pycanal.p VALUES (1)")
    last = db.flush_binary_logs().name
    deadline = time.monotonic() + 10
    while first in [p.name for p in db.binlog_files()]:
        db.execute(f"PURGE BINARY LOGS TO '{last}'")
        assert time.monotonic() < deadline, "PURGE BINARY LOGS did not remove the first file"
        time.sleep(0.2)
    for start in (first, "no-such-file.000042"):
        with replica(db) as conn:
            conn.dump(start, 4)
            with pytest.raises(BinlogPurgedError) as info:
                next(conn.events())
        assert info.value.errno == 1236
        assert info.value.sqlstate == "HY000"
        assert "binary log" in info.value.message.lower()
        assert not conn.connected
    # A position past the end of an existing file is errno 1236 as well.
    with replica(db) as conn:
        conn.dump(last, 1 << 30)
        with pytest.raises(BinlogPurgedError):
            next(conn.events())


def test_close_kills_the_dump_thread(mariadb):
    file, pos = mariadb.current_binlog()

    def wait_gone(cid: int, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if cid not in dump_threads(mariadb):
                return True
            time.sleep(0.05)
        return False

    # Without the KILL, a dump thread with no heartbeat to send does not notice the socket is gone.
    conn = replica(mariadb, heartbeat_period=0, kill_on_close=False, report_host="replica-no-kill")
    conn.dump(file, pos)
    assert conn.read_timeout is None
    assert dump_threads(mariadb).get(conn.connection_id) == mariadb.repl_user
    conn.close()
    assert not wait_gone(conn.connection_id, 1.0)
    with mariadb.root_connection() as ctl:
        assert control.kill_connection(ctl, conn.connection_id)
    assert wait_gone(conn.connection_id, 5.0)

    conn = replica(mariadb, heartbeat_period=0, report_host="replica-kill")
    conn.dump(file, pos)
    hosts = {row[0]: row[1] for row in mariadb.query("SHOW SLAVE HOSTS")}
    assert hosts.get(conn.server_id) == "replica-kill"
    assert conn.connection_id in dump_threads(mariadb)
    conn.close()
    assert wait_gone(conn.connection_id, 5.0)
    conn.close()  # idempotent


def test_read_timeout_when_the_source_stops(mariadb_factory):
    db = mariadb_factory()
    file, pos = db.current_binlog()
    conn = replica(db, heartbeat_period=1.0, read_timeout=3.0)
    try:
        conn.dump(file, pos)
        events = conn.events()
        read_until(events, lambda e: e.type == E.HEARTBEAT, timeout=10)
        os.kill(db.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(ReplicaTimeoutError) as info:
                for ev in events:
                    assert ev.type == E.HEARTBEAT
            elapsed = time.monotonic() - start
            assert 2.0 < elapsed < 8.0
            assert isinstance(info.value, TimeoutError)
            assert "dead" in str(info.value)
            # close() tries to KILL the dump thread over a new connection: bounded on a hung source.
            start = time.monotonic()
            conn.close()
            assert time.monotonic() - start < 9.0
            assert not conn.connected
        finally:
            os.kill(db.pid, signal.SIGCONT)
    finally:
        conn.close()


def test_close_from_another_thread_ends_the_stream(mariadb):
    file, pos = mariadb.current_binlog()
    conn = replica(mariadb, heartbeat_period=0)
    conn.dump(file, pos)
    timer = threading.Timer(0.5, conn.close)
    timer.start()
    try:
        start = time.monotonic()
        seen = list(conn.events())  # blocks in recv until close() shuts the socket down
        assert time.monotonic() - start < 10
        assert [e.type for e in seen[:2]] == [E.ROTATE, E.FORMAT_DESCRIPTION]
        assert not conn.connected
    finally:
        timer.join()
    deadline = time.monotonic() + 5
    while conn.connection_id in dump_threads(mariadb):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_default_read_timeout_is_heartbeat_plus_10():
    assert ReplicaConnection("127.0.0.1", 1).read_timeout == 25.0
    assert ReplicaConnection("127.0.0.1", 1, heartbeat_period=1).read_timeout == 11.0
    assert ReplicaConnection("127.0.0.1", 1, heartbeat_period=0).read_timeout is None


def test_control_connection_uses_pymysql(mariadb):
    conn = replica(mariadb)
    with conn.control_connection() as ctl:
        assert isinstance(ctl, pymysql.connections.Connection)
        assert control.show_master_status(ctl).file == mariadb.current_binlog()[0]


def test_resume_from_position_after_reconnect(mariadb):
    mariadb.execute("CREATE TABLE IF NOT EXISTS pycanal.live_resume (id INT PRIMARY KEY)")
    file, pos = mariadb.current_binlog()
    for i in range(3):
        mariadb.execute(f"INSERT INTO pycanal.live_resume VALUES ({i})")
    conn = replica(mariadb)
    conn.dump(file, pos, non_blocking=True)
    first = read_until(conn.events(), lambda e: e.type == E.XID)
    assert [e.rows for e in first if e.type == E.WRITE_ROWS_V1] == [[(0,)]]
    saved = conn.position
    assert saved.position == first[-1].next_pos
    conn.close()
    # Same object: connect again (session and registration redone) and go on from the saved position.
    conn.dump(saved.file, saved.position, non_blocking=True)
    rest = list(conn.events())
    conn.close()
    assert [e.rows for e in rest if e.type == E.WRITE_ROWS_V1] == [[(1,)], [(2,)]]
    real = [e for e in rest if not e.flags & LOG_EVENT_ARTIFICIAL_F and e.type != E.FORMAT_DESCRIPTION]
    assert real[0].pos == saved.position


def test_annotate_rows_only_when_asked(mariadb):
    """MariaDB sends ANNOTATE_ROWS only to a replica that asks (Canal always does; pycanal's parser
    does not when filter.query.dml drops them); positions and rows are the same either way."""
    mariadb.execute("CREATE TABLE IF NOT EXISTS pycanal.live_annotate (id INT PRIMARY KEY)")
    file, pos = mariadb.current_binlog()
    for i in range(3):
        mariadb.execute(f"INSERT INTO pycanal.live_annotate VALUES ({i})")
    streams = {}
    for annotate in (True, False):
        conn = replica(mariadb, annotate_rows=annotate)
        conn.dump(file, pos, non_blocking=True)
        streams[annotate] = list(conn.events())
        conn.close()
    types = {a: [e.type for e in s] for a, s in streams.items()}
    assert types[True].count(E.MARIADB_ANNOTATE_ROWS) == 3 and E.MARIADB_ANNOTATE_ROWS not in types[False]
    kept = [(e.type, e.pos, e.next_pos) for e in streams[True] if e.type != E.MARIADB_ANNOTATE_ROWS]
    assert kept == [(e.type, e.pos, e.next_pos) for e in streams[False]]
    assert [e.rows for e in streams[False] if e.type == E.WRITE_ROWS_V1] == [[(0,)], [(1,)], [(2,)]]
