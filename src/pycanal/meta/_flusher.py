"""A daemon thread that calls a function every ``period`` seconds until stopped."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

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
                log.exception("periodic meta flush failed")
