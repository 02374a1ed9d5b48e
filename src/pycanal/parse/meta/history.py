"""The schema history: Canal's TSDB (``DatabaseTableMeta``), done better.

    history = SchemaHistory("conf/example/schema.db", connect=lambda: pymysql.connect(...),
                            filter=TableFilter(r".*\\..*"), alarm=alarm_handler)
    history.start(start_position)             # the model in force at the start position
    decoder = EventDecoder(table_meta=history.table_meta)
    for each event:
        history.at(event position)            # for error messages (optional but recommended)
        QUERY with a DDL -> history.apply(sql, event.schema, position)

* :meth:`start` (also for a restart from an older position) rebuilds the model in force at a
  position: the latest stored snapshot before it plus the recorded DDL up to it. With an empty
  store it loads the live ``information_schema`` and stores that as the first snapshot.
* :meth:`apply` parses a DDL, updates the model and records it with its position. The same DDL
  at the same position again (restart replay) is recorded once and never applied twice. A DDL
  on a table of interest that cannot be parsed or followed raises :class:`SchemaHistoryError`
  naming the statement and its position; nothing is silently ignored.
* :meth:`table_meta` is the ``EventDecoder`` hook: it completes each TABLE_MAP from the model
  (names, signedness, collations, ENUM/SET labels, primary key) and checks the two agree: column
  count and types (with lengths, precision/scale, fractional seconds), and names and signedness
  when the binlog carries FULL metadata. On a mismatch the table is re-read from the live server
  once (the ``alarm`` callback is told); if it still does not fit, a TABLE_MAP with FULL
  metadata (column names) decodes with the binlog's own metadata (alarm again), any other raises
  :class:`SchemaMismatchError` naming the table, the column and the position. Wrong column names
  are never attached.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...binlog.constants import ColumnType as T
from ...binlog.tablemap import NUMERIC_TYPES, TableMap
from ..ddl import DdlParseError, DdlResult, DdlType, OtherStatement, parse_ddl, parse_statement
from ..filter import TableFilter
from .loader import load_schema, load_table
from .model import SchemaApplyError, SchemaModel, Table
from .store import Position, SchemaStore, as_position
from .types import BLOB_TYPES, binlog_mismatch

log = logging.getLogger(__name__)

__all__ = ["SchemaHistory", "SchemaHistoryError", "SchemaMismatchError"]

_BINARY_DATA_TYPES = frozenset({"binary", "varbinary", "inet4", "inet6", "uuid", "geometry", "point", "linestring",
                                "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
                                "vector"}) | BLOB_TYPES  # fmt: skip
_BINARY_COLLATION_ID = 63


class SchemaHistoryError(Exception):
    """The schema history cannot follow the binlog (an unreadable DDL, a position it has no history for)."""


class SchemaMismatchError(SchemaHistoryError):
    """A TABLE_MAP does not fit the table's schema, even as the live server has it now."""


class SchemaHistory:
    """The schema model in force at the stream's position, persisted per destination.

    ``path``: the SQLite file (None: in memory, nothing survives a restart). ``connect``: a
    PyMySQL connection or a callable returning one, for the initial load and re-reads (None: no
    live server; a mismatch is then an error at once). ``filter``: the tables to keep (Canal's
    white/black lists). ``alarm``: called with a message whenever the model had to be corrected
    from the live server or forgot a table (default: a logged warning). ``snapshot_every``: take a
    snapshot after this many recorded DDL statements.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        connect: Any = None,
        filter: TableFilter | None = None,
        alarm: Callable[[str], None] | None = None,
        snapshot_every: int = 64,
        keep_snapshots: int = 16,
    ) -> None:
        self.store = SchemaStore(path if path is not None else ":memory:")
        self._connect = connect
        self.filter = filter or TableFilter()
        self.alarm = alarm or (lambda message: log.warning("schema history: %s", message))
        self.snapshot_every = snapshot_every
        self.keep_snapshots = keep_snapshots
        self.model: SchemaModel | None = None
        self.upto: tuple[int, int] | None = None  # the model holds the DDL recorded before this key
        self._upto_file = ""
        self._since = "an unknown binlog position"  # where the model was last brought forward, for messages
        self.position: Position | None = None  # the stream's current event, for messages
        self._since_snapshot = 0
        self._cache: dict[tuple, TableMap] = {}

    # -- plumbing --------------------------------------------------------------------
    def accepts(self, schema: str | None, table: str | None) -> bool:
        return self.filter.accepts(schema, table)

    def _with_connection(self, fn: Callable[[Any], Any]) -> Any:
        if self._connect is None:
            raise SchemaHistoryError("no connection to the source server is configured")
        if callable(self._connect) and not hasattr(self._connect, "cursor"):
            conn = self._connect()
            try:
                return fn(conn)
            finally:
                conn.close()
        return fn(self._connect)

    def close(self) -> None:
        self.store.close()

    def at(self, position: Any) -> None:
        """Tell the history the position of the event being decoded (used in messages)."""
        self.position = as_position(position)

    def _where(self) -> str:
        if self.position is not None:
            return f"binlog position {self.position}"
        return self._since

    def _require_model(self) -> SchemaModel:
        if self.model is None:
            raise SchemaHistoryError("the schema history is not started (call start(position) first)")
        return self.model

    # -- positions -------------------------------------------------------------------
    def start(self, position: Any) -> SchemaModel:
        """Make the model the one in force at ``position`` (first start, restart, or rewind).

        With nothing stored yet, the live server's schema is loaded and stored as the history's
        first snapshot, valid from ``position`` on.
        """
        pos = as_position(position)
        if self.store.earliest_snapshot() is None:
            model = self._with_connection(lambda conn: load_schema(conn, self.accepts))
            self.store.add_snapshot(
                pos.file, pos.offset, model.to_json(), "initial load from information_schema"
            )
        else:
            model = self.schema_at(pos)
        self.model = model
        self.upto = pos.key
        self._upto_file = pos.file
        self._since = f"the stream's start ({pos.file}:{pos.offset})"
        self.position = None
        self._since_snapshot = 0
        self._cache.clear()
        return model

    rollback = start

    def schema_at(self, position: Any) -> SchemaModel:
        """The model in force for the event at ``position`` (all DDL recorded before it)."""
        pos = as_position(position)
        snap = self.store.latest_snapshot(pos.key)
        if snap is None:
            first = self.store.earliest_snapshot()
            if first is None:
                raise SchemaHistoryError("the schema history is empty (start() loads it from the server)")
            raise SchemaHistoryError(
                f"binlog position {pos} is before the schema history's start {first.file}:{first.bound}; "
                "the schema in force there is unknown (delete the history store to reload it from the server)"
            )
        model = SchemaModel.from_json(snap.data)
        for rec in self.store.ddls(snap.key, pos.key):
            try:
                stmt = parse_statement(rec.sql, rec.sql_mode)
                for warning in model.apply(stmt, rec.use_schema, self.accepts, rec.collation_server):
                    log.debug("replaying %s: %s", rec.position, warning)
            except (DdlParseError, SchemaApplyError) as exc:  # pragma: no cover - it applied once
                raise SchemaHistoryError(
                    f"replaying the DDL recorded at {rec.position} failed: {exc}"
                ) from None
        return model

    def snapshot(self, reason: str = "periodic") -> None:
        """Store the current model, valid from the current bound on."""
        model = self._require_model()
        if self.upto is None:
            return
        self.store.add_snapshot(self._upto_file, self.upto[1], model.to_json(), reason)
        self._since_snapshot = 0
        if self.keep_snapshots:
            self.store.prune_snapshots(self.keep_snapshots)

    # -- DDL ---------------------------------------------------------------------------
    def apply(
        self,
        sql: str,
        default_schema: str | None,
        position: Any,
        *,
        sql_mode: int = 0,
        collation_server: int | str | None = None,
    ) -> list[DdlResult]:
        """Apply and record one statement from a QUERY event at ``position``; returns Canal's results.

        ``sql_mode`` and ``collation_server`` are the event's status variables (how the statement
        reads; the default of a CREATE DATABASE). Statements that change no table (DML, views,
        users, ...) are classified and returned without being recorded. Raises
        :class:`SchemaHistoryError` for a DDL on a table of interest that cannot be parsed or
        followed.
        """
        model = self._require_model()
        pos = as_position(position)
        sql_mode = int(sql_mode or 0)
        if isinstance(collation_server, int):
            collation_server = model.charsets.name_for_id(collation_server)
        results = parse_ddl(sql, default_schema, sql_mode)
        relevant = [r for r in results if r.table is None or self._relevant(r)]
        for r in results:
            if r.type is DdlType.UNKNOWN and r in relevant:
                raise SchemaHistoryError(f"cannot parse the DDL at binlog position {pos}: {r.error}: {sql!r}")
        if all(r.type in (DdlType.QUERY, DdlType.INSERT, DdlType.UPDATE, DdlType.DELETE) for r in results):
            # Database statements change the defaults of tables created later: those count.
            try:
                stmt = parse_statement(sql, sql_mode)
            except DdlParseError:
                return results
            if isinstance(stmt, OtherStatement):
                return results
        elif not any(r.table is not None and self._relevant(r) for r in results):
            return results  # only tables the filter rejects
        extra = (sql_mode, collation_server)
        if self.upto is not None and pos.key < self.upto:
            # Already in the model (the stream re-delivered it): record it if it is not, never reapply.
            self._record(pos, default_schema, sql, results, extra)
            return results
        try:
            stmt = parse_statement(sql, sql_mode)
            warnings = model.apply(stmt, default_schema, self.accepts, collation_server)
        except (DdlParseError, SchemaApplyError) as exc:
            raise SchemaHistoryError(
                f"cannot apply the DDL at binlog position {pos}: {exc}: {sql!r}"
            ) from None
        self._record(pos, default_schema, sql, results, extra)
        self.upto = (pos.key[0], pos.key[1] + 1)
        self._upto_file = pos.file
        self._since = f"the first event after binlog position {pos}"
        for warning in warnings:
            self.alarm(f"{warning} (DDL at binlog position {pos})")
        self._since_snapshot += 1
        if self.snapshot_every and self._since_snapshot >= self.snapshot_every:
            self.snapshot()
        return results

    def apply_event(self, event: Any, gtid: str | None = None) -> list[DdlResult]:
        """:meth:`apply` for a decoded ``QueryEvent`` (position, schema and status variables from it)."""
        status = getattr(event, "status", None) or {}
        pos = Position(event.file, event.pos, event.server_id, gtid, event.timestamp)
        return self.apply(
            event.query,
            event.schema or None,
            pos,
            sql_mode=status.get("sql_mode", 0),
            collation_server=status.get("collation_server"),
        )

    def _relevant(self, r: DdlResult) -> bool:
        if self.accepts(r.schema, r.table):
            return True
        return r.ori_table is not None and self.accepts(r.ori_schema, r.ori_table)

    def _record(
        self, pos: Position, default_schema: str | None, sql: str, results: list[DdlResult], extra: tuple
    ) -> None:
        first = results[0] if results else None
        self.store.add_ddl(
            pos,
            default_schema,
            sql,
            str(first.type) if first else None,
            first.schema if first else None,
            first.table if first else None,
            extra[0],
            extra[1],
        )

    # -- tables ------------------------------------------------------------------------
    def find(self, schema: str, table: str) -> Table | None:
        return self._require_model().table(schema, table)

    def table_meta(self, tm: TableMap) -> TableMap:
        """``EventDecoder``'s hook: ``tm`` completed from the model (the same object per version)."""
        model = self._require_model()
        raw_key = tm.raw or (tm.table_id, tm.schema, tm.table, tuple(tm.types), tuple(tm.metas))
        table = model.table(tm.schema, tm.table)
        hit = self._cache.get((raw_key, table.uid if table is not None else None))
        if hit is not None:
            return hit
        if not self.accepts(tm.schema, tm.table):
            return tm  # the caller filters these rows out; no names needed
        key = (raw_key, table.uid if table is not None else None)
        layout = tm.layout()
        if table is not None:
            # The table reopened under a new id (FLUSH TABLES, more tables than the server's
            # table_definition_cache): the same version's map, checked and completed before.
            again = self._cache.get((layout, table.uid))
            if again is not None:
                done = dataclasses.replace(again, table_id=tm.table_id, raw=tm.raw)
                done.decoders = again.decoders
                return self._keep(done, key)
        problem = "the table is not in the schema history" if table is None else self.check(table, tm)
        if problem is not None:
            try:
                table = self._reread(tm, problem)
            except SchemaMismatchError as exc:
                if not tm.names:
                    raise
                # FULL row metadata names every column: the binlog itself is right, whatever the
                # model says (a start before a DDL the snapshot already contains, say).
                self.alarm(f"{exc}; decoding with the binlog's own FULL metadata")
                return self._keep(tm, key)
        return self._keep(self._complete(tm, table), (raw_key, table.uid), (layout, table.uid))

    def _keep(self, tm: TableMap, *keys: Any) -> TableMap:
        """``tm`` cached under ``keys`` (a bounded cache: a table reopened under a new id every
        transaction adds a key each time)."""
        if len(self._cache) > 65536:
            self._cache.clear()
        for key in keys:
            self._cache[key] = tm
        return tm

    def _reread(self, tm: TableMap, problem: str) -> Table:
        name = f"{tm.schema}.{tm.table}"
        where = self._where()
        self.alarm(f"{name} at {where}: {problem}; re-reading it from the server")
        model = self._require_model()
        try:
            live = self._with_connection(lambda conn: load_table(conn, model, tm.schema, tm.table))
        except SchemaHistoryError:
            live = None
            reread = "no live server to re-read it from"
        except Exception as exc:
            live = None
            reread = f"re-reading it from the server failed: {exc}"
        else:
            reread = "the live server does not have the table" if live is None else None
        if live is not None:
            second = self.check(live, tm)
            if second is None:
                model.put_table(live)
                if self.position is not None and (self.upto is None or self.position.key >= self.upto):
                    self.upto, self._upto_file = self.position.key, self.position.file
                self.snapshot(f"{name} re-read from the server")
                return live
            reread = f"the live schema does not fit either: {second}"
        raise SchemaMismatchError(
            f"TABLE_MAP of {name} at {where} does not match its schema: {problem}; {reread}"
        )

    def check(self, table: Table, tm: TableMap) -> str | None:
        """Why ``tm`` cannot be ``table`` (naming the first column that differs), or None."""
        cols = table.columns
        if len(cols) != tm.column_count:
            return f"the binlog has {tm.column_count} columns, the schema history {len(cols)}"
        charsets = self._require_model().charsets
        for i, (col, t, meta) in enumerate(zip(cols, tm.types, tm.metas, strict=True)):
            why = binlog_mismatch(col.data_type, col.column_type, col.charset, col.labels, t, meta, charsets)
            if why is not None:
                return f"column {i + 1} `{col.name}`: {why}"
        if tm.names is not None:
            for i, (col, name) in enumerate(zip(cols, tm.names, strict=True)):
                if col.name != name:
                    return f"column {i + 1}: the binlog names it `{name}`, the schema history `{col.name}`"
        if tm.unsigned is not None:
            return _signedness_problem(table, tm)
        return None

    def _complete(self, tm: TableMap, table: Table) -> TableMap:
        cols = table.columns
        ids = self._require_model().charsets.collation_id
        collations: list[int | None] = []
        for i, col in enumerate(cols):
            logged = tm.collations[i] if tm.collations is not None else None
            if logged is not None:
                collations.append(logged)
            elif col.collation is not None:
                collations.append(ids.get(col.collation))
            elif col.data_type in _BINARY_DATA_TYPES:
                collations.append(_BINARY_COLLATION_ID)
            else:
                collations.append(None)
        enum_labels = [
            (tm.enum_labels[i] if tm.enum_labels is not None and tm.enum_labels[i] is not None else None)
            or (list(c.labels) if c.data_type == "enum" and c.labels is not None else None)
            for i, c in enumerate(cols)
        ]
        set_labels = [
            (tm.set_labels[i] if tm.set_labels is not None and tm.set_labels[i] is not None else None)
            or (list(c.labels) if c.data_type == "set" and c.labels is not None else None)
            for i, c in enumerate(cols)
        ]
        return dataclasses.replace(
            tm,
            names=[c.name for c in cols],
            # The model's signedness: it was checked against the binlog's when that was logged.
            unsigned=[c.unsigned and t in NUMERIC_TYPES for c, t in zip(cols, tm.types, strict=True)],
            collations=collations,
            enum_labels=enum_labels,
            set_labels=set_labels,
            primary_key=tm.primary_key if tm.primary_key is not None else table.primary_key_indexes,
            column_types=[c.column_type for c in cols],
        )


def _signedness_problem(table: Table, tm: TableMap) -> str | None:
    numeric = [i for i, t in enumerate(tm.types) if t in NUMERIC_TYPES]
    got = [bool(tm.unsigned[i]) for i in numeric]
    want = [table.columns[i].unsigned for i in numeric]
    if got == want:
        return None
    # MariaDB counts YEAR columns in the SIGNEDNESS bitmap (as unsigned), MySQL does not: a reader
    # that skips them reads every bit after a YEAR column one column late (and loses the last).
    with_year = [i for i, t in enumerate(tm.types) if t in NUMERIC_TYPES or t == T.YEAR]
    if any(tm.types[i] == T.YEAR for i in with_year):
        bits = [True if tm.types[i] == T.YEAR else table.columns[i].unsigned for i in with_year]
        if got == bits[: len(got)]:
            return None
        described = ", ".join(
            f"`{table.columns[i].name}` {'unsigned' if g else 'signed'} (schema history {table.columns[i].column_type!r})"
            for i, g in zip(numeric, got, strict=True)
        )
        return f"the binlog's signedness flags do not match the schema history (read as: {described})"
    for i, g, w in zip(numeric, got, want, strict=True):
        if g != w:
            col = table.columns[i]
            return (
                f"column {i + 1} `{col.name}`: the binlog says {'unsigned' if g else 'signed'}, "
                f"the schema history has {col.column_type!r}"
            )
    return None  # pragma: no cover
