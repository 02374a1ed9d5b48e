"""Canal's client/server TCP protocol as pure functions over bytes (sans-I/O).

A frame is a 4-byte big-endian signed length followed by one serialized ``Packet``
(``CanalProtocol.proto``); the packet's ``type`` names the message serialized in its ``body``.
Requests and answers alternate on one connection, except ``CLIENTACK`` and ``CLIENTROLLBACK``,
which get no answer (research/canal.md section 2).

* :class:`FrameDecoder`: feed received bytes, get whole frame payloads back; a length beyond
  ``max_frame_size`` (or negative) is an error, because the stream cannot be resynchronized.
* ``encode_*``: one function per packet type, each returning a whole frame ready to send.
  The server's packets carry ``version=1`` as Canal's do; the client's do not (Canal's Java
  client leaves it unset).
* :func:`encode_messages`: the raw fast path. The stored ``Entry`` bytes are written as the
  repeated ``messages`` field by hand, never parsed or re-serialized (Canal's ``SessionHandler``
  does the same when ``canal.instance.memory.rawEntry`` is on).
* :func:`parse_packet` / :func:`parse_body`: bytes back to protobuf messages, with errors that
  name the packet type and size.
* :func:`scramble411`, :func:`auth_token`, :func:`check_auth_token`: the MySQL 4.1 password
  scramble Canal uses, checked against ``canal.passwd`` = ``HEX(SHA1(SHA1(password)))``.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence

from google.protobuf.message import DecodeError, Message

from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol.wire import messages_packet_parts

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "ERROR_GENERIC",
    "ERROR_NO_BATCH_ID",
    "ERROR_NO_IDENTITY",
    "TIME_UNITS",
    "FrameDecoder",
    "FrameTooLargeError",
    "MalformedPacketError",
    "TruncatedFrameError",
    "WireError",
    "auth_token",
    "check_auth_token",
    "encode_ack",
    "encode_client_ack",
    "encode_client_auth",
    "encode_client_rollback",
    "encode_frame",
    "encode_get",
    "encode_handshake",
    "encode_heartbeat",
    "encode_messages",
    "encode_packet",
    "encode_sub",
    "encode_unsub",
    "packet_type_name",
    "parse_body",
    "parse_packet",
    "password_hash",
    "scramble411",
    "unit_name",
    "unit_ordinal",
]

# Canal's error codes in ACK packets.
ERROR_GENERIC = 400  # auth failure, unsupported packet type, any server-side exception
ERROR_NO_IDENTITY = 401  # destination or clientId empty
ERROR_NO_BATCH_ID = 402  # CLIENTACK with batchId 0

DEFAULT_MAX_FRAME_SIZE = 256 * 1024 * 1024
_MAX_LENGTH = 2**31 - 1  # the length prefix is a Java int

# java.util.concurrent.TimeUnit in ordinal order, named as CanalServerWithEmbedded takes units.
TIME_UNITS = ("ns", "us", "ms", "s", "m", "h", "days")
_UNIT_ALIASES = {
    "nanoseconds": "ns",
    "microseconds": "us",
    "milliseconds": "ms",
    "seconds": "s",
    "minutes": "m",
    "hours": "h",
    "d": "days",
}

_HEADER = struct.Struct(">i")
_PT = cp.PacketType


class WireError(ValueError):
    """Bytes that are not Canal's protocol."""


class FrameTooLargeError(WireError):
    """A frame length beyond the limit (or negative): the stream cannot be resynchronized."""


class TruncatedFrameError(WireError):
    """The stream ended inside a frame."""


class MalformedPacketError(WireError):
    """A whole frame whose payload is not a valid Packet or body."""


# --------------------------------------------------------------------------- framing
def encode_frame(payload: bytes) -> bytes:
    """``payload`` behind its 4-byte big-endian length."""
    if len(payload) > _MAX_LENGTH:
        raise WireError(f"a frame of {len(payload)} bytes does not fit the 4-byte length prefix")
    return _HEADER.pack(len(payload)) + payload


class FrameDecoder:
    """Incremental frame splitter: :meth:`feed` received bytes, get the complete payloads.

    After an error the decoder stays broken (every later :meth:`feed` raises the same error):
    with a bad length there is no way to find the next frame boundary."""

    __slots__ = ("_buf", "_consumed", "_error", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if not 0 < max_frame_size <= _MAX_LENGTH:
            raise ValueError(f"max_frame_size must be in 1..{_MAX_LENGTH}, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._consumed = 0  # stream offset of _buf[0], for error messages
        self._error: WireError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise self._error
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        size = len(buf)
        limit = self.max_frame_size
        with memoryview(buf) as view:
            while size - pos >= 4:
                (length,) = _HEADER.unpack_from(buf, pos)
                if not 0 <= length <= limit:
                    self._error = FrameTooLargeError(
                        f"frame at stream offset {self._consumed + pos} declares {length} bytes; "
                        + ("a length cannot be negative" if length < 0 else f"the maximum is {limit}")
                    )
                    break
                end = pos + 4 + length
                if end > size:
                    break
                out.append(bytes(view[pos + 4 : end]))
                pos = end
        if pos:
            del buf[:pos]
            self._consumed += pos
        if self._error is not None:
            raise self._error
        return out

    def check_eof(self) -> None:
        """Call when the peer closed: raise :class:`TruncatedFrameError` if a frame was cut."""
        buf = self._buf
        if not buf or self._error is not None:
            return
        if len(buf) < 4:
            raise TruncatedFrameError(
                f"stream ended after {len(buf)} of the 4 length bytes of the frame at offset {self._consumed}"
            )
        (length,) = _HEADER.unpack_from(buf, 0)
        raise TruncatedFrameError(
            f"stream ended after {len(buf) - 4} of the {length} bytes of the frame at offset {self._consumed}"
        )


# --------------------------------------------------------------------------- packets
def packet_type_name(ptype: int) -> str:
    try:
        return _PT.Name(ptype)
    except ValueError:
        return str(ptype)


def encode_packet(ptype: int, body: bytes, *, version: bool = False) -> bytes:
    """A framed ``Packet`` of ``ptype`` around an already serialized ``body``."""
    packet = cp.Packet(type=ptype, body=body)
    if version:
        packet.version = 1
    return encode_frame(packet.SerializeToString())


def encode_handshake(seed: bytes) -> bytes:
    return encode_packet(_PT.HANDSHAKE, cp.Handshake(seeds=seed).SerializeToString(), version=True)


def encode_client_auth(
    username: str,
    password: bytes,
    net_read_timeout: int,
    net_write_timeout: int,
    *,
    destination: str = "",
    client_id: str = "",
    filter: str = "",
) -> bytes:
    """``password`` is :func:`auth_token`'s output; timeouts are milliseconds (Canal's usage)."""
    body = cp.ClientAuth(
        username=username,
        password=password,
        net_read_timeout=net_read_timeout,
        net_write_timeout=net_write_timeout,
        destination=destination,
        client_id=client_id,
        filter=filter,
    )
    return encode_packet(_PT.CLIENTAUTHENTICATION, body.SerializeToString())


def encode_ack(error_code: int = 0, error_message: str = "") -> bytes:
    """Success (code 0: Canal sends an empty ``Ack``) or one of Canal's error codes."""
    body = cp.Ack(error_code=error_code, error_message=error_message) if error_code else cp.Ack()
    return encode_packet(_PT.ACK, body.SerializeToString(), version=True)


def encode_sub(destination: str, client_id: str, filter: str = "") -> bytes:
    body = cp.Sub(destination=destination, client_id=client_id, filter=filter)
    return encode_packet(_PT.SUBSCRIPTION, body.SerializeToString())


def encode_unsub(destination: str, client_id: str, filter: str = "") -> bytes:
    body = cp.Unsub(destination=destination, client_id=client_id, filter=filter)
    return encode_packet(_PT.UNSUBSCRIPTION, body.SerializeToString())


def encode_get(
    destination: str,
    client_id: str,
    fetch_size: int,
    timeout: int = -1,
    unit: int = 2,
    auto_ack: bool = False,
) -> bytes:
    """``timeout`` -1: answer at once; 0: wait for a full batch; > 0: wait at most that long
    in ``unit`` (a ``TimeUnit`` ordinal, see :data:`TIME_UNITS`)."""
    body = cp.Get(
        destination=destination,
        client_id=client_id,
        fetch_size=fetch_size,
        timeout=timeout,
        unit=unit,
        auto_ack=auto_ack,
    )
    return encode_packet(_PT.GET, body.SerializeToString())


def encode_client_ack(destination: str, client_id: str, batch_id: int) -> bytes:
    body = cp.ClientAck(destination=destination, client_id=client_id, batch_id=batch_id)
    return encode_packet(_PT.CLIENTACK, body.SerializeToString())


def encode_client_rollback(destination: str, client_id: str, batch_id: int = 0) -> bytes:
    """``batch_id`` 0 rolls back every outstanding batch."""
    body = cp.ClientRollback(destination=destination, client_id=client_id, batch_id=batch_id)
    return encode_packet(_PT.CLIENTROLLBACK, body.SerializeToString())


def encode_heartbeat(send_timestamp: int, start_timestamp: int) -> bytes:
    body = cp.HeartBeat(send_timestamp=send_timestamp, start_timestamp=start_timestamp)
    return encode_packet(_PT.HEARTBEATS, body.SerializeToString())


def encode_messages(batch_id: int, entries: Sequence[bytes]) -> bytes:
    """A framed MESSAGES packet of already serialized entries, written without re-encoding them
    (:func:`pycanal.protocol.wire.messages_packet_parts`)."""
    parts, total = messages_packet_parts(batch_id, entries)
    if total > _MAX_LENGTH:
        raise WireError(
            f"batch {batch_id} of {len(entries)} entries needs a frame of {total} bytes, over 2 GiB"
        )
    parts[0] = _HEADER.pack(total)
    return b"".join(parts)


_BODY_TYPES: dict[int, type[Message]] = {
    _PT.HANDSHAKE: cp.Handshake,
    _PT.CLIENTAUTHENTICATION: cp.ClientAuth,
    _PT.ACK: cp.Ack,
    _PT.SUBSCRIPTION: cp.Sub,
    _PT.UNSUBSCRIPTION: cp.Unsub,
    _PT.GET: cp.Get,
    _PT.MESSAGES: cp.Messages,
    _PT.CLIENTACK: cp.ClientAck,
    _PT.DUMP: cp.Dump,
    _PT.HEARTBEATS: cp.HeartBeat,
    _PT.CLIENTROLLBACK: cp.ClientRollback,
}


def parse_packet(payload: bytes) -> cp.Packet:
    """A frame's payload as a ``Packet``."""
    try:
        return cp.Packet.FromString(payload)
    except DecodeError as exc:
        raise MalformedPacketError(f"malformed Packet ({len(payload)} bytes): {exc}") from None


def parse_body(packet: cp.Packet) -> Message:
    """The message in ``packet.body``, of the type ``packet.type`` names."""
    cls = _BODY_TYPES.get(packet.type)
    if cls is None:
        raise MalformedPacketError(f"packet type {packet_type_name(packet.type)} has no body message")
    try:
        return cls.FromString(packet.body)
    except DecodeError as exc:
        raise MalformedPacketError(
            f"malformed {cls.__name__} body ({len(packet.body)} bytes) in a "
            f"{packet_type_name(packet.type)} packet: {exc}"
        ) from None


def unit_ordinal(unit: str) -> int:
    """A time unit name (``ms``, ``s``, ``milliseconds``, ...) as its ``TimeUnit`` ordinal."""
    name = unit.lower()
    name = _UNIT_ALIASES.get(name, name)
    try:
        return TIME_UNITS.index(name)
    except ValueError:
        raise ValueError(f"unknown time unit {unit!r}; use one of {', '.join(TIME_UNITS)}") from None


def unit_name(ordinal: int) -> str:
    """A ``TimeUnit`` ordinal's name; anything else is milliseconds, as in Canal's server."""
    return TIME_UNITS[ordinal] if 0 <= ordinal < len(TIME_UNITS) else "ms"


# --------------------------------------------------------------------------- authentication
def _sha1(*parts: bytes) -> bytes:
    h = hashlib.sha1()
    for p in parts:
        h.update(p)
    return h.digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def scramble411(password: bytes, seed: bytes) -> bytes:
    """MySQL 4.1's scramble: ``SHA1(pw) XOR SHA1(seed + SHA1(SHA1(pw)))`` (20 bytes)."""
    stage1 = _sha1(password)
    return _xor(stage1, _sha1(seed, _sha1(stage1)))


def auth_token(password: str, seed: bytes) -> bytes:
    """What a client puts in ``ClientAuth.password``: the lowercase hex of the scramble as
    ASCII bytes, empty when there is no password."""
    if not password:
        return b""
    return scramble411(password.encode(), seed).hex().encode()


def password_hash(password: str) -> str:
    """``canal.passwd`` for a password: ``HEX(SHA1(SHA1(password)))`` in upper case."""
    return _sha1(_sha1(password.encode())).hex().upper()


def check_auth_token(token: bytes | str, seed: bytes, stored_hash: str) -> bool:
    """Whether a client's token (hex of :func:`scramble411`) proves the password whose
    ``HEX(SHA1(SHA1(password)))`` is ``stored_hash``. Malformed tokens are simply wrong."""
    try:
        scrambled = bytes.fromhex(token.decode("ascii") if isinstance(token, bytes) else token)
        stored = bytes.fromhex(stored_hash)
    except (ValueError, UnicodeDecodeError):
        return False
    if len(scrambled) != 20 or len(stored) != 20:
        return False
    stage1 = _xor(scrambled, _sha1(seed, stored))
    return hmac.compare_digest(_sha1(stage1), stored)
