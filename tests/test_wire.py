"""pycanal.server.wire: Canal's client protocol as bytes.

* every packet type both ways: wire's encoders read back with the generated protobuf classes,
  and frames built with the generated classes read back with wire's parsers;
* the raw MESSAGES fast path is byte for byte protobuf's encoding, with Canal's layout;
* framing: any chunking gives the same payloads; oversized, negative and truncated frames are
  clear errors; fuzzing the decoder and the parsers only ever raises WireError;
* scramble411 against PyMySQL's independent implementation of the MySQL 4.1 scramble, and
  the server-side check against ``HEX(SHA1(SHA1(pw)))``.
"""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysql._auth import scramble_native_password

from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.server import wire

PT = cp.PacketType


def unframe(frame: bytes) -> cp.Packet:
    (length,) = struct.unpack(">i", frame[:4])
    assert length == len(frame) - 4
    return cp.Packet.FromString(frame[4:])


def proto_frame(packet: cp.Packet) -> bytes:
    payload = packet.SerializeToString()
    return struct.pack(">i", len(payload)) + payload


def sample_entry(i: int, size: int = 0) -> bytes:
    entry = pb.Entry(
        header=pb.Header(logfileName="mysql-bin.000001", logfileOffset=4 + i, schemaName="s", tableName="t"),
        entryType=pb.ROWDATA,
        storeValue=os.urandom(size) if size else b"row-%d" % i,
    )
    return entry.SerializeToString()


# --------------------------------------------------------------------------- encoders -> protobuf
def test_handshake_encoder() -> None:
    seed = os.urandom(8)
    packet = unframe(wire.encode_handshake(seed))
    assert packet.type == PT.HANDSHAKE and packet.version == 1
    assert cp.Handshake.FromString(packet.body).seeds == seed


def test_client_auth_encoder() -> None:
    frame = wire.encode_client_auth(
        "canal", b"ab12", 3600000, 1000, destination="example", client_id="1001", filter="a\\..*"
    )
    packet = unframe(frame)
    assert packet.type == PT.CLIENTAUTHENTICATION and not packet.HasField("version")
    auth = cp.ClientAuth.FromString(packet.body)
    assert (auth.username, auth.password, auth.net_read_timeout, auth.net_write_timeout) == (
        "canal",
        b"ab12",
        3600000,
        1000,
    )
    assert (auth.destination, auth.client_id, auth.filter) == ("example", "1001", "a\\..*")


@pytest.mark.parametrize("code,message", [(0, ""), (400, "auth failed for user:x"), (401, "n"), (402, "b")])
def test_ack_encoder(code: int, message: str) -> None:
    packet = unframe(wire.encode_ack(code, message))
    assert packet.type == PT.ACK and packet.version == 1
    ack = cp.Ack.FromString(packet.body)
    assert (ack.error_code, ack.error_message) == (code, message)
    assert ack.HasField("error_code") == bool(code)


@pytest.mark.parametrize(
    "encoder,ptype,cls",
    [(wire.encode_sub, PT.SUBSCRIPTION, cp.Sub), (wire.encode_unsub, PT.UNSUBSCRIPTION, cp.Unsub)],
)
def test_sub_unsub_encoders(encoder, ptype, cls) -> None:
    packet = unframe(encoder("example", "1001", "db\\..*"))
    assert packet.type == ptype
    body = cls.FromString(packet.body)
    assert (body.destination, body.client_id, body.filter) == ("example", "1001", "db\\..*")


def test_get_encoder() -> None:
    packet = unframe(wire.encode_get("example", "7", 500, 0, 3))
    assert packet.type == PT.GET
    get = cp.Get.FromString(packet.body)
    assert (get.destination, get.client_id, get.fetch_size, get.timeout, get.unit) == (
        "example",
        "7",
        500,
        0,
        3,
    )
    # timeout 0 (block) must be on the wire: unset means -1 (answer at once)
    assert get.HasField("timeout") and get.HasField("unit") and get.HasField("auto_ack") and not get.auto_ack
    default = cp.Get.FromString(unframe(wire.encode_get("d", "1", 10)).body)
    assert default.timeout == -1 and default.unit == 2


def test_client_ack_rollback_heartbeat_encoders() -> None:
    packet = unframe(wire.encode_client_ack("example", "1001", 2**40))
    assert packet.type == PT.CLIENTACK
    assert cp.ClientAck.FromString(packet.body) == cp.ClientAck(
        destination="example", client_id="1001", batch_id=2**40
    )
    packet = unframe(wire.encode_client_rollback("example", "1001"))
    assert packet.type == PT.CLIENTROLLBACK
    assert cp.ClientRollback.FromString(packet.body).batch_id == 0
    packet = unframe(wire.encode_heartbeat(123, 456))
    assert packet.type == PT.HEARTBEATS
    assert cp.HeartBeat.FromString(packet.body) == cp.HeartBeat(send_timestamp=123, start_timestamp=456)


@pytest.mark.parametrize("batch_id", [1, 300, 2**40, -1, 0])
@pytest.mark.parametrize("count", [0, 1, 7])
def test_messages_encoder_is_protobufs_encoding(batch_id: int, count: int) -> None:
    entries = [sample_entry(i) for i in range(count)]
    frame = wire.encode_messages(batch_id, entries)
    packet = unframe(frame)
    assert packet.type == PT.MESSAGES and not packet.HasField("version")
    messages = cp.Messages.FromString(packet.body)
    assert messages.batch_id == batch_id
    assert list(messages.messages) == entries
    assert [pb.Entry.FromString(m).header.logfileOffset for m in messages.messages] == [
        4 + i for i in range(count)
    ]
    if batch_id:  # protobuf leaves a zero batch_id out; Canal's raw path (and wire) write it
        expected = cp.Packet(
            type=PT.MESSAGES, body=cp.Messages(batch_id=batch_id, messages=entries).SerializeToString()
        )
        assert frame == proto_frame(expected)


def test_messages_encoder_layout_and_large_entries() -> None:
    # Canal's raw layout: 18 07 (type MESSAGES), 2A len (body), 08 id, then 12 len entry ...
    small, big = sample_entry(1), sample_entry(2, size=70_000)  # big: a 3-byte length varint
    frame = wire.encode_messages(5, [small, big])
    body = cp.Messages(batch_id=5, messages=[small, big]).SerializeToString()
    assert frame[4:6] == b"\x18\x07" and frame[6] == 0x2A
    assert frame.endswith(body) and body.startswith(b"\x08\x05\x12")
    assert list(cp.Messages.FromString(unframe(frame).body).messages) == [small, big]


# --------------------------------------------------------------------------- protobuf -> parsers
BODIES = [
    (PT.HANDSHAKE, cp.Handshake(seeds=b"12345678", communication_encoding="utf8")),
    (
        PT.CLIENTAUTHENTICATION,
        cp.ClientAuth(username="u", password=b"00ff", net_read_timeout=5, client_id="3"),
    ),
    (PT.ACK, cp.Ack(error_code=401, error_message="destination or clientId is null")),
    (PT.SUBSCRIPTION, cp.Sub(destination="d", client_id="1", filter="x")),
    (PT.UNSUBSCRIPTION, cp.Unsub(destination="d", client_id="1")),
    (PT.GET, cp.Get(destination="d", client_id="1", fetch_size=9, timeout=100, unit=2, auto_ack=False)),
    (PT.MESSAGES, cp.Messages(batch_id=3, messages=[b"a", b"", b"c"])),
    (PT.CLIENTACK, cp.ClientAck(destination="d", client_id="1", batch_id=3)),
    (PT.DUMP, cp.Dump(journal="mysql-bin.000002", position=4, timestamp=1)),
    (PT.HEARTBEATS, cp.HeartBeat(send_timestamp=1, start_timestamp=2)),
    (PT.CLIENTROLLBACK, cp.ClientRollback(destination="d", client_id="1", batch_id=3)),
]


@pytest.mark.parametrize("ptype,body", BODIES, ids=[wire.packet_type_name(t) for t, _ in BODIES])
def test_parsers_read_protobuf_frames(ptype: int, body) -> None:
    frame = proto_frame(cp.Packet(type=ptype, version=1, body=body.SerializeToString()))
    decoder = wire.FrameDecoder()
    (payload,) = decoder.feed(frame)
    packet = wire.parse_packet(payload)
    assert packet.type == ptype
    assert wire.parse_body(packet) == body


def test_every_packet_type_is_covered() -> None:
    covered = {t for t, _ in BODIES}
    unhandled = {PT.PACKAGETYPECOMPATIBLEPROTO2, PT.SHUTDOWN}  # no body message in Canal either
    assert covered | unhandled == set(PT.values())
    for ptype in unhandled:
        with pytest.raises(wire.MalformedPacketError, match="has no body message"):
            wire.parse_body(cp.Packet(type=ptype))


def test_parse_errors_name_what_and_where() -> None:
    with pytest.raises(wire.MalformedPacketError, match=r"malformed Packet \(3 bytes\)"):
        wire.parse_packet(b"\xff\xff\xff")
    bad_get = cp.Packet(type=PT.GET, body=b"\x0a\x05ab")  # a string field cut short
    with pytest.raises(wire.MalformedPacketError, match=r"malformed Get body \(4 bytes\) in a GET packet"):
        wire.parse_body(bad_get)
    assert wire.packet_type_name(99) == "99" and wire.packet_type_name(PT.GET) == "GET"


# --------------------------------------------------------------------------- framing
def test_frame_decoder_splits_and_joins() -> None:
    payloads = [b"", b"x", os.urandom(1000), os.urandom(70_000)]
    stream = b"".join(wire.encode_frame(p) for p in payloads)
    decoder = wire.FrameDecoder()
    got: list[bytes] = []
    for i in range(0, len(stream), 333):
        got += decoder.feed(stream[i : i + 333])
    assert got == payloads and decoder.buffered == 0
    decoder.check_eof()  # nothing pending
    assert wire.FrameDecoder().feed(memoryview(stream)) == payloads


def test_frame_decoder_oversized_and_negative() -> None:
    decoder = wire.FrameDecoder(max_frame_size=100)
    ok = wire.encode_frame(b"a" * 100)
    with pytest.raises(
        wire.FrameTooLargeError, match="frame at stream offset 104 declares 101 bytes; the maximum is 100"
    ):
        decoder.feed(ok + struct.pack(">i", 101))
    with pytest.raises(wire.FrameTooLargeError):  # stays broken: no resync possible
        decoder.feed(ok)
    with pytest.raises(wire.FrameTooLargeError, match="declares -1 bytes; a length cannot be negative"):
        wire.FrameDecoder().feed(b"\xff\xff\xff\xff")
    with pytest.raises(ValueError, match="max_frame_size"):
        wire.FrameDecoder(0)


def test_frame_decoder_truncated() -> None:
    decoder = wire.FrameDecoder()
    assert decoder.feed(wire.encode_frame(b"abc") + b"\x00\x00") == [b"abc"]
    with pytest.raises(
        wire.TruncatedFrameError, match="after 2 of the 4 length bytes of the frame at offset 7"
    ):
        decoder.check_eof()
    decoder = wire.FrameDecoder()
    decoder.feed(wire.encode_frame(b"abcdef")[:7])
    with pytest.raises(wire.TruncatedFrameError, match="after 3 of the 6 bytes"):
        decoder.check_eof()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 50), min_size=1, max_size=20))
def test_fuzz_decoder_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(wire.encode_frame(p) for p in payloads)
    decoder = wire.FrameDecoder(max_frame_size=300)
    got: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got += decoder.feed(stream[pos : pos + step])
        pos, i = pos + step, i + 1
    assert got == payloads
    assert decoder.buffered == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_fuzz_decoder_and_parsers_on_garbage(data: bytes, chunk: int) -> None:
    decoder = wire.FrameDecoder(max_frame_size=128)
    try:
        for i in range(0, len(data), chunk):
            for payload in decoder.feed(data[i : i + chunk]):
                try:
                    packet = wire.parse_packet(payload)
                    wire.parse_body(packet)
                except wire.MalformedPacketError:
                    pass
        decoder.check_eof()
    except (wire.FrameTooLargeError, wire.TruncatedFrameError):
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([t for t, _ in BODIES]), st.binary(max_size=64))
def test_fuzz_bodies(ptype: int, body: bytes) -> None:
    try:
        wire.parse_body(cp.Packet(type=ptype, body=body))
    except wire.MalformedPacketError as exc:
        assert wire.packet_type_name(ptype) in str(exc)


# --------------------------------------------------------------------------- units
def test_time_units() -> None:
    assert [wire.unit_ordinal(u) for u in ("ns", "us", "ms", "s", "m", "h", "days")] == list(range(7))
    assert wire.unit_ordinal("MILLISECONDS") == 2 and wire.unit_ordinal("seconds") == 3
    assert wire.unit_name(3) == "s" and wire.unit_name(-1) == "ms" and wire.unit_name(7) == "ms"
    with pytest.raises(ValueError, match="unknown time unit 'fortnights'"):
        wire.unit_ordinal("fortnights")


# --------------------------------------------------------------------------- scramble411
def test_password_hash_matches_canal_docs() -> None:
    # canal.properties' example: canal.passwd for the password "canal"
    assert wire.password_hash("canal") == "E3619321C1A937C46A0D8BD1DAC39F93B27D4458"


@pytest.mark.parametrize("password", ["canal", "secret", "pässwörd", "x" * 100])
def test_scramble411_matches_pymysql(password: str) -> None:
    for seed in (b"12345678", os.urandom(8), os.urandom(20)):
        assert wire.scramble411(password.encode(), seed) == scramble_native_password(password.encode(), seed)


def test_scramble411_vector() -> None:
    # fixed seed and password: the value PyMySQL and MySQL's native password plugin compute
    assert (
        wire.scramble411(b"canal", b"abcdefgh").hex() == scramble_native_password(b"canal", b"abcdefgh").hex()
    )
    assert wire.auth_token("canal", b"abcdefgh") == wire.scramble411(b"canal", b"abcdefgh").hex().encode()
    assert wire.auth_token("", b"abcdefgh") == b""


def test_check_auth_token() -> None:
    seed = os.urandom(8)
    stored = wire.password_hash("secret")
    token = wire.auth_token("secret", seed)
    assert wire.check_auth_token(token, seed, stored)
    assert wire.check_auth_token(token.decode().upper(), seed, stored.lower())  # hex case does not matter
    assert not wire.check_auth_token(wire.auth_token("Secret", seed), seed, stored)
    assert not wire.check_auth_token(token, os.urandom(8), stored)  # another connection's seed
    for bad in (b"", b"zz", token[:-2], token + b"00", "é".encode(), b"\xff" * 40):
        assert not wire.check_auth_token(bad, seed, stored)
