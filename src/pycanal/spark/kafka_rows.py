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

A topic of one partition is read as it is. Several partitions (``canal.mq.partitionHash``) have no
order between them in Canal's records (a table's DDL goes to partition 0, its rows to the partition
of their hash: alibaba/canal#1731): a record of a partition other than 0 must carry pycanal's
``pycanal.order`` header (``canal.mq.partitionOrder``, :mod:`pycanal.mq.order`: DDL copied to every
partition, a flat message's binlog position), else it fails the query (``RowsError``). Each row
leaves the executors with its topic, partition and how many copies of it the partitions carry (a
DDL's, a key update's: ``ORDER_COLUMNS``); the driver merges the partitions by binlog position and
holds rows back behind a DDL or key update whose copies have not all come (:mod:`.kafka_order`),
and drops a server's resent copies there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from pathlib import Path
from typing import Any

import pyarrow as pa

from pycanal.mq.consumer import decode_record
from pycanal.mq.flat import FlatMessage
from pycanal.mq.order import ORDER_HEADER, RecordOrder, is_moved, read_order
from pycanal.parse.ddl import is_ddl
from pycanal.storage import LakePath, lake_path

from .entry_rows import EntryRows
from .kafka_order import KAFKA_ROW_SCHEMA, ORDER_COLUMNS, ORDER_SCHEMA, KafkaOrder
from .row_schema import ROW_SCHEMA
from .rows import Builder, RowsError, RowSource, Run, run_batches
from .stage import read_staged, stage_file

__all__ = [
    "KafkaApplier",
    "KafkaRows",
    "decode_batches",
    "kafka_changes",
    "kafka_file",
    "stage_batches",
    "staged_changes",
]

# (topic, partition, offset, value[, headers]) of one record
Record = tuple[Any, ...]
Headers = list[tuple[str, "bytes | None"]]
_ROW_OPS = ("INSERT", "UPDATE", "DELETE")
_OUT_SCHEMA = (
    ROW_SCHEMA
    + ", "
    + ", ".join(f"{name} {kind}" for name, kind in zip(ORDER_COLUMNS, ("STRING", "INT", "INT"), strict=True))
)


_STAGED_SCHEMA = "file STRING, rows LONG"
_STAGED_ARROW = pa.schema([("file", pa.string()), ("rows", pa.int64())])


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
        for record in records:
            yield from (run for run, _ in self.record_runs(record))

    def record_runs(self, record: Record) -> list[tuple[Run, int | None]]:
        """One record's runs, each with the copies of its rows the partitions carry (its
        ``pycanal.order`` header's partition count for a DDL, 2 for a moved row, else None)."""
        topic, partition, offset, value = record[:4]
        headers: Headers | None = record[4] if len(record) > 4 else None
        try:
            order = read_order(headers)
        except ValueError as exc:
            raise RowsError(f"topic {topic!r} partition {partition} offset {offset}: {exc}") from None
        if order is None and partition != 0:
            raise RowsError(
                f"topic {topic!r} partition {partition}: a record without the {ORDER_HEADER} header: "
                "pycanal pipeline --kafka reads a topic's partitions other than 0 only from a pycanal "
                "server with canal.mq.partitionOrder = true (DDL copied to every partition, records "
                "marked with their binlog position; docs/spark.md)"
            )
        message = decode_record(topic, partition, offset, value)
        if message.flat is not None:
            return list(self._flat(kafka_file(topic, partition), offset, message.flat, order))
        if order is None:
            return [(run, None) for run in self._entries._runs(message.entries)]  # format("canal")'s rows
        out: list[tuple[Run, int | None]] = []
        for entry in message.entries:
            copies = 2 if is_moved(entry.header.props) else None
            out += [
                (run, order.partitions if run.op == "DDL" else copies) for run in self._entries._runs([entry])
            ]
        return out

    def _flat(
        self, file: str, offset: int, msg: FlatMessage, order: RecordOrder | None
    ) -> Iterator[tuple[Run, int | None]]:
        seconds = (msg.es or 0) // 1000
        if order is not None and order.file is not None and order.offset is not None:
            file, offset = order.file, order.offset  # the entry's binlog position
            self._b.start_at(file, offset)
        if msg.type in _ROW_OPS and not msg.is_ddl:
            if msg.data:
                run = self._rows(file, offset, seconds, msg)
                if order is None or not order.rows:
                    yield run, None
                    return
                for part in _at_rows(run, order.rows, order.moved):
                    yield part, 2 if part.row in order.moved else None
        elif msg.sql and is_ddl(msg.sql):
            copies = None if order is None else order.partitions
            for run in self._b.ddl_runs(msg.sql, msg.database or None, 0, file, offset, seconds):
                yield run, copies

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


def _at_rows(run: Run, rows: tuple[int, ...], moved: tuple[int, ...] = ()) -> Iterator[Run]:
    """``run``'s rows numbered ``rows`` (their indexes in their entry, a partition's subset):
    one run per stretch of consecutive indexes, a ``moved`` row one of its own."""
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i] != rows[i - 1] + 1 or rows[i] in moved or rows[i - 1] in moved:
            yield run._replace(
                pk=run.pk[start:i], before=run.before[start:i], after=run.after[start:i], row=rows[start]
            )
            start = i


def _image(texts: dict[str, str]) -> str:
    """A row image's JSON text from its columns' JSON texts (as ``EntryRows`` joins them)."""
    return "{" + ",".join(_jstr(name) + ":" + text for name, text in texts.items()) + "}"


def decode_batches(
    batches: Iterable[pa.RecordBatch], timezone: str = "UTC", rows_per_batch: int = 8192
) -> Iterator[pa.RecordBatch]:
    """What the executors run: batches of Spark's Kafka rows (``topic``, ``partition``, ``offset``,
    ``value``, ``headers``) of one partition into change rows with ``ORDER_COLUMNS``."""
    rows = KafkaRows(timezone=timezone)
    names = ("topic", "partition", "offset", "value", "headers")
    for batch in batches:
        runs: list[Run] = []
        extra: list[list[Any]] = [[], [], []]
        for topic, partition, offset, value, headers in zip(
            *(batch.column(name).to_pylist() for name in names), strict=True
        ):
            pairs = [(h["key"], h["value"]) for h in headers or ()]
            for run, copies in rows.record_runs((topic, partition, offset, value, pairs)):
                for column, v in zip(extra, (topic, partition, copies), strict=True):
                    column.extend([v] * len(run.pk))
                runs.append(run)
        columns = [pa.array(v, f.type) for v, f in zip(extra, ORDER_SCHEMA, strict=True)]
        start = 0
        for out in run_batches(runs, rows_per_batch):
            tags = [c.slice(start, out.num_rows) for c in columns]
            start += out.num_rows
            yield pa.RecordBatch.from_arrays([*out.columns, *tags], names=[*out.schema.names, *ORDER_COLUMNS])


def kafka_changes(records: Any, timezone: str = "UTC") -> Any:
    """The change rows (``ROW_SCHEMA`` and ``ORDER_COLUMNS``) of a DataFrame of Spark's Kafka
    source (with its headers), decoded in the executors: the records of one partition of a
    micro-batch are one task's, in offset order."""
    return records.select("topic", "partition", "offset", "value", "headers").mapInArrow(
        partial(decode_batches, timezone=timezone), _OUT_SCHEMA
    )


def stage_batches(
    batches: Iterable[pa.RecordBatch], stage: str, timezone: str = "UTC"
) -> Iterator[pa.RecordBatch]:
    """What the executors run with a stage: :func:`decode_batches`' rows of one partition written
    to a new Arrow file in ``stage`` (LZ4), and one row naming it (``_STAGED_SCHEMA``), none
    without rows."""
    written = stage_file(stage, KAFKA_ROW_SCHEMA, decode_batches(batches, timezone), prefix="kafka-")
    if written is None:
        return
    path, n = written
    yield pa.RecordBatch.from_pydict({"file": [str(path)], "rows": [n]}, schema=_STAGED_ARROW)


def staged_changes(records: Any, stage: str | Path | LakePath, timezone: str = "UTC") -> pa.Table:
    """:func:`kafka_changes`' rows, handed from the executors to the driver as files in ``stage``
    (:func:`stage_batches`) rather than through Spark's JVM, where they would be turned into
    Spark's rows and back into Arrow (``bench/pipeline.py --via kafka``, flat: the JVM's CPU a round
    6.4 -> 5.3 s, 5,063 -> 5,704 rows/s). The files are read in partition order and deleted: a micro-batch run again
    decodes its records again, into new files (and a new ``ChangeApplier`` empties the stage)."""
    stage = lake_path(stage)
    named = (
        records.select("topic", "partition", "offset", "value", "headers")
        .mapInArrow(partial(stage_batches, stage=str(stage), timezone=timezone), _STAGED_SCHEMA)
        .toArrow()
    )
    tables = []
    for file, count in zip(named.column("file").to_pylist(), named.column("rows").to_pylist(), strict=True):
        path = lake_path(file)
        table = read_staged(path)
        if table.num_rows != count:
            raise RowsError(f"{path} holds {table.num_rows:,} rows, its task wrote {count:,}")
        tables.append(table)
        path.unlink()
    return pa.concat_tables(tables) if tables else KAFKA_ROW_SCHEMA.empty_table()


class KafkaApplier:
    """``foreachBatch`` over Spark's Kafka source: a micro-batch's records decoded in the executors
    (``kafka_changes``; with a ``stage`` directory the driver shares with them, ``staged_changes``),
    put in order with the rows held back before (``KafkaOrder``: resent copies dropped, partitions
    merged, DDL copies applied once), the rows ready applied by ``applier`` (a ``ChangeApplier``:
    exactly once by batch id)."""

    def __init__(
        self,
        applier: Any,
        lake: str | Path,
        *,
        dataframe: bool = False,
        timezone: str = "UTC",
        stage: str | Path | None = None,
    ):
        self.applier, self.dataframe, self.timezone = applier, dataframe, timezone
        self.stage = stage
        self.order = KafkaOrder(lake)

    def __call__(self, records: Any, batch_id: int) -> None:
        if self.stage is None:
            changes = kafka_changes(records, self.timezone).toArrow()
        else:
            changes = staged_changes(records, self.stage, self.timezone)
        rows, state = self.order.step(changes, batch_id)
        batch = records.sparkSession.createDataFrame(rows, ROW_SCHEMA) if self.dataframe else rows
        self.applier(batch, batch_id)
        self.order.save(batch_id, state)
