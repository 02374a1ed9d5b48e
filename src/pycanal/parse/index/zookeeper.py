"""Canal's ``ZooKeeperLogPositionManager``: the node ``/otter/canal/destinations/<destination>/parse``
(:func:`pycanal.common.zookeeper.parse_path`) holding the ``LogPosition`` JSON with
``"@type":"com.alibaba.otter.canal.protocol.position.LogPosition"`` (fastjson's ``WriteClassName``,
as Canal writes it); every persist is a ZooKeeper write (``PeriodMixedLogPositionManager`` in
:mod:`pycanal.parse.index.mixed` writes behind).

``zk`` is a connect string (the manager owns its ``KazooClient``) or a started ``KazooClient``
(shared, never stopped by the manager).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pycanal.common.zookeeper import ZooKeeperClient, parse_path, write_node
from pycanal.protocol.position import LogPosition

from .base import LogPositionManager, LogPositionManagerError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["ZooKeeperLogPositionManager"]


class ZooKeeperLogPositionManager(LogPositionManager):
    """See the module docstring."""

    def __init__(self, zk: str | KazooClient, *, timeout: float = 10.0) -> None:
        self._client = ZooKeeperClient(zk, timeout, "ZooKeeperLogPositionManager")
        self.timeout = timeout

    @property
    def zk(self) -> KazooClient:
        return self._client.client

    def start(self) -> None:
        if self.running:
            return
        self._client.open()
        super().start()

    def stop(self) -> None:
        if not self.running:
            return
        super().stop()
        self._client.close()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        from kazoo.exceptions import KazooException, NoNodeError

        path = parse_path(destination)
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        except KazooException as exc:
            raise LogPositionManagerError(f"cannot read {path}: {exc!r}") from exc
        if not data:
            return None
        try:
            return LogPosition.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LogPositionManagerError(f"cannot decode {path}: {exc}") from exc

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        from kazoo.exceptions import KazooException

        path = parse_path(destination)
        data = log_position.to_json(with_type=True).encode("utf-8")
        try:
            write_node(self.zk, path, data)
        except (KazooException, RuntimeError) as exc:
            raise LogPositionManagerError(f"cannot write {path}: {exc!r}") from exc
