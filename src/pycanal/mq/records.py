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
  ``Packet`` per partition (or one for the batch).
* Beyond Canal: with ``MQOptions.max_request_size``, a value too large for it is split into
  consecutive parts on the same partition (:mod:`pycanal.mq.split`), marked by their headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pycanal.protocol import EntryProtocol_pb2 as pb

from .flat import FlatMessage, entry_changes, flat_message, parse_entry
from .packet import entry_bytes, packet_bytes
from .partition import entry_partitions, flat_partitions
from .rules import dynamic_topic_names, match_topic, topic_partitions
from .settings import MQDestination, MQOptions
from .split import part_headers, split_flat, split_packet, value_limit

__all__ = ["Record", "build_rabbitmq_records", "build_records", "route_topics", "routes_to"]

_TRANSACTION = (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND)


@dataclass(frozen=True, slots=True)
class Record:
    """A Kafka record as Canal sends it (key always null). ``value`` is None where Canal's
    serializer returns null; ``headers`` mark the parts of a split record."""

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
    out: list[Record] = []

    def add(partition: int, values: list[bytes | None]) -> None:
        if len(values) == 1:
            out.append(Record(topic, partition, values[0]))
            return
        split_id = f"{batch_id}.{len(out)}"  # unique in the batch; resent parts start again at 1
        n = len(values)
        out.extend(Record(topic, partition, v, part_headers(split_id, i, n)) for i, v in enumerate(values, 1))

    if not options.flat_message:
        if dest.partition_hash:
            split = entry_partitions(entries, partitions, dest.partition_hash, options.database_hash)
            for i, part in enumerate(split):
                if part:
                    add(i, _packets(batch_id, part, False, options, limit))
        else:
            add(fixed, _packets(batch_id, entries, raw, options, limit))
        return out
    for entry, change in entry_changes(entries):
        msg = flat_message(entry, change, batch_id, ts)
        if dest.partition_hash:
            for i, part_msg in enumerate(
                flat_partitions(msg, partitions, dest.partition_hash, options.database_hash)
            ):
                if part_msg is not None:
                    add(i, _flat(part_msg, limit, entry))
        else:
            add(fixed, _flat(msg, limit, entry))
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
