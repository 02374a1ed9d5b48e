"""Canal entries in the text layout of Canal's example client (seed 002): a batch header per
message, ``BEGIN``/``END`` lines, one line per row change and ``column : value type=...
update=true``. The one text layout of the command line: ``pycanal tail`` prints the server's
messages with it, ``pycanal binlog decode`` and ``pycanal dump`` the entries the server would
serve, one transaction a batch (``transaction_batches``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence

from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = ["message_lines", "transaction_batches"]

# Entries the example client never prints and a server's store never holds.
_UNSERVED = frozenset({pb.HEARTBEAT, pb.GTIDLOG})


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _position(e: pb.Entry) -> str:
    h = e.header
    return f"{h.logfileName}:{h.logfileOffset}:{h.executeTime}({_when(h.executeTime)})"


def transaction_batches(entries: Iterable[pb.Entry]) -> Iterator[list[pb.Entry]]:
    """Entries grouped as a server's store hands them out when a client takes one transaction
    at a time: BEGIN .. END together, an entry outside a transaction (DDL) alone; heartbeats and
    GTID entries left out."""
    batch: list[pb.Entry] = []
    for e in entries:
        kind = e.entryType
        if kind in _UNSERVED:
            continue
        if kind == pb.TRANSACTIONBEGIN and batch:
            yield batch
            batch = []
        batch.append(e)
        if kind == pb.TRANSACTIONEND or batch[0].entryType != pb.TRANSACTIONBEGIN:
            yield batch
            batch = []
    if batch:
        yield batch


def message_lines(batch_id: int, entries: Sequence[pb.Entry]) -> Iterator[str]:
    """The lines of one message (no trailing newlines); ``memsize`` is the sum of the entries'
    binlog event lengths, as Canal's example client adds it up."""
    if not entries:
        return
    memsize = sum(e.header.eventLength for e in entries)
    yield "****************************************************"
    yield (
        f"* Batch Id: [{batch_id}] ,count : [{len(entries)}] , memsize : [{memsize}] , "
        f"Time : {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    yield f"* Start : [{_position(entries[0])}]"
    yield f"* End : [{_position(entries[-1])}]"
    yield "****************************************************"
    yield ""
    now = time.time() * 1000
    for e in entries:
        h = e.header
        delay = f"delay : {int(now - h.executeTime)}ms"
        if e.entryType == pb.TRANSACTIONBEGIN:
            begin = pb.TransactionBegin.FromString(e.storeValue)
            yield f"================> binlog[{h.logfileName}:{h.logfileOffset}] , executeTime : {h.executeTime} , {delay}"
            yield f"BEGIN ----> Thread id: {begin.threadId}"
            continue
        if e.entryType == pb.TRANSACTIONEND:
            end = pb.TransactionEnd.FromString(e.storeValue)
            yield f"================> binlog[{h.logfileName}:{h.logfileOffset}] , executeTime : {h.executeTime} , {delay}"
            yield f"END ----> transaction id: {end.transactionId or 0}"
            continue
        if e.entryType != pb.ROWDATA:
            continue
        change = pb.RowChange.FromString(e.storeValue)
        kind = pb.EventType.Name(change.eventType)
        yield (
            f"----------------> binlog[{h.logfileName}:{h.logfileOffset}] , name[{h.schemaName},{h.tableName}] , "
            f"eventType : {kind} , executeTime : {h.executeTime} , {delay}"
        )
        if change.isDdl or change.eventType == pb.QUERY:
            yield f"sql ----> {change.sql}"
            yield ""
            continue
        for row in change.rowDatas:
            columns = row.beforeColumns if change.eventType == pb.DELETE else row.afterColumns
            for c in columns:
                value = "NULL" if c.isNull else c.value
                yield f"{c.name} : {value} type={c.mysqlType}" + (" update=true" if c.updated else "")
            yield "----------------"
