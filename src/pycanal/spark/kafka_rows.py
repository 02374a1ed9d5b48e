"""Change rows from the records of Canal's topics (``pycanal pipeline --kafka``): the function the
executors run over Spark's Kafka source (``mapInArrow``), so that no record passes through the
driver.

A record is decoded as ``pycanal.mq.consumer.decode_record`` decodes it. A protobuf ``Packet``'s
entries give the rows ``EntryRows`` gives them (what ``format("canal")`` gives for the same
entries). A flat message gives the same rows, its values (Canal's texts, typed by ``mysqlType`` and
``sqlType`` per column) read by the same converters, except for what a ``FlatMessage`` does not
carry (docs/spark.md, "Reading Canal's topics"): its binlog position (the row's ``position`` is the
record's, ``file`` ``kafka:<topic>:<partition>`` and ``offset`` the record's offset), the
transaction's GTID (null), the DDL's session database (the table's), and a before image's columns
an UPDATE did not change (taken from the after image, as they are equal).

Only partition 0 of a topic is read: records of several partitions have no order between them (a
table's DDL goes to partition 0, its rows to the partition of their hash: alibaba/canal#1731), so a
record of another partition fails the query (``RowsError``) rather than apply changes out of order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any

import pyarrow as pa

from pycanal.mq.consumer import decode_record
from pycanal.mq.flat import FlatMessage
from pycanal.parse.ddl import is_ddl

from .entry_rows import EntryRows
from .rows import ROW_SCHEMA, Builder, RowsError, RowSource, Run

__all__ = ["KafkaRows", "kafka_changes", "kafka_file"]

# (topic, partition, offset, value) of one record
Record = tuple[str, int, int, "bytes | None"]
_ROW_OPS = ("INSERT", "UPDATE", "DELETE")


def kafka_file(topic: str, partition: int) -> str:
    """The ``position.file`` of a flat message's rows: the partition it was read from."""
    return f"kafka:{topic}:{partition}"


class KafkaRows(RowSource[Record]):
    """Change rows from Canal's records (flat or protobuf, both may share a topic), in record
    order. ``timezone``: the server's TIMESTAMP zone, as ``EntryRows``'."""

    def __init__(self, *, timezone: str = "UTC") -> None:
        self._entries = EntryRows(timezone=timezone)
        self._b = Builder(None, None, None)  # flat messages' row numbering

    def _runs(self, records: Iterable[Record]) -> Iterator[Run]:
        for topic, partition, offset, value in records:
            if partition != 0:
                raise RowsError(
                    f"topic {topic!r} partition {partition}: pycanal pipeline --kafka reads a topic's "
                    "partition 0 alone (canal.mq.partitionsNum 1, no canal.mq.partitionHash): the records "
                    "of several partitions have no order between them (docs/spark.md)"
                )
            message = decode_record(topic, partition, offset, value)
            if message.flat is not None:
                yield from self._flat(kafka_file(topic, partition), offset, message.flat)
            elif message.entries:
                yield from self._entries._runs(message.entries)  # the same rows as format("canal")

    def _flat(self, file: str, offset: int, msg: FlatMessage) -> Iterator[Run]:
        seconds = (msg.es or 0) // 1000
        if msg.type in _ROW_OPS and not msg.is_ddl:
            if msg.data:
                yield self._rows(file, offset, seconds, msg)
        elif msg.sql and is_ddl(msg.sql):
            self._b.gtid = None
            yield from self._b.ddl_runs(msg.sql, msg.database or None, 0, file, offset, seconds)

    def _rows(self, file: str, offset: int, seconds: int, msg: FlatMessage) -> Run:
        op, data = msg.type or "", msg.data or []
        mysql_type = msg.mysql_type or {}
        sql_type = {n: _value_sql_type(mysql_type.get(n, ""), t) for n, t in (msg.sql_type or {}).items()}
        olds = msg.old or [{}] * len(data)
        keys = msg.pk_names or []
        pks: list[str | None] = []
        befores: list[str | None] = []
        afters: list[str | None] = []
        for row, old in zip(data, olds, strict=True):
            try:
                texts = {
                    name: self._entries.value_text(mysql_type[name], sql_type.get(name), value)
                    for name, value in row.items()
                }
                before = (
                    {n: self._entries.value_text(mysql_type[n], sql_type.get(n), v) for n, v in old.items()}
                    if op == "UPDATE"
                    else {}
                )
            except (ValueError, IndexError, UnicodeEncodeError, KeyError) as exc:
                raise RowsError(f"{msg.database}.{msg.table} at {file}:{offset}: {exc!r}") from None
            image = _image(texts)
            key = [n for n in keys if n in texts]
            pks.append(_image({n: texts[n] for n in key}) if key else None)
            afters.append(None if op == "DELETE" else image)
            befores.append(
                None if op == "INSERT" else image if op == "DELETE" else _image({**texts, **before})
            )
        return Run(op, msg.database, msg.table, pks, befores, afters, file, offset,
                   self._b.take(file, offset, len(pks)), None, seconds, None, None)  # fmt: skip


_BLOB, _BIT = 2004, -7


def _value_sql_type(mysql_type: str, sql_type: int) -> int:
    """The ``sqlType`` of a flat message's values of a column. The message has one per column, the
    last row's, and a NULL's may differ from a value's: a NULL SET's is BLOB where its values (bit
    masks, Canal's default) are BIT; as labels both are CHAR. So a SET typed BLOB holds masks."""
    if sql_type == _BLOB and mysql_type.lstrip().lower().startswith("set"):
        return _BIT
    return sql_type


def _image(texts: dict[str, str]) -> str:
    """A row image's JSON text from its columns' JSON texts (as ``EntryRows`` joins them)."""
    return "{" + ",".join(_jstr(name) + ":" + text for name, text in texts.items()) + "}"


def _decode(batches: Iterable[pa.RecordBatch], timezone: str) -> Iterator[pa.RecordBatch]:
    rows = KafkaRows(timezone=timezone)
    for batch in batches:
        columns = (batch.column(name).to_pylist() for name in ("topic", "partition", "offset", "value"))
        yield from rows.batches(zip(*columns, strict=True))


def kafka_changes(records: Any, timezone: str = "UTC") -> Any:
    """The change rows (``ROW_SCHEMA``) of a DataFrame of Spark's Kafka source, decoded in the
    executors: the records of one partition of a micro-batch are one task's, in offset order."""
    return records.select("topic", "partition", "offset", "value").mapInArrow(
        partial(_decode, timezone=timezone), ROW_SCHEMA
    )
