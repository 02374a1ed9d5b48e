"""Contract tests over every log-position manager (Canal's ``parse.index``), plus restart
persistence for the file and ZooKeeper ones (ZooKeeper against the real private server)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pycanal.common.zookeeper import parse_path
from pycanal.parse.index.base import LogPositionManager, LogPositionManagerError
from pycanal.parse.index.failback import FailbackLogPositionManager
from pycanal.parse.index.memory import MemoryLogPositionManager
from pycanal.parse.index.mixed import (
    PARSE_FILE_NAME,
    FileMixedLogPositionManager,
    PeriodMixedLogPositionManager,
)
from pycanal.parse.index.zookeeper import ZooKeeperLogPositionManager
from pycanal.protocol.position import LOG_POSITION_TYPE, EntryPosition, LogIdentity, LogPosition


def pos(file: str = "mysql-bin.000001", offset: int = 4, ts: int = 1_700_000_000_000) -> LogPosition:
    return LogPosition(
        LogIdentity(("127.0.0.1", 3306), 1234),
        EntryPosition(journal_name=file, position=offset, server_id=1, timestamp=ts, gtid=""),
    )


@pytest.fixture
def zk_chroot(request: pytest.FixtureRequest) -> Iterator[str]:
    zookeeper = request.getfixturevalue("zookeeper")
    chroot = f"/pycanal-parse-{uuid.uuid4().hex[:12]}"
    admin = zookeeper.client()
    admin.ensure_path(chroot)
    try:
        yield zookeeper.hosts + chroot
    finally:
        admin.delete(chroot, recursive=True)
        admin.stop()
        admin.close()


@dataclass
class Kind:
    name: str
    make: Callable[[], LogPositionManager]
    durable: bool  # a fresh manager over the same storage sees the positions after stop()


@pytest.fixture(params=["memory", "failback", "file", "zookeeper", "period_mixed", "failback_file"])
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Kind:
    name = request.param
    if name == "memory":
        return Kind(name, MemoryLogPositionManager, False)
    if name == "failback":
        return Kind(
            name,
            lambda: FailbackLogPositionManager(MemoryLogPositionManager(), MemoryLogPositionManager()),
            False,
        )
    if name == "file":
        return Kind(name, lambda: FileMixedLogPositionManager(tmp_path / "data", 0.05), True)
    if name == "failback_file":
        return Kind(
            name,
            lambda: FailbackLogPositionManager(
                MemoryLogPositionManager(), FileMixedLogPositionManager(tmp_path / "data", 0.05)
            ),
            False,  # the primary (memory) takes every persist
        )
    hosts = request.getfixturevalue("zk_chroot")
    if name == "zookeeper":
        return Kind(name, lambda: ZooKeeperLogPositionManager(hosts), True)
    return Kind(name, lambda: PeriodMixedLogPositionManager(hosts, 0.05), True)


def test_contract_persist_and_get(kind: Kind) -> None:
    with kind.make() as m:
        assert m.running
        assert m.get_latest_index_by("example") is None
        m.persist_log_position("example", pos(offset=100))
        assert m.get_latest_index_by("example") == pos(offset=100)
        m.persist_log_position("example", pos(offset=200))
        assert m.get_latest_index_by("example") == pos(offset=200)
        # destinations are independent
        assert m.get_latest_index_by("other") is None
        m.persist_log_position("other", pos("mysql-bin.000002", 4))
        assert m.get_latest_index_by("other") == pos("mysql-bin.000002", 4)
        assert m.get_latest_index_by("example") == pos(offset=200)
    assert not m.running


def test_contract_restart(kind: Kind) -> None:
    with kind.make() as m:
        m.persist_log_position("example", pos(offset=300))
    with kind.make() as m2:
        got = m2.get_latest_index_by("example")
        assert got == (pos(offset=300) if kind.durable else None)


def test_file_layout_is_canals(tmp_path: Path) -> None:
    m = FileMixedLogPositionManager(tmp_path, 60)
    m.start()
    m.persist_log_position("example", pos(offset=777))
    path = tmp_path / "example" / PARSE_FILE_NAME
    assert not path.exists()  # only flushed periodically
    m.flush()
    doc = json.loads(path.read_text())
    assert "@type" not in doc
    assert doc["postion"]["journalName"] == "mysql-bin.000001"
    assert doc["postion"]["position"] == 777
    assert doc["identity"] == {"slaveId": 1234, "sourceAddress": {"address": "127.0.0.1", "port": 3306}}
    m.persist_log_position("example", pos(offset=778))
    m.stop()  # stop flushes
    assert json.loads(path.read_text())["postion"]["position"] == 778
    assert [p.name for p in (tmp_path / "example").iterdir()] == [PARSE_FILE_NAME]  # no temp files


def test_file_flushes_periodically(tmp_path: Path) -> None:
    with FileMixedLogPositionManager(tmp_path, 0.05) as m:
        m.persist_log_position("example", pos(offset=42))
        path = tmp_path / "example" / PARSE_FILE_NAME
        deadline = time.monotonic() + 5
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert LogPosition.from_json(path.read_bytes()) == pos(offset=42)


def test_file_reads_canal_written_file(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / PARSE_FILE_NAME).write_text(
        '{"identity":{"slaveId":-1,"sourceAddress":{"address":"mysql","port":3306}},'
        '"postion":{"gtid":"","included":false,"journalName":"mysql-bin.000032","position":696,'
        '"serverId":1,"timestamp":1589189724000}}'
    )
    with FileMixedLogPositionManager(tmp_path) as m:
        got = m.get_latest_index_by("example")
    assert got is not None
    assert got.identity.source_address == ("mysql", 3306)
    assert (got.postion.journal_name, got.postion.position) == ("mysql-bin.000032", 696)


def test_file_corrupt_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / PARSE_FILE_NAME).write_text("{not json")
    with (
        FileMixedLogPositionManager(tmp_path) as m,
        pytest.raises(LogPositionManagerError, match="parse.dat"),
    ):
        m.get_latest_index_by("example")


def test_file_bad_period() -> None:
    with pytest.raises(ValueError):
        FileMixedLogPositionManager("/nonexistent", 0)


def test_failback_uses_secondary_when_primary_fails(tmp_path: Path) -> None:
    class Broken(MemoryLogPositionManager):
        def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
            raise LogPositionManagerError("down")

    secondary = FileMixedLogPositionManager(tmp_path, 60)
    with FailbackLogPositionManager(Broken(), secondary) as m:
        m.persist_log_position("example", pos(offset=9))
        assert m.get_latest_index_by("example") == pos(offset=9)
    assert LogPosition.from_json((tmp_path / "example" / PARSE_FILE_NAME).read_bytes()) == pos(offset=9)


def test_zookeeper_layout_is_canals(zk_chroot: str, zookeeper) -> None:
    with ZooKeeperLogPositionManager(zk_chroot) as m:
        m.persist_log_position("example", pos(offset=555))
    raw = zookeeper.client(chroot=zk_chroot[zk_chroot.index("/") :])
    try:
        data, _ = raw.get(parse_path("example"))
    finally:
        raw.stop()
        raw.close()
    assert parse_path("example") == "/otter/canal/destinations/example/parse"
    doc = json.loads(data)
    assert doc["@type"] == LOG_POSITION_TYPE
    assert doc["postion"]["position"] == 555


def test_zookeeper_shared_client_not_stopped(zk_chroot: str, zookeeper) -> None:
    kz = zookeeper.client(chroot=zk_chroot[zk_chroot.index("/") :])
    try:
        with ZooKeeperLogPositionManager(kz) as m:
            m.persist_log_position("example", pos(offset=1))
        assert kz.connected
        assert ZooKeeperLogPositionManager(kz).__enter__().get_latest_index_by("example") == pos(offset=1)
    finally:
        kz.stop()
        kz.close()


def test_period_mixed_flushes_periodically_and_on_stop(zk_chroot: str) -> None:
    z = ZooKeeperLogPositionManager(zk_chroot)
    z.start()
    try:
        m = PeriodMixedLogPositionManager(zk_chroot, 0.05)
        m.start()
        m.persist_log_position("example", pos(offset=10))
        deadline = time.monotonic() + 5
        while z.get_latest_index_by("example") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert z.get_latest_index_by("example") == pos(offset=10)
        m.stop()

        slow = PeriodMixedLogPositionManager(zk_chroot, 3600)
        slow.start()
        assert slow.get_latest_index_by("example") == pos(offset=10)
        slow.persist_log_position("example", pos(offset=11))
        assert z.get_latest_index_by("example") == pos(offset=10)
        slow.stop()
        assert z.get_latest_index_by("example") == pos(offset=11)
    finally:
        z.stop()
