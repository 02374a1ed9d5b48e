"""``EphemeralNode``: an ephemeral znode that stays registered across ZooKeeper sessions.

Canal's servers announce themselves with ephemeral nodes (``/otter/canal/cluster/<ip:port>``,
``/otter/canal/destinations/<dest>/cluster/<ip:port>``). An ephemeral node dies with its session,
so after a session expiry the node is created again on the next connection (kazoo reconnects with
a new session by itself). A node with the same path held by another session (a stale node not yet
removed, or a second server with the same address) is watched and taken when it goes away; a
clash is logged.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState, WatchedEvent

from .election import session_timeout_of

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["EphemeralNode"]

log = logging.getLogger(__name__)


class EphemeralNode:
    def __init__(self, zk: KazooClient, path: str, data: bytes = b"") -> None:
        self.zk = zk
        self.path = path
        self.data = data
        self._lock = threading.Lock()
        self._running = False

    def start(self) -> None:
        """Create the node now (raises if ZooKeeper cannot be reached) and keep it."""
        with self._lock:
            if self._running:
                return
            self._running = True
        self.zk.add_listener(self._on_state)
        self._ensure()

    def stop(self) -> None:
        """Stop keeping the node and delete it if this session owns it."""
        with self._lock:
            if not self._running:
                return
            self._running = False
        self.zk.remove_listener(self._on_state)
        if self.zk.state != KazooState.CONNECTED:
            return  # the node ends with the session
        timeout = session_timeout_of(self.zk)
        try:
            _, stat = self.zk.get_async(self.path).get(timeout=timeout)
            if stat.ephemeralOwner == self.zk.client_id[0]:
                self.zk.delete_async(self.path, version=stat.version).get(timeout=timeout)
        except NoNodeError:
            pass
        except (KazooException, self.zk.handler.timeout_exception) as exc:  # it ends with the session
            log.warning("could not delete %s: %r", self.path, exc)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread, which must not block: create from another thread.
        if state == KazooState.CONNECTED and self._running:
            self.zk.handler.spawn(self._ensure_quietly)

    def _on_watch(self, event: WatchedEvent) -> None:
        if self._running and self.zk.state == KazooState.CONNECTED:
            self.zk.handler.spawn(self._ensure_quietly)

    def _ensure_quietly(self) -> None:
        try:
            self._ensure()
        except KazooException as exc:  # the next reconnection tries again
            log.warning("could not register %s: %r", self.path, exc)

    def _ensure(self) -> None:
        while self._running:
            try:
                self.zk.create(self.path, self.data, ephemeral=True, makepath=True)
                log.info("registered %s", self.path)
                return
            except NodeExistsError:
                pass
            stat = self.zk.exists(self.path, watch=self._on_watch)
            if stat is None:
                continue  # gone meanwhile: create again
            if stat.ephemeralOwner != self.zk.client_id[0]:
                log.warning(
                    "%s is held by another ZooKeeper session (0x%x): registered when it goes away",
                    self.path,
                    stat.ephemeralOwner,
                )
            return
