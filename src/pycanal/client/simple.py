"""``SimpleConnector``: a blocking client of one Canal server, with the semantics of Canal's
``SimpleCanalConnector`` (research/canal.md section 1.12)::

    conn = SimpleConnector("127.0.0.1:11111", "example", "canal", "canal")
    conn.connect()
    conn.subscribe(r"shop\\..*")
    for message in conn.stream(batch_size=1000, timeout=1000):
        handle(message.entries)          # acked when the next message is requested
    conn.disconnect()

* :meth:`~SimpleConnector.connect` does the handshake and authentication (scramble411 of the
  password; ``idle_timeout`` tells the server when to drop an idle connection), then, as
  Canal's client, subscribes again with the last filter and rolls back every outstanding
  batch: after a dropped connection, ``connect()`` restores the subscription and the server
  hands the unacknowledged batches out again.
* :meth:`~SimpleConnector.get_without_ack` / :meth:`~SimpleConnector.get`: ``timeout`` None
  answers at once with what is there, 0 waits for a full batch, > 0 waits at most that long in
  ``unit``; an empty batch has id -1. ``batch_size`` <= 0 means 1000.
* :meth:`~SimpleConnector.ack` and :meth:`~SimpleConnector.rollback` get no answer from the
  server: an error there (e.g. an unknown batch id) is raised by the next request, and the
  server then closes the connection.
* Any error answer or I/O failure closes this side too and raises :class:`CanalClientError`;
  call ``connect()`` again to go on.

Messages keep the entries as received (:attr:`Message.raw_entries`); :attr:`Message.entries`
parses them into ``Entry`` objects on first use.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any, Self

from pycanal.meta.base import DEFAULT_CLIENT_ID
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.server.wire import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    WireError,
    auth_token,
    encode_client_ack,
    encode_client_auth,
    encode_client_rollback,
    encode_get,
    encode_sub,
    encode_unsub,
    packet_type_name,
    parse_body,
    parse_packet,
    unit_ordinal,
)

__all__ = ["CanalClientError", "Connector", "Message", "SimpleConnector"]

log = logging.getLogger(__name__)

_PT = cp.PacketType
_RECV_SIZE = 256 * 1024
_UNIT_SECONDS = (1e-9, 1e-6, 1e-3, 1.0, 60.0, 3600.0, 86400.0)  # wire.TIME_UNITS in seconds
_MAX_INT32 = 2**31 - 1


class CanalClientError(Exception):
    """A failed client call. ``code`` is the server's error code when it answered with one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class Message:
    """One batch: ``id`` (-1 when empty) and its entries, parsed on first use."""

    __slots__ = ("_entries", "id", "raw_entries")

    def __init__(self, id: int, raw_entries: list[bytes]) -> None:
        self.id = id
        self.raw_entries = raw_entries
        self._entries: list[pb.Entry] | None = None

    @property
    def entries(self) -> list[pb.Entry]:
        if self._entries is None:
            parse = pb.Entry.FromString
            self._entries = [parse(raw) for raw in self.raw_entries]
        return self._entries

    def __len__(self) -> int:
        return len(self.raw_entries)

    def __repr__(self) -> str:
        return f"Message(id={self.id}, entries={len(self.raw_entries)})"


def _address(address: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(address, tuple):
        return address[0], int(address[1])
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address must be 'host:port', got {address!r}")
    return host.strip("[]"), int(port)


class Connector:
    """What both connectors (:class:`SimpleConnector`, ``ClusterConnector``) build on their own
    ``connect``/``disconnect``/``get_without_ack``/``ack``/``rollback`` and ``_lock``."""

    _lock: threading.RLock

    def connect(self) -> None:
        raise NotImplementedError

    def disconnect(self) -> None:
        raise NotImplementedError

    def get_without_ack(
        self, batch_size: int = 1000, timeout: float | None = None, unit: str = "ms"
    ) -> Message:
        raise NotImplementedError

    def ack(self, batch_id: int) -> None:
        raise NotImplementedError

    def get(self, batch_size: int = 1000, timeout: float | None = None, unit: str = "ms") -> Message:
        """:meth:`get_without_ack` and :meth:`ack` at once."""
        with self._lock:
            message = self.get_without_ack(batch_size, timeout, unit)
            if message.id != -1:
                self.ack(message.id)
            return message

    def stream(self, batch_size: int = 1000, timeout: float = 1000, unit: str = "ms") -> Iterator[Message]:
        """Non-empty batches, each acked only when the next one is requested, i.e. after the
        caller's loop body finished with it. When the loop ends early (``break``, an exception,
        ``close()``) the unacked batch is rolled back, to be handed out again; wrap the iterator
        in ``contextlib.closing`` to have that happen at once rather than when it is collected.
        ``timeout`` is each GET's long-poll wait; empty answers are not yielded."""
        return stream_messages(self, batch_size, timeout, unit)

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()


class SimpleConnector(Connector):
    """A connection to one Canal server for one destination (see the module notes).

    ``so_timeout`` (seconds) bounds every wait for an answer, on top of a GET's own wait;
    ``idle_timeout`` (seconds) is sent to the server, which closes the connection after that
    long without a request. Thread-safe: one request at a time."""

    def __init__(
        self,
        address: str | tuple[str, int],
        destination: str,
        username: str = "",
        password: str = "",
        so_timeout: float = 60.0,
        idle_timeout: float = 3600.0,
        *,
        client_id: int = DEFAULT_CLIENT_ID,
        rollback_on_connect: bool = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        if not destination:
            raise ValueError("SimpleConnector needs a destination")
        self.address = _address(address)
        self.destination = destination
        self.client_id = client_id
        self.username = username
        self._password = password
        self.so_timeout = so_timeout
        self.idle_timeout = idle_timeout
        self.rollback_on_connect = rollback_on_connect
        self.max_frame_size = max_frame_size
        self._filter: str | None = None  # the last subscription, renewed on connect
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder(max_frame_size)
        self._frames: deque[bytes] = deque()
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        host, port = self.address
        return f"SimpleConnector({host}:{port}, destination={self.destination!r}, client_id={self.client_id})"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def filter(self) -> str | None:
        """The subscription's filter ("" for the instance's own), None when not subscribed."""
        return self._filter

    # ------------------------------------------------------------------ connection
    def connect(self) -> None:
        """Connect and authenticate; subscribe again (last filter) and roll back, as Canal's
        client does on connect. A no-op when connected."""
        with self._lock:
            if self._sock is not None:
                return
            try:
                sock = socket.create_connection(self.address, timeout=self.so_timeout)
            except OSError as exc:
                raise CanalClientError(f"cannot connect to {self._where()}: {exc}") from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._decoder = FrameDecoder(self.max_frame_size)
            self._frames.clear()
            try:
                self._handshake()
                if self._filter is not None:
                    self._subscribe(self._filter)
                if self.rollback_on_connect:
                    self._send(encode_client_rollback(self.destination, str(self.client_id), 0))
            except BaseException:
                self._close()
                raise

    def disconnect(self) -> None:
        """Close the connection; the subscription is kept for the next :meth:`connect`."""
        with self._lock:
            self._close()

    def _handshake(self) -> None:
        packet = self._read_packet(self.so_timeout)
        if packet.type != _PT.HANDSHAKE:
            raise self._error(f"expected HANDSHAKE, got {packet_type_name(packet.type)}")
        if packet.HasField("version") and packet.version != 1:
            raise self._error(f"unsupported protocol version {packet.version}")
        seed = self._body(packet).seeds
        idle_ms = min(_MAX_INT32, max(1, round(self.idle_timeout * 1000)))
        self._send(encode_client_auth(self.username, auth_token(self._password, seed), idle_ms, idle_ms))
        self._expect_ack("authentication")

    # ------------------------------------------------------------------ subscription
    def subscribe(self, filter: str = "") -> None:
        """Subscribe this client id; a non-empty ``filter`` (Canal's table regex) replaces the
        instance's filter on the server."""
        with self._lock:
            self._require()
            self._subscribe(filter)

    def _subscribe(self, filter: str) -> None:
        self._send(encode_sub(self.destination, str(self.client_id), filter))
        self._expect_ack("subscribe")
        self._filter = filter

    def unsubscribe(self) -> None:
        with self._lock:
            self._require()
            self._send(encode_unsub(self.destination, str(self.client_id), self._filter or ""))
            self._expect_ack("unsubscribe")
            self._filter = None

    # ------------------------------------------------------------------ get / ack / rollback
    def get_without_ack(
        self, batch_size: int = 1000, timeout: float | None = None, unit: str = "ms"
    ) -> Message:
        """The next batch after the last one handed out (id -1 when empty); ack or roll it back."""
        size = batch_size if batch_size > 0 else 1000
        if timeout is None or timeout < 0:
            wire_timeout, ordinal, wait = -1, 2, self.so_timeout
        else:
            wire_timeout, ordinal = _wire_timeout(timeout, unit_ordinal(unit))
            # 0 waits for a full batch, however long that takes
            wait = None if wire_timeout == 0 else self.so_timeout + wire_timeout * _UNIT_SECONDS[ordinal]
        with self._lock:
            self._require()
            self._send(encode_get(self.destination, str(self.client_id), size, wire_timeout, ordinal))
            packet = self._read_packet(wait)
            if packet.type == _PT.MESSAGES:
                messages = self._body(packet)
                return Message(messages.batch_id, list(messages.messages))
            raise self._unexpected(packet, "get")

    def ack(self, batch_id: int) -> None:
        """Confirm a batch (the first outstanding one). No answer: an error shows on the next call."""
        with self._lock:
            self._require()
            self._send(encode_client_ack(self.destination, str(self.client_id), batch_id))

    def rollback(self, batch_id: int | None = None) -> None:
        """Have the server hand out again one batch or (None) every outstanding batch.
        No answer: an error shows on the next call."""
        with self._lock:
            self._require()
            self._send(encode_client_rollback(self.destination, str(self.client_id), batch_id or 0))

    # ------------------------------------------------------------------ I/O
    def _where(self) -> str:
        host, port = self.address
        return f"{host}:{port} (destination {self.destination})"

    def _require(self) -> None:
        if self._sock is None:
            raise CanalClientError(f"not connected to {self._where()}: call connect() first")

    def _close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _error(self, message: str, code: int | None = None) -> CanalClientError:
        """The error to raise; the connection is closed, as its state is unknown now."""
        self._close()
        return CanalClientError(f"{message} [{self._where()}]", code)

    def _send(self, frame: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.settimeout(self.so_timeout)
            self._sock.sendall(frame)
        except OSError as exc:
            raise self._error(f"sending failed: {exc}") from exc

    def _read_packet(self, wait: float | None) -> cp.Packet:
        sock = self._sock
        assert sock is not None
        try:
            sock.settimeout(wait)
            while not self._frames:
                data = sock.recv(_RECV_SIZE)
                if not data:
                    self._decoder.check_eof()
                    raise self._error("connection closed by the server")
                self._frames.extend(self._decoder.feed(data))
            packet = parse_packet(self._frames.popleft())
        except TimeoutError as exc:
            raise self._error(f"no answer within {wait:g}s") from exc
        except OSError as exc:
            raise self._error(f"receiving failed: {exc}") from exc
        except WireError as exc:
            raise self._error(f"bad answer: {exc}") from exc
        if packet.HasField("compression") and packet.compression not in (
            cp.COMPRESSIONCOMPATIBLEPROTO2,
            cp.NONE,
        ):
            raise self._error(f"compression {packet.compression} is not supported")
        return packet

    def _body(self, packet: cp.Packet) -> Any:
        try:
            return parse_body(packet)
        except WireError as exc:
            raise self._error(f"bad answer: {exc}") from exc

    def _expect_ack(self, what: str) -> None:
        packet = self._read_packet(self.so_timeout)
        if packet.type != _PT.ACK:
            raise self._unexpected(packet, what)
        ack = self._body(packet)
        if ack.error_code:
            raise self._error(f"{what} failed: {ack.error_message}", ack.error_code)

    def _unexpected(self, packet: cp.Packet, what: str) -> CanalClientError:
        """The error for an answer of the wrong type: an error ACK carries the server's reason."""
        if packet.type == _PT.ACK:
            ack = self._body(packet)
            if ack.error_code:
                return self._error(f"{what} failed: {ack.error_message}", ack.error_code)
        return self._error(f"unexpected {packet_type_name(packet.type)} packet in answer to {what}")


def _wire_timeout(timeout: float, ordinal: int) -> tuple[int, int]:
    """A timeout as Canal's integer count of a ``TimeUnit``. A fraction is sent in
    milliseconds, rounded up: 0.5 s is 500 ms, and a short wait never becomes 0 (block)."""
    if timeout == int(timeout):
        return int(timeout), ordinal
    ms = timeout * _UNIT_SECONDS[ordinal] * 1000
    return max(1, math.ceil(ms - 1e-9)), 2


def stream_messages(connector: Any, batch_size: int, timeout: float, unit: str) -> Iterator[Message]:
    """The ``stream()`` of both connectors: non-empty batches, each acked when the next one is
    requested; the unacked one rolled back when the loop ends early."""
    pending: int | None = None
    try:
        while True:
            message = connector.get_without_ack(batch_size, timeout, unit)
            if message.id == -1:
                continue
            pending = message.id
            yield message
            connector.ack(pending)
            pending = None
    finally:
        if pending is not None and connector.connected:
            try:
                connector.rollback()
            except CanalClientError as exc:  # the server hands it out again after a reconnect
                log.warning("%r: rollback of batch %d failed: %s; it comes again", connector, pending, exc)
