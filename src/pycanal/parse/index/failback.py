"""``FailbackLogPositionManager`` (Canal's, seed 000): a fast primary (usually memory) in front
of a durable secondary (usually the consumers' meta).

* get: the primary's position if it has one, else the secondary's;
* persist: to the primary; when the primary raises :class:`LogPositionManagerError`, to the
  secondary instead (other errors propagate).
"""

from __future__ import annotations

import logging

from pycanal.protocol.position import LogPosition

from .base import LogPositionManager, LogPositionManagerError

__all__ = ["FailbackLogPositionManager"]

log = logging.getLogger(__name__)


class FailbackLogPositionManager(LogPositionManager):
    def __init__(self, primary: LogPositionManager, secondary: LogPositionManager) -> None:
        if primary is None or secondary is None:
            raise ValueError("FailbackLogPositionManager needs a primary and a secondary manager")
        self.primary = primary
        self.secondary = secondary

    def start(self) -> None:
        super().start()
        if not self.primary.running:
            self.primary.start()
        if not self.secondary.running:
            self.secondary.start()

    def stop(self) -> None:
        super().stop()
        if self.secondary.running:
            self.secondary.stop()
        if self.primary.running:
            self.primary.stop()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        position = self.primary.get_latest_index_by(destination)
        if position is not None:
            return position
        return self.secondary.get_latest_index_by(destination)

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        try:
            self.primary.persist_log_position(destination, log_position)
        except LogPositionManagerError:
            log.warning(
                "persist_log_position: the primary manager failed (destination %s, position %s); "
                "using the secondary",
                destination,
                log_position,
                exc_info=True,
            )
            self.secondary.persist_log_position(destination, log_position)
