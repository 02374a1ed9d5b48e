"""The rows of Canal's topics put in an order the lake can apply, across partitions and micro-batches.

Rows arrive per Kafka partition, each partition in binlog order but for a server's resent copies
(at least once: after a failed send a batch comes again, after later changes). Spark's Kafka source
ends a micro-batch at its own offset in each partition, so one partition can be a DDL further than
another. With pycanal's ``canal.mq.partitionOrder`` (:mod:`pycanal.mq.order`) every partition of a
hashed topic carries a copy of each DDL at its place. Per micro-batch, :func:`order_rows`:

1. drops the resent copies: a row at or before the last binlog position its table had in its
   partition (``(topic, partition, db.table)``; a flat message without pycanal's header has no
   binlog position, its rows are all kept);
2. holds back, per topic, every row at or after the earliest DDL not yet delivered by all of the
   partitions its copies went to: a partition further on waits for the others, so no row of the
   old layout comes after its table's DDL and no row of the new one before it. A key update (sent
   to its old key's partition too) is such a mark between two partitions: the old key's changes
   before it are applied first;
3. gives the rest, each DDL and key update once (the copy of the lowest partition), which
   ``apply_changes`` sorts by binlog position: the partitions merged in binlog order.

The held rows and the last positions are the state after a micro-batch, a function of the state
before it and its records. :class:`KafkaOrder` keeps it per batch id in the lake, so a micro-batch
Spark replays after a crash starts from the same state and gives the same rows (exactly once with
``apply_changes``' batch ids). Pure but for :class:`KafkaOrder`'s files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.storage import LakePath, lake_path

from .batch import position_order
from .rows import ARROW_SCHEMA

__all__ = ["KAFKA_ROW_SCHEMA", "ORDER_COLUMNS", "ORDER_SCHEMA", "KafkaOrder", "OrderState", "order_rows"]

ORDER_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_copies")
"""What a row carries out of the executors besides ``ROW_SCHEMA``: its record's topic and
partition, and how many partitions carry a copy of it (a DDL: its ``pycanal.order`` header's
count; a key update: 2; null for any other row)."""
ORDER_SCHEMA = pa.schema([("kafka_topic", pa.string()), ("kafka_partition", pa.int32()),
                          ("kafka_copies", pa.int32())])  # fmt: skip
KAFKA_ROW_SCHEMA = pa.schema([*ARROW_SCHEMA, *ORDER_SCHEMA])
"""The rows the executors give: ``ROW_SCHEMA``'s and ``ORDER_COLUMNS``."""

Position = tuple[str, int, int]  # binlog file, offset, row
OrderState = tuple[pa.Table, dict[str, Position]]
"""The rows held back (``ROW_SCHEMA`` and ``ORDER_COLUMNS``), and the last position of each
``topic:partition:db.table``."""


def _order(file: str, offset: int, row: int = 0) -> tuple[str, int, int, int]:
    return (*position_order(file, offset), row)


def _binlog(file: str) -> bool:
    return not file.startswith("kafka:")


def _fresh(rows: pa.Table, last: dict[str, Position]) -> tuple[list[bool], dict[str, Position]]:
    """Which of ``rows`` (in record order) are not resent copies, and the last positions with them."""
    last = dict(last)
    position = rows["position"].combine_chunks()
    columns = [rows[c].to_pylist() for c in ("kafka_topic", "kafka_partition", "database", "table")]
    columns += [position.field(f).to_pylist() for f in ("file", "offset", "row")]
    new = []
    for topic, partition, database, table, file, offset, row in zip(*columns, strict=True):
        if not _binlog(file):
            new.append(True)
            continue
        key = f"{topic}:{partition}:{database}.{table}"
        seen = last.get(key)
        fresh = seen is None or _order(file, offset, row) > _order(*seen)
        new.append(fresh)
        if fresh:
            last[key] = (file, offset, row)
    return new, last


def _barriers(rows: pa.Table) -> tuple[dict[str, tuple[str, int, int, int]], set[int]]:
    """Per topic the earliest row of several copies (a DDL, a key update) some partition has not
    delivered yet; and the indexes of the copies of a row every partition delivered but the lowest
    partition's (to be dropped)."""
    at = pc.indices_nonzero(pc.greater(pc.fill_null(rows["kafka_copies"], 1), 1)).to_pylist()
    if not at:
        return {}, set()
    copies = rows.take(at)
    position = copies["position"].combine_chunks()
    columns = [copies[c].to_pylist() for c in ORDER_COLUMNS]
    columns += [position.field(f).to_pylist() for f in ("file", "offset", "row")]
    seen: dict[tuple[str, str, int, int], set[int]] = {}
    count: dict[tuple[str, str, int, int], int] = {}
    for topic, partition, n, file, offset, row in zip(*columns, strict=True):
        seen.setdefault((topic, file, offset, row), set()).add(partition)
        count[(topic, file, offset, row)] = n
    earliest: dict[str, tuple[str, int, int, int]] = {}
    for (topic, file, offset, _), partitions in seen.items():
        if len(partitions) < count[(topic, file, offset, _)]:
            where = _order(file, offset)
            earliest[topic] = min(earliest.get(topic, where), where)
    drop = set()
    for i, topic, partition, _, file, offset, row in zip(at, *columns, strict=True):
        key = (topic, file, offset, row)
        if len(seen[key]) >= count[key] and partition != min(seen[key]):
            drop.add(i)
    return earliest, drop


def order_rows(rows: pa.Table, state: OrderState) -> tuple[pa.Table, OrderState]:
    """A micro-batch's ``rows`` (``ROW_SCHEMA`` and ``ORDER_COLUMNS``, each partition's in record
    order) after ``state``: the rows to apply now (``ROW_SCHEMA``) and the state after them."""
    held, last = state
    fresh, last = _fresh(rows, last)
    rows = rows.cast(KAFKA_ROW_SCHEMA)
    candidates = pa.concat_tables([held, rows if all(fresh) else rows.filter(pa.array(fresh, pa.bool_()))])
    earliest, drop = _barriers(candidates)
    hold = [False] * candidates.num_rows
    if earliest:
        position = candidates["position"].combine_chunks()
        columns = [candidates["kafka_topic"].to_pylist()]
        columns += [position.field(f).to_pylist() for f in ("file", "offset")]
        hold = [
            topic in earliest and _binlog(file) and _order(file, offset) >= earliest[topic]
            for topic, file, offset in zip(*columns, strict=True)
        ]
    ready = [not h and i not in drop for i, h in enumerate(hold)]
    applied = candidates.filter(pa.array(ready, pa.bool_())).select(ARROW_SCHEMA.names)
    return applied, (candidates.filter(pa.array(hold, pa.bool_())), last)


class KafkaOrder:
    """:func:`order_rows` with its state kept in ``<lake>/_pycanal/kafka-order/``: ``<batch>.json``
    (the last positions) and ``<batch>.arrow`` (the held rows), the two latest batches."""

    def __init__(self, lake: str | Path | LakePath) -> None:
        self.dir = lake_path(lake) / "_pycanal" / "kafka-order"

    def _batches(self) -> list[int]:
        names = [n.removesuffix(".json") for n in self.dir.listdir() if n.endswith(".json")]
        return sorted(int(n) for n in names if n.isdigit())

    def load(self, batch_id: int) -> OrderState:
        """The state before micro-batch ``batch_id``: after the latest batch saved before it."""
        before = [b for b in self._batches() if b < batch_id]
        if not before:
            return KAFKA_ROW_SCHEMA.empty_table(), {}
        saved = json.loads((self.dir / f"{before[-1]}.json").read_text())
        last = {k: (v[0], v[1], v[2]) for k, v in saved["last"].items()}
        held = self.dir / f"{before[-1]}.arrow"
        if not held.exists():
            return KAFKA_ROW_SCHEMA.empty_table(), last
        with pa.ipc.open_stream(pa.BufferReader(held.read_bytes())) as reader:
            return reader.read_all(), last

    def step(self, rows: pa.Table, batch_id: int) -> tuple[pa.Table, OrderState]:
        """Micro-batch ``batch_id``'s rows to apply, and the state to :meth:`save` once they are."""
        return order_rows(rows, self.load(batch_id))

    def save(self, batch_id: int, state: OrderState) -> None:
        """The state after micro-batch ``batch_id`` (applied): Spark replays no batch before it, so
        the states before the previous batch's go."""
        held, last = state
        self.dir.mkdir()
        if held.num_rows:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, held.schema) as writer:
                writer.write_table(held)
            (self.dir / f"{batch_id}.arrow").write_bytes(sink.getvalue().to_pybytes(), sync=True)
        else:
            (self.dir / f"{batch_id}.arrow").unlink()
        (self.dir / f"{batch_id}.json").write_text(json.dumps({"last": last}), sync=True)
        for old in self._batches():
            if old < batch_id - 1:
                (self.dir / f"{old}.arrow").unlink()
                (self.dir / f"{old}.json").unlink()
