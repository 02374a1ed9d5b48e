"""``apply_changes``: a ``foreachBatch`` function writing change rows exactly once into a change
log and current-state Delta tables.

    applier = ChangeApplier("/lake/shop", schema_history="conf/example/schema.db")
    query = (spark.readStream.format("canal")...load()
             .writeStream.foreachBatch(applier)               # or partial(apply_changes, target_dir=...)
             .option("checkpointLocation", "/lake/shop/_checkpoint").start())

Per micro-batch (``batch_id`` from Spark, rows in any order, sorted here by position; a
partition's rows staged by an executor, a ``STAGED`` row, replaced by its rows):

1. if the change log has the batch's transaction id, the batch is in it: nothing to do; an
   empty batch has nothing to do either (no commit);
2. the rows go to the change log (``changelog``: a Delta table, the batch a file appended by one
   commit with the Delta transaction id of the batch, clustered by table later): from here on the
   batch is durable, Spark may commit it and the source ack it to the server;
3. the current-state tables are brought up to date (``current_state``: MERGE per table, DDL followed);
   each step is idempotent by itself (Delta transaction ids, a step journal). The schema model
   after the batch is saved if the batch had DDL, then ``_pycanal/applied/<batch>.json`` records
   the batch as applied (with the warnings it raised).

With ``background=True`` step 3 runs on a thread while Spark goes on with the next
micro-batches: batches committed while an apply runs wait for it and are then applied together
(one MERGE per table for all of them; at most ``max_queued`` wait, then a call waits too), so the
number of MERGEs follows what the tables take, not Spark's trigger, and a slow apply never holds
the change log back. A call raises the error of a failed background apply. Either way a new applier first brings the current state up to the
change log (``catch_up``: the committed batches not applied yet, read back from their files), so
a crash anywhere loses nothing and repeats nothing: Spark replays an uncommitted batch with the
same id and rows, and the steps already done are skipped. The schema model (column names and
types per table) starts from ``schema`` (a ``SchemaModel``), ``schema_ddl`` (CREATE TABLE
statements), ``schema_history`` (a pycanal schema history store, read at the first row's
position) or empty (tables are learned from their CREATE TABLE), and then follows the DDL rows.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pycanal.parse.meta import SchemaModel
from pycanal.storage import LakePath, lake_path

from .arrow import take_in_blocks
from .batch import ApplyError, BatchRows, ImagesLeftOut
from .canal_options import stage_dir
from .changelog import ChangeLog, batch_ids, last_change_times
from .cow import Contents
from .current_state import APP_ID, CurrentState
from .executors import run_in_executors
from .maintenance import Maintenance
from .rows import ARROW_SCHEMA
from .schema import model_at, model_from_ddl
from .stage import Staged, expand_staged

__all__ = ["ApplyError", "ChangeApplier", "applied_batch_ids", "apply_changes", "last_applied", "table_times"]

log = logging.getLogger(__name__)


def _arrow(batch: Any) -> pa.Table:
    """The batch as an Arrow table of ``ARROW_SCHEMA`` (a Spark DataFrame, Arrow table or batch)."""
    if hasattr(batch, "toArrow"):
        batch = batch.toArrow()
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    if not isinstance(batch, pa.Table):
        raise TypeError(
            f"apply_changes needs a Spark DataFrame or an Arrow table, not {type(batch).__name__}"
        )
    missing = [n for n in ARROW_SCHEMA.names if n not in batch.column_names]
    if missing:
        raise ValueError(f"the batch has no column(s) {missing}: apply_changes needs pycanal change rows")
    try:
        return batch.select(ARROW_SCHEMA.names).cast(ARROW_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise ValueError(f"the batch's columns do not have the change-row types: {exc}") from None


def _sorted(table: pa.Table) -> pa.Table:
    """The rows in position order (a stable sort). Batches mostly come in that order already, or
    as a few blocks in order (a snapshot's chunks read in parallel, each at its own position):
    those blocks are put in order as slices, without copying the rows."""
    pos = table.column("position").combine_chunks()
    keys = pa.table({"f": pos.field("file"), "o": pos.field("offset"), "r": pos.field("row")})
    if _in_order(keys):
        return table
    order = pc.sort_indices(keys, sort_keys=[("f", "ascending"), ("o", "ascending"), ("r", "ascending")])
    return take_in_blocks(table, order)


def _in_order(keys: pa.Table) -> bool:
    """Whether each row's (f, o, r) is <= the next one's (not known with a null: no)."""
    if keys.num_rows < 2:
        return True
    a, b = keys.slice(0, keys.num_rows - 1), keys.slice(1)
    f, o = (pc.less(a[c], b[c]) for c in "fo")
    same_f, same_o = (pc.equal(a[c], b[c]) for c in "fo")
    le = pc.or_(f, pc.and_(same_f, pc.or_(o, pc.and_(same_o, pc.less_equal(a["r"], b["r"])))))
    return pc.all(le, skip_nulls=False).as_py() is True


class ChangeApplier:
    """``foreachBatch`` callable: ``applier(batch_df, batch_id)`` (see the module docstring).

    ``zero_dates``: what a zero date (``0000-00-00``, ``2024-00-10``) becomes in the current-state
    tables, which have no such value: ``"error"`` (default: stop with a clear error) or ``"null"``.
    ``apply_threads``: writes into different tables run at once. ``cache_bytes``: rows of recently
    written current-state files kept in memory (``cow.Contents``), so a table rewritten every
    micro-batch is not read back.
    ``maintenance``: compaction, checkpoints and vacuum of the current-state tables
    (``pycanal.spark.maintenance``; on by default). ``max_queued``: committed batches that may
    wait for a running background apply. ``apply_share``: the share of the time the background
    apply may take: a round that took A seconds is followed by the next no sooner than A /
    ``apply_share`` seconds after its start (or once ``max_queued`` batches wait), so that a round's
    fixed cost per table is shared by more batches as rounds grow; small rounds barely wait.
    ``apply_on``: ``"driver"`` (threads of this process) or ``"executors"`` (Spark tasks write the
    tables, ``pycanal.spark.executors``; the micro-batches must be Spark DataFrames).
    """

    def __init__(
        self,
        target_dir: str | Path | LakePath,
        *,
        schema: SchemaModel | None = None,
        schema_ddl: str | None = None,
        schema_history: str | Path | None = None,
        zero_dates: str = "error",
        app_id: str = APP_ID,
        background: bool = False,
        apply_threads: int = 2,
        maintenance: Maintenance | None = None,
        max_queued: int = 16,
        cache_bytes: int = 256 << 20,
        apply_share: float = 1.0,
        apply_on: str = "driver",
    ) -> None:
        if sum(x is not None for x in (schema, schema_ddl, schema_history)) > 1:
            raise ValueError("give at most one of schema, schema_ddl and schema_history")
        if zero_dates not in ("error", "null"):
            raise ValueError(f"zero_dates must be 'error' or 'null', not {zero_dates!r}")
        if apply_on not in ("driver", "executors"):
            raise ValueError(f"apply_on must be 'driver' or 'executors', not {apply_on!r}")
        if not 0 < apply_share <= 1:
            raise ValueError(f"apply_share must be in (0, 1], not {apply_share!r}")
        self.root = lake_path(target_dir)
        self.schema, self.schema_ddl, self.schema_history = schema, schema_ddl, schema_history
        self.zero_dates = zero_dates
        self.app_id = app_id
        self.apply_threads = apply_threads
        self._contents = Contents(cache_bytes)
        self.maintenance = maintenance if maintenance is not None else Maintenance()
        self._tables: dict[str, Any] = {}  # open current-state tables, kept between batches
        self._models: dict[int, tuple[SchemaModel, dict[str, list]]] = {}  # and the snapshot's declarations
        self._state = self.root / "_pycanal"
        self.max_queued = max_queued
        self.apply_share = apply_share
        self.apply_on = apply_on
        self._spark: Any = None  # the micro-batches' session (apply_on="executors")
        self._epoch = uuid.uuid4().hex  # the tables' state as executors may keep it (see CurrentState)
        self._hurry = False  # wait() is waiting: no pause between rounds
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pycanal-apply") if background else None
        self._pending: Future[None] | None = None  # the background apply loop, while it runs
        self._queue: list[tuple[pa.Table, int]] = []  # committed batches it has not taken yet
        self._cond = threading.Condition()  # guards _queue and _pending
        self._caught_up = False  # catch_up ran, and no background apply failed since
        self._failed: Future[None] | None = None  # the apply loop that failed, not reported yet
        self._schema_batch: int | None = None  # whose saved schema model is in force now
        # Change rows of the last 100 micro-batches by batch id (Spark's numInputRows counts a
        # staged partition once), and those of them a snapshot read (READ).
        self.rows_in: dict[int, int] = {}
        self.reads_in: dict[int, int] = {}
        # The last applies: (end, seconds, micro-batches, rows).
        self.rounds: deque[tuple[float, float, int, int]] = deque(maxlen=1000)
        # Snapshot chunks' files committed as they are / left for their READ rows (chunk_files), so far.
        self.chunk_files = {"taken": 0, "left": 0}
        # Change-log files executors wrote (stage): taken as they are / written again by the driver
        # (for another batch than the one they came in: a query unioning sources, an older checkpoint).
        self.changelog_files = {"taken": 0, "rewritten": 0}
        self._changelog = ChangeLog(
            self.root,
            properties=self.maintenance.table_properties(),
            checkpoint_every=self.maintenance.checkpoint_every,
        )
        self._fold_pool = ThreadPoolExecutor(1, thread_name_prefix="pycanal-fold") if background else None
        self._folding: Future[None] | None = None  # the change log's fold, while it runs or until reported
        self._folded: int | None = None  # the last batch folded (or being folded)

    def __call__(self, batch: Any, batch_id: int) -> None:
        batch_id = int(batch_id)
        self._spark = self._spark or getattr(batch, "sparkSession", None)
        changelog = self._changelog
        if not self._caught_up:
            self.catch_up()
        if changelog.committed(batch_id):
            log.info("micro-batch %d is in the change log already: skipped", batch_id)
            return
        # A chunk's change-log file of this batch is read without its images where the current
        # state may take the chunk's own file (else ImagesLeftOut: _apply reads them then).
        lean = (
            partial(_logged, changelog=changelog.dir, batch_id=batch_id)
            if self.apply_on == "driver"
            else None
        )
        table, staged = expand_staged(_arrow(batch), lean)
        logged = [f for f in staged if f.log is not None and _logged(f.path, f.log, changelog.dir, batch_id)]
        own = _without(table, logged)  # the rows the change log gets in the batch's own file
        table = _sorted(table)
        self.rows_in[batch_id] = table.num_rows
        self.reads_in[batch_id] = pc.sum(pc.equal(table.column("op"), "READ")).as_py() or 0
        while len(self.rows_in) > 100:
            del self.rows_in[next(iter(self.rows_in))], self.reads_in[next(iter(self.reads_in))]
        if table.num_rows == 0:
            # Nothing to log or apply (a replay is empty again): no commit, and no wait for the
            # background apply; a failure of it still surfaces here once it is known.
            self._raise_failure()
            return
        changelog.write(_sorted(own) if logged else table, batch_id, [f.log for f in logged])
        self.changelog_files["taken"] += len(logged)
        self.changelog_files["rewritten"] += sum(f.log is not None for f in staged) - len(logged)
        done = [f.path for f in staged if f not in logged]  # files whose rows the batch's own file has
        if self._pool is None:
            changelog.commit(batch_id)
            _unlink(done)
            self._apply([table], [batch_id])
            return
        with self._cond:  # room in the queue (a failure of the apply loop ends the wait)
            self._cond.wait_for(lambda: len(self._queue) < self.max_queued or self._pending is None)
        self._raise_failure()
        changelog.commit(batch_id)
        _unlink(done)
        with self._cond:
            self._queue.append((table, batch_id))
            if self._pending is None:
                self._pending = self._pool.submit(self._drain)
            self._cond.notify_all()

    def _drain(self) -> None:
        """The background apply loop: everything queued, as one apply, until nothing is; after a
        round, a pause that keeps the apply's share of the time at ``apply_share``."""
        earliest = 0.0  # monotonic time the next round may start
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._hurry or len(self._queue) >= self.max_queued,
                    timeout=max(0.0, earliest - time.monotonic()),
                )
                items, self._queue = self._queue, []
                if not items:
                    self._pending, self._hurry = None, False
                    self._cond.notify_all()
                    return
                self._cond.notify_all()
            started = time.monotonic()
            try:
                self._apply([t for t, _ in items], [b for _, b in items])
            except BaseException:
                with self._cond:
                    self._queue.clear()  # in the change log: catch_up applies them again
                    self._pending, failed = None, self._pending
                    self._failed, self._hurry = failed, False
                    self._cond.notify_all()
                raise
            earliest = started + (time.monotonic() - started) / self.apply_share

    def _raise_failure(self) -> None:
        """Raise the error of a background apply that failed (the next call starts with catch_up),
        or of a fold of the change log."""
        self._fold_result(wait=False)
        failed, self._failed = self._failed, None
        if failed is not None:
            self._caught_up = False
            failed.result()

    def wait(self) -> None:
        """Wait until the background apply has applied every committed batch and the change log's
        fold is done; raise their error (the next call then starts with ``catch_up``, which
        tries those batches again)."""
        with self._cond:
            pending = self._pending
            if pending is not None:
                self._hurry = True
                self._cond.notify_all()
        if pending is not None:
            try:
                pending.result()
            except BaseException:
                self._failed = None
                self._caught_up = False
                raise
        self._fold_result(wait=True)  # started by the apply that just ended, if any
        self._raise_failure()

    def _fold_result(self, wait: bool) -> None:
        """Take the fold's outcome (raise its error) once it is done, or ``wait`` for it."""
        folding = self._folding
        if folding is not None and (wait or folding.done()):
            self._folding = None
            folding.result()

    def catch_up(self) -> None:
        """Apply the change log's committed batches the current state does not have yet: first
        the batches of an apply that was cut short (the journal names them: the same rows make
        the same steps), then the others ``max_queued`` at a time."""
        self.wait()
        self._caught_up = False
        stage = stage_dir(self.root)
        _unlink(stage / name for name in stage.listdir())  # rows staged for batches that never committed
        self._changelog.clear_unnamed()  # and the change-log files executors wrote for them
        applied = batch_ids(self._state / "applied")
        last = applied[-1] if applied else -1
        self._schema_batch = (
            json.loads(self._applied_file(last).read_text())["schema_batch"] if applied else None
        )
        changelog = self._changelog
        pending = changelog.batches(last)
        journal = self._progress()
        i = 0
        while i < len(pending):
            j = min(i + self.max_queued, len(pending))
            if journal is not None and journal[0] == pending[i] and journal[1] in pending:
                j = pending.index(journal[1]) + 1
            group = pending[i:j]
            log.info("micro-batches %s: applying them to the current state from the change log", _span(group))
            self._apply([_sorted(changelog.read_batch(b)) for b in group], group)
            i = j
        self._caught_up = True

    def _apply(self, tables: list[pa.Table], ids: list[int]) -> None:
        """Step 3 of the module docstring for committed batches ``ids`` (consecutive, in order)
        as one: one MERGE per table, under the last batch's id. Where a chunk read without its
        images is to be applied as rows, the batches again as the change log has them (the same
        rows in the same order: the steps done are skipped, ``catch_up``'s way)."""
        try:
            self._apply_rows(tables, ids)
        except ImagesLeftOut as exc:
            log.info("micro-batches %s: %s; applying them as the change log has them", _span(ids), exc)
            self._apply_rows([_sorted(self._changelog.read_batch(b)) for b in ids], ids)

    def _apply_rows(self, tables: list[pa.Table], ids: list[int]) -> None:
        first, batch_id = ids[0], ids[-1]
        started = time.monotonic()
        schema_batch = self._schema_batch
        warnings: list[str] = []
        chunk_files = None
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if table.num_rows:
            rows = BatchRows(table)
            model, declared = self._model(schema_batch, rows)
            state = CurrentState(
                self.root,
                batch_id,
                model,
                done_step=self._done_step(first, batch_id),
                on_step=lambda step: self._journal(batch_id, step, first),
                zero_dates=self.zero_dates,
                app_id=self.app_id,
                threads=self.apply_threads,
                tables=self._tables,
                contents=self._contents,
                maintenance=self.maintenance,
                declared=declared,
                executors=self._executors(),
                epoch=self._epoch,
            )
            try:
                state.apply(rows)
            finally:
                self._epoch = state.epoch
            warnings = state.warnings
            chunk_files = state.chunk_files if any(state.chunk_files.values()) else None
            for k, n in state.chunk_files.items():
                self.chunk_files[k] += n
            if schema_batch is None or "DDL" in rows.op:
                saved = {**model.to_json(), "snapshot_declared": declared}
                self._schema_file(batch_id).write_text(json.dumps(saved), sync=True)
                self._models = {batch_id: (model, declared)}
                schema_batch = batch_id
        for w in warnings:
            log.warning("micro-batches %s: %s", _span(ids), w)
        # The last batch's record first: catch_up starts after the last record there is.
        for b, t in [(batch_id, tables[-1]), *zip(ids[:-1], tables[:-1], strict=True)]:
            record = {"batch_id": b, "applied_with": [first, batch_id], "schema_batch": schema_batch,
                      "warnings": warnings, **_times(t)}  # fmt: skip
            if chunk_files is not None and b == batch_id:
                record["chunk_files"] = chunk_files
            self._applied_file(b).write_text(json.dumps(record, indent=1), sync=True)
        self._schema_batch = schema_batch
        self.rounds.append((time.time(), time.monotonic() - started, len(ids), table.num_rows))
        self._fold_if_due(batch_id)

    def _executors(self) -> Any:
        if self.apply_on == "driver":
            return None
        if self._spark is None:
            raise ValueError("apply_on='executors' needs the micro-batches as Spark DataFrames")
        return partial(run_in_executors, self._spark)

    # ------------------------------------------------------------------ the change log's fold
    def _fold_if_due(self, applied: int) -> None:
        """Fold the change log through ``applied`` every ``maintenance.fold_every`` batches: on
        the fold's thread in the background (its error is raised by a later call), else here."""
        every = self.maintenance.fold_every
        if not every or self._folding is not None:  # one at a time; the next call reports a finished one
            return
        if self._folded is None:
            self._folded = self._changelog.folded_through()
        if applied - self._folded < every:
            return
        self._folded = applied
        if self._fold_pool is None:
            self._fold(applied)
        else:
            self._folding = self._fold_pool.submit(self._fold, applied)

    def _fold(self, upto: int) -> None:
        t0 = time.monotonic()
        done = self.maintenance.fold(self._changelog, upto)
        if done is None:
            return
        self._summarize(done["through"])
        log.info("change log folded through micro-batch %d in %.2f s: %s", upto, time.monotonic() - t0, done)

    def _summarize(self, upto: int) -> None:
        """Fold the applied records before ``upto`` (the last applied batch: ``catch_up`` starts
        after its record, which stays) into ``_pycanal/tables.json``, the source time of each table's last applied change."""
        ids = [b for b in batch_ids(self._state / "applied") if b < upto]
        if not ids:
            return
        summary = _summary(self.root)
        for b in ids:
            summary["tables"].update(json.loads(self._applied_file(b).read_text()).get("tables", {}))
        summary["through"] = ids[-1]
        (self._state / "tables.json").write_text(json.dumps(summary), sync=True)
        for b in ids:
            self._applied_file(b).unlink()

    def _applied_file(self, batch_id: int) -> LakePath:
        return self._state / "applied" / f"{batch_id:020d}.json"

    # ------------------------------------------------------------------ schema model
    def _schema_file(self, batch_id: int) -> LakePath:
        return self._state / "schema" / f"{batch_id:020d}.json"

    def _model(self, schema_batch: int | None, rows: BatchRows) -> tuple[SchemaModel, dict[str, list]]:
        """The model in force before the batch, and the tables the snapshot declared (where);
        copies when the batch's DDL will change them."""
        if schema_batch is None:
            if self.schema is not None:
                return self.schema.copy(), {}
            if self.schema_ddl is not None:
                return model_from_ddl(self.schema_ddl), {}
            if self.schema_history is not None:
                return model_at(self.schema_history, rows.file[0], rows.offset[0]), {}
            return SchemaModel(), {}
        cached = self._models.get(schema_batch)
        if cached is None:
            saved = json.loads(self._schema_file(schema_batch).read_text())
            cached = (SchemaModel.from_json(saved), saved.get("snapshot_declared", {}))
            self._models = {schema_batch: cached}
        model, declared = cached
        return (model.copy(), dict(declared)) if "DDL" in rows.op else (model, declared)

    # ------------------------------------------------------------------ step journal
    def _progress(self) -> tuple[int, int, int] | None:
        """(first batch, last batch, step) of the last apply's journal."""
        path = self._state / "progress.json"
        try:
            done = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        return done.get("first", done["batch_id"]), done["batch_id"], done["step"]

    def _done_step(self, first: int, batch_id: int) -> int:
        progress = self._progress()
        return progress[2] if progress is not None and progress[:2] == (first, batch_id) else 0

    def _journal(self, batch_id: int, step: int, first: int) -> None:
        done = {"batch_id": batch_id, "first": first, "step": step}
        (self._state / "progress.json").write_text(json.dumps(done), sync=True)


def _logged(path: LakePath, log: dict[str, Any], changelog: LakePath, batch_id: int) -> bool:
    """Whether a staged file is a change-log data file written for this batch, in this change log."""
    return log.get("batch") == batch_id and path.uri == (changelog / log["path"]).uri


def _without(table: pa.Table, staged: list[Staged]) -> pa.Table:
    """``table`` without the rows of the ``staged`` files (slices, no copy)."""
    if not staged:
        return table
    parts, start = [], 0
    for f in sorted(staged, key=lambda f: f.start):
        parts.append(table.slice(start, f.start - start))
        start = f.start + f.rows
    parts.append(table.slice(start))
    return pa.concat_tables(parts)


def _unlink(paths: Any) -> None:
    for path in paths:
        path.unlink()


def _span(ids: list[int]) -> str:
    return str(ids[0]) if len(ids) == 1 else f"{ids[0]}-{ids[-1]}"


def _times(table: pa.Table) -> dict[str, Any]:
    """The source's commit time (epoch s) of the batch's last change, and of the last change of
    each table it touched: how far behind the source the current state is, per table."""
    if not table.num_rows:
        return {}
    top = pc.max(pc.cast(table.column("ts"), pa.int64())).as_py()  # microseconds
    return {"source_time": top / 1e6 if top is not None else None, "tables": last_change_times(table)}


def last_applied(target_dir: str | Path | LakePath) -> dict[str, Any] | None:
    """The record of the last micro-batch applied to the current state (``source_time``: the
    source's commit time of its last change), or None."""
    ids = applied_batch_ids(target_dir)
    if not ids:
        return None
    return json.loads((lake_path(target_dir) / "_pycanal" / "applied" / f"{ids[-1]:020d}.json").read_text())


def applied_batch_ids(target_dir: str | Path | LakePath) -> list[int]:
    """The micro-batches applied to the current-state tables of ``target_dir`` whose records are
    kept (the last one, and those after the change log's last fold), in order."""
    return batch_ids(lake_path(target_dir) / "_pycanal" / "applied")


def _summary(target_dir: str | Path | LakePath) -> dict[str, Any]:
    try:
        return json.loads((lake_path(target_dir) / "_pycanal" / "tables.json").read_text())
    except FileNotFoundError:
        return {"through": -1, "tables": {}}


def table_times(target_dir: str | Path | LakePath) -> dict[str, float]:
    """Per ``database.table``: the source's commit time (epoch s) of the last change applied to
    it (from the summary of the folded applied records and the applied records after it)."""
    target_dir = lake_path(target_dir)
    applied = target_dir / "_pycanal" / "applied"
    for _ in range(100):
        ids = applied_batch_ids(target_dir)  # before the summary: a fold deletes records after it
        summary = _summary(target_dir)
        out = dict(summary["tables"])
        try:
            for b in ids:
                if b > summary["through"]:
                    out.update(json.loads((applied / f"{b:020d}.json").read_text()).get("tables", {}))
        except FileNotFoundError:
            continue
        return out
    raise RuntimeError(f"{applied}: the applied records keep being folded under the reader")


def apply_changes(batch: Any, batch_id: int, target_dir: str | Path | LakePath, **options: Any) -> None:
    """Apply one micro-batch of change rows to ``target_dir`` exactly once (``ChangeApplier``'s
    options). For a stream, prefer one ``ChangeApplier``: it keeps the schema model between batches."""
    ChangeApplier(target_dir, **options)(batch, batch_id)
