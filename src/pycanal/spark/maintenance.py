"""Upkeep of the current-state Delta tables while they are streamed into.

Every MERGE adds at least one small file and one log entry to the table it touches; after hours
of 1-row transactions a table is thousands of files and log entries, and each MERGE (it scans
the live files) and each query slows down with them. ``Maintenance.after_merge`` runs, in the
thread that just merged into a table and counted in that table's MERGEs:

* compaction (``optimize.compact``): the live files rewritten into few, every ``compact_every``;
* a checkpoint (the log state in one Parquet file, so a reader replays no JSON before it),
  every ``checkpoint_every``;
* vacuum: data files no version younger than ``retention_hours`` uses are deleted (a reader or a
  time-travel query older than that can fail), every ``vacuum_every``.

The counters start at a per-table offset so that tables merged in the same micro-batches do not
all compact in the same one. None of these commits changes rows or the Delta transaction ids
the exactly-once apply relies on; a crash in the middle leaves a consistent table (each is one
Delta commit, vacuum deletes only unreferenced files).
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Maintenance"]


@dataclass
class Maintenance:
    """What is done how often (MERGEs into a table; 0: never)."""

    compact_every: int = 50
    checkpoint_every: int = 50
    vacuum_every: int = 500
    retention_hours: int = 24
    _merges: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    done: dict[str, int] = field(default_factory=lambda: {"compact": 0, "checkpoint": 0, "vacuum": 0})

    def after_merge(self, name: str, table: Any) -> None:
        """Count a MERGE into the table ``name`` (``database.table``; ``table``, its open
        ``KeyedTable``) and do what is due."""
        with self._lock:
            n = self._merges.get(name)
            if n is None:
                n = zlib.crc32(name.encode()) % 997  # spread the tables' turns
            n = self._merges[name] = n + 1
        due = [
            what
            for what, every in (("compact", self.compact_every), ("checkpoint", self.checkpoint_every),
                                ("vacuum", self.vacuum_every))
            if every and n % every == 0
        ]  # fmt: skip
        if not due:
            return
        dt = table.delta()
        for what in due:
            if what == "compact":
                dt.optimize.compact()
            elif what == "checkpoint":
                dt.create_checkpoint()
            else:
                dt.vacuum(
                    retention_hours=int(self.retention_hours), enforce_retention_duration=False, dry_run=False
                )
            self._count(what)
        table.reload()  # compaction replaced files

    def forget(self) -> None:
        """Tables may have been replaced (DDL): their counters start over."""
        with self._lock:
            self._merges.clear()

    def _count(self, what: str) -> None:
        with self._lock:
            self.done[what] += 1
