"""A private, throw-away RabbitMQ broker for tests and the demo.

``PrivateRabbitMQ`` runs Debian's ``rabbitmq-server`` (installed by ``scripts/setup.sh``) as the
current user, never the package's system service: everything lives in a temporary directory (Mnesia,
logs, the config, ``HOME`` with its own Erlang cookie), the node has a name of its own, and AMQP, the
Erlang distribution and even epmd (``ERL_EPMD_PORT``) listen on free loopback ports, so neither a
system broker nor another test run's is touched. The epmd is started here and stopped with the broker.
The broker's only user is ``pycanal``/``pycanal`` (``rabbitmq.conf``'s ``default_user``); it is
ready when that user can open a channel: about 6-7 s after the launch on this 2-core machine (RabbitMQ
3.10 on Erlang 25, no plugins), 4-5 s for :meth:`PrivateRabbitMQ.restart`, 1 s to stop.

    with PrivateRabbitMQ() as rabbit:
        rabbit.url                       # "amqp://pycanal:pycanal@127.0.0.1:<port>/"
        rabbit.messages("q")             # every message of queue q, in order (not consumed)
        rabbit.restart(kill=True)        # same ports and Mnesia: durable queues keep their messages
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._process import PrivateServer, free_port, spawn, terminate

__all__ = ["RabbitMessage", "RabbitMQStartError", "PrivateRabbitMQ", "rabbitmq_scripts"]


class RabbitMQStartError(RuntimeError):
    """The private RabbitMQ could not be started or did not become ready."""


@dataclass(frozen=True, slots=True)
class RabbitMessage:
    """One message read back by :meth:`PrivateRabbitMQ.messages`."""

    exchange: str
    routing_key: str
    body: bytes
    delivery_mode: int | None
    content_type: str | None


def rabbitmq_scripts() -> Path:
    """The directory of the unwrapped ``rabbitmq-server`` script (Debian's ``/usr/sbin`` wrapper
    switches to the ``rabbitmq`` user): ``$PYCANAL_RABBITMQ_SCRIPTS``, else ``/usr/lib/rabbitmq/bin``."""
    where = Path(os.environ.get("PYCANAL_RABBITMQ_SCRIPTS", "/usr/lib/rabbitmq/bin"))
    if not (where / "rabbitmq-server").is_file():
        raise FileNotFoundError(
            f"rabbitmq-server is not in {where}: run scripts/setup.sh (it installs Debian's rabbitmq-server)"
        )
    return where


class PrivateRabbitMQ(PrivateServer):
    """A single RabbitMQ node in a temporary directory (see the module docstring).

    Parameters:
        user, password: the broker's only user (administrator of vhost ``/``).
        keep, startup_timeout, base_dir, die_with_parent: see
            :class:`~pycanal.testing._process.PrivateServer`.
    """

    name = "RabbitMQ"
    dir_prefix = "rabbitmq"
    start_error = RabbitMQStartError
    stop_grace = 20.0
    bind_error = re.compile(r"eaddrinuse|Address already in use")

    def __init__(
        self,
        *,
        user: str = "pycanal",
        password: str = "pycanal",
        keep: bool = False,
        startup_timeout: float = 90.0,
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            keep=keep, startup_timeout=startup_timeout, base_dir=base_dir, die_with_parent=die_with_parent
        )
        self.user = user
        self.password = password
        self.node = f"pycanal-{os.getpid()}-{secrets.token_hex(3)}@localhost"
        self.dist_port = 0
        self.epmd_port = 0
        self.epmd: subprocess.Popen[bytes] | None = None
        self.out_file: Path | None = None
        self.log_file: Path | None = None

    @property
    def url(self) -> str:
        """An AMQP URI for the broker's user (Canal's ``rabbitmq.host`` takes one)."""
        return f"amqp://{self.user}:{self.password}@{self.host}:{self.port}/%2F"

    @property
    def address(self) -> str:
        """``host:port``, the other form of Canal's ``rabbitmq.host``."""
        return f"{self.host}:{self.port}"

    # ------------------------------------------------------------------ clients
    def connect(self) -> Any:
        """A pika ``BlockingConnection`` as the broker's user."""
        import pika

        params = pika.ConnectionParameters(
            self.host,
            self.port,
            "/",
            pika.PlainCredentials(self.user, self.password),
            connection_attempts=1,
            socket_timeout=5,
            blocked_connection_timeout=30,
        )
        return pika.BlockingConnection(params)

    def declare_queue(self, queue: str, exchange: str = "", routing_key: str | None = None) -> None:
        """A durable queue (bound to ``exchange``, a durable direct one, with ``routing_key``)."""
        conn = self.connect()
        try:
            ch = conn.channel()
            ch.queue_declare(queue, durable=True)
            if exchange:
                ch.exchange_declare(exchange, "direct", durable=True)
                ch.queue_bind(queue, exchange, routing_key or queue)
        finally:
            conn.close()

    def messages(self, queue: str) -> list[RabbitMessage]:
        """Every message of ``queue`` in order, left in the queue (fetched, then requeued by closing
        the channel unacknowledged)."""
        conn = self.connect()
        try:
            ch = conn.channel()
            out: list[RabbitMessage] = []
            while True:
                method, props, body = ch.basic_get(queue, auto_ack=False)
                if method is None:
                    return out
                out.append(
                    RabbitMessage(
                        method.exchange, method.routing_key, body, props.delivery_mode, props.content_type
                    )
                )
        finally:
            conn.close()

    def purge(self, queue: str) -> None:
        conn = self.connect()
        try:
            conn.channel().queue_purge(queue)
        finally:
            conn.close()

    def restart(self, kill: bool = False) -> None:
        """Stop the node (SIGTERM, or SIGKILL with ``kill=True``) and start it again on the same ports
        and Mnesia directory: durable queues and their persistent messages survive."""
        self._restart(kill, lambda: self._launch_and_wait(fresh=False), stop=super()._shut_down)  # epmd stays

    # ------------------------------------------------------------------ internals
    def _start(self) -> None:
        assert self.root_dir is not None
        self.out_file = self.root_dir / "rabbitmq.out"
        self.log_file = self.root_dir / "log" / "rabbit.log"
        home = self.root_dir / "home"
        home.mkdir()
        cookie = home / ".erlang.cookie"  # the node's and any rabbitmqctl's with this HOME
        cookie.write_text(secrets.token_hex(16))
        cookie.chmod(0o400)
        self._start_epmd()
        try:
            self._launch_on_free_port(self._launch_and_wait)
        except BaseException:
            self._shut_down()  # the epmd too (PrivateServer.start stops only the node)
            raise

    def _start_epmd(self) -> None:
        """An epmd of our own on a free port (the node would start a shared one on 4369 otherwise)."""
        assert self.root_dir is not None
        epmd = shutil.which("epmd") or "/usr/bin/epmd"
        self.epmd_port = free_port()
        self.epmd = spawn(
            [epmd, "-port", str(self.epmd_port)], self.root_dir / "epmd.out", death_signal=signal.SIGKILL
        )

    def _env(self) -> dict[str, str]:
        assert self.root_dir is not None
        root = self.root_dir
        (root / "rabbitmq-env.conf").touch()
        (root / "enabled_plugins").write_text("[].\n")
        (root / "rabbitmq.conf").write_text(
            "\n".join(
                [
                    f"default_user = {self.user}",
                    f"default_pass = {self.password}",
                    "default_user_tags.administrator = true",
                    "default_permissions.configure = .*",
                    "default_permissions.read = .*",
                    "default_permissions.write = .*",
                    "loopback_users = none",
                    # A test machine's disk may be fuller than the 50 MB default allows.
                    "disk_free_limit.absolute = 1MB",
                    "log.console = false",
                ]
            )
            + "\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            HOME=str(root / "home"),
            ERL_EPMD_PORT=str(self.epmd_port),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS=self.host,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_CONF_ENV_FILE=str(root / "rabbitmq-env.conf"),
            RABBITMQ_CONFIG_FILE=str(root / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(root / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(root / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(root / "mnesia"),
            RABBITMQ_LOG_BASE=str(root / "log"),
            RABBITMQ_LOGS=str(self.log_file),
            RABBITMQ_PID_FILE=str(root / "rabbitmq.pid"),
            # The script then execs the node instead of running it as a child that a SIGKILL misses;
            # -noinput (which the script leaves out then) keeps the node from starting a shell.
            RABBITMQ_ALLOW_INPUT="true",
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-noinput +S 2:2 +A 4",
        )
        return env

    def _launch_and_wait(self, fresh: bool = True) -> None:
        assert self.root_dir is not None and self.out_file is not None
        if fresh:
            self.dist_port = free_port()
            while self.dist_port == self.port:
                self.dist_port = free_port()
        script = rabbitmq_scripts() / "rabbitmq-server"
        self._launch([str(script)], self.out_file, cwd=self.root_dir, append=not fresh, env=self._env())
        self._wait(self._not_ready, interval=0.2)

    def _not_ready(self) -> str | None:
        import pika

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex((self.host, self.port)) != 0:
                return f"accepted no connection on {self.address}"
        try:
            conn = self.connect()
        except pika.exceptions.AMQPError as exc:
            return f"opened no AMQP connection ({exc!r})"
        try:
            conn.channel()
        finally:
            conn.close()
        return None

    def _log_files(self) -> list[Path]:
        return [p for p in (self.out_file, self.log_file) if p is not None and p.exists()]

    def _shut_down(self) -> None:
        """The node (SIGTERM: a clean stop), then its epmd."""
        for proc in (self.process, self.epmd):
            if proc is not None:
                terminate([proc], self.stop_grace)

    def __repr__(self) -> str:
        return f"<PrivateRabbitMQ {self._state} node={self.node} address={self.address}>"
