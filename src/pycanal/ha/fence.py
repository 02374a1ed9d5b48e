"""Fenced ZooKeeper writes and the fenced meta manager of an HA destination.

* :class:`FencedZooKeeper` is the part of ``KazooClient`` that :class:`ZooKeeperMetaManager` uses,
  with every write (set, create, delete, ensure_path) sent as one ZooKeeper transaction that first
  checks the destination's epoch node is still at the version this server set when it took over
  (:attr:`RunningMonitor.fence_epoch`). After another server's takeover the check fails and
  nothing is written (:class:`FencedError`): a deposed server, however late it wakes up, cannot
  move a cursor back or re-create a client node. Reads pass through. Writes fail fast while the
  client is disconnected instead of queueing until reconnection.
* :class:`FencedMetaManager` is Canal's HA meta manager (``PeriodMixedMetaManager``: memory, cursors
  flushed to ZooKeeper every ``period`` seconds) over a :class:`FencedZooKeeper`, which also checks
  the monitor's lease (:meth:`RunningMonitor.check`) before it starts (so a lazily started
  instance cannot start dumping on a standby) and before every subscribe, batch hand-out and ack,
  the calls every served request goes through: a server that cannot prove it is active serves
  nothing, even in the instant after a freeze before its controller thread runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from pycanal.meta import ClientIdentity, PeriodMixedMetaManager, PositionRange, ZooKeeperMetaManager

from .election import FencedError, RunningMonitor, session_timeout_of, transaction_error

if TYPE_CHECKING:
    from kazoo.client import KazooClient, TransactionRequest

__all__ = ["FencedMetaManager", "FencedZooKeeper"]


class FencedZooKeeper:
    """See the module docstring. ``monitor`` must have an ``epoch_path``."""

    def __init__(self, zk: KazooClient, monitor: RunningMonitor) -> None:
        if monitor.epoch_path is None:
            raise ValueError(f"{monitor.name}: fencing needs a monitor with an epoch node")
        self.zk = zk
        self.monitor = monitor
        self.epoch_path = monitor.epoch_path
        self.timeout = session_timeout_of(zk)

    # ------------------------------------------------------------------ reads
    def get(self, path: str, watch: Callable[..., Any] | None = None) -> Any:
        return self.zk.get(path, watch)

    def exists(self, path: str, watch: Callable[..., Any] | None = None) -> Any:
        return self.zk.exists(path, watch)

    def get_children(self, path: str, watch: Callable[..., Any] | None = None) -> list[str]:
        return self.zk.get_children(path, watch)

    # ------------------------------------------------------------------ fenced writes
    def _commit(self, build: Callable[[TransactionRequest], None]) -> list[Any]:
        epoch = self.monitor.fence_epoch
        if epoch is None:
            raise FencedError(f"{self.monitor.name}: never active, nothing may be written")
        if self.zk.state != KazooState.CONNECTED:
            raise ConnectionLoss(
                f"{self.monitor.name}: ZooKeeper {str(self.zk.state).lower()}, write refused"
            )
        txn = self.zk.transaction()
        txn.check(self.epoch_path, epoch)
        build(txn)
        results = txn.commit_async().get(timeout=self.timeout)
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise FencedError(
                f"{self.monitor.name}: epoch {epoch} is over (another server took over); write refused"
            )
        error = transaction_error(results)
        if error is not None:
            raise error
        return results[1:]

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        return self._commit(lambda t: t.set_data(path, value, version))[0]

    def create(self, path: str, value: bytes = b"", *, makepath: bool = False) -> str:
        if makepath:
            parent = path.rsplit("/", 1)[0]
            if parent:
                self.ensure_path(parent)
        return self._commit(lambda t: t.create(path, value))[0]

    def ensure_path(self, path: str) -> bool:
        node = ""
        for part in path.strip("/").split("/"):
            node += "/" + part
            if self.zk.exists(node) is None:
                try:
                    self._commit(lambda t, n=node: t.create(n, b""))
                except NodeExistsError:
                    pass
        return True

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        paths = self._subtree(path) if recursive else [path]

        def build(txn: TransactionRequest) -> None:
            for p in paths:  # children first
                txn.delete(p, version if p == path else -1)

        self._commit(build)
        return True

    def _subtree(self, path: str) -> list[str]:
        out: list[str] = []
        for child in self.zk.get_children(path):
            out += self._subtree(f"{path}/{child}")
        out.append(path)
        return out


class FencedMetaManager(PeriodMixedMetaManager):
    """See the module docstring; ``zk`` is the started client the monitor uses."""

    def __init__(self, zk: KazooClient, monitor: RunningMonitor, period: float = 1.0) -> None:
        inner = ZooKeeperMetaManager(FencedZooKeeper(zk, monitor))  # type: ignore[arg-type]
        super().__init__(inner, period)
        self.monitor = monitor

    def _do_start(self) -> None:
        self.monitor.check()
        super()._do_start()

    def subscribe(self, client: ClientIdentity) -> None:
        self.monitor.check()
        super().subscribe(client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        self.monitor.check()
        super().unsubscribe(client)

    def add_batch(self, client: ClientIdentity, range: PositionRange, batch_id: int | None = None) -> int:
        self.monitor.check()
        return super().add_batch(client, range, batch_id)

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        self.monitor.check()
        return super().remove_batch(client, batch_id)
