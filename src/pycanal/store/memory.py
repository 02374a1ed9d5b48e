"""Canal's ``MemoryEventStoreWithBuffer``: the ring buffer between the sink and the server.

``buffer_size`` slots (a power of 2) and three sequences, all starting at -1: ``put`` (last event
written), ``get`` (last event handed out) and ``ack`` (last event acknowledged); always
``ack <= get <= put`` and ``put - ack <= buffer_size``. Memory counters ``put_mem``, ``get_mem`` and
``ack_mem`` sum the events' sizes (``Event.size``).

* ``try_put`` / ``put``: a put of ``n`` events needs ``put + n - buffer_size <= ack``; in MEMSIZE mode
  also ``put_mem - ack_mem < buffer_size * buffer_mem_unit`` (checked before the put, so a single
  event larger than the whole budget still goes in when the store is empty -- Canal's rule).
  ``put`` blocks while the store is full. A put of more events than ``buffer_size`` can never
  succeed: it raises ``StoreError`` instead of stalling.
* ``try_get`` / ``get``: the batch starts after ``get``. ITEMSIZE: up to ``batch_size`` events.
  MEMSIZE: events are added while the accumulated size is ``<= batch_size * buffer_mem_unit``
  (so a batch holds at least one event and may pass the budget by its last event). With
  ``ddl_isolation`` a DDL is returned alone: a batch stops before a DDL, and a DDL starts a batch
  of one. Blocking ``get`` waits until a full batch is there (ITEMSIZE: ``batch_size`` events;
  MEMSIZE: ``batch_size * buffer_mem_unit`` bytes); ``get(..., timeout=t)`` returns what is there
  after ``t`` seconds. Beyond Canal: it also returns what is there once a ``put`` waits for room,
  since no event can come before an ack frees some. Canal waits out the timeout (forever without
  one) while its parser stands still: with Canal's defaults (MEMSIZE, 16,384 slots, 1 KB units) a
  4,096-unit batch of small entries (sysbench's 1-row transactions, ~200 bytes an entry) fills
  every slot with 3.25 MB of its 4 MB budget, and each such batch waited the whole timeout.
  And it returns once the events not handed out fill an eighth of the store (slots, or bytes in
  MEMSIZE mode): waiting on, the batch would take the whole store and the parser would stand
  still until the client acked it; at an eighth, the client takes this batch while the parser
  fills the rest (half and a quarter were slower on bench/oltp.py: the client waited longer for
  its first batch; a 32nd no faster than half, by more gets and acks). And once the
  producer says it is idle (:meth:`idle`: the parser has read all the source sent and put it
  here) until its next put: no more is coming to fill the batch, so waiting only delays what is
  there (at the end of a backlog, the timeout's whole length).
* The batch's ``PositionRange``: ``start``/``end`` are its first and last events' positions;
  ``ack`` is the position of its last TRANSACTIONEND, TRANSACTIONBEGIN (only without GTID) or DDL
  event (Canal's ack point, the client cursor), or ``None``; ``end_seq`` is the ring sequence of
  the last event, for an exact ``ack``.
* ``ack(position, seq=None)`` (Canal's ``cleanUntil``): walks from ``ack + 1`` to ``get`` for the
  event at ``position`` (and at sequence ``seq`` if given), moves ``ack`` there and frees the
  slots up to it. The store keeps the acknowledged event's position data (a stub) for
  ``get_first_position`` / ``get_latest_position``: unlike Canal, which reads it from the ring
  slot, so a put that reuses that slot cannot change the first position. No match raises ``StoreError``.
* ``rollback()``: ``get := ack`` -- every batch handed out and not acknowledged comes again.

Thread-safe: one lock with two conditions (not full / not empty), like Canal's ReentrantLock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..protocol import EntryProtocol_pb2 as pb
from ..protocol.position import LogPosition
from .event import Event

__all__ = [
    "ITEMSIZE",
    "MEMSIZE",
    "Events",
    "MemoryEventStore",
    "PositionRange",
    "StoreConfigError",
    "StoreError",
    "validate",
]

ITEMSIZE = "ITEMSIZE"
MEMSIZE = "MEMSIZE"
INIT_SEQUENCE = -1

KEY_BUFFER_SIZE = "canal.instance.memory.buffer.size"
KEY_MEM_UNIT = "canal.instance.memory.buffer.memunit"
KEY_BATCH_MODE = "canal.instance.memory.batch.mode"
KEY_RAW = "canal.instance.memory.rawEntry"
KEY_DDL_ISOLATION = "canal.instance.get.ddl.isolation"
KEY_TRANSACTION_SIZE = "canal.instance.transaction.size"

_BEGIN = pb.TRANSACTIONBEGIN
_END = pb.TRANSACTIONEND


class StoreError(Exception):
    """A store operation that cannot succeed (Canal's ``CanalStoreException``)."""


class StoreConfigError(StoreError, ValueError):
    """A bad store setting; the message names the configuration key(s)."""


@dataclass(slots=True)
class PositionRange:
    start: LogPosition
    end: LogPosition
    ack: LogPosition | None = None
    end_seq: int = INIT_SEQUENCE


@dataclass(slots=True)
class Events:
    """A batch returned by ``get`` (Canal's ``Events<Event>``); empty when nothing was there."""

    events: list[Event] = field(default_factory=list)
    position_range: PositionRange | None = None
    memsize: int = 0

    def __len__(self) -> int:
        return len(self.events)

    def __bool__(self) -> bool:
        return bool(self.events)

    def __iter__(self):
        return iter(self.events)


def validate(
    transaction_size: int, buffer_size: int, *, buffer_mem_unit: int = 1024, batch_mode: str = MEMSIZE
) -> None:
    """Check a store configuration; raise ``StoreConfigError`` naming the key(s) at fault.

    A transaction buffer larger than the store (``canal.instance.transaction.size`` >
    ``canal.instance.memory.buffer.size``) would stall Canal silently: its flush can never fit.
    """
    if not isinstance(buffer_size, int) or buffer_size <= 0 or buffer_size & (buffer_size - 1):
        raise StoreConfigError(f"{KEY_BUFFER_SIZE} must be a positive power of 2, got {buffer_size!r}")
    if not isinstance(buffer_mem_unit, int) or buffer_mem_unit <= 0:
        raise StoreConfigError(f"{KEY_MEM_UNIT} must be a positive integer, got {buffer_mem_unit!r}")
    if batch_mode not in (ITEMSIZE, MEMSIZE):
        raise StoreConfigError(f"{KEY_BATCH_MODE} must be ITEMSIZE or MEMSIZE, got {batch_mode!r}")
    if transaction_size is not None:
        if not isinstance(transaction_size, int) or transaction_size <= 0:
            raise StoreConfigError(
                f"{KEY_TRANSACTION_SIZE} must be a positive integer, got {transaction_size!r}"
            )
        if transaction_size > buffer_size:
            raise StoreConfigError(
                f"{KEY_TRANSACTION_SIZE}={transaction_size} is larger than "
                f"{KEY_BUFFER_SIZE}={buffer_size}: a full transaction buffer could never be put "
                f"into the store; make {KEY_TRANSACTION_SIZE} <= {KEY_BUFFER_SIZE}"
            )


def _parse_bool(key: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off", ""):
        return False
    raise StoreConfigError(f"{key} must be true or false, got {value!r}")


def _parse_int(key: str, value: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise StoreConfigError(f"{key} must be an integer, got {value!r}") from None


class MemoryEventStore:
    """Canal's ``MemoryEventStoreWithBuffer`` (see the module notes)."""

    def __init__(
        self,
        buffer_size: int = 16384,
        buffer_mem_unit: int = 1024,
        batch_mode: str = ITEMSIZE,
        ddl_isolation: bool = False,
        raw: bool = True,
    ) -> None:
        batch_mode = str(batch_mode).upper()
        validate(None, buffer_size, buffer_mem_unit=buffer_mem_unit, batch_mode=batch_mode)  # type: ignore[arg-type]
        self.buffer_size = buffer_size
        self.buffer_mem_unit = buffer_mem_unit
        self.batch_mode = batch_mode
        self.mem_size_mode = batch_mode == MEMSIZE
        self.ddl_isolation = ddl_isolation
        self.raw = raw
        self._mask = buffer_size - 1
        self._mem_limit = buffer_size * buffer_mem_unit
        self._slots: list[Event | None] = [None] * buffer_size
        # Beside each slot, ``put_mem`` and ``put_rows`` once its event was put: a get's and an
        # ack's sums are two lookups, not a walk over the batch (~95 ns an event each).
        self._cum_mem = [0] * buffer_size
        self._cum_rows = [0] * buffer_size
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._running = True
        self.put_seq = self.get_seq = self.ack_seq = INIT_SEQUENCE
        self.put_mem = self.get_mem = self.ack_mem = 0
        self._puts_waiting = 0  # puts waiting for room: a get's batch cannot grow before an ack
        self._idle = False  # the producer has put all it has for now (:meth:`idle`)
        # Rows (ROWDATA ``rowsCount``) put, handed out and acknowledged; and the execute time (ms)
        # of the last event put / handed out / acknowledged: Canal's put/get/ack rows and delays.
        self.put_rows = self.get_rows = self.ack_rows = 0
        self.put_time = self.get_time = self.ack_time = 0
        # The last acknowledged event, position data only: the slot itself may be reused by a put
        # (``put + n - buffer_size <= ack`` lets a put overwrite the ack slot).
        self._ack_event: Event | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MemoryEventStore:
        """A store from Canal keys (``canal.instance.memory.*``, ``canal.instance.get.ddl.isolation``),
        validated against ``canal.instance.transaction.size`` when present. Canal's
        canal.properties defaults: 16384 slots, 1024-byte unit, MEMSIZE, raw entries."""
        size = _parse_int(KEY_BUFFER_SIZE, props.get(KEY_BUFFER_SIZE, "16384"))
        unit = _parse_int(KEY_MEM_UNIT, props.get(KEY_MEM_UNIT, "1024"))
        mode = str(props.get(KEY_BATCH_MODE, MEMSIZE)).strip().upper()
        raw = _parse_bool(KEY_RAW, props.get(KEY_RAW, "true"))
        iso = _parse_bool(KEY_DDL_ISOLATION, props.get(KEY_DDL_ISOLATION, "false"))
        txn = props.get(KEY_TRANSACTION_SIZE)
        validate(
            None if txn is None else _parse_int(KEY_TRANSACTION_SIZE, txn),
            size,
            buffer_mem_unit=unit,
            batch_mode=mode,
        )
        return cls(size, unit, mode, iso, raw)

    def validate(self, transaction_size: int) -> None:
        """Raise ``StoreConfigError`` if a transaction buffer of that size cannot fit this store."""
        validate(
            transaction_size,
            self.buffer_size,
            buffer_mem_unit=self.buffer_mem_unit,
            batch_mode=self.batch_mode,
        )

    def new_event(self, entry: Event | pb.Entry | bytes, identity=None) -> Event:
        """An ``Event`` in this store's representation (raw bytes or protobuf entry); a raw record
        (``RawEntryConverter.records``) is taken as it is in raw mode."""
        if isinstance(entry, Event):
            if self.raw and entry.raw is not None:
                if identity is not None:
                    entry.identity = identity
                return entry
            return Event.from_entry(entry.entry, identity, raw=self.raw)  # type: ignore[arg-type]
        if isinstance(entry, (bytes, bytearray, memoryview)):
            return Event.from_raw(bytes(entry), identity)
        return Event.from_entry(entry, identity, raw=self.raw)

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        """Stop the store: blocked ``put``/``get`` calls raise ``StoreError``; later calls too."""
        with self._lock:
            self._running = False
            self._not_full.notify_all()
            self._not_empty.notify_all()

    def clean_all(self) -> None:
        """Drop everything and reset the sequences (Canal's ``cleanAll``)."""
        with self._lock:
            self._slots = [None] * self.buffer_size
            self.put_seq = self.get_seq = self.ack_seq = INIT_SEQUENCE
            self.put_mem = self.get_mem = self.ack_mem = 0
            self._ack_event = None
            self._not_full.notify_all()

    def _check_running(self) -> None:
        if not self._running:
            raise StoreError("the event store is stopped")

    # ------------------------------------------------------------------ put
    def _has_room(self, n: int) -> bool:
        if self.put_seq + n - self.buffer_size > self.ack_seq:
            return False
        return not self.mem_size_mode or self.put_mem - self.ack_mem < self._mem_limit

    def _prepare(self, events: Event | Sequence[Event]) -> Sequence[Event]:
        if isinstance(events, Event):
            return (events,)
        if len(events) > self.buffer_size:
            raise StoreError(
                f"cannot put {len(events)} events at once into a store of {self.buffer_size} slots "
                f"({KEY_BUFFER_SIZE}); check {KEY_TRANSACTION_SIZE} <= {KEY_BUFFER_SIZE}"
            )
        return events

    def _do_put(self, events: Sequence[Event]) -> None:
        slots, cum_mem, cum_rows, mask = self._slots, self._cum_mem, self._cum_rows, self._mask
        seq = self.put_seq
        mem, rows = self.put_mem, self.put_rows
        for ev in events:
            seq += 1
            i = seq & mask
            slots[i] = ev
            mem += ev.size
            rows += ev.rows
            cum_mem[i] = mem
            cum_rows[i] = rows
        self.put_seq = seq
        self.put_mem = mem
        self.put_rows = rows
        self.put_time = events[-1].execute_time
        self._idle = False
        self._not_empty.notify_all()

    def try_put(self, events: Event | Sequence[Event]) -> bool:
        """Put without waiting; ``False`` if the store has no room."""
        events = self._prepare(events)
        if not events:
            return True
        with self._lock:
            self._check_running()
            if not self._has_room(len(events)):
                return False
            self._do_put(events)
            return True

    def put(self, events: Event | Sequence[Event], timeout: float | None = None) -> bool:
        """Put, waiting while the store is full (at most ``timeout`` seconds; ``False`` then)."""
        events = self._prepare(events)
        if not events:
            return True
        n = len(events)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                self._check_running()
                if self._has_room(n):
                    self._do_put(events)
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._puts_waiting += 1
                self._not_empty.notify_all()  # a get waiting for more takes what is there
                try:
                    self._not_full.wait(left)
                finally:
                    self._puts_waiting -= 1

    def idle(self) -> None:
        """The producer has put all it has for now (the parser read everything the source sent):
        a get waiting for a fuller batch takes what is there. The next put ends it."""
        with self._lock:
            self._idle = True
            if self.get_seq < self.put_seq:
                self._not_empty.notify_all()

    # ------------------------------------------------------------------ get
    def _first_next(self, start: LogPosition | None) -> int:
        current = self.get_seq
        # Canal: an ``included`` start re-includes the event at the get sequence. pycanal only does
        # so for an event handed out and not acknowledged (the ack point keeps no payload).
        if start is not None and start.postion.included and current > self.ack_seq:
            return current
        return current + 1

    def _has_batch(self, start: LogPosition | None, batch_size: int) -> bool:
        nxt = self._first_next(start)
        top = self.put_seq
        if self.get_seq >= top:
            return False
        if not self.mem_size_mode:
            return nxt + batch_size - 1 <= top
        # the bytes not yet handed out: O(1) from the counters
        mem = self.put_mem - self.get_mem
        if nxt == self.get_seq:
            mem += self._slots[nxt & self._mask].size  # type: ignore[union-attr]
        return mem >= batch_size * self.buffer_mem_unit

    def _eighth_waits(self) -> bool:
        """Events not handed out fill an eighth of the store (its slots, or in MEMSIZE mode its
        bytes)."""
        waiting = self.put_seq - self.get_seq
        if waiting <= 0:  # (a store of under eight slots or bytes would pass when empty)
            return False
        if waiting >= self.buffer_size >> 3:
            return True
        return self.mem_size_mode and self.put_mem - self.get_mem >= self._mem_limit >> 3

    def _do_get(self, start: LogPosition | None, batch_size: int) -> Events:
        top = self.put_seq
        nxt = self._first_next(start)
        if nxt > top:
            return Events()
        slots, cum_mem, mask = self._slots, self._cum_mem, self._mask
        first = nxt & mask
        mem0 = cum_mem[first] - slots[first].size  # type: ignore[union-attr]  # put_mem before it
        # ITEMSIZE: up to batch_size events; MEMSIZE: events while the sum before each is within
        # the budget (the first always; the last may pass it): the first event whose running
        # sum passes the budget ends the batch, found by bisection over the running sums.
        if self.mem_size_mode:
            budget = mem0 + batch_size * self.buffer_mem_unit
            if cum_mem[top & mask] <= budget:
                end = top
            else:
                lo, end = nxt, top
                while lo < end:
                    mid = (lo + end) >> 1
                    if cum_mem[mid & mask] > budget:
                        end = mid
                    else:
                        lo = mid + 1
        else:
            end = min(nxt + batch_size - 1, top)
        if self.ddl_isolation:  # a DDL is a batch of its own
            if not slots[first].is_ddl:  # type: ignore[union-attr]
                for seq in range(nxt + 1, end + 1):
                    if slots[seq & mask].is_ddl:  # type: ignore[union-attr]
                        end = seq - 1
                        break
            else:
                end = nxt
        last = end & mask
        out: list[Event] = slots[first : last + 1] if first <= last else slots[first:] + slots[: last + 1]  # type: ignore[assignment]
        mem = cum_mem[last] - mem0
        rows = self._cum_rows[last] - self._cum_rows[first] + out[0].rows
        ack = None
        for ev in reversed(out):
            et = ev.entry_type
            if et == _END or (et == _BEGIN and not ev.gtid) or ev.is_ddl:
                ack = ev.log_position()
                break
        rng = PositionRange(out[0].log_position(), out[-1].log_position(), ack, end)
        self.get_seq = end
        self.get_mem += mem
        self.get_rows += rows
        self.get_time = out[-1].execute_time
        return Events(out, rng, mem)

    def try_get(self, start: LogPosition | None = None, batch_size: int = 1000) -> Events:
        """What is there now, up to one batch (possibly empty)."""
        if batch_size <= 0:
            raise StoreError(f"batch_size must be positive, got {batch_size}")
        with self._lock:
            self._check_running()
            return self._do_get(start, batch_size)

    def get(
        self, start: LogPosition | None = None, batch_size: int = 1000, timeout: float | None = None
    ) -> Events:
        """Wait for a full batch, or for a put to wait for room; with ``timeout`` (seconds) return
        what is there when it expires."""
        if batch_size <= 0:
            raise StoreError(f"batch_size must be positive, got {batch_size}")
        if timeout is None and not self.mem_size_mode and batch_size > self.buffer_size:
            raise StoreError(
                f"a blocking get of batch_size={batch_size} can never be filled by a store of "
                f"{self.buffer_size} slots ({KEY_BUFFER_SIZE}); use a timeout or a smaller batch"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                self._check_running()
                if (
                    self._has_batch(start, batch_size)
                    or ((self._puts_waiting or self._idle) and self.get_seq < self.put_seq)
                    or self._eighth_waits()
                ):
                    break
                if deadline is None:
                    self._not_empty.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._not_empty.wait(left)
            return self._do_get(start, batch_size)

    # ------------------------------------------------------------------ ack / rollback
    def ack(self, position: LogPosition | None, seq: int | None = None) -> None:
        """Acknowledge up to the event at ``position`` (and sequence ``seq`` when given; with
        ``position=None`` the sequence alone decides) and free everything before it."""
        if position is None and seq is None:
            raise StoreError("ack needs a position or a sequence")
        with self._lock:
            start = self.ack_seq
            top = self.get_seq
            slots, mask = self._slots, self._mask
            target = -1
            if seq is not None and seq >= 0:
                if start < seq <= top and (position is None or slots[seq & mask].matches(position)):  # type: ignore[union-attr]
                    target = seq
            else:
                for s in range(start + 1, top + 1):
                    if slots[s & mask].matches(position):  # type: ignore[union-attr,arg-type]
                        target = s
                        break
            if target < 0:
                raise StoreError(f"no match ack position {position} (seq {seq}); ack={start} get={top}")
            first, last = (start + 1) & mask, target & mask
            self._ack_event = slots[last].stub()  # type: ignore[union-attr]
            if first <= last:  # free the slots (slice assignments: no walk)
                slots[first : last + 1] = [None] * (last + 1 - first)
            else:
                slots[first:] = [None] * (self.buffer_size - first)
                slots[: last + 1] = [None] * (last + 1)
            self.ack_seq = target
            self.ack_mem = self._cum_mem[last]
            self.ack_rows = self._cum_rows[last]
            self.ack_time = self._ack_event.execute_time  # type: ignore[union-attr]
            self._not_full.notify_all()

    clean_until = ack

    def rollback(self) -> None:
        """Hand out again everything not acknowledged (``get := ack``)."""
        with self._lock:
            self.get_seq = self.ack_seq
            self.get_mem = self.ack_mem
            self.get_rows = self.ack_rows

    # ------------------------------------------------------------------ positions
    def get_first_position(self) -> LogPosition | None:
        """Where a new subscriber starts: the first event (``included=True``) if nothing was
        acknowledged, else the last acknowledged event (``included=False``); ``None`` if empty."""
        with self._lock:
            first = self.ack_seq
            if first == INIT_SEQUENCE:
                if first < self.put_seq:
                    return self._slots[0].log_position(True)  # type: ignore[union-attr]
                return None
            return self._ack_event.log_position(False)  # type: ignore[union-attr]

    def get_latest_position(self) -> LogPosition | None:
        """The last event put: ``included=True`` while it is not acknowledged, else ``False``."""
        with self._lock:
            latest = self.put_seq
            if latest == INIT_SEQUENCE:
                return None
            if latest == self.ack_seq:
                return self._ack_event.log_position(False)  # type: ignore[union-attr]
            return self._slots[latest & self._mask].log_position(True)  # type: ignore[union-attr]

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "put_seq": self.put_seq,
                "get_seq": self.get_seq,
                "ack_seq": self.ack_seq,
                "put_mem": self.put_mem,
                "get_mem": self.get_mem,
                "ack_mem": self.ack_mem,
                "put_rows": self.put_rows,
                "get_rows": self.get_rows,
                "ack_rows": self.ack_rows,
                "put_time": self.put_time,
                "get_time": self.get_time,
                "ack_time": self.ack_time,
            }

    def __len__(self) -> int:
        """Events stored and not acknowledged."""
        return self.put_seq - self.ack_seq
