"""Log-position managers: where a parser restarts (Canal's ``parse.index`` package).

* :class:`LogPositionManager` -- the interface (``get_latest_index_by``, ``persist_log_position``,
  plus ``start``/``stop`` for managers that hold resources);
* :class:`MemoryLogPositionManager` -- a dict;
* :class:`FailbackLogPositionManager` -- read the primary, else the secondary; persist to the
  primary, and to the secondary when the primary fails;
* :class:`MetaLogPositionManager` -- the minimum cursor of the destination's clients;
* :class:`ZooKeeperLogPositionManager` -- Canal's ``/otter/canal/destinations/<dest>/parse`` node;
* :class:`FileMixedLogPositionManager` / :class:`PeriodMixedLogPositionManager` -- memory, written
  behind to ``parse.dat`` (atomically) or to that node (:class:`MixedLogPositionManager`).
"""

from .base import LogPositionManager, LogPositionManagerError
from .failback import FailbackLogPositionManager
from .memory import MemoryLogPositionManager
from .meta import MetaLogPositionManager
from .mixed import (
    PARSE_FILE_NAME,
    FileMixedLogPositionManager,
    MixedLogPositionManager,
    PeriodMixedLogPositionManager,
)
from .zookeeper import ZooKeeperLogPositionManager

__all__ = [
    "PARSE_FILE_NAME",
    "FailbackLogPositionManager",
    "FileMixedLogPositionManager",
    "LogPositionManager",
    "LogPositionManagerError",
    "MemoryLogPositionManager",
    "MetaLogPositionManager",
    "MixedLogPositionManager",
    "PeriodMixedLogPositionManager",
    "ZooKeeperLogPositionManager",
]
