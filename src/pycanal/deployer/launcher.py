"""``CanalLauncher``: a whole pycanal server from a Canal conf dir (``pycanal server --conf DIR``).

Canal's ``CanalLauncher`` + ``CanalController``: the :class:`Deployer` builds the embedded server
and its instances (with auto-scan), :class:`CanalTcpServer` serves Canal's protocol on
``canal.ip:canal.port`` (``canal.user``/``canal.passwd``), and ``canal.metrics.pull.port`` serves
the Prometheus metrics. With ``canal.serverMode = kafka`` or ``rabbitMQ`` there is no TCP server
(Canal sets ``canal.withoutNetty``): every destination is sent to the broker by the MQ starter
(:mod:`pycanal.mq.starter`, :mod:`pycanal.mq.producer`, :mod:`pycanal.mq.rabbitmq`); the other MQ
modes (rocketMQ, pulsarMQ) are not built. With
``canal.zkServers`` the destinations run under ZooKeeper HA (:mod:`pycanal.ha`): this server
registers as ``canal.register.ip`` (else ``canal.ip``, else the host's IP) and ``canal.port``,
and serves a destination only while it holds the destination's running node.

:meth:`CanalLauncher.run` blocks until SIGTERM or SIGINT, then stops in reverse order (TCP first,
so no client is served by a stopping instance; the instances flush their cursors on stop).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pycanal.deployer.controller import Deployer
from pycanal.deployer.mq import MQ_MODES, kafka_config, mq_destination, mq_options, rabbitmq_config
from pycanal.server.metrics import serve_metrics
from pycanal.server.tcp import CanalTcpServer

__all__ = ["CanalLauncher", "LauncherError"]

log = logging.getLogger(__name__)


class LauncherError(RuntimeError):
    """A configuration the launcher cannot serve."""


@contextlib.contextmanager
def _listening(key: str, host: str, port: int) -> Iterator[None]:
    """A port that cannot be listened on is a ``LauncherError`` naming the key and the address."""
    try:
        yield
    except OSError as exc:
        raise LauncherError(
            f"{key} = {port}: cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None


class CanalLauncher:
    def __init__(
        self,
        conf_dir: str | os.PathLike[str],
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        session_timeout: float = 10.0,
    ) -> None:
        self.deployer = Deployer(conf_dir, overrides=overrides, environ=environ)
        cfg = self.deployer.config
        self.mode: str = cfg["canal.serverMode"]
        if self.mode != "tcp" and self.mode not in MQ_MODES:
            raise LauncherError(
                f"canal.serverMode={self.mode} is not supported by pycanal (tcp or {', '.join(MQ_MODES)})"
            )
        self.tcp: CanalTcpServer | None = None
        self.mq: Any = None
        self.metrics: Any = None
        self.zk: Any = None
        self.session_timeout = session_timeout
        self._stop = threading.Event()

    @property
    def config(self) -> Any:
        return self.deployer.config

    def _start_ha(self) -> None:
        from kazoo.client import KazooClient

        from pycanal.ha import ServerHA

        cfg = self.config
        host = cfg["canal.register.ip"] or cfg["canal.ip"] or socket.gethostbyname(socket.gethostname())
        self.zk = KazooClient(hosts=cfg["canal.zkServers"], timeout=self.session_timeout)
        self.zk.start(timeout=self.session_timeout)
        ha = ServerHA(
            self.zk,
            self.deployer.server,
            f"{host}:{cfg['canal.port']}",
            cid=int(cfg["canal.id"]),
            flush_period=cfg["canal.zookeeper.flush.period"] / 1000.0,
            session_timeout=self.session_timeout,
        )
        self.deployer.attach_ha(ha)
        ha.start()

    def _attach_mq(self) -> None:
        """The MQ starter; the producer settings are checked now (a bad ``kafka.*`` or
        ``rabbitmq.*`` key stops the start), the broker is first asked when a destination sends."""
        from pycanal.mq.starter import MQStarter

        cfg = self.config
        builder, sender, where = self._rabbitmq_sender() if self.mode == "rabbitMQ" else self._kafka_sender()
        for destination in cfg.destinations:  # every destination's canal.mq.* keys, before any starts
            mq_destination(cfg.instance(destination))
        self.mq = MQStarter(
            self.deployer.server,
            {},
            mq_options(cfg),
            sender,
            batch_size=cfg["canal.mq.canalBatchSize"],
            get_timeout_ms=cfg["canal.mq.canalGetTimeout"],
            **({"builder": builder} if builder is not None else {}),
        )
        self.deployer.attach_mq(self.mq)
        log.info("event=mq-producer mode=%s %s", self.mode, where)

    def _kafka_sender(self) -> tuple[Any, Any, str]:
        from pycanal.mq.kafka_config import ProducerConfigError
        from pycanal.mq.producer import KafkaSender, TransactionalKafkaSender

        cfg = self.config
        transactional = bool(cfg["canal.mq.transaction"])

        def sender(destination: str) -> KafkaSender:
            if transactional:
                return TransactionalKafkaSender(config, destination)
            return KafkaSender(config)

        try:
            config = kafka_config(cfg)
            sender("check").close(0)
        except ProducerConfigError as exc:
            raise LauncherError(str(exc)) from None
        where = f"bootstrap={config.get('bootstrap.servers')} transactional={str(transactional).lower()}"
        return None, sender, where

    def _rabbitmq_sender(self) -> tuple[Any, Any, str]:
        from pycanal.mq.rabbitmq import RabbitMQSender
        from pycanal.mq.records import build_rabbitmq_records
        from pycanal.mq.settings import RabbitMQSettingsError

        cfg = self.config
        if cfg["canal.mq.transaction"]:
            raise LauncherError("canal.mq.transaction = true: Kafka transactions; not in rabbitMQ mode")
        try:
            settings = rabbitmq_config(cfg)
        except RabbitMQSettingsError as exc:
            raise LauncherError(str(exc)) from None
        # pika logs each failed connection with its stack; the worker's one line says it.
        logging.getLogger("pika").setLevel(logging.CRITICAL)
        where = (
            f"host={settings.address} vhost={settings.virtual_host} "
            f"exchange={settings.exchange or '(default)'} queue={settings.queue or '-'}"
        )
        return (
            build_rabbitmq_records,
            lambda destination: RabbitMQSender(settings, destination=destination),
            where,
        )

    def start(self) -> CanalLauncher:
        cfg = self.config
        host = cfg["canal.ip"] or "0.0.0.0"
        try:
            if self.mode in MQ_MODES:
                self._attach_mq()
            else:
                # TCP first: once HA registers this server, clients may come at once.
                with _listening("canal.port", host, cfg["canal.port"]):
                    self.tcp = CanalTcpServer(
                        self.deployer.server,
                        host=host,
                        port=cfg["canal.port"],
                        user=cfg["canal.user"] or None,
                        passwd=cfg["canal.passwd"] or None,
                    ).start()
            port = cfg["canal.metrics.pull.port"]
            if port:  # both ports before any instance starts: a port in use stops nothing but this
                stats = getattr(self.tcp, "client_stats", None)
                with _listening("canal.metrics.pull.port", host, port):
                    self.metrics, _ = serve_metrics(self.deployer.server, port, host=host, client_stats=stats)
            if cfg["canal.zkServers"]:
                self._start_ha()
            self.deployer.start()
        except BaseException:
            self.stop()
            raise
        log.info(
            "event=server-started mode=%s address=%s destinations=%s",
            self.mode,
            f"{self.tcp.host}:{self.tcp.port}" if self.tcp is not None else "-",
            ",".join(self.deployer.destinations),
        )
        return self

    def stop(self) -> None:
        self._stop.set()
        began = time.monotonic()  # the stop's time in its last line, as Canal says when it is down
        if self.tcp is not None:
            self.tcp.stop()
        if self.metrics is not None:
            self.metrics.shutdown()
            self.metrics = None
        self.deployer.stop()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
            self.zk = None
        log.info("event=server-stopped took=%.1fs", time.monotonic() - began)

    def run(self) -> None:
        """Start, then serve until SIGTERM/SIGINT (main thread only) or :meth:`stop`."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self._stop.set())
        self.start()
        try:
            while not self._stop.wait(0.5):
                pass
        finally:
            self.stop()

    def __enter__(self) -> CanalLauncher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
