"""The sans-I/O core of Canal's MQ mode: what Canal 1.1.8 would send to Kafka for a batch.

* :mod:`.flat` -- ``FlatMessage`` from entries, and its JSON bytes as fastjson2 writes them;
* :mod:`.packet` -- the protobuf ``Packet`` bytes of a record (``canal.mq.flatMessage = false``);
* :mod:`.rules` -- ``canal.mq.partitionHash``, ``dynamicTopic``, ``dynamicTopicPartitionNum``;
* :mod:`.partition` -- rows to partitions, with Java's ``String.hashCode`` (:mod:`._java`);
* :mod:`.records` -- a batch into ``(topic, partition, value)`` records, in send order;
* :mod:`.settings` -- the options and per-destination settings, and the Kafka client keys;
* :mod:`.mark` -- where a Kafka transaction's entries end, to skip them after a restart
  (``canal.mq.transaction``);
* :mod:`.split` -- a record over ``max.request.size`` split into marked parts, and joined back.
* :mod:`.order` -- what a consumer needs to merge a hashed topic's partitions, DDL copies included
  (``canal.mq.partitionOrder``).

Nothing here opens a socket; the producer edge sends the records and acks the batch.
"""

from __future__ import annotations

from ._java import hash_partition, string_hash
from .flat import FlatMessage, flat_message, flat_messages
from .packet import packet_bytes
from .partition import entry_partitions, flat_partitions
from .records import Record, build_records, route_topics
from .rules import (
    HashMode,
    hash_mode,
    match_dynamic_topic,
    match_topic,
    parse_partition_hash,
    topic_partitions,
)
from .settings import LEGACY_KAFKA_KEYS, MQDestination, MQOptions, kafka_properties

__all__ = [
    "LEGACY_KAFKA_KEYS",
    "FlatMessage",
    "HashMode",
    "MQDestination",
    "MQOptions",
    "Record",
    "build_records",
    "entry_partitions",
    "flat_message",
    "flat_messages",
    "flat_partitions",
    "hash_mode",
    "hash_partition",
    "kafka_properties",
    "match_dynamic_topic",
    "match_topic",
    "packet_bytes",
    "parse_partition_hash",
    "route_topics",
    "string_hash",
    "topic_partitions",
]
