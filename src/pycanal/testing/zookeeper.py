"""A private, throw-away ZooKeeper server for tests and the demo.

``PrivateZooKeeper`` runs the Debian ``zookeeper`` package's server (``/usr/share/java/zookeeper.jar``,
whose manifest ``Class-Path`` lists its dependencies) with the machine's Java directly — never the
package's system service or ``/etc/zookeeper``. It writes a ``zoo.cfg`` into a temporary directory
(``dataDir`` there, ``clientPort`` a free loopback port bound on ``127.0.0.1`` only, admin server off,
a small ``tickTime``), starts ``ZooKeeperServerMain`` (standalone) and waits until a kazoo client
connects.

    with PrivateZooKeeper() as zk:
        client = zk.client()             # a started KazooClient, stopped by you
        zk.hosts                         # "127.0.0.1:<port>"
        zk.pause(); zk.resume()          # SIGSTOP / SIGCONT, for session-expiry tests

:meth:`stop` terminates the server (SIGTERM, then SIGKILL) and removes the directory unless
``keep=True``. Several servers can run side by side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path

from ._process import PrivateServer, find_java

__all__ = ["PrivateZooKeeper", "ZooKeeperStartError", "find_zookeeper_jar"]

_JAR_CANDIDATES = ("/usr/share/java/zookeeper.jar",)


class ZooKeeperStartError(RuntimeError):
    """The private ZooKeeper could not be started or did not become ready."""


def find_zookeeper_jar() -> str:
    """The server jar of the Debian ``zookeeper`` package (``$PYCANAL_ZOOKEEPER_JAR`` overrides)."""
    override = os.environ.get("PYCANAL_ZOOKEEPER_JAR")
    for cand in (override, *_JAR_CANDIDATES):
        if cand and Path(cand).is_file():
            return cand
    raise FileNotFoundError(
        "ZooKeeper server jar not found (/usr/share/java/zookeeper.jar); run scripts/setup.sh "
        "(apt-get install zookeeper) or set PYCANAL_ZOOKEEPER_JAR"
    )


class PrivateZooKeeper(PrivateServer):
    """A standalone ZooKeeper in a temporary directory (see the module docstring).

    Parameters:
        tick_time: ``tickTime`` in ms (sessions may last 2..20 ticks).
        max_session_timeout: ``maxSessionTimeout`` in ms.
        keep: keep the temporary directory after :meth:`stop`.
        startup_timeout: seconds to wait for a client to connect.
        heap_mb: the JVM's ``-Xmx``.
        base_dir, die_with_parent: see :class:`~pycanal.testing._process.PrivateServer`.
    """

    name = "ZooKeeper"
    dir_prefix = "zookeeper"
    start_error = ZooKeeperStartError
    stop_grace = 10.0

    def __init__(
        self,
        *,
        tick_time: int = 200,
        max_session_timeout: int = 60_000,
        keep: bool = False,
        startup_timeout: float = 60.0,
        heap_mb: int = 128,
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            keep=keep, startup_timeout=startup_timeout, base_dir=base_dir, die_with_parent=die_with_parent
        )
        self.tick_time = int(tick_time)
        self.max_session_timeout = int(max_session_timeout)
        self.heap_mb = heap_mb
        self.data_dir: Path | None = None
        self.config_file: Path | None = None
        self.log_file: Path | None = None

    @property
    def hosts(self) -> str:
        """The kazoo / Canal ``zkServers`` connect string."""
        return f"{self.host}:{self.port}"

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): clients lose their connection, sessions expire later."""
        if not self.running:
            raise RuntimeError("PrivateZooKeeper is not running")
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Undo :meth:`pause` (SIGCONT)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def client(self, *, chroot: str = "", timeout: float = 10.0, **kwargs: object):  # -> KazooClient
        """A started ``KazooClient`` connected to this server (the caller stops it)."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.hosts + chroot, timeout=timeout, **kwargs)  # type: ignore[arg-type]
        client.start(timeout=timeout)
        return client

    # ------------------------------------------------------------------ internals
    def _start(self) -> None:
        assert self.root_dir is not None
        self.data_dir = self.root_dir / "data"
        self.data_dir.mkdir()
        self.config_file = self.root_dir / "zoo.cfg"
        self.log_file = self.root_dir / "zookeeper.out"
        self._launch_on_free_port(self._launch_and_wait)

    def _log_files(self) -> list[Path]:
        return [self.log_file] if self.log_file is not None else []

    def _write_config(self) -> None:
        assert self.config_file is not None and self.data_dir is not None
        self.config_file.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    f"maxSessionTimeout={self.max_session_timeout}",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    # Throw-away data: no preallocation of 64 MB transaction logs.
                    "preAllocSize=1024",
                    "forceSync=no",
                    "",
                ]
            )
        )

    def _command(self) -> list[str]:
        assert self.config_file is not None
        return [
            find_java(),
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start-up
            "-Xshare:auto",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            find_zookeeper_jar(),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.config_file),
        ]

    def _launch_and_wait(self) -> None:
        """Start the server on ``self.port`` and wait until a client connects."""
        assert self.root_dir is not None and self.log_file is not None
        self._write_config()
        self._launch(self._command(), self.log_file, cwd=self.root_dir)
        self._wait(
            lambda: None if self._port_open() and self._kazoo_ready() else f"served no client on {self.hosts}"
        )

    def _port_open(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            return s.connect_ex((self.host, self.port)) == 0

    def _kazoo_ready(self) -> bool:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.hosts, timeout=2.0, connection_retry=None)
        try:
            client.start(timeout=2.0)
            client.get_children("/")
            return True
        except Exception:
            return False
        finally:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
