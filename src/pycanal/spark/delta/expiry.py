"""What a checkpoint finds past a table's retentions, deleted without listing anything: a vacuum
and a log cleanup for a table committed to every second.

Such a table leaves 3,600 replaced files and log entries an hour: 24 hours of files over 200
tables would be 17M, more than the 16.7M inodes of this machine's disk, and Delta's default 30
days of log 2.6M entries a table, while delta-rs' vacuum and log cleanup list both (and an open
of the table the log): at 2,000 writes into a table they cost 142 ms of CPU a turn against 48 ms
at 500. A checkpoint made from the previous one (``checkpoint.from_log``) has what it needs
instead:

* the data files of the tombstones it drops as older than ``delta.deletedFileRetentionDuration``
  (a vacuum's rule: no version within the retention uses them), unless it names them again
  (``delete_expired``);
* the entries and checkpoints before the newest checkpoint older than
  ``delta.logRetentionDuration`` (Delta's metadata cleanup), found by binary searches over the
  entries' versions and times (``expire_log``).

A reader holding an older file list can fail; a time-travel query older than the retention does.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.storage import LakePath

from .log import checkpoint_path, entry_path

__all__ = ["LOG_RETENTION", "delete_expired", "expire_log", "expired", "retention_ms"]

_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000,
             "week": 604_800_000}  # fmt: skip
# The log's retention: its property, and Delta's default where the table does not set it.
LOG_RETENTION = ("delta.logRetentionDuration", 30 * _UNITS_MS["day"])


def retention_ms(
    configuration: dict[str, str],
    key: str = "delta.deletedFileRetentionDuration",
    default: int = _UNITS_MS["week"],
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


def expired(remove: pa.ChunkedArray, cutoff_ms: int) -> pa.ChunkedArray:
    """Which rows of a checkpoint's ``remove`` column are tombstones deleted before ``cutoff_ms``
    (one without a time counts as deleted at 0)."""
    stamps = pc.fill_null(pc.struct_field(remove, "deletionTimestamp"), 0)
    return pc.and_(pc.is_valid(remove), pc.less(stamps, cutoff_ms))


def delete_expired(table: LakePath, previous: pa.Table, rows: pa.Table, cutoff_ms: int) -> None:
    """Delete the data files of the tombstones ``previous`` had and ``rows`` dropped as older than
    ``cutoff_ms`` that ``rows`` does not name again, live or removed later; deletion vector files,
    which several data files can share, are left to the vacuum."""
    remove = previous.column("remove")
    gone = pc.struct_field(remove.filter(expired(remove, cutoff_ms)), "path")
    if not len(gone):
        return
    named = {
        *pc.struct_field(rows.column("add"), "path").drop_null().to_pylist(),
        *pc.struct_field(rows.column("remove"), "path").drop_null().to_pylist(),
    }
    for path in set(gone.to_pylist()) - named:
        if "://" not in path and not path.startswith("/"):
            (table / unquote(path)).unlink()


def expire_log(log_dir: LakePath, base: int, cutoff_ms: int) -> None:
    """Delete the entries and checkpoints before the newest checkpoint older than ``cutoff_ms``
    (a version within the retention is still read from a checkpoint and the entries after it),
    oldest first. Found without listing the log: the entries up to ``base`` (a checkpoint's
    version) are contiguous and older the lower their version, so the oldest one and the newest
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
        checkpoint_path(log_dir, version).unlink()
        entry_path(log_dir, version).unlink()


def _first_entry(log_dir: LakePath, last: int) -> int:
    """The oldest log entry, given that ``last``'s is there (the entries are contiguous)."""
    there, step = last, 1
    while there - step >= 0 and entry_path(log_dir, there - step).exists():
        there, step = there - step, step * 2
    lo, hi = max(there - step + 1, 0), there  # the first is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if entry_path(log_dir, mid).exists() else (mid + 1, hi)
    return lo


def _older(log_dir: LakePath, version: int, cutoff_ms: int) -> bool:
    try:
        return entry_path(log_dir, version).modified_ms() < cutoff_ms
    except FileNotFoundError:
        return True  # cleaned up already
