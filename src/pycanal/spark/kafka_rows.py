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

A server's delivery is at least once: after a failed send it sends the batch again, so a topic can
hold a change twice, the copy after later changes (an UPDATE's old image after an ALTER). A table's
protobuf rows come from one topic, in binlog order but for such copies: ``Resends`` drops each row
at or before the last binlog position its table has had (flat messages carry none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import partial
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from pathlib import Path
from typing import Any

import pyarrow as pa

from pycanal.common.files import write_atomically
from pycanal.mq.consumer import decode_record
from pycanal.mq.flat import FlatMessage
from pycanal.parse.ddl import is_ddl

from .batch import position_order
from .entry_rows import EntryRows
from .rows import ROW_SCHEMA, Builder, RowsError, RowSource, Run

__all__ = ["KafkaApplier", "KafkaRows", "Resends", "kafka_changes", "kafka_file"]

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


class KafkaApplier:
    """``foreachBatch`` over Spark's Kafka source: a micro-batch's records decoded in the executors
    (``kafka_changes``), a server's resent copies dropped (``Resends``), the rest applied by
    ``applier`` (a ``ChangeApplier``: exactly once by batch id)."""

    def __init__(self, applier: Any, lake: str | Path, *, dataframe: bool = False, timezone: str = "UTC"):
        self.applier, self.dataframe, self.timezone = applier, dataframe, timezone
        self.resends = Resends(lake)

    def __call__(self, records: Any, batch_id: int) -> None:
        rows = self.resends.drop(kafka_changes(records, self.timezone).toArrow())
        batch = records.sparkSession.createDataFrame(rows, ROW_SCHEMA) if self.dataframe else rows
        self.applier(batch, batch_id)
        if rows.num_rows:
            self.resends.save(batch_id, rows)


class Resends:
    """The last binlog position of each table's rows in the lake ``lake``'s change log (kept in
    ``_pycanal/kafka-positions.json`` with the batch it is as of, brought up to the change log's
    last batch when made): ``drop`` takes a server's resent copies out of a micro-batch's rows, the
    same ones on a replay of the batch, ``save`` records the batch once applied."""

    def __init__(self, lake: str | Path) -> None:
        self.path = Path(lake) / "_pycanal" / "kafka-positions.json"
        saved = json.loads(self.path.read_text()) if self.path.exists() else {"batch": -1, "tables": {}}
        self.batch: int = saved["batch"]
        self.last: dict[str, tuple[str, int, int]] = {k: tuple(v) for k, v in saved["tables"].items()}
        from .changelog import ChangeLog  # the driver's (the executors import this module too)

        changelog = ChangeLog(lake)
        last = changelog.last_batch()
        if last is not None and last > self.batch:
            self._keep(changelog.read(self.batch, last))
            self.batch = last

    def _scan(self, rows: pa.Table) -> tuple[list[bool], dict[str, tuple[str, int, int]]]:
        """Which rows are new (protobuf rows after their table's last position, flat rows all),
        and the tables' last positions with them."""
        last = dict(self.last)
        position = rows["position"].combine_chunks()
        columns = [rows[c].to_pylist() for c in ("database", "table")]
        columns += [position.field(f).to_pylist() for f in ("file", "offset", "row")]
        new = []
        for database, table, file, offset, row in zip(*columns, strict=True):
            if file.startswith("kafka:"):
                new.append(True)
                continue
            name = f"{database}.{table}"
            at = (file, offset, row)
            seen = last.get(name)
            fresh = seen is None or _order(at) > _order(seen)
            new.append(fresh)
            if fresh:
                last[name] = at
        return new, last

    def drop(self, rows: pa.Table) -> pa.Table:
        """``rows`` (one micro-batch's, in record order) without the copies."""
        new, _ = self._scan(rows)
        return rows if all(new) else rows.filter(pa.array(new, pa.bool_()))

    def _keep(self, rows: pa.Table) -> None:
        self.last = self._scan(rows)[1]

    def save(self, batch_id: int, rows: pa.Table) -> None:
        """``rows`` (``drop``'s) are batch ``batch_id``'s, applied."""
        self._keep(rows)
        self.batch = batch_id
        state = {"batch": batch_id, "tables": self.last}
        write_atomically(self.path, json.dumps(state).encode())


def _order(at: tuple[str, int, int]) -> tuple[str, int, int, int]:
    return (*position_order(at[0], at[1]), at[2])
