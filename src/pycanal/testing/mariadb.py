"""A private, throw-away MariaDB server for tests, benchmarks and the demo.

``PrivateMariaDB`` initialises a fresh datadir in a temporary directory with
``mariadb-install-db``, starts ``mariadbd`` on a free loopback port with binary
logging in ROW format, waits until ``SELECT 1`` works over the unix socket,
creates a replication user and a test database, and tears everything down again
on :meth:`PrivateMariaDB.stop` (or at the end of a ``with`` block).

    with PrivateMariaDB(binlog_row_metadata="FULL") as db:
        db.execute("CREATE TABLE pycanal.t (id INT PRIMARY KEY, v VARCHAR(10))")
        db.execute("INSERT INTO pycanal.t VALUES (%s, %s)", (1, "a"))
        file, pos = db.current_binlog()
        conn = db.repl_connection()          # PyMySQL over TCP as the repl user

Nothing here reads the machine's option files (``--no-defaults`` everywhere), uses
the system service, its port 3306 or ``/run/mysqld``: several private servers can
run side by side (parallel test sessions) without interfering.

Root / OS user handling
-----------------------
* As OS user root (CI, the dev machines): ``mariadbd`` refuses to run as root unless
  told ``--user=root``.  We pass ``--user=root`` (to ``mariadb-install-db`` and to
  ``mariadbd``) rather than ``--user=mysql``: running as ``mysql`` would need the
  temp dir chown-ed to that account (which only exists where the Debian package
  created it) and would leave files the invoking user must clean up with extra
  care; ``--user=root`` keeps every file owned by whoever started the server.
  The root account is created with ``--auth-root-authentication-method=socket``:
  MariaDB ``root@localhost`` is identified via the ``unix_socket`` plugin, so the OS
  user root logs in over the socket without a password, and (``--skip-name-resolve``
  makes ``localhost`` match socket connections only) never over TCP.
* As any other OS user: no ``--user`` option (the server runs as that user), and the
  root account is created with ``--auth-root-authentication-method=normal``, i.e.
  ``root@localhost`` with an empty password; the extra password-less root accounts
  that option also creates (``root@127.0.0.1``, ``root@::1``, ``root@<hostname>``) are
  dropped, so root is again reachable over the unix socket only.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymysql

from ._process import PrivateServer, tail

__all__ = ["MariaDBStartError", "PrivateMariaDB", "find_server_binary", "mariadb_binlog_path"]

_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/libexec", "/usr/local/mysql/bin", "/usr/bin")


class MariaDBStartError(RuntimeError):
    """The private server could not be initialised or did not become ready."""


def _find_binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
        for d in _SBIN_DIRS:
            cand = Path(d) / name
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    raise FileNotFoundError(
        f"none of {', '.join(names)} found on PATH or in {', '.join(_SBIN_DIRS)}; run scripts/setup.sh"
    )


def find_server_binary() -> str:
    """Path of ``mariadbd`` (or ``mysqld`` from an older MariaDB)."""
    return _find_binary("mariadbd", "mysqld")


def mariadb_binlog_path() -> str:
    """Path of the ``mariadb-binlog`` tool (or its old name ``mysqlbinlog``)."""
    return _find_binary("mariadb-binlog", "mysqlbinlog")


class PrivateMariaDB(PrivateServer):
    """A private MariaDB server in a temporary directory (see the module docstring).

    Parameters:
        server_id: ``--server-id``.
        binlog_row_metadata: ``"FULL"`` (default), ``"MINIMAL"`` or ``"NO_LOG"``.
        binlog_row_image: ``"FULL"`` (default), ``"MINIMAL"`` or ``"NOBLOB"``.
        extra_args: more ``mariadbd`` options, appended last (so they override ours),
            e.g. ``["--log-bin-compress=ON", "--max-binlog-size=4096"]``.
        keep: keep the temporary directory after :meth:`stop` (for post-mortems).
        startup_timeout: seconds to wait for ``SELECT 1`` to succeed.
        base_dir: where to create the temporary directory (default: the system temp dir,
            or ``/tmp`` when that path would make the socket path too long).
        die_with_parent: on Linux, have the kernel send the server SIGTERM when the thread
            that started it exits (PR_SET_PDEATHSIG), so a killed test run leaves no server
            behind.  Pass False when starting the server from a short-lived thread.
    """

    name = "mariadbd"
    dir_prefix = "mariadb"
    start_error = MariaDBStartError
    death_signal = signal.SIGTERM  # a clean shutdown when the test process dies
    stop_grace = 10.0
    bind_error = re.compile(
        r"Address already in use|Do you already have another (mysqld|mariadbd) server running on port"
    )

    def __init__(
        self,
        *,
        server_id: int = 1,
        binlog_row_metadata: str = "FULL",
        binlog_row_image: str = "FULL",
        extra_args: Sequence[str] = (),
        keep: bool = False,
        startup_timeout: float = 60.0,
        shutdown_timeout: float = 30.0,
        repl_user: str = "repl",
        repl_password: str = "repl",
        database: str = "pycanal",
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        if binlog_row_metadata.upper() not in ("NO_LOG", "MINIMAL", "FULL"):
            raise ValueError(
                f"binlog_row_metadata must be NO_LOG, MINIMAL or FULL, not {binlog_row_metadata!r}"
            )
        if binlog_row_image.upper() not in ("FULL", "MINIMAL", "NOBLOB"):
            raise ValueError(f"binlog_row_image must be FULL, MINIMAL or NOBLOB, not {binlog_row_image!r}")
        super().__init__(
            keep=keep, startup_timeout=startup_timeout, base_dir=base_dir, die_with_parent=die_with_parent
        )
        self.server_id = int(server_id)
        self.binlog_row_metadata = binlog_row_metadata.upper()
        self.binlog_row_image = binlog_row_image.upper()
        self.extra_args = list(extra_args)
        self.shutdown_timeout = shutdown_timeout
        self.repl_user = repl_user
        self.repl_password = repl_password
        self.database = database
        self.datadir: Path | None = None
        self.binlog_dir: Path | None = None
        self.tmpdir: Path | None = None
        self.socket: str = ""
        self.pid_file: Path | None = None
        self.error_log: Path | None = None
        self.version: str = ""
        self.version_info: tuple[int, int, int] = (0, 0, 0)

    # ------------------------------------------------------------------ lifecycle
    @property
    def binlog_basename(self) -> Path:
        assert self.binlog_dir is not None, "server not started"
        return self.binlog_dir / "mysql-bin"

    def _start(self) -> None:
        """Initialise the datadir, start the server, wait until it is ready, add the users."""
        self._make_dirs()
        self._install_db()
        self._launch_on_free_port(self._launch_and_wait)
        self._post_start_setup()

    def _shut_down(self) -> None:
        """A clean SHUTDOWN; SIGTERM, then SIGKILL, if the server still runs after ``shutdown_timeout``."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            self._send_shutdown()
        try:
            proc.wait(self.shutdown_timeout)
        except subprocess.TimeoutExpired:
            super()._shut_down()

    def restart(self, kill: bool = False) -> None:
        """Stop the server (clean SHUTDOWN, or SIGKILL with ``kill=True``, as a crash) and start
        it again on the same datadir and port: the binlog and the data survive."""

        def relaunch() -> None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket)  # a killed server leaves its socket file behind
            self._launch_and_wait()

        self._restart(kill, relaunch)

    # ------------------------------------------------------------------ internals
    def _send_shutdown(self) -> None:
        conn = self.root_connection(connect_timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute("SHUTDOWN")
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _temp_parent(self) -> Path:
        base = super()._temp_parent()
        # A unix socket path must fit in sun_path (108 bytes on Linux).
        return base if len(str(base)) <= 60 else Path("/tmp")

    def _make_dirs(self) -> None:
        assert self.root_dir is not None
        self.datadir = self.root_dir / "data"
        self.binlog_dir = self.root_dir / "binlog"
        self.tmpdir = self.root_dir / "tmp"
        for d in (self.datadir, self.binlog_dir, self.tmpdir):
            d.mkdir()
        self.socket = str(self.root_dir / "mariadb.sock")
        self.pid_file = self.root_dir / "mariadb.pid"
        self.error_log = self.root_dir / "error.log"

    def _common_server_args(self) -> list[str]:
        args = [
            f"--datadir={self.datadir}",
            f"--tmpdir={self.tmpdir}",
            # Small memory footprint: several of these may run at once on a small machine.
            "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=16M",
            "--innodb-log-buffer-size=4M",
            "--key-buffer-size=1M",
            "--aria-pagecache-buffer-size=8M",
            "--performance-schema=OFF",
            # Synchronous IO instead of io_uring/libaio: avoids exhausting the machine-wide
            # aio-max-nr when many servers run in parallel; speed is irrelevant here.
            "--innodb-use-native-aio=OFF",
            "--skip-name-resolve",
        ]
        if os.geteuid() == 0:
            args.append("--user=root")  # see the module docstring
        return args

    def _install_db(self) -> None:
        install = _find_binary("mariadb-install-db", "mysql_install_db")
        auth = "socket" if os.geteuid() == 0 else "normal"
        cmd = [
            install,
            "--no-defaults",  # must come first
            *self._common_server_args(),
            f"--auth-root-authentication-method={auth}",
            "--skip-test-db",
        ]
        assert self.root_dir is not None
        log = self.root_dir / "install-db.log"
        with open(log, "wb") as out:
            rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if rc != 0:
            raise MariaDBStartError(f"{' '.join(cmd)} failed with exit code {rc}:\n{tail(log)}")

    def _server_cmd(self) -> list[str]:
        return [
            find_server_binary(),
            "--no-defaults",  # MUST be the first argument
            *self._common_server_args(),
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.error_log}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--log-bin={self.binlog_basename}",
            "--binlog-format=ROW",
            f"--server-id={self.server_id}",
            "--binlog-checksum=CRC32",
            f"--binlog-row-metadata={self.binlog_row_metadata}",
            f"--binlog-row-image={self.binlog_row_image}",
            # Deterministic, modern defaults; tests that need others say so explicitly.
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--default-time-zone=+00:00",
            # Fewer fsyncs: this is a throw-away server.
            "--innodb-flush-log-at-trx-commit=2",
            "--innodb-doublewrite=OFF",
            "--max-connections=300",
            *self.extra_args,
        ]

    def _launch_and_wait(self) -> None:
        """Start mariadbd on ``self.port`` and wait until it answers."""
        assert self.error_log is not None and self.root_dir is not None
        with contextlib.suppress(FileNotFoundError):
            self.error_log.unlink()  # only this attempt's messages
        self._launch(self._server_cmd(), self.root_dir / "mariadbd.out", append=True)
        self._wait(self._not_answering)

    def _not_answering(self) -> str | None:
        if not os.path.exists(self.socket):
            return "made no socket"
        try:
            with self.root_connection(connect_timeout=2) as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
                if cur.fetchone() == (1,):
                    return None
        except pymysql.MySQLError as e:
            return f"did not answer SELECT 1 (last error: {e!r})"
        return "did not answer SELECT 1"

    def _log_files(self) -> list[Path]:
        if self.root_dir is None or self.error_log is None:
            return []
        return [self.error_log, self.root_dir / "mariadbd.out"]

    def _post_start_setup(self) -> None:
        u, p = self.repl_user, self.repl_password
        with self.root_connection() as conn, conn.cursor() as cur:
            # Keep the set-up out of the binlog: tests start from a binlog with no user events.
            cur.execute("SET SESSION sql_log_bin = 0")
            # mariadb-install-db's "normal" auth (non-root OS user) also creates password-less
            # root@127.0.0.1, root@::1 and root@<hostname>: keep root reachable over the socket only.
            cur.execute("SELECT host FROM mysql.user WHERE user = 'root' AND host <> 'localhost'")
            for (host,) in cur.fetchall():
                cur.execute("DROP USER 'root'@%s", (host,))
            for host in ("127.0.0.1", "localhost"):
                cur.execute("CREATE USER %s@%s IDENTIFIED BY %s", (u, host, p))
                # MariaDB >= 10.5 renamed REPLICATION CLIENT to BINLOG MONITOR (the old name is an
                # alias and shows as BINLOG MONITOR): it covers SHOW MASTER STATUS, SHOW BINARY LOGS
                # and SHOW BINLOG EVENTS; REPLICATION SLAVE covers COM_BINLOG_DUMP(_GTID); SELECT is
                # for reading table schemas (information_schema) like Canal does.
                cur.execute("GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s@%s", (u, host))
            cur.execute(
                f"CREATE DATABASE IF NOT EXISTS `{self.database}` "
                "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
            )
            cur.execute("SELECT VERSION()")
            self.version = cur.fetchone()[0]
        m = re.match(r"(\d+)\.(\d+)\.(\d+)", self.version)
        if m:
            self.version_info = (int(m[1]), int(m[2]), int(m[3]))

    # ------------------------------------------------------------------ connections
    def root_connection(self, database: str | None = None, **kwargs: Any) -> pymysql.connections.Connection:
        """A new PyMySQL connection as root over the unix socket (autocommit, utf8mb4,
        session time_zone '+00:00')."""
        params: dict[str, Any] = {
            "unix_socket": self.socket,
            "user": "root",
            "password": "",
            "charset": "utf8mb4",
            "autocommit": True,
            "init_command": "SET SESSION time_zone = '+00:00'",
            "connect_timeout": 10,
            # A socket has no TLS; without this PyMySQL 2.2 builds a TLS context per connection
            # (~15 ms of CPU: in benches that poll the source, taken from what they measure).
            "ssl_disabled": True,
        }
        if database is not None:
            params["database"] = database
        params.update(kwargs)
        return pymysql.connect(**params)

    def repl_params(self) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` as the replication user over TCP."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.repl_user,
            "password": self.repl_password,
        }

    def repl_connection(self, **kwargs: Any) -> pymysql.connections.Connection:
        """A new PyMySQL connection as the replication user over TCP (127.0.0.1)."""
        params: dict[str, Any] = {**self.repl_params(), "charset": "utf8mb4", "autocommit": True}
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, sql: str, args: Any = None, database: str | None = None) -> int:
        """Run one statement as root (new connection, autocommit); returns the row count."""
        with self.root_connection(database) as conn, conn.cursor() as cur:
            return cur.execute(sql, args)

    def query(self, sql: str, args: Any = None, database: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement as root and return all rows as tuples."""
        with self.root_connection(database) as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    # ------------------------------------------------------------------ binlog helpers
    def binlog_files(self) -> list[Path]:
        """Absolute paths of the binlog files, in order (SHOW BINARY LOGS)."""
        assert self.binlog_dir is not None
        return [self.binlog_dir / row[0] for row in self.query("SHOW BINARY LOGS")]

    def current_binlog(self) -> tuple[str, int]:
        """(file name, position) of the end of the binlog (SHOW MASTER STATUS)."""
        row = self.query("SHOW MASTER STATUS")[0]
        return str(row[0]), int(row[1])

    def wait_for_binlog_checkpoint(self, timeout: float = 10.0) -> None:
        """Wait until the current binlog file names itself in a Binlog_checkpoint event. MariaDB
        writes that event on its own, some time after a rotation, once the previous files'
        transactions are durable: a test comparing the end of the binlog (or a dump) with what
        it saw earlier waits for it first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            name = self.current_binlog()[0]
            if any(
                r[2] == "Binlog_checkpoint" and name in r[5]
                for r in self.query(f"SHOW BINLOG EVENTS IN '{name}'")
            ):
                return
            time.sleep(0.05)
        raise TimeoutError(
            f"MariaDB on port {self.port}: no Binlog_checkpoint naming the current binlog within {timeout}s"
        )

    def flush_binary_logs(self) -> Path:
        """FLUSH BINARY LOGS (rotate); returns the path of the new active binlog file."""
        self.execute("FLUSH BINARY LOGS")
        assert self.binlog_dir is not None
        return self.binlog_dir / self.current_binlog()[0]

    def __repr__(self) -> str:
        return (
            f"<PrivateMariaDB {self._state} port={self.port} socket={self.socket!r} "
            f"row_metadata={self.binlog_row_metadata} version={self.version!r}>"
        )
