"""Byte vectors for the sans-I/O MySQL protocol code (pycanal.mysql.packets): no server needed."""

from __future__ import annotations

import hashlib
import struct

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from pymysql import _auth as pymysql_auth

from pycanal.binlog.gtid import MysqlGtidSet
from pycanal.mysql import auth as A
from pycanal.mysql import packets as P
from pycanal.mysql.errors import (
    AuthError,
    BinlogDumpError,
    BinlogPurgedError,
    ProtocolError,
    ServerError,
    dump_error,
)

# A MySQL 8.0.36 initial handshake as the server sends it, written out from the documented
# Protocol::HandshakeV10 layout (not produced by our own builder).
SALT1 = bytes.fromhex("1b3e522f0c4d6b11")
SALT2 = bytes.fromhex("5a207e33610f4472192c5d08")
MYSQL8_HANDSHAKE = (
    bytes.fromhex("0a")  # protocol version 10
    + b"8.0.36\x00"  # server version
    + bytes.fromhex("0d000000")  # connection id 13
    + SALT1  # auth-plugin-data part 1 (8 bytes)
    + bytes.fromhex("00")  # filler
    + bytes.fromhex("ffff")  # capability flags, lower 2 bytes
    + bytes.fromhex("ff")  # character set 255 (utf8mb4_0900_ai_ci)
    + bytes.fromhex("0200")  # status flags: SERVER_STATUS_AUTOCOMMIT
    + bytes.fromhex("ffdf")  # capability flags, upper 2 bytes
    + bytes.fromhex("15")  # auth-plugin-data length 21
    + bytes(10)  # reserved
    + SALT2
    + b"\x00"  # auth-plugin-data part 2 (13 bytes, NUL-terminated)
    + b"caching_sha2_password\x00"
)
NONCE = SALT1 + SALT2


def unframe(data: bytes) -> list[tuple[int, bytes]]:
    """Split framed bytes into (sequence id, payload) packets, written from the documented header."""
    out = []
    p = 0
    while p < len(data):
        length = int.from_bytes(data[p : p + 3], "little")
        out.append((data[p + 3], data[p + 4 : p + 4 + length]))
        p += 4 + length
    return out


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


# ------------------------------------------------------------------------------------------ handshake
def test_parse_mysql8_handshake():
    hs = P.parse_handshake(MYSQL8_HANDSHAKE)
    assert hs.protocol_version == 10
    assert hs.server_version == "8.0.36"
    assert hs.version_tuple == (8, 0, 36)
    assert not hs.is_mariadb
    assert hs.connection_id == 13
    assert hs.capabilities == 0xDFFFFFFF
    assert hs.capabilities & P.CLIENT_SSL
    assert hs.capabilities & P.CLIENT_PLUGIN_AUTH
    assert hs.capabilities & P.CLIENT_SECURE_CONNECTION
    assert hs.charset == 255
    assert hs.status == 2
    assert hs.auth_plugin == "caching_sha2_password"
    assert hs.auth_data == NONCE and len(hs.auth_data) == 20


def test_build_handshake_matches_the_documented_layout():
    built = P.build_handshake("8.0.36", 13, NONCE, 0xDFFFFFFF, "caching_sha2_password", 255, 2)
    assert built == MYSQL8_HANDSHAKE


def test_parse_mariadb_handshake_strips_the_replication_prefix():
    raw = P.build_handshake(
        "5.5.5-10.11.19-MariaDB-log",
        7,
        NONCE,
        P.CLIENT_BASE_CAPABILITIES | P.CLIENT_SSL,
        "mysql_native_password",
        45,
    )
    hs = P.parse_handshake(raw)
    assert hs.is_mariadb
    assert hs.version == "10.11.19-MariaDB-log"
    assert hs.version_tuple == (10, 11, 19)
    assert hs.auth_plugin == "mysql_native_password"


def test_handshake_err_packet_raises_server_error():
    with pytest.raises(ServerError) as info:
        P.parse_handshake(b"\xff\x10\x04Too many connections")
    assert info.value.errno == 1040
    assert info.value.sqlstate == "HY000"


def test_handshake_truncated():
    with pytest.raises(ProtocolError):
        P.parse_handshake(MYSQL8_HANDSHAKE[:20])


# ------------------------------------------------------------------------------------------ scrambles
def test_caching_sha2_scramble_against_the_documented_formula():
    password = b"s3cret-p\xc3\xa4ss"
    # XOR(SHA256(password), SHA256(SHA256(SHA256(password)), nonce)), byte by byte.
    stage1 = sha256(password)
    mix = sha256(sha256(stage1) + NONCE)
    expected = bytes(a ^ b for a, b in zip(stage1, mix, strict=True))
    assert A.scramble_caching_sha2(password, NONCE) == expected
    assert len(expected) == 32
    assert A.scramble_caching_sha2(b"", NONCE) == b""
    # PyMySQL's implementation agrees as well.
    assert pymysql_auth.scramble_caching_sha2(password, NONCE) == expected


def test_native_password_scramble():
    for password in (b"repl", b"secret", "pässwörd".encode()):
        assert A.scramble_native_password(password, NONCE) == pymysql_auth.scramble_native_password(
            password, NONCE
        )
    assert A.scramble_native_password(b"", NONCE) == b""
    # Written out: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))).
    s1 = hashlib.sha1(b"repl").digest()
    s3 = hashlib.sha1(NONCE + hashlib.sha1(s1).digest()).digest()
    assert A.scramble_native_password(b"repl", NONCE) == bytes(a ^ b for a, b in zip(s1, s3, strict=True))


# ------------------------------------------------------------------------------------------ login
def _login_response_fields(payload: bytes) -> dict:
    """Parse a HandshakeResponse41 from the documented layout."""
    caps, max_packet, charset = struct.unpack_from("<IIB", payload, 0)
    assert payload[9:32] == bytes(23)
    p = 32
    end = payload.index(b"\0", p)
    user = payload[p:end]
    p = end + 1
    assert caps & P.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    n = payload[p]
    assert n < 251
    auth = payload[p + 1 : p + 1 + n]
    p += 1 + n
    end = payload.index(b"\0", p)
    plugin = payload[p:end]
    assert end + 1 == len(payload)
    return {
        "caps": caps,
        "max_packet": max_packet,
        "charset": charset,
        "user": user,
        "auth": auth,
        "plugin": plugin,
    }


def test_login_caching_sha2_fast_path():
    auth = A.Authenticator("repl", "pw")
    out = auth.receive(MYSQL8_HANDSHAKE, 0)
    [(seq, payload)] = unframe(out)
    assert seq == 1
    fields = _login_response_fields(payload)
    assert fields["user"] == b"repl"
    assert fields["plugin"] == b"caching_sha2_password"
    assert fields["auth"] == A.scramble_caching_sha2(b"pw", NONCE)
    assert fields["charset"] == P.UTF8MB4_GENERAL_CI
    assert not fields["caps"] & P.CLIENT_SSL
    assert fields["caps"] & P.CLIENT_PROTOCOL_41 and fields["caps"] & P.CLIENT_SECURE_CONNECTION
    assert auth.receive(b"\x01\x03", 2) == b""  # fast auth success
    assert not auth.done
    assert auth.receive(b"\x00\x00\x00\x02\x00\x00\x00", 3) == b""
    assert auth.done and auth.ok is not None and auth.ok.status == 2


def test_login_caching_sha2_full_auth_with_rsa_key_from_the_server():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    password = b"long enough password to wrap the 20-byte nonce"
    auth = A.Authenticator("repl", password)
    auth.receive(MYSQL8_HANDSHAKE, 0)
    # perform_full_authentication: without TLS and without a key, the client asks for the key (0x02).
    assert unframe(auth.receive(b"\x01\x04", 2)) == [(3, b"\x02")]
    [(seq, encrypted)] = unframe(auth.receive(b"\x01" + pem, 4))
    assert seq == 5
    assert len(encrypted) == 256
    oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    plain = key.decrypt(encrypted, oaep)
    unmasked = bytes(c ^ NONCE[i % 20] for i, c in enumerate(plain))
    assert unmasked == password + b"\0"
    auth.receive(b"\x00\x00\x00\x02\x00\x00\x00", 6)
    assert auth.done
    assert auth.server_public_key == pem


def test_login_caching_sha2_full_auth_with_a_known_key_skips_the_request():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    auth = A.Authenticator("repl", "pw", server_public_key=pem)
    auth.receive(MYSQL8_HANDSHAKE, 0)
    [(seq, encrypted)] = unframe(auth.receive(b"\x01\x04", 2))
    oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    assert (seq, A.xor_password(b"pw", NONCE)) == (3, key.decrypt(encrypted, oaep))


def test_login_over_tls_ssl_request_then_cleartext_full_auth():
    auth = A.Authenticator("repl", "pw", tls=True)
    [(seq, ssl_req)] = unframe(auth.receive(MYSQL8_HANDSHAKE, 0))
    assert auth.tls_pending and seq == 1
    assert len(ssl_req) == 32
    caps, max_packet, charset = struct.unpack_from("<IIB", ssl_req)
    assert caps & P.CLIENT_SSL and max_packet == 1 << 30 and ssl_req[9:] == bytes(23)
    [(seq, response)] = unframe(auth.tls_established())
    assert seq == 2
    fields = _login_response_fields(response)
    assert fields["caps"] == caps
    assert unframe(auth.receive(b"\x01\x04", 3)) == [(4, b"pw\0")]  # full auth over TLS: cleartext
    auth.receive(b"\x00\x00\x00\x02\x00\x00\x00", 5)
    assert auth.done


def test_tls_requested_but_not_offered():
    raw = P.build_handshake("8.0.36", 1, NONCE, 0xDFFFFFFF & ~P.CLIENT_SSL)
    with pytest.raises(AuthError, match="TLS"):
        A.Authenticator("repl", "pw", tls=True).receive(raw, 0)


def test_auth_switch_to_native_password():
    auth = A.Authenticator("repl", "secret")
    auth.receive(MYSQL8_HANDSHAKE, 0)
    new_nonce = bytes(range(40, 60))
    switch = b"\xfe" + b"mysql_native_password\0" + new_nonce + b"\0"
    [(seq, response)] = unframe(auth.receive(switch, 2))
    assert seq == 3
    assert response == pymysql_auth.scramble_native_password(b"secret", new_nonce)
    assert auth.plugin == "mysql_native_password"
    auth.receive(b"\x00\x00\x00\x02\x00\x00\x00", 4)
    assert auth.done
    assert auth.plugins_used == ["caching_sha2_password", "mysql_native_password"]


def test_auth_switch_to_caching_sha2_then_fast_path():
    raw = P.build_handshake("8.0.36", 1, NONCE, 0xDFFFFFFF, "mysql_native_password")
    auth = A.Authenticator("u", "pw")
    auth.receive(raw, 0)
    new_nonce = bytes(range(1, 21))
    [(seq, response)] = unframe(auth.receive(b"\xfecaching_sha2_password\0" + new_nonce + b"\0", 2))
    assert (seq, response) == (3, A.scramble_caching_sha2(b"pw", new_nonce))
    auth.receive(b"\x01\x03", 4)
    auth.receive(b"\x00\x00\x00\x02\x00\x00\x00", 5)
    assert auth.done


def test_auth_switch_to_unsupported_plugins():
    for switch in (b"\xfe", b"\xfeclient_ed25519\0" + bytes(32)):
        auth = A.Authenticator("repl", "secret")
        auth.receive(MYSQL8_HANDSHAKE, 0)
        with pytest.raises(AuthError):
            auth.receive(switch, 2)


def test_clear_password_needs_tls():
    auth = A.Authenticator("repl", "secret")
    auth.receive(MYSQL8_HANDSHAKE, 0)
    with pytest.raises(AuthError, match="clear"):
        auth.receive(b"\xfemysql_clear_password\0", 2)
    auth = A.Authenticator("repl", "secret", tls=True)
    auth.receive(MYSQL8_HANDSHAKE, 0)
    auth.tls_established()
    assert unframe(auth.receive(b"\xfemysql_clear_password\0", 3)) == [(4, b"secret\0")]


def test_login_refused():
    auth = A.Authenticator("repl", "bad")
    auth.receive(MYSQL8_HANDSHAKE, 0)
    err = b"\xff\x15\x04#28000Access denied for user 'repl'@'10.0.0.1' (using password: YES)"
    with pytest.raises(AuthError) as info:
        auth.receive(err, 2)
    assert (info.value.errno, info.value.sqlstate) == (1045, "28000")
    assert "Access denied" in info.value.message


def test_login_sequence_id_checked():
    auth = A.Authenticator("repl", "pw")
    auth.receive(MYSQL8_HANDSHAKE, 0)
    with pytest.raises(ProtocolError):
        auth.receive(b"\x01\x03", 5)


def test_handshake_response_with_database_and_short_auth_length():
    caps = P.CLIENT_PROTOCOL_41 | P.CLIENT_SECURE_CONNECTION | P.CLIENT_PLUGIN_AUTH | P.CLIENT_CONNECT_WITH_DB
    raw = P.handshake_response(caps, "u", b"\x01\x02", "mysql_native_password", database="db", charset=33)
    assert raw == (
        struct.pack("<IIB", caps, 1 << 30, 33)
        + bytes(23)
        + b"u\0"
        + b"\x02\x01\x02"
        + b"db\0"
        + b"mysql_native_password\0"
    )


# ------------------------------------------------------------------------------------------ commands
UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "5f2b6c1e-1c33-11ee-8a8a-0242ac110002"


def test_com_binlog_dump_gtid_two_uuids():
    gtids = MysqlGtidSet.parse(f"{UUID_B.upper()}:1-100,\n{UUID_A}:1-5:7-9")
    payload = P.com_binlog_dump_gtid(gtids.encode(), server_id=1001)
    data = (
        (2).to_bytes(8, "little")  # n_sids
        + bytes.fromhex(UUID_A.replace("-", ""))
        + (2).to_bytes(8, "little")  # n_intervals
        + (1).to_bytes(8, "little")
        + (6).to_bytes(8, "little")  # 1-5: end exclusive
        + (7).to_bytes(8, "little")
        + (10).to_bytes(8, "little")  # 7-9
        + bytes.fromhex(UUID_B.replace("-", ""))
        + (1).to_bytes(8, "little")
        + (1).to_bytes(8, "little")
        + (101).to_bytes(8, "little")
    )
    expected = (
        b"\x1e"  # COM_BINLOG_DUMP_GTID
        + b"\x04\x00"  # flags: BINLOG_THROUGH_GTID
        + (1001).to_bytes(4, "little")  # server id
        + (0).to_bytes(4, "little")  # binlog name length
        + (4).to_bytes(8, "little")  # position
        + len(data).to_bytes(4, "little")
        + data
    )
    assert len(data) == 104
    assert payload == expected


def test_com_binlog_dump_gtid_tagged_set():
    gtids = MysqlGtidSet.parse(f"{UUID_A}:1-5:tag1:1-3")
    payload = P.com_binlog_dump_gtid(gtids.encode(), server_id=7, flags=P.BINLOG_THROUGH_GTID | 1)
    uuid = bytes.fromhex(UUID_A.replace("-", ""))
    data = (
        ((1 << 56) | (2 << 8) | 1).to_bytes(8, "little")  # tagged format, 2 members
        + uuid
        + b"\x00"  # tag length 0 (varlen)
        + (1).to_bytes(8, "little")
        + (1).to_bytes(8, "little")
        + (6).to_bytes(8, "little")
        + uuid
        + b"\x08"  # tag length 4 (varlen: 4 << 1)
        + b"tag1"
        + (1).to_bytes(8, "little")
        + (1).to_bytes(8, "little")
        + (4).to_bytes(8, "little")
    )
    expected = b"\x1e\x05\x00" + (7).to_bytes(4, "little") + bytes(4) + (4).to_bytes(8, "little")
    expected += len(data).to_bytes(4, "little") + data
    assert payload == expected


def test_com_binlog_dump_gtid_with_file_and_without_gtid_data():
    payload = P.com_binlog_dump_gtid(b"", 5, flags=0, file="bin.000002", position=120)
    assert payload == b"\x1e\x00\x00\x05\x00\x00\x00\x0a\x00\x00\x00bin.000002" + (120).to_bytes(8, "little")


def test_com_binlog_dump():
    payload = P.com_binlog_dump("mysql-bin.000003", 154, 1234, P.BINLOG_SEND_ANNOTATE_ROWS_EVENT)
    assert payload == bytes.fromhex("129a0000000200d2040000") + b"mysql-bin.000003"
    with pytest.raises(ValueError):
        P.com_binlog_dump("f", 1 << 32, 1)


def test_com_register_slave():
    payload = P.com_register_slave(1234, "replica-1", "u", "", 3307)
    assert payload == (
        b"\x15"
        + (1234).to_bytes(4, "little")
        + b"\x09replica-1"
        + b"\x01u"
        + b"\x00"
        + (3307).to_bytes(2, "little")
        + bytes(4)  # rank
        + bytes(4)  # master id
    )


def test_com_query():
    assert P.com_query("set names 'binary'") == b"\x03set names 'binary'"


# ------------------------------------------------------------------------------------------ framing
def test_frame_small_and_empty():
    assert P.frame_packet(b"\x03abc", 0) == (b"\x04\x00\x00\x00\x03abc", 1)
    assert P.frame_packet(b"", 255) == (b"\x00\x00\x00\xff", 0)


def test_frame_exactly_max_payload():
    payload = bytes([7]) * 0xFFFFFF
    data, seq = P.frame_packet(payload, 3)
    assert seq == 5
    assert data[:4] == b"\xff\xff\xff\x03"
    assert data[4 : 4 + 0xFFFFFF] == payload
    assert data[4 + 0xFFFFFF :] == b"\x00\x00\x00\x04"  # the empty packet that ends it
    assert unframe(data) == [(3, payload), (4, b"")]
    reader = P.PacketReader(1 << 16)
    reader.seq = 3
    for i in range(0, len(data), 1 << 20):
        assert reader.next_packet() is None
        reader.feed(data[i : i + (1 << 20)])
    assert reader.next_packet() == payload
    assert reader.next_packet() is None and reader.seq == 5


def test_frame_and_rejoin_20_mb():
    payload = bytes(range(256)) * (20 * 1024 * 1024 // 256)
    data, seq = P.frame_packet(payload, 0)
    packets = unframe(data)
    assert [(s, len(p)) for s, p in packets] == [(0, 0xFFFFFF), (1, len(payload) - 0xFFFFFF)]
    assert seq == 2
    assert b"".join(p for _, p in packets) == payload
    # Re-joined from recv_into-sized pieces, followed by a small packet in the same buffer.
    tail, _ = P.frame_packet(b"\x00next", 2)
    stream = data + tail
    reader = P.PacketReader(1 << 16)
    got = []
    i = 0
    while len(got) < 2:
        item = reader.next_body()
        if item is not None:
            got.append(item)
            continue
        assert reader.needed() > 0
        view = reader.write_buffer(reader.needed())
        n = min(len(view), len(stream) - i, 3 << 20)
        view[:n] = stream[i : i + n]
        reader.advance(n)
        i += n
    assert got[0] == (payload[0], payload[1:])
    assert got[1] == (0, b"next")
    assert reader.buffered == 0 and reader.seq == 3


def test_reader_sequence_mismatch():
    reader = P.PacketReader()
    reader.feed(P.frame_packet(b"abc", 2)[0])
    with pytest.raises(ProtocolError, match="sequence"):
        reader.next_packet()


def test_reader_many_small_packets_across_compactions():
    reader = P.PacketReader(64)
    seq = 0
    stream = bytearray()
    payloads = [bytes([i % 251]) * (i % 40) for i in range(500)]
    for p in payloads:
        data, seq = P.frame_packet(p, seq)
        stream += data
    out = []
    i = 0
    while len(out) < len(payloads):
        pkt = reader.next_packet()
        if pkt is not None:
            out.append(pkt)
            continue
        view = reader.write_buffer(reader.needed())
        n = min(len(view), 37, len(stream) - i)
        view[:n] = stream[i : i + n]
        reader.advance(n)
        i += n
    assert out == payloads


# ------------------------------------------------------------------------------------------ replies
def test_parse_err_with_sqlstate():
    err = P.parse_err(b"\xff\x15\x04#28000Access denied for user 'x'@'localhost' (using password: YES)")
    assert (err.errno, err.sqlstate) == (1045, "28000")
    assert err.message == "Access denied for user 'x'@'localhost' (using password: YES)"


def test_parse_err_binlog_purged_on_the_stream():
    body = b"\xd4\x04#HY000Could not find first log file name in binary log index file"
    err = P.parse_err(body, offset=0)
    assert (err.errno, err.sqlstate) == (1236, "HY000")
    exc = dump_error(err.errno, err.sqlstate, err.message)
    assert isinstance(exc, BinlogPurgedError) and isinstance(exc, BinlogDumpError)
    assert exc.errno == 1236
    other = dump_error(1198, "HY000", "x")
    assert type(other) is BinlogDumpError


def test_parse_err_without_sqlstate_marker():
    err = P.parse_err(b"\xff\x10\x04Too many connections")
    assert (err.errno, err.sqlstate, err.message) == (1040, "HY000", "Too many connections")
    with pytest.raises(ProtocolError):
        P.parse_err(b"\xff\x10")


def test_parse_ok_and_eof():
    ok = P.parse_ok(b"\x00\x01\xfc\x10\x27\x02\x00\x03\x00info")
    assert (ok.affected_rows, ok.last_insert_id, ok.status, ok.warnings, ok.info) == (1, 10000, 2, 3, b"info")
    assert P.is_eof(b"\xfe\x00\x00\x02\x00")
    assert not P.is_eof(b"\xfe" + bytes(8))
    eof = P.parse_eof(b"\xfe\x01\x00\x22\x00")
    assert (eof.warnings, eof.status) == (1, 0x22)
    with pytest.raises(ServerError) as info:
        P.raise_for_err(b"\xff\x48\x04#42000bad")
    assert info.value.errno == 1096


def test_lenenc_roundtrip():
    for v in (0, 250, 251, 65535, 65536, (1 << 24) - 1, 1 << 24, (1 << 64) - 1):
        raw = P.lenenc_int(v) + b"x"
        assert P.read_lenenc_int(raw, 0) == (v, len(raw) - 1)
    assert P.read_lenenc_int(b"\xfb", 0) == (None, 1)


def _lenenc_str(b: bytes) -> bytes:
    return P.lenenc_int(len(b)) + b


def test_query_result_reader():
    def coldef(name: bytes) -> bytes:
        return (
            b"".join(_lenenc_str(x) for x in (b"def", b"", b"", b"", name, b""))
            + b"\x0c\x3f\x00\x00\x00\x00\x00\xfd\x00\x00\x00\x00\x00"
        )

    r = P.QueryResultReader()
    packets = [
        b"\x02",
        coldef(b"a"),
        coldef(b"b"),
        b"\xfe\x00\x00\x02\x00",
        _lenenc_str(b"CRC32") + b"\xfb",
        _lenenc_str(b"x" * 300) + _lenenc_str(b""),
        b"\xfe\x00\x00\x02\x00",
    ]
    done = [r.receive(p) for p in packets]
    assert done == [False] * 6 + [True]
    assert r.result.columns == ["a", "b"]
    assert r.result.rows == [(b"CRC32", None), (b"x" * 300, b"")]
    r = P.QueryResultReader()
    assert r.receive(b"\x00\x00\x00\x02\x00\x00\x00")
    assert r.result.ok is not None and not r.result.rows
    with pytest.raises(ServerError):
        P.QueryResultReader().receive(b"\xff\x28\x04#42000You have an error")
