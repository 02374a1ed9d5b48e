"""Deploying a Canal conf dir: ``conf/canal.properties`` + ``conf/<destination>/instance.properties``
turned into a running :class:`CanalServerWithEmbedded` (Canal's ``CanalController`` +
``file-instance.xml`` / ``default-instance.xml``).

::

    with Deployer("conf", environ={"CANAL_INSTANCE_MASTER_ADDRESS": "127.0.0.1:3307"}) as deployer:
        server = deployer.server
        server.subscribe(ClientIdentity("example", 1001, ""))
        ...

* :func:`build_instance` maps one destination's keys to the parser, store and meta settings.
* The meta manager follows Canal's mode: ``canal.zkServers`` set → :class:`PeriodMixedMetaManager`
  over ZooKeeper (period ``canal.zookeeper.flush.period`` ms); else ``canal.file.data.dir`` →
  :class:`FileMixedMetaManager` (``<data dir>/<destination>/meta.dat``, period
  ``canal.file.flush.period`` ms); else memory.
* Laziness: ``canal.instance.<destination>.lazy`` (canal.properties, environment or override),
  else ``canal.instance.global.lazy``. A lazy instance starts on its first subscribe.
* ``canal.auto.scan=true``: a :class:`ConfigScanner` over ``canal.conf.dir`` every
  ``canal.auto.scan.interval`` seconds; ``add`` → build and add the instance, ``remove`` → stop and
  remove it, ``reload`` → stop it and add one built from the new ``instance.properties`` (what was
  not acknowledged is parsed again from the cursors). :meth:`Deployer.scan_once` runs one scan now.
* With :meth:`Deployer.attach_mq` (``canal.serverMode = kafka`` or ``rabbitMQ``) every deployed
  destination also gets an MQ worker (:mod:`pycanal.mq.starter`), as Canal's controller starts and
  stops its ``CanalMQStarter`` destinations.
* With :meth:`Deployer.attach_ha` (``pycanal server`` does it when ``canal.zkServers`` is set) the
  destinations are deployed through :class:`pycanal.ha.ServerHA` instead: fenced meta managers,
  started only on the server holding the destination's running node.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pycanal.common.druid import DruidPasswordError, decrypt_password
from pycanal.config import CanalConfig, ConfigError, ConfigScanner, InstanceConfig, ScanEvent
from pycanal.deployer.mq import MQ_MODES, mq_destination, mq_filter_transaction_entry
from pycanal.instance import CanalInstance
from pycanal.meta import FileMixedMetaManager, MemoryMetaManager, MetaManager, PeriodMixedMetaManager
from pycanal.mysql.tls import TLSConfigError, TlsSettings
from pycanal.parse.eventfilter import EventFilters, FieldFilter
from pycanal.protocol.position import EntryPosition
from pycanal.server.embedded import CanalServerWithEmbedded

__all__ = ["TSDB_FILE_NAME", "Deployer", "build_instance", "build_meta_manager", "is_lazy"]

log = logging.getLogger(__name__)

TSDB_FILE_NAME = "tsdb.sqlite"  # in canal.instance.tsdb.dir (Canal: an H2 file "h2" there)


def _position(ic: InstanceConfig, prefix: str) -> EntryPosition | None:
    journal = ic[f"{prefix}.journal.name"]
    position = ic[f"{prefix}.position"]
    timestamp = ic[f"{prefix}.timestamp"]
    gtid = ic[f"{prefix}.gtid"]
    if journal is None and position is None and timestamp is None and gtid is None:
        return None
    return EntryPosition(journal_name=journal, position=position, timestamp=timestamp, gtid=gtid)


def build_meta_manager(cfg: CanalConfig) -> MetaManager:
    """Canal's mode: ZooKeeper (period-mixed) when ``canal.zkServers`` is set, else the file
    manager under ``canal.file.data.dir``, else memory."""
    zk = cfg["canal.zkServers"]
    if zk:
        return PeriodMixedMetaManager(zk, cfg["canal.zookeeper.flush.period"] / 1000.0)
    data_dir = cfg["canal.file.data.dir"]
    if data_dir:
        return FileMixedMetaManager(data_dir, cfg["canal.file.flush.period"] / 1000.0)
    return MemoryMetaManager()


_EVENT_FILTER_KEYS = (
    "rows",
    "dml.insert",
    "dml.update",
    "dml.delete",
    "query.dml",
    "query.ddl",
    "query.dcl",
    "table.error",
)


def parser_settings(ic: InstanceConfig) -> dict[str, Any]:
    """``MysqlEventParser`` keyword arguments (plus ``master_address``) of one destination."""
    settings: dict[str, Any] = {
        "master_address": ic["canal.instance.master.address"],
        "username": ic["canal.instance.dbUsername"],
        "password": db_password(ic),
        "master_position": _position(ic, "canal.instance.master"),
        "gtid_mode": ic["canal.instance.gtidon"],
        "slave_id": ic["canal.instance.mysql.slaveId"] or None,
        "transaction_size": ic["canal.instance.transaction.size"],
        "fallback_interval_seconds": ic["canal.instance.fallbackIntervalInSeconds"],
        "detecting_enable": ic["canal.instance.detecting.enable"],
        "detecting_sql": ic["canal.instance.detecting.sql"],
        "detecting_interval": float(ic["canal.instance.detecting.interval.time"]),
        "detecting_retry_times": ic["canal.instance.detecting.retry.threshold"],
        "heartbeat_ha_enable": ic["canal.instance.detecting.heartbeatHaEnable"],
        "auto_reset_latest_pos_mode": bool(ic["canal.auto.reset.latest.pos.mode"]),
        "parallel": ic["canal.instance.parser.parallel"],
        "linger": ic["canal.instance.parser.lingerMs"] / 1000,
    }
    settings["event_filters"] = EventFilters.from_settings(
        {key: ic[f"canal.instance.filter.{key}"] for key in _EVENT_FILTER_KEYS}
    )
    fields = FieldFilter(ic["canal.instance.filter.field"], ic["canal.instance.filter.black.field"])
    if fields:
        settings["field_filter"] = fields
    settings["master_tls"] = tls_settings(ic, "master")
    standby = ic["canal.instance.standby.address"]
    if standby is not None:
        settings["standby_address"] = standby
        settings["standby_position"] = _position(ic, "canal.instance.standby")
        settings["standby_tls"] = tls_settings(ic, "standby")
    if ic["canal.instance.tsdb.enable"]:
        tsdb_dir = ic["canal.instance.tsdb.dir"]
        if tsdb_dir:
            Path(tsdb_dir).mkdir(parents=True, exist_ok=True)
            settings["schema_history_path"] = str(Path(tsdb_dir) / TSDB_FILE_NAME)
    return settings


def db_password(ic: InstanceConfig) -> str:
    """``canal.instance.dbPassword``, decrypted with ``pwdPublicKey`` when ``enableDruid`` is true."""
    password = ic["canal.instance.dbPassword"]
    if not ic["canal.instance.enableDruid"]:
        return password
    key = ic["canal.instance.pwdPublicKey"]
    if not key:
        at = "canal.instance.enableDruid"
        message = f"{at} = true but no canal.instance.pwdPublicKey to decrypt canal.instance.dbPassword with"
    else:
        try:
            return decrypt_password(key, password)
        except DruidPasswordError as exc:
            at = "canal.instance.dbPassword"
            message = f"{at} with canal.instance.pwdPublicKey (enableDruid = true): {exc}"
    source = ic.source(at)
    raise ConfigError(f"{source}: {message}", key=at, source=source)


def tls_settings(ic: InstanceConfig, source: str) -> TlsSettings:
    """``canal.instance.<source>.sslMode`` and the keys beside it, its keystores read now: a bad
    one is a :class:`ConfigError` naming the file it is set in."""
    p = f"canal.instance.{source}."
    tls = TlsSettings(
        ic[p + "sslMode"], ic[p + "tlsVersions"],
        ic[p + "trustCertificateKeyStoreType"], ic[p + "trustCertificateKeyStoreUrl"],
        ic[p + "trustCertificateKeyStorePassword"], ic[p + "clientCertificateKeyStoreType"],
        ic[p + "clientCertificateKeyStoreUrl"], ic[p + "clientCertificateKeyStorePassword"], prefix=p,
    )  # fmt: skip
    try:
        _ = tls.context
    except TLSConfigError as exc:
        source = ic.source(exc.key)
        raise ConfigError(f"{source}: {exc}", key=exc.key, source=source) from None
    return tls


def store_settings(ic: InstanceConfig) -> dict[str, Any]:
    """``MemoryEventStore`` keyword arguments of one destination."""
    return {
        "buffer_size": ic["canal.instance.memory.buffer.size"],
        "buffer_mem_unit": ic["canal.instance.memory.buffer.memunit"],
        "batch_mode": ic["canal.instance.memory.batch.mode"],
        "ddl_isolation": ic["canal.instance.get.ddl.isolation"],
        "raw": ic["canal.instance.memory.rawEntry"],
    }


def build_instance(
    cfg: CanalConfig, destination: str, *, meta_manager: MetaManager | None = None
) -> CanalInstance:
    """One destination's :class:`CanalInstance` from a loaded config (``instance.properties`` is
    read now)."""
    ic = cfg.instance(destination)
    black = ic["canal.instance.filter.black.regex"] or None
    filter_transactions = ic["canal.instance.filter.transaction.entry"]
    if cfg["canal.serverMode"] in MQ_MODES:  # as Canal's MQ starter turns the instances' filter on
        filter_transactions = filter_transactions or mq_filter_transaction_entry(cfg)
    return CanalInstance(
        destination,
        parser=parser_settings(ic),
        store=store_settings(ic),
        meta_manager=meta_manager if meta_manager is not None else build_meta_manager(cfg),
        filter=ic["canal.instance.filter.regex"] or None,
        black_filter=black,
        sink={"filter_transaction_entry": filter_transactions},
    )


def is_lazy(cfg: CanalConfig, destination: str) -> bool:
    """``canal.instance.<destination>.lazy``, else ``canal.instance.global.lazy``."""
    raw = cfg.server.raw(f"canal.instance.{destination}.lazy")
    if raw is not None and raw.strip():
        return raw.strip().lower() == "true"
    return bool(cfg["canal.instance.global.lazy"])


class Deployer:
    """A conf dir served by one :class:`CanalServerWithEmbedded` (see the module docstring)."""

    def __init__(
        self,
        conf_dir: str | os.PathLike[str],
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = CanalConfig.load(conf_dir, overrides=overrides, environ=environ)
        self.server = CanalServerWithEmbedded()
        self.auto_scan: bool = bool(self.config["canal.auto.scan"])
        self.scanner: ConfigScanner | None = None
        self.ha: Any = None
        self.mq: Any = None
        self._lock = threading.RLock()
        self._running = False

    def attach_ha(self, ha: Any) -> None:
        """Serve through ZooKeeper HA (a :class:`pycanal.ha.ServerHA` over ``self.server``): each
        destination is deployed with a fenced meta manager and started only while this server
        holds its running node. Call before :meth:`start`."""
        if self._running:
            raise RuntimeError("attach HA before the deployer starts")
        self.ha = ha

    def attach_mq(self, starter: Any) -> None:
        """Send every destination to an MQ (a :class:`pycanal.mq.starter.MQStarter` over
        ``self.server``): each deployed destination gets a worker with its ``canal.mq.*`` settings,
        a removed one loses it, a reloaded one gets the new settings. Call before :meth:`start`."""
        if self._running:
            raise RuntimeError("attach the MQ starter before the deployer starts")
        self.mq = starter

    # ------------------------------------------------------------------ lifecycle
    @property
    def destinations(self) -> list[str]:
        return self.server.destinations

    def start(self, *, scan_thread: bool = True) -> Deployer:
        """Add (and, unless lazy, start) every destination of ``canal.destinations``; with
        ``canal.auto.scan`` set up the scanner (its thread unless ``scan_thread=False``)."""
        with self._lock:
            if self._running:
                return self
            self.server.start()
            try:
                for destination in self.config.destinations:
                    self._add(destination)
            except BaseException:
                self.server.stop()
                raise
            if self.auto_scan:
                self.scanner = ConfigScanner(
                    self.config.conf_dir,
                    float(self.config["canal.auto.scan.interval"]),
                    self._on_event,
                )
                if scan_thread:
                    self.scanner.start()
            self._running = True
        return self

    def stop(self) -> None:
        with self._lock:
            scanner, self.scanner = self.scanner, None
            self._running = False
        if scanner is not None:
            scanner.stop()
        if self.mq is not None:  # no worker may get from a stopping instance
            self.mq.stop()
        if self.ha is not None:
            self.ha.stop()
        self.server.stop()

    def __enter__(self) -> Deployer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ instances
    def _add(self, destination: str) -> CanalInstance:
        mq_config = mq_destination(self.config.instance(destination)) if self.mq is not None else None
        if self.ha is not None:
            meta = self.ha.meta_manager(destination)
            instance = self.ha.deploy(build_instance(self.config, destination, meta_manager=meta))
        else:
            instance = build_instance(self.config, destination)
            self.server.add_instance(instance, lazy=is_lazy(self.config, destination))
        if mq_config is not None:
            self.mq.start_destination(destination, mq_config)
        log.info("destination %s deployed", destination)
        return instance

    def _remove(self, destination: str) -> None:
        if self.mq is not None:
            self.mq.stop_destination(destination)
        if self.ha is not None:
            self.ha.unwatch(destination)
        if destination in self.server.destinations:
            self.server.remove_instance(destination)  # stops it
            log.info("destination %s removed", destination)

    def reload(self, destination: str) -> CanalInstance:
        """Stop the destination's instance and deploy it again from its current files."""
        with self._lock:
            self._remove(destination)
            return self._add(destination)

    # ------------------------------------------------------------------ auto-scan
    def _on_event(self, event: ScanEvent) -> None:
        with self._lock:
            served = event.destination in self.server.destinations
            if event.kind == "add":
                if not served:
                    self._add(event.destination)
            elif event.kind == "remove":
                self._remove(event.destination)
            elif event.kind == "reload":
                self.reload(event.destination)
            log.info("auto-scan: %s %s", event.kind, event.destination)

    def scan_once(self) -> list[ScanEvent]:
        """Scan ``canal.conf.dir`` now and apply the events (needs ``canal.auto.scan=true``)."""
        if self.scanner is None:
            if not self.auto_scan:
                raise RuntimeError("canal.auto.scan is false")
            raise RuntimeError("the deployer is not started")
        return self.scanner.scan()
