"""The text layout of Canal's example client (seed 002): batch header, BEGIN/END and row lines."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from .canonical import json_value
from .rows import MISSING
from .tablemap import TableMap
from .typenames import mysql_column_type


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _value_text(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return v
    return json_value(v)


class TextPrinter:
    """Formats canonical records (see ``canonical.Recorder``) one transaction per batch."""

    def __init__(self) -> None:
        self.batch_id = 0

    def lines(
        self, records: Iterable[dict[str, Any]], tables: dict[tuple[str, str], TableMap]
    ) -> Iterator[str]:
        batch: list[dict[str, Any]] = []
        for rec in records:
            if rec["type"] in ("GTID", "HEARTBEAT"):
                continue
            if rec["type"] == "BEGIN" and batch:
                yield from self._batch(batch, tables)
                batch = []
            batch.append(rec)
            if rec["type"] in ("COMMIT", "DDL", "QUERY") and not any(
                r["type"] == "BEGIN" for r in batch[:-1]
            ):
                yield from self._batch(batch, tables)
                batch = []
            elif rec["type"] == "COMMIT":
                yield from self._batch(batch, tables)
                batch = []
        if batch:
            yield from self._batch(batch, tables)

    def _batch(self, batch: list[dict[str, Any]], tables: dict[tuple[str, str], TableMap]) -> Iterator[str]:
        self.batch_id += 1
        first, last = batch[0], batch[-1]
        memsize = sum(r["next_pos"] - r["pos"] for r in batch if r["next_pos"] > r["pos"])
        yield "****************************************************"
        yield (
            f"* Batch Id: [{self.batch_id}] ,count : [{len(batch)}] , memsize : [{memsize}] , "
            f"Time : {time.strftime('%Y-%m-%d %H:%M:%S')}"
        )
        for label, r in (("Start", first), ("End", last)):
            ms = r["ts"] * 1000
            yield f"* {label} : [{r['file']}:{r['pos']}:{ms}({_when(ms)})]"
        yield "****************************************************"
        yield ""
        now = time.time() * 1000
        for r in batch:
            ms = r["ts"] * 1000
            delay = f"delay : {int(now - ms)}ms"
            kind = r["type"]
            if kind in ("BEGIN", "COMMIT"):
                yield f"================> binlog[{r['file']}:{r['pos']}] , executeTime : {ms} , {delay}"
                if kind == "BEGIN":
                    yield "BEGIN ----> Thread id: " + str(r.get("thread_id", 0))
                else:
                    yield f"END ----> transaction id: {r['xid'] if r['xid'] is not None else 0}"
                continue
            name = f"name[{r['schema'] or ''},{r['table'] or ''}]"
            yield (
                f"----------------> binlog[{r['file']}:{r['pos']}] , {name} , eventType : {kind} , "
                f"executeTime : {ms} , {delay}"
            )
            if kind in ("DDL", "QUERY"):
                yield f"sql ----> {r['sql']}"
                yield ""
                continue
            tm = tables.get((r["schema"], r["table"]))
            image = r["after"] if r["after"] is not None else r["before"]
            before = r["before"] if kind == "UPDATE" else None
            for i, v in enumerate(image):
                if v is MISSING:
                    continue
                col = r["columns"][i] if r["columns"] else f"@{i + 1}"
                typ = mysql_column_type(tm, i) if tm else "?"
                changed = kind == "INSERT" or (
                    before is not None and (before[i] is MISSING or before[i] != v)
                )
                yield f"{col} : {_value_text(v)} type={typ}" + (" update=true" if changed else "")
            yield "----------------"
