"""The meta-manager contract (Canal's ``CanalMetaManager``) and its value types.

A meta manager keeps, per destination, the subscribed clients (``ClientIdentity``), each client's
cursor (the ``LogPosition`` of its last ack) and each client's outstanding batches (``PositionRange``
by batch id). Batch ids increase per client from 1; ``remove_batch`` only accepts the *first*
(smallest) outstanding id, otherwise ``CanalMetaManagerError("batchId:X is not the firstly:Y")``.

Unlike Canal's ``MemoryMetaManager`` (which keeps a client's cursor after ``unsubscribe``), every
pycanal implementation drops the client's cursor and batches on ``unsubscribe``, as Canal's
ZooKeeper manager does (it deletes the whole client node): all implementations have one behaviour.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from pycanal.protocol.position import LogPosition

__all__ = [
    "CLIENT_IDENTITY_TYPE",
    "DEFAULT_CLIENT_ID",
    "POSITION_RANGE_TYPE",
    "CanalMetaManagerError",
    "ClientIdentity",
    "MetaManager",
    "PositionRange",
]

DEFAULT_CLIENT_ID = 1001
CLIENT_IDENTITY_TYPE = "com.alibaba.otter.canal.protocol.ClientIdentity"
POSITION_RANGE_TYPE = "com.alibaba.otter.canal.protocol.position.PositionRange"


class CanalMetaManagerError(RuntimeError):
    """Canal's ``CanalMetaManagerException``."""


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """A consumer of a destination. Equality and hashing use ``destination`` and ``client_id`` only
    (the filter is ignored), like Canal's ``ClientIdentity.equals``."""

    destination: str
    client_id: int = DEFAULT_CLIENT_ID
    filter: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.destination:
            raise ValueError("ClientIdentity needs a destination")
        cid = int(self.client_id)
        if not -(2**15) <= cid < 2**15:
            raise ValueError(f"clientId must be a Java short, not {self.client_id!r}")
        object.__setattr__(self, "client_id", cid)

    def with_filter(self, filter: str | None) -> ClientIdentity:
        return ClientIdentity(self.destination, self.client_id, filter)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"clientId": self.client_id, "destination": self.destination}
        if self.filter is not None:
            out["filter"] = self.filter
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClientIdentity:
        return cls(str(data["destination"]), int(data.get("clientId", DEFAULT_CLIENT_ID)), data.get("filter"))

    def __str__(self) -> str:
        return f"{self.destination}/{self.client_id}"


def _pos_to_dict(pos: LogPosition | None, with_type: bool) -> dict[str, Any] | None:
    return None if pos is None else pos.to_dict(with_type=with_type)


def _pos_from_dict(data: dict[str, Any] | None) -> LogPosition | None:
    return None if data is None else LogPosition.from_dict(data)


@dataclass(slots=True)
class PositionRange:
    """One batch handed to a client (Canal's ``PositionRange``): where it starts, where the cursor
    moves on ack (the last transaction boundary in it), where it ends, and the store sequence of
    its end (``end_seq``, for ``store.ack``)."""

    start: LogPosition | None = None
    ack: LogPosition | None = None
    end: LogPosition | None = None
    end_seq: int = -1

    def to_dict(self, *, with_type: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if with_type:
            out["@type"] = POSITION_RANGE_TYPE
        for key, pos in (("ack", self.ack), ("end", self.end)):
            if pos is not None:
                out[key] = _pos_to_dict(pos, with_type)
        out["endSeq"] = self.end_seq
        if self.start is not None:
            out["start"] = _pos_to_dict(self.start, with_type)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PositionRange:
        return cls(
            _pos_from_dict(data.get("start")),
            _pos_from_dict(data.get("ack")),
            _pos_from_dict(data.get("end")),
            int(data.get("endSeq", -1)),
        )

    def to_json(self, *, with_type: bool = False) -> str:
        return json.dumps(self.to_dict(with_type=with_type), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> PositionRange:
        return cls.from_dict(json.loads(text))


class MetaManager(ABC):
    """Canal's ``CanalMetaManager``. Implementations are thread-safe."""

    def __init__(self) -> None:
        self._running = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._running:
            return
        self._do_start()
        self._running = True

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self._do_stop()

    def is_start(self) -> bool:
        return self._running

    @property
    def running(self) -> bool:
        return self._running

    def _do_start(self) -> None:  # noqa: B027 - optional hook
        pass

    def _do_stop(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> MetaManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ subscriptions
    @abstractmethod
    def subscribe(self, client: ClientIdentity) -> None:
        """Add (or re-add, replacing its filter) a client of its destination."""

    @abstractmethod
    def has_subscribe(self, client: ClientIdentity) -> bool: ...

    @abstractmethod
    def unsubscribe(self, client: ClientIdentity) -> None:
        """Remove the client with its cursor and batches."""

    @abstractmethod
    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        """The destination's clients, with their filters."""

    # ------------------------------------------------------------------ cursors
    @abstractmethod
    def get_cursor(self, client: ClientIdentity) -> LogPosition | None: ...

    @abstractmethod
    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None: ...

    # ------------------------------------------------------------------ batches
    @abstractmethod
    def add_batch(self, client: ClientIdentity, range: PositionRange, batch_id: int | None = None) -> int:
        """Record an outstanding batch; returns its id (the next id of the client, from 1, unless
        ``batch_id`` is given; an explicit id moves the counter past it)."""

    @abstractmethod
    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        """Remove the first outstanding batch; ``None`` when there is none; any other id raises
        ``CanalMetaManagerError("batchId:X is not the firstly:Y")``."""

    @abstractmethod
    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None: ...

    @abstractmethod
    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None: ...

    @abstractmethod
    def get_lastest_batch(self, client: ClientIdentity) -> PositionRange | None: ...

    @abstractmethod
    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        """Outstanding batches by id, in id order."""

    @abstractmethod
    def clear_all_batchs(self, client: ClientIdentity) -> None: ...

    def get_latest_batch(self, client: ClientIdentity) -> PositionRange | None:
        """Alias of :meth:`get_lastest_batch` (Canal's spelling)."""
        return self.get_lastest_batch(client)


def not_first_error(batch_id: int, first: int) -> CanalMetaManagerError:
    return CanalMetaManagerError(f"batchId:{batch_id} is not the firstly:{first}")
