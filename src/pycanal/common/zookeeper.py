"""Canal's ZooKeeper layout (``ZookeeperPathUtils``), node writes, and the client a component
owns or shares.

::

    /otter/canal/cluster/<ip:port>                              ephemeral: a live server
    /otter/canal/destinations/<dest>/cluster/<ip:port>          ephemeral: a server able to serve dest
    /otter/canal/destinations/<dest>/running                    ephemeral: the active server
    /otter/canal/destinations/<dest>/parse                      the parser's LogPosition
    /otter/canal/destinations/<dest>/epoch                      pycanal only: HA fencing
    /otter/canal/destinations/<dest>/<clientId>                 a subscription
    /otter/canal/destinations/<dest>/<clientId>/filter          its filter
    /otter/canal/destinations/<dest>/<clientId>/cursor          its LogPosition
    /otter/canal/destinations/<dest>/<clientId>/mark/<%010d>    an outstanding batch
    /otter/canal/destinations/<dest>/<clientId>/running         ephemeral: the active client
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = [
    "CLUSTER_ROOT",
    "DESTINATIONS_ROOT",
    "ZooKeeperClient",
    "batch_mark_path",
    "client_path",
    "client_running_path",
    "cursor_path",
    "destination_cluster_path",
    "destination_cluster_root",
    "destination_path",
    "epoch_path",
    "filter_path",
    "mark_dir_path",
    "parse_path",
    "server_cluster_path",
    "server_running_path",
    "write_node",
]

CLUSTER_ROOT = "/otter/canal/cluster"
DESTINATIONS_ROOT = "/otter/canal/destinations"


def server_cluster_path(address: str) -> str:
    return f"{CLUSTER_ROOT}/{address}"


def destination_path(destination: str) -> str:
    return f"{DESTINATIONS_ROOT}/{destination}"


def destination_cluster_root(destination: str) -> str:
    return f"{destination_path(destination)}/cluster"


def destination_cluster_path(destination: str, address: str) -> str:
    return f"{destination_cluster_root(destination)}/{address}"


def server_running_path(destination: str) -> str:
    return f"{destination_path(destination)}/running"


def parse_path(destination: str) -> str:
    """Where Canal's ``ZooKeeperLogPositionManager`` keeps the parser's position."""
    return f"{destination_path(destination)}/parse"


def epoch_path(destination: str) -> str:
    return f"{destination_path(destination)}/epoch"


def client_path(destination: str, client_id: int) -> str:
    return f"{destination_path(destination)}/{client_id}"


def filter_path(destination: str, client_id: int) -> str:
    return f"{client_path(destination, client_id)}/filter"


def cursor_path(destination: str, client_id: int) -> str:
    return f"{client_path(destination, client_id)}/cursor"


def mark_dir_path(destination: str, client_id: int) -> str:
    return f"{client_path(destination, client_id)}/mark"


def batch_mark_path(destination: str, client_id: int, batch_id: int) -> str:
    return f"{mark_dir_path(destination, client_id)}/{batch_id:010d}"


def client_running_path(destination: str, client_id: int) -> str:
    return f"{client_path(destination, client_id)}/running"


def write_node(zk: KazooClient, path: str, data: bytes) -> None:
    """Set ``path`` to ``data``, creating it (and its parents) if missing; another client may
    create or delete it concurrently, so set and create are retried a few times."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    for _ in range(10):
        try:
            zk.set(path, data)
            return
        except NoNodeError:
            pass
        try:
            zk.create(path, data, makepath=True)
            return
        except NodeExistsError:
            pass
    raise RuntimeError(f"could not write {path}: it keeps appearing and disappearing")


class ZooKeeperClient:
    """The ``KazooClient`` of a component: made from a connect string (``host:port[,...][/chroot]``)
    and owned (started by :meth:`open`, stopped by :meth:`close`), or a started one shared with
    others (never stopped here)."""

    def __init__(self, zk: str | KazooClient, timeout: float = 10.0, what: str = "ZooKeeper client") -> None:
        self._arg, self.timeout, self.what = zk, timeout, what
        self.owned = isinstance(zk, str)
        self._client: KazooClient | None = None

    @property
    def client(self) -> KazooClient:
        if self._client is None:
            raise RuntimeError(f"{self.what} is not started")
        return self._client

    def open(self) -> KazooClient:
        if self.owned:
            from kazoo.client import KazooClient

            client = KazooClient(hosts=str(self._arg), timeout=self.timeout)
            client.start(timeout=self.timeout)
            self._client = client
        else:
            self._client = self._arg  # type: ignore[assignment]
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self.owned:
            client.stop()
            client.close()
