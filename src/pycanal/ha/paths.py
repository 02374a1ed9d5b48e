"""The JSON of Canal's HA znodes (the paths: :mod:`pycanal.common.zookeeper`), plus pycanal's
epoch node::

    <dest>/running             {"active":true,"address":"ip:port","cid":1}
    <dest>/<clientId>/running  {"active":true,"address":"ip:port","clientId":1001}
    <dest>/epoch               {"address":"ip:port","cid":1,"epoch":7}   (persistent, fencing)

The JSON is what Canal's fastjson writes (keys in alphabetical order, no spaces), so Canal servers
and clients read pycanal's nodes and the other way round. The epoch node is new: its *version* is
the fencing token (see :mod:`pycanal.ha.election`); its data only tells people who took it last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ClientRunningData", "RunningDataError", "ServerRunningData", "encode_epoch"]


class RunningDataError(ValueError):
    """A running node holds something that is not Canal's running JSON."""


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")


def _loads(data: bytes, path: str, keys: tuple[str, ...]) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunningDataError(f"{path}: not JSON ({exc}): {data[:80]!r}") from None
    if not isinstance(obj, dict) or any(k not in obj for k in keys):
        raise RunningDataError(f"{path}: expected a JSON object with {', '.join(keys)}: {data[:80]!r}")
    return obj


def _address(value: object, path: str) -> str:
    host, sep, port = str(value).rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RunningDataError(f"{path}: address {value!r} is not ip:port")
    return str(value)


@dataclass(frozen=True, slots=True)
class ServerRunningData:
    """Canal's ``ServerRunningData``: who runs a destination."""

    address: str
    cid: int = 1
    active: bool = True

    def to_json(self) -> bytes:
        return _dumps({"active": self.active, "address": self.address, "cid": self.cid})

    @classmethod
    def from_json(cls, data: bytes, path: str = "running node") -> ServerRunningData:
        obj = _loads(data, path, ("address",))
        try:
            cid = int(obj.get("cid", 0))
        except (TypeError, ValueError):
            raise RunningDataError(f"{path}: cid {obj.get('cid')!r} is not a number") from None
        return cls(_address(obj["address"], path), cid, bool(obj.get("active", True)))

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host, int(port)


@dataclass(frozen=True, slots=True)
class ClientRunningData:
    """Canal's ``ClientRunningData``: which client consumes a (destination, clientId)."""

    client_id: int
    address: str
    active: bool = True

    def to_json(self) -> bytes:
        return _dumps({"active": self.active, "address": self.address, "clientId": self.client_id})

    @classmethod
    def from_json(cls, data: bytes, path: str = "client running node") -> ClientRunningData:
        obj = _loads(data, path, ("address", "clientId"))
        try:
            client_id = int(obj["clientId"])
        except (TypeError, ValueError):
            raise RunningDataError(f"{path}: clientId {obj['clientId']!r} is not a number") from None
        return cls(client_id, str(obj["address"]), bool(obj.get("active", True)))


def encode_epoch(epoch: int, address: str, cid: int) -> bytes:
    """The epoch node's data after ``address`` took the destination over."""
    return _dumps({"address": address, "cid": cid, "epoch": epoch})
