"""The cyclic garbage collector in long-running processes.

A full collection walks every object the collector tracks. In a Spark Python worker that is the
import heap of pyspark, pyarrow, protobuf and pycanal (~100 ms a walk here), and PySpark's daemon
runs ``gc.collect()`` after every task; in the server it is also every event waiting in the store.
Almost none of it ever becomes cyclic garbage: refcounting frees entries and rows.

:func:`settle` freezes what is alive when a process is set up (``gc.freeze``: modules, classes,
the configuration; in a worker, after its first task has imported what tasks use) so later
collections skip it. Frozen objects are still freed by refcounting. :func:`hold_long_lived` also makes full
collections rarer in processes that keep a large, churning heap of acyclic objects (the store).
"""

from __future__ import annotations

import gc
import os

__all__ = ["hold_long_lived", "settle"]

_settled_in: int | None = None  # the pid that froze its heap (a fork inherits the flag, not the work)


def settle() -> None:
    """Freeze the objects alive now, once per process: collections skip them from then on.

    Only objects that stay alive for the process's life belong there (a cycle among them that
    becomes garbage later is not freed), so call it after set-up, before the work starts."""
    global _settled_in
    if _settled_in == os.getpid():
        return
    gc.collect()
    gc.freeze()
    _settled_in = os.getpid()


def hold_long_lived(full_every: int = 100) -> None:
    """Settle, and run a full collection after ``full_every`` collections of the middle generation
    (CPython's default: 10): each walks the whole store, whose objects refcounting frees anyway."""
    settle()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, full_every)
