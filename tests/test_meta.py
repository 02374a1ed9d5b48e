"""Meta-manager contract tests, run against every implementation (mirrors Canal's
AbstractMetaManagerTest and its Memory/FileMixed/ZooKeeper/PeriodMixed subclasses), plus persistence
across restarts and the atomic meta.dat write."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pycanal.common.zookeeper import batch_mark_path, cursor_path, filter_path
from pycanal.meta import (
    CanalMetaManagerError,
    ClientIdentity,
    FileMixedMetaManager,
    MemoryMetaManager,
    MetaManager,
    PeriodMixedMetaManager,
    PositionRange,
    ZooKeeperMetaManager,
)
from pycanal.protocol.position import EntryPosition, LogIdentity, LogPosition

DEST = "example"
REPO_ROOT = Path(__file__).resolve().parent.parent


def build_position(i: int) -> LogPosition:
    return LogPosition(
        LogIdentity(("127.0.0.1", 3306), 1234),
        EntryPosition(f"mysql-bin.{i:06d}", 101 + i, 1, None, 1_700_000_000_000 + i),
    )


def build_range(i: int) -> PositionRange:
    return PositionRange(build_position(i), build_position(i), build_position(i + 1), i * 10)


@dataclass
class Backend:
    """Makes started managers of one kind that share one backing store (dir / ZooKeeper chroot)."""

    kind: str
    make: Callable[[], MetaManager]
    persistent: bool  # a new manager sees what a stopped one wrote
    persists_batches: bool
    zk_hosts: str = ""
    data_dir: Path | None = None


@pytest.fixture
def zk_chroot(request: pytest.FixtureRequest) -> Iterator[str]:
    zookeeper = request.getfixturevalue("zookeeper")
    chroot = f"/pycanal-meta-{uuid.uuid4().hex[:12]}"
    admin = zookeeper.client()
    admin.ensure_path(chroot)
    try:
        yield zookeeper.hosts + chroot
    finally:
        admin.delete(chroot, recursive=True)
        admin.stop()
        admin.close()


@pytest.fixture(params=["memory", "file", "zookeeper", "period_mixed"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    made: list[MetaManager] = []

    def started(factory: Callable[[], MetaManager]) -> Callable[[], MetaManager]:
        def make() -> MetaManager:
            m = factory()
            m.start()
            made.append(m)
            return m

        return make

    if kind == "memory":
        b = Backend(kind, started(MemoryMetaManager), False, False)
    elif kind == "file":
        b = Backend(
            kind, started(lambda: FileMixedMetaManager(tmp_path, 0.05)), True, False, data_dir=tmp_path
        )
    else:
        hosts = request.getfixturevalue("zk_chroot")
        if kind == "zookeeper":
            b = Backend(kind, started(lambda: ZooKeeperMetaManager(hosts)), True, True, zk_hosts=hosts)
        else:
            b = Backend(
                kind, started(lambda: PeriodMixedMetaManager(hosts, 0.05)), True, False, zk_hosts=hosts
            )
    yield b
    for m in made:
        m.stop()


# ---------------------------------------------------------------------------- the contract
def test_subscribe_unsubscribe_list(backend: Backend) -> None:
    m = backend.make()
    c1 = ClientIdentity(DEST, 1)
    c2 = ClientIdentity(DEST, 2)
    assert m.list_all_subscribe_info(DEST) == []
    assert not m.has_subscribe(c1)
    m.subscribe(c1)
    m.subscribe(c1)  # idempotent
    m.subscribe(c2)
    assert m.list_all_subscribe_info(DEST) == [c1, c2]
    assert m.has_subscribe(c1) and m.has_subscribe(c2)

    m.unsubscribe(c2)
    c3 = ClientIdentity(DEST, 3)
    m.subscribe(c3)
    assert m.list_all_subscribe_info(DEST) == [c1, c3]
    assert not m.has_subscribe(c2)
    m.unsubscribe(c2)  # unknown: no error
    assert m.list_all_subscribe_info("other") == []


def test_subscribe_keeps_the_filter_and_replaces_it(backend: Backend) -> None:
    m = backend.make()
    m.subscribe(ClientIdentity(DEST, 1001, r".*\..*"))
    m.subscribe(ClientIdentity(DEST, 1002))
    [a, b] = m.list_all_subscribe_info(DEST)
    assert (a.client_id, a.filter) == (1001, r".*\..*")
    assert (b.client_id, b.filter) == (1002, None)
    m.subscribe(ClientIdentity(DEST, 1001, "db\\.t1"))
    infos = {c.client_id: c.filter for c in m.list_all_subscribe_info(DEST)}
    assert infos == {1001: "db\\.t1", 1002: None}


def test_client_identity_equality_ignores_filter() -> None:
    assert ClientIdentity(DEST, 1, "a") == ClientIdentity(DEST, 1, "b")
    assert hash(ClientIdentity(DEST, 1, "a")) == hash(ClientIdentity(DEST, 1))
    assert ClientIdentity(DEST, 1) != ClientIdentity("other", 1)
    assert ClientIdentity(DEST).client_id == 1001
    with pytest.raises(ValueError):
        ClientIdentity(DEST, 40000)  # not a Java short


def test_cursor_update_and_get(backend: Backend) -> None:
    m = backend.make()
    client = ClientIdentity(DEST, 1001)
    m.subscribe(client)
    assert m.get_cursor(client) is None
    m.update_cursor(client, build_range(1).start)
    assert m.get_cursor(client) == build_position(1)
    m.update_cursor(client, build_range(2).start)
    assert m.get_cursor(client) == build_position(2)
    other = ClientIdentity(DEST, 1002)
    m.subscribe(other)
    assert m.get_cursor(other) is None


def test_batches_ids_order_and_removal(backend: Backend) -> None:
    m = backend.make()
    client = ClientIdentity(DEST, 1001)
    m.subscribe(client)
    assert m.get_first_batch(client) is None
    assert m.get_lastest_batch(client) is None
    assert m.list_all_batchs(client) == {}
    assert m.remove_batch(client, 1) is None  # nothing outstanding

    id1 = m.add_batch(client, build_range(1))
    id2 = m.add_batch(client, build_range(2))
    assert (id1, id2) == (1, 2)
    id3 = id2 + 1
    assert m.add_batch(client, build_range(3), id3) == id3  # explicit id
    id4 = m.add_batch(client, build_range(4))
    assert id4 == id3 + 1
    assert m.add_batch(client, build_range(10), 10) == 10  # an explicit id moves the counter past it
    assert m.add_batch(client, build_range(11)) == 11

    assert m.get_batch(client, id2) == build_range(2)
    assert m.get_batch(client, id4) == build_range(4)
    assert m.get_batch(client, 99) is None
    assert list(m.list_all_batchs(client)) == [1, 2, 3, 4, 10, 11]
    assert m.get_first_batch(client) == build_range(1)
    assert m.get_lastest_batch(client) == build_range(11)
    assert m.get_latest_batch(client) == build_range(11)

    with pytest.raises(CanalMetaManagerError, match=r"^batchId:2 is not the firstly:1$"):
        m.remove_batch(client, id2)
    assert m.remove_batch(client, id1) == build_range(1)
    assert m.remove_batch(client, id2) == build_range(2)
    with pytest.raises(CanalMetaManagerError, match="batchId:10 is not the firstly:3"):
        m.remove_batch(client, 10)
    assert m.get_first_batch(client) == build_range(3)
    assert m.get_lastest_batch(client) == build_range(11)
    assert list(m.list_all_batchs(client)) == [3, 4, 10, 11]

    m.clear_all_batchs(client)
    assert m.list_all_batchs(client) == {}
    assert m.get_first_batch(client) is None
    assert m.get_lastest_batch(client) is None
    assert m.add_batch(client, build_range(12)) == 12  # ids are not reused after a clear


def test_batch_ids_are_per_client(backend: Backend) -> None:
    m = backend.make()
    a, b = ClientIdentity(DEST, 1), ClientIdentity(DEST, 2)
    c = ClientIdentity("other", 1)
    for client in (a, b, c):
        m.subscribe(client)
    assert [m.add_batch(a, build_range(i)) for i in range(3)] == [1, 2, 3]
    assert [m.add_batch(b, build_range(i)) for i in range(2)] == [1, 2]
    assert m.add_batch(c, build_range(0)) == 1
    assert m.remove_batch(b, 1) == build_range(0)
    assert list(m.list_all_batchs(a)) == [1, 2, 3]
    assert list(m.list_all_batchs(b)) == [2]


def test_unsubscribe_drops_cursor_and_batches(backend: Backend) -> None:
    m = backend.make()
    client = ClientIdentity(DEST, 1001)
    m.subscribe(client)
    m.update_cursor(client, build_position(1))
    m.add_batch(client, build_range(1))
    m.unsubscribe(client)
    m.subscribe(client)
    assert m.get_cursor(client) is None
    assert m.list_all_batchs(client) == {}


def test_concurrent_clients(backend: Backend) -> None:
    m = backend.make()
    errors: list[BaseException] = []

    def work(cid: int) -> None:
        try:
            client = ClientIdentity(DEST, cid)
            m.subscribe(client)
            ids = [m.add_batch(client, build_range(i)) for i in range(5)]
            assert ids == [1, 2, 3, 4, 5]
            for i, bid in enumerate(ids):
                assert m.remove_batch(client, bid) == build_range(i)
                m.update_cursor(client, build_range(i).ack)
            assert m.get_cursor(client) == build_position(4)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(cid,)) for cid in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert {c.client_id for c in m.list_all_subscribe_info(DEST)} == {1, 2, 3, 4, 5}


# ---------------------------------------------------------------------------- persistence
def test_restart_keeps_subscriptions_and_cursors(backend: Backend) -> None:
    m = backend.make()
    c1 = ClientIdentity(DEST, 1001, r".*\..*")
    c2 = ClientIdentity(DEST, 1002)
    m.subscribe(c1)
    m.subscribe(c2)
    m.update_cursor(c1, build_position(7))
    m.add_batch(c1, build_range(1))
    m.add_batch(c1, build_range(2))
    m.stop()  # flushes

    n = backend.make()
    if not backend.persistent:  # memory: a new manager starts empty
        assert n.list_all_subscribe_info(DEST) == [] and n.get_cursor(c1) is None
        return
    infos = n.list_all_subscribe_info(DEST)
    assert infos == [c1, c2]
    assert [c.filter for c in infos] == [r".*\..*", None]
    assert n.get_cursor(c1) == build_position(7)
    assert n.get_cursor(c2) is None
    if backend.persists_batches:
        assert n.list_all_batchs(c1) == {1: build_range(1), 2: build_range(2)}
        assert n.add_batch(c1, build_range(3)) == 3
    else:
        assert n.list_all_batchs(c1) == {}


def test_file_meta_dat_layout(tmp_path: Path) -> None:
    m = FileMixedMetaManager(tmp_path, 60)
    m.start()
    client = ClientIdentity("example", 1001, r".*\..*")
    m.subscribe(client)
    pos = LogPosition(
        LogIdentity(("mysql", 3306), -1),
        EntryPosition("mysql-bin.000032", 696, 1, "", 1589189724000),
    )
    m.update_cursor(client, pos)
    m.stop()
    text = (tmp_path / "example" / "meta.dat").read_text()
    # Canal's layout (research §2.6), byte for byte.
    assert text == (
        '{"clientDatas":[{"clientIdentity":{"clientId":1001,"destination":"example","filter":".*\\\\..*"},'
        '"cursor":{"identity":{"slaveId":-1,"sourceAddress":{"address":"mysql","port":3306}},'
        '"postion":{"gtid":"","included":false,"journalName":"mysql-bin.000032","position":696,'
        '"serverId":1,"timestamp":1589189724000}}}],"destination":"example"}'
    )
    n = FileMixedMetaManager(tmp_path, 60)
    n.start()
    assert n.get_cursor(client) == pos
    assert n.list_all_subscribe_info("example")[0].filter == r".*\..*"
    n.unsubscribe(client)  # written at once, also when the list becomes empty
    assert json.loads((tmp_path / "example" / "meta.dat").read_text()) == {
        "clientDatas": [],
        "destination": "example",
    }
    n.stop()


def test_file_cursor_is_flushed_periodically(tmp_path: Path) -> None:
    m = FileMixedMetaManager(tmp_path, 0.05)
    m.start()
    try:
        client = ClientIdentity(DEST, 1001)
        m.subscribe(client)
        m.update_cursor(client, build_position(3))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            doc = json.loads((tmp_path / DEST / "meta.dat").read_text())
            if "cursor" in doc["clientDatas"][0]:
                break
            time.sleep(0.02)
        assert LogPosition.from_dict(doc["clientDatas"][0]["cursor"]) == build_position(3)
    finally:
        m.stop()


def test_file_reads_canal_written_meta_dat(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "meta.dat").write_text(
        '{"clientDatas":[{"clientIdentity":{"clientId":1001,"destination":"example","filter":".*\\\\..*"},'
        '"cursor":{"identity":{"slaveId":-1,"sourceAddress":{"address":"mysql","port":3306}},'
        '"postion":{"gtid":"","included":false,"journalName":"mysql-bin.000032","position":696,'
        '"serverId":1,"timestamp":1589189724000}}}],"destination":"example"}'
    )
    m = FileMixedMetaManager(tmp_path)
    m.start()
    try:
        cursor = m.get_cursor(ClientIdentity("example", 1001))
        assert cursor is not None
        assert (cursor.postion.journal_name, cursor.postion.position) == ("mysql-bin.000032", 696)
    finally:
        m.stop()


def test_file_torn_meta_dat_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "meta.dat").write_bytes(b"\0" * 64)  # Canal #3581 after a power loss
    with pytest.raises(CanalMetaManagerError, match="meta.dat"):
        FileMixedMetaManager(tmp_path).start()


def test_file_write_is_atomic_under_concurrent_reads(tmp_path: Path) -> None:
    m = FileMixedMetaManager(tmp_path, 3600)
    m.start()
    client = ClientIdentity(DEST, 1001, "x" * 2000)  # a bigger file: a torn read is likelier
    for cid in range(1, 30):
        m.subscribe(ClientIdentity(DEST, cid, "f" * 200))
    m.subscribe(client)
    path = tmp_path / DEST / "meta.dat"
    stop = threading.Event()
    reads = 0
    bad: list[str] = []

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            data = path.read_bytes()
            reads += 1
            try:
                doc = json.loads(data)
                assert len(doc["clientDatas"]) == 30
            except Exception as exc:
                bad.append(f"{exc}: {data[:80]!r}")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(300):
            m.update_cursor(client, build_position(i))
            m.flush()
    finally:
        stop.set()
        t.join()
        m.stop()
    assert reads > 0
    assert not bad, bad[:3]
    assert [p.name for p in (tmp_path / DEST).iterdir()] == ["meta.dat"]  # no temp file left


def test_file_crash_between_temp_write_and_rename_keeps_old_file(tmp_path: Path) -> None:
    client = ClientIdentity(DEST, 1001)
    m = FileMixedMetaManager(tmp_path, 3600)
    m.start()
    m.subscribe(client)
    m.update_cursor(client, build_position(1))
    m.stop()
    path = tmp_path / DEST / "meta.dat"
    old = path.read_bytes()

    # A child process writes a new cursor and "loses power" right before the rename.
    code = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_meta import build_position
        from pycanal.meta import ClientIdentity, FileMixedMetaManager
        import pycanal.meta.file as f
        m = FileMixedMetaManager({str(tmp_path)!r}, 3600)
        m.start()
        m.update_cursor(ClientIdentity({DEST!r}, 1001), build_position(2))
        f.os.replace = lambda *a, **k: os._exit(17)
        m.flush()
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, timeout=60)
    assert proc.returncode == 17, proc.stderr.decode()
    assert path.read_bytes() == old
    leftovers = [p.name for p in (tmp_path / DEST).iterdir() if p.name != "meta.dat"]
    assert len(leftovers) == 1 and leftovers[0].endswith(".tmp")  # the complete, never renamed new file

    n = FileMixedMetaManager(tmp_path, 3600)
    n.start()
    try:
        assert n.get_cursor(client) == build_position(1)
        assert [p.name for p in (tmp_path / DEST).iterdir()] == ["meta.dat"]  # the stale temp is gone
    finally:
        n.stop()


def test_file_failed_flush_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pycanal.meta.file as file_mod

    m = FileMixedMetaManager(tmp_path, 3600)
    m.start()
    client = ClientIdentity(DEST, 1001)
    m.subscribe(client)
    m.update_cursor(client, build_position(5))
    real = file_mod.os.replace

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(file_mod.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        m.flush()
    assert "cursor" not in json.loads((tmp_path / DEST / "meta.dat").read_text())["clientDatas"][0]
    monkeypatch.setattr(file_mod.os, "replace", real)
    m.stop()  # the destination is still dirty: the final flush writes it
    doc = json.loads((tmp_path / DEST / "meta.dat").read_text())
    assert LogPosition.from_dict(doc["clientDatas"][0]["cursor"]) == build_position(5)


# ---------------------------------------------------------------------------- ZooKeeper layout
def test_zookeeper_layout_is_canals(zk_chroot: str, zookeeper) -> None:
    m = ZooKeeperMetaManager(zk_chroot)
    m.start()
    raw = zookeeper.client(chroot=zk_chroot[zk_chroot.index("/") :])
    try:
        client = ClientIdentity(DEST, 1001, r".*\..*")
        m.subscribe(client)
        m.update_cursor(client, build_position(1))
        bid = m.add_batch(client, build_range(1))
        assert raw.get(filter_path(DEST, 1001))[0] == rb".*\..*"
        cursor = json.loads(raw.get(cursor_path(DEST, 1001))[0])
        assert cursor["@type"] == "com.alibaba.otter.canal.protocol.position.LogPosition"
        assert cursor["postion"]["journalName"] == "mysql-bin.000001"
        assert raw.get_children(f"/otter/canal/destinations/{DEST}/1001/mark") == ["0000000001"]
        mark = json.loads(raw.get(batch_mark_path(DEST, 1001, bid))[0])
        assert mark["@type"] == "com.alibaba.otter.canal.protocol.position.PositionRange"
        assert mark["endSeq"] == 10 and mark["start"]["@type"].endswith(".LogPosition")
        # Nodes that are not clients (Canal's running/cluster/parse) are not subscriptions.
        raw.ensure_path(f"/otter/canal/destinations/{DEST}/running")
        raw.ensure_path(f"/otter/canal/destinations/{DEST}/parse")
        assert m.list_all_subscribe_info(DEST) == [client]
        m.unsubscribe(client)
        assert raw.exists(f"/otter/canal/destinations/{DEST}/1001") is None
    finally:
        raw.stop()
        raw.close()
        m.stop()


def test_zookeeper_shared_kazoo_client_is_not_stopped(zk_chroot: str, zookeeper) -> None:
    kz = zookeeper.client(chroot=zk_chroot[zk_chroot.index("/") :])
    try:
        m = ZooKeeperMetaManager(kz)
        m.start()
        m.subscribe(ClientIdentity(DEST, 7))
        m.stop()
        assert kz.connected
        assert kz.get_children(f"/otter/canal/destinations/{DEST}") == ["7"]
    finally:
        kz.stop()
        kz.close()


def test_period_mixed_flushes_cursor_periodically(zk_chroot: str) -> None:
    m = PeriodMixedMetaManager(zk_chroot, 0.05)
    m.start()
    z = ZooKeeperMetaManager(zk_chroot)
    z.start()
    try:
        client = ClientIdentity(DEST, 1001)
        m.subscribe(client)
        assert z.has_subscribe(client)  # subscriptions are written at once
        m.update_cursor(client, build_position(9))
        deadline = time.monotonic() + 10
        while z.get_cursor(client) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert z.get_cursor(client) == build_position(9)
        m.add_batch(client, build_range(1))
        assert z.list_all_batchs(client) == {}  # batches stay in memory
    finally:
        z.stop()
        m.stop()


def test_period_mixed_slow_period_writes_on_stop(zk_chroot: str) -> None:
    m = PeriodMixedMetaManager(zk_chroot, 3600)
    m.start()
    client = ClientIdentity(DEST, 1001)
    m.subscribe(client)
    m.update_cursor(client, build_position(4))
    z = ZooKeeperMetaManager(zk_chroot)
    z.start()
    try:
        assert z.get_cursor(client) is None  # not flushed yet
        m.stop()
        assert z.get_cursor(client) == build_position(4)
    finally:
        z.stop()
