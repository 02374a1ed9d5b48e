"""``ClientRunningMonitor``: one active client per (destination, clientId), Canal's client HA.

The active client holds the ephemeral ``/otter/canal/destinations/<dest>/<clientId>/running``
(Canal's JSON ``{"active":true,"address":"ip:port","clientId":1001}``); the others wait and take
over when it goes away: at once if they held it last, otherwise after ``delay`` seconds (Canal's
5 s). The election is :class:`pycanal.ha.RunningMonitor`'s, so beyond Canal a client also stops
(``on_stop``) when its ZooKeeper connection is lost or its lease runs out, before its session can
expire and a standby start consuming the same clientId.

::

    monitor = ClientRunningMonitor(zk, "example", 1001, on_start=resume, on_stop=pause)
    monitor.start()
    monitor.wait_for_active()
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from pycanal.common.zookeeper import client_running_path
from pycanal.ha.election import RunningMonitor
from pycanal.ha.paths import ClientRunningData
from pycanal.meta.base import DEFAULT_CLIENT_ID

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["ClientRunningMonitor"]


def _host_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class ClientRunningMonitor(RunningMonitor):
    """See the module docstring. ``address`` is what the running node shows (default: this
    host's IP, as Canal's client writes before it connects)."""

    def __init__(
        self,
        zk: KazooClient,
        destination: str,
        client_id: int = DEFAULT_CLIENT_ID,
        on_start: Callable[[], object] = lambda: None,
        on_stop: Callable[[], object] = lambda: None,
        *,
        address: str | None = None,
        delay: float = 5.0,
        session_timeout: float | None = None,
    ) -> None:
        self.destination = destination
        self.client_id = int(client_id)
        self.running_data = ClientRunningData(self.client_id, address or _host_ip())
        super().__init__(
            zk,
            client_running_path(destination, self.client_id),
            self.running_data.to_json(),
            on_start,
            on_stop,
            delay=delay,
            session_timeout=session_timeout,
            name=f"{destination}/{self.client_id}@{self.running_data.address}",
        )
