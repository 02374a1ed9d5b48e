"""The canonical change records of ``pycanal binlog decode --format jsonl``.

One record per row change, DDL/query and transaction marker, with values in one exact JSON
form (DECIMAL as its exact string, binary as base64, JSON as itself, temporal as server text).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from . import events as ev
from .jsonb import to_json_text
from .rows import MISSING, JsonPatch, JsonText

# Schema changes; account statements (CREATE/ALTER/DROP/RENAME USER, ROLE) are plain queries.
_DDL = re.compile(
    r"^\s*(?:/\*.*?\*/\s*|#[^\n]*\n\s*|--[^\n]*\n\s*)*(?:CREATE|ALTER|DROP|RENAME|TRUNCATE)\b(?!\s+(?:USER|ROLE)\b)",
    re.IGNORECASE | re.DOTALL,
)
_BEGIN = re.compile(r"^\s*(BEGIN|XA\s+START)\b", re.IGNORECASE)
_COMMIT = re.compile(r"^\s*COMMIT\b", re.IGNORECASE)
# The outcome of a prepared XA transaction (Canal's XACOMMIT / XAROLLBACK event types).
_XA_OUTCOME = re.compile(r"^\s*XA\s+(COMMIT|ROLLBACK)\b(?!.*\bONE\s+PHASE\s*$)", re.IGNORECASE | re.DOTALL)


def is_ddl(sql: str) -> bool:
    return _DDL.match(sql) is not None


def json_value(v: Any) -> str:
    """One column value as canonical JSON text."""
    if v is None or v is MISSING:
        return "null"
    t = type(v)
    if t is int:
        return str(v)
    if t is str:
        return json.dumps(v, ensure_ascii=False)
    if t is JsonText:
        return str.__str__(v)
    if t is Decimal:
        return f'"{v:f}"'
    if t is float:
        return repr(v)
    if t is bytes:
        return '{"base64": "' + base64.b64encode(v).decode("ascii") + '"}'
    if t is bool:
        return "true" if v else "false"
    if t is list:
        return json.dumps(v, ensure_ascii=False)
    if t is JsonPatch:
        ops = [
            {"op": _PATCH_OPS[op], "path": path, **({} if value is None else {"value": value})}
            for op, path, value in v
        ]
        return '{"json_patch": ' + to_json_text(ops) + "}"
    raise TypeError(f"no canonical JSON form for {t.__name__}")


_PATCH_OPS = {0: "replace", 1: "insert", 2: "remove"}


def _image(values: tuple | None) -> str:
    if values is None:
        return "null"
    return "[" + ", ".join(json_value(v) for v in values) + "]"


class Recorder:
    """Turns decoded events into canonical records, tracking the current transaction's GTID."""

    def __init__(self) -> None:
        self.gtid: str | None = None
        self.tables: dict[tuple[str, str], Any] = {}  # (schema, table) -> latest TableMap

    def records(self, events: Iterable[ev.Event]) -> Iterator[dict[str, Any]]:
        for e in events:
            if isinstance(e, ev.TransactionPayloadEvent):
                yield from self.records(e.events)
            else:
                yield from self._one(e)

    def _base(self, e: ev.Event, kind: str, **extra: Any) -> dict[str, Any]:
        rec = {
            "type": kind,
            "file": e.file,
            "pos": e.pos,
            "next_pos": e.next_pos,
            "ts": e.timestamp,
            "server_id": e.server_id,
            "gtid": self.gtid,
            "xid": None,
            "schema": None,
            "table": None,
            "columns": None,
            "before": None,
            "after": None,
            "sql": None,
        }
        rec.update(extra)
        return rec

    def _one(self, e: ev.Event) -> Iterator[dict[str, Any]]:
        if isinstance(e, ev.RowsEvent):
            tm = e.table_map
            if tm is None:
                return
            names = tm.names
            self.tables[(tm.schema, tm.table)] = tm
            for row in e.rows:
                if e.kind == "UPDATE":
                    before, after = row
                elif e.kind == "INSERT":
                    before, after = None, row
                else:
                    before, after = row, None
                rec = self._base(
                    e, e.kind, schema=tm.schema, table=tm.table, columns=names, before=before, after=after
                )
                absent = {
                    k: [i for i, v in enumerate(img) if v is MISSING]
                    for k, img in (("before", before), ("after", after))
                    if img is not None
                }
                absent = {k: v for k, v in absent.items() if v}
                if absent:
                    rec["absent"] = absent
                yield rec
        elif isinstance(e, ev.GtidEvent):
            self.gtid = e.gtid
            yield self._base(e, "GTID")
            info = e.info
            if getattr(info, "standalone", True) is False:
                # MariaDB's GTID event opens the transaction itself; no BEGIN query follows.
                yield self._base(e, "BEGIN")
        elif isinstance(e, ev.QueryEvent):
            sql = e.query
            if _BEGIN.match(sql):
                yield self._base(e, "BEGIN", schema=e.schema or None, thread_id=e.thread_id)
            elif _COMMIT.match(sql):
                yield self._base(e, "COMMIT", schema=e.schema or None)
                self.gtid = None
            elif m := _XA_OUTCOME.match(sql):
                yield self._base(e, "XA" + m.group(1).upper(), schema=e.schema or None, sql=sql)
                self.gtid = None
            else:
                kind = "DDL" if is_ddl(sql) else "QUERY"
                yield self._base(e, kind, schema=e.schema or None, sql=sql)
                if kind == "DDL":
                    self.gtid = None
        elif isinstance(e, ev.XaPrepareEvent):
            # The prepared group ends here; its outcome is a later XACOMMIT / XAROLLBACK record.
            xid = f"X'{e.gtrid.hex()}',X'{e.bqual.hex()}',{e.format_id}"
            yield self._base(e, "XAPREPARE", sql=f"XA PREPARE {xid}")
            self.gtid = None
        elif isinstance(e, ev.XidEvent):
            yield self._base(e, "COMMIT", xid=e.xid)
            self.gtid = None
        elif isinstance(e, ev.HeartbeatEvent):
            yield self._base(e, "HEARTBEAT")


def to_json_line(rec: dict[str, Any]) -> str:
    """Serialise a record; row images use the canonical value forms."""
    parts = []
    for key, value in rec.items():
        if key in ("before", "after"):
            text = _image(value)
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(f'"{key}": {text}')
    return "{" + ", ".join(parts) + "}"
