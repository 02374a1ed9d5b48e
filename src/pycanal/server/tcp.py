"""``CanalTcpServer``: Canal's client protocol (port 11111) over a ``CanalServerWithEmbedded``.

::

    tcp = CanalTcpServer(embedded, port=11111, user="canal", passwd=password_hash("secret"))
    tcp.start()        # a background thread runs the event loop; returns once listening
    ...
    tcp.stop()

or ``await tcp.serve()`` inside an asyncio program (until :meth:`CanalTcpServer.stop`).

Per connection, as Canal's Netty pipeline (research/canal.md sections 2.4-2.5):

* the server sends HANDSHAKE with 8 random seed bytes; the first packet must be
  CLIENTAUTHENTICATION (anything else: error 400 and close). A wrong user or password gets
  ``auth failed for user:<u>`` (400) and the connection stays open, as in Canal. An empty
  password is accepted when ``passwd`` is not set (canal-python 0.4 always sends one).
* the auth packet's ``net_read_timeout`` / ``net_write_timeout`` (milliseconds, > 0) replace
  ``idle_timeout``: a connection without a request for that long is closed, and so is one
  whose answer cannot be written for that long.
* SUBSCRIPTION / UNSUBSCRIPTION answer ACK; GET answers MESSAGES (stored raw entries written
  as they are, :func:`pycanal.server.wire.encode_messages`); CLIENTACK and CLIENTROLLBACK get
  no answer. A rollback for a destination whose instance has not started yet is a no-op:
  nothing can be subscribed there (canal-python rolls back before it subscribes).
* errors: 401 when destination or clientId is empty, 402 for an ack of batch 0, 400 for
  everything else. After an error in a request the connection is closed (Canal's
  ``NettyUtils.error``): an ack or rollback has no answer, so its error ACK is read as the
  answer of the client's next request, and closing keeps requests and answers paired. Only
  an unsupported packet type (400) leaves the connection open, as in Canal.
* frames above ``max_frame_size``, truncated frames and undecodable packets end the
  connection (with an error ACK when the stream is still writable).

The embedded server's calls block (a long-poll GET waits for events), so they run on worker
threads and every connection keeps its requests in order while the event loop stays free. The
workers are daemon threads: a GET blocked on an idle store does not keep the process alive.
Logs are one line per event, ``event=... peer=... destination=...``, with the destination also
in the record's ``destination`` attribute; no password, token or hash is ever logged.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import queue
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pycanal.meta import ClientIdentity
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.store import StoreError

from .embedded import CanalServerWithEmbedded
from .wire import (
    DEFAULT_MAX_FRAME_SIZE,
    ERROR_GENERIC,
    ERROR_NO_BATCH_ID,
    ERROR_NO_IDENTITY,
    FrameDecoder,
    WireError,
    check_auth_token,
    encode_ack,
    encode_handshake,
    encode_messages,
    packet_type_name,
    parse_body,
    parse_packet,
    unit_name,
)

__all__ = ["CanalTcpServer"]

log = logging.getLogger(__name__)

_PT = cp.PacketType
_READ_SIZE = 256 * 1024
_CLIENT_ID = re.compile(r"[+-]?[0-9]{1,6}")
_HEX40 = re.compile(r"[0-9A-Fa-f]{40}")
# What the embedded server raises for a bad request (CanalServerError, CanalMetaManagerError and
# CanalInstanceError are RuntimeErrors); anything else is a bug and is logged with its traceback.
_EXPECTED_ERRORS = (RuntimeError, ValueError, LookupError, StoreError)


def _kv(value: object) -> str:
    text = str(value)
    if text and not any(c.isspace() or c in "\"'=" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _log(level: int, event: str, destination: str = "", **fields: object) -> None:
    if not log.isEnabledFor(level):
        return
    line = f"event={event} destination={_kv(destination or '-')}"
    if fields:
        line += " " + " ".join(f"{k}={_kv(v)}" for k, v in fields.items())
    log.log(level, line, extra={"destination": destination or "-"})


class _Refused(Exception):
    """A request answered with an error ACK (and, when ``close``, the end of the connection)."""

    def __init__(self, code: int, message: str, *, close: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.close = close


@dataclass(slots=True)
class _Session:
    peer: str
    seed: bytes
    read_timeout: float
    write_timeout: float
    authenticated: bool = False
    destination: str = ""  # the last one named, for logs and metrics
    packet: str = ""  # the type of the request being served, for metrics
    empty: bool = False  # the GET being served found nothing


_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, math.inf)


class _ClientStats:
    """Per destination: requests by packet type, bytes answered, empty GETs, error answers and a
    latency histogram (Canal's ``canal_instance_client_*``). Written by the event loop, read by
    the metrics thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by: dict[str, dict[str, Any]] = {}

    def record(self, session: _Session, nbytes: int, seconds: float, error: bool) -> None:
        dest = session.destination
        if not dest:
            return
        with self._lock:
            st = self._by.get(dest)
            if st is None:
                st = self._by[dest] = {
                    "packets": {},
                    "bytes": 0,
                    "empty_batches": 0,
                    "errors": 0,
                    "latency_counts": [0] * len(_LATENCY_BUCKETS),
                    "latency_sum": 0.0,
                }
            kind = session.packet or "unknown"
            st["packets"][kind] = st["packets"].get(kind, 0) + 1
            st["bytes"] += nbytes
            st["empty_batches"] += session.empty
            st["errors"] += error
            st["latency_sum"] += seconds
            st["latency_counts"][bisect.bisect_left(_LATENCY_BUCKETS, seconds)] += 1

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            out = {}
            for dest, st in self._by.items():
                cumulative, total = {}, 0
                for bound, count in zip(_LATENCY_BUCKETS, st["latency_counts"], strict=True):
                    total += count
                    cumulative[bound] = total
                out[dest] = {
                    **{k: v for k, v in st.items() if k != "latency_counts"},
                    "packets": dict(st["packets"]),
                    "latency_buckets": cumulative,
                }
            return out


class _Workers:
    """Daemon threads for the embedded server's blocking calls, started on demand up to
    ``max_workers`` (a long poll holds one thread for its whole wait)."""

    def __init__(self, max_workers: int) -> None:
        self._max = max_workers
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._pending = 0

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._pending += 1
            if self._pending > self._idle:
                if len(self._threads) < self._max:
                    thread = threading.Thread(
                        target=self._work, name=f"canal-tcp-{len(self._threads)}", daemon=True
                    )
                    self._threads.append(thread)
                    thread.start()
                else:  # requests now wait for a long poll to end
                    _log(
                        logging.WARNING, "workers_busy", workers=self._max, waiting=self._pending - self._idle
                    )
        self._queue.put((loop, future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            item = self._queue.get()
            with self._lock:
                self._idle -= 1
                self._pending -= 1
            if item is None:
                return
            loop, future, fn, args = item
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
                deliver, value = _set_exception, exc
            else:
                deliver, value = _set_result, result
            try:
                loop.call_soon_threadsafe(deliver, future, value)
            except RuntimeError:  # the loop is closed: the server stopped meanwhile
                _log(logging.DEBUG, "worker_result_dropped", call=getattr(fn, "__name__", fn))

    def shutdown(self) -> None:
        with self._lock:
            self._pending += len(self._threads)
            for _ in self._threads:
                self._queue.put(None)
            self._threads.clear()


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _entries_bytes(message: Any) -> list[bytes]:
    return message.entries if message.raw else [e.SerializeToString() for e in message.entries]


class CanalTcpServer:
    """Canal's TCP server over ``embedded`` (see the module notes).

    ``passwd`` is ``canal.passwd``: ``HEX(SHA1(SHA1(password)))``
    (:func:`pycanal.server.wire.password_hash`), never the password itself. With neither
    ``user`` nor ``passwd`` every client is accepted."""

    def __init__(
        self,
        embedded: CanalServerWithEmbedded,
        host: str = "127.0.0.1",
        port: int = 0,
        user: str | None = None,
        passwd: str | None = None,
        *,
        idle_timeout: float = 3600.0,
        auth_timeout: float = 30.0,
        max_frame_size: int = 1024 * 1024,
        max_workers: int = 64,
    ) -> None:
        if passwd and not _HEX40.fullmatch(passwd):
            raise ValueError("passwd must be HEX(SHA1(SHA1(password))): 40 hex digits (canal.passwd)")
        if not 0 < max_frame_size <= DEFAULT_MAX_FRAME_SIZE:
            raise ValueError(f"max_frame_size must be in 1..{DEFAULT_MAX_FRAME_SIZE}, got {max_frame_size}")
        if max_workers < 1:
            raise ValueError(f"max_workers must be positive, got {max_workers}")
        self.embedded = embedded
        self.host = host
        self.port = port
        self.user = user or ""
        self._passwd_hash = passwd.upper() if passwd else ""
        self.idle_timeout = idle_timeout
        self.auth_timeout = auth_timeout
        self.max_frame_size = max_frame_size
        self.max_workers = max_workers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._listening = threading.Event()
        self._start_error: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._workers: _Workers | None = None
        self.stats = _ClientStats()

    def client_stats(self) -> dict[str, dict[str, Any]]:
        """Per-destination client counters for :mod:`pycanal.server.metrics`."""
        return self.stats.snapshot()

    def __repr__(self) -> str:
        return f"CanalTcpServer({self.host}:{self.port}, auth={self._auth_mode})"

    @property
    def _auth_mode(self) -> str:
        return "password" if self._passwd_hash else "user" if self.user else "off"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    # ------------------------------------------------------------------ lifecycle
    async def serve(self) -> None:
        """Listen and serve until :meth:`stop` (or cancellation); then close every connection."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._workers = _Workers(self.max_workers)
        server = await asyncio.start_server(self._connection, self.host, self.port, reuse_address=True)
        self.port = server.sockets[0].getsockname()[1]
        _log(logging.INFO, "listening", address=f"{self.host}:{self.port}", auth=self._auth_mode)
        self._listening.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()
            self._workers.shutdown()
            self._listening.clear()
            _log(logging.INFO, "stopped", address=f"{self.host}:{self.port}")

    def start(self) -> CanalTcpServer:
        """Serve from a background thread; returns once listening (or raises the bind error)."""
        if self._thread is not None:
            raise RuntimeError("CanalTcpServer already started")
        self._start_error = None

        def run() -> None:
            try:
                asyncio.run(self.serve())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                self._start_error = exc
                self._listening.set()

        self._thread = threading.Thread(target=run, name=f"canal-tcp-{self.port}", daemon=True)
        self._thread.start()
        self._listening.wait()
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise self._start_error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop listening and close every connection (the embedded server keeps running).
        From the loop's own thread this only requests the stop."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"CanalTcpServer on port {self.port} did not stop within {timeout}s")
            self._thread = None

    def __enter__(self) -> CanalTcpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ connections
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        session = _Session(peer, secrets.token_bytes(8), self.idle_timeout, self.idle_timeout)
        _log(logging.INFO, "connected", peer=peer)
        reason = "closed by client"
        try:
            reason = await self._serve_session(session, reader, writer)
        except asyncio.CancelledError:
            reason = "server stopping"
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc}"
        except Exception as exc:  # noqa: BLE001 - one connection's bug must not stop the server
            reason = f"internal error: {type(exc).__name__}: {exc}"
            log.exception("event=connection_failed peer=%s", peer)
        finally:
            self._tasks.discard(task)
            writer.close()
            _log(logging.INFO, "disconnected", session.destination, peer=peer, reason=reason)

    async def _send(self, session: _Session, writer: asyncio.StreamWriter, frame: bytes) -> None:
        writer.write(frame)
        if writer.transport.get_write_buffer_size() > 0:  # the client is not reading fast enough
            try:
                async with asyncio.timeout(session.write_timeout):
                    await writer.drain()
            except TimeoutError:
                raise ConnectionError(
                    f"answer not read by the client within {session.write_timeout:g}s"
                ) from None

    async def _serve_session(
        self, session: _Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> str:
        """Serve until the connection should end; returns why."""
        await self._send(session, writer, encode_handshake(session.seed))
        decoder = FrameDecoder(self.max_frame_size)
        while True:
            limit = session.read_timeout if session.authenticated else self.auth_timeout
            try:
                async with asyncio.timeout(limit):
                    data = await reader.read(_READ_SIZE)
            except TimeoutError:
                what = "idle" if session.authenticated else "no authentication"
                return f"{what} for {limit:g}s"
            if not data:
                try:
                    decoder.check_eof()
                except WireError as exc:
                    _log(logging.WARNING, "bad_frame", session.destination, peer=session.peer, error=exc)
                    return "truncated frame"
                return "closed by client"
            try:
                frames = decoder.feed(data)
            except WireError as exc:
                # frames before the bad length were complete: drop them, the stream is broken
                _log(logging.WARNING, "bad_frame", session.destination, peer=session.peer, error=exc)
                await self._send(session, writer, encode_ack(ERROR_GENERIC, str(exc)))
                return "bad frame"
            for payload in frames:
                started = time.perf_counter()
                session.packet, session.empty = "", False
                try:
                    answer = await self._packet(session, payload)
                except _Refused as refused:
                    self.stats.record(session, 0, time.perf_counter() - started, True)
                    _log(
                        logging.WARNING,
                        "refused",
                        session.destination,
                        peer=session.peer,
                        code=refused.code,
                        error=refused.message,
                    )
                    await self._send(session, writer, encode_ack(refused.code, refused.message))
                    if refused.close:
                        return f"error {refused.code}"
                    continue
                if answer is not None:
                    await self._send(session, writer, answer)
                self.stats.record(session, len(answer or b""), time.perf_counter() - started, False)

    async def _packet(self, session: _Session, payload: bytes) -> bytes | None:
        """One request: its answer frame (None for ack and rollback), or :class:`_Refused`."""
        try:
            packet = parse_packet(payload)
        except WireError as exc:
            raise _Refused(ERROR_GENERIC, str(exc)) from None
        ptype = packet.type
        session.packet = packet_type_name(ptype)
        if not session.authenticated:
            if ptype != _PT.CLIENTAUTHENTICATION:
                raise _Refused(ERROR_GENERIC, f"unexpected packet type: {packet_type_name(ptype)}")
            return await self._auth(session, packet)
        if ptype == _PT.GET:
            return await self._get(session, packet)
        if ptype == _PT.CLIENTACK:
            await self._ack(session, packet)
            return None
        if ptype == _PT.CLIENTROLLBACK:
            await self._rollback(session, packet)
            return None
        if ptype == _PT.SUBSCRIPTION:
            return await self._subscribe(session, packet)
        if ptype == _PT.UNSUBSCRIPTION:
            return await self._unsubscribe(session, packet)
        raise _Refused(ERROR_GENERIC, f"packet type={packet_type_name(ptype)} is NOT supported!", close=False)

    # ------------------------------------------------------------------ requests
    @staticmethod
    def _body(packet: cp.Packet) -> Any:
        try:
            return parse_body(packet)
        except WireError as exc:
            raise _Refused(ERROR_GENERIC, str(exc)) from None

    @staticmethod
    def _identity(session: _Session, what: str, body: Any, filter: str | None = None) -> ClientIdentity:
        destination, client_id = body.destination, body.client_id
        if destination:
            session.destination = destination
        if not destination or not client_id:
            raise _Refused(
                ERROR_NO_IDENTITY,
                f"destination or clientId is null in {what} (destination={destination!r}, clientId={client_id!r})",
            )
        try:
            if not _CLIENT_ID.fullmatch(client_id):
                raise ValueError
            return ClientIdentity(destination, int(client_id), filter)
        except ValueError:
            raise _Refused(
                ERROR_GENERIC, f"clientId {client_id!r} in {what} is not a number in -32768..32767"
            ) from None

    async def _call(self, session: _Session, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an embedded server call on a worker; its errors become error 400."""
        assert self._workers is not None
        try:
            return await self._workers.run(fn, *args)
        except Exception as exc:  # noqa: BLE001 - every failure is answered
            if not isinstance(exc, _EXPECTED_ERRORS):
                log.error(
                    "event=call_failed destination=%s what=%s", session.destination or "-", what, exc_info=exc
                )
            raise _Refused(ERROR_GENERIC, f"{what} failed: {type(exc).__name__}: {exc}") from None

    def _auth_ok(self, username: str, token: bytes, seed: bytes) -> bool:
        # Canal's CanalServerWithEmbedded.auth: no user configured accepts any user name.
        if self.user and username != self.user:
            return False
        if not self._passwd_hash:
            return True
        return bool(token) and check_auth_token(token, seed, self._passwd_hash)

    async def _auth(self, session: _Session, packet: cp.Packet) -> bytes:
        auth = self._body(packet)
        if not self._auth_ok(auth.username, auth.password, session.seed):
            raise _Refused(ERROR_GENERIC, f"auth failed for user:{auth.username}", close=False)
        if auth.net_read_timeout > 0:
            session.read_timeout = auth.net_read_timeout / 1000.0
        if auth.net_write_timeout > 0:
            session.write_timeout = auth.net_write_timeout / 1000.0
        if auth.destination and auth.client_id:  # Canal subscribes at auth time when both are given
            client = self._identity(session, "CLIENTAUTHENTICATION", auth, auth.filter)
            await self._call(session, "subscribe", self.embedded.subscribe, client)
        session.authenticated = True
        _log(
            logging.INFO,
            "authenticated",
            session.destination,
            peer=session.peer,
            user=auth.username or "-",
            idle_timeout=f"{session.read_timeout:g}s",
        )
        return encode_ack()

    async def _subscribe(self, session: _Session, packet: cp.Packet) -> bytes:
        sub = self._body(packet)
        client = self._identity(session, "SUBSCRIPTION", sub, sub.filter)
        await self._call(session, "subscribe", self.embedded.subscribe, client)
        _log(
            logging.INFO,
            "subscribed",
            client.destination,
            peer=session.peer,
            client_id=client.client_id,
            filter=sub.filter,
        )
        return encode_ack()

    async def _unsubscribe(self, session: _Session, packet: cp.Packet) -> bytes:
        unsub = self._body(packet)
        client = self._identity(session, "UNSUBSCRIPTION", unsub, unsub.filter)
        await self._call(session, "unsubscribe", self.embedded.unsubscribe, client)
        _log(logging.INFO, "unsubscribed", client.destination, peer=session.peer, client_id=client.client_id)
        return encode_ack()

    async def _get(self, session: _Session, packet: cp.Packet) -> bytes:
        get = self._body(packet)
        client = self._identity(session, "GET", get)
        if get.fetch_size <= 0:
            raise _Refused(ERROR_GENERIC, f"GET fetch_size must be positive, got {get.fetch_size}")
        # Canal: an unset timeout is -1, "answer at once"; any negative one is taken the same way.
        timeout = get.timeout if get.HasField("timeout") and get.timeout >= 0 else None
        unit = unit_name(get.unit) if get.HasField("unit") else "ms"
        message, frame = await self._call(
            session, "get", self._get_frame, client, get.fetch_size, timeout, unit
        )
        session.empty = message.id == -1
        if log.isEnabledFor(logging.DEBUG):
            _log(
                logging.DEBUG,
                "get",
                client.destination,
                peer=session.peer,
                batch_id=message.id,
                entries=len(message),
            )
        return frame

    def _get_frame(
        self, client: ClientIdentity, fetch_size: int, timeout: float | None, unit: str
    ) -> tuple[Any, bytes]:
        # On the worker: the frame is built there too, off the event loop.
        if timeout is None:
            message = self.embedded.get_without_ack(client, fetch_size)
        else:
            message = self.embedded.get_without_ack(client, fetch_size, timeout, unit)
        return message, encode_messages(message.id, _entries_bytes(message))

    async def _ack(self, session: _Session, packet: cp.Packet) -> None:
        ack = self._body(packet)
        client = self._identity(session, "CLIENTACK", ack)
        if ack.batch_id == 0:
            raise _Refused(ERROR_NO_BATCH_ID, "batchId should assign value")
        if ack.batch_id == -1:  # the answer to an empty GET: nothing to ack
            return
        await self._call(session, "ack", self.embedded.ack, client, ack.batch_id)

    async def _rollback(self, session: _Session, packet: cp.Packet) -> None:
        rollback = self._body(packet)
        client = self._identity(session, "CLIENTROLLBACK", rollback)
        embedded = self.embedded
        if client.destination in embedded.destinations and not embedded.is_start(client.destination):
            return  # not started (lazy): no subscription to roll back
        batch_id = rollback.batch_id or None  # 0: every outstanding batch
        await self._call(session, "rollback", embedded.rollback, client, batch_id)
        _log(
            logging.INFO,
            "rollback",
            client.destination,
            peer=session.peer,
            client_id=client.client_id,
            batch_id=rollback.batch_id,
        )
