"""Canal's server as a private process: :class:`PrivateCanal` writes the conf dir, runs the JVM on a free
port and waits until Canal serves every destination (see the package docstring)."""

from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._process import PortTaken, PrivateServer, find_java
from .conf import write_conf_dir
from .launcher import CANAL_VERSION, CanalStartError, canal_classpath, java_command
from .properties import canal_properties, instance_properties, prop_value, write_properties

if TYPE_CHECKING:
    from pycanal.client.simple import SimpleConnector

    from ..mariadb import PrivateMariaDB

_STARTED = "PYCANAL-CANAL STARTED"
_FAILED = "PYCANAL-CANAL FAILED"
# The parser's log lines (MysqlEventParser / AbstractEventParser) that say how a dump began.
_PARSER_OK = re.compile(r"find start position successfully")
_PARSER_ERROR = re.compile(r"dump address .* has an error|CanalParseException|parse events has an error")
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[.*?\] (\w+)\s+\S+ - (.*)$")


def _error_summary(text: str, at: int) -> str:
    """The log message at ``at`` and the innermost ``Caused by`` of its stack trace."""
    lines = text[text.rfind("\n", 0, at) + 1 :].splitlines()
    m = _LOG_LINE.match(lines[0])
    message = m.group(2).strip() if m else lines[0].strip()
    cause = ""
    for line in lines[1:]:
        if _LOG_LINE.match(line):
            break
        if line.startswith("Caused by: "):
            cause = line[len("Caused by: ") :].strip()
    return f"{message} ({cause})" if cause else message


class PrivateCanal(PrivateServer):
    """Canal's server in a temporary directory (see the package docstring).

    Parameters:
        address: the MySQL/MariaDB source, ``host:port``.
        username, password: the account Canal replicates with (REPLICATION SLAVE, REPLICATION CLIENT
            and SELECT).
        destinations: destination names, or a mapping name -> that destination's
            ``instance.properties`` overrides. Keys without a ``canal.``/MQ prefix get
            ``canal.instance.``: ``{"filter.regex": "shop\\\\..*", "master.journal.name": f,
            "master.position": 4, "gtidon": True}``; values are str/int/bool.
        instance_properties: overrides for every destination (a destination's own win).
        canal_properties: more ``canal.properties`` keys, e.g. ``{"canal.serverMode": "kafka"}``.
        tsdb: keep the table-meta history in H2 (Canal's default); False reads table structure live.
        meta: ``"file"`` (Canal's default ``file-instance.xml``: cursors in ``meta.dat``) or ``"memory"``.
        user, passwd: ``canal.user`` / ``canal.passwd`` for clients (plain password; none by default).
        heap_mb: the JVM's ``-Xmx`` (and ``-Xms``).
        quick_start: serial GC and C1 only: faster start-up, slower steady state. False for benchmarks
            (``startup.sh``'s G1 options and the full JIT).
        java: the ``java`` binary (default :func:`find_java`: ``$JAVA_HOME``, else PATH: Java 17 here).
        jvm_args: more JVM options, last.
        timezone: ``-Duser.timezone`` (Canal formats TIMESTAMP values in the JVM's zone).
        wait_for_parser: :meth:`start` also waits until each parser found its start position (and
            fails on the parser's connection errors).
        keep, startup_timeout, base_dir, die_with_parent: see
            :class:`~pycanal.testing._process.PrivateServer`.
        log_level: the level of Canal's own loggers (``com.alibaba.otter.canal``).

    MQ modes (``canal.serverMode``) load their producer from ``$PYCANAL_CANAL_HOME/plugin`` (linked as
    ``plugin/`` beside the conf dir), e.g. connector.kafka's ``jar-with-dependencies`` (see the pom).
    """

    name = "Canal"
    dir_prefix = "canal"
    start_error = CanalStartError

    def __init__(
        self,
        address: str,
        username: str = "repl",
        password: str = "repl",
        *,
        destinations: Mapping[str, Mapping[str, object] | None] | Sequence[str] = ("example",),
        instance_properties: Mapping[str, object] | None = None,
        canal_properties: Mapping[str, object] | None = None,
        tsdb: bool = True,
        meta: str = "file",
        user: str | None = None,
        passwd: str | None = None,
        heap_mb: int = 512,
        quick_start: bool = True,
        java: str | None = None,
        jvm_args: Sequence[str] = (),
        timezone: str | None = None,
        wait_for_parser: bool = True,
        keep: bool = False,
        startup_timeout: float = 90.0,
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(
            keep=keep, startup_timeout=startup_timeout, base_dir=base_dir, die_with_parent=die_with_parent
        )
        if meta not in ("file", "memory"):
            raise ValueError(f"meta must be 'file' or 'memory', not {meta!r}")
        if isinstance(destinations, str):
            destinations = [destinations]
        if isinstance(destinations, Mapping):
            self.destinations: dict[str, dict[str, object]] = {
                name: dict(over or {}) for name, over in destinations.items()
            }
        else:
            self.destinations = {name: {} for name in destinations}
        if not self.destinations:
            raise ValueError("PrivateCanal needs at least one destination")
        for name in self.destinations:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"bad destination name {name!r}")
        self.source = address
        self.username = username
        self.password = password
        self.instance_properties = dict(instance_properties or {})
        self.canal_properties = dict(canal_properties or {})
        self.tsdb = tsdb
        self.meta = meta
        self.user = user
        self.passwd = passwd
        self.heap_mb = heap_mb
        self.quick_start = quick_start
        self.java = java
        self.jvm_args = list(jvm_args)
        self.timezone = timezone
        self.wait_for_parser = wait_for_parser
        self.log_level = log_level
        self.conf_dir: Path | None = None
        self.data_dir: Path | None = None
        self.log_dir: Path | None = None
        self.out_file: Path | None = None
        self.command: list[str] = []
        self.slave_ids: dict[str, int] = {}

    @classmethod
    def for_mariadb(cls, db: PrivateMariaDB, **kwargs: Any) -> PrivateCanal:
        """A Canal replicating from a :class:`~pycanal.testing.mariadb.PrivateMariaDB` as its repl user."""
        return cls(f"{db.host}:{db.port}", db.repl_user, db.repl_password, **kwargs)

    @property
    def address(self) -> str:
        """Canal's TCP address, ``127.0.0.1:<port>``."""
        return f"{self.host}:{self.port}"

    @property
    def serves_tcp(self) -> bool:
        """Clients can connect (``canal.serverMode`` ``tcp`` with Netty): :meth:`start` subscribes to check."""
        mode = str(self.canal_properties.get("canal.serverMode", "tcp")).strip().lower()
        return mode == "tcp" and prop_value(self.canal_properties.get("canal.withoutNetty")) != "true"

    def lazy(self, destination: str) -> bool:
        """``canal.instance.<destination>.lazy``, else ``canal.instance.global.lazy``: the instance
        starts when a client first subscribes (and :meth:`start` does not wait for it)."""
        props = self.canal_properties
        value = props.get(f"canal.instance.{destination}.lazy", props.get("canal.instance.global.lazy"))
        return prop_value(value) == "true" if value is not None else False

    def log_file(self, destination: str | None = None) -> Path:
        """``logs/canal/canal.log``, or a destination's ``logs/<destination>/<destination>.log``."""
        assert self.log_dir is not None, "Canal not started"
        name = destination or "canal"
        return self.log_dir / name / f"{name}.log"

    def connector(self, destination: str | None = None, **kwargs: Any) -> SimpleConnector:
        """A connected pycanal :class:`~pycanal.client.simple.SimpleConnector` (the caller
        disconnects it); the destination defaults to the only/first one."""
        from pycanal.client.simple import SimpleConnector

        dest = destination or next(iter(self.destinations))
        conn = SimpleConnector(self.address, dest, self.user or "", self.passwd or "", **kwargs)
        conn.connect()
        return conn

    # ------------------------------------------------------------------ start-up
    def _start(self) -> None:
        """Write the conf dir, start Canal and wait until it serves (see the class docstring)."""
        java = self.java or find_java()
        classpath = canal_classpath(java)
        assert self.root_dir is not None
        self.conf_dir = self.root_dir / "conf"
        self.data_dir = self.root_dir / "data"
        self.log_dir = self.root_dir / "logs"
        self.out_file = self.root_dir / "canal.out"
        self.conf_dir.mkdir()
        write_conf_dir(
            self.conf_dir,
            log_dir=self.log_dir,
            log_level=self.log_level,
            instances={name: self._instance_properties(name) for name in self.destinations},
        )
        self.command = java_command(
            java,
            classpath,
            self.conf_dir,
            heap_mb=self.heap_mb,
            quick_start=self.quick_start,
            timezone=self.timezone,
            jvm_args=self.jvm_args,
        )
        self._launch_on_free_port(self._launch_and_wait)

    def _instance_properties(self, name: str) -> dict[str, object]:
        assert self.data_dir is not None
        h2 = f"jdbc:h2:{self.data_dir / name / 'h2'};CACHE_SIZE=1000;MODE=MYSQL;"
        return instance_properties(
            name,
            source=self.source,
            username=self.username,
            password=self.password,
            slave_id=self.slave_ids.setdefault(name, random.randint(10_000, 2**31 - 1)),
            tsdb_url=h2 if self.tsdb else None,
            overrides=(self.instance_properties, self.destinations[name]),
        )

    def _launch_and_wait(self) -> None:
        """Start Canal on ``self.port`` and wait until it serves every destination that is not lazy."""
        assert self.root_dir is not None and self.conf_dir is not None and self.out_file is not None
        assert self.data_dir is not None and self.log_dir is not None
        for d in (self.data_dir, self.log_dir):  # no state or log lines of a try on a taken port
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
        write_properties(
            self.conf_dir / "canal.properties",
            canal_properties(
                host=self.host,
                port=self.port,
                data_dir=self.data_dir,
                destinations=list(self.destinations),
                tsdb=self.tsdb,
                meta=self.meta,
                user=self.user,
                passwd=self.passwd,
                overrides=self.canal_properties,
            ),
            "written by PrivateCanal",
        )
        self._launch(self.command, self.out_file, cwd=self.root_dir)
        self._wait(self._not_started, interval=0.1)
        eager = [name for name in self.destinations if not self.lazy(name)]  # lazy: started by a client
        if self.serves_tcp:
            for name in eager:
                self._wait(partial(self._not_subscribed, name), interval=0.2)
        if self.wait_for_parser:
            for name in eager:
                self._wait(partial(self._parser_not_started, name), interval=0.1)

    def _not_started(self) -> str | None:
        assert self.out_file is not None
        output = self.out_file.read_text(errors="replace")
        if _FAILED in output:
            raise self._failure(output)
        return None if _STARTED in output else "did not start"

    def _not_subscribed(self, name: str) -> str | None:
        """A pycanal client connects and subscribes (Canal's own instance filter), then leaves."""
        from pycanal.client.simple import CanalClientError

        try:
            conn = self.connector(name, so_timeout=5.0)
            try:
                conn.subscribe()
                conn.unsubscribe()
            finally:
                conn.disconnect()
        except CanalClientError as exc:
            return f"did not serve destination {name!r} ({exc})"
        return None

    def _parser_not_started(self, name: str) -> str | None:
        """Until the parser's log says it found its start position; raises when it says it failed."""
        path = self.log_file(name)
        text = path.read_text(errors="replace") if path.exists() else ""
        m = _PARSER_ERROR.search(text)
        if m:
            raise CanalStartError(
                f"Canal's parser for destination {name!r} cannot replicate from {self.source}: "
                f"{_error_summary(text, m.start())}\n{self.logs()}"
            )
        return None if _PARSER_OK.search(text) else f"parser for {name!r} found no start position"

    def _exit_error(self, returncode: int) -> Exception:
        assert self.out_file is not None
        output = self.out_file.read_text(errors="replace")
        return self._failure(output) if _FAILED in output else super()._exit_error(returncode)

    def _failure(self, output: str) -> Exception:
        """The launcher's ``FAILED <reason>`` line, a taken port or another reason."""
        if self.bind_error.search(output):
            return PortTaken()
        reason = output[output.index(_FAILED) + len(_FAILED) :].splitlines()[0].strip()
        return CanalStartError(f"Canal failed to start: {reason}\n{self.logs()}")

    def _log_files(self) -> list[Path]:
        files = [self.out_file] if self.out_file is not None else []
        if self.log_dir is not None:
            files += [self.log_file()] + [self.log_file(d) for d in self.destinations]
        return files

    def __repr__(self) -> str:
        return (
            f"<PrivateCanal {CANAL_VERSION} {self._state} port={self.port} source={self.source} "
            f"destinations={list(self.destinations)}>"
        )
