"""What a consumer needs to order a topic's partitions (``canal.mq.partitionOrder = true``, pycanal's).

With ``canal.mq.partitionHash`` Canal sends a DDL (and every entry without rows) to partition 0 and
each row to the partition of its hash, so a consumer of several partitions cannot tell where a DDL
falls among another partition's rows (alibaba/canal#1731). With ``partitionOrder``:

* **Copies.** Such an entry also goes to every other partition of the topic, at its place in that
  partition's record order: each partition's rows of a table follow the DDL that precedes them.
  A reader applies a DDL once all partitions delivered their copy, one copy only.
* **The header** :data:`ORDER_HEADER` on every record: ``{"n": N}``, the partitions copies went to;
  on a flat message also its entry's binlog position (``file``, ``offset``; a ``FlatMessage`` has
  none) and, where it holds a subset of the entry's rows, their indexes in the entry (``rows``).
* **Row indexes.** A protobuf entry cut into one-row entries by the hash carries its row's index in
  the whole entry as the header prop ``pycanal.row`` (:data:`pycanal.mq.split.ROW_PROP`).
* **Moved rows.** An UPDATE whose before image hashes to another partition than its after image
  (a key update: Canal sends it to its new key's partition, alibaba/canal#3152) also goes to the
  old key's partition, after the row's earlier changes there: a protobuf one-row entry marked with
  the header prop :data:`MOVED_PROP`, a flat row named in the header's ``moved``. A reader applies
  it once both copies came, as a DDL once all ``n`` did.

Off (Canal's default), the records are Canal's byte for byte. No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MOVED_PROP", "ORDER_HEADER", "RecordOrder", "is_moved", "read_order"]

ORDER_HEADER = "pycanal.order"
"""The header marking a record of a topic whose partitions carry copies (see the module docstring)."""
MOVED_PROP = "pycanal.moved"
"""The ``Entry`` header prop of a one-row entry sent to the partitions of both its images."""


def is_moved(props: Sequence[object]) -> bool:
    """Is an entry whose header has ``props`` (``Pair`` messages) a moved row?"""
    return any(getattr(p, "key", None) == MOVED_PROP for p in props)


@dataclass(frozen=True, slots=True)
class RecordOrder:
    """A record's :data:`ORDER_HEADER`: ``partitions`` (the copies' count); for a flat message
    its entry's ``file`` and ``offset``, for a subset of the entry's rows their ``rows``, and the
    indexes of its ``moved`` rows."""

    partitions: int
    file: str | None = None
    offset: int | None = None
    rows: tuple[int, ...] | None = None
    moved: tuple[int, ...] = ()

    def header(self) -> tuple[str, bytes]:
        value: dict[str, object] = {"n": self.partitions}
        if self.file is not None:
            value |= {"file": self.file, "offset": self.offset}
        if self.rows is not None:
            value["rows"] = list(self.rows)
        if self.moved:
            value["moved"] = list(self.moved)
        return ORDER_HEADER, json.dumps(value, separators=(",", ":")).encode()


def read_order(headers: Sequence[tuple[str, bytes | None]] | None) -> RecordOrder | None:
    """The record's :data:`ORDER_HEADER`, None without one. ValueError for a malformed one."""
    for key, value in headers or ():
        if key != ORDER_HEADER:
            continue
        try:
            d = json.loads(value or b"")
            rows = d.get("rows")
            offset = d.get("offset")
            return RecordOrder(
                int(d["n"]),
                None if d.get("file") is None else str(d["file"]),
                None if offset is None else int(offset),
                None if rows is None else tuple(int(r) for r in rows),
                tuple(int(r) for r in d.get("moved") or ()),
            )
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ValueError(f"malformed {ORDER_HEADER} header {value!r}: {exc}") from None
    return None
