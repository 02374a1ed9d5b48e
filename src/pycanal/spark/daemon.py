"""Spark's Python worker daemon with the modules pycanal's reads use imported before it forks
(``spark.python.daemon.module``, set by :func:`pycanal.spark.session.spark_session`).

Spark starts one daemon per executor and forks a worker from it for each task slot; each worker
then imported what its first task used -- pyspark's worker, pyarrow, pandas (pyarrow's first
``pa.array`` of a Python list imports it: 0.33 s of CPU, for a check whether the list is a pandas
object), the source's modules and, for a snapshot chunk, connectorx and the current-state writer.
py-spy of ``bench/snapshot.py`` had those imports at 13% of the workers' samples, about 1.2 s of
CPU a worker. Imported once in the daemon, they are shared by every fork (and frozen from the
collector, ``pycanal.heap``). Only the task workers' daemon preloads (its worker module is
``pyspark.worker``); a daemon for another module (Spark's data source planners) runs as Spark's.
"""

from __future__ import annotations

import sys

__all__ = ["PRELOAD", "preload"]

# What a worker of a pycanal job imports for its tasks, in import order.
PRELOAD = (
    "pyspark.worker",
    "pyarrow",
    "pycanal.spark.canal_source",
    "pycanal.spark.entry_rows",
    "pycanal.spark.stage",
    "pycanal.spark.snapshot_read",
    "pycanal.spark.chunk_files",
)


def preload() -> None:
    """Import ``PRELOAD`` (and pyarrow's pandas check), then freeze the heap. A module that fails
    to import is left to the task that needs it, which then says why."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the daemon serves every task all the same
            print(f"pycanal.spark.daemon: {name} not preloaded: {exc}", file=sys.stderr)
    try:
        import pyarrow as pa

        pa.array([0])  # its pandas check, done once here
    except Exception:  # noqa: BLE001, S110 - as above
        pass
    from pycanal.heap import settle

    settle()


if __name__ == "__main__":
    if sys.argv[1:2] == ["pyspark.worker"]:
        preload()
    from pyspark.daemon import manager

    manager()
