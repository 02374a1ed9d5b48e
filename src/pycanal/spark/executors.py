"""The current-state tables written by Spark executors (``ChangeApplier(apply_on="executors")``).

Between two DDL statements a micro-batch's tables are disjoint writes (``current_state``):
the driver numbers their steps as always, then hands each table's rows and schema to a Spark
job whose tasks write them (copy-on-write or MERGE, the table's upkeep) in the executors'
Python workers, and journals the steps once every task is done. The driver keeps the order,
the DDL, the journal and the records; the executors do the reading, building and writing that
grow with the tables, so a cluster's cores share them and the driver's GIL is spared.

Exactly once is the driver's: every write carries its step's Delta transaction id, so a task
run twice (a retry, a replay after a crash) finds its step committed and writes nothing. An
error in a task (a bad row, a table that does not match its schema) comes back as that table's
result rather than failing the task, so Spark does not retry what would fail again, and the
driver raises it as it would have raised it itself.

An executor keeps the tables it opened and the rows of the files it wrote (``cow.CONTENTS``)
between jobs, so a table it writes again is not read back; a write into a table another
executor has committed to since fails its put-if-absent and is redone over the table read
again. Any DDL starts a new ``epoch``: executors then drop what they kept, as the driver does.
Upkeep is counted per executor (a table written by two executors is compacted less often).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pycanal.parse.meta import SchemaModel

from .current_state import CurrentState, Failure, MergeContext, MergeWork
from .maintenance import Maintenance

__all__ = ["run_in_executors"]


def run_in_executors(
    spark: Any, context: MergeContext, works: list[MergeWork]
) -> tuple[list[Failure | None], dict[str, int]]:
    """Write ``works`` in Spark tasks (as many as the cluster's default parallelism, tables
    spread by their rows): the failure of each work (None: written), in the order of ``works``,
    and the upkeep the tasks did (compactions, checkpoints, vacuums)."""
    slots = max(1, min(len(works), spark.sparkContext.defaultParallelism))
    groups: list[list[MergeWork]] = [[] for _ in range(slots)]
    loads = [0] * slots
    for w in sorted(works, key=lambda w: -w.rows.num_rows):
        i = loads.index(min(loads))
        groups[i].append(w)
        loads[i] += w.rows.num_rows + 100  # a table's write costs something whatever its rows
    rdd = spark.sparkContext.parallelize(groups, slots)
    parts = rdd.mapPartitions(lambda part: [_write_all(context, [w for g in part for w in g])]).collect()
    errors: dict[int, Failure | None] = {}
    done: dict[str, int] = {}
    for part_errors, part_done in parts:
        errors.update(part_errors)
        for k, v in part_done.items():
            done[k] = done.get(k, 0) + v
    return [errors[w.step] for w in works], done


# ---------------------------------------------------------------------- in the executor
_kept: dict[str, Any] = {"epoch": None, "tables": {}, "maintenance": {}}
_kept_lock = threading.Lock()


def _write_all(
    context: MergeContext, works: list[MergeWork]
) -> tuple[dict[int, Failure | None], dict[str, int]]:
    with _kept_lock:
        if _kept["epoch"] != context.epoch:
            _kept.update(epoch=context.epoch, tables={}, maintenance={})
        tables = _kept["tables"]
        maintenance = None
        if context.maintenance is not None:
            key = tuple(sorted(context.maintenance.items()))
            maintenance = _kept["maintenance"].get(key)
            if maintenance is None:
                maintenance = _kept["maintenance"][key] = Maintenance(**context.maintenance)
    model = SchemaModel(lower_case_table_names=context.lower_case_table_names)
    for w in works:
        model.put_table(w.model)
    state = CurrentState(
        context.root, context.batch_id, model, zero_dates=context.zero_dates, app_id=context.app_id,
        tables=tables, maintenance=maintenance,
    )  # fmt: skip

    def write(w: MergeWork) -> Failure | None:
        try:
            state.write_rows(w.database, w.table, w.rows, w.step)
        except Exception as exc:  # noqa: BLE001 - the driver raises it, in step order
            return type(exc).__name__, str(exc)
        return None

    before = dict(maintenance.done) if maintenance is not None else {}
    if context.threads <= 1 or len(works) <= 1:
        errors = [write(w) for w in works]
    else:
        with ThreadPoolExecutor(min(context.threads, len(works)), thread_name_prefix="pycanal-merge") as pool:
            errors = list(pool.map(write, works))
    done = {k: v - before[k] for k, v in maintenance.done.items()} if maintenance is not None else {}
    return {w.step: e for w, e in zip(works, errors, strict=True)}, done
