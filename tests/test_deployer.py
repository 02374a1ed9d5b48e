"""``pycanal.deployer.controller``: a Canal conf dir built in tmp for a private MariaDB, served by the
embedded server; Canal's key mapping and meta modes; auto-scan add / reload / remove."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pycanal.config import CanalConfig
from pycanal.deployer.controller import Deployer, build_instance, build_meta_manager, is_lazy
from pycanal.meta import ClientIdentity, FileMixedMetaManager, MemoryMetaManager, PeriodMixedMetaManager
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.server import CanalServerWithEmbedded
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=41) as server:
        yield server


def write_conf(root: Path, server: dict[str, str], destinations: dict[str, dict[str, str]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "canal.properties").write_text("".join(f"{k} = {v}\n" for k, v in server.items()))
    for dest, values in destinations.items():
        write_instance(root, dest, values)
    return root


def write_instance(root: Path, dest: str, values: dict[str, str]) -> None:
    (root / dest).mkdir(exist_ok=True)
    (root / dest / "instance.properties").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))


def make_table(db: PrivateMariaDB, name: str) -> tuple[str, int]:
    db.execute(f"CREATE TABLE pycanal.{name} (id INT PRIMARY KEY, v VARCHAR(40))")
    return db.current_binlog()


def insert(db: PrivateMariaDB, table: str, start: int, txns: int, per_txn: int = 10) -> list[int]:
    conn = db.root_connection("pycanal")
    ids: list[int] = []
    try:
        with conn.cursor() as cur:
            for t in range(txns):
                rows = [(start + t * per_txn + i, f"r{t}-{i}") for i in range(per_txn)]
                cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows)
                conn.commit()
                ids += [r[0] for r in rows]
    finally:
        conn.close()
    return ids


def instance_props(db: PrivateMariaDB, table: str, start: tuple[str, int], **extra: str) -> dict[str, str]:
    return {
        # no master address here: the environment override points it at the private server
        "canal.instance.master.journal.name": start[0],
        "canal.instance.master.position": str(start[1]),
        "canal.instance.dbUsername": db.repl_user,
        "canal.instance.dbPassword": db.repl_password,
        "canal.instance.filter.regex": f"pycanal\\\\.{table}",
        "canal.instance.transaction.size": "256",
        **extra,
    }


def server_props(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "canal.destinations": "",
        "canal.conf.dir": ".",
        "canal.file.data.dir": str(tmp / "data"),
        "canal.file.flush.period": "200",
        "canal.auto.scan": "false",
        "canal.instance.memory.buffer.size": "1024",
        "canal.instance.memory.batch.mode": "ITEMSIZE",
        **extra,
    }


def env_for(db: PrivateMariaDB) -> dict[str, str]:
    return {"CANAL_INSTANCE_MASTER_ADDRESS": f"{db.host}:{db.port}"}


def consume(server: CanalServerWithEmbedded, client: ClientIdentity, table: str, expected: int) -> list[int]:
    got: list[int] = []
    end = time.monotonic() + 60
    while len(got) < expected:
        assert time.monotonic() < end, f"only {len(got)} of {expected} rows"
        msg = server.get_without_ack(client, 100, timeout=0.2)
        if msg.id == -1:
            continue
        for e in msg.parsed_entries():
            if e.entryType == pb.ROWDATA and e.header.tableName == table:
                change = pb.RowChange.FromString(e.storeValue)
                got += [int(c.value) for r in change.rowDatas for c in r.afterColumns if c.name == "id"]
        server.ack(client, msg.id)
    return got


# ---------------------------------------------------------------------------- mapping (no server)
def test_key_mapping_and_meta_modes(tmp_path: Path) -> None:
    root = write_conf(
        tmp_path / "conf",
        server_props(tmp_path, **{"canal.destinations": "m", "canal.instance.m.lazy": "true"}),
        {
            "m": {
                "canal.instance.master.address": "10.0.0.1:3307",
                "canal.instance.master.journal.name": "mysql-bin.000003",
                "canal.instance.master.position": "1234",
                "canal.instance.standby.address": "10.0.0.2:3308",
                "canal.instance.standby.timestamp": "1700000000000",
                "canal.instance.gtidon": "true",
                "canal.instance.mysql.slaveId": "77",
                "canal.instance.dbUsername": "u",
                "canal.instance.dbPassword": "p",
                "canal.instance.filter.regex": "a\\\\..*",
                "canal.instance.filter.black.regex": "a\\\\.tmp_.*",
                "canal.instance.fallbackIntervalInSeconds": "7",
                "canal.instance.detecting.enable": "true",
                "canal.instance.detecting.interval.time": "2",
                "canal.instance.detecting.retry.threshold": "4",
                "canal.instance.get.ddl.isolation": "true",
                "canal.instance.memory.buffer.memunit": "512",
                "canal.instance.memory.rawEntry": "false",
            }
        },
    )
    cfg = CanalConfig.load(root, environ={})
    inst = build_instance(cfg, "m")
    p = inst.parser_settings
    assert p["master_address"] == ("10.0.0.1", 3307)
    assert (p["master_position"].journal_name, p["master_position"].position) == ("mysql-bin.000003", 1234)
    assert p["standby_address"] == ("10.0.0.2", 3308) and p["standby_position"].timestamp == 1700000000000
    assert (p["gtid_mode"], p["slave_id"], p["username"], p["password"]) == (True, 77, "u", "p")
    assert (p["transaction_size"], p["fallback_interval_seconds"]) == (1024, 7)
    assert (p["detecting_enable"], p["detecting_interval"], p["detecting_retry_times"]) == (True, 2.0, 4)
    assert p["schema_history_path"] == str(tmp_path / "data" / "m" / "tsdb.sqlite")
    s = inst.store_settings
    assert s == {
        "buffer_size": 1024,
        "buffer_mem_unit": 512,
        "batch_mode": "ITEMSIZE",
        "ddl_isolation": True,
        "raw": False,
    }
    assert isinstance(inst.meta_manager, FileMixedMetaManager)
    assert inst.meta_manager.data_dir == tmp_path / "data" and inst.meta_manager.period == 0.2
    assert is_lazy(cfg, "m") and not is_lazy(cfg, "other")
    assert is_lazy(CanalConfig.load(root, environ={}, overrides={"canal.instance.global.lazy": "true"}), "x")

    memory = CanalConfig.load(root, environ={}, overrides={"canal.file.data.dir": ""})
    assert isinstance(build_meta_manager(memory), MemoryMetaManager)
    zk = CanalConfig.load(
        root, environ={}, overrides={"canal.zkServers": "127.0.0.1:1", "canal.zookeeper.flush.period": "500"}
    )
    meta = build_meta_manager(zk)
    assert isinstance(meta, PeriodMixedMetaManager) and meta.period == 0.5

    # no standby, no start position, slaveId 0: a random replica id
    write_instance(root, "n", {"canal.instance.tsdb.enable": "false"})
    p = build_instance(cfg, "n").parser_settings
    assert p["master_position"] is None and "standby_address" not in p and p["slave_id"] is None
    assert "schema_history_path" not in p


# ---------------------------------------------------------------------------- live
def test_conf_dir_streams_to_embedded_client(db: PrivateMariaDB, tmp_path: Path) -> None:
    start = make_table(db, "dep_a")
    root = write_conf(
        tmp_path / "conf",
        server_props(tmp_path, **{"canal.destinations": "a", "canal.instance.global.lazy": "true"}),
        {"a": instance_props(db, "dep_a", start)},
    )
    with Deployer(root, environ=env_for(db)) as deployer:
        server = deployer.server
        assert deployer.destinations == ["a"] and not server.is_start("a")  # lazy
        client = ClientIdentity("a", 1001, "")
        server.subscribe(client)
        assert server.is_start("a")
        expected = insert(db, "dep_a", 0, 50)
        assert consume(server, client, "dep_a", len(expected)) == expected
        assert deployer.scanner is None  # canal.auto.scan=false
    meta = (tmp_path / "data" / "a" / "meta.dat").read_text()
    assert '"destination":"a"' in meta and "journalName" in meta


def test_auto_scan_add_reload_remove(db: PrivateMariaDB, tmp_path: Path) -> None:
    s1 = make_table(db, "dep_b1")
    s2 = make_table(db, "dep_b2")
    root = write_conf(
        tmp_path / "conf",
        server_props(
            tmp_path,
            **{"canal.destinations": "b1", "canal.auto.scan": "true", "canal.auto.scan.interval": "3600"},
        ),
        {"b1": instance_props(db, "dep_b1", s1)},
    )
    with Deployer(root, environ=env_for(db)) as deployer:
        server = deployer.server
        assert server.is_start("b1")  # not lazy
        assert deployer.scan_once() == []
        # add: a new destination directory is deployed and serves
        write_instance(root, "b2", instance_props(db, "dep_b2", s2))
        events = deployer.scan_once()
        assert [(e.kind, e.destination) for e in events] == [("add", "b2")]
        assert sorted(deployer.destinations) == ["b1", "b2"] and server.is_start("b2")
        c2 = ClientIdentity("b2", 1001, "")
        server.subscribe(c2)
        first = insert(db, "dep_b2", 0, 5)
        assert consume(server, c2, "dep_b2", len(first)) == first
        old = server.instance("b2")
        # reload: an edited instance.properties restarts it (new instance, new settings); the
        # client's cursor survives in meta.dat, so it resumes after what it acked
        write_instance(
            root, "b2", instance_props(db, "dep_b2", s2, **{"canal.instance.transaction.size": "128"})
        )
        events = deployer.scan_once()
        assert [(e.kind, e.destination) for e in events] == [("reload", "b2")]
        new = server.instance("b2")
        assert new is not old and not old.is_start and new.is_start
        assert new.parser_settings["transaction_size"] == 128
        server.subscribe(c2)
        second = insert(db, "dep_b2", 1000, 5)
        assert consume(server, c2, "dep_b2", len(second)) == second
        # remove: the directory goes away, the instance stops and is no longer served
        (root / "b2" / "instance.properties").unlink()
        events = deployer.scan_once()
        assert [(e.kind, e.destination) for e in events] == [("remove", "b2")]
        assert deployer.destinations == ["b1"] and not new.is_start
        assert server.is_start("b1")


def test_auto_scan_thread(db: PrivateMariaDB, tmp_path: Path) -> None:
    s = make_table(db, "dep_c")
    root = write_conf(
        tmp_path / "conf",
        server_props(tmp_path, **{"canal.auto.scan": "true", "canal.auto.scan.interval": "1"}),
        {},
    )
    with Deployer(root, environ=env_for(db)) as deployer:
        assert deployer.destinations == []
        write_instance(root, "c", instance_props(db, "dep_c", s))
        end = time.monotonic() + 10
        while not deployer.server.is_start("c"):
            assert time.monotonic() < end, "the scanner thread did not add the destination"
            time.sleep(0.1)
        client = ClientIdentity("c", 1001, "")
        deployer.server.subscribe(client)
        rows = insert(db, "dep_c", 0, 3)
        assert consume(deployer.server, client, "dep_c", len(rows)) == rows
    assert deployer.scanner is None
