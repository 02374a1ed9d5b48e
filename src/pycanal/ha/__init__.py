"""ZooKeeper high availability: Canal's running-node election, without Canal's split-brain.

* :class:`ServerRunningMonitor` / :class:`ServerHA` (:mod:`pycanal.ha.server`): one active server
  per destination, Canal's znodes and JSON;
* :class:`RunningMonitor` (:mod:`pycanal.ha.election`): the election with a lease, stop on
  connection loss and an epoch (the fencing token);
* :class:`FencedMetaManager` / :class:`FencedZooKeeper` (:mod:`pycanal.ha.fence`): ZooKeeper writes
  that only the current epoch can make, hand-outs only under the lease;
* :mod:`pycanal.ha.paths`: the JSON of the znodes (their paths: :mod:`pycanal.common.zookeeper`).
  ``docs/ha.md`` explains the design.
"""

from pycanal._lazy import lazy_names

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
__getattr__ = lazy_names(
    __name__,
    {
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
    },
)
