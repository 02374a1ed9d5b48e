"""Canal's per-destination MQ routing rules, parsed exactly as ``MQMessageUtils`` parses them.

* ``canal.mq.partitionHash`` -- ``db.table:c1^c2``, ``db.table:$pk$`` or ``db.table`` alone (hash the
  table name), the name part a regex when it has a metacharacter; first matching rule wins.
* ``canal.mq.dynamicTopic`` -- ``name`` (topic: the matched name, lower-cased) or ``topic:name``,
  where a regex containing ``\\.`` matches ``db.table`` and any other regex matches ``db``.
* ``canal.mq.dynamicTopicPartitionNum`` -- ``topic:n``, the topic part a name or a regex.

All three lists separate items by ``,`` or ``;`` before any regex is read, so a comma inside a
regex (``\\d{1,2}``) splits it, as in Canal. Parsing is cached per config string, as Canal does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ._java import equals_ignore_case, is_wildcard, split_list
from .regex import MQRegex

__all__ = [
    "HashMode",
    "PartitionRule",
    "dynamic_topic_names",
    "hash_mode",
    "match_dynamic_topic",
    "match_topic",
    "parse_partition_hash",
    "topic_partitions",
]

_INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class _Name:
    """A rule's name part: compared ignoring case, or a regex when it has a metacharacter."""

    simple: str | None
    regex: MQRegex | None

    @classmethod
    def of(cls, text: str) -> _Name:
        return cls(None, MQRegex(text)) if is_wildcard(text) else cls(text, None)

    def matches(self, name: str) -> bool:
        if self.simple is not None:
            return equals_ignore_case(self.simple, name)
        assert self.regex is not None
        return self.regex.matches(name)


@dataclass(frozen=True, slots=True)
class HashMode:
    """What a ``partitionHash`` rule hashes: the key columns (``$pk$``), the table name (no ``:``),
    or the listed columns (``c1^c2``; empty after a bare ``:``, which leaves only the database)."""

    auto_pk: bool = False
    table: bool = False
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionRule:
    name: _Name
    mode: HashMode


@lru_cache(maxsize=256)
def parse_partition_hash(config: str) -> tuple[PartitionRule, ...]:
    """The rules of one ``canal.mq.partitionHash`` value, in order.

    The name/columns split is at the *last* colon and only when it is past position 0 (``:id`` is
    a table-hash rule for a table named ``:id``), as ``MQMessageUtils``' rule parser does.
    """
    rules = []
    for item in split_list(config):
        colon = item.rfind(":")
        if colon > 0:
            spec, name = item[colon + 1 :], item[:colon]
            if equals_ignore_case(spec, "$pk$"):
                mode = HashMode(auto_pk=True)
            else:
                mode = HashMode(columns=tuple(c for c in spec.split("^") if c))
        else:
            name, mode = item, HashMode(table=True)
        rules.append(PartitionRule(_Name.of(name), mode))
    return tuple(rules)


def hash_mode(name: str, config: str | None) -> HashMode | None:
    """``getPartitionHashColumns``: the mode of the first rule matching ``db.table``, or None
    (no rule, or no config: the message goes to partition 0)."""
    if not config:
        return None
    for rule in parse_partition_hash(config):
        if rule.name.matches(name):
            return rule.mode
    return None


@dataclass(frozen=True, slots=True)
class _TopicName:
    simple: str | None
    table_regex: MQRegex | None
    schema_regex: MQRegex | None


@lru_cache(maxsize=256)
def _topic_names(config: str) -> tuple[_TopicName, ...]:
    out = []
    for item in split_list(config):
        if not is_wildcard(item):
            out.append(_TopicName(item, None, None))
        elif "\\." in item:
            out.append(_TopicName(None, MQRegex(item), None))
        else:
            out.append(_TopicName(None, None, MQRegex(item)))
    return tuple(out)


def match_dynamic_topic(name: str, config: str | None) -> bool:
    """``matchDynamicTopic``: does ``name`` (``db.table`` or ``db``) match one name of ``config``?
    A table regex only tests names with a dot and a schema regex only names without one."""
    if not config:
        return False
    dotted = "." in name
    for item in _topic_names(config):
        if item.simple is not None:
            if equals_ignore_case(item.simple, name):
                return True
        elif dotted:
            if item.table_regex is not None and item.table_regex.matches(name):
                return True
        elif item.schema_regex is not None and item.schema_regex.matches(name):
            return True
    return False


@lru_cache(maxsize=256)
def _dynamic_items(config: str) -> tuple[tuple[str | None, str], ...]:
    """``canal.mq.dynamicTopic``'s items as (topic, names): ``topic:names`` split at the first colon,
    both sides trimmed; a bare item has no topic and its names are kept untrimmed."""
    out: list[tuple[str | None, str]] = []
    for item in split_list(config):
        colon = item.find(":")
        out.append((item[:colon].strip(), item[colon + 1 :].strip()) if colon > -1 else (None, item))
    return tuple(out)


def match_topic(name: str, dynamic_topic: str | None) -> str | None:
    """``matchTopics``: the topic of the first ``canal.mq.dynamicTopic`` item matching ``name``:
    a ``topic:names`` item gives ``topic``, a bare item ``name`` lower-cased. The caller still
    turns ``.`` into ``_``."""
    for topic, names in _dynamic_items(dynamic_topic or ""):
        if match_dynamic_topic(name, names):
            return name.lower() if topic is None else topic
    return None


def dynamic_topic_names(dynamic_topic: str | None) -> list[str]:
    """The topics ``canal.mq.dynamicTopic`` names outright (its ``topic:names`` items)."""
    return [topic for topic, _ in _dynamic_items(dynamic_topic or "") if topic is not None]


@dataclass(frozen=True, slots=True)
class _TopicPartitions:
    name: _Name
    partitions: int | None


def _java_int(text: str) -> int | None:
    # commons-lang 2 ``isNumeric``: Unicode digits only (no sign); ``Integer.valueOf`` then parses.
    if not text or not text.isdecimal():
        return None
    value = int(text)
    if value > _INT_MAX:
        raise ValueError(f"partition count {text!r} is larger than a Java int")
    return value


@lru_cache(maxsize=256)
def _topic_partition_rules(config: str) -> tuple[_TopicPartitions, ...]:
    out = []
    for item in split_list(config):
        colon = item.rfind(":")
        if colon > 0:  # an item without ``topic:`` is dropped
            out.append(_TopicPartitions(_Name.of(item[:colon]), _java_int(item[colon + 1 :])))
    return tuple(out)


def topic_partitions(topic: str, config: str | None) -> int | None:
    """``parseDynamicTopicPartition``: the partition count of the first rule naming ``topic``
    (None when no rule matches or the first match has no number: ``canal.mq.partitionsNum``
    applies)."""
    if not config:
        return None
    for rule in _topic_partition_rules(config):
        if rule.name.matches(topic):
            return rule.partitions
    return None
