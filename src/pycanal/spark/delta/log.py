"""A Delta table's log: where its entries and checkpoints are, how an entry is created, and the
one replay of it.

An entry (``<version>.json``, one action a line) is created whole and only if its version does
not exist yet (``LakePath.put_if_absent``: a hard link on a local disk, ``If-None-Match: *`` on
S3, as delta-rs does), so versions have no gaps and a reader stops at the first one missing instead of
listing ``_delta_log``. Every reader of the log here replays it one way (``LogState``): the rows of
the checkpoint ``_last_checkpoint`` names (its row groups of tombstones alone skipped:
``checkpoint_rows``), then the entries after it, in order. Its users: ``tablestate`` (a reader's
live files, a poller's entries since its last read), ``live_adds`` (a writer of deletion vectors:
delta-rs' file listing has none) and ``checkpoint.from_log`` (the entries since the last
checkpoint, tombstones in order).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pycanal.storage import LakePath

__all__ = [
    "LogState",
    "checkpoint_parts",
    "checkpoint_path",
    "checkpoint_rows",
    "entry_actions",
    "entry_path",
    "last_checkpoint",
    "live_adds",
    "named_vectors",
]


def entry_path(log_dir: LakePath, version: int) -> LakePath:
    """The log entry (commit) of ``version``."""
    return log_dir / f"{version:020d}.json"


def checkpoint_path(log_dir: LakePath, version: int) -> LakePath:
    """The single-part checkpoint of ``version``."""
    return log_dir / f"{version:020d}.checkpoint.parquet"


def checkpoint_parts(log_dir: LakePath, version: int, parts: int | None) -> list[LakePath]:
    """The files of the checkpoint of ``version`` in ``parts`` parts (None: one file)."""
    if not parts:
        return [checkpoint_path(log_dir, version)]
    return [log_dir / f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]


def last_checkpoint(log_dir: LakePath) -> tuple[int, int | None] | None:
    """(version, parts) of the checkpoint ``_last_checkpoint`` names; None without one, ValueError
    where it cannot be read."""
    try:
        last = json.loads((log_dir / "_last_checkpoint").read_text())
        return int(last["version"]), last.get("parts")
    except FileNotFoundError:
        return None
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{log_dir}/_last_checkpoint: {exc!r}") from None


def checkpoint_rows(part: LakePath, columns: list[str]) -> pa.Table:
    """``columns`` (those it has) of a checkpoint file's rows but those in row groups of tombstones alone (where
    every row has a ``remove``: ``checkpoint`` writes them so; other writers' row groups are read)."""
    data = pq.ParquetFile(part.input_file())
    columns = [c for c in columns if c in data.schema_arrow.names]  # another writer's may lack one
    meta = data.metadata
    keep = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        paths = [
            group.column(j)
            for j in range(group.num_columns)
            if group.column(j).path_in_schema == "remove.path"
        ]
        stats = paths[0].statistics if paths else None
        if not (group.num_rows and stats is not None and stats.has_null_count and stats.null_count == 0):
            keep.append(i)
    return data.read_row_groups(keep, columns=columns)


def entry_actions(log_dir: LakePath, version: int) -> list[tuple[str, dict[str, Any]]]:
    """The actions of the log entry of ``version``, in order, as (kind, action);
    FileNotFoundError where there is none."""
    actions = []
    for line in entry_path(log_dir, version).read_text().splitlines():
        if line.strip():
            ((kind, action),) = json.loads(line).items()
            actions.append((kind, action))
    return actions


@dataclass
class LogState:
    """What a table's log says up to ``version``: the live adds by path, the last ``metaData`` and
    ``protocol``, the latest ``txn`` of each application (in the checkpoint and the entries), the kinds of
    any other actions replayed (``other``; ``commitInfo`` is none), and, where ``removes`` is a
    list, the tombstones replayed, in order."""

    version: int = -1
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    other: set[str] = field(default_factory=set)
    removes: list[dict[str, Any]] | None = None

    @classmethod
    def at_checkpoint(cls, log_dir: LakePath, at_most: int | None = None) -> LogState | None:
        """The log at its last checkpoint (at version -1 where there is none, or where it is past
        ``at_most``); None where the pointer or the checkpoint cannot be read."""
        try:
            last = last_checkpoint(log_dir)
        except ValueError:
            return None  # not a pointer this module reads
        if last is None or (at_most is not None and last[0] > at_most):
            return cls()
        base, parts = last
        state = cls(base)
        for part in checkpoint_parts(log_dir, base, parts):
            try:
                rows = checkpoint_rows(part, ["add", "metaData", "protocol", "txn"])
            except FileNotFoundError:
                return None  # cleaned up after a newer one, or missing
            for add in rows.column("add").drop_null().to_pylist():
                state.live[add["path"]] = add
            if "txn" in rows.column_names:
                state.txns.update((t["appId"], t) for t in rows.column("txn").drop_null().to_pylist())
            state.metadata = _first(rows, "metaData") or state.metadata
            state.protocol = _first(rows, "protocol") or state.protocol
        return state

    def replay(self, log_dir: LakePath, until: int | None = None) -> LogState:
        """Apply the entries after ``version``, in order, up to ``until`` (None: until one is
        missing); stops at a missing one either way."""
        while until is None or self.version < until:
            try:
                actions = entry_actions(log_dir, self.version + 1)
            except FileNotFoundError:
                break
            self.version += 1
            self.apply(actions)
        return self

    def apply(self, actions: list[tuple[str, dict[str, Any]]]) -> None:
        """Apply one entry's actions, its removes first: a commit's actions have no order (Delta's
        "Action Reconciliation" keys a file by path and deletion vector), and a commit that gives a
        file a new vector removes and adds the same path -- Delta Lake for Spark writes the add
        first."""
        for kind, action in actions:
            if kind == "remove":
                self.live.pop(action["path"], None)
                if self.removes is not None:
                    self.removes.append(action)
        for kind, action in actions:
            if kind == "add":
                self.live[action["path"]] = action
            elif kind == "remove":
                continue
            elif kind == "txn":
                self.txns[action["appId"]] = action
            elif kind == "metaData":
                self.metadata = action
            elif kind == "protocol":
                self.protocol = action
            elif kind != "commitInfo":
                self.other.add(kind)

    def copy(self) -> LogState:
        """A state to replay further, this one left as it is."""
        return LogState(self.version, dict(self.live), self.metadata, self.protocol, dict(self.txns), set(self.other),
                        None if self.removes is None else list(self.removes))  # fmt: skip


def live_adds(log_dir: LakePath, version: int) -> dict[str, dict[str, Any]]:
    """The ``add`` actions of the files live at ``version`` (path, size, stats, deletionVector),
    replayed from the last checkpoint at or before it (single- or multi-part) and the entries
    after it. delta-rs' file listing has no deletion vectors, which a writer of them needs."""
    state = LogState.at_checkpoint(log_dir, version)
    if state is not None:
        state.replay(log_dir, version)
    if state is None or state.version != version:
        raise FileNotFoundError(
            f"{log_dir}: version {version} cannot be replayed from a checkpoint and entries"
        )
    return state.live


def named_vectors(log_dir: LakePath) -> list[dict[str, Any]]:
    """The deletion vector descriptors of every ``add`` and ``remove`` the log still holds (its
    last checkpoint and the entries after it): a vector file any of them names is in use, by the
    table or by a version within the retention."""
    out: list[dict[str, Any]] = []
    last = last_checkpoint(log_dir)
    version = -1
    if last is not None:
        version = last[0]
        for part in checkpoint_parts(log_dir, version, last[1]):
            rows = pq.read_table(
                part.input_file(), columns=["add", "remove"]
            )  # the tombstones' row groups too
            for column in ("add", "remove"):
                out += [
                    a["deletionVector"]
                    for a in rows.column(column).drop_null().to_pylist()
                    if a.get("deletionVector")
                ]
    while True:
        version += 1
        try:
            actions = entry_actions(log_dir, version)
        except FileNotFoundError:
            return out
        out += [
            a["deletionVector"]
            for kind, a in actions
            if kind in ("add", "remove") and a.get("deletionVector")
        ]


def _first(rows: pa.Table, column: str) -> dict[str, Any] | None:
    values = rows.column(column).drop_null()
    return values[0].as_py() if len(values) else None
