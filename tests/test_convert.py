"""Canal entries (``RawEntryConverter``, parsed back into messages) on the real binlog fixtures
(shared/fixtures/binlog) and their value rules.

Every expectation here is exact: entry types and header positions, GTID/XID payloads, and the
columns (index, name, sqlType, mysqlType, isKey, updated, value) of INSERT/UPDATE/DELETE rows.
The values were checked against what the fixtures' source repositories assert (see
``fixture_expectations.py``) and against Canal's rules (``docs/compatibility.md``, "Canal entries").
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest

import fixture_expectations as X
from binlog_fixtures import FIXTURES_DIR
from pycanal.binlog import EventDecoder, read_events
from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.errors import TableIdNotFoundError
from pycanal.binlog.gtid import MariadbGtidSet, MysqlGtidSet
from pycanal.binlog.tablemap import TableMap
from pycanal.parse import queries
from pycanal.parse.columns import decimal_text, java_double_text
from pycanal.parse.ddl import DdlResult, DdlType, parse_ddl
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.protocol import CanalEntry as C

DIR = FIXTURES_DIR

# java.sql.Types
BIT, TINYINT, BIGINT, CHAR, DECIMAL, INTEGER, SMALLINT = -7, -6, -5, 1, 3, 4, 5
REAL, DOUBLE, VARCHAR, DATE, TIME, TIMESTAMP, BLOB, CLOB = 7, 8, 12, 91, 92, 93, 2004, 2005


# --------------------------------------------------------------------------- helpers
class Converter(RawEntryConverter):
    """The production builder, its entries parsed back into messages."""

    def entries(self, event: ev.Event) -> list[C.Entry]:
        return [C.Entry.FromString(raw) for raw in self.convert(event)]


def convert(path: Path, **options) -> list[C.Entry]:
    conv = Converter(**options)
    return [entry for event in read_events(path) for entry in conv.entries(event)]


def brief(entry: C.Entry) -> tuple:
    h = entry.header
    event_type = C.EventType.Name(h.eventType) if h.HasField("eventType") else None
    return (
        C.EntryType.Name(entry.entryType),
        h.logfileOffset,
        h.eventLength,
        h.schemaName,
        h.tableName,
        event_type,
    )


def payload(entry: C.Entry):
    cls = {
        C.ROWDATA: C.RowChange,
        C.TRANSACTIONBEGIN: C.TransactionBegin,
        C.TRANSACTIONEND: C.TransactionEnd,
        C.GTIDLOG: C.Pair,
    }[entry.entryType]
    return cls.FromString(entry.storeValue)


def cols(columns) -> list[tuple]:
    return [
        (c.index, c.name, c.sqlType, c.mysqlType, c.isKey, c.updated, None if c.isNull else c.value)
        for c in columns
    ]


def rows(entry: C.Entry) -> list[tuple[list[tuple], list[tuple]]]:
    return [(cols(r.beforeColumns), cols(r.afterColumns)) for r in payload(entry).rowDatas]


def props(msg) -> list[tuple[str, str]]:
    return [(p.key, p.value) for p in msg.props]


def values(columns: list[tuple]) -> list:
    return [c[6] for c in columns]


# --------------------------------------------------------------------------- MySQL 8 FULL metadata
P = "0123456789"
LONG = (P * 13)[:129] * 2 + P * 4  # the VARCHAR(300)/TEXT value of rust_mysql_common's test
ENUM_T = "enum('var1','variant2','foo')"
SET_T = "set('one','two','three','four')"
UUID_ESS = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"


def test_mysql8_enum_string_set(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "mysql-enum-string-set.000001")
    assert [brief(e) for e in entries] == [
        ("GTIDLOG", 157, 79, "", "", "GTID"),
        ("ROWDATA", 236, 257, "", "", "QUERY"),  # ALTER USER: not a table DDL
        ("GTIDLOG", 493, 79, "", "", "GTID"),
        ("ROWDATA", 572, 219, "mysql", "t", "CREATE"),
        ("GTIDLOG", 791, 79, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 870, 76, "", "", None),
        ("ROWDATA", 1077, 452, "mysql", "t", "INSERT"),
        ("TRANSACTIONEND", 1529, 31, "", "", None),
        ("GTIDLOG", 1560, 79, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 1639, 85, "", "", None),
        ("ROWDATA", 1855, 773, "mysql", "t", "UPDATE"),
        ("TRANSACTIONEND", 2628, 31, "", "", None),
        ("GTIDLOG", 2659, 79, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 2738, 76, "", "", None),
        ("ROWDATA", 2945, 355, "mysql", "t", "DELETE"),
        ("TRANSACTIONEND", 3300, 31, "", "", None),
    ]
    for e in entries:
        h = e.header
        assert (h.version, h.logfileName, h.serverId, h.serverenCode, h.sourceType, h.gtid) == (
            1,
            "mysql-enum-string-set.000001",
            1,
            "UTF-8",
            C.MYSQL,
            "",
        )
    gtids = [payload(e) for e in entries if e.entryType == C.GTIDLOG]
    assert [(p.key, p.value) for p in gtids] == [("gtid", f"{UUID_ESS}:{n}") for n in range(1, 6)]
    assert [payload(e).threadId for e in entries if e.entryType == C.TRANSACTIONBEGIN] == [9, 9, 9]
    assert [payload(e).transactionId for e in entries if e.entryType == C.TRANSACTIONEND] == [
        "50",
        "51",
        "52",
    ]

    alter_user, create = payload(entries[1]), payload(entries[3])
    # an account statement: no isDdl (Canal's DruidDdlParser names nothing in it)
    assert not alter_user.HasField("isDdl") and alter_user.sql.startswith("ALTER USER 'root'@'localhost'")
    assert alter_user.ddlSchemaName == ""  # run without a default schema
    assert (create.eventType, create.isDdl, create.ddlSchemaName) == (C.CREATE, True, "mysql")
    assert create.sql.startswith("CREATE TABLE t(f1 CHAR(128), f2 VARCHAR(300), f3 ENUM(")

    insert, update, delete = entries[6], entries[10], entries[14]
    assert insert.header.executeTime == 1647193281000
    for e in (insert, update, delete):
        assert props(e.header) == [("rowsCount", "1")]
        change = payload(e)
        assert (change.tableId, change.isDdl, change.HasField("isDdl"), change.sql) == (124, False, True, "")
    first = [
        (0, "f1", CHAR, "char(128)", False, True, P * 10),
        (1, "f2", VARCHAR, "varchar(300)", False, True, LONG),
        (2, "f3", INTEGER, ENUM_T, False, True, "1"),  # 'var1': ENUM index
        (3, "f4", BIT, SET_T, False, True, "5"),  # 'one,three': SET bitmask 1|4
        (4, "f5", CLOB, "text", False, True, P),
    ]
    assert rows(insert) == [([], first)]
    before_image = [c[:5] + (False, c[6]) for c in first]
    after_image = [
        (0, "f1", CHAR, "char(128)", False, True, "field1"),
        (1, "f2", VARCHAR, "varchar(300)", False, True, "field_2"),
        (2, "f3", INTEGER, ENUM_T, False, True, "2"),  # 'variant2'
        (3, "f4", BIT, SET_T, False, True, "10"),  # 'two,four'
        (4, "f5", CLOB, "text", False, True, LONG),
    ]
    assert rows(update) == [(before_image, after_image)]
    assert rows(delete) == [([c[:5] + (False, c[6]) for c in after_image], [])]
    # isNull is always written (Canal sets it explicitly), keys are not in this table
    (row,) = payload(insert).rowDatas
    assert all(c.HasField("isNull") and not c.isNull for c in row.afterColumns)


def test_enum_and_set_labels_mode(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "mysql-enum-string-set.000001", enum_set="label")
    ((_, after),) = rows(entries[6])
    assert after[2] == (2, "f3", CHAR, ENUM_T, False, True, "var1")
    assert after[3] == (3, "f4", CHAR, SET_T, False, True, "one,three")
    ((before, after),) = rows(entries[10])
    assert [c[6] for c in before[2:4]] == ["var1", "one,three"]
    assert [c[6] for c in after[2:4]] == ["variant2", "two,four"]
    with pytest.raises(ValueError, match="enum_set"):
        Converter(enum_set="labels")


# --------------------------------------------------------------------------- MariaDB 10.5 FULL
def test_mariadb_10_5(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "mariadb-bin.000001")
    assert [brief(e) for e in entries] == [
        ("GTIDLOG", 256, 29, "", "", "GTID"),  # GTID_LIST (empty)
        ("GTIDLOG", 330, 42, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 330, 42, "", "", None),  # opened by the GTID event itself
        ("ROWDATA", 372, 104, "", "", "QUERY"),  # ANNOTATE_ROWS
        ("ROWDATA", 612, 59, "toddy_test", "outbox", "INSERT"),
        ("TRANSACTIONEND", 671, 31, "", "", None),
        ("GTIDLOG", 702, 42, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 702, 42, "", "", None),
        ("ROWDATA", 744, 104, "", "", "QUERY"),
        ("ROWDATA", 984, 59, "toddy_test", "outbox", "INSERT"),
        ("TRANSACTIONEND", 1043, 31, "", "", None),
    ]
    assert [payload(e).value for e in entries if e.entryType == C.GTIDLOG] == ["", "0-1-1", "0-1-2"]
    assert [payload(e).threadId for e in entries if e.entryType == C.TRANSACTIONBEGIN] == [0, 0]
    assert [payload(e).transactionId for e in entries if e.entryType == C.TRANSACTIONEND] == ["800", "820"]
    annotate = payload(entries[3])
    assert (
        annotate.sql == "insert into outbox (topic, event_type, event) values ('foo', 'JSON', '{\"foo\":1}')"
    )
    assert (annotate.eventType, annotate.HasField("isDdl")) == (C.QUERY, False)
    assert rows(entries[4]) == [
        (
            [],
            [
                (0, "id", INTEGER, "int", True, True, "62"),
                (1, "topic", VARCHAR, "varchar(255)", False, True, "foo"),
                (2, "event_type", INTEGER, "enum('BLOB','JSON','PROTOBUF')", False, True, "2"),
                (3, "event", BLOB, "blob", False, True, '{"foo":1}'),
                (4, "created", TIMESTAMP, "timestamp", False, True, "2022-04-20 22:18:04"),
            ],
        )
    ]
    # TIMESTAMP in a configured zone; everything else unchanged
    shanghai = convert(fixtures_dir / "rust_mysql_common" / "mariadb-bin.000001", timezone="Asia/Shanghai")
    ((_, after),) = rows(shanghai[4])
    assert after[4][6] == "2022-04-21 06:18:04"
    assert values(after[:4]) == ["62", "foo", "2", '{"foo":1}']
    # no ANNOTATE_ROWS query entries with filter_query_dml
    filtered = convert(fixtures_dir / "rust_mysql_common" / "mariadb-bin.000001", filter_query_dml=True)
    assert [brief(e) for e in filtered] == [b for b in map(brief, entries) if b[5] != "QUERY"]


def test_mariadb_10_0_standalone_gtid_statements(fixtures_dir: Path):
    entries = convert(fixtures_dir / "binlog-parser" / "mysql-bin.07")
    assert [brief(e) for e in entries] == [
        ("GTIDLOG", 248, 39, "", "", "GTID"),  # GTID_LIST
        ("GTIDLOG", 326, 38, "", "", "GTID"),  # a standalone group (DDL): no TRANSACTIONBEGIN
        ("ROWDATA", 364, 263, "test_db", "departments", "CREATE"),
        ("GTIDLOG", 627, 38, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 627, 38, "", "", None),
        ("ROWDATA", 723, 38, "test_db", "departments", "INSERT"),
        ("ROWDATA", 819, 38, "test_db", "departments", "INSERT"),
        ("TRANSACTIONEND", 857, 27, "", "", None),
    ]
    assert [payload(e).value for e in entries if e.entryType == C.GTIDLOG] == [
        "0-3704-2814",
        "0-3704-2815",
        "0-3704-2816",
    ]
    assert payload(entries[-1]).transactionId == "456"
    assert [values(after) for e in entries[5:7] for _, after in rows(e)] == [["ABC", "DEF"], ["RST", "XYZ"]]


# --------------------------------------------------------------------------- MySQL 5.6, no metadata
def test_mysql56_without_metadata_names_columns_by_position(fixtures_dir: Path):
    entries = convert(fixtures_dir / "binlog-parser" / "mysql-bin.01")
    assert [brief(e) for e in entries] == [
        ("TRANSACTIONBEGIN", 120, 77, "", "", None),
        ("ROWDATA", 258, 139, "test_db", "buildings", "INSERT"),
        ("TRANSACTIONEND", 397, 31, "", "", None),
        ("TRANSACTIONBEGIN", 428, 75, "", "", None),
        ("ROWDATA", 558, 134, "test_db", "rooms", "INSERT"),
        ("TRANSACTIONEND", 692, 31, "", "", None),
        ("TRANSACTIONBEGIN", 723, 75, "", "", None),
        ("ROWDATA", 853, 114, "test_db", "rooms", "UPDATE"),
        ("TRANSACTIONEND", 967, 31, "", "", None),
        ("TRANSACTIONBEGIN", 998, 77, "", "", None),
        ("ROWDATA", 1136, 90, "test_db", "buildings", "DELETE"),
        ("TRANSACTIONEND", 1226, 31, "", "", None),
    ]
    assert [props(e.header) for e in entries if e.entryType == C.ROWDATA] == [
        [("rowsCount", "2")],
        [("rowsCount", "5")],
        [("rowsCount", "2")],
        [("rowsCount", "1")],
    ]

    def room(i, name, building, updated=False, name_updated=None):
        return [
            (0, "@1", INTEGER, "int", False, updated, str(i)),
            (
                1,
                "@2",
                VARCHAR,
                "varchar(765)",
                False,
                updated if name_updated is None else name_updated,
                name,
            ),
            (2, "@3", INTEGER, "int", False, updated, str(building)),
        ]

    assert rows(entries[7]) == [
        (room(4, "Marketing", 2), room(4, "MARKETING", 2, name_updated=True)),
        (room(5, "Showroom", 2), room(5, "SHOWROOM", 2, name_updated=True)),
    ]
    assert [values(after) for _, after in rows(entries[4])] == [
        ["1", "Amazon", "1"],
        ["2", "War Room", "1"],
        ["3", "Office of CEO", "1"],
        ["4", "Marketing", "2"],
        ["5", "Showroom", "2"],
    ]
    assert rows(entries[10]) == [
        (
            [
                (0, "@1", INTEGER, "int", False, False, "1"),
                (1, "@2", VARCHAR, "varchar(765)", False, False, "ACME Headquaters"),
                (2, "@3", VARCHAR, "varchar(1065)", False, False, "3950 North 1st Street CA 95134"),
            ],
            [],
        )
    ]


def test_mysql57_checksum_crc32(fixtures_dir: Path):
    entries = convert(fixtures_dir / "mysql-binlog-connector-java" / "mysql-bin.checksum-crc32")
    assert [brief(e) for e in entries[:3]] == [
        ("TRANSACTIONBEGIN", 219, 89, "", "", None),
        ("ROWDATA", 384, 102, "simu_file_dev", "folder", "INSERT"),
        ("TRANSACTIONEND", 486, 31, "", "", None),
    ]
    ((_, after),) = rows(entries[1])
    assert [(c[2], c[3], c[6]) for c in after] == [
        (INTEGER, "int", "12300113"),
        (VARCHAR, "varchar(765)", "test2"),
        (VARCHAR, "varchar(765)", "/"),
        (BIGINT, "bigint", "116103"),
        (TIMESTAMP, "timestamp", "2018-05-04 08:31:59"),
        (BIGINT, "bigint", "906703"),
        (BIGINT, "bigint", "0"),
        (TINYINT, "tinyint", "0"),
        (TINYINT, "tinyint", "0"),
        (TIMESTAMP, "timestamp", "2018-05-04 08:31:59"),
        (BIGINT, "bigint", "0"),
        (BIGINT, "bigint", "12200009"),
    ]
    update = entries[10]
    assert brief(update) == ("ROWDATA", 1635, 430, "simu_file_dev", "file", "UPDATE")
    ((before, after),) = rows(update)
    changed = [(c[1], c[6]) for c in after if c[5]]
    assert changed == [("@2", "陶瓷.jpg")]  # UTF-8 text without charset metadata
    assert after[8][2:] == (DOUBLE, "double", False, False, "449847.0")
    assert len(entries) == 180 and {e.header.gtid for e in entries} == {""}


# --------------------------------------------------------------------------- Canal's own fixture
def test_canal_mysql51_fixture(fixtures_dir: Path):
    entries = convert(fixtures_dir / "canal" / "mysql-bin.000001")
    assert [brief(e) for e in entries[:4]] == [
        ("TRANSACTIONBEGIN", 106, 69, "", "", None),
        ("ROWDATA", 226, 63, "erosa", "testFile", "INSERT"),
        ("TRANSACTIONEND", 289, 27, "", "", None),
        ("ROWDATA", 316, 230, "erosa", "testFile_linux", "CREATE"),
    ]
    assert payload(entries[0]).threadId == 35632
    assert payload(entries[2]).transactionId == "59003"
    assert rows(entries[1]) == [
        (
            [],
            [
                (0, "@1", INTEGER, "int", False, True, "1"),
                (1, "@2", VARCHAR, "varchar(150)", False, True, "D:\\fileresolver\\testFile.jpg"),
            ],
        )
    ]
    ddl = payload(entries[3])
    assert (ddl.isDdl, ddl.ddlSchemaName) == (True, "erosa")
    # old DATETIME (type 12) is never shifted; old TIMESTAMP (type 7) follows the configured zone
    shanghai = convert(fixtures_dir / "canal" / "mysql-bin.000001", timezone="Asia/Shanghai")
    for converted, expected_ts in ((entries, "2012-07-09 05:58:16"), (shanghai, "2012-07-09 13:58:16")):
        by_offset = {e.header.logfileOffset: e for e in converted if e.entryType == C.ROWDATA}
        assert brief(by_offset[8262]) == ("ROWDATA", 8262, 58, "erosa", "testpk", "INSERT")
        ((_, after),) = rows(by_offset[8262])
        assert after[2][2:] == (TIMESTAMP, "datetime", False, True, "2011-12-15 12:52:53")
        assert brief(by_offset[15704])[3:] == ("retl", "xdual", "INSERT")
        ((_, after),) = rows(by_offset[15704])
        assert after[1][2:] == (TIMESTAMP, "timestamp", False, True, expected_ts)
    kinds = {brief(e)[0] for e in entries}
    assert kinds == {"TRANSACTIONBEGIN", "ROWDATA", "TRANSACTIONEND"}


# --------------------------------------------------------------------------- types
def test_minimal_row_image_and_unsigned_widening(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "minimal_row_metadata.000001")
    (insert,) = [e for e in entries if e.entryType == C.ROWDATA]
    # columns 2 and 4 are not in the row image: left out; INT UNSIGNED 3230202323 >= 2^31 -> BIGINT
    assert rows(insert) == [
        (
            [],
            [
                (0, "@1", INTEGER, "int", False, True, "1"),
                (2, "@3", CHAR, "char(2)", False, True, "a"),
                (4, "@5", BIGINT, "int unsigned", False, True, "3230202323"),
            ],
        )
    ]


def test_invisible_columns_unsigned_blob_and_nulls(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "binlog-invisible-columns.000001")
    inserts = [e for e in entries if e.entryType == C.ROWDATA and e.header.eventType == C.INSERT]
    (update,) = [e for e in entries if e.entryType == C.ROWDATA and e.header.eventType == C.UPDATE]
    types = [
        (INTEGER, "int unsigned"),
        (INTEGER, "int unsigned"),
        (INTEGER, "int"),
        (CLOB, "text"),
        (BLOB, "blob"),
        (BIGINT, "bigint unsigned"),
    ]
    ((_, first),) = rows(inserts[0])
    assert [(c[1], c[2], c[3], c[6]) for c in first] == [
        (f"f{i + 1}", t, m, v)
        for i, ((t, m), v) in enumerate(zip(types, ["1", "2", "-3", "4", "\x05", "6000000000"], strict=True))
    ]
    ((_, second),) = rows(inserts[1])
    assert [(c[2], c[6]) for c in second] == [
        (INTEGER, None),
        (INTEGER, None),
        (INTEGER, "-33"),
        (CLOB, "44"),
        (BLOB, "U"),
        (BIGINT, None),
    ]
    ((before, after),) = rows(update)
    assert [(c[6], c[5]) for c in before] == [
        (None, False),
        (None, False),
        ("-33", False),
        ("44", False),
        ("U", False),
        (None, False),
    ]
    # NULL -> value: updated; same blob: not; NULL -> NULL: not
    assert [(c[6], c[5]) for c in after] == [
        ("111", True),
        ("222", True),
        ("-333", True),
        ("444", True),
        ("U", False),
        (None, False),
    ]


def test_bit_time_and_decimal(fixtures_dir: Path):
    bits = [
        e
        for e in convert(fixtures_dir / "rust_mysql_common" / "mysql_type_bit.000001")
        if e.header.eventType == C.INSERT
    ]
    assert rows(bits[0]) == [
        (
            [],
            [
                (0, "a", BIT, "bit(3)", False, True, "4"),  # b'100'
                (1, "b", CLOB, "text", False, True, "foo"),
                (2, "c", BIT, "bit(8)", False, True, "32"),  # b'100000'
            ],
        )
    ]
    times = [
        e
        for e in convert(fixtures_dir / "rust_mysql_common" / "time_issue.000001")
        if e.entryType == C.ROWDATA
    ]
    assert rows(times[0]) == [([], [(0, "@1", TIME, "time", False, True, "-507:48:27")])]

    (dec,) = [
        e for e in convert(fixtures_dir / "go-mysql" / "tcb-eval002c-bin.003320") if e.entryType == C.ROWDATA
    ]
    first, second = (after for _, after in rows(dec)[:2])
    assert [(c[3], c[6]) for c in first[1:12]] == [
        ("decimal(4,2)", "-10.55"),
        ("decimal(5,0)", "-11"),
        ("decimal(7,3)", "-10.550"),
        ("decimal(10,2)", "-10.55"),
        ("decimal(10,3)", "-10.550"),
        ("decimal(13,2)", "-10.55"),
        ("decimal(15,14)", "-9.99999999999999"),
        ("decimal(20,10)", "-10.5500000000"),
        ("decimal(30,5)", "-10.55000"),
        ("decimal(30,20)", "-10.55000000000000000000"),
        ("decimal(30,25)", "-10.5500000000000000000000000"),
    ]
    assert {c[2] for c in first[1:12]} == {DECIMAL}
    assert values(second[1:12]) == [
        "0.01",
        "0",
        "0.012",
        "0.01",
        "0.012",
        "0.01",
        "0.01234567890123",
        "0.0123456789",
        "0.01235",
        "0.01234567890123456789",
        "0.0123456789012345678912345",
    ]
    assert props(dec.header) == [("rowsCount", "17")]


def test_sakila_enum_set_year_without_labels(fixtures_dir: Path):
    conv = Converter()
    film = None
    for event in read_events(fixtures_dir / "mysql-binlog-connector-java" / "mysql-bin.sakila"):
        for entry in conv.entries(event):
            if entry.header.tableName == "film" and entry.header.eventType == C.INSERT:
                film = entry
                break
        if film is not None:
            break
    assert brief(film) == ("ROWDATA", 237022, 969, "sakila", "film", "INSERT")
    (_, after) = rows(film)[0]
    assert [(c[1], c[2], c[3], c[6]) for c in after] == [
        ("@1", SMALLINT, "smallint", "1"),  # 5.5 logs no signedness
        ("@2", VARCHAR, "varchar(765)", "ACADEMY DINOSAUR"),
        # TEXT without charset information: BLOB with the bytes as ISO-8859-1 (Canal without meta)
        (
            "@3",
            BLOB,
            "blob",
            "A Epic Drama of a Feminist And a Mad Scientist who must Battle a Teacher in The Canadian Rockies",
        ),
        ("@4", VARCHAR, "year", "2006"),
        ("@5", TINYINT, "tinyint", "1"),
        ("@6", TINYINT, "tinyint", None),
        ("@7", TINYINT, "tinyint", "6"),
        ("@8", DECIMAL, "decimal(4,2)", "0.99"),
        ("@9", SMALLINT, "smallint", "86"),
        ("@10", DECIMAL, "decimal(5,2)", "20.99"),
        ("@11", INTEGER, "enum", "2"),  # rating 'PG'
        ("@12", BIT, "set", "12"),  # 'Deleted Scenes,Behind the Scenes'
        ("@13", TIMESTAMP, "timestamp", "2006-02-15 04:03:42"),
    ]


def test_json_full_and_partial(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "json.binlog.000001")
    updates = [e for e in entries if e.header.eventType == C.UPDATE]
    (before, after) = rows(updates[0])[0]
    assert before[1][2:4] == (VARCHAR, "json") and after[1][5] is True
    assert after[1][6].startswith('{"age": 25, ')
    # MINIMAL before-image (key only): the after-image JSON is the server's diff
    (before, after) = rows(updates[1])[0]
    assert [c[0] for c in before] == [0] and [c[0] for c in after] == [1, 2, 3]
    assert after[0][6].startswith('{"json_patch": [{"op": "replace", "path": "$.age"')
    assert all(c[5] for c in after)


def test_statement_based_and_variable_events(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "ver_5_1_23.001")
    by_offset = {e.header.logfileOffset: e for e in entries}
    stmt = by_offset[776]
    assert brief(stmt) == ("ROWDATA", 776, 108, "test", "t2", "INSERT")
    change = payload(stmt)
    assert (change.eventType, change.isDdl, change.sql, change.ddlSchemaName) == (
        C.INSERT,
        False,
        "INSERT INTO t2 VALUES (3, 'first stm in trx')",
        "test",
    )
    assert [(brief(by_offset[o])[5], payload(by_offset[o]).sql) for o in (1044, 1183, 1331)] == [
        ("QUERY", "SET @x := 4"),
        ("QUERY", "SET SESSION rand_seed1 = 206881985 , rand_seed2 = 103665823"),
        ("QUERY", "SET LAST_INSERT_ID = 0"),
    ]
    filtered = convert(fixtures_dir / "rust_mysql_common" / "ver_5_1_23.001", filter_query_dml=True)
    assert {e.header.logfileOffset for e in filtered} == set(by_offset) - {1044, 1183, 1331}


def test_rows_query_entries_name_their_table(fixtures_dir: Path):
    entries = convert(fixtures_dir / "mysqlbinlog2parquet" / "03-mixed-types.binlog")
    queries = [e for e in entries if e.header.eventType == C.QUERY]
    assert [(brief(e), payload(e).sql[:31]) for e in queries] == [
        (("ROWDATA", 741, 343, "", "metrics", "QUERY"), "INSERT INTO metrics (id, name, "),
        (("ROWDATA", 1572, 68, "", "metrics", "QUERY"), "UPDATE metrics SET value = 9.99"),
    ]
    (insert,) = [e for e in entries if e.header.eventType == C.INSERT]
    assert [after for _, after in rows(insert)][:2] == [
        [
            (0, "id", BIGINT, "bigint", True, True, "1"),
            (1, "name", VARCHAR, "varchar(128)", False, True, "metric_a"),
            (2, "value", DOUBLE, "double", False, True, "1.5"),
            (3, "flag", TINYINT, "tinyint", False, True, "1"),
            (4, "payload", VARCHAR, "json", False, True, '{"k": 1}'),
            (5, "captured_at", TIMESTAMP, "datetime(3)", False, True, "2024-01-01 00:00:00.000"),
        ],
        [
            (0, "id", BIGINT, "bigint", True, True, "2"),
            (1, "name", VARCHAR, "varchar(128)", False, True, "metric_b"),
            (2, "value", DOUBLE, "double", False, True, "2.25"),
            (3, "flag", TINYINT, "tinyint", False, True, "0"),
            (4, "payload", VARCHAR, "json", False, True, "[1, 2, 3]"),
            (5, "captured_at", TIMESTAMP, "datetime(3)", False, True, "2024-01-01 00:00:01.500"),
        ],
    ]


def test_transaction_payload_inner_events_take_the_payload_position(fixtures_dir: Path):
    path = fixtures_dir / "mysql-binlog-connector-rust" / "mysql-bin.000057"
    payloads = [e for e in read_events(path) if isinstance(e, ev.TransactionPayloadEvent)]
    assert [(p.pos, p.size) for p in payloads] == [(457, 194), (730, 553)]
    entries = convert(path)
    assert [brief(e) for e in entries] == [
        ("GTIDLOG", 197, 77, "", "", "GTID"),
        ("ROWDATA", 274, 104, "a", "b", "CREATE"),
        ("GTIDLOG", 378, 79, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 457, 194, "", "", None),
        ("ROWDATA", 457, 194, "", "b", "QUERY"),
        ("ROWDATA", 457, 194, "a", "b", "INSERT"),
        ("TRANSACTIONEND", 457, 194, "", "", None),
        ("GTIDLOG", 651, 79, "", "", "GTID"),
        ("TRANSACTIONBEGIN", 730, 553, "", "", None),
        ("ROWDATA", 730, 553, "", "test_table_3", "QUERY"),
        ("ROWDATA", 730, 553, "a", "test_table_3", "UPDATE"),
        ("ROWDATA", 730, 553, "", "test_table_3", "QUERY"),
        ("ROWDATA", 730, 553, "a", "test_table_3", "INSERT"),
        ("TRANSACTIONEND", 730, 553, "", "", None),
    ]
    ((before, after),) = rows(entries[10])
    assert [(c[1], c[6]) for c in after if c[5]] == [("@8", "4"), ("@11", "product_3_value")]
    # BINARY(3) keeps its 0x00 padding; ENUM/SET as index/bitmask without labels
    assert [(c[2], c[3], c[6]) for c in before[6:10]] == [
        (INTEGER, "enum", "4"),
        (BIT, "set", "8"),
        (BLOB, "binary(3)", "b3\x00"),
        (VARCHAR, "json", '{"c": 1}'),
    ]


def test_tagged_gtid(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "binlog_transaction_with_GTID_TAG.000001")
    assert brief(entries[0]) == ("GTIDLOG", 245, 83, "", "", "GTID")
    assert payload(entries[0]).value == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    assert [(c[3], c[6]) for c in rows(entries[2])[0][1]] == [
        ("int", "3"),
        ("int", "100"),
        ("decimal(10,2)", "250.00"),
    ]


def test_anonymous_gtids_give_no_entries(fixtures_dir: Path):
    entries = convert(fixtures_dir / "rust_mysql_common" / "binlog_transaction_with_anonymous_GTID.000001")
    assert C.GTIDLOG not in {e.entryType for e in entries}


# --------------------------------------------------------------------------- GTID mode
def test_gtid_mode_mysql(fixtures_dir: Path):
    start = MysqlGtidSet.parse(f"{UUID_ESS}:1")
    entries = convert(fixtures_dir / "rust_mysql_common" / "mysql-enum-string-set.000001", gtid_set=start)
    assert str(start) == f"{UUID_ESS}:1"  # the converter works on a copy
    assert entries[0].header.gtid == f"{UUID_ESS}:1"
    assert props(entries[0].header) == [
        ("curtGtid", f"{UUID_ESS}:1"),
        ("curtGtidSn", "1"),
        ("curtGtidLct", "0"),
    ]
    insert = entries[6]
    assert insert.header.gtid == f"{UUID_ESS}:1-3"
    assert props(insert.header) == [
        ("curtGtid", f"{UUID_ESS}:3"),
        ("curtGtidSn", "3"),
        ("curtGtidLct", "2"),
        ("rowsCount", "1"),
    ]
    assert entries[-1].header.gtid == f"{UUID_ESS}:1-5"


def test_gtid_mode_mariadb(fixtures_dir: Path):
    entries = convert(
        fixtures_dir / "rust_mysql_common" / "mariadb-bin.000001", gtid_set=MariadbGtidSet.parse("0-1-0")
    )
    assert [e.header.gtid for e in entries] == ["0-1-0"] + ["0-1-1"] * 5 + ["0-1-2"] * 5
    assert props(entries[4].header) == [("curtGtid", "0-1-1"), ("rowsCount", "1")]


# --------------------------------------------------------------------------- every fixture
GOOD = (
    sorted(
        p.relative_to(DIR).as_posix()
        for p in DIR.rglob("*")
        if p.is_file()
        and p.name not in ("README.md", "SHA256SUMS")
        and p.relative_to(DIR).as_posix() not in X.BAD_FILES
    )
    if DIR.is_dir()
    else []
)


@pytest.mark.parametrize("name", GOOD)
def test_every_good_fixture_converts(fixtures_dir: Path, name: str):
    entries = convert(fixtures_dir / name)
    for entry in entries:
        assert C.Entry.FromString(entry.SerializeToString()) == entry
        h = entry.header
        if entry.entryType == C.HEARTBEAT:
            continue
        assert h.version == 1 and h.logfileName == Path(name).name and h.eventLength > 0
        if (
            entry.entryType == C.ROWDATA
            and h.eventType in (C.INSERT, C.UPDATE, C.DELETE)
            and not payload(entry).sql
        ):
            change = payload(entry)
            count = dict(props(h)).get("rowsCount")
            assert count == (str(len(change.rowDatas)) if change.rowDatas else None)
            for row in change.rowDatas:
                for columns in (row.beforeColumns, row.afterColumns):
                    indexes = [c.index for c in columns]
                    assert indexes == sorted(set(indexes))
                    assert all(c.HasField("isNull") for c in columns)


# --------------------------------------------------------------------------- the schema history hook
def test_table_meta_from_a_schema_history(fixtures_dir: Path):
    def complete(tm: TableMap) -> TableMap:
        return dataclasses.replace(
            tm,
            names=["building_no", "building_name", "address"],
            primary_key=[(0, 0)],
            unsigned=[True, False, False],
            collations=[None, 33, 33],  # utf8_general_ci
            column_types=["int(10) unsigned", "varchar(255)", "varchar(355)"],
        )

    conv = Converter()
    decoder = EventDecoder(table_meta=complete)
    entries = [
        e
        for event in read_events(fixtures_dir / "binlog-parser" / "mysql-bin.01", decoder=decoder)
        for e in conv.entries(event)
    ]
    (_, after) = rows(entries[1])[0]
    assert after == [
        (0, "building_no", INTEGER, "int(10) unsigned", True, True, "1"),
        (1, "building_name", VARCHAR, "varchar(255)", False, True, "ACME Headquaters"),
        (2, "address", VARCHAR, "varchar(355)", False, True, "3950 North 1st Street CA 95134"),
    ]


# --------------------------------------------------------------------------- units
@pytest.mark.parametrize(
    ("x", "text"),
    [
        (1.5, "1.5"),
        (100.0, "100.0"),
        (1e10, "1.0E10"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1e-5, "1.0E-5"),
        (-2.5e-7, "-2.5E-7"),
        (123456789.125, "1.23456789125E8"),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (3.4028234663852886e38, "3.4028234663852886E38"),
        (449847.0, "449847.0"),
    ],
)
def test_java_double_text(x, text):
    assert java_double_text(x) == text


def test_decimal_text():
    assert decimal_text(Decimal("-0.00")) == "0.00"
    assert decimal_text(Decimal("-12345.678900")) == "-12345.678900"
    assert decimal_text(Decimal("1E+2")) == "100"


@pytest.mark.parametrize(
    ("sql", "schema", "expected"),
    [
        ("CREATE TABLE t (id int)", "db", [("CREATE", "db", "t")]),
        ("create table if not exists `a`.`b c` (x int)", None, [("CREATE", "a", "b c")]),
        ("CREATE TEMPORARY TABLE tmp (x int)", "db", [("CREATE", "db", "tmp")]),
        ("ALTER TABLE `s`.t ADD COLUMN y int", "db", [("ALTER", "s", "t")]),
        ("DROP TABLE IF EXISTS `t1` /* generated by server */", "db", [("ERASE", "db", "t1")]),
        ("TRUNCATE TABLE x.y", "db", [("TRUNCATE", "x", "y")]),
        ("truncate y", "db", [("TRUNCATE", "db", "y")]),
        ("RENAME TABLE a TO b", "db", [("RENAME", "db", "b")]),
        ("CREATE UNIQUE INDEX i ON t (a)", "db", [("CINDEX", "db", "t")]),
        ("DROP INDEX i ON s.t", "db", [("DINDEX", "s", "t")]),
        ("INSERT INTO t VALUES (1)", "db", [("INSERT", "db", "t")]),
        ("UPDATE t SET a = 1", "db", [("UPDATE", "db", "t")]),
        ("DELETE FROM s.t WHERE 1", "db", [("DELETE", "s", "t")]),
        ("/* comment */ CREATE DATABASE shop", None, [("QUERY", "shop", None)]),
        ("GRANT ALL ON *.* TO x", "db", []),
        ("ALTER USER 'root'@'localhost' IDENTIFIED BY 'x'", "db", []),
    ],
)
def test_statement_classes(sql, schema, expected):
    assert [(str(r.type), r.schema, r.table) for r in parse_ddl(sql, schema)] == expected


def _query(sql: str, schema: str = "db", thread_id: int = 5) -> ev.QueryEvent:
    return ev.QueryEvent(
        E.QUERY, 1700000000, 3, 80, 1080, 0, 1000, "bin.000009", thread_id=thread_id, schema=schema, query=sql
    )


def test_classifier_failures_and_multiple_results(monkeypatch: pytest.MonkeyPatch):
    alter = _query("ALTER TABLE s.t ADD x int")
    (entry,) = Converter().entries(alter)
    assert brief(entry) == ("ROWDATA", 1000, 80, "s", "t", "ALTER")
    assert payload(entry).isDdl and payload(entry).eventType == C.ALTER

    def broken(sql, schema):
        raise RuntimeError("cannot parse")

    unknown = [DdlResult(DdlType.UNKNOWN, "s", "t", error="cannot read it")]
    for classifier in (broken, lambda sql, schema: unknown):
        monkeypatch.setattr(queries, "parse_ddl", classifier)
        (entry,) = Converter().entries(alter)
        assert brief(entry)[5] == "QUERY" and payload(entry).isDdl
    # no result: an informational QUERY (Canal drops the statement), isDdl not set
    monkeypatch.setattr(queries, "parse_ddl", lambda sql, schema: [])
    (entry,) = Converter().entries(alter)
    assert brief(entry)[3:] == ("", "", "QUERY") and not payload(entry).HasField("isDdl")
    # multi-statement DDL: the first result names the entry
    renames = [DdlResult(DdlType.RENAME, "d", "b"), DdlResult(DdlType.RENAME, "d", "c")]
    monkeypatch.setattr(queries, "parse_ddl", lambda sql, schema: renames)
    (entry,) = Converter().entries(_query("RENAME TABLE a TO b, x TO c", schema="d"))
    assert brief(entry)[3:] == ("d", "b", "RENAME")
    assert payload(entry).ddlSchemaName == "d"


def test_query_statements_as_canal_reads_them():
    conv = Converter()
    (begin,) = conv.entries(_query("BEGIN", thread_id=768))
    assert brief(begin) == ("TRANSACTIONBEGIN", 1000, 80, "", "", None)
    assert payload(begin).threadId == 768 and props(payload(begin)) == []
    (end,) = conv.entries(_query("COMMIT"))
    assert brief(end)[0] == "TRANSACTIONEND" and payload(end).transactionId == "0"
    (xa_start,) = conv.entries(_query("XA START X'01',X'',1", thread_id=9))
    assert payload(xa_start).threadId == 9
    assert props(payload(xa_start)) == [("XA_TYPE", "XA START"), ("XA_XID", " X'01',X'',1")]
    (xa_end,) = conv.entries(_query("XA END X'01',X'',1"))
    assert brief(xa_end)[0] == "TRANSACTIONEND" and payload(xa_end).transactionId == "0"
    assert props(payload(xa_end)) == [("XA_TYPE", "XA END"), ("XA_XID", " X'01',X'',1")]
    for sql, kind in (("XA COMMIT X'01',X'',1", "XACOMMIT"), ("XA ROLLBACK X'01',X'',1", "XAROLLBACK")):
        (entry,) = conv.entries(_query(sql))
        assert brief(entry) == ("ROWDATA", 1000, 80, "", "", kind)
        change = payload(entry)
        assert (C.EventType.Name(change.eventType), change.sql, change.HasField("isDdl")) == (
            kind,
            sql,
            False,
        )
        assert props(change) == [("XA_TYPE", kind[:2] + " " + kind[2:]), ("XA_XID", " X'01',X'',1")]
    (savepoint,) = conv.entries(_query("SAVEPOINT sp1"))
    assert brief(savepoint)[3:] == ("", "", "QUERY") and not payload(savepoint).HasField("isDdl")
    (no_schema,) = conv.entries(_query("CREATE DATABASE x", schema=""))
    assert brief(no_schema)[3:] == ("x", "", "QUERY")
    assert payload(no_schema).ddlSchemaName == "" and payload(no_schema).isDdl


def test_xid_heartbeat_and_ignored_events():
    conv = Converter()
    (end,) = conv.entries(
        ev.XidEvent(E.XID, 1700000000, 3, 31, 2000, 0, 1969, "bin.000009", xid=18446744073709551615)
    )
    assert payload(end).transactionId == "18446744073709551615"
    assert end.header.executeTime == 1700000000000
    (hb,) = conv.entries(
        ev.HeartbeatEvent(
            E.HEARTBEAT, 0, 3, 39, 2000, 0, 0, "bin.000009", log_file="bin.000009", log_pos=2000
        )
    )
    assert (
        hb.entryType == C.HEARTBEAT and hb.header == C.Header(eventType=C.MHEARTBEAT) and hb.storeValue == b""
    )
    for ignored in (
        ev.RotateEvent(E.ROTATE, 0, 3, 44, 0, 0, 0, "bin.000009", next_file="bin.000010"),
        ev.XaPrepareEvent(E.XA_PREPARE, 0, 3, 44, 0, 0, 0, "bin.000009"),
        ev.StopEvent(E.STOP, 0, 3, 19, 0, 0, 0, "bin.000009"),
        ev.ExecuteLoadQueryEvent(
            E.EXECUTE_LOAD_QUERY, 0, 3, 44, 0, 0, 0, "bin.000009", query="LOAD DATA INFILE 'x' INTO TABLE t"
        ),
    ):
        assert conv.entries(ignored) == []


def test_rows_without_their_table_map():
    conv = Converter()
    event = ev.RowsEvent(E.WRITE_ROWS, 0, 3, 60, 1060, 0, 1000, "bin.000009", kind="INSERT", table_id=42)
    with pytest.raises(TableIdNotFoundError, match="table id 42") as info:
        conv.entries(event)
    assert (info.value.table_id, info.value.source, info.value.offset) == (42, "bin.000009", 1000)


def test_fixtures_dir_is_the_shared_one(fixtures_dir: Path):
    assert fixtures_dir == DIR


def test_the_classifier_is_the_ddl_parser():
    conv = Converter()
    (rename,) = conv.entries(_query("RENAME TABLE a TO b, c TO d", schema="shop"))
    assert brief(rename)[3:] == ("shop", "b", "RENAME")
    (drop,) = conv.entries(_query("DROP TABLE IF EXISTS `x`.`y`"))
    assert brief(drop)[3:] == ("x", "y", "ERASE") and payload(drop).isDdl
