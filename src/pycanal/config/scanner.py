"""``ConfigScanner``: Canal's auto-scan (``canal.auto.scan``) of ``<conf.dir>/<destination>/``.

A destination is a sub-directory holding ``instance.properties``. Each :meth:`scan` compares the
directories with the previous scan and returns events: ``add`` (a new destination), ``remove`` (its
directory or ``instance.properties`` is gone) and ``reload`` (``instance.properties`` changed: its
mtime or size moved *and* its SHA-256 differs, so a ``touch`` alone does not reload). The first
scan (at construction, or ``initial=False`` to report everything as ``add``) sets the baseline.

``start()`` runs :meth:`scan` every ``interval`` seconds on a daemon thread and passes each event to
``callback``; ``stop()`` ends it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .loader import INSTANCE_PROPERTIES

__all__ = ["ConfigScanner", "ScanEvent"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ScanEvent:
    kind: str  # "add", "remove" or "reload"
    destination: str


@dataclass(frozen=True, slots=True)
class _Stamp:
    mtime_ns: int
    size: int
    digest: str


class ConfigScanner:
    def __init__(
        self,
        conf_dir: str | os.PathLike[str],
        interval: float = 5.0,
        callback: Callable[[ScanEvent], None] | None = None,
        *,
        initial: bool = True,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0, not {interval!r}")
        self.conf_dir = Path(conf_dir)
        self.interval = float(interval)
        self.callback = callback
        self._known: dict[str, _Stamp] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if initial:
            self.scan(notify=False)  # the baseline: reported by neither callback nor events

    @property
    def destinations(self) -> list[str]:
        with self._lock:
            return sorted(self._known)

    def _stamp(self, path: Path, previous: _Stamp | None) -> _Stamp | None:
        try:
            st = path.stat()
            if previous is not None and (st.st_mtime_ns, st.st_size) == (previous.mtime_ns, previous.size):
                return previous
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None
        return _Stamp(st.st_mtime_ns, st.st_size, digest)

    def scan(self, *, notify: bool = True) -> list[ScanEvent]:
        """Compare with the previous scan; return (and pass to ``callback``) the events."""
        with self._lock:
            current: dict[str, _Stamp] = {}
            try:
                entries = sorted(self.conf_dir.iterdir())
            except OSError:
                entries = []
            for entry in entries:
                if not entry.is_dir() or entry.name.startswith("."):
                    continue
                stamp = self._stamp(entry / INSTANCE_PROPERTIES, self._known.get(entry.name))
                if stamp is not None:
                    current[entry.name] = stamp
            events = [ScanEvent("remove", d) for d in sorted(set(self._known) - set(current))]
            for dest, stamp in current.items():
                old = self._known.get(dest)
                if old is None:
                    events.append(ScanEvent("add", dest))
                elif old.digest != stamp.digest:
                    events.append(ScanEvent("reload", dest))
            self._known = current
        if not notify:
            return []
        if self.callback is not None:
            for event in events:
                try:
                    self.callback(event)
                except Exception:
                    log.exception("config scanner callback failed for %s", event)
        return events

    # ------------------------------------------------------------------ background thread
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"pycanal-config-scan:{self.conf_dir}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.scan()
            except Exception:
                log.exception("config scan failed")

    def __enter__(self) -> ConfigScanner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
