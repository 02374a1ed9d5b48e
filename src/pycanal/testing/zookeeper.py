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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

from ._process import die_with_parent, emergency_cleanup, tail
from ._process import free_port as _free_port

__all__ = ["PrivateZooKeeper", "ZooKeeperStartError", "find_zookeeper_jar", "find_java"]

_JAR_CANDIDATES = ("/usr/share/java/zookeeper.jar",)


# ZooKeeper needs no clean shutdown when the test process dies.
_DIE_WITH_PARENT = die_with_parent(signal.SIGKILL)


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


def find_java() -> str:
    """The ``java`` binary: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise FileNotFoundError("java not found on PATH; install a JRE (openjdk-17-jre-headless)")
    return found


class PrivateZooKeeper:
    """A standalone ZooKeeper in a temporary directory (see the module docstring).

    Parameters:
        tick_time: ``tickTime`` in ms (sessions may last 2..20 ticks).
        max_session_timeout: ``maxSessionTimeout`` in ms.
        keep: keep the temporary directory after :meth:`stop`.
        startup_timeout: seconds to wait for a client to connect.
        heap_mb: the JVM's ``-Xmx``.
    """

    host = "127.0.0.1"

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
        self.tick_time = int(tick_time)
        self.max_session_timeout = int(max_session_timeout)
        self.keep = keep
        self.startup_timeout = startup_timeout
        self.heap_mb = heap_mb
        self._base_dir = base_dir
        self.die_with_parent = die_with_parent
        self.port = 0
        self.root_dir: Path | None = None
        self.data_dir: Path | None = None
        self.config_file: Path | None = None
        self.log_file: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0
        self._finalizer: weakref.finalize | None = None
        self._stopped = False
        self._paused = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> PrivateZooKeeper:
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def hosts(self) -> str:
        """The kazoo / Canal ``zkServers`` connect string."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> PrivateZooKeeper:
        if self.process is not None:
            raise RuntimeError("PrivateZooKeeper already started")
        t0 = time.monotonic()
        base = Path(self._base_dir) if self._base_dir is not None else Path(tempfile.gettempdir())
        self.root_dir = Path(tempfile.mkdtemp(prefix="pycanal-zookeeper-", dir=base))
        self.data_dir = self.root_dir / "data"
        self.data_dir.mkdir()
        self.config_file = self.root_dir / "zoo.cfg"
        self.log_file = self.root_dir / "zookeeper.out"
        self._finalizer = weakref.finalize(self, emergency_cleanup, None, self.root_dir, self.keep)
        try:
            for attempt in range(8):
                self.port = _free_port()
                if self._launch_and_wait():
                    break
                if attempt == 7:
                    raise ZooKeeperStartError(
                        f"ZooKeeper could not bind a free port after 8 attempts\n{tail(self.log_file)}"
                    )
        except BaseException:
            self._kill_quietly()
            self._finalizer()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Terminate the server and remove the temporary directory (unless ``keep``). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._kill_quietly()
        if self._finalizer is not None:
            self._finalizer.detach()
        if not self.keep and self.root_dir is not None:
            shutil.rmtree(self.root_dir, ignore_errors=True)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): clients lose their connection, sessions expire later."""
        if not self.running:
            raise RuntimeError("PrivateZooKeeper is not running")
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """Undo :meth:`pause` (SIGCONT)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
        self._paused = False

    def client(self, *, chroot: str = "", timeout: float = 10.0, **kwargs: object):  # -> KazooClient
        """A started ``KazooClient`` connected to this server (the caller stops it)."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.hosts + chroot, timeout=timeout, **kwargs)  # type: ignore[arg-type]
        client.start(timeout=timeout)
        return client

    # ------------------------------------------------------------------ internals
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

    def _launch_and_wait(self) -> bool:
        """Start the server on ``self.port``; True when a client connected, False on a port clash."""
        assert self.root_dir is not None and self.log_file is not None
        self._write_config()
        out = open(self.log_file, "wb")  # noqa: SIM115 - closed below
        try:
            self.process = subprocess.Popen(
                self._command(),
                cwd=self.root_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_DIE_WITH_PARENT
                if self.die_with_parent and sys.platform.startswith("linux")
                else None,
            )
        finally:
            out.close()
        assert self._finalizer is not None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, emergency_cleanup, self.process, self.root_dir, self.keep)

        deadline = time.monotonic() + self.startup_timeout
        while True:
            rc = self.process.poll()
            if rc is not None:
                log = tail(self.log_file)
                if "Address already in use" in log or "BindException" in log:
                    self.process = None
                    return False
                raise ZooKeeperStartError(f"ZooKeeper exited with code {rc} during start-up:\n{log}")
            if self._port_open() and self._kazoo_ready():
                return True
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper not ready after {self.startup_timeout}s on {self.hosts}\n{tail(self.log_file)}"
                )
            time.sleep(0.05)

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

    def _kill_quietly(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
