"""One batch into Kafka records, as ``CanalKafkaProducer.send`` lays them out: topics, partitions
and value bytes, in send order. No I/O: the producer edge sends what this returns, then acks.

* With ``canal.mq.dynamicTopic``: entries are routed by ``db.table``, then ``db``
  (``MQMessageUtils.messageTopics``); entries without a schema or table, or matching nothing, go
  to ``canal.mq.topic``; transaction begin/end are dropped; every topic name has ``.`` turned
  into ``_``. Without it everything goes to ``canal.mq.topic`` as named.
* A topic's partition count is its ``canal.mq.dynamicTopicPartitionNum`` rule, else
  ``canal.mq.partitionsNum``. With ``canal.mq.partitionHash`` a message is split by row hash
  (:mod:`pycanal.mq.partition`); without, it goes to ``canal.mq.partition`` (default 0).
* Flat: one message per entry, each sent to its partitions in partition order. Protobuf: one
  ``Packet`` per partition (or one for the batch). A message that goes whole to one partition is
  written by :class:`~pycanal.mq.flatcode.FlatEncoder` (the model's bytes, faster).
* Beyond Canal: with ``MQOptions.max_request_size``, a value too large for it is split into
  consecutive parts on the same partition (:mod:`pycanal.mq.split`), marked by their headers.
  With ``MQOptions.partition_order`` and a hash over several partitions, DDL is copied to every
  partition, a key update to its old key's partition too, and each record carries the header
  :data:`~pycanal.mq.order.ORDER_HEADER` (:mod:`pycanal.mq.order`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from pycanal.protocol import EntryProtocol_pb2 as pb

from .flat import FlatMessage, entry_changes, flat_message, parse_entry
from .flatcode import FlatEncoder
from .order import RecordOrder
from .packet import entry_bytes, packet_bytes
from .partition import entry_partitions, flat_partitions, flat_row_partitions
from .rules import dynamic_topic_names, match_topic, topic_partitions
from .settings import MQDestination, MQOptions
from .split import part_headers, split_flat, split_packet, value_limit

__all__ = ["Record", "build_rabbitmq_records", "build_records", "route_topics", "routes_to"]

_TRANSACTION = (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND)
_ENCODER = FlatEncoder()  # a message's JSON without the FlatMessage where no partition hash splits it


class Record(NamedTuple):
    """A Kafka record as Canal sends it (key always null). ``value`` is None where Canal's
    serializer returns null; ``headers`` are pycanal's (the parts of a split record, the order
    of a topic's partitions). A tuple: one is made per flat message, and a frozen dataclass took
    1 us of the 11 us a sysbench row's message cost to build."""

    topic: str
    partition: int
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def route_topics(
    entries: Sequence[bytes | pb.Entry], default_topic: str, dynamic_topic: str
) -> dict[str, list[bytes | pb.Entry]]:
    """``messageTopics``: the entries of each topic (named before the ``.`` to ``_`` rename), in
    first-seen order; each entry is passed on as given (raw bytes stay bytes)."""
    out: dict[str, list[bytes | pb.Entry]] = {}
    for item in entries:
        entry = parse_entry(item)
        if entry.entryType in _TRANSACTION:
            continue
        schema, table = entry.header.schemaName, entry.header.tableName
        topic = None
        if schema and table:
            topic = match_topic(f"{schema}.{table}", dynamic_topic)
            if topic is None:
                topic = match_topic(schema, dynamic_topic)
        out.setdefault(default_topic if topic is None else topic, []).append(item)
    return out


def routes_to(topic: str, destination: MQDestination) -> bool:
    """Can :func:`build_records` send ``destination``'s records to ``topic``? (A transactional
    producer reads its marks back from these topics.) A topic named after a table by
    ``canal.mq.dynamicTopic`` is read back as each ``db`` or ``db.table`` its ``_`` can stand for;
    a database or table name with a ``.`` of its own is missed (a restart then sends again what the
    broker held: at least once)."""
    dynamic = destination.dynamic_topic
    if not dynamic:
        return topic == destination.topic
    if any(
        name.replace(".", "_") == topic for name in (destination.topic or "", *dynamic_topic_names(dynamic))
    ):
        return True
    names = [topic, *(f"{topic[:i]}.{topic[i + 1 :]}" for i, c in enumerate(topic) if c == "_")]
    return any(
        (found := match_topic(name, dynamic)) is not None and found.replace(".", "_") == topic
        for name in names
    )


def build_records(
    batch_id: int,
    entries: Sequence[bytes | pb.Entry],
    raw: bool,
    destination: MQDestination,
    options: MQOptions,
    ts: int,
) -> list[Record]:
    """The records of one store batch; ``raw`` says whether ``entries`` are the store's bytes,
    ``ts`` is the flat messages' build time (ms)."""
    if not destination.dynamic_topic:
        if not destination.topic:
            raise ValueError("canal.mq.topic is not set")
        return _topic_records(destination.topic, batch_id, entries, raw, destination, options, ts)
    records: list[Record] = []
    default = destination.topic or ""
    for topic, routed in route_topics(entries, default, destination.dynamic_topic).items():
        if not topic:
            raise ValueError(
                "canal.mq.topic is not set and an entry matches no canal.mq.dynamicTopic"
                if topic == default
                else f"canal.mq.dynamicTopic={destination.dynamic_topic!r} names an empty topic"
            )
        name = topic.replace(".", "_")
        records += _topic_records(name, batch_id, routed, False, destination, options, ts)
    return records


def build_rabbitmq_records(
    batch_id: int,
    entries: Sequence[bytes | pb.Entry],
    raw: bool,
    destination: MQDestination,
    options: MQOptions,
    ts: int,
) -> list[Record]:
    """The messages of one batch as ``CanalRabbitMQProducer.send`` lays them out: topics (the
    routing keys) as in Kafka mode, but no partitions (Canal's RabbitMQ producer ignores the
    partition keys), so one message per entry (flat) or one ``Packet`` per topic (protobuf), and
    no splitting (``max_request_size`` is Kafka's)."""
    unpartitioned = replace(
        destination,
        partition=None,
        partitions_num=None,
        partition_hash=None,
        dynamic_topic_partition_num=None,
    )
    return build_records(batch_id, entries, raw, unpartitioned, replace(options, max_request_size=None), ts)


def _topic_records(
    topic: str,
    batch_id: int,
    entries: Sequence[bytes | pb.Entry],
    raw: bool,
    dest: MQDestination,
    options: MQOptions,
    ts: int,
) -> list[Record]:
    partitions = topic_partitions(topic, dest.dynamic_topic_partition_num)
    if partitions is None:
        partitions = dest.partitions_num
    fixed = dest.partition if dest.partition is not None else 0
    limit = value_limit(options.max_request_size) if options.max_request_size else None
    order = bool(options.partition_order and dest.partition_hash and (partitions or 1) > 1)
    out: list[Record] = []

    def add(partition: int, values: list[bytes | None], marks: list[RecordOrder] | None = None) -> None:
        if marks is None and not order and len(values) == 1:  # the usual record: one value, no headers
            out.append(Record(topic, partition, values[0]))
            return
        if marks is None and order:
            marks = [RecordOrder(partitions or 1)] * len(values)
        heads = [(m.header(),) for m in marks] if marks else [()] * len(values)
        if len(values) == 1:
            out.append(Record(topic, partition, values[0], heads[0]))
            return
        split_id = f"{batch_id}.{len(out)}"  # unique in the batch; resent parts start again at 1
        n = len(values)
        out.extend(
            Record(topic, partition, v, part_headers(split_id, i, n) + head)
            for i, (v, head) in enumerate(zip(values, heads, strict=True), 1)
        )

    if not options.flat_message:
        if dest.partition_hash:
            split = entry_partitions(entries, partitions, dest.partition_hash, options.database_hash, order)
            for i, part in enumerate(split):
                if part:
                    add(i, _packets(batch_id, part, False, options, limit))
        else:
            add(fixed, _packets(batch_id, entries, raw, options, limit))
        return out
    for entry, change in entry_changes(entries):
        if not dest.partition_hash:
            value = _ENCODER.encode(entry, change, batch_id, ts)
            if value is not None and (limit is None or len(value) <= limit):
                out.append(Record(topic, fixed, value))
                continue
        msg = flat_message(entry, change, batch_id, ts)
        if not dest.partition_hash:
            add(fixed, _flat(msg, limit, entry))
        elif order:
            for i, values, marks in _ordered_flat(msg, partitions or 1, dest, options, limit, entry):
                add(i, values, marks)
        else:
            for i, part_msg in enumerate(
                flat_partitions(msg, partitions, dest.partition_hash, options.database_hash)
            ):
                if part_msg is not None:
                    add(i, _flat(part_msg, limit, entry))
    return out


def _ordered_flat(
    msg: FlatMessage, n: int, dest: MQDestination, options: MQOptions, limit: int | None, entry: pb.Entry
) -> list[tuple[int, list[bytes | None], list[RecordOrder]]]:
    """``canal.mq.partitionOrder``'s records of one flat message: each partition's values and
    their headers (the entry's position, the indexes of a subset's rows, the moved rows); a
    message Canal sends to partition 0 for want of rows goes to every partition, a key update
    also to its before image's partition."""
    where = flat_row_partitions(msg, n, dest.partition_hash, options.database_hash)
    at = RecordOrder(n, entry.header.logfileName, entry.header.logfileOffset)
    if isinstance(where, int):
        values = _flat(msg, limit, entry)
        targets = range(n) if where == 0 and (msg.is_ddl or not msg.data) else (where,)
        return [(i, values, _part_orders(at, None, values)) for i in targets]
    was = flat_row_partitions(msg, n, dest.partition_hash, options.database_hash, before=True)
    assert isinstance(was, list) and msg.data is not None
    moved = tuple(k for k, (p, q) in enumerate(zip(where, was, strict=True)) if p != q)
    out = []
    for i in range(n):
        rows = [k for k, (p, q) in enumerate(zip(where, was, strict=True)) if i in (p, q)]
        if rows:
            old = [msg.old[k] for k in rows] if msg.old else None
            values = _flat(replace(msg, data=[msg.data[k] for k in rows], old=old), limit, entry)
            mine = replace(at, moved=tuple(k for k in rows if k in moved))
            out.append((i, values, _part_orders(mine, rows, values)))
    return out


def _part_orders(at: RecordOrder, rows: list[int] | None, values: list[bytes | None]) -> list[RecordOrder]:
    """The header of each part of a message: the indexes of its own rows (``rows``: the message's,
    None: all of the entry's, in order) and of its moved rows."""
    if len(values) == 1:
        return [replace(at, rows=None if rows is None else tuple(rows))]
    out, start = [], 0
    for value in values:
        count = len(json.loads(value or b"{}").get("data") or [])
        indexes = tuple(rows[start : start + count] if rows is not None else range(start, start + count))
        out.append(replace(at, rows=indexes, moved=tuple(k for k in at.moved if k in indexes)))
        start += count
    return out


def _flat(msg: FlatMessage, limit: int | None, entry: pb.Entry) -> list[bytes | None]:
    return [msg.to_json()] if limit is None else list(split_flat(msg, limit, entry.header))


def _packets(
    batch_id: int, entries: Sequence[bytes | pb.Entry], raw: bool, options: MQOptions, limit: int | None
) -> list[bytes | None]:
    value = packet_bytes(batch_id, entries, raw, options.filter_transaction_entry)
    if value is None or limit is None or len(value) <= limit:
        return [value]
    data = [entry_bytes(e) for e in entries]
    return list(split_packet(batch_id, data, raw, options.filter_transaction_entry, limit))
