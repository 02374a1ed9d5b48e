"""What Canal makes of the events that carry a statement (``LogEventConvert.parseQueryEvent``,
``parseRowsQueryEvent`` and the SET texts of USER_VAR/INTVAR/RAND events).

A QUERY event is a transaction marker (``BEGIN``, ``COMMIT`` of a non-transactional statement
group, the XA statements) or a statement classified by :func:`pycanal.parse.ddl.parse_ddl`
(Canal's ``DruidDdlParser``): :func:`query_entry` says which entry it becomes. Statement text is
UTF-8 in an entry (:func:`entry_text`). The mapping, and where pycanal differs from Canal on
purpose, is ``docs/compatibility.md`` ("Canal entries", "Canal parity").
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import NamedTuple

from pycanal.binlog import events as ev
from pycanal.parse.columns import decimal_text, java_double_text
from pycanal.parse.ddl import parse_ddl
from pycanal.protocol import EntryProtocol_pb2 as pb

__all__ = ["QueryEntry", "entry_text", "query_entry", "rows_query_table", "variable_statement", "xa_props"]

log = logging.getLogger(__name__)

_DML = frozenset({pb.INSERT, pb.UPDATE, pb.DELETE})
_EVENT_TYPE_NAMES = frozenset(pb.EventType.keys())
_XA_ROWS = (("XA COMMIT", pb.XACOMMIT), ("XA ROLLBACK", pb.XAROLLBACK))


def entry_text(text: str) -> str:
    """A statement's text as an entry carries it: protobuf strings are UTF-8, so bytes the decoder
    could not read (kept as surrogates: e.g. MariaDB's ANNOTATE_ROWS of a latin1 client, which logs
    no charset) become U+FFFD, as Canal's decoding with its connection charset (UTF-8) makes them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def xa_props(xa_type: str, xid: str) -> tuple[tuple[str, str], ...]:
    """The props Canal gives an XA statement's entry."""
    return (("XA_TYPE", xa_type), ("XA_XID", xid))


class QueryEntry(NamedTuple):
    """The entry of one QUERY event (:func:`query_entry`): its type; for ROWDATA the eventType
    (Header and RowChange), isDdl (None: unset), the Header's schema and table and the RowChange's
    ``ddlSchemaName``; the XA props (of the TransactionBegin/End or the RowChange). A
    TRANSACTIONBEGIN carries the query's thread id, a TRANSACTIONEND the transactionId "0"."""

    entry_type: int
    event_type: int = 0
    is_ddl: bool | None = None
    schema: str = ""
    table: str = ""
    ddl_schema: str = ""
    props: tuple[tuple[str, str], ...] = ()


def query_entry(sql: str, schema: str) -> QueryEntry:
    """What a QUERY event of statement ``sql`` (its :func:`entry_text`) in session schema
    ``schema`` becomes."""
    upper = sql[:12].upper()
    if upper.startswith("XA START"):
        return QueryEntry(pb.TRANSACTIONBEGIN, props=xa_props("XA START", sql[8:]))
    if upper.startswith("XA END"):
        return QueryEntry(pb.TRANSACTIONEND, props=xa_props("XA END", sql[6:]))
    for prefix, event_type in _XA_ROWS:
        if upper.startswith(prefix):
            return QueryEntry(pb.ROWDATA, event_type, props=xa_props(prefix, sql[len(prefix) :]))
    tail = sql[-6:].upper()
    if tail.endswith("BEGIN"):
        return QueryEntry(pb.TRANSACTIONBEGIN)
    if tail == "COMMIT":  # a non-transactional engine's statement group: no XID
        return QueryEntry(pb.TRANSACTIONEND)
    try:
        results = parse_ddl(sql, schema or None)
    except Exception as exc:  # noqa: BLE001 - Canal's DruidDdlParser on a ParserException: a nameless QUERY
        log.warning("DDL classifier failed on %r: %s", sql[:200], exc)
        return QueryEntry(pb.ROWDATA, pb.QUERY, True, ddl_schema=schema)
    if not results:
        # A statement that names no table or database (accounts, views, routines, SAVEPOINT,
        # ALTER DATABASE, REPLACE, ...): Canal's DruidDdlParser gives no result and Canal drops
        # the event (LogEventConvert.parseQueryEvent: ``if (!notFilter) return null``). pycanal
        # keeps it as an informational QUERY entry without isDdl, the shape Canal gives the SQL
        # behind rows events, so a client that treats isDdl entries as schema changes skips it;
        # ``filter.query.dcl`` drops it as Canal would.
        return QueryEntry(pb.ROWDATA, pb.QUERY, ddl_schema=schema)
    first = results[0]  # Canal: "for a multi-table DDL only the first counts"
    name = str(first.type)
    if name not in _EVENT_TYPE_NAMES:
        # parse_ddl's UNKNOWN for a statement it cannot read (its ``error`` says why)
        log.warning("DDL classifier gave event type %r (%s); using QUERY", name, first.error or "no detail")
        name = "QUERY"
    event_type = pb.EventType.Value(name)
    # LogEventConvert.parseQueryEvent: setIsDdl(!isDml) -- true for table DDL and for a QUERY
    # from a database statement, false for statement DML.
    return QueryEntry(
        pb.ROWDATA, event_type, event_type not in _DML, first.schema or "", first.table or "", schema
    )


def rows_query_table(sql: str) -> str:
    """The table Canal names for MySQL's ROWS_QUERY statement (the first result of its DDL parser;
    MariaDB's ANNOTATE_ROWS names none). Only a DML statement's head names it: the first 4 KiB
    are read (a multi-row INSERT can be megabytes long)."""
    results = parse_ddl(sql[:4096], None)
    return entry_text(results[0].table or "") if results else ""


def variable_statement(e: ev.Event) -> str:
    """The ``SET`` statement Canal shows for USER_VAR / INTVAR / RAND events."""
    if isinstance(e, ev.IntvarEvent):
        return f"SET {'LAST_INSERT_ID' if e.kind == 1 else 'INSERT_ID'} = {e.value}"
    if isinstance(e, ev.RandEvent):
        return f"SET SESSION rand_seed1 = {e.seed1} , rand_seed2 = {e.seed2}"
    assert isinstance(e, ev.UserVarEvent)
    if e.is_null or e.value is None:
        return f"SET @{e.name} := NULL"
    v = e.value
    if e.value_type == 0:
        text = v.decode("latin-1") if isinstance(v, bytes) else v
        return f"SET @{e.name} := '{text}'"
    if isinstance(v, float):
        return f"SET @{e.name} := {java_double_text(v)}"
    if isinstance(v, Decimal):
        return f"SET @{e.name} := {decimal_text(v)}"
    if isinstance(v, bytes):
        return f"SET @{e.name} := {v.decode('latin-1')}"
    return f"SET @{e.name} := {v}"
