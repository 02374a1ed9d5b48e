"""A private Spark standalone cluster for tests: a master and workers on loopback, started from
PySpark's own jars with ``spark-class`` (no Spark installation, no Docker).

    with SparkStandaloneCluster(workers=2) as cluster:
        cluster.master_url               # "spark://127.0.0.1:<port>"
        spark_session(dir, master=cluster.master_url)

Each process gets free loopback ports (its web UI too; the master's REST server is off) and a
directory of its own under a temporary root; :meth:`start` waits until the master is alive and
every worker registered. :meth:`stop` terminates them (SIGTERM, then SIGKILL) and removes the
root unless ``keep=True``. They die with the thread that started them (PR_SET_PDEATHSIG).

On hosts of a :class:`~pycanal.testing.netns.PrivateNetwork` (each process in a network namespace
of its own, at its address) the cluster is a multi-host one:

    with SparkStandaloneCluster(master_host=net.host("master"), worker_hosts=[net.host("w1")], port=7077):
        ...
        cluster.start_worker(net.host("w2"))   # another host joins
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ._process import free_port, spawn, tail, terminate
from .netns import LOOPBACK, Host

__all__ = ["SparkClusterStartError", "SparkStandaloneCluster", "spark_home"]


class SparkClusterStartError(RuntimeError):
    """The cluster could not be started (the message holds the end of the process's log)."""


def spark_home() -> Path:
    """PySpark's install directory: it holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each (see the module);
    ``master_host`` and ``worker_hosts`` (one per worker): where they run (default: loopback);
    ``port``: the master's (default: a free one)."""

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        keep: bool = False,
        master_host: Host = LOOPBACK,
        worker_hosts: Sequence[Host] | None = None,
        port: int | None = None,
    ) -> None:
        self.hosts = list(worker_hosts) if worker_hosts is not None else [LOOPBACK] * workers
        self.cores, self.memory, self.keep = cores, memory, keep
        self.master_host = master_host
        self.root = Path(tempfile.mkdtemp(prefix="pycanal-spark-cluster-"))
        self.port = port or 0
        self._procs: list[subprocess.Popen[bytes]] = []
        self._workers = 0

    @property
    def master_url(self) -> str:
        return f"spark://{self.master_host.address}:{self.port}"

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, host: Host, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        home = spark_home()
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP=host.address,
                   SPARK_LOG_DIR=str(self.root / "logs"), SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")  # fmt: skip
        log = self.root / f"{name}.log"
        proc = spawn(
            host.command([str(home / "bin" / "spark-class"), *args]),
            log,
            death_signal=signal.SIGKILL,
            cwd=self.root,
            env=env,
        )
        self._procs.append(proc)
        return proc, log

    def _wait_for(
        self, proc: subprocess.Popen[bytes], log: Path, text: str, what: str, timeout: float = 90
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise SparkClusterStartError(f"{what} did not start:\n{tail(log)}")

    def start(self) -> SparkStandaloneCluster:
        self.port = self.port or free_port()
        master, log = self._spawn(
            "master", self.master_host, "org.apache.spark.deploy.master.Master",
            "--host", self.master_host.address, "--port", str(self.port), "--webui-port", str(free_port()),
        )  # fmt: skip
        self._wait_for(master, log, "I have been elected leader", f"the Spark master at {self.master_url}")
        for host in self.hosts:
            self.start_worker(host)
        return self

    def start_worker(self, host: Host = LOOPBACK) -> Path:
        """One more worker, on ``host``, registered; its work directory (``worker<n>``, n from 1)."""
        self._workers += 1
        name = f"worker{self._workers}"
        worker, log = self._spawn(
            name, host, "org.apache.spark.deploy.worker.Worker", "--host", host.address,
            "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
            "--work-dir", str(self.root / name), self.master_url,
        )  # fmt: skip
        self._wait_for(worker, log, "Successfully registered with master", f"Spark {name} on {host.address}")
        return self.root / name

    def stop(self) -> None:
        terminate(reversed(self._procs), 15)
        self._procs.clear()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
