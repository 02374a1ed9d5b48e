"""Canal parity of the entries built from QUERY events, statement class by statement class.

Each row is what Canal emits for one statement, read from Canal's source at the commit the fact sheet
uses (alibaba/canal e20e4424, 1.1.9-SNAPSHOT): ``LogEventConvert.parseQueryEvent`` (LEC below) and
``DruidDdlParser.parse`` (DDP), Canal's default ``useDruidDdlFilter``. ``LEC:299`` is
``rowChangeBuilder.setIsDdl(!isDml)``: every QUERY-event entry Canal emits has isDdl set, true unless
the statement is INSERT/UPDATE/DELETE (Canal <= 1.1.4 left it unset for the QUERY type; 1.1.5
changed it, commit de1dd706). Every row was also run through Canal 1.1.7's own ``DruidDdlParser``
(``tests/test_canal_reference.py::test_ddl_classifier_as_canal``). Statements DDP names nothing in get no entry from Canal at all
(``LEC:278-280``); pycanal emits them as informational QUERY entries without isDdl (docs/
compatibility.md, "Canal parity").
"""

from __future__ import annotations

import pytest

from entry_oracle import EntryConverter
from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.store.event import Event

# (sql, session schema) -> (eventType, isDdl, header schemaName, header tableName); None: Canal drops it.
TABLE = [
    # -- table DDL: DDP's type and the first result's names (LEC:263-265), isDdl true (LEC:299)
    ("CREATE TABLE t (id int)", "shop", ("CREATE", True, "shop", "t")),  # DDP:60-65, processName DDP:190-215
    ("CREATE TABLE other.t (id int)", "shop", ("CREATE", True, "other", "t")),  # DDP:197-200 qualified name
    ("CREATE TEMPORARY TABLE tmp (id int)", "shop", ("CREATE", True, "shop", "tmp")),  # DDP:60
    ("CREATE TABLE `t2` LIKE t", "shop", ("CREATE", True, "shop", "t2")),  # DDP:60, unescapeName DDP:218
    ("ALTER TABLE t ADD COLUMN c int", "shop", ("ALTER", True, "shop", "t")),  # DDP:104-108 other items
    ("ALTER TABLE t ENGINE=InnoDB", "shop", ("ALTER", True, "shop", "t")),  # DDP:68-72 table options
    ("ALTER TABLE t ADD INDEX i (c), ENGINE=InnoDB", "shop", ("ALTER", True, "shop", "t")),  # DDP:68 first
    ("ALTER TABLE t ADD INDEX i (c), ADD COLUMN d int", "shop", ("CINDEX", True, "shop", "t")),  # DDP:81-85
    ("ALTER TABLE t ADD UNIQUE KEY u (c)", "shop", ("CINDEX", True, "shop", "t")),  # DDP:81/91-97 unique
    ("ALTER TABLE t ADD PRIMARY KEY (id)", "shop", ("CINDEX", True, "shop", "t")),  # DDP:91-97 (a SQLUnique)
    ("ALTER TABLE t DROP INDEX i", "shop", ("DINDEX", True, "shop", "t")),  # DDP:86-90
    ("ALTER TABLE t DROP KEY i", "shop", ("DINDEX", True, "shop", "t")),  # DDP:86-90 DropKey
    ("ALTER TABLE t DROP CONSTRAINT c", "shop", ("DINDEX", True, "shop", "t")),  # DDP:99-103
    ("ALTER TABLE t DROP PRIMARY KEY", "shop", ("ALTER", True, "shop", "t")),  # DDP:104-108 no DropIndex
    ("ALTER TABLE t DROP FOREIGN KEY fk", "shop", ("ALTER", True, "shop", "t")),  # DDP:104-108
    ("ALTER TABLE t RENAME TO t3", "shop", ("RENAME", True, "shop", "t3")),  # DDP:75-80 new name
    ("DROP TABLE IF EXISTS a, other.b", "shop", ("ERASE", True, "shop", "a")),  # DDP:111-118 first table
    ("CREATE INDEX i ON t (c)", "shop", ("CINDEX", True, "shop", "t")),  # DDP:119-125
    ("DROP INDEX i ON other.t", "shop", ("DINDEX", True, "other", "t")),  # DDP:126-132
    ("TRUNCATE TABLE t", "shop", ("TRUNCATE", True, "shop", "t")),  # DDP:133-140
    ("TRUNCATE t", "shop", ("TRUNCATE", True, "shop", "t")),  # DDP:133-140
    ("RENAME TABLE a TO b, c TO d", "shop", ("RENAME", True, "shop", "b")),  # DDP:141-149 first pair
    # -- database statements: QUERY named by the database (DDP:170-181), isDdl true (LEC:299)
    ("CREATE DATABASE inventory", "shop", ("QUERY", True, "inventory", "")),
    ("CREATE SCHEMA IF NOT EXISTS inventory", "", ("QUERY", True, "inventory", "")),
    ("DROP DATABASE IF EXISTS inventory", "shop", ("QUERY", True, "inventory", "")),
    # -- statement DML (STATEMENT/MIXED binlogs): isDdl false (LEC:283, 299), the table written
    ("INSERT INTO t VALUES (1)", "shop", ("INSERT", False, "shop", "t")),  # DDP:150-155
    ("UPDATE other.t SET c = 1", "shop", ("UPDATE", False, "other", "t")),  # DDP:156-162
    # DDP:158-161 update.getTableName(): Druid 1.2.17 (Canal 1.1.7) gives a join's left table when it
    # is a plain table, so two table sources name the first, three (a nested join) none -- seen live
    # (tests/test_canal_reference.py); this row said "no table" before.
    ("UPDATE a JOIN b ON a.id = b.id SET a.c = 1", "shop", ("UPDATE", False, "shop", "a")),
    ("UPDATE a, b, c SET a.c = 1", "shop", ("UPDATE", False, "shop", "")),
    ("DELETE FROM t WHERE id = 1", "shop", ("DELETE", False, "shop", "t")),  # DDP:163-169
    # DDP:167 delete.getTableName(): the one target (as written, an alias too), none for several
    ("DELETE t1 FROM t t1 JOIN u ON t1.id = u.id", "shop", ("DELETE", False, "shop", "t1")),
    ("DELETE FROM t USING t JOIN u", "shop", ("DELETE", False, "shop", "t")),
    ("DELETE t, u FROM t JOIN u", "shop", ("DELETE", False, "shop", "")),
    # -- no DDP result, so no Canal entry (LEC:278-280): accounts, ALTER DATABASE, views, routines,
    #    triggers, events, savepoints inside a transaction, REPLACE (MySqlReplaceStatement is no
    #    SQLInsertStatement), maintenance statements; Druid parses all of these.
    ("CREATE USER 'u'@'%' IDENTIFIED BY 'p'", "", None),
    ("GRANT SELECT, INSERT ON shop.* TO 'u'@'%'", "shop", None),
    ("REVOKE INSERT ON shop.* FROM 'u'@'%'", "shop", None),
    ("ALTER USER 'u'@'%' IDENTIFIED BY 'q'", "", None),
    ("DROP USER 'u'@'%'", "", None),
    ("SET PASSWORD FOR 'u'@'%' = PASSWORD('x')", "", None),
    ("CREATE ROLE r", "", None),
    ("ALTER DATABASE inventory CHARACTER SET utf8mb4", "shop", None),
    ("CREATE VIEW v AS SELECT 1", "shop", None),
    ("DROP VIEW v", "shop", None),
    ("CREATE PROCEDURE p() SELECT 1", "shop", None),
    ("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.c = 1", "shop", None),
    ("SAVEPOINT `s1`", "shop", None),
    ("ROLLBACK TO `s1`", "shop", None),
    ("REPLACE INTO t VALUES (1)", "shop", None),
    ("ANALYZE TABLE t", "shop", None),
]


def entries(conv: RawEntryConverter, event: ev.Event) -> list[pb.Entry]:
    """The production builder's entries of ``event`` as messages; their bytes are the protobuf
    oracle's."""
    raw = conv.convert(event)
    assert raw == [e.SerializeToString() for e in EntryConverter().convert(event)]
    return [pb.Entry.FromString(data) for data in raw]


def _query(sql: str, schema: str) -> ev.QueryEvent:
    return ev.QueryEvent(E.QUERY, 1700000000, 3, 80, 1080, 0, 1000, "bin.000009", thread_id=7, schema=schema,
                         query=sql)  # fmt: skip


@pytest.mark.parametrize(("sql", "schema", "canal"), TABLE)
def test_query_entry_as_canal(sql: str, schema: str, canal: tuple | None) -> None:
    (entry,) = entries(RawEntryConverter(), _query(sql, schema))
    h = entry.header
    change = pb.RowChange.FromString(entry.storeValue)
    assert entry.entryType == pb.ROWDATA
    assert change.sql == sql  # LEC:300
    assert change.ddlSchemaName == schema  # LEC:301-303: the session database when there is one
    assert not change.rowDatas
    got = (pb.EventType.Name(h.eventType), h.schemaName, h.tableName)
    if canal is None:
        # pycanal's informational QUERY: the shape of Canal's buildQueryEntry (LEC:899-905), no isDdl
        assert got == ("QUERY", "", "") and not change.HasField("isDdl")
        assert change.eventType == pb.QUERY
    else:
        event_type, is_ddl, schema_name, table_name = canal
        assert got == (event_type, schema_name, table_name)
        assert pb.EventType.Name(change.eventType) == event_type
        assert change.HasField("isDdl") and change.isDdl is is_ddl
    # The store classifies by event type only (MemoryEventStoreWithBuffer.isDdl): QUERY entries are
    # neither ack points nor DDL batches of their own.
    assert Event.from_entry(entry).is_ddl is (canal is not None and canal[0] not in ("QUERY", "INSERT",
                                                                                     "UPDATE", "DELETE"))  # fmt: skip


def test_transaction_markers_as_canal() -> None:
    conv = RawEntryConverter()
    # LEC:240-247: endsWithIgnoreCase BEGIN / COMMIT, whatever precedes it
    assert [e.entryType for e in entries(conv, _query("BEGIN", "shop"))] == [pb.TRANSACTIONBEGIN]
    assert [e.entryType for e in entries(conv, _query("COMMIT", ""))] == [pb.TRANSACTIONEND]
    # LEC:222-239: XA COMMIT / ROLLBACK are ROWDATA entries without isDdl
    (xa,) = entries(conv, _query("XA COMMIT X'01',X'',1", ""))
    change = pb.RowChange.FromString(xa.storeValue)
    assert (change.eventType, change.HasField("isDdl")) == (pb.XACOMMIT, False)
