"""ClusterConnector: discovery in ZooKeeper and failover between two HA servers.

Each server is a child process: an embedded server whose instance reads the shared private
MariaDB, a ServerHA guarding it (2 s ZooKeeper sessions, standbys wait 0.3 s) and a
CanalTcpServer. A writer inserts rows while a ClusterConnector consumes; the active server is
SIGKILLed mid-stream; the standby takes over from the ZooKeeper cursor and every row arrives.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from pycanal.client import CanalClientError
from pycanal.client.cluster import ClusterConnector
from pycanal.ha import ServerRunningData
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB

DEST = "cluster"
SESSION = 2.0
DELAY = 0.3

SERVER = r"""
import json, logging, sys, time
from kazoo.client import KazooClient
from pycanal.config import CanalConfig
from pycanal.ha import ServerHA
from pycanal.deployer import build_instance
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.tcp import CanalTcpServer

conf, zk_hosts, session, delay = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
logging.basicConfig(level=logging.WARNING, format="%(message)s")
logging.getLogger("pycanal.ha.election").setLevel(logging.INFO)  # each activation and its epoch
config = CanalConfig.load(conf)
zk = KazooClient(hosts=zk_hosts, timeout=session)
zk.start(timeout=10)
embedded = CanalServerWithEmbedded()
tcp = CanalTcpServer(embedded, "127.0.0.1", 0).start()
ha = ServerHA(zk, embedded, f"127.0.0.1:{tcp.port}", cid=config["canal.id"], delay=delay, flush_period=0.1)
ha.start()
for destination in config.destinations:
    ha.deploy(build_instance(config, destination, meta_manager=ha.meta_manager(destination)))
print(tcp.port, flush=True)
while True:
    time.sleep(1)
"""


def write_conf(root: Path, db: PrivateMariaDB, start: tuple[str, int], slave_id: int) -> Path:
    (root / DEST).mkdir(parents=True)
    (root / "canal.properties").write_text(
        f"canal.id = {slave_id}\n"
        f"canal.destinations = {DEST}\n"
        f"canal.conf.dir = {root}\n"
        "canal.auto.scan = false\n"
        "canal.instance.memory.buffer.size = 1024\n"
    )
    (root / DEST / "instance.properties").write_text(
        f"canal.instance.master.address = 127.0.0.1:{db.port}\n"
        f"canal.instance.master.journal.name = {start[0]}\n"
        f"canal.instance.master.position = {start[1]}\n"
        f"canal.instance.dbUsername = {db.repl_user}\n"
        f"canal.instance.dbPassword = {db.repl_password}\n"
        f"canal.instance.mysql.slaveId = {slave_id}\n"
    )
    return root


@pytest.fixture
def chroot(zookeeper) -> Iterator[str]:
    path = f"/pycanal-cluster-{uuid.uuid4().hex[:12]}"
    admin = zookeeper.client()
    admin.ensure_path(path)
    try:
        yield path
    finally:
        admin.delete(path, recursive=True)
        admin.stop()
        admin.close()


@pytest.fixture
def zk(zookeeper, chroot) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.hosts + chroot, timeout=SESSION)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_running_server_discovery(zk: KazooClient) -> None:
    conn = ClusterConnector(zk, DEST)
    with pytest.raises(CanalClientError, match="no alive canal server for cluster"):
        conn.running_server()
    zk.create(f"/otter/canal/destinations/{DEST}/cluster/127.0.0.1:7001", makepath=True, ephemeral=True)
    zk.create(f"/otter/canal/destinations/{DEST}/cluster/garbage", ephemeral=True)
    assert conn.running_server() == ("127.0.0.1", 7001)  # nobody runs it yet: a cluster member
    zk.create(f"/otter/canal/destinations/{DEST}/running", ServerRunningData("127.0.0.1:7002").to_json())
    assert conn.running_server() == ("127.0.0.1", 7002)  # the running server wins
    zk.set(f"/otter/canal/destinations/{DEST}/running", b"not json")
    with pytest.raises(CanalClientError, match=f"/otter/canal/destinations/{DEST}/running: not JSON"):
        conn.running_server()
    with pytest.raises(CanalClientError, match="no server could be reached"):
        ClusterConnector(zk, "nowhere", retry_interval=0.05, failover_timeout=0.2).connect()


def start_server(conf: Path, zk_hosts: str) -> tuple[subprocess.Popen[str], int]:
    """The server's port; its log goes to ``conf/server.log``."""
    with open(conf / "server.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(conf), zk_hosts, str(SESSION), str(DELAY)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise AssertionError(f"the server did not start: {line!r}")
    return proc, int(line)


def activations(log: Path) -> list[int]:
    """The epochs a server's log says it became active with."""
    return [int(m) for m in re.findall(rf"^{DEST}@\S+: active \(epoch (\d+)\)$", log.read_text(), re.M)]


def row_ids(message, table: str) -> list[int]:
    out = []
    for entry in message.entries:
        if entry.entryType != pb.ROWDATA or entry.header.tableName != table:
            continue
        change = pb.RowChange.FromString(entry.storeValue)
        for row in change.rowDatas:
            out += [int(c.value) for c in row.afterColumns if c.name == "id"]
    return out


@pytest.mark.mariadb
def test_failover_between_two_servers_delivers_every_row(
    mariadb: PrivateMariaDB, zookeeper, chroot: str, zk: KazooClient, tmp_path: Path
) -> None:
    table = f"ha_rows_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE TABLE pycanal.{table} (id INT PRIMARY KEY, v VARCHAR(40))")
    start = mariadb.current_binlog()
    zk_hosts = zookeeper.hosts + chroot
    running = f"/otter/canal/destinations/{DEST}/running"
    a, port_a = start_server(write_conf(tmp_path / "a", mariadb, start, 4101), zk_hosts)
    procs = [a]
    try:
        wait_until(lambda: zk.exists(running), 10, "server A to become active")
        b, port_b = start_server(write_conf(tmp_path / "b", mariadb, start, 4102), zk_hosts)
        procs.append(b)
        assert ServerRunningData.from_json(zk.get(running)[0]).address == f"127.0.0.1:{port_a}"

        txns, per_txn = 300, 10
        expected = set(range(txns * per_txn))

        def write() -> None:
            conn = mariadb.root_connection("pycanal")
            with conn.cursor() as cur:
                for t in range(txns):
                    rows = [(t * per_txn + i, f"row-{t}-{i}") for i in range(per_txn)]
                    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows)
                    conn.commit()
                    time.sleep(0.01)
            conn.close()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        client = ClusterConnector(
            zk, DEST, so_timeout=5.0, retry_interval=0.2, failover_timeout=30.0, exclusive=True
        )
        client.connect()
        assert client.address == ("127.0.0.1", port_a)
        rival = ClusterConnector(zk_hosts, DEST, exclusive=True, active_timeout=0.5, zk_timeout=SESSION)
        with pytest.raises(CanalClientError, match="another client is active"):
            rival.connect()  # one consumer per (destination, clientId)
        rival.disconnect()
        client.subscribe(f"pycanal\\.{table}")
        received: list[int] = []
        killed_at = first_after = None
        end = time.monotonic() + 60
        while not expected.issubset(received):
            assert time.monotonic() < end, f"{len(expected - set(received))} rows never came"
            message = client.get_without_ack(100, 200)
            if message.id == -1:
                continue
            if killed_at is not None and first_after is None:
                first_after = time.monotonic()
                assert client.address == ("127.0.0.1", port_b)
            received += row_ids(message, table)
            client.ack(message.id)
            if killed_at is None and len(received) >= len(expected) // 3:
                os.kill(a.pid, signal.SIGKILL)  # the active server dies mid-stream
                killed_at = time.monotonic()
        writer.join(30)
        client.disconnect()
        assert set(received) == expected  # every row, and nothing else
        assert killed_at is not None and first_after is not None
        duplicates = len(received) - len(expected)
        assert ServerRunningData.from_json(zk.get(running)[0]).address == f"127.0.0.1:{port_b}"
        # Every activation took the next epoch: A's first, then B's takeover; more only where a
        # loaded machine kept ZooKeeper from confirming a lease in time (the holder stops, then
        # resumes or is taken over with a new epoch: docs/ha.md).
        epoch = json.loads(zk.get(f"/otter/canal/destinations/{DEST}/epoch")[0])["epoch"]
        a_epochs, b_epochs = (activations(tmp_path / name / "server.log") for name in ("a", "b"))
        assert a_epochs[0] == 1 and b_epochs and b_epochs[-1] == epoch, (a_epochs, b_epochs)
        assert sorted(a_epochs + b_epochs) == list(range(1, epoch + 1)), (a_epochs, b_epochs)
        print(
            f"\nfailover: first rows from the standby {first_after - killed_at:.2f}s after the SIGKILL "
            f"(session {SESSION}s + delay {DELAY}s); {duplicates} rows delivered twice; "
            f"activations A {a_epochs}, B {b_epochs}"
        )
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
