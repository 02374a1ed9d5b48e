"""``ClusterConnector``: a client of whichever server runs a destination, found in ZooKeeper.

::

    conn = ClusterConnector("zk1:2181,zk2:2181", "example", "canal", "canal")
    conn.connect()
    conn.subscribe(r"shop\\..*")
    for message in conn.stream(batch_size=1000, timeout=1000):
        handle(message.entries)          # acked when the next message is requested

The same API as :class:`SimpleConnector` (Canal's ``ClusterCanalConnector`` with its
``ClusterNodeAccessStrategy``):

* **Discovery.** The server is the address in ``/otter/canal/destinations/<dest>/running``; when
  nobody runs the destination yet, one of the servers registered under
  ``/otter/canal/destinations/<dest>/cluster`` (a lazy destination starts on its first subscribe).
* **Failover.** A call that fails (connection lost, a server that is no longer active answers
  with an error) is retried on a new connection to the server ZooKeeper names then, every
  ``retry_interval`` seconds for up to ``failover_timeout`` seconds (Canal: 3 tries, 5 s apart);
  the new connection subscribes again with the last filter and rolls back.
* **At-least-once.** Batches handed out before a failover are not acknowledged on the new
  server: their ids mean nothing there (ids restart per server, so an ack could confirm a batch
  the caller never saw). Their ack is dropped with a warning, and since the new server resumes at
  the last acknowledged cursor, their entries come again.
* **Exclusive** (``exclusive=True``, Canal's client with ZooKeeper): a
  :class:`ClientRunningMonitor` lets one client per (destination, clientId) consume; the others
  wait in their calls until it goes away (up to ``failover_timeout``, or in :meth:`connect` up to
  ``active_timeout``).

``zk_servers`` is a connect string (the connector owns its kazoo client) or a started
``KazooClient`` (shared, never stopped here).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kazoo.exceptions import KazooException, NoNodeError

from pycanal.common.zookeeper import destination_cluster_root, server_running_path
from pycanal.ha.paths import RunningDataError, ServerRunningData
from pycanal.meta.base import DEFAULT_CLIENT_ID

from .running import ClientRunningMonitor
from .simple import CanalClientError, Connector, Message, SimpleConnector

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["ClusterConnector"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class ClusterConnector(Connector):
    """See the module docstring."""

    def __init__(
        self,
        zk_servers: str | KazooClient,
        destination: str,
        username: str = "",
        password: str = "",
        so_timeout: float = 10.0,
        idle_timeout: float = 3600.0,
        *,
        client_id: int = DEFAULT_CLIENT_ID,
        retry_interval: float = 1.0,
        failover_timeout: float = 60.0,
        exclusive: bool = False,
        active_timeout: float | None = None,
        zk_timeout: float = 10.0,
    ) -> None:
        if not destination:
            raise ValueError("ClusterConnector needs a destination")
        self.destination = destination
        self.username = username
        self._password = password
        self.so_timeout = so_timeout
        self.idle_timeout = idle_timeout
        self.client_id = client_id
        self.retry_interval = retry_interval
        self.failover_timeout = failover_timeout
        self.exclusive = exclusive
        self.active_timeout = active_timeout
        self._zk_arg = zk_servers
        self._zk_timeout = zk_timeout
        self._zk: KazooClient | None = None
        self._monitor: ClientRunningMonitor | None = None
        self._conn: SimpleConnector | None = None
        self._filter: str | None = None
        self._issued: set[int] = set()  # batch ids handed out on the current connection
        self._stale: set[int] = set()  # ... and on earlier ones, not acknowledged
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ClusterConnector(destination={self.destination!r}, client_id={self.client_id})"

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.connected

    @property
    def address(self) -> tuple[str, int] | None:
        """The server of the current connection."""
        return self._conn.address if self._conn is not None else None

    @property
    def filter(self) -> str | None:
        return self._filter

    # ------------------------------------------------------------------ ZooKeeper
    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            if isinstance(self._zk_arg, str):
                from kazoo.client import KazooClient

                client = KazooClient(hosts=self._zk_arg, timeout=self._zk_timeout)
                client.start(timeout=self._zk_timeout)
                self._zk = client
            else:
                self._zk = self._zk_arg
        return self._zk

    def running_server(self) -> tuple[str, int]:
        """The address of the destination's server, as ZooKeeper tells now (see the module
        docstring); :class:`CanalClientError` when there is none."""
        path = server_running_path(self.destination)
        try:
            data, _ = self._zk_read(self.zk.get_async(path))
        except NoNodeError:
            data = b""
        if data:
            try:
                running = ServerRunningData.from_json(data, path)
            except RunningDataError as exc:
                raise CanalClientError(str(exc)) from None
            if running.active:
                return running.host_port
        root = destination_cluster_root(self.destination)
        try:
            children = self._zk_read(self.zk.get_children_async(root))
        except NoNodeError:
            children = []
        servers = []
        for child in children:
            host, sep, port = child.rpartition(":")
            if sep and host and port.isdigit():
                servers.append((host, int(port)))
            else:
                log.warning("ignoring %s/%s: not ip:port", root, child)
        if not servers:
            raise CanalClientError(f"no alive canal server for {self.destination} ({path}, {root})")
        return random.choice(servers)

    def _zk_read(self, async_result: Any) -> Any:
        # A disconnected kazoo client would hold the request until it reconnects.
        try:
            return async_result.get(timeout=self._zk_timeout)
        except self.zk.handler.timeout_exception:
            raise CanalClientError(f"ZooKeeper did not answer within {self._zk_timeout:g}s") from None

    # ------------------------------------------------------------------ connection
    def connect(self) -> None:
        """Connect to the destination's server (with ``exclusive``: once this client is the active
        one). Raises :class:`CanalClientError` when no server answers within ``failover_timeout``."""
        with self._lock:
            if self.exclusive and self._monitor is None:
                self._monitor = ClientRunningMonitor(self.zk, self.destination, self.client_id)
                self._monitor.start()
                if not self._monitor.wait_for_active(self.active_timeout):
                    raise CanalClientError(
                        f"{self.destination}/{self.client_id}: another client is active "
                        f"(waited {self.active_timeout}s)"
                    )
            self._connection(time.monotonic() + self.failover_timeout)

    def disconnect(self) -> None:
        """Close the connection, give the client running node up (``exclusive``) and stop an owned
        kazoo client. The subscription is kept for the next :meth:`connect`."""
        with self._lock:
            self._drop()
            monitor, self._monitor = self._monitor, None
            if monitor is not None:
                monitor.stop()
            if self._zk is not None and isinstance(self._zk_arg, str):
                self._zk.stop()
                self._zk.close()
            self._zk = None

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.disconnect()
        self._stale |= self._issued
        self._issued = set()

    def _connection(self, deadline: float) -> SimpleConnector:
        """The current connection, or a new one to the server ZooKeeper names (retried)."""
        while True:
            if self._monitor is not None and not self._monitor.is_active:
                self._drop()  # another client may be consuming now: wait for our turn
                if not self._monitor.wait_for_active(max(0.0, deadline - time.monotonic())):
                    raise CanalClientError(f"{self.destination}/{self.client_id}: another client is active")
            if self._conn is not None and self._conn.connected:
                return self._conn
            self._drop()
            try:
                conn = SimpleConnector(
                    self.running_server(),
                    self.destination,
                    self.username,
                    self._password,
                    self.so_timeout,
                    self.idle_timeout,
                    client_id=self.client_id,
                )
                conn.connect()
                if self._filter is not None:
                    conn.subscribe(self._filter)
                self._conn = conn
                log.info("%r connected to %s:%d", self, *conn.address)
                return conn
            except (CanalClientError, KazooException) as exc:
                if time.monotonic() + self.retry_interval > deadline:
                    raise CanalClientError(f"{self!r}: no server could be reached: {exc}") from exc
                log.warning("%r: %s; retrying in %gs", self, exc, self.retry_interval)
                time.sleep(self.retry_interval)

    def _call(self, what: str, fn: Callable[[SimpleConnector], T]) -> T:
        """``fn`` on a connection; on failure, again on a new connection until the deadline."""
        deadline = time.monotonic() + self.failover_timeout
        with self._lock:
            while True:
                conn = self._connection(deadline)
                try:
                    return fn(conn)
                except CanalClientError as exc:
                    self._drop()
                    if time.monotonic() + self.retry_interval > deadline:
                        raise CanalClientError(
                            f"{what} failed after failing over for {self.failover_timeout}s: {exc}", exc.code
                        ) from exc
                    log.warning("%r: %s failed (%s); failing over", self, what, exc)
                    time.sleep(self.retry_interval)

    # ------------------------------------------------------------------ subscription
    def subscribe(self, filter: str = "") -> None:
        self._call("subscribe", lambda c: c.subscribe(filter))
        self._filter = filter

    def unsubscribe(self) -> None:
        self._call("unsubscribe", lambda c: c.unsubscribe())
        self._filter = None

    # ------------------------------------------------------------------ get / ack / rollback
    def get_without_ack(
        self, batch_size: int = 1000, timeout: float | None = None, unit: str = "ms"
    ) -> Message:
        with self._lock:
            message = self._call("get", lambda c: c.get_without_ack(batch_size, timeout, unit))
            if message.id != -1:
                self._issued.add(message.id)
            return message

    def ack(self, batch_id: int) -> None:
        """Confirm a batch. A batch of a connection lost since is not confirmed anywhere: it comes
        again (logged)."""
        with self._lock:
            if self._stale_batch(batch_id, "ack"):
                return
            conn = self._conn
            if conn is None:
                raise CanalClientError(f"{self!r}: not connected: call connect() first")
            try:
                conn.ack(batch_id)
            except CanalClientError as exc:
                self._drop()  # the connection is gone, and with it the batch
                log.warning("%r: ack of batch %d failed (%s); it comes again", self, batch_id, exc)
                return
            self._issued.discard(batch_id)

    def rollback(self, batch_id: int | None = None) -> None:
        """Have the server hand out again one batch or (None) every outstanding batch. Batches of
        a lost connection come again anyway."""
        with self._lock:
            if batch_id is not None and self._stale_batch(batch_id, "rollback"):
                return
            self._call("rollback", lambda c: c.rollback(batch_id))
            if batch_id is None:
                self._issued.clear()
            else:
                self._issued.discard(batch_id)

    def _stale_batch(self, batch_id: int, what: str) -> bool:
        if batch_id in self._issued or batch_id not in self._stale:
            return False
        self._stale.discard(batch_id)
        log.warning("%r: %s of batch %d from a lost connection dropped; it comes again", self, what, batch_id)
        return True
