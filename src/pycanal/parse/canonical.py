"""The canonical change records of ``pycanal binlog decode --format jsonl``.

One record per row change, DDL/query and transaction marker (a DDL as the one classifier,
:func:`pycanal.parse.ddl.is_ddl`, says), with values in one exact JSON
form (DECIMAL as its exact string, binary as base64, JSON as itself, temporal as server text).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.jsonb import to_json_text
from pycanal.binlog.rows import MISSING, JsonPatch, JsonText

_BEGIN = re.compile(r"^\s*(BEGIN|XA\s+START)\b", re.IGNORECASE)
_COMMIT = re.compile(r"^\s*COMMIT\b", re.IGNORECASE)
# The outcome of a prepared XA transaction (Canal's XACOMMIT / XAROLLBACK event types).
_XA_OUTCOME = re.compile(r"^\s*XA\s+(COMMIT|ROLLBACK)\b(?!.*\bONE\s+PHASE\s*$)", re.IGNORECASE | re.DOTALL)


def _base64(v: bytes) -> str:
    return '{"base64": "' + base64.b64encode(v).decode("ascii") + '"}'


# json.dumps(v, ensure_ascii=False) of a str is exactly the encoder's encode_basestring (in C).
_FORMS: dict[type, Any] = {
    int: int.__repr__,
    str: encode_basestring,
    JsonText: str.__str__,
    Decimal: lambda v: f'"{v:f}"',
    float: float.__repr__,
    bytes: _base64,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
    type(MISSING): lambda v: "null",
}


def json_value(v: Any) -> str:
    """One column value as canonical JSON text."""
    form = _FORMS.get(type(v))
    if form is not None:
        return form(v)
    t = type(v)
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
    forms = _FORMS
    try:
        return "[" + ", ".join([forms[type(v)](v) for v in values]) + "]"
    except KeyError:  # a list or JSON patch value
        return "[" + ", ".join(map(json_value, values)) + "]"


@functools.lru_cache(maxsize=4096)  # by value types alone: tables of one shape share the code
def _image_code(types: tuple[type | None, ...]) -> Any:
    """``_image`` compiled for rows whose values have ``types`` (a table's rows repeat one shape):
    per column its form, guarded by the type (any other value takes ``json_value``), one f-string.
    A column NULL in the row the types came from (``None``) takes ``json_value``."""
    ns: dict[str, Any] = {"json_value": json_value}
    fields = []
    for i, t in enumerate(types):
        if t is None:
            fields.append(f"{{json_value(v{i})}}")
            continue
        ns[f"T{i}"], ns[f"F{i}"] = t, _FORMS.get(t, json_value)
        fields.append(f"{{F{i}(v{i}) if type(v{i}) is T{i} else json_value(v{i})}}")
    names = "".join(f"v{i}, " for i in range(len(types)))
    body = f"    {names}= r\n    return f'[{', '.join(fields)}]'" if types else "    return '[]'"
    exec(f"def image(r):\n{body}\n", ns)  # noqa: S102 - generated from column positions only
    return ns["image"]


def _dump(v: Any) -> str:
    """``json.dumps(v, ensure_ascii=False)``, without the encoder's set-up for the usual values."""
    if v is None:
        return "null"
    t = type(v)
    if t is str:
        return encode_basestring(v)
    if t is int:
        return int.__repr__(v)
    return json.dumps(v, ensure_ascii=False)


# Events that make no record (``Recorder._one`` has none for them), passed over without a call:
# sysbench's binlog has a TABLE_MAP and an ANNOTATE_ROWS before each of its rows events.
_SILENT = frozenset({ev.TableMapEvent, ev.RowsQueryEvent, ev.FormatDescriptionEvent, ev.RotateEvent})

_TABLE_KEY = ("pycanal.parse.canonical", "table")
_SEEN_KEY = ("pycanal.parse.canonical", "seen")
_CODE_KEY = ("pycanal.parse.canonical", "code")  # kind -> the table's image code, once its types are known


class Recorder:
    """Turns decoded events into canonical records, tracking the current transaction's GTID."""

    def __init__(self) -> None:
        self.gtid: str | None = None
        self.tables: dict[tuple[str, str], Any] = {}  # (schema, table) -> latest TableMap

    def lines(self, events: Iterable[ev.Event]) -> Iterator[str]:
        """``to_json_line`` of each record ``records`` gives, the same text: row changes are written
        straight from the event (its fields once, then per row the images), no dict per row."""
        for e in events:
            t = type(e)  # by identity first: these classes have no subclasses
            if t is ev.RowsEvent:
                yield from self._row_lines(e)
            elif t in _SILENT:
                continue
            elif t is ev.GtidEvent:  # a transaction's frame: written like a row's line
                self.gtid = e.gtid
                rest = _frame_rest(e, self.gtid, "null")
                yield '{"type": "GTID' + rest
                if getattr(e.info, "standalone", True) is False:
                    yield '{"type": "BEGIN' + rest
            elif t is ev.XidEvent:
                yield '{"type": "COMMIT' + _frame_rest(e, self.gtid, int.__repr__(e.xid))
                self.gtid = None
            elif t is ev.TransactionPayloadEvent:
                yield from self.lines(e.events)
            else:
                for rec in self._one(e):
                    yield to_json_line(rec)

    def _row_lines(self, e: ev.RowsEvent) -> Iterator[str]:
        tm = e.table_map
        if tm is None:
            return
        self.tables[(tm.schema, tm.table)] = tm
        kind = e.kind
        table = tm.decoders.get(_TABLE_KEY)  # the table's part of the line, made once per TableMap
        if table is None:
            table = tm.decoders[_TABLE_KEY] = (
                f'"schema": {_dump(tm.schema)}, "table": {_dump(tm.table)}, "columns": {_dump(tm.names)}, '
            )
        head = (
            f'{{"type": "{kind}", "file": {_dump(e.file)}, "pos": {e.pos}, "next_pos": {e.next_pos}, '
            f'"ts": {e.timestamp}, "server_id": {e.server_id}, "gtid": {_dump(self.gtid)}, "xid": null, '
            f'{table}"before": '
        )
        n = e.column_count
        # MISSING values only come with a partial image (a column bitmap that is not full)
        b, a = e.before_columns, e.after_columns
        partial = (b is not None and len(b) != n) or (a is not None and len(a) != n)
        rows = e.rows
        codes = tm.decoders.get(_CODE_KEY)
        if codes is not None and not partial and kind in codes:  # the table's, its types all known
            code = codes[kind]
        elif rows and not partial:  # one compiled image per value-type shape of the table's rows
            first = rows[0][-1] if kind == "UPDATE" else rows[0]
            types = [None if v is None else type(v) for v in first]
            if None in types:  # a NULL takes the column's type seen last: where NULLs fall varies
                # from row to row, and a shape per pattern compiled a function for nearly every
                # event of a table with nullable columns (1,690 for 2,000 of bench/decode_types.py)
                seen = tm.decoders.get(_SEEN_KEY)
                if seen is None or len(seen) != len(types):
                    seen = tm.decoders[_SEEN_KEY] = [None] * len(types)
                for i, t in enumerate(types):
                    if t is None:
                        types[i] = seen[i]
                    else:
                        seen[i] = t
            code = _image_code(tuple(types))
            if None not in types:  # a column's values keep their type (any other takes json_value)
                tm.decoders.setdefault(_CODE_KEY, {})[kind] = code
        else:
            code = _image
        for row in rows:
            if kind == "UPDATE":
                before, after = row
                line = f'{head}{code(before)}, "after": {code(after)}, "sql": null'
            elif kind == "INSERT":
                line = f'{head}null, "after": {code(row)}, "sql": null'
                before, after = None, row
            else:
                line = f'{head}{code(row)}, "after": null, "sql": null'
                before, after = row, None
            if partial and (
                (before is not None and MISSING in before) or (after is not None and MISSING in after)
            ):
                absent = {
                    k: [i for i, v in enumerate(img) if v is MISSING]
                    for k, img in (("before", before), ("after", after))
                    if img is not None
                }
                line += f', "absent": {_dump({k: v for k, v in absent.items() if v})}'
            yield line + "}"

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
                from pycanal.parse.ddl import is_ddl  # the DDL parser, once a statement needs it

                kind = "DDL" if is_ddl(sql, e.status.get("sql_mode", 0)) else "QUERY"
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


def _frame_rest(e: ev.Event, gtid: str | None, xid: str) -> str:
    """``to_json_line(Recorder._base(e, kind, xid=...))`` after its type's text: the GTID, BEGIN and
    COMMIT of every transaction, without the record's dict (on sysbench's binlog three lines to its
    four rows; a MariaDB GTID's BEGIN line differs from its GTID line only in the type)."""
    return (
        f'", "file": {_dump(e.file)}, "pos": {e.pos}, "next_pos": {e.next_pos}, '
        f'"ts": {e.timestamp}, "server_id": {e.server_id}, "gtid": {_dump(gtid)}, "xid": {xid}, '
        '"schema": null, "table": null, "columns": null, "before": null, "after": null, "sql": null}'
    )


def to_json_line(rec: dict[str, Any]) -> str:
    """Serialise a record; row images use the canonical value forms."""
    parts = []
    for key, value in rec.items():
        if key in ("before", "after"):
            text = _image(value)
        else:
            text = _dump(value)
        parts.append(f'"{key}": {text}')
    return "{" + ", ".join(parts) + "}"
