"""ZooKeeper high availability: Canal's running-node election, without Canal's split-brain.

* :class:`ServerRunningMonitor` / :class:`ServerHA` (:mod:`pycanal.ha.server`): one active server
  per destination, Canal's znodes and JSON;
* :class:`RunningMonitor` (:mod:`pycanal.ha.election`): the election with a lease, stop on
  connection loss and an epoch (the fencing token);
* :class:`FencedMetaManager` / :class:`FencedZooKeeper` (:mod:`pycanal.ha.fence`): ZooKeeper writes
  that only the current epoch can make, hand-outs only under the lease;
* :mod:`pycanal.ha.paths`: the znodes and their JSON. ``docs/ha.md`` explains the design.
"""

from .election import FencedError, NotActiveError, RunningMonitor
from .fence import FencedMetaManager, FencedZooKeeper
from .paths import ClientRunningData, RunningDataError, ServerRunningData
from .registry import EphemeralNode
from .server import ServerHA, ServerRunningMonitor

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
