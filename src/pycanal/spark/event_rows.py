"""``EventRows``: change rows from decoded binlog events (``format("binlog")``).

Column names and the primary key come from the TABLE_MAP (``binlog_row_metadata=FULL``) or from
the schema history the decoder was given; a table with neither is an error. A table's plan (its
names as JSON keys, its key columns) is kept on its TABLE_MAP, so rows of one table map are
written by string joins alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import NamedTuple

from pycanal.binlog import events as ev
from pycanal.binlog.rows import MISSING
from pycanal.binlog.tablemap import TableMap
from pycanal.parse.ddl import is_ddl
from pycanal.parse.filter import TableFilter

from .rows import Builder, RowsError, RowSource, Run, image_text, json_text

__all__ = ["EventRows"]


class _TablePlan(NamedTuple):
    names: tuple[str, ...]  # '"name":' for each column
    keys: tuple[int, ...]  # primary key column indexes, in column order


_PLAN_KEY = "pycanal.spark.event_rows"


def _table_plan(tm: TableMap, file: str, offset: int) -> _TablePlan:
    plan = tm.decoders.get(_PLAN_KEY)
    if plan is None:
        if tm.names is None:
            raise RowsError(
                f"rows of {tm.schema}.{tm.table} at {file}:{offset}: the binlog has no column names "
                "(binlog_row_metadata is not FULL); give the table schema (a schema history or CREATE "
                "TABLE statements)"
            )
        names = tuple(_jstr(n) + ":" for n in tm.names)
        keys = tuple(sorted(i for i, _ in tm.primary_key or ()))
        plan = tm.decoders[_PLAN_KEY] = _TablePlan(names, keys)
    return plan


def _key(plan: _TablePlan, image: tuple, fallback: tuple | None) -> str | None:
    if not plan.keys:
        return None
    parts = []
    for i in plan.keys:
        v = image[i]
        if v is MISSING and fallback is not None:
            v = fallback[i]  # a MINIMAL after image leaves out an unchanged key
        parts.append(plan.names[i] + json_text(v))
    return "{" + ",".join(parts) + "}"


class EventRows(RowSource[ev.Event]):
    """Change rows from decoded binlog events (``read_events``), in binlog order.

    ``accepts``: the tables to keep (DDL: Canal's statement filter, ``TableFilter.accepts_ddl``).
    ``gtid``: the GTID of the transaction the events start inside (a file part that starts
    mid-transaction). Column names and the primary key come from the TABLE_MAP (FULL metadata)
    or the schema history the decoder was given; a table with neither is an error.
    """

    def __init__(self, *, accepts: TableFilter | None = None, gtid: str | None = None) -> None:
        self._b = Builder(accepts, gtid, None)

    def _runs(self, events: Iterable[ev.Event]) -> Iterator[Run]:
        b = self._b
        for e in events:
            if isinstance(e, ev.RowsEvent):
                run = self._run(e)
                if run is not None:
                    yield run
            elif isinstance(e, ev.GtidEvent):
                b.gtid = e.gtid
            elif isinstance(e, ev.XidEvent | ev.XaPrepareEvent):
                b.gtid = None
            elif isinstance(e, ev.TransactionPayloadEvent):
                for inner in e.events:
                    if isinstance(inner, ev.RowsEvent):
                        run = self._run(inner, e.pos)
                        if run is not None:
                            yield run
                b.gtid = None
            elif isinstance(e, ev.QueryEvent) and not isinstance(e, ev.ExecuteLoadQueryEvent):
                sql = e.query
                if is_ddl(sql):
                    mode = e.status.get("sql_mode", 0)
                    yield from b.ddl_runs(sql, e.schema or None, mode, e.file, e.pos, e.timestamp)
                    b.gtid = None
                elif sql.lstrip()[:6].upper() == "COMMIT":
                    b.gtid = None

    def _run(self, e: ev.RowsEvent, offset: int | None = None) -> Run | None:
        b = self._b
        tm = e.table_map
        if tm is None:
            return None  # a rows event with no rows (the decoder raises for one whose table is unknown)
        if not b.wanted(tm.schema, tm.table):
            return None
        at = e.pos if offset is None else offset
        plan = _table_plan(tm, e.file, at)
        names = plan.names
        kind = e.kind
        pks: list[str | None] = []
        befores: list[str | None] = []
        afters: list[str | None] = []
        for r in e.rows:
            if kind == "INSERT":
                pks.append(_key(plan, r, None))
                befores.append(None)
                afters.append(image_text(names, r))
            elif kind == "UPDATE":
                before, after = r
                pks.append(_key(plan, after, before))
                befores.append(image_text(names, before))
                afters.append(image_text(names, after))
            else:
                pks.append(_key(plan, r, None))
                befores.append(image_text(names, r))
                afters.append(None)
        if not pks:
            return None
        return Run(kind, tm.schema, tm.table, pks, befores, afters, e.file, at, b.take(e.file, at, len(pks)),
                   b.gtid, e.timestamp, None, None)  # fmt: skip
