"""CanalTcpServer and SimpleConnector against a real embedded server over the private MariaDB.

Subscribe / get / ack / rollback over TCP, authentication on and off, what an unauthenticated
connection may do, a long-poll GET next to other connections, client idle timeouts, Canal's
error ACKs (400/401/402) and closes, garbage / truncated / oversized frames, bounded protocol
fuzzing, and that no password, hash or token reaches the logs.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pycanal.client import CanalClientError, SimpleConnector
from pycanal.instance import CanalInstance
from pycanal.meta import MemoryMetaManager
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition
from pycanal.server import CanalServerWithEmbedded, wire
from pycanal.server.tcp import CanalTcpServer
from pycanal.testing import PrivateMariaDB

PT = cp.PacketType
PASSWORD = "s3cret-Pw"
PASSWD_HASH = wire.password_hash(PASSWORD)


@dataclass
class Stack:
    db: PrivateMariaDB
    embedded: CanalServerWithEmbedded
    tcp: CanalTcpServer  # no authentication
    tcp_auth: CanalTcpServer  # canal / PASSWORD

    def destination(self, name: str, **store) -> str:
        """A new destination ``name`` whose instance starts at the current binlog position, and
        its own table ``pycanal.<name>``; subscribe with :func:`table_filter`."""
        self.db.execute(f"CREATE TABLE pycanal.{name} (id INT PRIMARY KEY, v VARCHAR(40))")
        file, pos = self.db.current_binlog()
        instance = CanalInstance(
            name,
            parser={
                "master_address": (self.db.host, self.db.port),
                "username": self.db.repl_user,
                "password": self.db.repl_password,
                "master_position": EntryPosition(file, pos),
                "reconnect_interval": 0.05,
            },
            store={"buffer_size": 1024, **store},
            meta_manager=MemoryMetaManager(),
        )
        self.embedded.add_instance(instance, lazy=True)
        return name

    def insert(self, table: str, ids: range, per_txn: int = 5) -> None:
        conn = self.db.root_connection("pycanal")
        try:
            with conn.cursor() as cur:
                for i in range(ids.start, ids.stop, per_txn):
                    rows = [(j, f"v{j}") for j in range(i, min(i + per_txn, ids.stop))]
                    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows)
                    conn.commit()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def stack(mariadb: PrivateMariaDB) -> Iterator[Stack]:
    embedded = CanalServerWithEmbedded()
    tcp = CanalTcpServer(embedded).start()
    tcp_auth = CanalTcpServer(embedded, user="canal", passwd=PASSWD_HASH).start()
    try:
        yield Stack(mariadb, embedded, tcp, tcp_auth)
    finally:
        tcp.stop()
        tcp_auth.stop()
        embedded.stop()


def table_filter(name: str) -> str:
    return rf"pycanal\.{name}"


def row_ids(entries: list[pb.Entry]) -> list[int]:
    out = []
    for e in entries:
        if e.entryType == pb.ROWDATA and e.header.eventType == pb.INSERT:
            for row in pb.RowChange.FromString(e.storeValue).rowDatas:
                out += [int(c.value) for c in row.afterColumns if c.name == "id"]
    return out


def pull(conn, expected: int, *, ack: bool = True, deadline: float = 30.0) -> tuple[list[int], list]:
    """Rows (ids) and messages until ``expected`` rows came."""
    rows: list[int] = []
    messages = []
    end = time.monotonic() + deadline
    while len(rows) < expected:
        assert time.monotonic() < end, f"only {len(rows)} of {expected} rows"
        message = conn.get_without_ack(100, timeout=200)
        if message.id == -1:
            continue
        messages.append(message)
        rows += row_ids(message.entries)
        if ack:
            conn.ack(message.id)
    return rows, messages


class Raw:
    """A hand-driven connection for frames the client library would never send."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.decoder = wire.FrameDecoder()
        self.frames: list[bytes] = []
        handshake = self.recv()
        assert handshake is not None and handshake.type == PT.HANDSHAKE and handshake.version == 1
        self.seed = wire.parse_body(handshake).seeds
        assert len(self.seed) == 8

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 5.0) -> cp.Packet | None:
        """The next packet; None when the server closed the connection."""
        self.sock.settimeout(timeout)
        while not self.frames:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.frames += self.decoder.feed(data)
        return wire.parse_packet(self.frames.pop(0))

    def ack(self, timeout: float = 5.0) -> tuple[int, str]:
        packet = self.recv(timeout)
        assert packet is not None, "connection closed instead of an ACK"
        assert packet.type == PT.ACK, wire.packet_type_name(packet.type)
        body = wire.parse_body(packet)
        return body.error_code, body.error_message

    def auth(self, user: str = "", password: str = "") -> tuple[int, str]:
        self.send(wire.encode_client_auth(user, wire.auth_token(password, self.seed), 60000, 60000))
        return self.ack()

    def closed(self, timeout: float = 5.0) -> bool:
        return self.recv(timeout) is None

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- the happy paths
def test_subscribe_get_ack_rollback(stack: Stack) -> None:
    dest = stack.destination("tcp_basic")
    stack.insert(dest, range(0, 40))
    with SimpleConnector(stack.tcp.address, dest) as conn:
        conn.subscribe(table_filter(dest))
        rows, _ = pull(conn, 40)
        assert rows == list(range(40))

        stack.insert(dest, range(40, 60))
        _, first = pull(conn, 20, ack=False)
        outstanding = [m.id for m in first]
        assert stack.embedded.list_batch_ids(conn_identity(dest)) == outstanding
        conn.rollback()  # every outstanding batch comes again, same entries
        rows, again = pull(conn, 20, ack=False)
        assert rows == list(range(40, 60))
        assert [e for m in again for e in m.raw_entries] == [e for m in first for e in m.raw_entries]
        for m in again:
            conn.ack(m.id)

        stack.insert(dest, range(60, 65))
        _, (m,) = pull(conn, 5, ack=False)
        conn.rollback(m.id)  # one batch by id
        rows, _ = pull(conn, 5)
        assert rows == list(range(60, 65))
        assert conn.get(100).id == -1  # nothing left, nothing outstanding
        assert stack.embedded.list_batch_ids(conn_identity(dest)) == []
        conn.unsubscribe()
        assert conn.filter is None


def settle(conn: SimpleConnector) -> None:
    """A request with an answer: the server has handled the acks and rollbacks sent before."""
    conn.subscribe(conn.filter or "")


def conn_identity(dest: str):
    from pycanal.meta import ClientIdentity

    return ClientIdentity(dest, 1001)


def test_get_auto_ack_non_raw_store_and_stream(stack: Stack) -> None:
    dest = stack.destination("tcp_stream", raw=False)  # entries serialized by the server
    stack.insert(dest, range(0, 30), per_txn=10)
    with SimpleConnector(stack.tcp.address, dest) as conn:
        conn.subscribe(table_filter(dest))
        got: list[int] = []
        end = time.monotonic() + 30
        while len(got) < 10:
            assert time.monotonic() < end
            message = conn.get(1, timeout=100)  # get = get_without_ack + ack
            got += row_ids(message.entries)
        settle(conn)
        assert stack.embedded.list_batch_ids(conn_identity(dest)) == []

        seen: list[int] = []
        stream = conn.stream(batch_size=3, timeout=200)
        for message in stream:
            seen += row_ids(message.entries)
            if len(got) + len(seen) >= 30:
                # acked so far: every batch but this one, which is still outstanding
                assert stack.embedded.list_batch_ids(conn_identity(dest)) == [message.id]
                break
        stream.close()  # the break rolls the last batch back
        assert got + seen == list(range(30))
        settle(conn)
        assert stack.embedded.list_batch_ids(conn_identity(dest)) == []
        rows, _ = pull(conn, 1)  # handed out again
        assert rows and rows[-1] == 29


def test_reconnect_resubscribes_and_rolls_back(stack: Stack) -> None:
    dest = stack.destination("tcp_reconnect")
    stack.insert(dest, range(0, 10))
    conn = SimpleConnector(stack.tcp.address, dest)
    conn.connect()
    conn.subscribe(table_filter(dest))
    rows, messages = pull(conn, 10, ack=False)
    conn.disconnect()
    assert not conn.connected
    conn.connect()  # subscribes again with the same filter, rolls the unacked batches back
    assert conn.filter == table_filter(dest)
    again, messages2 = pull(conn, 10)
    assert again == rows == list(range(10))
    assert [m.raw_entries for m in messages2] == [m.raw_entries for m in messages]
    conn.disconnect()


# --------------------------------------------------------------------------- authentication
SECRET_RE = re.compile(r"[0-9a-fA-F]{40}")


def test_auth_on_and_off_no_secret_in_logs(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    dest = stack.destination("tcp_auth")
    with SimpleConnector(stack.tcp_auth.address, dest, "canal", PASSWORD) as conn:
        conn.subscribe(table_filter(dest))
        assert conn.get(10).id == -1
    for user, password in [("canal", "wrong"), ("canal", ""), ("other", PASSWORD)]:
        conn = SimpleConnector(stack.tcp_auth.address, dest, user, password)
        with pytest.raises(CanalClientError, match=f"auth failed for user:{user}") as info:
            conn.connect()
        assert info.value.code == 400 and not conn.connected
    # authentication off: any user, any (or no) password
    for user, password in [("", ""), ("anyone", "anything")]:
        with SimpleConnector(stack.tcp.address, dest, user, password) as conn:
            conn.subscribe(table_filter(dest))

    text = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "event=authenticated" in text and "auth failed for user:other" in text
    assert PASSWORD not in text and "anything" not in text
    assert not SECRET_RE.search(text), SECRET_RE.search(text)  # no hash, no token (hex of SHA1s)


def test_auth_failure_keeps_the_connection_and_unauthenticated_requests(stack: Stack) -> None:
    raw = Raw(stack.tcp_auth.port)
    assert raw.auth("canal", "nope") == (400, "auth failed for user:canal")
    assert raw.auth("canal", PASSWORD) == (0, "")  # Canal keeps the channel open: try again
    raw.close()

    for request in (
        wire.encode_sub("tcp_auth", "1001"),
        wire.encode_get("tcp_auth", "1001", 10),
        wire.encode_client_ack("tcp_auth", "1001", 1),
        wire.encode_client_rollback("tcp_auth", "1001"),
        wire.encode_heartbeat(1, 2),
    ):
        raw = Raw(stack.tcp_auth.port)
        raw.send(request)
        code, message = raw.ack()
        assert code == 400 and message.startswith("unexpected packet type: ")
        assert raw.closed()
    # no authentication configured: an empty auth (canal-python's) is enough
    raw = Raw(stack.tcp.port)
    raw.send(wire.encode_client_auth("", b"", 0, 0))
    assert raw.ack() == (0, "")
    raw.close()


def test_subscribe_at_auth_time(stack: Stack) -> None:
    dest = stack.destination("tcp_authsub")
    stack.insert(dest, range(3))
    raw = Raw(stack.tcp.port)
    raw.send(
        wire.encode_client_auth(
            "", b"", 60000, 60000, destination=dest, client_id="7", filter=table_filter(dest)
        )
    )
    assert raw.ack() == (0, "")
    ids: list[int] = []
    end = time.monotonic() + 30
    while len(ids) < 3:
        assert time.monotonic() < end
        raw.send(wire.encode_get(dest, "7", 100, 100))
        messages = wire.parse_body(raw.recv())
        ids += row_ids([pb.Entry.FromString(m) for m in messages.messages])
    assert ids == [0, 1, 2]
    raw.close()


# --------------------------------------------------------------------------- concurrency, idle
def test_long_poll_does_not_block_other_connections(stack: Stack) -> None:
    quiet = stack.destination("tcp_quiet")
    busy = stack.destination("tcp_busy")
    poller = SimpleConnector(stack.tcp.address, quiet)
    poller.connect()
    poller.subscribe(table_filter(quiet))
    result: dict[str, object] = {}
    timed_done = threading.Event()

    def long_poll() -> None:
        t = time.monotonic()
        result["timed"] = poller.get_without_ack(100, timeout=3, unit="s").id
        result["timed_s"] = time.monotonic() - t
        timed_done.set()
        result["blocking"] = poller.get_without_ack(1, timeout=0)  # waits for one entry

    thread = threading.Thread(target=long_poll)
    thread.start()
    time.sleep(0.2)
    t = time.monotonic()
    with SimpleConnector(stack.tcp.address, busy) as other:  # a new connection: handshake too
        other.subscribe(table_filter(busy))
        for _ in range(20):
            other.get_without_ack(10)
    served = time.monotonic() - t
    assert thread.is_alive() and served < 1.5, served
    assert timed_done.wait(10)
    assert result["timed"] == -1 and 2.5 < result["timed_s"] < 5  # type: ignore[operator]
    assert thread.is_alive()  # now the blocking get
    stack.insert(quiet, range(1))
    thread.join(30)
    assert not thread.is_alive() and len(result["blocking"]) == 1  # type: ignore[arg-type]
    poller.disconnect()


def test_worker_limit(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="pycanal.server.tcp")
    quiet = stack.destination("tcp_one_worker")
    busy = stack.destination("tcp_one_worker_b")  # another destination: no embedded lock shared
    tcp = CanalTcpServer(stack.embedded, max_workers=1).start()
    try:
        with SimpleConnector(tcp.address, quiet) as poller, SimpleConnector(tcp.address, busy) as other:
            poller.subscribe(table_filter(quiet))
            other.subscribe(table_filter(busy))
            thread = threading.Thread(target=poller.get_without_ack, args=(10, 1500))
            thread.start()
            time.sleep(0.2)
            t = time.monotonic()
            assert other.get_without_ack(10).id == -1  # waits for the only worker
            assert time.monotonic() - t > 0.8
            thread.join()
    finally:
        tcp.stop()
    assert "event=workers_busy" in caplog.text and "workers=1" in caplog.text


def test_client_idle_timeout(stack: Stack) -> None:
    dest = stack.destination("tcp_idle")
    stack.insert(dest, range(5))
    conn = SimpleConnector(stack.tcp.address, dest, idle_timeout=0.3)
    conn.connect()
    conn.subscribe(table_filter(dest))
    rows, messages = pull(conn, 5, ack=False)
    time.sleep(1.0)
    with pytest.raises(CanalClientError, match="closed by the server"):
        conn.get_without_ack(10)
    assert not conn.connected
    conn.connect()  # the subscription is restored and the unacked batch comes again
    again, _ = pull(conn, 5)
    assert again == rows == list(range(5))
    conn.disconnect()


def test_client_that_does_not_read_is_dropped(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pycanal.server.tcp")
    dest = stack.destination("tcp_noread")
    stack.insert(dest, range(2000), per_txn=100)
    with SimpleConnector(stack.tcp.address, dest) as conn:  # wait until the rows are in the store
        conn.subscribe(table_filter(dest))
        pull(conn, 2000, ack=False)
    raw = Raw(stack.tcp.port)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.send(wire.encode_client_auth("", b"", 60000, 500))  # answers must be read within 0.5 s
    assert raw.ack() == (0, "")
    raw.send(wire.encode_sub(dest, "1001", table_filter(dest)))
    assert raw.ack() == (0, "")
    # the same big batch again and again (the rollback hands it out anew), never read
    raw.send((wire.encode_get(dest, "1001", 1000) + wire.encode_client_rollback(dest, "1001")) * 200)
    end = time.monotonic() + 20
    while "answer not read by the client within 0.5s" not in caplog.text:
        assert time.monotonic() < end, caplog.text[-2000:]
        time.sleep(0.05)
    raw.close()


# --------------------------------------------------------------------------- errors
def test_error_acks_and_closes(stack: Stack) -> None:
    dest = stack.destination("tcp_errors")
    healthy = SimpleConnector(stack.tcp.address, dest, client_id=2)
    healthy.connect()
    healthy.subscribe(table_filter(dest))

    conn = SimpleConnector(stack.tcp.address, dest)
    conn.connect()
    conn.subscribe(table_filter(dest))
    conn.ack(9999)  # no answer: the error comes with the next request, then the server closes
    with pytest.raises(CanalClientError, match="batchId:9999 is not exist") as info:
        conn.get_without_ack(10)
    assert info.value.code == 400 and not conn.connected

    conn.connect()
    conn.ack(0)
    with pytest.raises(CanalClientError, match="batchId should assign value") as info:
        conn.get_without_ack(10)
    assert info.value.code == 402
    conn.connect()
    conn.rollback(4242)
    with pytest.raises(CanalClientError, match="batchId:4242 is not exist"):
        conn.get_without_ack(10)

    unknown = SimpleConnector(stack.tcp.address, "no_such_destination")
    unknown.connect()
    with pytest.raises(CanalClientError, match="destination:no_such_destination does not exist") as info:
        unknown.subscribe()
    assert info.value.code == 400

    unsubscribed = SimpleConnector(stack.tcp.address, dest, client_id=3)
    unsubscribed.connect()
    with pytest.raises(CanalClientError, match="should subscribe first"):
        unsubscribed.get_without_ack(10)

    cases = [
        (wire.encode_sub("", "1001"), 401, "destination or clientId is null"),
        (wire.encode_get(dest, "", 10), 401, "destination or clientId is null"),
        (wire.encode_client_ack(dest, "", 1), 401, "destination or clientId is null"),
        (wire.encode_sub(dest, "abc"), 400, "clientId 'abc' in SUBSCRIPTION is not a number"),
        (wire.encode_sub(dest, "70000"), 400, "is not a number in -32768..32767"),
        (wire.encode_get(dest, "2", 0), 400, "fetch_size must be positive"),
        (wire.encode_packet(PT.GET, b"\x0a\x05ab"), 400, "malformed Get body"),
        (wire.encode_frame(b"\xff\xff"), 400, "malformed Packet"),
    ]
    for frame, code, message in cases:
        raw = Raw(stack.tcp.port)
        assert raw.auth() == (0, "")
        raw.send(frame)
        got_code, got_message = raw.ack()
        assert got_code == code and message in got_message, (got_code, got_message)
        assert raw.closed()
        assert healthy.get_without_ack(10).id == -1  # everyone else is still served

    # unsupported packet types: error 400, the connection stays open (as in Canal)
    raw = Raw(stack.tcp.port)
    raw.auth()
    for ptype in (PT.HEARTBEATS, PT.DUMP, PT.SHUTDOWN, PT.CLIENTAUTHENTICATION, 99):
        raw.send(wire.encode_packet(ptype, b""))
        code, message = raw.ack()
        assert code == 400 and message == f"packet type={wire.packet_type_name(ptype)} is NOT supported!"
    raw.send(wire.encode_sub(dest, "4", table_filter(dest)))
    assert raw.ack() == (0, "")
    raw.close()
    healthy.disconnect()


def test_bad_frames(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pycanal.server.tcp")
    dest = stack.destination("tcp_frames")
    healthy = SimpleConnector(stack.tcp.address, dest)
    healthy.connect()
    healthy.subscribe(table_filter(dest))

    raw = Raw(stack.tcp.port)  # oversized, before authentication
    raw.send(struct.pack(">i", 10 * 1024 * 1024))
    code, message = raw.ack()
    assert code == 400 and "declares 10485760 bytes; the maximum is 1048576" in message
    assert raw.closed()

    raw = Raw(stack.tcp.port)  # a negative length after authentication
    raw.auth()
    raw.send(b"\x80\x00\x00\x00")
    assert "a length cannot be negative" in raw.ack()[1]
    assert raw.closed()

    raw = Raw(stack.tcp.port)  # truncated: the client goes away in the middle of a frame
    frame = wire.encode_client_auth("", b"", 1000, 1000)
    raw.send(frame[:-3])
    raw.close()
    raw = Raw(stack.tcp.port)  # and a frame cut in its length prefix
    raw.send(b"\x00\x00")
    raw.close()
    end = time.monotonic() + 5
    while caplog.text.count('reason="truncated frame"') < 2:
        assert time.monotonic() < end, caplog.text
        time.sleep(0.05)
    assert "stream ended after 2 of the 4 length bytes" in caplog.text

    raw = Raw(stack.tcp.port)  # silent before authentication: closed after auth_timeout
    raw.close()
    assert healthy.get_without_ack(10).id == -1
    healthy.disconnect()


def test_auth_timeout_and_stop(stack: Stack) -> None:
    tcp = CanalTcpServer(stack.embedded, auth_timeout=0.3).start()
    try:
        raw = Raw(tcp.port)
        assert raw.closed(timeout=3)  # never authenticated
        with pytest.raises(OSError):  # the port is taken: start() raises the bind error
            CanalTcpServer(stack.embedded, port=tcp.port).start()
        conn = SimpleConnector(tcp.address, "tcp_auth")
        conn.connect()
    finally:
        tcp.stop()
    with pytest.raises(CanalClientError, match="closed by the server|receiving failed"):
        conn.subscribe()
    with pytest.raises(CanalClientError, match="cannot connect"):
        SimpleConnector(tcp.address, "tcp_auth").connect()


# --------------------------------------------------------------------------- fuzzing
def _valid_requests(dest: str, rng: random.Random) -> list[bytes]:
    cid = rng.choice(["1001", "5", "-3", "x", ""])
    return [
        wire.encode_client_auth(
            rng.choice(["", "u"]), rng.choice([b"", b"00" * 20]), rng.randint(-5, 100000), 0
        ),
        wire.encode_sub(
            rng.choice([dest, "", "nope", "é"]), cid, rng.choice(["", ".*", "(", r"pycanal\.fz"])
        ),
        wire.encode_unsub(dest, cid),
        wire.encode_get(dest, cid, rng.randint(-2, 50), rng.choice([-1, -7, 1, 50]), rng.randint(-1, 9)),
        wire.encode_client_ack(dest, cid, rng.choice([-1, 0, 1, 2, 2**62])),
        wire.encode_client_rollback(dest, cid, rng.choice([0, 1, 2**40])),
        wire.encode_heartbeat(1, 2),
        wire.encode_packet(rng.randint(0, 20), rng.randbytes(rng.randint(0, 30))),
    ]


def _mutate(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(4)
    if kind == 0 and len(data) > 4:  # flip bytes of the packet, keep the length
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(4, len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate
        data = data[: rng.randrange(len(data))]
    elif kind == 2:  # trailing garbage
        data += rng.randbytes(rng.randint(1, 20))
    else:  # a random length prefix
        data[:4] = struct.pack(">i", rng.choice([0, 1, 2**31 - 1, -5, rng.randint(0, 5000)]))
    return bytes(data)


def test_protocol_fuzzing(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="pycanal.server.tcp")
    dest = stack.destination("fz")
    tcp = CanalTcpServer(stack.embedded, auth_timeout=2, max_frame_size=4096).start()
    healthy = SimpleConnector(tcp.address, dest, client_id=1)
    healthy.connect()
    healthy.subscribe(table_filter(dest))
    rng = random.Random(5)
    cases, answers, deadline = 0, 0, time.monotonic() + 25
    try:
        while cases < 250 and time.monotonic() < deadline:
            cases += 1
            raw = Raw(tcp.port)
            with contextlib.closing(raw):
                if rng.random() < 0.7:
                    assert raw.auth() == (0, "")
                frames = []
                for _ in range(rng.randint(1, 3)):
                    choice = rng.random()
                    if choice < 0.25:
                        frames.append(rng.randbytes(rng.randint(0, 40)))
                    else:
                        frame = rng.choice(_valid_requests(dest, rng))
                        frames.append(_mutate(frame, rng) if choice < 0.75 else frame)
                raw.send(b"".join(frames))
                while True:  # every answer is a well-formed ACK or MESSAGES, then silence or close
                    try:
                        packet = raw.recv(timeout=0.15)
                    except TimeoutError:
                        break
                    if packet is None:
                        break
                    answers += 1
                    assert packet.type in (PT.ACK, PT.MESSAGES), packet
                    body = wire.parse_body(packet)
                    if packet.type == PT.ACK:
                        assert body.error_code in (0, 400, 401, 402), body
            if cases % 25 == 0:
                assert healthy.get_without_ack(10).id == -1  # still serving everyone else
        assert cases >= 100 and answers >= cases // 2, (cases, answers)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "internal errors"
        end = time.monotonic() + 5
        while len(tcp._tasks) > 1:  # every fuzz connection ended; only the healthy one remains
            assert time.monotonic() < end, len(tcp._tasks)
            time.sleep(0.05)
    finally:
        healthy.disconnect()
        tcp.stop()
