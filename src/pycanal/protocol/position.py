"""Canal's parser positions: ``EntryPosition``, ``LogIdentity`` and ``LogPosition``.

``EntryPosition`` is one point of a source's binlog (file + offset, with the source's server id,
the executed GTID set in GTID mode and the event time in milliseconds). Positions order by
``(journal_name, position)`` like Canal's ``EntryPosition.compareTo``; equality compares every
field, like Canal's ``equals``.

``LogPosition`` is what the position managers store: the position plus the identity of the source
it was read from (``LogIdentity``: source address and the replica's slave id). Its JSON is Canal's
(fastjson2), including the historic misspelling ``postion``::

    {"identity":{"slaveId":-1,"sourceAddress":{"address":"mysql","port":3306}},
     "postion":{"gtid":"","included":false,"journalName":"mysql-bin.000032","position":696,
                "serverId":1,"timestamp":1589189724000}}

``null`` fields are left out (fastjson's default); ``@type`` is written only on request (Canal's
ZooKeeper cursors) and ignored when read.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "BINLOG_START_OFFSET",
    "LOG_POSITION_TYPE",
    "EntryPosition",
    "LogIdentity",
    "LogPosition",
    "binlog_file_order",
    "min_log_position",
]

BINLOG_START_OFFSET = 4
LOG_POSITION_TYPE = "com.alibaba.otter.canal.protocol.position.LogPosition"
_BINLOG_NAME = re.compile(r"(.*)\.(\d+)")


@functools.lru_cache(maxsize=64)
def binlog_file_order(name: str) -> tuple[str, int]:
    """(prefix, sequence number) of a binlog file name: it orders files past ``.999999``, where
    the names' text order (``EntryPosition``'s, Canal's) does not; -1 for a name without one."""
    m = _BINLOG_NAME.fullmatch(name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


@dataclass(slots=True)
class EntryPosition:
    """A binlog position (Canal's ``EntryPosition`` / ``TimePosition``); ``timestamp`` in ms."""

    journal_name: str | None = None
    position: int | None = None
    server_id: int | None = None
    gtid: str | None = None
    timestamp: int | None = None
    included: bool = False

    def _key(self) -> tuple[str, int]:
        return (self.journal_name or "", self.position if self.position is not None else -1)

    def compare_to(self, other: EntryPosition) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __lt__(self, other: EntryPosition) -> bool:
        return self._key() < other._key()

    def __le__(self, other: EntryPosition) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: EntryPosition) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: EntryPosition) -> bool:
        return self._key() >= other._key()

    def copy(self, **changes: Any) -> EntryPosition:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.gtid is not None:
            out["gtid"] = self.gtid
        out["included"] = self.included
        if self.journal_name is not None:
            out["journalName"] = self.journal_name
        if self.position is not None:
            out["position"] = self.position
        if self.server_id is not None:
            out["serverId"] = self.server_id
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EntryPosition:
        def num(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)

        return cls(
            journal_name=data.get("journalName"),
            position=num("position"),
            server_id=num("serverId"),
            gtid=data.get("gtid"),
            timestamp=num("timestamp"),
            included=bool(data.get("included", False)),
        )

    def __str__(self) -> str:
        parts = [f"{self.journal_name or ''}:{self.position if self.position is not None else ''}"]
        if self.timestamp:
            parts.append(f"ts={self.timestamp}")
        if self.server_id is not None:
            parts.append(f"serverId={self.server_id}")
        if self.gtid:
            parts.append(f"gtid={self.gtid}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class LogIdentity:
    """The source a position was read from: ``source_address`` ``(host, port)`` and ``slave_id``."""

    source_address: tuple[str, int] | None = None
    slave_id: int = -1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"slaveId": self.slave_id}
        if self.source_address is not None:
            host, port = self.source_address
            out["sourceAddress"] = {"address": host, "port": port}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LogIdentity:
        addr = data.get("sourceAddress")
        source = None
        if addr:
            # fastjson writes an InetSocketAddress as {"address": host, "port": n}; accept
            # {"hostName": ...} and "host:port" too.
            if isinstance(addr, str):
                host, _, port = addr.rpartition(":")
                source = (host, int(port))
            else:
                host = addr.get("address") or addr.get("hostName") or addr.get("hostString") or ""
                source = (str(host), int(addr.get("port", 0)))
        return cls(source, int(data.get("slaveId", -1)))


@dataclass(slots=True)
class LogPosition:
    """What a position manager stores per destination (Canal's ``LogPosition``).

    The attribute keeps Canal's spelling ``postion``; ``position`` is an alias.
    """

    identity: LogIdentity = field(default_factory=LogIdentity)
    postion: EntryPosition = field(default_factory=EntryPosition)

    @property
    def position(self) -> EntryPosition:
        return self.postion

    def to_dict(self, *, with_type: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if with_type:
            out["@type"] = LOG_POSITION_TYPE
        out["identity"] = self.identity.to_dict()
        out["postion"] = self.postion.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LogPosition:
        ident = data.get("identity") or {}
        pos = data.get("postion")
        if pos is None:
            pos = data.get("position") or {}
        return cls(LogIdentity.from_dict(ident), EntryPosition.from_dict(pos))

    def to_json(self, *, with_type: bool = False) -> str:
        return json.dumps(self.to_dict(with_type=with_type), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> LogPosition:
        return cls.from_dict(json.loads(text))


def min_log_position(a: LogPosition | None, b: LogPosition | None) -> LogPosition | None:
    """The earlier of two positions (Canal's ``CanalEventUtils.min``): by file and offset when both
    come from the same source address, otherwise by timestamp."""
    if a is None:
        return b
    if b is None:
        return a
    if a.identity.source_address == b.identity.source_address:
        return a if a.postion <= b.postion else b
    ta, tb = a.postion.timestamp or 0, b.postion.timestamp or 0
    return a if ta <= tb else b
