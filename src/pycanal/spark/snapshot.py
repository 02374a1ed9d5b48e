"""``format("canal")``'s initial snapshot: chunks planned in the runner, read in executors
(:mod:`pycanal.spark.snapshot_read`).

Options: ``snapshot`` (``initial``: the existing rows of the filter's tables first, when the query
starts from no checkpoint; ``never``, the default), ``source`` (HOST:PORT of the MySQL/MariaDB),
``sourceUser``, ``sourcePassword``, ``snapshotChunkRows`` (rows per chunk, 50000),
``snapshotParallelism`` (chunks per micro-batch, each one partition: 4), ``snapshotReader``
(``connectorx``: ``pycanal.snapshot.window``, the chunk reconciled with the binlog around its read;
``pymysql``: ``read_chunk``, a consistent snapshot), ``snapshotServerIds`` (``LOW-HIGH``, 5400-6399:
the window reads' replica ids, one per chunk of a micro-batch), ``snapshotLake`` (the lake the
applier writes: a chunk's rows also go there as a data file of its current-state table,
``pycanal.spark.chunk_files``); with the source's ``stage`` a chunk's rows are staged
(``pycanal.spark.stage``).

The snapshot's progress lives in the stream's offsets, next to the binlog position:
``"snap": {"left": [[db, table], ...], "lower": <key>, "read": [<chunk>, ...]}``: the tables not
finished (the first one being split), the lower bound of its next chunk, and the chunks the
micro-batch ending at this offset reads. The runner splits lazily, a few chunks per micro-batch
(the next boundary is one index query, ``pycanal.snapshot.chunks``), so offsets stay small, a
replayed micro-batch reads the same chunks, and a committed chunk is never read again.

The snapshot's first micro-batch reads nothing of the stream: one partition gives a ``CREATE
TABLE IF NOT EXISTS`` DDL row per table (``SHOW CREATE TABLE``), so the lake's schema model knows
the tables that existed before the stream before any of their changes comes. Then a chunk
partition is read in an executor straight from the source, exact as of a binlog position P (the
window reader's high position, or ``read_chunk``'s consistent snapshot); its rows are ``READ``
change rows at P. The rows of a chunk read while
the stream is still before P are applied before the stream's changes up to P, which replay over
them and end on the same rows (docs/snapshot.md).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import InputPartition

from pycanal.parse.filter import TableFilter
from pycanal.snapshot import SourceTable, describe, list_tables
from pycanal.snapshot.chunks import EvenRanges, even_ranges, next_upper
from pycanal.storage import LakePath, lake_path

from .canal_options import SIGNALS_MARK, SnapshotOptions

__all__ = [
    "SnapshotPartition",
    "SnapshotPlanner",
    "commit_signals",
    "request_snapshot",
    "snap_after",
    "snapshot_partitions",
    "snapshot_step",
]


def request_snapshot(signals: str | Path | LakePath, tables: list[str]) -> LakePath:
    """Ask a running query for an ad-hoc snapshot of ``tables`` (``db.table`` names): a request
    file in its ``snapshotSignals`` directory, taken at its next micro-batch."""
    names = []
    for t in tables:
        schema, dot, table = t.partition(".")
        if not dot or not schema or not table:
            raise ValueError(f"a table to snapshot is db.table, got {t!r}")
        names.append([schema, table])
    directory = lake_path(signals)
    if not (
        directory / SIGNALS_MARK
    ).exists():  # made by the query that reads it: a request no query reads is an error
        raise ValueError(f"{directory}: no query takes snapshot requests there")
    path = directory / f"{time.time_ns():020d}-{os.getpid()}.json"
    path.write_text(json.dumps({"tables": names}), sync=True)  # the runner reads only *.json
    return path


def _pending(opts: SnapshotOptions, names: list[str]) -> list[str]:
    """The request files of ``names`` not deleted yet (their micro-batch not committed)."""
    return [n for n in names if opts.signals is not None and (opts.signals / n).exists()]


def _requests(opts: SnapshotOptions, taken: list[str]) -> list[tuple[str, list[list[str]]]]:
    """The request files not taken yet: (name, tables), oldest first."""
    if opts.signals is None:
        return []
    out = []
    for path in [opts.signals / n for n in sorted(opts.signals.listdir()) if n.endswith(".json")]:
        if path.name in taken:
            continue
        try:
            tables = json.loads(path.read_text())["tables"]
            out.append((path.name, [[str(s), str(t)] for s, t in tables]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"snapshot request {path}: not a JSON object with tables [[db, table], ...]: {exc}"
            ) from None
    return out


def snapshot_step(
    opts: SnapshotOptions, planner: SnapshotPlanner, start: dict[str, Any]
) -> dict[str, Any] | None:
    """A micro-batch that declares tables and reads nothing of the stream (the initial snapshot's
    first; one that takes ad-hoc requests), or None: the stream's next batch (see ``snap_after``)."""
    prev = start.get("snap")
    if prev is None and start.get("file", "") == "" and opts.initial:
        return {**start, "snap": planner.start()}
    state = prev if isinstance(prev, dict) else {"left": [], "lower": None}
    taken = _pending(opts, state.get("signals", []))
    requests = _requests(opts, taken)
    if not requests:
        return None
    tables = [t for _, ts in requests for t in ts if planner.accepts is None or planner.accepts.accepts(*t)]
    left = state.get("left", [])
    snap = {
        "left": left + [t for t in tables if t not in left],
        "lower": state.get("lower"),
        "schema": tables,
        "signals": taken + [n for n, _ in requests],
    }
    return {**start, "snap": snap}


def snap_after(planner: SnapshotPlanner, start: dict[str, Any]) -> Any:
    """The snapshot state after the stream's next micro-batch: ``"done"``, or the tables left and
    the chunks it reads (and the request files taken, until their deletion is seen)."""
    prev = start.get("snap")
    if not isinstance(prev, dict):
        return "done"
    after = planner.advance(prev)
    signals = _pending(planner.opts, prev.get("signals", []))
    if after is None:
        return {"left": [], "lower": None, "signals": signals} if signals else "done"
    if signals:
        after["signals"] = signals
    return after


def commit_signals(opts: SnapshotOptions, end: dict[str, Any]) -> None:
    """Delete the request files a committed micro-batch has taken."""
    snap = end.get("snap")
    if opts.signals is None or not isinstance(snap, dict):
        return
    for name in snap.get("signals", []):
        (opts.signals / name).unlink()


# Key values in offsets: JSON-able (a bytes value as {"b64": ...}); the executors decode a chunk's.
def encode_key(key: tuple | None) -> list | None:
    if key is None:
        return None
    return [{"b64": base64.b64encode(v).decode()} if isinstance(v, bytes | bytearray) else v for v in key]


def decode_key(key: list | None) -> tuple | None:
    if key is None:
        return None
    return tuple(base64.b64decode(v["b64"]) if isinstance(v, dict) else v for v in key)


class SnapshotPlanner:
    """The runner's side: the snapshot state after the next micro-batch."""

    def __init__(self, opts: SnapshotOptions, accepts: TableFilter | None) -> None:
        self.opts = opts
        self.accepts = accepts
        self._conn: Any = None
        self._tables: dict[tuple[str, str], SourceTable] = {}
        self._even: dict[tuple[str, str], EvenRanges | None] = {}  # a dense integer key's ranges

    def _connection(self) -> Any:
        if self._conn is None:
            o = self.opts
            self._conn = o.source.connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def start(self) -> dict[str, Any]:
        """The first state: every table of the filter left, none split; its micro-batch reads the
        tables' CREATE TABLE statements (``schema``) and nothing of the stream."""
        tables = [list(t) for t in list_tables(self._connection(), self.accepts)]
        return {"left": tables, "lower": None, "schema": tables}

    def advance(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """The state after the next micro-batch's chunks (its ``read``), None when the snapshot
        has nothing left to read."""
        left = [tuple(t) for t in state["left"]]
        lower = decode_key(state.get("lower"))
        read: list[list] = []
        while left and len(read) < self.opts.parallelism:
            schema, name = left[0]
            if lower is None:  # a table starts: as it is now (a re-snapshot may follow a DDL)
                self._tables.pop((schema, name), None)
                self._even.pop((schema, name), None)
            table = self._table(schema, name)
            upper = self._upper(table, lower) if table is not None else None
            if table is not None:
                read.append([schema, name, encode_key(lower), encode_key(upper)])
            if upper is None:
                left.pop(0)
                lower = None
            else:
                lower = upper
        if not read:
            return None
        return {"left": [list(t) for t in left], "lower": encode_key(lower), "read": read}

    def _table(self, schema: str, name: str) -> SourceTable | None:
        t = self._tables.get((schema, name))
        if t is None:
            try:
                t = self._tables[(schema, name)] = describe(self._connection(), schema, name)
            except LookupError:
                return None  # dropped since the snapshot started: the stream has its DROP
        return t

    def _upper(self, table: SourceTable, lower: tuple | None) -> tuple | None:
        key = (table.schema, table.name)
        if key not in self._even:
            self._even[key] = even_ranges(self._connection(), table, self.opts.chunk_rows)
        return next_upper(self._connection(), table, lower, self.opts.chunk_rows, self._even[key])


class SnapshotPartition(InputPartition):
    """One chunk, ``[schema, table, lower, upper]`` as the offset has it; or (``schema``) the
    CREATE TABLE statements of the snapshot's tables, ``[[schema, table], ...]``. ``batch``: the
    micro-batch's number where its offset has one (a chunk's rows then go to the change log as
    a file of that batch, ``changelog.write_unnamed``)."""

    def __init__(
        self,
        index: int,
        chunk: list | None = None,
        schema: list | None = None,
        slot: int = 0,
        batch: int | None = None,
    ) -> None:
        super().__init__(index)
        self.chunk, self.schema = chunk, schema
        self.slot = slot  # the chunk's place in its micro-batch: which of the replica ids it uses
        self.batch = batch


def snapshot_partitions(start: dict[str, Any], end: dict[str, Any], first: int) -> list[SnapshotPartition]:
    """The snapshot partitions of the micro-batch (start, end], numbered from ``first``."""
    snap = end.get("snap")
    if not isinstance(snap, dict) or snap == start.get("snap"):
        return []
    if "schema" in snap:
        return [SnapshotPartition(first, schema=snap["schema"])]
    batch = end.get("batch")
    return [
        SnapshotPartition(first + i, chunk=c, slot=i, batch=batch) for i, c in enumerate(snap.get("read", []))
    ]
