"""GTID sets and the GTID-related binlog event bodies of MySQL and MariaDB.

Everything here is a pure function over ``bytes`` / ``str``; nothing does I/O.

MySQL
    * :class:`MysqlGtidSet` -- the ``gtid_executed`` style set ``uuid[:tag]:1-5:7``, with the
      text form the server prints and the binary form used by ``COM_BINLOG_DUMP_GTID`` and by
      ``PREVIOUS_GTIDS_LOG_EVENT`` (both the classic layout and the tagged layout of 8.3+).
    * :func:`decode_mysql_gtid_event` -- ``GTID_LOG_EVENT`` (33), ``ANONYMOUS_GTID_LOG_EVENT``
      (34) and ``GTID_TAGGED_LOG_EVENT`` (42, the ``mysql::serialization`` message format).
    * :func:`decode_previous_gtids_event` -- ``PREVIOUS_GTIDS_LOG_EVENT`` (35).

MariaDB
    * :class:`MariadbGtid` / :class:`MariadbGtidSet` -- ``domain-server-seq`` and a position made
      of at most one GTID per replication domain (the text of ``@slave_connect_state``).
    * :func:`decode_mariadb_gtid_event` (162), :func:`decode_mariadb_gtid_list_event` (163),
      :func:`decode_binlog_checkpoint_event` (161).

An event *body* is the event bytes after the 19-byte common header, without the trailing CRC32.
Bad input of any kind raises :class:`~pycanal.binlog.errors.BinlogError`; the message names the
field and the byte position inside the body (``offset`` is left for the caller to set to the
event's position).

The package: :mod:`.mysql` (MySQL's sets and events, with their binary layouts),
:mod:`.mariadb` (MariaDB's), :mod:`._common` (UUIDs, tags and the serialization varlen).
"""

from ._common import GNO_END, MAX_GNO
from .mariadb import (
    MariadbBinlogCheckpointEvent,
    MariadbGtid,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    MariadbGtidSet,
    MariadbXid,
    decode_binlog_checkpoint_event,
    decode_mariadb_gtid_event,
    decode_mariadb_gtid_list_event,
)
from .mysql import (
    MysqlGtidEvent,
    MysqlGtidSet,
    MysqlPreviousGtidsEvent,
    decode_mysql_gtid_event,
    decode_previous_gtids_event,
)

__all__ = [
    "GNO_END",
    "MAX_GNO",
    "MariadbBinlogCheckpointEvent",
    "MariadbGtid",
    "MariadbGtidEvent",
    "MariadbGtidListEvent",
    "MariadbGtidSet",
    "MariadbXid",
    "MysqlGtidEvent",
    "MysqlGtidSet",
    "MysqlPreviousGtidsEvent",
    "decode_binlog_checkpoint_event",
    "decode_mariadb_gtid_event",
    "decode_mariadb_gtid_list_event",
    "decode_mysql_gtid_event",
    "decode_previous_gtids_event",
]
