"""Server and client HA against the real private ZooKeeper (pycanal.ha, pycanal.client.running).

Sessions last 2 s here (lease 1 s, heartbeat every 1/3 s), standbys wait 0.3 s before a takeover.
A partition is made with a loopback TCP proxy between one kazoo client and ZooKeeper that stops
forwarding (ZooKeeper then expires that session for real); a freeze is a SIGSTOP of a child
process that holds a destination.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from pycanal.client.running import ClientRunningMonitor
from pycanal.ha import (
    ClientRunningData,
    FencedError,
    FencedMetaManager,
    FencedZooKeeper,
    NotActiveError,
    RunningDataError,
    ServerRunningData,
    ServerRunningMonitor,
)
from pycanal.meta import ClientIdentity, PositionRange
from pycanal.protocol.position import EntryPosition, LogIdentity, LogPosition

SESSION = 2.0
DELAY = 0.3
DEST = "ha"


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Recorder:
    """on_start / on_stop callbacks that log (event, time.monotonic(), epoch)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float, int | None]] = []
        self.monitor: ServerRunningMonitor | ClientRunningMonitor | None = None

    def start(self) -> None:
        assert self.monitor is not None
        self.events.append(("start", time.monotonic(), self.monitor.epoch))

    def stop(self) -> None:
        self.events.append(("stop", time.monotonic(), None))

    def times(self, kind: str) -> list[float]:
        return [t for k, t, _ in self.events if k == kind]


class Partition:
    """A loopback TCP proxy to ZooKeeper that can stop forwarding (a network partition)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.flowing.clear()

    def heal(self) -> None:
        """Drop the connections that lived through the partition, then forward again."""
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for s in sockets:
            s.close()
        self.flowing.set()

    def close(self) -> None:
        self.listener.close()
        self.heal()


@pytest.fixture
def chroot(zookeeper) -> Iterator[str]:
    path = f"/pycanal-ha-{uuid.uuid4().hex[:12]}"
    admin = zookeeper.client()
    admin.ensure_path(path)
    try:
        yield path
    finally:
        admin.delete(path, recursive=True)
        admin.stop()
        admin.close()


@pytest.fixture
def clients(zookeeper, chroot) -> Iterator[Callable[..., KazooClient]]:
    """Started kazoo clients under the test's chroot, with 2 s sessions (closed at the end)."""
    made: list[KazooClient] = []

    def make(hosts: str | None = None) -> KazooClient:
        client = KazooClient(hosts=(hosts or zookeeper.hosts) + chroot, timeout=SESSION)
        client.start(timeout=10)
        made.append(client)
        return client

    yield make
    for client in made:
        client.stop()
        client.close()


def server_monitor(zk: KazooClient, address: str, recorder: Recorder, **kwargs) -> ServerRunningMonitor:
    monitor = ServerRunningMonitor(zk, DEST, address, recorder.start, recorder.stop, delay=DELAY, **kwargs)
    recorder.monitor = monitor
    return monitor


# ---------------------------------------------------------------------- running data (pure)
def test_running_data_json_is_canals() -> None:
    data = ServerRunningData("10.0.0.5:11111", 3)
    assert data.to_json() == b'{"active":true,"address":"10.0.0.5:11111","cid":3}'
    assert ServerRunningData.from_json(data.to_json()) == data
    assert ServerRunningData.from_json(b'{"cid":1,"address":"h:1","active":false}').active is False
    assert data.host_port == ("10.0.0.5", 11111)
    client = ClientRunningData(1001, "10.0.0.9:53211")
    assert client.to_json() == b'{"active":true,"address":"10.0.0.9:53211","clientId":1001}'
    assert ClientRunningData.from_json(client.to_json()) == client
    with pytest.raises(RunningDataError, match="/x/running: not JSON"):
        ServerRunningData.from_json(b"{oops", "/x/running")
    with pytest.raises(RunningDataError, match="/x/running: address 'nohost' is not ip:port"):
        ServerRunningData.from_json(b'{"address":"nohost","cid":1}', "/x/running")
    with pytest.raises(RunningDataError, match="expected a JSON object with address, clientId"):
        ClientRunningData.from_json(b'{"address":"a"}', "/c")


# ---------------------------------------------------------------------- server monitor
def test_running_node_cluster_nodes_and_epoch(clients) -> None:
    zk, reader = clients(), clients()
    rec = Recorder()
    monitor = server_monitor(zk, "127.0.0.1:11111", rec, cid=7)
    with pytest.raises(NotActiveError):
        monitor.check()
    monitor.start()
    try:
        assert monitor.wait_for_active(5)
        assert monitor.check() == 1 and monitor.epoch == 1
        twin = ServerRunningMonitor(zk, DEST, "127.0.0.1:2", rec.start, rec.stop)
        with pytest.raises(RuntimeError, match="same kazoo client"):
            twin.start()  # it would take the session's node for its own
        data, stat = reader.get(f"/otter/canal/destinations/{DEST}/running")
        assert data == b'{"active":true,"address":"127.0.0.1:11111","cid":7}'
        assert stat.ephemeralOwner == zk.client_id[0]
        cluster = reader.exists(f"/otter/canal/destinations/{DEST}/cluster/127.0.0.1:11111")
        assert cluster is not None and cluster.ephemeralOwner == zk.client_id[0]
        assert reader.get_children(f"/otter/canal/destinations/{DEST}/cluster") == ["127.0.0.1:11111"]
        data, stat = reader.get(f"/otter/canal/destinations/{DEST}/epoch")
        assert json.loads(data) == {"address": "127.0.0.1:11111", "cid": 7, "epoch": 1}
        assert stat.version == 1 and stat.ephemeralOwner == 0  # persistent; version = epoch
        assert [k for k, _, _ in rec.events] == ["start"]
        time.sleep(SESSION)  # the heartbeat keeps the lease alive
        assert monitor.is_active
    finally:
        monitor.stop()
    assert [k for k, _, _ in rec.events] == ["start", "stop"]
    assert not monitor.is_active
    assert reader.exists(f"/otter/canal/destinations/{DEST}/running") is None  # released
    assert reader.exists(f"/otter/canal/destinations/{DEST}/cluster/127.0.0.1:11111") is None


def test_standby_takes_over_when_the_active_session_ends(clients) -> None:
    zk_a, zk_b, reader = clients(), clients(), clients()
    rec_a, rec_b = Recorder(), Recorder()
    a = server_monitor(zk_a, "127.0.0.1:1", rec_a)
    b = server_monitor(zk_b, "127.0.0.1:2", rec_b)
    a.start()
    assert a.wait_for_active(5)
    b.start()
    try:
        time.sleep(0.5)
        assert not b.is_active and rec_b.events == []  # a standby watches
        assert sorted(reader.get_children(f"/otter/canal/destinations/{DEST}/cluster")) == [
            "127.0.0.1:1",
            "127.0.0.1:2",
        ]
        gone = time.monotonic()
        zk_a.stop()  # the active server dies: its session ends, its nodes go
        assert b.wait_for_active(5)
        gap = time.monotonic() - gone
        assert DELAY <= gap < DELAY + 2.0, gap  # Canal's delay for a node someone else held
        print(f"\nsession closed: the standby was active {gap:.2f}s later")
        assert b.epoch == 2
        assert rec_a.times("stop") and rec_a.times("stop")[0] < rec_b.times("start")[0]
        data, _ = reader.get(f"/otter/canal/destinations/{DEST}/running")
        assert ServerRunningData.from_json(data).address == "127.0.0.1:2"
        assert reader.get_children(f"/otter/canal/destinations/{DEST}/cluster") == ["127.0.0.1:2"]
    finally:
        b.stop()
        a.stop()


def test_partition_stops_the_active_before_the_standby_starts(zookeeper, clients) -> None:
    proxy = Partition((zookeeper.host, zookeeper.port))
    try:
        zk_a = clients(f"127.0.0.1:{proxy.port}")
        zk_b = clients()
        rec_a, rec_b = Recorder(), Recorder()
        a = server_monitor(zk_a, "127.0.0.1:1", rec_a)
        b = server_monitor(zk_b, "127.0.0.1:2", rec_b)
        a.start()
        assert a.wait_for_active(5)
        b.start()
        time.sleep(0.3)

        # 1. A short cut (< session timeout): A stops serving, then takes its destination back
        #    at once on reconnection (same session); B never starts.
        cut = time.monotonic()
        proxy.cut()
        wait_until(lambda: rec_a.times("stop"), 5, "A to stop")
        assert rec_a.times("stop")[0] - cut < SESSION  # before the session could expire
        assert not a.is_active
        proxy.heal()
        wait_until(lambda: len(rec_a.times("start")) == 2, 5, "A to resume")
        assert a.epoch == 2 and rec_b.events == []
        time.sleep(DELAY + 0.2)
        assert rec_b.events == [] and a.is_active

        # 2. A long cut: ZooKeeper expires A's session and B takes over, but A stopped first
        #    (by its lease or at SUSPENDED), well before.
        cut = time.monotonic()
        proxy.cut()
        assert b.wait_for_active(10)
        a_stop = [t for t in rec_a.times("stop") if t > cut][0]
        b_start = rec_b.times("start")[0]
        assert a_stop < b_start
        assert a_stop - cut < SESSION, a_stop - cut  # the lease (1 s) or SUSPENDED (1.33 s)
        assert b.epoch == 3
        # A's writes with its old epoch are refused by ZooKeeper once it is reachable again
        proxy.heal()
        wait_until(lambda: zk_a.state == KazooState.CONNECTED, 10, "A to reconnect")
        with pytest.raises(FencedError, match="epoch 2 is over"):
            FencedZooKeeper(zk_a, a).set(f"/otter/canal/destinations/{DEST}/epoch", b"x")
        time.sleep(DELAY + 0.3)
        assert not a.is_active and b.is_active  # A is a standby now
        member = f"/otter/canal/destinations/{DEST}/cluster/127.0.0.1:1"

        def registered_again() -> bool:
            stat = zk_b.exists(member)
            return stat is not None and stat.ephemeralOwner == zk_a.client_id[0]

        wait_until(registered_again, 5, "A's cluster node in its new session")
        assert len(rec_a.times("start")) == 2
        print(
            f"\npartition: A stopped {a_stop - cut:.2f}s after the cut, B started {b_start - cut:.2f}s after"
        )
        b.stop()
        a.stop()
    finally:
        proxy.close()


def test_zookeeper_outage_stops_the_destination_until_it_is_back() -> None:
    from pycanal.testing.zookeeper import PrivateZooKeeper

    with PrivateZooKeeper() as server:
        zk = KazooClient(hosts=server.hosts, timeout=SESSION)
        zk.start(timeout=10)
        rec = Recorder()
        monitor = server_monitor(zk, "127.0.0.1:1", rec)
        monitor.start()
        try:
            assert monitor.wait_for_active(5)
            down = time.monotonic()
            server.pause()  # ZooKeeper itself stops answering
            wait_until(lambda: rec.times("stop"), 5, "the destination to stop")
            assert rec.times("stop")[0] - down < SESSION
            time.sleep(0.5)
            assert not monitor.is_active
            server.resume()
            wait_until(lambda: len(rec.times("start")) == 2, 10, "the destination to start again")
            assert monitor.is_active and monitor.epoch == 2
        finally:
            monitor.stop()
            zk.stop()
            zk.close()


def test_stopped_monitor_hands_over_and_a_failing_on_start_gives_the_node_up(clients) -> None:
    zk_a, zk_b = clients(), clients()
    rec_b = Recorder()
    calls: list[str] = []

    def broken() -> None:
        calls.append("start")
        raise RuntimeError("cannot start the instance")

    a = ServerRunningMonitor(zk_a, DEST, "127.0.0.1:1", broken, lambda: calls.append("stop"), delay=DELAY)
    b = server_monitor(zk_b, "127.0.0.1:2", rec_b)
    a.start()
    wait_until(lambda: calls, 5, "A's on_start")
    b.start()
    try:
        assert b.wait_for_active(5)  # A gave the node up; B took it after the delay
        assert calls[:2] == ["start", "stop"] and not a.is_active
        assert b.epoch == 2
        time.sleep(DELAY * 2)
        assert b.is_active and calls.count("start") == 1  # A waits as a standby now
    finally:
        a.stop()
        b.stop()


# ---------------------------------------------------------------------- fencing of meta writes
def position(offset: int) -> LogPosition:
    return LogPosition(
        LogIdentity(("127.0.0.1", 3306), -1), EntryPosition("mysql-bin.000001", offset, 1, None, 0)
    )


def test_fenced_meta_manager_refuses_a_deposed_server(zookeeper, clients) -> None:
    proxy = Partition((zookeeper.host, zookeeper.port))
    zk_a, zk_b, reader = clients(f"127.0.0.1:{proxy.port}"), clients(), clients()
    a = ServerRunningMonitor(zk_a, DEST, "127.0.0.1:1", lambda: None, lambda: None, delay=DELAY)
    b = ServerRunningMonitor(zk_b, DEST, "127.0.0.1:2", lambda: None, lambda: None, delay=DELAY)
    meta_a = FencedMetaManager(zk_a, a, period=3600)
    meta_b = FencedMetaManager(zk_b, b, period=3600)
    client = ClientIdentity(DEST, 1001, "")
    cursor = f"/otter/canal/destinations/{DEST}/1001/cursor"
    with pytest.raises(NotActiveError):
        meta_a.start()  # no instance may start before its server is active
    a.start()
    assert a.wait_for_active(5)
    b.start()
    meta_a.start()
    try:
        meta_a.subscribe(client)
        meta_a.update_cursor(client, position(100))
        meta_a.flush()
        assert LogPosition.from_json(reader.get(cursor)[0]).postion.position == 100
        with pytest.raises(NotActiveError):
            meta_b.start()

        proxy.cut()  # A is cut off; its meta manager (and flusher) keep running
        wait_until(lambda: not a.is_active, 5, "A to lose its lease")
        with pytest.raises(NotActiveError):
            meta_a.add_batch(client, PositionRange())  # nothing is handed out any more
        assert b.wait_for_active(10) and b.epoch == 2
        meta_b.start()
        assert meta_b.get_cursor(client).postion.position == 100  # A's last flush is seen
        meta_b.update_cursor(client, position(200))
        meta_b.flush()

        proxy.heal()  # A is back (new session) and flushes an older cursor: refused
        wait_until(lambda: zk_a.state == KazooState.CONNECTED, 10, "A to reconnect")
        meta_a.update_cursor(client, position(150))
        with pytest.raises(FencedError):
            meta_a.flush()
        with pytest.raises(FencedError):
            FencedZooKeeper(zk_a, a).delete(f"/otter/canal/destinations/{DEST}/1001", recursive=True)
        assert LogPosition.from_json(reader.get(cursor)[0]).postion.position == 200
        assert reader.exists(f"/otter/canal/destinations/{DEST}/1001/filter") is not None
    finally:
        for m in (meta_a, meta_b):
            try:
                m.stop()
            except FencedError:
                pass
        a.stop()
        b.stop()
        proxy.close()


# ---------------------------------------------------------------------- SIGSTOP
CHILD = r"""
import sys, threading, time
from kazoo.client import KazooClient
from pycanal.ha import FencedZooKeeper, ServerRunningMonitor

hosts, out, cursor = sys.argv[1:4]
log = open(out, "a", buffering=1)
lock = threading.Lock()

def rec(*parts):
    with lock:
        log.write(" ".join(str(p) for p in parts) + "\n")

zk = KazooClient(hosts=hosts, timeout=float(sys.argv[4]))
zk.start(timeout=10)
monitor = ServerRunningMonitor(
    zk, sys.argv[5], "127.0.0.1:1",
    lambda: rec("START", time.monotonic(), monitor.epoch),
    lambda: rec("STOP", time.monotonic()),
    delay=float(sys.argv[6]),
)
fenced = FencedZooKeeper(zk, monitor)

def flusher():  # writes like a meta flusher: no lease check, only the epoch fence
    while True:
        time.sleep(0.02)
        if monitor.fence_epoch is None:
            continue
        t = time.monotonic()
        try:
            fenced.set(cursor, f"child {t}".encode())
            rec("WRITE", t, "ok")
        except Exception as exc:
            rec("WRITE", t, type(exc).__name__)

threading.Thread(target=flusher, daemon=True).start()
monitor.start()
while True:  # a serving loop: serve only after the lease check
    t = time.monotonic()
    if monitor.is_active:
        rec("SERVE", t, monitor.epoch)
    time.sleep(0.01)
"""


def _proc_state(pid: int) -> str:
    """A process's state letter in /proc (``T``: stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def read_timeline(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def test_sigstop_active_never_overlaps_the_new_active(zookeeper, clients, chroot, tmp_path: Path) -> None:
    out = tmp_path / "child.log"
    cursor = f"/otter/canal/destinations/{DEST}/1001/cursor"
    admin = clients()
    admin.create(cursor, b"", makepath=True)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            zookeeper.hosts + chroot,
            str(out),
            cursor,
            str(SESSION),
            DEST,
            str(DELAY),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    b: ServerRunningMonitor | None = None
    try:
        wait_until(lambda: out.exists() and "SERVE" in out.read_text(), 15, "the child to serve")
        wait_until(lambda: " ok" in out.read_text(), 5, "the child to write")
        zk_b = clients()
        rec_b = Recorder()
        b = server_monitor(zk_b, "127.0.0.1:2", rec_b)
        b.start()
        time.sleep(0.2)
        assert not b.is_active
        frozen = time.monotonic()
        os.kill(child.pid, signal.SIGSTOP)
        # Stopped once /proc says so: a serve or write the child timed between `frozen` and then
        # (it was still the active) may have gone through.
        wait_until(lambda: _proc_state(child.pid) == "T", 5, "the child to stop")
        stopped = time.monotonic()
        assert b.wait_for_active(10)
        b_start, b_epoch = rec_b.times("start")[0], b.epoch
        FencedZooKeeper(zk_b, b).set(cursor, b"new active")
        time.sleep(0.5)
        resumed = time.monotonic()
        os.kill(child.pid, signal.SIGCONT)
        wait_until(lambda: any(r[0] == "STOP" for r in read_timeline(out)), 10, "the child to stop")
        time.sleep(1.0)  # let it reconnect, compete and try to write
        assert b.is_active
        assert admin.get(cursor)[0] == b"new active"  # nothing of the child's got through
    finally:
        child.kill()
        child.wait()
        if b is not None:
            b.stop()
    timeline = read_timeline(out)
    starts = [r for r in timeline if r[0] == "START"]
    serves = [float(r[1]) for r in timeline if r[0] == "SERVE"]
    stops = [float(r[1]) for r in timeline if r[0] == "STOP"]
    ok_writes = [float(r[1]) for r in timeline if r[0] == "WRITE" and r[2] == "ok"]
    refused = [r[2] for r in timeline if r[0] == "WRITE" and float(r[1]) > resumed]
    assert len(starts) == 1 and starts[0][2] == "1" and b_epoch == 2
    assert serves and max(serves) < stopped and frozen < b_start  # it never served after the freeze
    assert ok_writes and max(ok_writes) < stopped < b_start  # and never wrote after it
    assert stops and stops[0] > resumed  # it stopped on waking, before doing anything
    assert refused and set(refused) <= {"FencedError", "ConnectionLoss"}, set(refused)
    print(f"\nSIGSTOP: the new active started {b_start - frozen:.2f}s after the freeze")


# ---------------------------------------------------------------------- client monitor
def test_client_running_monitor_takeover(clients) -> None:
    zk_a, zk_b, reader = clients(), clients(), clients()
    rec_a, rec_b = Recorder(), Recorder()
    a = ClientRunningMonitor(zk_a, DEST, 1001, rec_a.start, rec_a.stop, address="10.0.0.1:5001", delay=DELAY)
    b = ClientRunningMonitor(zk_b, DEST, 1001, rec_b.start, rec_b.stop, address="10.0.0.2:5002", delay=DELAY)
    rec_a.monitor, rec_b.monitor = a, b
    other = ClientRunningMonitor(zk_b, DEST, 1002, lambda: None, lambda: None, address="x", delay=DELAY)
    a.start()
    assert a.wait_for_active(5)
    b.start()
    other.start()
    try:
        assert other.wait_for_active(5)  # another clientId runs independently
        time.sleep(0.3)
        assert not b.is_active
        data = reader.get(f"/otter/canal/destinations/{DEST}/1001/running")[0]
        assert data == b'{"active":true,"address":"10.0.0.1:5001","clientId":1001}'
        zk_a.stop()  # the active client dies
        assert b.wait_for_active(5)
        data = reader.get(f"/otter/canal/destinations/{DEST}/1001/running")[0]
        assert ClientRunningData.from_json(data).address == "10.0.0.2:5002"
        assert reader.exists(f"/otter/canal/destinations/{DEST}/epoch") is None  # no epoch for clients
        assert rec_a.times("stop")[0] < rec_b.times("start")[0]
    finally:
        other.stop()
        b.stop()
        a.stop()
