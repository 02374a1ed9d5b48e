"""``format("canal")``'s options (docs/spark.md lists them), read and checked once when the query
starts: the runner's feed, its planner and the executors' readers take them from here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from .snapshot import SnapshotOptions, snapshot_options

__all__ = ["CanalOptions", "canal_options"]


class CanalOptions(NamedTuple):
    """The options, Spark's names in snake case (``batchSize``: ``batch_size``)."""

    address: str
    zk_servers: str
    destination: str
    client_id: int
    filter: str
    user: str
    password: str
    timezone: str
    batch_size: int
    batch_bytes: int
    fetch_size: int
    num_partitions: int
    timeout: float
    stall_timeout: float
    stage: Path | None
    snapshot: SnapshotOptions | None


def _int(options: dict[str, str], name: str, default: int, high: int = 2**31 - 1) -> int:
    raw = options.get(name.lower())
    try:
        value = int(raw) if raw is not None else default
    except ValueError:
        raise ValueError(f"format('canal'): option {name} must be an integer, got {raw!r}") from None
    if not 1 <= value <= high:
        raise ValueError(f"format('canal'): option {name} must be in 1..{high}, got {value}")
    return value


def _seconds(options: dict[str, str], name: str, default: float) -> float:
    raw = options.get(name.lower())
    try:
        value = float(raw) if raw is not None else default
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"format('canal'): option {name} must be seconds (0 or more), got {raw!r}")
    return value


def canal_options(raw: Any) -> CanalOptions:
    """The options of ``raw`` (Spark's, any case of their names); ValueError names a bad one."""
    options = {k.lower(): v for k, v in raw.items()}
    address, zk_servers = options.get("address", ""), options.get("zkservers", "")
    destination = options.get("destination")
    if bool(address) == bool(zk_servers):
        raise ValueError(
            "format('canal') needs option address (host:port of the server) or zkServers, one of them"
        )
    if not destination:
        raise ValueError("format('canal') needs option destination")
    timeout = _seconds(options, "timeout", 60.0)
    batch_size = _int(options, "batchSize", 65536)
    return CanalOptions(
        address,
        zk_servers,
        destination,
        _int(options, "clientId", 1001, 2**15 - 1),  # a Java short in Canal
        options.get("filter", ""),
        options.get("user", ""),
        options.get("password", ""),
        options.get("timezone", "UTC"),
        batch_size,
        _int(options, "batchBytes", 32 * 1024 * 1024),
        min(batch_size, _int(options, "fetchSize", 8192)),
        _int(options, "numPartitions", 2),
        timeout,
        _seconds(options, "stallTimeout", 120.0),
        Path(options["stage"]) if options.get("stage") else None,
        snapshot_options(options, _int),
    )
