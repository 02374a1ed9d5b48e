"""pycanal.protocol: the .proto files, their generated modules and Canal's wire format.

* the committed ``*_pb2.py`` are exactly what ``scripts/gen_proto.sh`` generates;
* every field number, type, label, oneof and enum number is the one of the fact sheet
  (research/canal.md sections 2.2 and 2.3), checked against the descriptors;
* every message type round-trips (message -> bytes -> message, and bytes -> message -> bytes);
* a few hand-assembled byte strings (tags written out) parse as Canal writes them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor as FD

from pycanal.protocol import CanalEntry, CanalPacket, CanalProtocol_pb2, EntryProtocol_pb2

REPO = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO / "src" / "pycanal" / "protocol"
PACKAGE = "com.alibaba.otter.canal.protocol"

# --------------------------------------------------------------------------- fact sheet
# message -> field -> (number, type, repeated, oneof name or None)
S, B, I32, I64, BOOL, ENUM, MSG = (
    FD.TYPE_STRING,
    FD.TYPE_BYTES,
    FD.TYPE_INT32,
    FD.TYPE_INT64,
    FD.TYPE_BOOL,
    FD.TYPE_ENUM,
    FD.TYPE_MESSAGE,
)

ENTRY_FIELDS = {
    "Entry": {
        "header": (1, MSG, False, None),
        "entryType": (2, ENUM, False, "entryType_present"),
        "storeValue": (3, B, False, None),
    },
    "Header": {
        "version": (1, I32, False, "version_present"),
        "logfileName": (2, S, False, None),
        "logfileOffset": (3, I64, False, None),
        "serverId": (4, I64, False, None),
        "serverenCode": (5, S, False, None),
        "executeTime": (6, I64, False, None),
        "sourceType": (7, ENUM, False, "sourceType_present"),
        "schemaName": (8, S, False, None),
        "tableName": (9, S, False, None),
        "eventLength": (10, I64, False, None),
        "eventType": (11, ENUM, False, "eventType_present"),
        "props": (12, MSG, True, None),
        "gtid": (13, S, False, None),
    },
    "Column": {
        "index": (1, I32, False, None),
        "sqlType": (2, I32, False, None),
        "name": (3, S, False, None),
        "isKey": (4, BOOL, False, None),
        "updated": (5, BOOL, False, None),
        "isNull": (6, BOOL, False, "isNull_present"),
        "props": (7, MSG, True, None),
        "value": (8, S, False, None),
        "length": (9, I32, False, None),
        "mysqlType": (10, S, False, None),
    },
    "RowData": {
        "beforeColumns": (1, MSG, True, None),
        "afterColumns": (2, MSG, True, None),
        "props": (3, MSG, True, None),
    },
    "RowChange": {
        "tableId": (1, I64, False, None),
        "eventType": (2, ENUM, False, "eventType_present"),
        "isDdl": (10, BOOL, False, "isDdl_present"),
        "sql": (11, S, False, None),
        "rowDatas": (12, MSG, True, None),
        "props": (13, MSG, True, None),
        "ddlSchemaName": (14, S, False, None),
    },
    "TransactionBegin": {
        "executeTime": (1, I64, False, None),
        "transactionId": (2, S, False, None),
        "props": (3, MSG, True, None),
        "threadId": (4, I64, False, None),
    },
    "TransactionEnd": {
        "executeTime": (1, I64, False, None),
        "transactionId": (2, S, False, None),
        "props": (3, MSG, True, None),
    },
    "Pair": {"key": (1, S, False, None), "value": (2, S, False, None)},
}
ENTRY_ENUMS = {
    "EntryType": [
        "ENTRYTYPECOMPATIBLEPROTO2",
        "TRANSACTIONBEGIN",
        "ROWDATA",
        "TRANSACTIONEND",
        "HEARTBEAT",
        "GTIDLOG",
    ],
    "EventType": [
        "EVENTTYPECOMPATIBLEPROTO2",
        "INSERT",
        "UPDATE",
        "DELETE",
        "CREATE",
        "ALTER",
        "ERASE",
        "QUERY",
        "TRUNCATE",
        "RENAME",
        "CINDEX",
        "DINDEX",
        "GTID",
        "XACOMMIT",
        "XAROLLBACK",
        "MHEARTBEAT",
    ],
    "Type": ["TYPECOMPATIBLEPROTO2", "ORACLE", "MYSQL", "PGSQL"],
}
ENTRY_MESSAGE_TYPES = {("Entry", "header"): "Header"} | {
    (m, f): "Pair" for m in ENTRY_FIELDS for f in ENTRY_FIELDS[m] if f == "props"
}
ENTRY_MESSAGE_TYPES |= {("RowData", "beforeColumns"): "Column", ("RowData", "afterColumns"): "Column"}
ENTRY_MESSAGE_TYPES |= {("RowChange", "rowDatas"): "RowData"}
ENTRY_ENUM_TYPES = {
    ("Entry", "entryType"): "EntryType",
    ("Header", "sourceType"): "Type",
    ("Header", "eventType"): "EventType",
    ("RowChange", "eventType"): "EventType",
}

PACKET_FIELDS = {
    "Packet": {
        "magic_number": (1, I32, False, "magic_number_present"),
        "version": (2, I32, False, "version_present"),
        "type": (3, ENUM, False, None),
        "compression": (4, ENUM, False, "compression_present"),
        "body": (5, B, False, None),
    },
    "HeartBeat": {"send_timestamp": (1, I64, False, None), "start_timestamp": (2, I64, False, None)},
    "Handshake": {
        "communication_encoding": (1, S, False, "communication_encoding_present"),
        "seeds": (2, B, False, None),
        "supported_compressions": (3, ENUM, False, None),
    },
    "ClientAuth": {
        "username": (1, S, False, None),
        "password": (2, B, False, None),
        "net_read_timeout": (3, I32, False, "net_read_timeout_present"),
        "net_write_timeout": (4, I32, False, "net_write_timeout_present"),
        "destination": (5, S, False, None),
        "client_id": (6, S, False, None),
        "filter": (7, S, False, None),
        "start_timestamp": (8, I64, False, None),
    },
    "Ack": {"error_code": (1, I32, False, "error_code_present"), "error_message": (2, S, False, None)},
    "ClientAck": {
        "destination": (1, S, False, None),
        "client_id": (2, S, False, None),
        "batch_id": (3, I64, False, None),
    },
    "Sub": {
        "destination": (1, S, False, None),
        "client_id": (2, S, False, None),
        "filter": (7, S, False, None),
    },
    "Unsub": {
        "destination": (1, S, False, None),
        "client_id": (2, S, False, None),
        "filter": (7, S, False, None),
    },
    "Get": {
        "destination": (1, S, False, None),
        "client_id": (2, S, False, None),
        "fetch_size": (3, I32, False, None),
        "timeout": (4, I64, False, "timeout_present"),
        "unit": (5, I32, False, "unit_present"),
        "auto_ack": (6, BOOL, False, "auto_ack_present"),
    },
    "Messages": {"batch_id": (1, I64, False, None), "messages": (2, B, True, None)},
    "Dump": {
        "journal": (1, S, False, None),
        "position": (2, I64, False, None),
        "timestamp": (3, I64, False, "timestamp_present"),
    },
    "ClientRollback": {
        "destination": (1, S, False, None),
        "client_id": (2, S, False, None),
        "batch_id": (3, I64, False, None),
    },
}
PACKET_ENUMS = {
    "Compression": ["COMPRESSIONCOMPATIBLEPROTO2", "NONE", "ZLIB", "GZIP", "LZF"],
    # 11 is Canal's HEARTBEAT, renamed because EntryType.HEARTBEAT owns the name in the package.
    "PacketType": [
        "PACKAGETYPECOMPATIBLEPROTO2",
        "HANDSHAKE",
        "CLIENTAUTHENTICATION",
        "ACK",
        "SUBSCRIPTION",
        "UNSUBSCRIPTION",
        "GET",
        "MESSAGES",
        "CLIENTACK",
        "SHUTDOWN",
        "DUMP",
        "HEARTBEATS",
        "CLIENTROLLBACK",
    ],
}
PACKET_ENUM_TYPES = {
    ("Packet", "type"): "PacketType",
    ("Packet", "compression"): "Compression",
    ("Handshake", "supported_compressions"): "Compression",
}

FILES = [
    (EntryProtocol_pb2, "EntryProtocol.proto", "CanalEntry", ENTRY_FIELDS, ENTRY_ENUMS, ENTRY_ENUM_TYPES),
    (CanalProtocol_pb2, "CanalProtocol.proto", "CanalPacket", PACKET_FIELDS, PACKET_ENUMS, PACKET_ENUM_TYPES),
]


@pytest.mark.parametrize(
    ("module", "name", "outer", "fields", "enums", "enum_types"), FILES, ids=["entry", "packet"]
)
def test_descriptors_match_the_fact_sheet(module, name, outer, fields, enums, enum_types):
    fd = module.DESCRIPTOR
    assert fd.name == name
    assert fd.package == PACKAGE
    proto = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(proto)
    assert proto.syntax == "proto3"
    assert proto.options.java_package == PACKAGE
    assert proto.options.java_outer_classname == outer
    assert list(proto.dependency) == []

    assert set(fd.message_types_by_name) == set(fields)
    for msg_name, expected in fields.items():
        msg = fd.message_types_by_name[msg_name]
        assert {f.name for f in msg.fields} == set(expected), msg_name
        for field_name, (number, ftype, repeated, oneof) in expected.items():
            f = msg.fields_by_name[field_name]
            where = f"{msg_name}.{field_name}"
            assert f.number == number, where
            assert f.type == ftype, where
            assert f.is_repeated == repeated, where
            real_oneof = f.containing_oneof
            if oneof is None:
                assert real_oneof is None, where
                # plain proto3 scalars: no explicit presence (zero values are not written)
                if not repeated and ftype != MSG:
                    assert not f.has_presence, where
            else:
                assert real_oneof is not None and real_oneof.name == oneof, where
                assert [x.name for x in real_oneof.fields] == [field_name], where
                assert f.has_presence, where
            if ftype == MSG:
                expected_type = ENTRY_MESSAGE_TYPES.get((msg_name, field_name))
                assert f.message_type.full_name == f"{PACKAGE}.{expected_type}", where
            if ftype == ENUM:
                assert f.enum_type.full_name == f"{PACKAGE}.{enum_types[(msg_name, field_name)]}", where

    assert set(fd.enum_types_by_name) == set(enums)
    for enum_name, names in enums.items():
        values = fd.enum_types_by_name[enum_name].values
        assert [(v.name, v.number) for v in values] == [(n, i) for i, n in enumerate(names)], enum_name


def test_both_files_share_one_descriptor_pool():
    # Same package: importing both must not clash (the reason for PacketType.HEARTBEATS).
    assert EntryProtocol_pb2.DESCRIPTOR.pool is CanalProtocol_pb2.DESCRIPTOR.pool
    assert EntryProtocol_pb2.HEARTBEAT == 4
    assert CanalProtocol_pb2.HEARTBEATS == 11
    assert CanalEntry is EntryProtocol_pb2 and CanalPacket is CanalProtocol_pb2


# --------------------------------------------------------------------------- round trips
def _fill(msg, depth: int = 0) -> None:
    """Set every field of ``msg`` to a non-default value (recursively, two repeated items)."""
    for f in msg.DESCRIPTOR.fields:
        n = f.number
        if f.type == MSG:
            if f.is_repeated:
                for _ in range(2):
                    _fill(getattr(msg, f.name).add(), depth + 1)
            else:
                _fill(getattr(msg, f.name), depth + 1)
            continue
        if f.type == ENUM:
            value = f.enum_type.values[-1].number
        elif f.type == BOOL:
            value = True
        elif f.type == S:
            value = f"{f.name}-{depth}-\u00e9\u4e2d"
        elif f.type == B:
            value = bytes([n, 0, 255, depth])
        elif f.type == I64:
            value = -(2**40) - n
        else:
            value = 2**30 + n
        if f.is_repeated:
            getattr(msg, f.name).extend([value, value])
        else:
            setattr(msg, f.name, value)


ALL_MESSAGES = [(module, name) for module, *_ in FILES for name in module.DESCRIPTOR.message_types_by_name]


@pytest.mark.parametrize(("module", "name"), ALL_MESSAGES, ids=[n for _, n in ALL_MESSAGES])
def test_every_message_round_trips(module, name):
    cls = getattr(module, name)
    msg = cls()
    _fill(msg)
    data = msg.SerializeToString(deterministic=True)
    back = cls.FromString(data)
    assert back == msg
    assert back.SerializeToString(deterministic=True) == data
    for f in cls.DESCRIPTOR.fields:
        if f.is_repeated:
            assert len(getattr(back, f.name)) == 2
        elif f.has_presence:
            assert back.HasField(f.name), f.name
    # an empty message is empty on the wire, and a oneof scalar set to its zero value is not
    assert cls().SerializeToString() == b""
    zero = cls()
    for oneof in cls.DESCRIPTOR.oneofs:
        field = oneof.fields[0]
        if field.type != MSG:
            setattr(zero, field.name, field.default_value)
    zero_back = cls.FromString(zero.SerializeToString())
    for oneof in cls.DESCRIPTOR.oneofs:
        assert zero_back.WhichOneof(oneof.name) == oneof.fields[0].name


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _ld(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def test_hand_assembled_entry_bytes_parse_as_canal_writes_them():
    column = (
        _tag(1, 0)
        + _varint(3)  # index
        + _tag(2, 0)
        + _varint(-5)  # sqlType BIGINT: negative int32 is a 10-byte varint
        + _ld(3, b"id")
        + _tag(4, 0)
        + b"\x01"  # isKey
        + _tag(6, 0)
        + b"\x00"  # isNull = false, explicitly present
        + _ld(8, b"42")
        + _ld(10, b"bigint(20)")
    )
    row_change = (
        _tag(1, 0) + _varint(77) + _tag(2, 0) + _varint(1) + _tag(10, 0) + b"\x00" + _ld(12, _ld(2, column))
    )
    header = (
        _tag(1, 0)
        + b"\x01"
        + _ld(2, b"mysql-bin.000004")
        + _tag(3, 0)
        + _varint(785)
        + _tag(4, 0)
        + _varint(1)
        + _ld(5, b"UTF-8")
        + _tag(6, 0)
        + _varint(1507701989000)
        + _tag(7, 0)
        + _varint(2)
        + _ld(8, b"canal_test")
        + _ld(9, b"test")
        + _tag(10, 0)
        + _varint(37)
        + _tag(11, 0)
        + _varint(1)
        + _ld(12, _ld(1, b"rowsCount") + _ld(2, b"1"))
    )
    raw = _ld(1, header) + _tag(2, 0) + _varint(2) + _ld(3, row_change)
    entry = CanalEntry.Entry.FromString(raw)
    h = entry.header
    assert (h.version, h.logfileName, h.logfileOffset, h.serverId) == (1, "mysql-bin.000004", 785, 1)
    assert (h.serverenCode, h.executeTime, h.sourceType) == ("UTF-8", 1507701989000, CanalEntry.MYSQL)
    assert (h.schemaName, h.tableName, h.eventLength, h.eventType) == (
        "canal_test",
        "test",
        37,
        CanalEntry.INSERT,
    )
    assert [(p.key, p.value) for p in h.props] == [("rowsCount", "1")]
    assert entry.entryType == CanalEntry.ROWDATA
    change = CanalEntry.RowChange.FromString(entry.storeValue)
    assert (change.tableId, change.eventType, change.HasField("isDdl"), change.isDdl) == (
        77,
        CanalEntry.INSERT,
        True,
        False,
    )
    (col,) = change.rowDatas[0].afterColumns
    assert (col.index, col.sqlType, col.name, col.isKey, col.value, col.mysqlType) == (
        3,
        -5,
        "id",
        True,
        "42",
        "bigint(20)",
    )
    assert col.HasField("isNull") and not col.isNull
    # and protobuf writes the same bytes back (fields in number order, as Canal's Java does)
    assert entry.SerializeToString() == raw


def test_raw_messages_packet_layout():
    """Canal's raw GET answer: ``18 07 2A len (08 batch_id (12 len entry)*)`` with no version."""
    entries = [CanalEntry.Entry(entryType=CanalEntry.TRANSACTIONBEGIN).SerializeToString(), b"\x10\x03"]
    body = _tag(1, 0) + _varint(9) + b"".join(_ld(2, e) for e in entries)
    raw = b"\x18\x07" + _ld(5, body)
    packet = CanalPacket.Packet.FromString(raw)
    assert packet.type == CanalPacket.MESSAGES and not packet.HasField("version")
    messages = CanalPacket.Messages.FromString(packet.body)
    assert messages.batch_id == 9 and list(messages.messages) == entries
    assert CanalPacket.Packet(type=CanalPacket.MESSAGES, body=body).SerializeToString() == raw
    # the server's handshake: version=1 (field 2), type=HANDSHAKE, body=Handshake{seeds}
    hs = CanalPacket.Packet(
        version=1,
        type=CanalPacket.HANDSHAKE,
        body=CanalPacket.Handshake(seeds=b"12345678").SerializeToString(),
    )
    assert hs.SerializeToString() == b"\x10\x01\x18\x01" + _ld(5, _ld(2, b"12345678"))
    # an ACK with error_code 0 set explicitly still carries the field (oneof presence)
    assert CanalPacket.Ack(error_code=0).SerializeToString() == b"\x08\x00"
    get = CanalPacket.Get(
        destination="example", client_id="1001", fetch_size=100, timeout=-1, unit=2, auto_ack=False
    )
    assert CanalPacket.Get.FromString(get.SerializeToString()).WhichOneof("auto_ack_present") == "auto_ack"


# --------------------------------------------------------------------------- generation
def test_regenerating_gives_the_committed_modules(tmp_path):
    pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools (dev extra) regenerates the modules")
    if shutil.which("bash") is None:
        pytest.skip("scripts/gen_proto.sh needs bash")
    out = tmp_path / "gen"
    subprocess.run(
        ["bash", str(REPO / "scripts" / "gen_proto.sh"), str(out)],
        check=True,
        cwd=REPO,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
    )
    for name in ("EntryProtocol_pb2.py", "CanalProtocol_pb2.py"):
        assert (out / name).read_bytes() == (PROTO_DIR / name).read_bytes(), (
            f"{name} is stale: run scripts/gen_proto.sh"
        )


def test_generated_modules_mark_themselves_generated():
    for name in ("EntryProtocol_pb2.py", "CanalProtocol_pb2.py"):
        head = (PROTO_DIR / name).read_text(encoding="utf-8").splitlines()[:6]
        assert "# ruff: noqa" in head
        assert any("Generated by the protocol buffer compiler" in line for line in head)
