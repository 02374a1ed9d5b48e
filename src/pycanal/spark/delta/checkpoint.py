"""Delta checkpoints made from the previous checkpoint and the log entries after it.

A table streamed into gets a checkpoint every ``Maintenance.checkpoint_every`` writes. delta-rs'
``create_checkpoint`` first brings its handle up to date (replaying the entries since its
version) and then replays the table state again: ~50 ms of CPU for a 1,000-row table, against
~1.5 ms for one of the writes it follows, so at 200 tables a round the upkeep was most of the
apply's time and of the lake's lag. The entries a writer of copy-on-write commits hold nothing
but ``add``, ``remove``, ``txn`` and ``commitInfo`` actions, so the next checkpoint is the last
one's rows with those entries applied (``from_log``, the entries replayed by ``log.LogState``):

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
live files skips them (``log.checkpoint_rows``): an hour of a table written every second is 3,600
of them against a few live files.

Once written, it expires what it found past the retentions (``expiry``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pycanal.storage import LakePath

from .expiry import LOG_RETENTION, delete_expired, expire_log, expired, retention_ms
from .log import LogState, checkpoint_path, last_checkpoint

__all__ = ["from_log", "next_checkpoint", "write_checkpoint"]

log = logging.getLogger(__name__)

_MAPS = ("partitionValues", "tags")  # map fields of add and remove: lists of pairs for Arrow


def from_log(log_dir: LakePath, version: int, live: set[str] | None = None) -> bool:
    """Write the checkpoint of ``version`` from the last checkpoint and the entries up to it
    (module docstring); False if it cannot be made so. ``live``: the data files the writer has at
    ``version``, checked against the checkpoint's before it is written."""
    try:
        last = last_checkpoint(log_dir)
        if last is None or last[1] is not None:
            return False  # none, or in parts
        base = last[0]
        if base >= version:
            return True  # a checkpoint at this version or later is there
        previous = pq.read_table(checkpoint_path(log_dir, base).input_file())
        since = LogState(base, removes=[]).replay(log_dir, version)
        if since.version < version or since.other or since.metadata or since.protocol:
            return False  # an entry missing, or not add / remove / txn alone: delta-rs makes it
        changes = [*since.live.values(), *since.removes]
        if any(a.get("deletionVector") for a in changes) and "deletionVector" not in {
            f.name for f in previous.schema.field("add").type
        }:
            return False  # the previous checkpoint's rows cannot carry them: delta-rs makes it
        metadata = next(m for m in previous.column("metaData").to_pylist() if m is not None)
        configuration = dict(metadata["configuration"] or [])
        cutoff = retention_ms(configuration)
        log_cutoff = retention_ms(configuration, *LOG_RETENTION)
        now = int(time.time() * 1000)
        rows = next_checkpoint(previous, since, None if cutoff is None else now - cutoff)
    except (OSError, ValueError, KeyError, StopIteration, pa.ArrowException):
        return False  # not a plain checkpoint, or not read: delta-rs makes it
    if live is not None:
        paths = pc.struct_field(rows.column("add"), "path").drop_null().to_pylist()
        if len(paths) != len(live) or set(paths) != live:
            log.warning("%s: a checkpoint of version %d from version %d would not have the live files",
                        log_dir, version, base)  # fmt: skip
            return False
    write_checkpoint(log_dir, version, rows)
    if cutoff is not None:
        delete_expired(log_dir.parent, previous, rows, now - cutoff)
    if log_cutoff is not None:
        expire_log(log_dir, base, now - log_cutoff)
    return True


def next_checkpoint(previous: pa.Table, since: LogState, cutoff_ms: int | None) -> pa.Table:
    """The rows of the checkpoint after ``previous`` (a single-part checkpoint's rows) once the
    entries ``since`` replayed (its adds still live, its tombstones in order, its latest ``txn``
    per application) are applied; tombstones deleted before ``cutoff_ms`` are dropped (None: none)."""
    assert since.removes is not None
    removed = [r["path"] for r in since.removes]
    add, remove = previous.column("add"), previous.column("remove")
    keep_add = pc.invert(pc.is_in(pc.struct_field(add, "path"), value_set=pa.array(removed, pa.string())))
    keep = pc.if_else(pc.is_valid(add), keep_add, True)
    if cutoff_ms is not None:
        keep = pc.and_(keep, pc.invert(expired(remove, cutoff_ms)))
    replaced = pc.is_in(
        pc.struct_field(previous.column("txn"), "appId"), value_set=pa.array(list(since.txns), pa.string())
    )
    keep = pc.and_(keep, pc.invert(pc.fill_null(replaced, False)))
    rows = [{"add": _arrow_maps(a)} for a in since.live.values()]
    rows += [{"remove": _arrow_maps(r)} for r in since.removes] + [{"txn": t} for t in since.txns.values()]
    return pa.concat_tables([previous.filter(keep), pa.Table.from_pylist(rows, schema=previous.schema)])


def _arrow_maps(action: dict[str, Any]) -> dict[str, Any]:
    """``action`` with its maps as lists of pairs (as Arrow takes a map)."""
    if not any(isinstance(action.get(k), dict) for k in _MAPS):
        return action
    return {k: list(v.items()) if k in _MAPS and isinstance(v, dict) else v for k, v in action.items()}


def write_checkpoint(log_dir: LakePath, version: int, rows: pa.Table) -> None:
    """Create the checkpoint file of ``version`` (unless one exists already) and point
    ``_last_checkpoint`` at it unless it points at a later one."""
    removes = pc.is_valid(rows.column("remove"))
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, rows.schema, compression="snappy") as out:
        for part in (rows.filter(pc.invert(removes)), rows.filter(removes)):  # tombstones apart
            if part.num_rows:
                out.write_table(part)
    data = sink.getvalue().to_pybytes()
    if not checkpoint_path(log_dir, version).put_if_absent(data):
        return
    try:
        last = last_checkpoint(log_dir)
        if last is not None and last[0] >= version:
            return
    except (OSError, ValueError):
        pass  # unreadable: ours replaces it
    adds = len(rows) - rows.column("add").null_count
    _point(
        log_dir, {"version": version, "size": rows.num_rows, "sizeInBytes": len(data), "numOfAddFiles": adds}
    )
    # Another writer may have pointed at a later checkpoint between the check above and the
    # replace: the pointer goes back to the latest single-file checkpoint there is, so it never
    # ends behind one (tests/test_delta_log.py).
    newer = [v for v in _single_checkpoints(log_dir) if v > version]
    if newer:
        latest = max(newer)
        meta = pq.ParquetFile(checkpoint_path(log_dir, latest).input_file()).metadata
        _point(log_dir, {"version": latest, "size": meta.num_rows})


def _point(log_dir: LakePath, pointer: dict[str, int]) -> None:
    """Replace ``_last_checkpoint`` whole, not synced: like the entries and checkpoints it points
    among (a reader that finds it stale or unreadable reads on from the entries, or through delta-rs)."""
    (log_dir / "_last_checkpoint").write_text(json.dumps(pointer))


def _single_checkpoints(log_dir: LakePath) -> list[int]:
    """The versions of the single-file checkpoints in ``log_dir``."""
    return [int(n[:20]) for n in log_dir.listdir() if len(n) == 39 and n.endswith(".checkpoint.parquet")]
