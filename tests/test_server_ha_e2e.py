"""Issue 5's active/standby test: two ``pycanal server`` processes under ZooKeeper HA and a
``ClusterConnector``; the active server is SIGKILLed while a workload runs; every row is
delivered and the failover gap (last row from the old server to the first from the new) is
reported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pycanal.client import ClusterConnector
from pycanal.common.zookeeper import server_running_path
from pycanal.ha.paths import ServerRunningData
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port

pytestmark = pytest.mark.mariadb

DEST = "hae2e"
ROWS = 6_000
SESSION = 2.0


def write_conf(root: Path, db: PrivateMariaDB, zk_hosts: str, start: tuple[str, int]) -> None:
    (root / DEST).mkdir(parents=True)
    (root / "canal.properties").write_text(
        "canal.ip = 127.0.0.1\n"
        f"canal.zkServers = {zk_hosts}\n"
        "canal.zookeeper.flush.period = 200\n"
        f"canal.destinations = {DEST}\n"
        "canal.conf.dir = .\n"
        "canal.auto.scan = false\n"
    )
    (root / DEST / "instance.properties").write_text(
        f"canal.instance.master.address = {db.host}:{db.port}\n"
        f"canal.instance.master.journal.name = {start[0]}\n"
        f"canal.instance.master.position = {start[1]}\n"
        f"canal.instance.dbUsername = {db.repl_user}\n"
        f"canal.instance.dbPassword = {db.repl_password}\n"
        "canal.instance.filter.regex = pycanal\\\\.ha_rows\n"
    )


def start_server(conf: Path, port: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, CANAL_PORT=str(port), CANAL_METRICS_PULL_PORT=str(free_port()))
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pycanal.cli", "server", "--conf", str(conf)]
            + ["--zk-session-timeout", str(SESSION)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def test_active_server_killed_every_row_delivered(zookeeper, tmp_path: Path) -> None:
    chroot = "/ha-e2e"
    admin = zookeeper.client()
    admin.ensure_path(chroot)
    zk_hosts = zookeeper.hosts + chroot
    with PrivateMariaDB(server_id=51) as db:
        db.execute("CREATE TABLE pycanal.ha_rows (id INT PRIMARY KEY)")
        conf = tmp_path / "conf"
        write_conf(conf, db, zk_hosts, db.current_binlog())
        ports = [free_port(), free_port()]
        procs = [start_server(conf, p, tmp_path / f"server{i}.log") for i, p in enumerate(ports)]
        errors: list[BaseException] = []

        def workload() -> None:
            try:
                with db.root_connection("pycanal") as conn, conn.cursor() as cur:
                    for t in range(ROWS // 20):
                        cur.execute(
                            "INSERT INTO ha_rows VALUES " + ",".join(f"({t * 20 + i})" for i in range(20))
                        )
                        conn.commit()
                        time.sleep(0.005)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        writer = threading.Thread(target=workload)
        client = ClusterConnector(zk_hosts, DEST, retry_interval=0.2, failover_timeout=60, zk_timeout=SESSION)
        got: list[tuple[float, str, int]] = []
        try:
            client.connect()
            client.subscribe()
            writer.start()
            killed = None
            deadline = time.monotonic() + 120
            for message in client.stream(batch_size=200, timeout=200):
                assert time.monotonic() < deadline, f"only {len(set(i for _, _, i in got))} rows"
                node = admin.get(f"{chroot}{server_running_path(DEST)}")[0] if killed is None else None
                active = ServerRunningData.from_json(node).address if node else "?"
                for e in message.entries:
                    if e.entryType == pb.ROWDATA and e.header.eventType == pb.INSERT:
                        for row in pb.RowChange.FromString(e.storeValue).rowDatas:
                            got.append((time.monotonic(), active, int(row.afterColumns[0].value)))
                if killed is None and len(got) > ROWS // 3:
                    port = int(active.rsplit(":", 1)[1])
                    victim = procs[ports.index(port)]
                    victim.send_signal(signal.SIGKILL)
                    victim.wait()
                    killed = (time.monotonic(), active)
                if len({i for _, _, i in got}) == ROWS:
                    break
            writer.join()
            assert not errors, errors
            ids = [i for _, _, i in got]
            assert set(ids) == set(range(ROWS)), "a row was lost"
            dups = len(ids) - len(set(ids))
            after = [t for t, _, i in got if t > killed[0]]
            gap = after[0] - killed[0]
            print(f"\nfailover: {gap:.2f}s from SIGKILL to the first row from the standby; {dups} rows twice")
            assert gap < 30
        finally:
            client.disconnect()
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=30)
            admin.stop()
            admin.close()
