"""Canal messages in the text layout of Canal's example client (seed 002), for ``pycanal tail``.

The same layout as ``pycanal binlog decode --format text`` (:mod:`pycanal.binlog.printer`), built
from Canal ``Entry`` messages instead of decoded events: a batch header per message, then
``BEGIN``/``END`` lines, one line per row change and ``column : value type=... update=true``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = ["message_lines"]


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _position(e: pb.Entry) -> str:
    h = e.header
    return f"{h.logfileName}:{h.logfileOffset}:{h.executeTime}({_when(h.executeTime)})"


def message_lines(batch_id: int, entries: Sequence[pb.Entry], memsize: int) -> Iterator[str]:
    """The lines of one message (no trailing newlines)."""
    if not entries:
        return
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
