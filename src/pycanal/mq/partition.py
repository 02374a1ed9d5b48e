"""Canal's partitioning of a batch by ``canal.mq.partitionHash`` (``MQMessageUtils.messagePartition``).

A row's hash is ``database.hashCode()`` (with ``canal.mq.database.hash``) XOR the Java
``hashCode()`` of each hashed value; its partition ``abs(abs(hash) % n)``. A ``db.table`` rule
without columns hashes only the table name (not the database) and keeps the message whole. DDL,
rows of no rule, and entries without rows (statement-format queries) go to partition 0.
With pycanal's ``canal.mq.partitionOrder`` (:mod:`pycanal.mq.order`) those entries also go to every
other partition, a one-row entry carries its row's index in the whole entry, and a key update also
goes to its before image's partition.

Flat and protobuf modes hash differently, as Canal does: flat looks the listed columns up by exact
name in the row map (a missing or null value hashes as ``""``, and a column listed twice cancels
out); protobuf XORs each column whose name is in the list ignoring case (once each) or, for
``$pk$``, each key column, using the column's ``value`` as stored (``""`` for NULL).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.wire import field_bytes, split_around

from ._java import equals_ignore_case, hash_partition, string_hash
from .flat import FlatMessage
from .order import MOVED_PROP
from .packet import entry_bytes
from .rules import hash_mode
from .split import with_row_prop

__all__ = ["entry_partitions", "flat_partitions", "flat_row_partitions"]

_TRANSACTION = (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND)


def _java_str(value: str | None) -> str:
    return "null" if value is None else value


def _count(partitions: int | None) -> int:
    n = 1 if partitions is None else partitions
    if n < 1:
        raise ValueError(f"partition count must be >= 1, not {n}")
    return n


def flat_row_partitions(
    msg: FlatMessage,
    partitions: int | None,
    partition_hash: str | None,
    database_hash: bool,
    before: bool = False,
) -> int | list[int]:
    """The partition of the whole message (an int), or of each of its rows (a list); ``before``:
    of each row's before image (an UPDATE's ``old`` over its ``data``), where a key update was."""
    n = _count(partitions)
    if msg.is_ddl or not msg.data:
        return 0
    database, table = msg.database, msg.table
    mode = hash_mode(f"{_java_str(database)}.{_java_str(table)}", partition_hash)
    if mode is None:
        return 0
    if mode.table:
        return hash_partition(string_hash(_java_str(table)), n)
    names = msg.pk_names if mode.auto_pk else mode.columns
    base = string_hash(_java_str(database)) if database_hash else 0
    rows = msg.data
    if before and msg.old:
        rows = [{**row, **old} for row, old in zip(msg.data, msg.old, strict=True)]
    parts = []
    for row in rows:
        h = base
        for name in names or ():
            value = row.get(name)
            h ^= string_hash(value) if value else 0
        parts.append(hash_partition(h, n))
    return parts


def flat_partitions(
    msg: FlatMessage, partitions: int | None, partition_hash: str | None, database_hash: bool
) -> list[FlatMessage | None]:
    """One slot per partition (None: nothing for it). Split messages keep every field of ``msg``
    but ``data``/``old``, which keep the rows of their partition in order."""
    out: list[FlatMessage | None] = [None] * _count(partitions)
    where = flat_row_partitions(msg, partitions, partition_hash, database_hash)
    if isinstance(where, int):
        out[where] = msg
        return out
    old = msg.old
    assert msg.data is not None
    for idx, (row, part) in enumerate(zip(msg.data, where, strict=True)):
        target = out[part]
        if target is None:
            target = out[part] = replace(msg, data=[], old=[] if old else None)
        assert target.data is not None
        target.data.append(row)
        if old:
            assert target.old is not None
            target.old.append(old[idx])
    return out


def _row_hash(columns: Iterable[pb.Column], auto_pk: bool, names: Sequence[str], base: int) -> int:
    h = base
    for col in columns:
        if col.isKey if auto_pk else any(equals_ignore_case(n, col.name) for n in names):
            h ^= string_hash(col.value)
    return h


def entry_partitions(
    entries: Iterable[bytes | pb.Entry],
    partitions: int | None,
    partition_hash: str | None,
    database_hash: bool,
    order: bool = False,
) -> list[list[bytes]]:
    """Each partition's entry bytes (empty: no record). Transaction begin/end are dropped. With
    column or ``$pk$`` hashing every row becomes an entry of its own: the entry with a
    ``RowChange`` of that one row, the rest of the ``RowChange`` kept (cut from the original bytes,
    see :mod:`pycanal.protocol.wire`). ``order`` (``canal.mq.partitionOrder``): what goes to
    partition 0 for want of rows goes to every partition, a one-row entry's header carries its
    row's index (:data:`~pycanal.mq.split.ROW_PROP`, also 0), and a key update also goes to its
    before image's partition, marked :data:`~pycanal.mq.order.MOVED_PROP` in both."""
    n = _count(partitions)
    out: list[list[bytes]] = [[] for _ in range(n)]
    for item in entries:
        data = entry_bytes(item)
        entry = item if isinstance(item, pb.Entry) else pb.Entry.FromString(data)
        if entry.entryType in _TRANSACTION:
            continue
        change = pb.RowChange.FromString(entry.storeValue)
        if change.isDdl or not change.rowDatas:
            for part in out if order else out[:1]:
                part.append(data)
            continue
        database, table = entry.header.schemaName, entry.header.tableName
        mode = hash_mode(f"{database}.{table}", partition_hash)
        if mode is None:
            out[0].append(data)
            continue
        if mode.table:
            out[hash_partition(string_hash(table), n)].append(data)
            continue
        base = string_hash(database) if database_hash else 0
        delete, update = change.eventType == pb.DELETE, change.eventType == pb.UPDATE
        entry_head, _, entry_tail = split_around(data, 3)
        change_head, rows, change_tail = split_around(entry.storeValue, 12)
        for index, (row, row_data) in enumerate(zip(change.rowDatas, rows, strict=True)):
            columns = row.beforeColumns if delete else row.afterColumns
            part = hash_partition(_row_hash(columns, mode.auto_pk, mode.columns, base), n)
            one = field_bytes(0x1A, change_head + field_bytes(0x62, row_data) + change_tail) + entry_tail
            if not order:
                out[part].append(entry_head + one)
                continue
            was = (
                hash_partition(_row_hash(row.beforeColumns, mode.auto_pk, mode.columns, base), n)
                if update
                else part
            )
            if was != part:  # a key update: also after the old key's changes
                out[was].append(with_row_prop(entry_head, index, (MOVED_PROP, "1")) + one)
                out[part].append(with_row_prop(entry_head, index, (MOVED_PROP, "1")) + one)
            else:
                out[part].append(with_row_prop(entry_head, index) + one)
    return out
