"""Canal entries (``RawEntryConverter``, parsed back into messages) against a live private MariaDB (binlog_row_metadata=FULL): every column family
in INSERT/UPDATE/DELETE, TIMESTAMP in UTC and in configured zones, transactions opened by GTID
events, XA, a non-transactional COMMIT, DDL, and the transaction buffer over the stream.

Statements run over ``root_connection`` (session time zone +00:00); the binlog file is rotated
afterwards and read from the position taken before the statements.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from entry_oracle import EntryConverter
from pycanal.binlog import read_events
from pycanal.parse.buffer import TransactionBuffer
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.protocol import CanalEntry as C
from pycanal.store.event import Event
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb

BIT, TINYINT, BIGINT, CHAR, DECIMAL, INTEGER, SMALLINT = -7, -6, -5, 1, 3, 4, 5
REAL, DOUBLE, VARCHAR, DATE, TIME, TIMESTAMP, BLOB, CLOB = 7, 8, 12, 91, 92, 93, 2004, 2005

COLUMNS = """
 id INT PRIMARY KEY,
 ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
 i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
 f FLOAT, d DOUBLE, dec1 DECIMAL(20,6), dec2 DECIMAL(10,0),
 b1 BIT(1), b12 BIT(12),
 dt DATETIME, dt3 DATETIME(3), ts TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL, t TIME, t2 TIME(2), da DATE, y YEAR,
 e ENUM('a','b','c'), st SET('x','y','z'),
 c CHAR(5), vc VARCHAR(20), bn BINARY(4), vb VARBINARY(8),
 tt TINYTEXT, tx TEXT, bl BLOB, lb LONGBLOB, j JSON
"""

# (name, mysqlType, sqlType of a NULL, sqlType and value of row 1)
ROW1 = [
    ("id", "int", INTEGER, INTEGER, "1"),
    ("ti", "tinyint", TINYINT, TINYINT, "-128"),
    ("tiu", "tinyint unsigned", TINYINT, SMALLINT, "255"),  # unsigned >= 2^7: widened
    ("si", "smallint", SMALLINT, SMALLINT, "-32768"),
    ("siu", "smallint unsigned", SMALLINT, INTEGER, "65535"),
    ("mi", "mediumint", INTEGER, INTEGER, "-8388608"),
    ("miu", "mediumint unsigned", INTEGER, INTEGER, "16777215"),
    ("i", "int", INTEGER, INTEGER, "-2147483648"),
    ("iu", "int unsigned", INTEGER, BIGINT, "4294967295"),
    ("bi", "bigint", BIGINT, BIGINT, "-9223372036854775808"),
    ("biu", "bigint unsigned", BIGINT, DECIMAL, "18446744073709551615"),  # BIGINT UNSIGNED max -> DECIMAL
    ("f", "float", REAL, REAL, "1.5"),
    ("d", "double", DOUBLE, DOUBLE, "1.0E10"),
    ("dec1", "decimal(20,6)", DECIMAL, DECIMAL, "-12345.678900"),
    ("dec2", "decimal(10,0)", DECIMAL, DECIMAL, "42"),
    ("b1", "bit(1)", BIT, BIT, "1"),
    ("b12", "bit(12)", BIT, BIT, "2730"),
    ("dt", "datetime", TIMESTAMP, TIMESTAMP, "2024-02-29 12:34:56"),
    ("dt3", "datetime(3)", TIMESTAMP, TIMESTAMP, "2024-02-29 12:34:56.789"),
    ("ts", "timestamp", TIMESTAMP, TIMESTAMP, "2024-03-10 07:30:00"),
    ("ts6", "timestamp(6)", TIMESTAMP, TIMESTAMP, "2024-01-01 00:00:00.123456"),
    ("t", "time", TIME, TIME, "-838:59:59"),
    ("t2", "time(2)", TIME, TIME, "12:34:56.78"),
    ("da", "date", DATE, DATE, "2024-02-29"),
    ("y", "year", VARCHAR, VARCHAR, "2024"),
    ("e", "enum('a','b','c')", INTEGER, INTEGER, "2"),  # 'b'
    ("st", "set('x','y','z')", BLOB, BIT, "5"),  # 'x,z'; a NULL SET is BLOB (Canal)
    ("c", "char(5)", CHAR, CHAR, "ab"),
    ("vc", "varchar(20)", VARCHAR, VARCHAR, "héllo wörld"),
    ("bn", "binary(4)", BLOB, BLOB, "\x01\x02\x00\x00"),  # keeps its 0x00 padding
    ("vb", "varbinary(8)", BLOB, BLOB, "\x00\xff\x80"),  # bytes as ISO-8859-1
    ("tt", "tinytext", CLOB, CLOB, "tiny"),
    ("tx", "text", CLOB, CLOB, "中文"),
    ("bl", "blob", BLOB, BLOB, "\xde\xad\xbe\xef"),
    ("lb", "longblob", BLOB, BLOB, ""),
    ("j", "longtext", CLOB, CLOB, '{"a": [1, 2]}'),  # MariaDB's JSON is LONGTEXT
]
ROW1_SQL = """(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
  -9223372036854775808, 18446744073709551615, 1.5, 1e10, -12345.6789, 42, b'1', b'101010101010',
  '2024-02-29 12:34:56', '2024-02-29 12:34:56.789', '2024-03-10 07:30:00', '2024-01-01 00:00:00.123456',
  '-838:59:59', '12:34:56.78', '2024-02-29', 2024, 'b', 'x,z', 'ab', 'héllo wörld', X'0102', X'00FF80',
  'tiny', '中文', X'DEADBEEF', '', '{"a": [1, 2]}')"""


def brief(entry: C.Entry) -> tuple:
    h = entry.header
    event_type = C.EventType.Name(h.eventType) if h.HasField("eventType") else None
    return (C.EntryType.Name(entry.entryType), h.schemaName, h.tableName, event_type)


def change(entry: C.Entry) -> C.RowChange:
    return C.RowChange.FromString(entry.storeValue)


def cols(columns) -> list[tuple]:
    return [
        (c.index, c.name, c.sqlType, c.mysqlType, c.isKey, c.updated, None if c.isNull else c.value)
        for c in columns
    ]


def run(db: PrivateMariaDB, statements: list[str], **options) -> tuple[list, list[C.Entry]]:
    """Run ``statements`` on one connection; return (decoded events, entries) of what they logged."""
    file, pos = db.current_binlog()
    with db.root_connection() as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    db.flush_binary_logs()
    assert db.binlog_dir is not None
    events = list(read_events(Path(db.binlog_dir) / file, start_position=pos))
    return events, entries_of(events, **options)


def entries_of(events: list, **options) -> list[C.Entry]:
    """The production builder's entries of ``events``, parsed back into messages."""
    conv = RawEntryConverter(**options)
    return [C.Entry.FromString(raw) for e in events for raw in conv.convert(e)]


@pytest.fixture(scope="module")
def types_stream(mariadb: PrivateMariaDB):
    table = f"conv_types_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE TABLE pycanal.{table} ({COLUMNS}) DEFAULT CHARSET=utf8mb4")
    statements = [
        f"INSERT INTO pycanal.{table} VALUES {ROW1_SQL}",
        f"INSERT INTO pycanal.{table} (id) VALUES (2)",
        f"INSERT INTO pycanal.{table} (id, tiu, siu, miu, iu, biu, f, d) VALUES (3, 127, 32767, 8388607, 2147483647, 9223372036854775807, 0.1, 1e-5)",
        "SET SESSION sql_mode = ''",
        f"INSERT INTO pycanal.{table} (id, ts, dt, da, y, e) VALUES (4, '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00', 0, 'no such label')",
        f"UPDATE pycanal.{table} SET vc = 'changed', tx = NULL WHERE id = 1",
        f"UPDATE pycanal.{table} SET st = 'y' WHERE id = 2",
        f"DELETE FROM pycanal.{table} WHERE id = 3",
    ]
    return (table, *run(mariadb, statements)), mariadb


def _rows(entries: list[C.Entry], table: str) -> list[C.Entry]:
    return [e for e in entries if e.entryType == C.ROWDATA and e.header.tableName == table]


def test_transactions_from_gtid_events(types_stream):
    (table, events, entries), _ = types_stream
    assert [brief(e) for e in entries] == [
        ("GTIDLOG", "", "", "GTID"),
        ("TRANSACTIONBEGIN", "", "", None),
        ("ROWDATA", "", "", "QUERY"),  # ANNOTATE_ROWS
        ("ROWDATA", "pycanal", table, "INSERT"),
        ("TRANSACTIONEND", "", "", None),
    ] * 4 + [
        ("GTIDLOG", "", "", "GTID"),
        ("TRANSACTIONBEGIN", "", "", None),
        ("ROWDATA", "", "", "QUERY"),
        ("ROWDATA", "pycanal", table, "UPDATE"),
        ("TRANSACTIONEND", "", "", None),
    ] * 2 + [
        ("GTIDLOG", "", "", "GTID"),
        ("TRANSACTIONBEGIN", "", "", None),
        ("ROWDATA", "", "", "QUERY"),
        ("ROWDATA", "pycanal", table, "DELETE"),
        ("TRANSACTIONEND", "", "", None),
        # the rotation's ROTATE gives nothing
    ]
    by_pos = {e.pos: e for e in events}
    for entry in entries:
        h = entry.header
        event = by_pos[h.logfileOffset]
        # header position/length: the event's start offset and size; executeTime in ms
        assert (h.logfileName, h.eventLength, h.executeTime, h.serverId) == (
            event.file,
            event.size,
            event.timestamp * 1000,
            event.server_id,
        )
        if entry.entryType == C.TRANSACTIONEND:
            assert C.TransactionEnd.FromString(entry.storeValue).transactionId == str(event.xid)
        if entry.entryType in (C.GTIDLOG, C.TRANSACTIONBEGIN):
            assert event.type_name == "MARIADB_GTID"
    gtids = [C.Pair.FromString(e.storeValue) for e in entries if e.entryType == C.GTIDLOG]
    assert [(p.key, p.value) for p in gtids] == [
        ("gtid", e.gtid) for e in events if e.type_name == "MARIADB_GTID"
    ]
    annotate = change(entries[2])
    assert annotate.sql.startswith(f"INSERT INTO pycanal.{table} VALUES (1, -128,")


def test_insert_every_column_family(types_stream):
    (table, _, entries), _ = types_stream
    inserts = [e for e in _rows(entries, table) if e.header.eventType == C.INSERT]
    assert [[(p.key, p.value) for p in e.header.props] for e in inserts] == [[("rowsCount", "1")]] * 4
    rc = change(inserts[0])
    assert (rc.eventType, rc.isDdl, rc.sql) == (C.INSERT, False, "")
    (row,) = rc.rowDatas
    assert list(row.beforeColumns) == []
    assert cols(row.afterColumns) == [
        (i, name, sql_type, mysql_type, name == "id", True, value)
        for i, (name, mysql_type, _, sql_type, value) in enumerate(ROW1)
    ]
    # row 2: NULL everywhere but the key; NULLs are not widened and still count as updated
    (row,) = change(inserts[1]).rowDatas
    assert cols(row.afterColumns) == [(0, "id", INTEGER, "int", True, True, "2")] + [
        (i, name, null_type, mysql_type, False, True, None)
        for i, (name, mysql_type, null_type, _, _) in enumerate(ROW1)
        if i
    ]
    # row 3: unsigned values below 2^(bits-1) keep the narrow type
    (row,) = change(inserts[2]).rowDatas
    present = {c.name: (c.sqlType, c.value) for c in row.afterColumns if not c.isNull}
    assert present == {
        "id": (INTEGER, "3"),
        "tiu": (TINYINT, "127"),
        "siu": (SMALLINT, "32767"),
        "miu": (INTEGER, "8388607"),
        "iu": (INTEGER, "2147483647"),
        "biu": (BIGINT, "9223372036854775807"),
        "f": (REAL, "0.1"),
        "d": (DOUBLE, "1.0E-5"),
    }
    # row 4: zero dates, the zero YEAR, an invalid ENUM value (index 0)
    (row,) = change(inserts[3]).rowDatas
    present = {c.name: (c.sqlType, c.value) for c in row.afterColumns if not c.isNull}
    assert present == {
        "id": (INTEGER, "4"),
        "dt": (TIMESTAMP, "0000-00-00 00:00:00"),
        "ts": (TIMESTAMP, "0000-00-00 00:00:00"),
        "da": (DATE, "0000-00-00"),
        "y": (VARCHAR, "0000"),
        "e": (INTEGER, "0"),
    }


def test_update_and_delete_updated_flags(types_stream):
    (table, _, entries), _ = types_stream
    updates = [e for e in _rows(entries, table) if e.header.eventType == C.UPDATE]
    (delete,) = [e for e in _rows(entries, table) if e.header.eventType == C.DELETE]

    (row,) = change(updates[0]).rowDatas
    before = [(i, name, st, mt, name == "id", False, v) for i, (name, mt, _, st, v) in enumerate(ROW1)]
    assert cols(row.beforeColumns) == before
    after = list(before)
    after[28] = (28, "vc", VARCHAR, "varchar(20)", False, True, "changed")
    after[32] = (32, "tx", CLOB, "text", False, True, None)  # value -> NULL
    assert cols(row.afterColumns) == after

    (row,) = change(updates[1]).rowDatas
    assert [c.name for c in row.afterColumns if c.updated] == ["st"]  # NULL -> 'y'; NULL -> NULL is not
    st_before, st_after = row.beforeColumns[26], row.afterColumns[26]
    assert (st_before.isNull, st_before.sqlType) == (True, BLOB)
    assert (st_after.isNull, st_after.sqlType, st_after.value) == (False, BIT, "2")

    rc = change(delete)
    assert rc.eventType == C.DELETE
    (row,) = rc.rowDatas
    assert list(row.afterColumns) == []
    assert [(c.name, c.value) for c in row.beforeColumns if not c.isNull] == [
        ("id", "3"),
        ("tiu", "127"),
        ("siu", "32767"),
        ("miu", "8388607"),
        ("iu", "2147483647"),
        ("biu", "9223372036854775807"),
        ("f", "0.1"),
        ("d", "1.0E-5"),
    ]
    assert not any(c.updated for c in row.beforeColumns)


@pytest.mark.parametrize(
    ("zone", "ts", "ts6"),
    [
        ("UTC", "2024-03-10 07:30:00", "2024-01-01 00:00:00.123456"),
        ("Asia/Shanghai", "2024-03-10 15:30:00", "2024-01-01 08:00:00.123456"),
        # 07:30 UTC is 30 minutes after New York switched to daylight saving time
        ("America/New_York", "2024-03-10 03:30:00", "2023-12-31 19:00:00.123456"),
    ],
)
def test_timestamp_in_a_configured_zone(types_stream, zone, ts, ts6):
    (table, events, _), _ = types_stream
    entries = entries_of(events, timezone=zone)
    inserts = [e for e in _rows(entries, table) if e.header.eventType == C.INSERT]
    (row,) = change(inserts[0]).rowDatas
    by_name = {c.name: c for c in row.afterColumns}
    assert (by_name["ts"].value, by_name["ts6"].value) == (ts, ts6)
    # DATETIME is never shifted, the zero TIMESTAMP stays zero
    assert (by_name["dt"].value, by_name["dt3"].value) == ("2024-02-29 12:34:56", "2024-02-29 12:34:56.789")
    (zero,) = change(inserts[3]).rowDatas
    assert {c.name: c.value for c in zero.afterColumns}["ts"] == "0000-00-00 00:00:00"


def test_labels_mode_live(types_stream):
    (table, events, _), _ = types_stream
    entries = entries_of(events, enum_set="label")
    (row,) = change([e for e in _rows(entries, table) if e.header.eventType == C.INSERT][0]).rowDatas
    by_name = {c.name: (c.sqlType, c.value) for c in row.afterColumns}
    assert (by_name["e"], by_name["st"]) == ((CHAR, "b"), (CHAR, "x,z"))


def test_xa_commit_query_and_ddl(mariadb: PrivateMariaDB):
    suffix = uuid.uuid4().hex[:8]
    t, m, db = f"conv_xa_{suffix}", f"conv_m_{suffix}", f"conv_db_{suffix}"
    mariadb.execute(f"CREATE TABLE pycanal.{t} (id INT PRIMARY KEY, v INT)")
    events, entries = run(
        mariadb,
        [
            "XA START 'gt1','bq1',7",
            f"INSERT INTO pycanal.{t} VALUES (1, 1)",
            "XA END 'gt1','bq1',7",
            "XA PREPARE 'gt1','bq1',7",
            "XA COMMIT 'gt1','bq1',7",
            "XA START 'gt2'",
            f"INSERT INTO pycanal.{t} VALUES (2, 2)",
            "XA END 'gt2'",
            "XA PREPARE 'gt2'",
            "XA ROLLBACK 'gt2'",
            f"CREATE TABLE pycanal.{m} (id INT) ENGINE=MyISAM",
            f"INSERT INTO pycanal.{m} VALUES (1)",
            "USE pycanal",
            f"ALTER TABLE {t} ADD COLUMN w INT",
            f"CREATE INDEX iv ON {t} (v)",
            f"DROP INDEX iv ON {t}",
            f"TRUNCATE TABLE {m}",
            f"RENAME TABLE {m} TO {m}_r",
            f"DROP TABLE {m}_r",
            f"CREATE DATABASE {db}",
            f"DROP DATABASE {db}",
        ],
        filter_query_dml=True,
    )
    xa1 = "X'677431',X'627131',7"
    xa2 = "X'677432',X'',1"
    summary = []
    for e in entries:
        kind = C.EntryType.Name(e.entryType)
        if e.entryType == C.TRANSACTIONBEGIN:
            summary.append(
                (kind, [(p.key, p.value) for p in C.TransactionBegin.FromString(e.storeValue).props])
            )
        elif e.entryType == C.TRANSACTIONEND:
            end = C.TransactionEnd.FromString(e.storeValue)
            summary.append((kind, end.transactionId, [(p.key, p.value) for p in end.props]))
        elif e.entryType == C.ROWDATA:
            rc = change(e)
            summary.append(
                (kind, brief(e)[1:], rc.isDdl, rc.ddlSchemaName, [(p.key, p.value) for p in rc.props])
            )
        else:
            summary.append((kind,))
    assert summary == [
        # XA PREPARE group: the GTID event (FL_PREPARED_XA) opens it, XA END ends it
        ("GTIDLOG",),
        ("TRANSACTIONBEGIN", [("XA_TYPE", "XA START"), ("XA_XID", " " + xa1)]),
        ("ROWDATA", ("pycanal", t, "INSERT"), False, "", []),
        ("TRANSACTIONEND", "0", [("XA_TYPE", "XA END"), ("XA_XID", " " + xa1)]),
        ("GTIDLOG",),
        ("ROWDATA", ("", "", "XACOMMIT"), False, "", [("XA_TYPE", "XA COMMIT"), ("XA_XID", " " + xa1)]),
        ("GTIDLOG",),
        ("TRANSACTIONBEGIN", [("XA_TYPE", "XA START"), ("XA_XID", " " + xa2)]),
        ("ROWDATA", ("pycanal", t, "INSERT"), False, "", []),
        ("TRANSACTIONEND", "0", [("XA_TYPE", "XA END"), ("XA_XID", " " + xa2)]),
        ("GTIDLOG",),
        ("ROWDATA", ("", "", "XAROLLBACK"), False, "", [("XA_TYPE", "XA ROLLBACK"), ("XA_XID", " " + xa2)]),
        # DDL (standalone GTID groups)
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", m, "CREATE"), True, "", []),
        # MyISAM: no XID, the group ends with a COMMIT query
        ("GTIDLOG",),
        ("TRANSACTIONBEGIN", []),
        ("ROWDATA", ("pycanal", m, "INSERT"), False, "", []),
        ("TRANSACTIONEND", "0", []),
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", t, "ALTER"), True, "pycanal", []),
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", t, "CINDEX"), True, "pycanal", []),
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", t, "DINDEX"), True, "pycanal", []),
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", m, "TRUNCATE"), True, "pycanal", []),
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", f"{m}_r", "RENAME"), True, "pycanal", []),
        ("GTIDLOG",),
        ("ROWDATA", ("pycanal", f"{m}_r", "ERASE"), True, "pycanal", []),
        # the server logs database statements with the database itself as the session schema
        ("GTIDLOG",),
        ("ROWDATA", (db, "", "QUERY"), True, db, []),
        ("GTIDLOG",),
        ("ROWDATA", (db, "", "QUERY"), True, db, []),
    ]
    xa_commit = change(entries[5])
    assert xa_commit.sql == f"XA COMMIT {xa1}"
    ddl_sql = [change(e).sql for e in entries if e.entryType == C.ROWDATA and change(e).isDdl]
    assert ddl_sql[1] == f"ALTER TABLE {t} ADD COLUMN w INT"
    assert ddl_sql[-1] == f"DROP DATABASE {db}"


def test_buffer_batches_and_positions_over_the_stream(types_stream):
    (table, events, entries), _ = types_stream
    batches: list[list[C.Entry]] = []
    positions = []
    buf = TransactionBuffer(1024, lambda b: batches.append([r.entry for r in b]), positions.append)
    buf.add_all(Event.from_entry(e) for e in entries)
    kinds = [[C.EntryType.Name(e.entryType) for e in b] for b in batches]
    # GTIDLOG entries are dropped; each ANNOTATE_ROWS query (non-DML ROWDATA) flushes, as in Canal
    assert kinds == [["TRANSACTIONBEGIN", "ROWDATA"], ["ROWDATA", "TRANSACTIONEND"]] * 7
    xids = [e for e in events if e.type_name == "XID"]
    assert [(p.journal_name, p.position, p.end_position) for p in positions] == [
        (x.file, x.pos, x.next_pos) for x in xids
    ]
    assert buf.last_position == positions[-1] and len(buf) == 0
    # without the query entries, one batch per transaction
    batches.clear()
    positions.clear()
    conv = RawEntryConverter(filter_query_dml=True)
    buf = TransactionBuffer(4, lambda b: batches.append([r.entry for r in b]), positions.append)
    for e in events:
        buf.add_all(conv.records(e))
    assert [[C.EntryType.Name(e.entryType) for e in b] for b in batches] == [
        ["TRANSACTIONBEGIN", "ROWDATA", "TRANSACTIONEND"]
    ] * 7
    assert [p.end_position for p in positions] == [x.next_pos for x in xids]


def test_statement_text_a_latin1_client_wrote(mariadb: PrivateMariaDB):
    """MariaDB logs a latin1 client's statement bytes in ANNOTATE_ROWS with no charset: the decoder
    keeps the bytes it cannot read as UTF-8, and the entry's sql carries U+FFFD for them (Canal's
    decoding with its UTF-8 connection charset) instead of failing the conversion; the row values,
    decoded with the column's charset, are exact. The QUERY event names its charset: exact too."""
    table = f"conv_latin1_{uuid.uuid4().hex[:8]}"
    mariadb.execute(
        f"CREATE TABLE pycanal.{table} (id INT PRIMARY KEY, v VARCHAR(20)) DEFAULT CHARSET=utf8mb4"
    )
    file, pos = mariadb.current_binlog()
    with mariadb.root_connection(charset="latin1") as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO pycanal.{table} VALUES (1, 'caf\u00e9')")
        cur.execute(f"ALTER TABLE pycanal.{table} COMMENT 'd\u00e9j\u00e0'")
    mariadb.flush_binary_logs()
    events = list(read_events(Path(mariadb.binlog_dir) / file, start_position=pos))
    raw = [r for e in events for r in RawEntryConverter().records(e)]
    entries = [entry for e in events for entry in EntryConverter().convert(e)]  # the protobuf oracle
    assert [r.raw for r in raw] == [e.SerializeToString() for e in entries]
    changes = [C.RowChange.FromString(e.storeValue) for e in entries if e.entryType == C.ROWDATA]
    annotate, insert, alter = (c for c in changes)
    assert annotate.sql == f"INSERT INTO pycanal.{table} VALUES (1, 'caf\ufffd')"
    assert [c.value for c in insert.rowDatas[0].afterColumns] == ["1", "caf\u00e9"]
    assert alter.sql == f"ALTER TABLE pycanal.{table} COMMENT 'd\u00e9j\u00e0'"
