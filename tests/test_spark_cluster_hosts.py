"""Issue 40: the pipeline on a multi-host Spark standalone cluster, its lake in S3. The master and
each worker run in a network namespace of their own (``PrivateNetwork``: a bridge, addresses this
test makes, nothing routed off the machine); the driver, MariaDB, the pycanal server and the S3
server run in the root namespace at the bridge's address, nothing of it on loopback that another
host would need. ``pycanal pipeline --master spark://<master>:7077`` finds its own address on the
route to the master by itself. Mid-stream the worker's host is lost (every process in it
SIGKILLed) and a worker on another host joins: the job recovers without a restart (the new host's
executor runs its tasks), then the driver is SIGKILLed too and started again from its checkpoint;
the change log holds every row change of the binlog once and every table equals its source. With
``--apply-on executors``: the executors write the tables into S3. The driver's apply mode went
through the same losses here too until 2026-12-02 (162-209 s of the suite's serial lane a mode);
it meets a driver SIGKILL in test_spark_restart_backlog.py and test_spark_s3.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline_helpers import (
    await_exactly_once,
    binlog_positions,
    commits,
    embedded_server,
    shop_under_way,
    stop_job,
)
from pycanal.demo import TABLES
from pycanal.spark.check import compare_table
from pycanal.storage import lake_path
from pycanal.testing import PrivateMariaDB
from pycanal.testing.netns import Host, PrivateNetwork, netns_missing
from pycanal.testing.s3 import PrivateS3
from pycanal.testing.spark_cluster import SparkStandaloneCluster

pytestmark = [
    pytest.mark.mariadb,
    pytest.mark.skipif(netns_missing() is not None, reason=f"network namespaces: {netns_missing()}"),
]


@pytest.fixture
def net() -> Iterator[PrivateNetwork]:
    with PrivateNetwork() as network:
        yield network


def start_job(
    uri: str, address: str, master: str, apply_on: str, log: Path, env: dict[str, str]
) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pycanal.cli", "pipeline", "--address", address, "--destination", "shop",
             "--filter", "shop\\..*", "--lake", uri, "--trigger", "500 milliseconds", "--master", master,
             "--apply-on", apply_on, "--progress", "1"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ | env,
        )  # fmt: skip


def _ran_executors(work_dir: Path) -> bool:
    return bool(list(work_dir.glob("app-*/*/stderr")))


def test_pipeline_on_hosts_survives_losing_the_worker(
    net: PrivateNetwork, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply_on = "executors"
    master_host, first_host = net.host("master"), net.host("worker1")
    with (
        PrivateMariaDB(server_id=54, binlog_row_metadata="FULL") as db,
        PrivateS3(host=net.gateway) as s3,
        SparkStandaloneCluster(
            master_host=master_host, worker_hosts=[first_host], cores=2, port=7077
        ) as cluster,
    ):
        s3.create_bucket("lake")
        for key, value in s3.env().items():
            monkeypatch.setenv(key, value)  # this process reads the lake too
        assert cluster.master_url == f"spark://{master_host.address}:7077"
        start = db.current_binlog()
        server, tcp = embedded_server(db, "shop", start, "shop\\..*", host=net.gateway)
        uri = f"s3://lake/hosts-{apply_on}"
        lake, log = lake_path(uri), tmp_path / "job.log"
        address = f"{net.gateway}:{tcp.port}"
        # the first driver has no class archive (another cache directory) and says how to make one
        job = start_job(uri, address, cluster.master_url, apply_on, log,
                        s3.env() | {"PYCANAL_CACHE_DIR": str(tmp_path / "no-archive")})  # fmt: skip
        writer: threading.Thread | None = None
        try:
            work, writer = shop_under_way(db, lake, job, log, seconds=24, timeout=240)
            deadline = time.monotonic() + 240
            first_host.kill()  # the worker, its executor and their Python workers: the host is lost
            lost_at = commits(lake)
            second_dir = cluster.start_worker(net.host("worker2"))
            while not _ran_executors(second_dir):  # then the driver, once the new host's executor runs
                assert time.monotonic() < deadline and job.poll() is None, log.read_text()[-3000:]
                time.sleep(0.3)
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            job = start_job(uri, address, cluster.master_url, apply_on, log, s3.env())
            writer.join()
            assert work.error is None, work.error
            await_exactly_once(lake, binlog_positions(db, start), job, log, 240)
            assert commits(lake) > lost_at
            assert _ran_executors(cluster.root / "worker1") and _ran_executors(second_dir)
            with db.root_connection("shop") as conn:
                for table, key in TABLES.items():
                    check = compare_table(conn, lake, "shop", table, key)
                    assert check.equal, f"{table}: {check.first_difference}"
                    assert check.source_rows > 0
            text = log.read_text()
            assert f"(master {cluster.master_url})" in text and s3.secret_key not in text
            assert "applied up to batch" in text  # the progress lines
            # the second driver mapped this machine's class archive (scripts/setup.sh made it)
            assert text.count("python -m pycanal.spark.jvm") == 1
            lag = subprocess.run([sys.executable, "-m", "pycanal.cli", "lag", "--lake", uri],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            assert {line.split("\t")[0] for line in lag.stdout.splitlines()} == {f"shop.{t}" for t in TABLES}
            # the executors reached the driver at its address on the bridge, not at loopback
            stderr = "".join(p.read_text() for p in second_dir.glob("app-*/*/stderr"))
            assert f"spark://CoarseGrainedScheduler@{net.gateway}:" in stderr, stderr[-2000:]
        finally:
            if writer is not None:
                writer.join()
            stop_job(job)
            tcp.stop()
            server.stop()


def test_a_host_is_reached_only_on_the_bridge(net: PrivateNetwork) -> None:
    """The namespaces reach the root namespace's bridge address, not its loopback: a service bound
    to 127.0.0.1 is out of their reach, as on a real second machine (the cluster test has the
    hosts reach each other: the workers register with the master)."""
    one, two = net.host("one"), net.host("two")
    assert net.gateway not in (one.address, two.address) and one.address != two.address
    with PrivateS3(host=net.gateway) as on_bridge, PrivateS3() as on_loopback:
        for host in (one, two):
            assert _connects(host, net.gateway, on_bridge.port)
            assert not _connects(host, "127.0.0.1", on_loopback.port)


def _connects(host: Host, address: str, port: int) -> bool:
    probe = f"import socket; socket.create_connection(({address!r}, {port}), timeout=3).close()"
    return subprocess.run(host.command([sys.executable, "-c", probe]), capture_output=True).returncode == 0
