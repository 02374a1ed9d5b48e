"""Log-position managers: where a parser restarts (Canal's ``parse.index`` package).

* :class:`LogPositionManager` -- the interface (``get_latest_index_by``, ``persist_log_position``,
  plus ``start``/``stop`` for managers that hold resources);
* :class:`MemoryLogPositionManager` -- a dict;
* :class:`FailbackLogPositionManager` -- read the primary, else the secondary; persist to the
  primary, and to the secondary when the primary fails.

Meta, file and ZooKeeper managers implement the same interface (later).
"""

from .base import LogPositionManager, LogPositionManagerError
from .failback import FailbackLogPositionManager
from .memory import MemoryLogPositionManager

__all__ = [
    "FailbackLogPositionManager",
    "LogPositionManager",
    "LogPositionManagerError",
    "MemoryLogPositionManager",
]
