"""The value of a protobuf-mode record (``canal.mq.flatMessage = false``): a Canal ``Packet``.

``CanalMessageSerializerUtil.serializer`` has two shapes, and which one a record gets depends on
the route, not on a setting a consumer can see:

* a raw batch (the store keeps serialized entries, ``canal.instance.memory.rawEntry = true``, Canal's
  default) sent whole -- no ``partitionHash``, no ``dynamicTopic``: ``Packet{type=MESSAGES,
  body=Messages{batch_id, messages}}``, written field by field (``batch_id`` always written, no
  ``version``), every entry as stored, transaction begin/end included;
* every other batch (split by partition or topic, or a parsed store): ``Packet{version=1,
  type=MESSAGES, body=Messages{messages}}`` with **no batch id**, transaction begin/end dropped
  when ``canal.instance.filter.transaction.entry`` is on.

Both parse with ``CanalPacket.Packet`` + ``Messages``, as Canal's MQ consumers do.
"""

from __future__ import annotations

from collections.abc import Sequence

from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.wire import field_bytes, messages_packet_parts, varint_field

__all__ = ["entries_packet_bytes", "entry_bytes", "packet_bytes", "raw_packet_bytes"]

_TRANSACTION = (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND)


def entry_bytes(entry: bytes | pb.Entry) -> bytes:
    """An entry's bytes: as stored when raw, else serialized (the best a parsed entry allows)."""
    return bytes(entry) if isinstance(entry, (bytes, bytearray, memoryview)) else entry.SerializeToString()


def raw_packet_bytes(batch_id: int, entries: Sequence[bytes]) -> bytes:
    """The raw shape, for entries as stored."""
    return b"".join(messages_packet_parts(batch_id, entries)[0])


def entries_packet_bytes(entries: Sequence[bytes], filter_transaction_entry: bool) -> bytes:
    """The parsed shape: version 1, no batch id. Canal's proto2 ``Entry`` reads a missing
    ``entryType`` as ROWDATA, so only entries that say TRANSACTIONBEGIN/END are filtered."""
    body = b"".join(
        field_bytes(0x12, e)
        for e in entries
        if not (filter_transaction_entry and varint_field(e, 2, pb.ROWDATA) in _TRANSACTION)
    )
    return cp.Packet(version=1, type=cp.MESSAGES, body=body).SerializeToString()


def packet_bytes(
    batch_id: int, entries: Sequence[bytes | pb.Entry], raw: bool, filter_transaction_entry: bool
) -> bytes | None:
    """``serializer(message, filterTransactionEntry)``; None where Canal returns null (batch -1 or
    no entries)."""
    if batch_id == -1 or not entries:
        return None
    data = [entry_bytes(e) for e in entries]
    if raw:
        return raw_packet_bytes(batch_id, data)
    return entries_packet_bytes(data, filter_transaction_entry)
