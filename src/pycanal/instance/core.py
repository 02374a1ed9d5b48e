"""``CanalInstance``: one destination wired as in Canal's ``file-instance.xml``.

::

    instance = CanalInstance(
        "example",
        parser={"master_address": ("127.0.0.1", 3306), "username": "canal", "password": "canal"},
        store={"buffer_size": 16384, "batch_mode": "MEMSIZE"},
        meta_manager=FileMixedMetaManager("/var/lib/pycanal"),
        filter="shop\\..*",
    )
    instance.start()

* ``MysqlEventParser`` (``parser`` holds its keyword arguments) → :class:`EntryEventSink` →
  :class:`MemoryEventStore` (``store`` holds its keyword arguments);
* the parser's position manager is ``Failback(Memory, Meta(meta_manager))`` (Canal's default): a
  fresh start (the memory manager is cleared on stop) resumes at the slowest client's cursor;
* start order meta → store → sink → parser; stop in reverse. A restart builds a new store: what
  was not acknowledged is parsed again from the cursors.
* :meth:`subscribe_change`: a client's non-empty filter REPLACES the instance's white filter (the
  black filter stays), as Canal's ``AbstractCanalInstance.subscribeChange``; it applies to the
  events parsed from then on.
* ``stop_meta``: whether :meth:`stop` stops the meta manager (False when it is shared).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from pycanal.meta import ClientIdentity, MemoryMetaManager, MetaManager
from pycanal.parse.filter import RegexFilter, TableFilter
from pycanal.parse.index import (
    FailbackLogPositionManager,
    LogPositionManager,
    MemoryLogPositionManager,
    MetaLogPositionManager,
)
from pycanal.parse.parser import MysqlEventParser
from pycanal.protocol.position import LogIdentity
from pycanal.sink import EntryEventSink
from pycanal.store import MemoryEventStore

__all__ = ["CanalInstance", "CanalInstanceError"]

log = logging.getLogger(__name__)


class CanalInstanceError(RuntimeError):
    """Canal's ``CanalException`` for an instance."""


class CanalInstance:
    def __init__(
        self,
        destination: str,
        parser: Mapping[str, Any],
        store: Mapping[str, Any] | None = None,
        meta_manager: MetaManager | None = None,
        filter: str | TableFilter | None = None,
        *,
        black_filter: str | None = None,
        position_manager: LogPositionManager | None = None,
        stop_meta: bool = True,
        sink: Mapping[str, Any] | None = None,
    ) -> None:
        if not destination:
            raise CanalInstanceError("an instance needs a destination")
        self.destination = destination
        self.parser_settings = dict(parser)
        if "master_address" not in self.parser_settings:
            raise CanalInstanceError(f"{destination}: parser settings need master_address")
        self.store_settings = dict(store or {})
        self.sink_settings = dict(sink or {})
        self.meta_manager: MetaManager = meta_manager if meta_manager is not None else MemoryMetaManager()
        self.filter = filter if isinstance(filter, TableFilter) else TableFilter(filter, black_filter)
        self.position_manager: LogPositionManager = position_manager or FailbackLogPositionManager(
            MemoryLogPositionManager(), MetaLogPositionManager(self.meta_manager)
        )
        self.stop_meta = stop_meta
        self._lock = threading.RLock()
        self._running = False
        self.event_store = self._new_store()
        self.event_sink = EntryEventSink(self.event_store, **self.sink_settings)
        self.event_parser: MysqlEventParser | None = None

    # ------------------------------------------------------------------ parts
    def _new_store(self) -> MemoryEventStore:
        store = MemoryEventStore(**self.store_settings)
        store.validate(int(self.parser_settings.get("transaction_size", 1024)))
        return store

    def _new_parser(self) -> MysqlEventParser:
        settings = dict(self.parser_settings)
        settings.pop("filter", None)
        settings.pop("black_filter", None)
        master = settings.pop("master_address")
        parser = MysqlEventParser(
            self.destination,
            master,
            filter=self.filter,
            sink=self._sink,
            on_idle=self._idle,
            position_manager=self.position_manager,
            **settings,
        )
        return parser

    def _sink(self, entries: list) -> bool:
        parser = self.event_parser
        ident = LogIdentity(parser.running_address, -1) if parser is not None else None
        return self.event_sink.sink(entries, ident)

    def _idle(self) -> None:
        self.event_sink.idle()

    # ------------------------------------------------------------------ lifecycle
    @property
    def is_start(self) -> bool:
        return self._running

    def start(self) -> None:
        with self._lock:
            if self._running:
                return
            if not self.meta_manager.is_start():
                self.meta_manager.start()
            if self.event_parser is not None:  # a restart: a fresh store
                self.event_store = self._new_store()
                self.event_sink = EntryEventSink(self.event_store, **self.sink_settings)
            self.event_sink.start()
            self.event_parser = self._new_parser()
            self.event_parser.start()
            self._running = True
            log.info("instance %s started", self.destination)

    def stop(self) -> None:
        with self._lock:
            if not self._running:
                return
            self._running = False
            self.event_sink.stop()
            self.event_store.stop()  # unblocks a parser waiting on a full store
            if self.event_parser is not None:
                self.event_parser.stop()
            if self.position_manager.running:
                self.position_manager.stop()
            if self.stop_meta and self.meta_manager.is_start():
                self.meta_manager.stop()
            log.info("instance %s stopped", self.destination)

    # ------------------------------------------------------------------ subscriptions
    def subscribe_change(self, client: ClientIdentity) -> bool:
        """Apply ``client.filter`` (when non-empty) as the instance's white filter."""
        if client.filter:
            log.info("%s: subscribe filter change to %s", self.destination, client.filter)
            self.filter.white = RegexFilter(client.filter, True)
        return True

    def __repr__(self) -> str:
        return f"CanalInstance({self.destination!r}, running={self._running})"
