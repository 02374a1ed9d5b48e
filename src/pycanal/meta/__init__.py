"""Meta managers: consumers' subscriptions, cursors and outstanding batches (Canal's ``meta`` module).

* :class:`MemoryMetaManager` — in memory;
* :class:`FileMixedMetaManager` — memory + Canal's ``meta.dat`` per destination, written atomically;
* :class:`ZooKeeperMetaManager` — in ZooKeeper with Canal's paths and JSON;
* :class:`PeriodMixedMetaManager` — memory + periodic cursor flush to ZooKeeper.

All implement :class:`MetaManager` (see :mod:`pycanal.meta.base` for the contract).
"""

from pycanal.meta.base import (
    DEFAULT_CLIENT_ID,
    CanalMetaManagerError,
    ClientIdentity,
    MetaManager,
    PositionRange,
)
from pycanal.meta.file import FileMixedMetaManager
from pycanal.meta.memory import MemoryMetaManager
from pycanal.meta.period import PeriodMixedMetaManager
from pycanal.meta.zookeeper import ZooKeeperMetaManager

__all__ = [
    "DEFAULT_CLIENT_ID",
    "CanalMetaManagerError",
    "ClientIdentity",
    "FileMixedMetaManager",
    "MemoryMetaManager",
    "MetaManager",
    "PeriodMixedMetaManager",
    "PositionRange",
    "ZooKeeperMetaManager",
]
