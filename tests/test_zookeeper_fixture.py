"""The private ZooKeeper harness (pycanal.testing.zookeeper) and the session `zookeeper` fixture."""

from __future__ import annotations

import time

from kazoo.client import KazooClient, KazooState

from pycanal.testing.zookeeper import PrivateZooKeeper


def test_session_fixture_serves_kazoo(zookeeper: PrivateZooKeeper) -> None:
    assert zookeeper.running
    assert zookeeper.hosts.startswith("127.0.0.1:")
    client = zookeeper.client()
    try:
        client.ensure_path("/pycanal-fixture-test")
        client.create("/pycanal-fixture-test/a", b"hello")
        assert client.get("/pycanal-fixture-test/a")[0] == b"hello"
        client.delete("/pycanal-fixture-test", recursive=True)
    finally:
        client.stop()
        client.close()


def test_private_server_lifecycle_and_pause() -> None:
    zk = PrivateZooKeeper()
    zk.start()
    root = zk.root_dir
    assert root is not None and root.is_dir()
    assert zk.startup_seconds < 60
    states: list[str] = []
    client = KazooClient(hosts=zk.hosts, timeout=4.0)
    client.add_listener(states.append)
    client.start(timeout=10)
    try:
        client.create("/x", b"1")
        zk.pause()
        deadline = time.monotonic() + 20
        while KazooState.SUSPENDED not in states and time.monotonic() < deadline:
            time.sleep(0.05)
        assert KazooState.SUSPENDED in states  # the frozen server stopped answering pings
        zk.resume()
        deadline = time.monotonic() + 20
        while client.state != KazooState.CONNECTED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get("/x")[0] == b"1"
    finally:
        client.stop()
        client.close()
        zk.stop()
    assert not zk.running
    assert not root.exists()
    zk.stop()  # idempotent
