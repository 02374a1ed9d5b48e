"""Delta checkpoints made from the previous checkpoint and the log entries after it.

A table streamed into gets a checkpoint every ``Maintenance.checkpoint_every`` writes. delta-rs'
``create_checkpoint`` first brings its handle up to date (replaying the entries since its
version) and then replays the table state again: ~50 ms of CPU for a 1,000-row table, against
~1.5 ms for one of the writes it follows, so at 200 tables a round the upkeep was most of the
apply's time and of the lake's lag (docs/benchmarks.md). The entries a writer of copy-on-write
commits adds hold nothing but ``add``, ``remove``, ``txn`` and ``commitInfo`` actions, so the next
checkpoint is the last one's rows with those entries applied (``from_log``):

* ``add`` rows of files removed since are dropped; the adds since are appended;
* ``remove`` rows (tombstones) are kept until the table's ``delta.deletedFileRetentionDuration``
  is over (Delta's default, a week, where the table does not set it; none is dropped where it
  cannot be read); the removes since are appended;
* a ``txn`` row is replaced by the same application's later one; ``protocol``, ``metaData``,
  ``domainMetadata`` and every other row are kept as they are.

An entry with any other action (a schema or property change, ...), a multi-part or missing
checkpoint, or a missing entry: ``from_log`` makes nothing and delta-rs makes the checkpoint. The
file has the last checkpoint's Parquet schema (delta-rs' own), is created only if that version has
none yet, and ``_last_checkpoint`` is replaced after it unless it already names a later one. Its
tombstones are written after the other rows, in row groups of their own, so that a reader of the
live files skips them (``checkpoint_rows``): an hour of a table written every second is 3,600 of
them against a few live files.

Once written, it expires what it found past the retentions (a vacuum and a log cleanup that list
nothing, ``maintenance``): the data files of the tombstones it dropped, unless it names them
again, and the entries and checkpoints before the newest checkpoint older than
``delta.logRetentionDuration`` (Delta's 30 days where unset).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = [
    "checkpoint_parts",
    "checkpoint_rows",
    "entry_actions",
    "from_log",
    "live_adds",
    "next_checkpoint",
    "retention_ms",
]

log = logging.getLogger(__name__)

_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000,
             "week": 604_800_000}  # fmt: skip
_WEEK_MS = _UNITS_MS["week"]
_MONTH_MS = 30 * _UNITS_MS["day"]


def retention_ms(
    configuration: dict[str, str], key: str = "delta.deletedFileRetentionDuration", default: int = _WEEK_MS
) -> int | None:
    """The retention ``key`` in ms (``default`` if unset: Delta's week for removed files, 30 days
    for the log); None if it cannot be read (then nothing is dropped or deleted)."""
    text = configuration.get(key)
    if text is None:
        return default
    m = re.fullmatch(r"\s*(?:interval\s+)?(\d+)\s+([a-z]+?)s?\s*", text.lower())
    if m is None or m.group(2) not in _UNITS_MS:
        return None
    return int(m.group(1)) * _UNITS_MS[m.group(2)]


def entry_path(log_dir: Path, version: int) -> Path:
    """The log entry (commit) of ``version``."""
    return log_dir / f"{version:020d}.json"


def checkpoint_path(log_dir: Path, version: int) -> Path:
    return log_dir / f"{version:020d}.checkpoint.parquet"


def checkpoint_parts(log_dir: Path, version: int, parts: int | None) -> list[Path]:
    """The files of the checkpoint of ``version`` in ``parts`` parts (None: one file)."""
    if not parts:
        return [checkpoint_path(log_dir, version)]
    return [log_dir / f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]


def checkpoint_rows(part: Path, columns: list[str]) -> pa.Table:
    """``columns`` of a checkpoint file's rows but those in row groups of tombstones alone (where
    every row has a ``remove``: this module writes them so; other writers' row groups are read)."""
    data = pq.ParquetFile(part)
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


def live_adds(log_dir: Path, version: int) -> dict[str, dict[str, Any]]:
    """The ``add`` actions of the files live at ``version`` (path, size, stats, deletionVector),
    replayed from the last checkpoint at or before it (single- or multi-part) and the entries
    after it. delta-rs' file listing has no deletion vectors, which a writer of them needs."""
    base, parts = -1, []
    try:
        last = json.loads((log_dir / "_last_checkpoint").read_text())
        if int(last["version"]) <= version:
            base = int(last["version"])
            parts = checkpoint_parts(log_dir, base, last.get("parts"))
    except FileNotFoundError:
        pass
    live: dict[str, dict[str, Any]] = {}
    for part in parts:
        column = checkpoint_rows(part, ["add"]).column("add").drop_null()
        for add in column.to_pylist():
            live[add["path"]] = add
    for kind, action in _actions(log_dir, base + 1, version):
        if kind == "add":
            live[action["path"]] = action
        elif kind == "remove":
            live.pop(action["path"], None)
    return live


def entry_actions(log_dir: Path, version: int) -> list[tuple[str, dict[str, Any]]]:
    """The actions of the log entry of ``version``, in order, as (kind, action);
    FileNotFoundError where there is none."""
    actions = []
    for line in entry_path(log_dir, version).read_text().splitlines():
        if line.strip():
            ((kind, action),) = json.loads(line).items()
            actions.append((kind, action))
    return actions


def _actions(log_dir: Path, first: int, last: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The actions of the log entries ``first`` to ``last``, in order, as (kind, action)."""
    for v in range(first, last + 1):
        yield from entry_actions(log_dir, v)


def from_log(log_dir: Path, version: int, live: set[str] | None = None) -> bool:
    """Write the checkpoint of ``version`` from the last checkpoint and the entries up to it
    (module docstring); False if it cannot be made so. ``live``: the data files the writer has at
    ``version``, checked against the checkpoint's before it is written."""
    try:
        last = json.loads((log_dir / "_last_checkpoint").read_text())
        base = int(last["version"])
        if "parts" in last:
            return False
        if base >= version:
            return True  # a checkpoint at this version or later is there
        previous = pq.read_table(checkpoint_path(log_dir, base))
        changes, txns = [], []
        for kind, action in _actions(log_dir, base + 1, version):
            if kind in ("add", "remove"):
                for k in ("partitionValues", "tags"):  # maps as Arrow takes them
                    if isinstance(action.get(k), dict):
                        action[k] = list(action[k].items())
                changes.append((kind, action))
            elif kind == "txn":
                txns.append(action)
            elif kind != "commitInfo":
                return False
        vectors = any(a.get("deletionVector") for _, a in changes)
        if vectors and "deletionVector" not in {f.name for f in previous.schema.field("add").type}:
            return False  # the previous checkpoint's rows cannot carry them: delta-rs makes it
        metadata = next(m for m in previous.column("metaData").to_pylist() if m is not None)
        configuration = dict(metadata["configuration"] or [])
        cutoff = retention_ms(configuration)
        log_cutoff = retention_ms(configuration, "delta.logRetentionDuration", _MONTH_MS)
        now = int(time.time() * 1000)
        rows = next_checkpoint(previous, changes, txns, None if cutoff is None else now - cutoff)
    except (OSError, ValueError, KeyError, StopIteration, pa.ArrowException):
        return False  # not a plain checkpoint, an entry missing or not read: delta-rs makes it
    if live is not None:
        paths = pc.struct_field(rows.column("add"), "path").drop_null().to_pylist()
        if len(paths) != len(live) or set(paths) != live:
            log.warning("%s: a checkpoint of version %d from version %d would not have the live files",
                        log_dir, version, base)  # fmt: skip
            return False
    write_checkpoint(log_dir, version, rows)
    if cutoff is not None:
        _delete_expired(log_dir.parent, previous, rows, now - cutoff)
    if log_cutoff is not None:
        _expire_log(log_dir, base, now - log_cutoff)
    return True


def _delete_expired(table: Path, previous: pa.Table, rows: pa.Table, cutoff_ms: int) -> None:
    """Delete the data files of the tombstones ``previous`` had and ``rows`` dropped as older than
    ``cutoff_ms`` (a vacuum's rule: no version within the retention uses them) that ``rows`` does
    not name again, live or removed later; deletion vector files, which several data files can
    share, are left to the vacuum."""
    remove = previous.column("remove")
    expired = pc.struct_field(remove.filter(_expired(remove, cutoff_ms)), "path")
    if not len(expired):
        return
    named = {
        *pc.struct_field(rows.column("add"), "path").drop_null().to_pylist(),
        *pc.struct_field(rows.column("remove"), "path").drop_null().to_pylist(),
    }
    for path in set(expired.to_pylist()) - named:
        if "://" not in path and not path.startswith("/"):
            (table / unquote(path)).unlink(missing_ok=True)


def _expired(remove: pa.ChunkedArray, cutoff_ms: int) -> pa.ChunkedArray:
    """Which rows of a checkpoint's ``remove`` column are tombstones deleted before ``cutoff_ms``
    (one without a time counts as deleted at 0)."""
    stamps = pc.fill_null(pc.struct_field(remove, "deletionTimestamp"), 0)
    return pc.and_(pc.is_valid(remove), pc.less(stamps, cutoff_ms))


def _expire_log(log_dir: Path, base: int, cutoff_ms: int) -> None:
    """Delete the entries and checkpoints before the newest checkpoint older than ``cutoff_ms``
    (Delta's metadata cleanup: a version within the retention is still read from a checkpoint
    and the entries after it), oldest first. Found without listing the log: the entries up to
    ``base`` are contiguous and older the lower their version, so the oldest one and the newest
    past the cutoff are binary searches, and that one's checkpoint is at most a checkpoint's
    interval below."""
    first = _first_entry(log_dir, base)
    if first >= base or not _older(log_dir, first, cutoff_ms):
        return
    lo, hi = first, base  # the newest entry past the cutoff is in [lo, hi]; lo is one
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _older(log_dir, mid, cutoff_ms) else (lo, mid - 1)
    keep = lo
    while keep > first and not checkpoint_path(log_dir, keep).exists():
        keep -= 1
    for version in range(first, keep):
        checkpoint_path(log_dir, version).unlink(missing_ok=True)
        entry_path(log_dir, version).unlink(missing_ok=True)


def _first_entry(log_dir: Path, last: int) -> int:
    """The oldest log entry, given that ``last``'s is there (the entries are contiguous)."""
    there, step = last, 1
    while there - step >= 0 and entry_path(log_dir, there - step).exists():
        there, step = there - step, step * 2
    lo, hi = max(there - step + 1, 0), there  # the first is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if entry_path(log_dir, mid).exists() else (mid + 1, hi)
    return lo


def _older(log_dir: Path, version: int, cutoff_ms: int) -> bool:
    try:
        return entry_path(log_dir, version).stat().st_mtime * 1000 < cutoff_ms
    except FileNotFoundError:
        return True  # cleaned up already


def next_checkpoint(
    previous: pa.Table,
    changes: list[tuple[str, dict[str, Any]]],
    txns: list[dict[str, Any]],
    cutoff_ms: int | None,
) -> pa.Table:
    """The rows of the checkpoint after ``previous`` (a single-part checkpoint's rows) once the
    ``changes`` (``("add" | "remove", action)`` as committed, in order) and ``txns`` are applied;
    tombstones deleted before ``cutoff_ms`` are dropped (None: none)."""
    new_adds: dict[str, dict[str, Any]] = {}
    removes = []
    for kind, action in changes:  # in order: a file removed and added again (a new deletion vector) stays
        if kind == "add":
            new_adds[action["path"]] = action
        else:
            new_adds.pop(action["path"], None)  # added and removed since: a tombstone only
            removes.append(action)
    removed = [r["path"] for r in removes]
    schema = previous.schema
    add, remove = previous.column("add"), previous.column("remove")
    keep_add = pc.invert(pc.is_in(pc.struct_field(add, "path"), value_set=pa.array(removed, pa.string())))
    keep = pc.if_else(pc.is_valid(add), keep_add, True)
    if cutoff_ms is not None:
        keep = pc.and_(keep, pc.invert(_expired(remove, cutoff_ms)))
    latest = {t["appId"]: t for t in txns}
    replaced = pc.is_in(
        pc.struct_field(previous.column("txn"), "appId"), value_set=pa.array(list(latest), pa.string())
    )
    keep = pc.and_(keep, pc.invert(pc.fill_null(replaced, False)))
    rows = [{"add": a} for a in new_adds.values()] + [{"remove": r} for r in removes]
    rows += [{"txn": t} for t in latest.values()]
    return pa.concat_tables([previous.filter(keep), pa.Table.from_pylist(rows, schema=schema)])


def write_checkpoint(log_dir: Path, version: int, rows: pa.Table) -> None:
    """Create the checkpoint file of ``version`` (unless one exists already) and point
    ``_last_checkpoint`` at it unless it points at a later one."""
    target = checkpoint_path(log_dir, version)
    tmp = log_dir / f"_checkpoint_{uuid.uuid4()}.parquet.tmp"
    removes = pc.is_valid(rows.column("remove"))
    try:
        with pq.ParquetWriter(tmp, rows.schema, compression="snappy") as out:
            for part in (rows.filter(pc.invert(removes)), rows.filter(removes)):  # tombstones apart
                if part.num_rows:
                    out.write_table(part)
        size = os.path.getsize(tmp)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return
    finally:
        tmp.unlink(missing_ok=True)
    last = log_dir / "_last_checkpoint"
    try:
        if json.loads(last.read_text())["version"] >= version:
            return
    except (OSError, ValueError, KeyError):
        pass  # none yet, or unreadable: ours replaces it
    adds = len(rows) - rows.column("add").null_count
    text = json.dumps({"version": version, "size": rows.num_rows, "sizeInBytes": size, "numOfAddFiles": adds})
    tmp = log_dir / f"_last_checkpoint_{uuid.uuid4()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, last)
