"""ZooKeeper high availability: Canal's running-node election, without Canal's split-brain.

* :class:`ServerRunningMonitor` / :class:`ServerHA` (:mod:`pycanal.ha.server`): one active server
  per destination, Canal's znodes and JSON;
* :class:`RunningMonitor` (:mod:`pycanal.ha.election`): the election with a lease, stop on
  connection loss and an epoch (the fencing token);
* :class:`FencedMetaManager` / :class:`FencedZooKeeper` (:mod:`pycanal.ha.fence`): ZooKeeper writes
  that only the current epoch can make, hand-outs only under the lease;
* :mod:`pycanal.ha.paths`: the znodes and their JSON. ``docs/ha.md`` explains the design.
"""

from importlib import import_module
from typing import Any

__all__ = [
    "ClientRunningData",
    "EphemeralNode",
    "FencedError",
    "FencedMetaManager",
    "FencedZooKeeper",
    "NotActiveError",
    "RunningDataError",
    "RunningMonitor",
    "ServerHA",
    "ServerRunningData",
    "ServerRunningMonitor",
]

# Where each name lives, imported on first use: ``pycanal.ha.paths`` alone (what clients need)
# does not pull in the election's server stack.
_HOMES = {
    "ClientRunningData": "paths",
    "EphemeralNode": "registry",
    "FencedError": "election",
    "FencedMetaManager": "fence",
    "FencedZooKeeper": "fence",
    "NotActiveError": "election",
    "RunningDataError": "paths",
    "RunningMonitor": "election",
    "ServerHA": "server",
    "ServerRunningData": "paths",
    "ServerRunningMonitor": "server",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)
