"""A daemon thread that calls a function every ``period`` seconds until stopped: how the mixed
meta and position managers persist what changed in memory (Canal's ``canal.file.flush.period``,
``canal.zookeeper.flush.period``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

__all__ = ["PeriodicFlusher", "WriteBehind"]

K = TypeVar("K")
V = TypeVar("V")

log = logging.getLogger(__name__)


class PeriodicFlusher:
    def __init__(self, name: str, period: float, fn: Callable[[], None]) -> None:
        if period <= 0:
            raise ValueError(f"flush period must be > 0, not {period!r}")
        self.period = period
        self._fn = fn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self._fn()
            except Exception:  # keep flushing; the next period retries
                log.exception("%s: periodic flush failed", self._thread.name)


class WriteBehind(Generic[K, V]):
    """What changed in memory, written to a store every ``period`` seconds and at :meth:`stop`:
    the mixed meta and position managers' persistence (Canal's ``*MixedMetaManager`` and
    ``*MixedLogPositionManager``).

    ``snapshot(key)`` reads a key's value under ``lock`` (the owner's lock; None: nothing to
    write), ``write(key, value)`` stores it outside the lock. A failed write marks its key and the
    ones after it changed again, for the next flush, and raises. ``flushing`` is held for the
    whole of a flush: an owner that must not race one (an unsubscribe) holds it too."""

    def __init__(
        self,
        name: str,
        period: float,
        lock: threading.RLock,
        snapshot: Callable[[K], V | None],
        write: Callable[[K, V], None],
    ) -> None:
        if period <= 0:
            raise ValueError(f"flush period must be > 0, not {period!r}")
        self.name, self.period = name, period
        self._lock, self._snapshot, self._write = lock, snapshot, write
        self._dirty: set[K] = set()
        self.flushing = threading.Lock()
        self._flusher: PeriodicFlusher | None = None

    def changed(self, key: K) -> None:
        with self._lock:
            self._dirty.add(key)

    def forget(self, key: K | None = None) -> None:
        """Drop one key's pending change (an unsubscribed client), or every key's."""
        with self._lock:
            if key is None:
                self._dirty.clear()
            else:
                self._dirty.discard(key)

    def start(self) -> None:
        self._flusher = PeriodicFlusher(self.name, self.period, self.flush)
        self._flusher.start()

    def stop(self) -> None:
        """Stop the thread, then write what changed."""
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        self.flush()

    def flush(self, keys: Iterable[K] | None = None) -> None:
        """Write the changed keys (or ``keys``) now."""
        with self.flushing:
            with self._lock:
                todo = list(self._dirty) if keys is None else list(keys)
                self._dirty.difference_update(todo)
                values = [(k, self._snapshot(k)) for k in todo]
            for i, (key, value) in enumerate(values):
                if value is None:
                    continue
                try:
                    self._write(key, value)
                except BaseException:
                    with self._lock:
                        self._dirty.update(k for k, _ in values[i:])  # retried on the next flush
                    raise
