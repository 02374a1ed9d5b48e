"""``ZooKeeperMetaManager``: everything in ZooKeeper (kazoo), with Canal's paths and JSON.

Canal's layout (``ZookeeperPathUtils``)::

    /otter/canal/destinations/<dest>/<clientId>                 the subscription (empty node)
    /otter/canal/destinations/<dest>/<clientId>/filter          the filter, UTF-8 text
    /otter/canal/destinations/<dest>/<clientId>/cursor          LogPosition JSON with "@type"
    /otter/canal/destinations/<dest>/<clientId>/mark/<%010d>    PositionRange JSON with "@type"

``list_all_subscribe_info`` returns the numeric children of the destination node in clientId order,
as Canal does. ``unsubscribe`` deletes the client node recursively (filter, cursor, marks).

Batch ids: Canal creates the marks as persistent-sequential nodes, so its ids are the parent's
sequence counter (starting at 0 and advancing on deletes too). pycanal names the mark node itself
(``%010d``, the same width, so Canal reads them back) to give the same ids as every other manager:
per client, from 1, +1 per batch; a new manager continues after the largest outstanding id. A
concurrent writer is detected by ``NodeExists`` and the next id is taken.

``zk`` is a connect string (``"host:port[,host:port][/chroot]"``, the manager owns the client) or a
started ``KazooClient`` (shared, not stopped by the manager).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pycanal.common.zookeeper import (
    DESTINATIONS_ROOT,
    ZooKeeperClient,
    batch_mark_path,
    client_path,
    cursor_path,
    destination_path,
    filter_path,
    mark_dir_path,
    write_node,
)
from pycanal.meta.base import ClientIdentity, MetaManager, PositionRange, not_first_error
from pycanal.protocol.position import LogPosition

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = ["ZooKeeperMetaManager"]


def _is_numeric(name: str) -> bool:
    return name.isdigit() or (name.startswith("-") and name[1:].isdigit())


class ZooKeeperMetaManager(MetaManager):
    """See the module docstring."""

    def __init__(self, zk: str | KazooClient, *, timeout: float = 10.0) -> None:
        super().__init__()
        self._client = ZooKeeperClient(zk, timeout, "ZooKeeperMetaManager")
        self.timeout = timeout
        self._lock = threading.Lock()
        self._next_ids: dict[ClientIdentity, int] = {}

    @property
    def zk(self) -> KazooClient:
        return self._client.client

    def _do_start(self) -> None:
        self._client.open()
        self._next_ids.clear()

    def _do_stop(self) -> None:
        self._client.close()

    def _read(self, path: str) -> bytes | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return data

    def _write(self, path: str, data: bytes) -> None:
        write_node(self.zk, path, data)

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, client: ClientIdentity) -> None:
        self.zk.ensure_path(client_path(client.destination, client.client_id))
        path = filter_path(client.destination, client.client_id)
        if client.filter is not None:
            self._write(path, client.filter.encode("utf-8"))
        else:
            from kazoo.exceptions import NoNodeError

            try:
                self.zk.delete(path)
            except NoNodeError:
                pass

    def has_subscribe(self, client: ClientIdentity) -> bool:
        return self.zk.exists(client_path(client.destination, client.client_id)) is not None

    def unsubscribe(self, client: ClientIdentity) -> None:
        from kazoo.exceptions import NoNodeError

        try:
            self.zk.delete(client_path(client.destination, client.client_id), recursive=True)
        except NoNodeError:
            pass
        with self._lock:
            self._next_ids.pop(client, None)

    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        from kazoo.exceptions import NoNodeError

        try:
            names = self.zk.get_children(destination_path(destination))
        except NoNodeError:
            return []
        out = []
        for cid in sorted(int(n) for n in names if _is_numeric(n)):
            data = self._read(filter_path(destination, cid))
            out.append(ClientIdentity(destination, cid, None if data is None else data.decode("utf-8")))
        return out

    def list_destinations(self) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(self.zk.get_children(DESTINATIONS_ROOT))
        except NoNodeError:
            return []

    # ------------------------------------------------------------------ cursors
    def get_cursor(self, client: ClientIdentity) -> LogPosition | None:
        data = self._read(cursor_path(client.destination, client.client_id))
        return None if not data else LogPosition.from_json(data)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        data = position.to_json(with_type=True).encode("utf-8")
        self._write(cursor_path(client.destination, client.client_id), data)

    # ------------------------------------------------------------------ batches
    def _batch_ids(self, client: ClientIdentity) -> list[int]:
        from kazoo.exceptions import NoNodeError

        try:
            names = self.zk.get_children(mark_dir_path(client.destination, client.client_id))
        except NoNodeError:
            return []
        return sorted(int(n) for n in names if _is_numeric(n))

    def add_batch(self, client: ClientIdentity, range: PositionRange, batch_id: int | None = None) -> int:
        from kazoo.exceptions import NodeExistsError

        data = range.to_json(with_type=True).encode("utf-8")
        with self._lock:
            if batch_id is not None:
                batch_id = int(batch_id)
                self._write(batch_mark_path(client.destination, client.client_id, batch_id), data)
                self._next_ids[client] = max(self._next_ids.get(client, 1), batch_id + 1)
                return batch_id
            ids = self._batch_ids(client)
            next_id = max(self._next_ids.get(client, 1), (ids[-1] + 1) if ids else 1)
            while True:
                path = batch_mark_path(client.destination, client.client_id, next_id)
                try:
                    self.zk.create(path, data, makepath=True)
                    break
                except NodeExistsError:
                    next_id += 1
            self._next_ids[client] = next_id + 1
            return next_id

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        ids = self._batch_ids(client)
        if not ids:
            return None
        if ids[0] != batch_id:
            raise not_first_error(batch_id, ids[0])
        path = batch_mark_path(client.destination, client.client_id, batch_id)
        data = self._read(path)
        from kazoo.exceptions import NoNodeError

        try:
            self.zk.delete(path)
        except NoNodeError:
            return None
        return None if data is None else PositionRange.from_json(data)

    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        data = self._read(batch_mark_path(client.destination, client.client_id, batch_id))
        return None if data is None else PositionRange.from_json(data)

    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None:
        ids = self._batch_ids(client)
        return self.get_batch(client, ids[0]) if ids else None

    def get_lastest_batch(self, client: ClientIdentity) -> PositionRange | None:
        ids = self._batch_ids(client)
        return self.get_batch(client, ids[-1]) if ids else None

    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        out: dict[int, PositionRange] = {}
        for bid in self._batch_ids(client):
            rng = self.get_batch(client, bid)
            if rng is not None:
                out[bid] = rng
        return out

    def clear_all_batchs(self, client: ClientIdentity) -> None:
        from kazoo.exceptions import NoNodeError

        for bid in self._batch_ids(client):
            try:
                self.zk.delete(batch_mark_path(client.destination, client.client_id, bid))
            except NoNodeError:
                pass
