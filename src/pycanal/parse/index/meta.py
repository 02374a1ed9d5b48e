"""``MetaLogPositionManager`` (Canal's, seed 000): the parser restarts at the slowest consumer.

* get: the minimum cursor over all clients subscribed to the destination
  (:func:`~pycanal.protocol.position.min_log_position`: by file/offset for the same source address,
  otherwise by timestamp); ``None`` when no client has a cursor;
* persist: a no-op -- the cursors are persisted by the meta manager when clients ack.

``start`` starts the meta manager when it is not running (as Canal); ``stop`` leaves it to its
owner (the instance), since a meta manager may serve other components.
"""

from __future__ import annotations

import logging
from typing import Any

from pycanal.protocol.position import LogPosition, min_log_position

from .base import LogPositionManager

__all__ = ["MetaLogPositionManager"]

log = logging.getLogger(__name__)


class MetaLogPositionManager(LogPositionManager):
    def __init__(self, meta_manager: Any) -> None:
        if meta_manager is None:
            raise ValueError("MetaLogPositionManager needs a meta manager")
        self.meta_manager = meta_manager

    def start(self) -> None:
        super().start()
        if not self.meta_manager.is_start():
            self.meta_manager.start()

    def get_latest_index_by(self, destination: str) -> LogPosition | None:
        result: LogPosition | None = None
        for client in self.meta_manager.list_all_subscribe_info(destination):
            position = self.meta_manager.get_cursor(client)
            if position is not None:
                result = min_log_position(result, position)
        return result

    def persist_log_position(self, destination: str, log_position: LogPosition) -> None:
        log.debug("persist_log_position %s %s: kept by the meta manager (no-op)", destination, log_position)
