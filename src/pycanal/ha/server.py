"""Server HA: Canal's ``ServerRunningMonitor`` with fencing, and ``ServerHA`` for a whole server.

::

    zk = KazooClient(hosts=cfg["canal.zkServers"], timeout=10.0); zk.start()
    ha = ServerHA(zk, CanalServerWithEmbedded(), "10.0.0.5:11111", cid=cfg["canal.id"])
    ha.start()                                   # /otter/canal/cluster/10.0.0.5:11111
    for destination in cfg.destinations:         # an instance with the fenced meta manager; compete
        ha.deploy(build_instance(cfg, destination, meta_manager=ha.meta_manager(destination)))
    ...
    ha.stop()                                    # stop serving, give every running node up

Per destination a :class:`ServerRunningMonitor` registers
``/otter/canal/destinations/<dest>/cluster/<ip:port>`` and competes for
``/otter/canal/destinations/<dest>/running`` (Canal's JSON ``{"active":true,"address":...,"cid":N}``);
the winner bumps ``/otter/canal/destinations/<dest>/epoch`` in the same transaction and starts the
destination's instance; it stops the instance as soon as it loses its ZooKeeper connection or its
lease, or another server holds the node. Why two servers never serve one destination at once:
:mod:`pycanal.ha.election` (lease, connection loss, epoch) and :mod:`pycanal.ha.fence` (every
ZooKeeper write checks the epoch; every hand-out and ack checks the lease). ``docs/ha.md`` tells
the whole story.

The instances of an HA server must use :meth:`ServerHA.meta_manager` (``pycanal.deployer`` builds
them so) and be added lazily (what :meth:`ServerHA.deploy` does), so only the monitor starts them: a standby that gets a client's
subscribe refuses to start the instance (:class:`NotActiveError`), the client then looks for the
active server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pycanal.common.zookeeper import (
    destination_cluster_path,
    epoch_path,
    server_cluster_path,
    server_running_path,
)
from pycanal.server.embedded import CanalServerWithEmbedded

from .election import RunningMonitor
from .fence import FencedMetaManager
from .paths import ServerRunningData, encode_epoch
from .registry import EphemeralNode

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from pycanal.instance import CanalInstance

__all__ = ["ServerHA", "ServerRunningMonitor"]

log = logging.getLogger(__name__)


class ServerRunningMonitor(RunningMonitor):
    """Competes for one destination on behalf of the server at ``address`` (``ip:port``).

    ``on_start`` runs when this server becomes the destination's active server (start the
    instance), ``on_stop`` when it stops being so (stop the instance). ``cid`` is Canal's
    ``canal.id``; ``delay`` Canal's 5 s before a standby takes over from another server.
    """

    def __init__(
        self,
        zk: KazooClient,
        destination: str,
        address: str,
        on_start: Callable[[], object],
        on_stop: Callable[[], object],
        *,
        cid: int = 1,
        delay: float = 5.0,
        session_timeout: float | None = None,
    ) -> None:
        self.destination = destination
        self.address = address
        self.running_data = ServerRunningData(address, cid)
        super().__init__(
            zk,
            server_running_path(destination),
            self.running_data.to_json(),
            on_start,
            on_stop,
            epoch_path=epoch_path(destination),
            epoch_data=lambda epoch: encode_epoch(epoch, address, cid),
            delay=delay,
            session_timeout=session_timeout,
            name=f"{destination}@{address}",
        )
        self.registration = EphemeralNode(zk, destination_cluster_path(destination, address))

    def start(self) -> None:
        """Register in the destination's cluster, then compete."""
        self.registration.start()
        try:
            super().start()
        except BaseException:
            self.registration.stop()
            raise

    def stop(self) -> None:
        super().stop()
        self.registration.stop()


class ServerHA:
    """The HA side of one server: its registration and a monitor per destination."""

    def __init__(
        self,
        zk: KazooClient,
        server: CanalServerWithEmbedded,
        address: str,
        *,
        cid: int = 1,
        delay: float = 5.0,
        flush_period: float = 1.0,
        session_timeout: float | None = None,
    ) -> None:
        self.zk = zk
        self.server = server
        self.address = address
        self.cid = cid
        self.delay = delay
        self.flush_period = flush_period
        self.session_timeout = session_timeout
        self.registration = EphemeralNode(zk, server_cluster_path(address))
        self._monitors: dict[str, ServerRunningMonitor] = {}
        self._lock = threading.Lock()

    def start(self) -> ServerHA:
        """Register the server (``/otter/canal/cluster/<address>``)."""
        self.registration.start()
        return self

    def stop(self) -> None:
        """Stop every destination here and give its running node up, then unregister."""
        with self._lock:
            monitors = list(self._monitors.values())
            self._monitors.clear()
        for monitor in monitors:
            monitor.stop()
        self.registration.stop()

    def __enter__(self) -> ServerHA:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ destinations
    def monitor(self, destination: str) -> ServerRunningMonitor:
        """The destination's monitor (created, not started, on first use)."""
        with self._lock:
            monitor = self._monitors.get(destination)
            if monitor is None:
                monitor = ServerRunningMonitor(
                    self.zk,
                    destination,
                    self.address,
                    lambda: self.server.start(destination),
                    lambda: self._stop_instance(destination),
                    cid=self.cid,
                    delay=self.delay,
                    session_timeout=self.session_timeout,
                )
                self._monitors[destination] = monitor
            return monitor

    def _stop_instance(self, destination: str) -> None:
        if destination in self.server.destinations:
            self.server.stop(destination)

    def meta_manager(self, destination: str) -> FencedMetaManager:
        """A meta manager for the destination's instance: fenced by its monitor's epoch and lease."""
        return FencedMetaManager(self.zk, self.monitor(destination), self.flush_period)

    def watch(self, destination: str) -> ServerRunningMonitor:
        """Start competing for the destination (its instance must be added to the server)."""
        monitor = self.monitor(destination)
        monitor.start()
        return monitor

    def unwatch(self, destination: str) -> None:
        """Stop competing for the destination (stops it here if it was active)."""
        with self._lock:
            monitor = self._monitors.pop(destination, None)
        if monitor is not None:
            monitor.stop()

    def deploy(self, instance: CanalInstance) -> CanalInstance:
        """Add an instance built with this HA's :meth:`meta_manager` to the server (lazily: only the
        monitor starts it) and compete for its destination."""
        self.server.add_instance(instance, lazy=True)
        self.watch(instance.destination)
        return instance

    def is_active(self, destination: str) -> bool:
        with self._lock:
            monitor = self._monitors.get(destination)
        return monitor is not None and monitor.is_active

    @property
    def destinations(self) -> list[str]:
        with self._lock:
            return list(self._monitors)
