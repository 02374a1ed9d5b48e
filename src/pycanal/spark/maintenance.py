"""Upkeep of the current-state Delta tables while they are streamed into.

Every MERGE adds at least one small file and one log entry to the table it touches; after hours
of 1-row transactions a table is thousands of files and log entries, and each MERGE (it scans
the live files) and each query slows down with them. ``Maintenance.after_merge`` runs, in the
thread that just merged into a table and counted in that table's MERGEs:

* compaction (``optimize.compact``): small live files rewritten into files of up to ``file_mb``
  (the size writes cut their files at, ``cow.KeyedTable``), every ``compact_every``; skipped
  without reading the log where the writer knows no two of its files fit in one;
* a checkpoint (the log state in one Parquet file, so a reader replays no JSON before it),
  every ``checkpoint_every``: made from the previous checkpoint and the entries since
  (``delta.checkpoint``, ~10 ms of CPU for a 1,000-row table), by delta-rs (~50 ms: it
  replays the log) where that cannot be;
* expiry, with each checkpoint made so (``delta.expiry``): the data files whose removal is older
  than ``retention_hours`` (the table's ``delta.deletedFileRetentionDuration``, 1 hour: no version
  younger uses them, and an older version cannot be loaded anyway) are deleted as the checkpoint
  drops their tombstones, and the entries and checkpoints before the newest checkpoint older
  than ``log_retention_hours`` (``delta.logRetentionDuration``, 1 hour) are, both found without
  listing anything (a time-travel query older than that fails; a reader holding an older file
  list can fail);
* vacuum, every ``vacuum_every`` (delta-rs: the log cleanup, and the files of the table's
  directory that no version within ``retention_hours`` uses, found by listing it): what the
  expiry does not see -- files a writer wrote and never committed (a crash between the two),
  tombstones dropped by delta-rs' own checkpoints, deletion vector files.

The change log (a Delta table too) is folded by the applier every ``fold_every`` applied
micro-batches (``ChangeLog.fold``: its per-batch files clustered into files by table and day,
merged ``fold_fanout`` at a time up to ``fold_target_mb``); it has a checkpoint every
``checkpoint_every`` commits, with the same expiry under the same retentions. The files of a fold
cut short by a crash are left for a vacuum (Spark's or delta-rs'): no version names them.

The counters start at a per-table offset so that tables merged in the same micro-batches do not
all compact in the same one. None of these commits changes rows or the Delta transaction ids
the exactly-once apply relies on; a crash in the middle leaves a consistent table (each is one
Delta commit, expiry and vacuum delete only files no version within the retention uses).
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import unquote

from pycanal.storage import LakePath

from .cow import WRITER_PROPERTIES
from .delta.dv import vector_file
from .delta.log import named_vectors

__all__ = ["Maintenance", "vacuum"]


@dataclass
class Maintenance:
    """What is done how often (writes into a table, micro-batches for the change log; 0: never),
    and how tables are written: files of ``file_mb``; ``deletion_vectors`` (on by default; off:
    copy-on-write only): a change to a big file hides its old rows with a Delta deletion vector
    instead of rewriting the file (``cow``), so a write's cost does not grow with the table."""

    compact_every: int = 50
    checkpoint_every: int = 50
    vacuum_every: int = 5000
    retention_hours: int = 1
    log_retention_hours: int = 1
    file_mb: int = 8
    deletion_vectors: bool = True
    fold_every: int = 100
    fold_fanout: int = 10
    fold_target_mb: int = 128
    _merges: dict[str, int] = field(default_factory=dict, repr=False)
    _retention_set: set[str] = field(default_factory=set, repr=False)  # tables whose property is set
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    done: dict[str, int] = field(default_factory=lambda: {"compact": 0, "checkpoint": 0, "vacuum": 0})

    def settings(self) -> dict[str, Any]:
        """The settings alone (what ``Maintenance(**settings)`` makes again elsewhere)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if not f.name.startswith("_") and f.name != "done"
        }

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
        for what in due:
            if what == "compact":
                if not table.compactable(self.file_mb << 20):
                    continue  # nothing to merge (the writer knows its files): no need to read the log
                table.delta().optimize.compact(
                    target_size=self.file_mb << 20, writer_properties=WRITER_PROPERTIES
                )
            elif what == "checkpoint":
                table.checkpoint()
                self._retention(name, table)
            else:
                vacuum(table.delta(), table.path, self.retention_hours)
            self._count(what)
        if table.dt.version() > table.version:
            table.reload()  # delta-rs committed: compaction replaced files, or the properties changed

    def fold(self, changelog: Any, upto: int) -> dict[str, int] | None:
        """Fold ``changelog`` (a ``ChangeLog``) through batch ``upto`` with these settings."""
        return changelog.fold(
            upto,
            fanout=self.fold_fanout,
            target_bytes=int(self.fold_target_mb * (1 << 20)),
        )

    def table_properties(self) -> dict[str, str]:
        """What a new current-state table is created with."""
        return {
            "delta.logRetentionDuration": f"interval {int(self.log_retention_hours)} hours",
            "delta.deletedFileRetentionDuration": f"interval {int(self.retention_hours)} hours",
        }

    def _retention(self, name: str, table: Any) -> None:
        """Set the retentions of a table created without them (once a process, if they differ)."""
        if name in self._retention_set:
            return
        want = self.table_properties()
        dt = table.delta()
        config = dt.metadata().configuration
        if any(config.get(k) != v for k, v in want.items()):
            dt.alter.set_table_properties(want)
        with self._lock:
            self._retention_set.add(name)

    def forget(self, names: set[str]) -> None:
        """The tables ``names`` (``database.table``) may have been replaced (DDL): their counters
        start over."""
        with self._lock:
            for name in names:
                self._merges.pop(name, None)
                self._retention_set.discard(name)

    def _count(self, what: str) -> None:
        with self._lock:
            self.done[what] += 1


def vacuum(dt: Any, path: LakePath, retention_hours: float) -> list[str]:
    """delta-rs' log cleanup, then the files of the table's directory no version within the
    retention uses (delta-rs' vacuum, listing the directory), deleted here: delta-rs 1.6.6 counts
    no deletion vector file as used and would delete the table's own (its dry run lists them;
    ``tests/test_spark_maintenance.py``), so those any ``add`` or ``remove`` of the log names are
    kept. Returns the relative paths deleted."""
    dt.cleanup_metadata()
    doomed = dt.vacuum(
        retention_hours=int(retention_hours),
        enforce_retention_duration=False,
        dry_run=True,
        full=True,  # files whose removal a checkpoint no longer lists too
    )
    named = {vector_file(d, path) for d in named_vectors(path / "_delta_log")}
    deleted = []
    for rel in doomed:
        target = path / unquote(rel)
        if target in named:
            continue
        target.unlink()
        deleted.append(rel)
    return deleted
