"""``RunningMonitor``: competing for Canal's ephemeral running node, with fencing.

Canal's ``ServerRunningMonitor`` / ``ClientRunningMonitor`` elect the active server (client) with an
ephemeral znode: whoever creates it is active and stays so until its ZooKeeper session ends. That
alone lets two processes act at once: a process that lost its connection, or was frozen (GC,
SIGSTOP, a VM pause), keeps acting until it *notices*, while ZooKeeper has already expired its
session and a standby has taken over (Canal issues #464, #2859). pycanal adds three guards:

1. **Lease.** A process may act only while it holds a lease: ``time.monotonic()`` before
   ``s + session_timeout * LEASE_FRACTION``, where ``s`` is when it *sent* the last ZooKeeper
   request that came back proving it still owns the node (a heartbeat thread sends one every
   ``session_timeout * HEARTBEAT_FRACTION``). ZooKeeper cannot expire that session before
   ``s + session_timeout`` (the server received the request after ``s``; expiry is counted from
   the last request and rounded up), and nobody can take over before the session is expired. So
   whatever is checked under the lease happens before any successor starts, with half a session
   timeout to spare. The monotonic clock keeps counting while a process is frozen, so a process
   resumed after SIGSTOP finds its lease gone before any of its threads can act: every action
   (:meth:`RunningMonitor.check`, :attr:`RunningMonitor.is_active`) tests the lease itself rather
   than waiting for a thread to notice.
2. **Connection loss stops at once.** When kazoo reports SUSPENDED (no answer for 2/3 of the
   session timeout) or LOST, the lease is voided and ``on_stop`` runs, well before the session
   timeout lets another process take over. On reconnection within the session the node is still
   ours and the process becomes active again at once (with a new epoch); after an expiry it
   competes again.
3. **Epoch** (when ``epoch_path`` is given). Taking the node over is one ZooKeeper transaction:
   create the running node *and* bump the version of a persistent epoch node. The version is the
   fencing token: writes on behalf of the active process are transactions that first check it
   (:mod:`pycanal.ha.fence`), so a deposed process that resumes late cannot write anything, not
   even a write it had checked its lease for just before it froze. A takeover also re-reads the
   state from ZooKeeper *after* the bump, so it sees every write of its predecessor.

Canal's takeover rule is kept: a process that was the last active one (or that starts) grabs a free
node at once; the others wait ``delay`` seconds (Canal: 5 s), which lets a server that only lost
its connection briefly take its destination back without a switch.

A single controller thread makes every decision and runs the callbacks (``on_start`` when the
node is ours, ``on_stop`` when we stop holding it or can no longer be sure we do); ZooKeeper
watches and state changes only wake it. The session timeout is the one the kazoo client asked
for; a ZooKeeper server whose ``maxSessionTimeout`` is lower shortens sessions behind the lease's
back, so keep it at least as large.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat

from pycanal.errors import CanalServerError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = [
    "HEARTBEAT_FRACTION",
    "LEASE_FRACTION",
    "FencedError",
    "NotActiveError",
    "RunningMonitor",
    "session_timeout_of",
    "transaction_error",
]

log = logging.getLogger(__name__)

LEASE_FRACTION = 0.5  # of the session timeout: how long a confirmed ownership may be acted upon
HEARTBEAT_FRACTION = 1 / 6  # of the session timeout: how often ownership is confirmed
RETRY_INTERVAL = 0.5  # seconds before the controller retries after a ZooKeeper error


# Ownership is recognised by the ZooKeeper session, so two monitors of one node must not share a
# kazoo client: the running paths competed for, per client.
_competing: weakref.WeakKeyDictionary[KazooClient, set[str]] = weakref.WeakKeyDictionary()
_competing_lock = threading.Lock()


class NotActiveError(CanalServerError):
    """This process does not (or can no longer be sure it does) hold the running node."""


class FencedError(NotActiveError):
    """A write was refused because another process took over since this one was active."""


def session_timeout_of(zk: KazooClient) -> float:
    """The session timeout (seconds) the kazoo client asked for (kazoo keeps no negotiated one)."""
    return zk._session_timeout / 1000.0  # noqa: SLF001 - kazoo's only record of it


def transaction_error(results: list[Any]) -> Exception | None:
    """The error that failed a kazoo transaction (the others are rolled-back markers), or None."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return result
    return None


class RunningMonitor:
    """Competes for the ephemeral node ``path`` (see the module docstring).

    Parameters:
        zk: a started ``KazooClient``, shared; the monitor never stops it.
        path: the running node; ``data`` its content while we hold it.
        on_start / on_stop: called from the controller thread when this process becomes active /
            stops being active. Exceptions are logged; a failing ``on_start`` gives the node up
            and competes again only after ``max(2 * delay, session_timeout)``.
        epoch_path: the persistent epoch node bumped by every takeover (None: no epoch);
            ``epoch_data(epoch)`` its content.
        delay: seconds a standby waits before taking a node whose holder was someone else.
        session_timeout: overrides :func:`session_timeout_of` (seconds).
    """

    def __init__(
        self,
        zk: KazooClient,
        path: str,
        data: bytes,
        on_start: Callable[[], object],
        on_stop: Callable[[], object],
        *,
        epoch_path: str | None = None,
        epoch_data: Callable[[int], bytes] | None = None,
        delay: float = 5.0,
        session_timeout: float | None = None,
        name: str | None = None,
    ) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, not {delay!r}")
        self.zk = zk
        self.path = path
        self.data = data
        self.on_start = on_start
        self.on_stop = on_stop
        self.epoch_path = epoch_path
        self._epoch_data = epoch_data or (lambda epoch: str(epoch).encode())
        self.delay = float(delay)
        self.session_timeout = float(session_timeout or session_timeout_of(zk))
        self.lease_time = self.session_timeout * LEASE_FRACTION
        self.heartbeat_interval = self.session_timeout * HEARTBEAT_FRACTION
        self.name = name or path
        self._cond = threading.Condition()
        self._kicked = False
        self._stopping = False
        self._beat_stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._heartbeat: threading.Thread | None = None
        # State below is written by the controller thread (lease: also by the heartbeat thread and
        # the state listener, under _cond).
        self._active = False
        self._epoch: int | None = None
        self._fence_epoch: int | None = None
        self._session: int | None = None
        self._lease_until = 0.0
        self._deposed = False
        self._immediate = True  # grab a free node at once: starting, or we held it last
        self._grab_at: float | None = None
        self._not_before = 0.0  # after a failed on_start: let healthy standbys win
        self._next_wake: float | None = None

    # ------------------------------------------------------------------ public API
    def start(self) -> None:
        """Start competing (returns at once; see :meth:`wait_for_active`)."""
        with self._cond:
            if self._thread is not None:
                raise RuntimeError(f"{self.name}: monitor already started")
            with _competing_lock:
                paths = _competing.setdefault(self.zk, set())
                if self.path in paths:
                    raise RuntimeError(
                        f"{self.name}: another monitor competes for {self.path} with the same kazoo client "
                        "(ownership is the ZooKeeper session: give each competitor its own client)"
                    )
                paths.add(self.path)
            self._stopping = False
            self._beat_stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"pycanal-ha {self.name}", daemon=True)
            self._heartbeat = threading.Thread(
                target=self._beat, name=f"pycanal-ha-heartbeat {self.name}", daemon=True
            )
        self.zk.add_listener(self._on_state)
        self._thread.start()
        self._heartbeat.start()
        self._kick()

    def stop(self) -> None:
        """Stop competing: ``on_stop`` if active, then give the node up (others take over)."""
        with self._cond:
            thread, heartbeat = self._thread, self._heartbeat
            if thread is None:
                return
            if thread is threading.current_thread():
                raise RuntimeError(f"{self.name}: stop() called from on_start/on_stop")
            self._stopping = True
            self._cond.notify_all()
        self._beat_stop.set()
        thread.join()
        if heartbeat is not None:
            heartbeat.join()
        self.zk.remove_listener(self._on_state)
        with _competing_lock:
            _competing.get(self.zk, set()).discard(self.path)
        with self._cond:
            self._thread = self._heartbeat = None

    @property
    def is_active(self) -> bool:
        """Whether this process may act now: active, within its lease, connected in the session
        that holds the node."""
        return (
            self._active
            and time.monotonic() < self._lease_until
            and self.zk.state == KazooState.CONNECTED
            and self._session == self._session_id()
        )

    @property
    def epoch(self) -> int | None:
        """The epoch of the current activation (None while not active)."""
        return self._epoch

    @property
    def fence_epoch(self) -> int | None:
        """The epoch of the last activation: writes on our behalf are checked against it in
        ZooKeeper, so they succeed exactly while nobody has taken over since (None: never)."""
        return self._fence_epoch

    def check(self) -> int | None:
        """Raise :class:`NotActiveError` unless :attr:`is_active`; returns the epoch."""
        epoch = self._epoch
        if not self.is_active:
            raise NotActiveError(
                f"{self.name}: not active here (the running node is held elsewhere or unconfirmed)"
            )
        return epoch

    def wait_for_active(self, timeout: float | None = None) -> bool:
        """Block until this process is active (True) or ``timeout`` seconds passed (False)."""
        with self._cond:
            self._cond.wait_for(lambda: self._active or self._stopping, timeout)
        return self.is_active

    # ------------------------------------------------------------------ wake-ups
    def _kick(self) -> None:
        with self._cond:
            self._kicked = True
            self._cond.notify_all()

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: take the lock only briefly, never wait on ZooKeeper.
        with self._cond:
            if state != KazooState.CONNECTED:
                self._lease_until = 0.0  # nothing may be done on our behalf until ZooKeeper answers
            self._kicked = True
            self._cond.notify_all()

    def _on_watch(self, event: WatchedEvent) -> None:
        self._kick()

    def _session_id(self) -> int | None:
        client_id = self.zk.client_id
        return client_id[0] if client_id else None

    def _wait(self, async_result: Any) -> Any:
        # Never block on a request queued while disconnected: kazoo would hold it until reconnection.
        return async_result.get(timeout=self.session_timeout)

    # ------------------------------------------------------------------ controller thread
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._kicked and not self._stopping:
                    wake = self._next_wake
                    if wake is not None and wake <= time.monotonic():
                        break
                    self._cond.wait(None if wake is None else wake - time.monotonic())
                self._kicked = False
                if self._stopping:
                    break
            self._next_wake = None
            try:
                self._step()
            except Exception as exc:  # noqa: BLE001 - ZooKeeper trouble: try again shortly
                log.warning("%s: %r; retrying", self.name, exc)
                self._next_wake = time.monotonic() + RETRY_INTERVAL
        self._shutdown()

    def _step(self) -> None:
        if self._active:
            reason = self._lost_reason()
            if reason is None:
                self._next_wake = self._lease_until
                return
            self._deactivate(reason)
        if self.zk.state != KazooState.CONNECTED:
            return  # the state listener wakes us on reconnection
        self._compete()

    def _lost_reason(self) -> str | None:
        if self._deposed:
            return "the running node is no longer ours"
        if self.zk.state != KazooState.CONNECTED:
            return f"ZooKeeper connection {str(self.zk.state).lower()}"
        if time.monotonic() >= self._lease_until:
            return "lease expired (no ZooKeeper confirmation within the lease)"
        return None

    def _compete(self) -> None:
        stat = self._wait(self.zk.exists_async(self.path, watch=self._on_watch))
        now = time.monotonic()
        if stat is not None:
            self._grab_at = None
            if stat.ephemeralOwner == self._session_id():
                # Ours from before a connection loss within the session: nobody can have taken
                # over, so become active again (with a new epoch).
                self._take(own=stat)
            else:
                self._immediate = False
            return
        if self._grab_at is None:
            self._grab_at = max(now if self._immediate else now + self.delay, self._not_before)
        if now < self._grab_at:
            self._next_wake = self._grab_at
            return
        self._take()

    def _take(self, own: ZnodeStat | None = None) -> None:
        sent = time.monotonic()
        txn = self.zk.transaction()
        if own is None:
            txn.create(self.path, self.data, ephemeral=True)
        else:
            txn.check(self.path, own.version)
        epoch = 0
        if self.epoch_path is not None:
            epoch = self._epoch_version() + 1
            txn.set_data(self.epoch_path, self._epoch_data(epoch), version=epoch - 1)
        error = transaction_error(self._wait(txn.commit_async()))
        if isinstance(error, NoNodeError) and own is None:
            self._wait(self.zk.ensure_path_async(self.path.rsplit("/", 1)[0]))
            self._kick()
            return
        if isinstance(error, (NodeExistsError, BadVersionError, NoNodeError)):
            self._kick()  # lost a race: look again
            return
        if error is not None:
            raise error
        self._activate(epoch, sent)

    def _epoch_version(self) -> int:
        assert self.epoch_path is not None
        try:
            _, stat = self._wait(self.zk.get_async(self.epoch_path))
        except NoNodeError:
            try:
                self._wait(self.zk.create_async(self.epoch_path, self._epoch_data(0), makepath=True))
            except NodeExistsError:
                pass
            _, stat = self._wait(self.zk.get_async(self.epoch_path))
        return int(stat.version)

    def _activate(self, epoch: int, sent: float) -> None:
        self._grab_at = None
        with self._cond:
            self._active = True
            self._deposed = False
            self._epoch = self._fence_epoch = epoch
            self._session = self._session_id()
            self._lease_until = sent + self.lease_time
            self._immediate = True
            self._cond.notify_all()
        log.info("%s: active (epoch %d)", self.name, epoch)
        try:
            self.on_start()
        except Exception:  # noqa: BLE001 - give the node to someone who can start
            log.exception("%s: on_start failed; giving the running node up", self.name)
            self._deactivate("on_start failed")
            self._release()
            self._immediate = False
            self._not_before = time.monotonic() + max(2 * self.delay, self.session_timeout)
            return
        self._next_wake = self._lease_until

    def _deactivate(self, reason: str) -> None:
        with self._cond:
            epoch = self._epoch
            self._active = False
            self._epoch = None
            self._lease_until = 0.0
            self._deposed = False
        log.warning("%s: no longer active (epoch %s): %s", self.name, epoch, reason)
        try:
            self.on_stop()
        except Exception:  # noqa: BLE001
            log.exception("%s: on_stop failed", self.name)

    def _release(self) -> None:
        """Delete the running node if this session holds it."""
        if self.zk.state != KazooState.CONNECTED:
            return  # the session (and the node) may be gone; the lease already stopped us
        try:
            _, stat = self._wait(self.zk.get_async(self.path))
            if stat.ephemeralOwner == self._session_id():
                self._wait(self.zk.delete_async(self.path, version=stat.version))
                log.info("%s: released the running node", self.name)
        except NoNodeError:
            pass
        except (KazooException, self.zk.handler.timeout_exception) as exc:
            log.warning("%s: could not release the running node: %r", self.name, exc)

    def _shutdown(self) -> None:
        if self._active:
            self._deactivate("monitor stopped")
        self._release()

    # ------------------------------------------------------------------ heartbeat thread
    def _beat(self) -> None:
        while not self._beat_stop.wait(self.heartbeat_interval):
            with self._cond:
                active, epoch, session = self._active, self._epoch, self._session
            if not active:
                continue
            sent = time.monotonic()
            try:
                # sync first: in an ensemble the read then reflects everything the leader had
                # committed (our session's closing included) after `sent`.
                synced = self.zk.sync_async(self.path)
                exists = self.zk.exists_async(self.path)
                synced.get(timeout=self.lease_time)
                stat = exists.get(timeout=self.lease_time)
            except Exception:  # noqa: BLE001 - no confirmation: the lease runs out by itself
                continue
            with self._cond:
                if not self._active or self._epoch != epoch:
                    continue
                if stat is not None and stat.ephemeralOwner == session:
                    self._lease_until = max(self._lease_until, sent + self.lease_time)
                else:
                    self._deposed = True
                    self._kicked = True
                    self._cond.notify_all()
