"""Expected decoded content of the real binlog fixtures in ``shared/fixtures/binlog``.

Every block names where its values come from (repository, path, commit). Only the VALUES were
taken from those sources (no code), and they are converted to pycanal's value conventions:

* DECIMAL -> ``decimal.Decimal`` text with every scale digit;
* DATE/DATETIME/TIME -> the server's text; TIMESTAMP -> the server's text **in UTC**;
* CHAR/VARCHAR/TEXT -> ``str`` when the column charset is known; BIT -> int; ENUM -> label when
  the TABLE_MAP carries the labels, else the 1-based index; SET -> list of labels / int bitmask;
* JSON -> the JSON text exactly as MySQL prints it (``{"k": 1}``: ``", "`` and ``": "`` separators);
* VECTOR/BLOB -> bytes.

Paths are relative to the fixtures directory. Event types are given as numeric codes (the names
differ between tools): 2 QUERY, 15 FORMAT_DESCRIPTION, 16 XID, 19 TABLE_MAP, 23/24/25 rows v1,
30/31/32 rows v2, 33 GTID, 34 ANONYMOUS_GTID, 35 PREVIOUS_GTIDS, 40 TRANSACTION_PAYLOAD,
161 BINLOG_CHECKPOINT, 162 MariaDB GTID, 163 GTID_LIST.
"""

from __future__ import annotations

# The json-opaque.binlog values are kept in tests/expected_json_opaque.py (written alongside).
from expected_json_opaque import EXPECTED as _SHARED_JSON_OPAQUE

# ---------------------------------------------------------------------------------------------
# The fixture set itself: shared/fixtures/binlog/README.md ("This directory holds 38 binary log
# files") and its SHA256SUMS.
# ---------------------------------------------------------------------------------------------
FIXTURE_COUNT = 38

# ---------------------------------------------------------------------------------------------
# Deliberately bad inputs: path -> byte offset of the event the error must name.
#
# * binlog_truncated_event.000001: 14 bytes = magic + 10 bytes of the first event header, so the
#   only event starts at offset 4 (README; rust_mysql_common src/binlog/mod.rs expects a read error).
# * binlog_truncated_prev_gtid_event.000001: a complete FDE (4..120) then a PREVIOUS_GTIDS event
#   cut after 9 header bytes (file size 129 = 120 + 9), README.
# * corrupt-relay-bin.000624: blackbeam/rust_mysql_common src/binlog/mod.rs (commit
#   0648371c42d84e5334d219f4af9dde7c3d14530d, binlog_event_roundtrip) accepts an UnexpectedEof on
#   "QUERY_EVENT with event_size 171". The file has 45 QUERY events of 171 bytes; the broken one
#   is the last, at offset 91204 (a length field of 16,949 bytes overruns its 152-byte body).
# * ver_5_1-wl2325_r.001: the same rust test accepts a broken "XID_EVENT of size 0x26"; rust reads
#   code 16 as XID, and the first code-16 event of size 38 is at offset 428. In the pre-GA
#   numbering code 16 is a TABLE_MAP written without the metadata block GA servers expect.
# * tiflow/mysql-bin.000001: MariaDB 10.0.17 writes its hi-res TIMESTAMP(n) columns as type 7
#   (TIMESTAMP) with no metadata, so the row length is ambiguous from the binlog alone. The first
#   rows event on such a table (steven.t, `d timestamp(3)`) is the WRITE_ROWS_V1 at offset 1819.
#   Decoding it needs the table's DDL (the schema history of a later issue), not the binlog.
# ---------------------------------------------------------------------------------------------
BAD_FILES: dict[str, int] = {
    "rust_mysql_common/binlog_truncated_event.000001": 4,
    "rust_mysql_common/binlog_truncated_prev_gtid_event.000001": 120,
    "rust_mysql_common/corrupt-relay-bin.000624": 91204,
    "rust_mysql_common/ver_5_1-wl2325_r.001": 428,
    "tiflow/mysql-bin.000001": 1819,
}

# ---------------------------------------------------------------------------------------------
# Top-level event counts asserted by other decoders' test suites.
# * osheroff/mysql-binlog-connector-java src/test/java/com/github/shyiko/mysql/binlog/
#   BinaryLogFileReaderIntegrationTest.java (commit a4c14bb8e1ff8bc8d2f172fa968b9e82032a8967):
#   readAll(sakila) 1462, compressed 5, checksum-none 191, checksum-crc32 303.
# * apecloud/mysql-binlog-connector-rust tests/parse_file_tests/parse_file_tests.rs (commit
#   f7cca8e / c29ea9967ba667a7d985ea5ad1ad26949b6fdf35): test_parse_binlog(000057, 8) and
#   (000080, 37). Those files carry no value listing in that repository; the values below come
#   from the ROWS_QUERY statements inside the file itself.
# A TRANSACTION_PAYLOAD counts as one event (its inner events are not counted there).
# ---------------------------------------------------------------------------------------------
EVENT_COUNTS: dict[str, int] = {
    "mysql-binlog-connector-java/mysql-bin.sakila": 1462,
    "mysql-binlog-connector-java/mysql-bin.compressed": 5,
    "mysql-binlog-connector-java/mysql-bin.checksum-none": 191,
    "mysql-binlog-connector-java/mysql-bin.checksum-crc32": 303,
    "mysql-binlog-connector-rust/mysql-bin.000057": 8,
    "mysql-binlog-connector-rust/mysql-bin.000080": 37,
}

# ---------------------------------------------------------------------------------------------
# go-mysql/tcb-eval002c-bin.003320: go-mysql-org/go-mysql replication/row_event_test.go at commit
# e928aedd5eda2e9e451071b6302bd23fecb1ca0c (TestDecodeDecimal), the `mysql> select * from
# decodedecimal` listing; the INSERTs are in replication/t/ddsql.sql at the same commit.
# Columns: id, v4_2, v5_0, v7_3, v10_2, v10_3, v13_2, v15_14, v20_10, v30_5, v30_20, v30_25,
# prec, scale. The listing already prints every scale digit (server text), so it is our form.
# ---------------------------------------------------------------------------------------------
GO_MYSQL_DECIMAL_FILE = "go-mysql/tcb-eval002c-bin.003320"
GO_MYSQL_DECIMAL_SCALES = (2, 0, 3, 2, 3, 2, 14, 10, 5, 20, 25)
GO_MYSQL_DECIMAL_PRECISIONS = (4, 5, 7, 10, 10, 13, 15, 20, 30, 30, 30)
# fmt: off
GO_MYSQL_DECIMAL_ROWS: list[tuple[int, tuple[str, ...], int, int]] = [
    (1, ("-10.55", "-11", "-10.550", "-10.55", "-10.550", "-10.55", "-9.99999999999999", "-10.5500000000", "-10.55000", "-10.55000000000000000000", "-10.5500000000000000000000000"), 4, 2),
    (2, ("0.01", "0", "0.012", "0.01", "0.012", "0.01", "0.01234567890123", "0.0123456789", "0.01235", "0.01234567890123456789", "0.0123456789012345678912345"), 30, 25),
    (3, ("99.99", "12345", "9999.999", "12345.00", "12345.000", "12345.00", "9.99999999999999", "12345.0000000000", "12345.00000", "12345.00000000000000000000", "12345.0000000000000000000000000"), 5, 0),
    (4, ("99.99", "12345", "9999.999", "12345.00", "12345.000", "12345.00", "9.99999999999999", "12345.0000000000", "12345.00000", "12345.00000000000000000000", "12345.0000000000000000000000000"), 10, 3),
    (5, ("99.99", "123", "123.450", "123.45", "123.450", "123.45", "9.99999999999999", "123.4500000000", "123.45000", "123.45000000000000000000", "123.4500000000000000000000000"), 10, 3),
    (6, ("-99.99", "-123", "-123.450", "-123.45", "-123.450", "-123.45", "-9.99999999999999", "-123.4500000000", "-123.45000", "-123.45000000000000000000", "-123.4500000000000000000000000"), 20, 10),
    (7, ("0.00", "0", "0.000", "0.00", "0.000", "0.00", "0.00012345000099", "0.0001234500", "0.00012", "0.00012345000098765000", "0.0001234500009876500000000"), 15, 14),
    (8, ("0.00", "0", "0.000", "0.00", "0.000", "0.00", "0.00012345000099", "0.0001234500", "0.00012", "0.00012345000098765000", "0.0001234500009876500000000"), 22, 20),
    (9, ("0.12", "0", "0.123", "0.12", "0.123", "0.12", "0.12345000098765", "0.1234500010", "0.12345", "0.12345000098765000000", "0.1234500009876500000000000"), 30, 20),
    (10, ("0.00", "0", "0.000", "0.00", "0.000", "0.00", "-0.00000001234500", "-0.0000000123", "0.00000", "-0.00000001234500009877", "-0.0000000123450000987650000"), 30, 20),
    (11, ("99.99", "99999", "9999.999", "99999999.99", "9999999.999", "99999999999.99", "9.99999999999999", "9999999999.9999999999", "1234500009876.50000", "9999999999.99999999999999999999", "99999.9999999999999999999999999"), 30, 5),
    (12, ("99.99", "99999", "9999.999", "99999999.99", "9999999.999", "111111111.11", "9.99999999999999", "111111111.1100000000", "111111111.11000", "111111111.11000000000000000000", "99999.9999999999999999999999999"), 10, 2),
    (13, ("0.01", "0", "0.010", "0.01", "0.010", "0.01", "0.01000000000000", "0.0100000000", "0.01000", "0.01000000000000000000", "0.0100000000000000000000000"), 7, 3),
    (14, ("99.99", "123", "123.400", "123.40", "123.400", "123.40", "9.99999999999999", "123.4000000000", "123.40000", "123.40000000000000000000", "123.4000000000000000000000000"), 10, 2),
    (15, ("-99.99", "-563", "-562.580", "-562.58", "-562.580", "-562.58", "-9.99999999999999", "-562.5800000000", "-562.58000", "-562.58000000000000000000", "-562.5800000000000000000000000"), 13, 2),
    (16, ("-99.99", "-3699", "-3699.010", "-3699.01", "-3699.010", "-3699.01", "-9.99999999999999", "-3699.0100000000", "-3699.01000", "-3699.01000000000000000000", "-3699.0100000000000000000000000"), 13, 2),
    (17, ("-99.99", "-1948", "-1948.140", "-1948.14", "-1948.140", "-1948.14", "-9.99999999999999", "-1948.1400000000", "-1948.14000", "-1948.14000000000000000000", "-1948.1400000000000000000000000"), 13, 2),
]
# fmt: on

# ---------------------------------------------------------------------------------------------
# blackbeam/rust_mysql_common src/binlog/mod.rs, commit 0648371c42d84e5334d219f4af9dde7c3d14530d
# (tests binlog_event_roundtrip and gtid_tagged_log_event_from_binlog).
# ---------------------------------------------------------------------------------------------

# time_issue.000001 ("hour overflow test case"): Value::Time(true, 21, 3, 48, 27, 0) is negative,
# 21 days 3 h 48 min 27 s; the server prints TIME as hours, so 21 * 24 + 3 = 507 -> "-507:48:27".
TIME_ISSUE_FILE = "rust_mysql_common/time_issue.000001"
TIME_ISSUE_VALUE = "-507:48:27"

# minimal_row_metadata.000001 (issue #162): rust names metadata-less columns "@<0-based index>";
# "@4" holds Value::Int(3230202323) (INT UNSIGNED above 2^31: SIGNEDNESS from MINIMAL metadata),
# "@2" has charset UTF8MB4_0900_AI_CI (collation 255). Only the first row of each event is checked.
MINIMAL_ROW_METADATA_FILE = "rust_mysql_common/minimal_row_metadata.000001"
MINIMAL_ROW_UNSIGNED_INDEX = 4
MINIMAL_ROW_UNSIGNED_VALUE = 3230202323
MINIMAL_ROW_CHARSET_INDEX = 2
MINIMAL_ROW_CHARSET = 255  # utf8mb4_0900_ai_ci

# mysql_type_bit.000001: every WRITE row is [Bytes([0b100]), Bytes(b"foo"), Bytes([0b100000])] for
# (a BIT(3), b TEXT, c BIT(8)); BIT is an int in pycanal: b'100' = 4, b'100000' = 32.
MYSQL_TYPE_BIT_FILE = "rust_mysql_common/mysql_type_bit.000001"
MYSQL_TYPE_BIT_ROW = (0b100, "foo", 0b100000)

# mysql-enum-string-set.000001: t(f1 CHAR(128), f2 VARCHAR(300), f3 ENUM('var1','variant2','foo'),
# f4 SET('one','two','three','four'), f5 TEXT). Rust asserts the raw ENUM index (1 / 2) and SET
# bitmask (0b0101 / 0b1010); the file has FULL metadata (ENUM_STR_VALUE / SET_STR_VALUE), so we
# expect the labels: index 1 -> 'var1', 2 -> 'variant2'; 0b0101 -> one, three; 0b1010 -> two, four.
ENUM_SET_FILE = "rust_mysql_common/mysql-enum-string-set.000001"
ENUM_SET_NAMES = ["f1", "f2", "f3", "f4", "f5"]
ENUM_SET_ENUM_LABELS = ["var1", "variant2", "foo"]
ENUM_SET_SET_LABELS = ["one", "two", "three", "four"]
_S100 = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
_S298 = (
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
    "0123456789012345678901234567801234567890123456789012345678901234567890123456789012345678901234567890"
    "12345678901234567890123456789012345678901234567890123456780123456789012345678901234567890123456789"
)
assert len(_S100) == 100 and len(_S298) == 298  # as in the rust literals
_ENUM_SET_ROW_A = (_S100, _S298, "var1", ["one", "three"], "0123456789")
_ENUM_SET_ROW_B = ("field1", "field_2", "variant2", ["two", "four"], _S298)
# (kind, rows) in file order; UPDATE rows are (before, after).
ENUM_SET_EVENTS = [
    ("INSERT", [_ENUM_SET_ROW_A]),
    ("UPDATE", [(_ENUM_SET_ROW_A, _ENUM_SET_ROW_B)]),
    ("DELETE", [_ENUM_SET_ROW_B]),
]

# vector.binlog: table foo(id SERIAL, vector_column VECTOR(3)); in the first insert rust expects
# (1, [205,204,140,63, 205,204,12,64, 51,51,83,64]) and (2, [0,0,128,63, 0,0,128,191, 0,0,0,0]),
# i.e. little-endian float32 [1.1, 2.2, 3.3] and [1.0, -1.0, 0.0]. VECTOR_DIM metadata: foo [3],
# bar [2, 4]. The file inserts the same foo rows twice (after a DROP/CREATE), both are checked.
VECTOR_FILE = "rust_mysql_common/vector.binlog"
VECTOR_FOO_ROWS = [
    (1, bytes([205, 204, 140, 63, 205, 204, 12, 64, 51, 51, 83, 64])),
    (2, bytes([0, 0, 128, 63, 0, 0, 128, 191, 0, 0, 0, 0])),
]
VECTOR_FOO_FLOATS = [(1.1, 2.2, 3.3), (1.0, -1.0, 0.0)]
VECTOR_DIMS = {"foo": [3], "bar": [2, 4]}

# binlog_transaction_with_GTID_TAG.000001 (gtid_tagged_log_event_from_binlog): SID
# 55778904-0299-11f1-b1b8-4ef0c4956feb, tag "mytag", GNO 3. PREVIOUS_GTIDS has two entries:
# untagged [1, 14) and "mytag" [1, 3) (half-open), i.e. 1-13 and 1-2 in the server's text form.
GTID_TAG_FILE = "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001"
GTID_TAG_UUID = "55778904-0299-11f1-b1b8-4ef0c4956feb"
GTID_TAG_TAG = "mytag"
GTID_TAG_GNO = 3
GTID_TAG_TEXT = "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
GTID_TAG_PREVIOUS_TEXT = "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
GTID_TAG_PREVIOUS_MEMBERS = [
    (GTID_TAG_UUID, None, [(1, 13)]),
    (GTID_TAG_UUID, "mytag", [(1, 2)]),
]

# mariadb-bin.000001 (binlog_row_metadata=FULL): schema toddy_test, table outbox, names
# id, topic, event_type, event, created; PRI_KEY_FLAG on id only; charsets UNKNOWN,
# UTF8MB4_GENERAL_CI (45), UTF8MB4_GENERAL_CI (45), BINARY (63), UNKNOWN (None in pycanal).
# Values: the ANNOTATE_ROWS statement in the file is
#   insert into outbox (topic, event_type, event) values ('foo', 'JSON', '{"foo":1}')
# `event` is a BLOB (binary collation) -> bytes; `created` is TIMESTAMP2 filled by the server's
# CURRENT_TIMESTAMP default, so it must equal the event's own timestamp (shown in UTC).
MARIADB_BIN_FILE = "rust_mysql_common/mariadb-bin.000001"
MARIADB_BIN_SCHEMA = "toddy_test"
MARIADB_BIN_TABLE = "outbox"
MARIADB_BIN_NAMES = ["id", "topic", "event_type", "event", "created"]
MARIADB_BIN_PRIMARY_KEY = [0]
MARIADB_BIN_COLLATIONS = [None, 45, 45, 63, None]
MARIADB_BIN_ENUM_LABELS = {2: ["BLOB", "JSON", "PROTOBUF"]}
MARIADB_BIN_VALUES = ("foo", "JSON", b'{"foo":1}')  # topic, event_type, event
MARIADB_BIN_GTIDS = ["0-1-1", "0-1-2"]

# json-opaque.binlog: the 8 single-row inserts into foo.test(a json). The expected JSON texts
# (rust_mysql_common's serde values converted to MySQL's own JSON printing) already live in
# tests/expected_json_opaque.py (EXPECTED); they are reused here, not duplicated.
JSON_OPAQUE_FILE = "rust_mysql_common/json-opaque.binlog"
JSON_OPAQUE_EXPECTED = list(_SHARED_JSON_OPAQUE)

# transaction_compression.000001: the decompressed payload holds exactly QUERY, TABLE_MAP,
# WRITE_ROWS(v2) and XID, then nothing (rust reads a 5th event and expects None).
TRANSACTION_COMPRESSION_FILE = "rust_mysql_common/transaction_compression.000001"
TRANSACTION_COMPRESSION_INNER = [2, 19, 30, 16]

# ---------------------------------------------------------------------------------------------
# osheroff/mysql-binlog-connector-java BinaryLogFileReaderIntegrationTest.java (commit
# a4c14bb8e1ff8bc8d2f172fa968b9e82032a8967), testUnsupportedEventType: the comment's
# `SHOW BINLOG EVENTS IN 'mysql-bin.aurora-padding'` listing: (Pos, Event_type, End_log_pos).
# Type 100 (Aurora_padding) is flagged LOG_EVENT_IGNORABLE_F and must be kept, not an error.
# ---------------------------------------------------------------------------------------------
AURORA_FILE = "mysql-binlog-connector-java/mysql-bin.aurora-padding"
AURORA_EVENTS = [(4, 15, 185), (185, 35, 216), (216, 34, 281), (281, 100, 1209), (1209, 2, 1294)]
AURORA_LAST_QUERY = "BEGIN"

# mysql-bin.sakila: made from Sakila's sakila-schema.sql / sakila-data.sql
# (src/test/resources/readme.md of the same repository); row counts of the Sakila tables and a few
# rows of sakila-data.sql. TIMESTAMP columns: sakila-data.sql writes last_update as local text
# ('2006-02-15 04:34:33' for actor 1); the binlog stores UTC epoch seconds and we print UTC. The
# loading server ran one hour ahead of UTC (CET in winter): every TIMESTAMP decodes exactly one hour
# earlier than the SQL text while DATETIME columns (rental_date, payment_date, create_date) match the
# SQL text unchanged. So the UTC texts below are the SQL texts minus one hour.
SAKILA_FILE = "mysql-binlog-connector-java/mysql-bin.sakila"
SAKILA_ROW_COUNTS = {
    "actor": 200,
    "address": 603,
    "category": 16,
    "city": 600,
    "country": 109,
    "customer": 599,
    "film": 1000,
    "film_actor": 5462,
    "film_category": 1000,
    "film_text": 1000,
    "inventory": 4581,
    "language": 6,
    "payment": 16049,
    "rental": 16044,
    "staff": 2,
    "store": 2,
}
SAKILA_WRITE_ROWS_EVENTS = 1374  # README: 1374 WRITE_ROWS_V1 across 18 TABLE_MAP events
SAKILA_TABLE_MAPS = 18
_ACADEMY = "A Epic Drama of a Feminist And a Mad Scientist who must Battle a Teacher in The Canadian Rockies"
SAKILA_FIRST_ROWS = {
    # actor: (1,'PENELOPE','GUINESS','2006-02-15 04:34:33')
    "actor": (1, "PENELOPE", "GUINESS", "2006-02-15 03:34:33"),
    # film: (1,'ACADEMY DINOSAUR',...,2006,1,NULL,6,'0.99',86,'20.99','PG',
    #        'Deleted Scenes,Behind the Scenes','2006-02-15 05:03:42')
    # description is TEXT without charset metadata (5.5): str or bytes are both accepted.
    # rating ENUM('G','PG','PG-13','R','NC-17') and special_features SET('Trailers','Commentaries',
    # 'Deleted Scenes','Behind the Scenes') have no labels in a 5.5 binlog: index 2, bitmask 0b1100.
    "film": (
        1,
        "ACADEMY DINOSAUR",
        _ACADEMY,
        2006,
        1,
        None,
        6,
        "0.99",
        86,
        "20.99",
        2,
        0b1100,
        "2006-02-15 04:03:42",
    ),
    # rental: (1,'2005-05-24 22:53:30',367,130,'2005-05-26 22:04:30',1,'2006-02-15 21:30:53')
    "rental": (1, "2005-05-24 22:53:30", 367, 130, "2005-05-26 22:04:30", 1, "2006-02-15 20:30:53"),
    # payment: (1,1,1,76,'2.99','2005-05-25 11:30:37','2006-02-15 22:12:30')
    "payment": (1, 1, 1, 76, "2.99", "2005-05-25 11:30:37", "2006-02-15 21:12:30"),
}

# ---------------------------------------------------------------------------------------------
# alibaba/canal parse/src/test/resources/binlog/mysql-bin.000001 (README row): rows v1 events,
# 10 WRITE, 78 UPDATE, 1 DELETE. The repository has no value listing; sanity rules instead:
# * retl.xdual(ID, X timestamp DEFAULT CURRENT_TIMESTAMP ON UPDATE ...): each after-image X must
#   equal the event's own timestamp in UTC, and each before-image the previous after-image;
# * erosa.testpk.current is DATETIME (the server's local wall-clock, Asia/Shanghai, UTC+8): rows
#   inserted with NOW() show the event time + 8 h.
# ---------------------------------------------------------------------------------------------
CANAL_FILE = "canal/mysql-bin.000001"
CANAL_ROWS_EVENT_COUNTS = {"INSERT": 10, "UPDATE": 78, "DELETE": 1}
CANAL_LOCAL_UTC_OFFSET = 8 * 3600
# (rows-event offset, row) of testpk inserts whose DATETIME came from NOW().
CANAL_TESTPK_NOW_INSERTS = [8262, 8477, 10113, 10328]

# ---------------------------------------------------------------------------------------------
# mariadb-operator/mariadb-poc mariadb-binlog/README.md (commit 6255cb1): "Getting binlog metadata
# from binlogs/domain_id_0/mariadb-repl-bin.000005": ServerId 10, ServerVersion
# 11.8.5-MariaDB-ubu2404-log, BinlogVersion 4, LogPos 74142, FirstTimestamp 1767128185,
# LastTimestamp 1767128186, PreviousGTIDs 0-10-262580, FirstGTID 0-10-262581,
# LastGTID 0-10-262667, RotateEvent true, StopEvent false. The next file is .000006 in that listing.
# ---------------------------------------------------------------------------------------------
MARIADB_POC_FILE = "mariadb-poc/mariadb-repl-bin.000005"
MARIADB_POC = {
    "server_id": 10,
    "server_version": "11.8.5-MariaDB-ubu2404-log",
    "binlog_version": 4,
    "log_pos": 74142,
    "first_timestamp": 1767128185,
    "last_timestamp": 1767128186,
    "gtid_list": "0-10-262580",
    "first_gtid": "0-10-262581",
    "last_gtid": "0-10-262667",
    "rotate_next_file": "mariadb-repl-bin.000006",
}

# ---------------------------------------------------------------------------------------------
# zalora/binlog-parser data/fixtures (commit 333ddec): plaintext-mysql-bin.01 (mysqlbinlog -vv
# output) and 01.json; plaintext-mysql-bin.07 and 07.json.
# Events are (pos, type code, end_log_pos) from the "# at N" / "end_log_pos M" lines.
# Time zones: for .01 mysqlbinlog printed local time UTC+8 ("#170413 14:34:30") while
# SET TIMESTAMP=1492065270 and 01.json ("2017-04-13T06:34:30Z") are UTC, so the header
# timestamps are epoch seconds 1492065270/...77/...98/...336. For .07 mysqlbinlog ran in UTC
# (SET TIMESTAMP=1494906269 is printed as 3:44:29), so its printed times are UTC.
# Rows map the JSON column names onto the binlog's column order (no names in these binlogs).
# ---------------------------------------------------------------------------------------------
BINLOG_PARSER_01_FILE = "binlog-parser/mysql-bin.01"
BINLOG_PARSER_01_EVENTS = [
    (4, 15, 120),
    (120, 2, 197),
    (197, 19, 258),
    (258, 30, 397),
    (397, 16, 428),
    (428, 2, 503),
    (503, 19, 558),
    (558, 30, 692),
    (692, 16, 723),
    (723, 2, 798),
    (798, 19, 853),
    (853, 31, 967),
    (967, 16, 998),
    (998, 2, 1075),
    (1075, 19, 1136),
    (1136, 32, 1226),
    (1226, 16, 1257),
]
BINLOG_PARSER_01_FDE_TIMESTAMP = 1492065252  # "#170413 14:34:12" at UTC+8
# (first event offset of the transaction, epoch seconds) from the SET TIMESTAMP lines.
BINLOG_PARSER_01_TIMESTAMPS = [(120, 1492065270), (428, 1492065277), (723, 1492065298), (998, 1492065336)]
BINLOG_PARSER_01_XIDS = [9, 10, 12, 14]
BINLOG_PARSER_01_METAS = {"buildings": [0, 765, 1065], "rooms": [0, 765, 0]}  # VARSTRING(765) etc.
BINLOG_PARSER_01_COLUMNS = {
    "buildings": ["building_no", "building_name", "address"],
    "rooms": ["room_no", "room_name", "building_no"],
}
# (type, table, BinlogPosition = end_log_pos of the rows event, XId, row or (old, new)) per 01.json.
BINLOG_PARSER_01_RECORDS = [
    (
        "Insert",
        "buildings",
        397,
        9,
        {"address": "3950 North 1st Street CA 95134", "building_name": "ACME Headquaters", "building_no": 1},
    ),
    (
        "Insert",
        "buildings",
        397,
        9,
        {"address": "5000 North 1st Street CA 95134", "building_name": "ACME Sales", "building_no": 2},
    ),
    ("Insert", "rooms", 692, 10, {"building_no": 1, "room_name": "Amazon", "room_no": 1}),
    ("Insert", "rooms", 692, 10, {"building_no": 1, "room_name": "War Room", "room_no": 2}),
    ("Insert", "rooms", 692, 10, {"building_no": 1, "room_name": "Office of CEO", "room_no": 3}),
    ("Insert", "rooms", 692, 10, {"building_no": 2, "room_name": "Marketing", "room_no": 4}),
    ("Insert", "rooms", 692, 10, {"building_no": 2, "room_name": "Showroom", "room_no": 5}),
    (
        "Update",
        "rooms",
        967,
        12,
        (
            {"building_no": 2, "room_name": "Marketing", "room_no": 4},
            {"building_no": 2, "room_name": "MARKETING", "room_no": 4},
        ),
    ),
    (
        "Update",
        "rooms",
        967,
        12,
        (
            {"building_no": 2, "room_name": "Showroom", "room_no": 5},
            {"building_no": 2, "room_name": "SHOWROOM", "room_no": 5},
        ),
    ),
    (
        "Delete",
        "buildings",
        1226,
        14,
        {"address": "3950 North 1st Street CA 95134", "building_name": "ACME Headquaters", "building_no": 1},
    ),
]

BINLOG_PARSER_07_FILE = "binlog-parser/mysql-bin.07"
BINLOG_PARSER_07_EVENTS = [
    (4, 15, 248),
    (248, 163, 287),
    (287, 161, 326),
    (326, 162, 364),
    (364, 2, 627),
    (627, 162, 665),
    (665, 19, 723),
    (723, 23, 761),
    (761, 19, 819),
    (819, 23, 857),
    (857, 16, 884),
]
BINLOG_PARSER_07_SERVER_ID = 3704
BINLOG_PARSER_07_GTID_LIST = "0-3704-2814"
BINLOG_PARSER_07_CHECKPOINT = "mysql-bin.000015"
BINLOG_PARSER_07_GTIDS = ["0-3704-2815", "0-3704-2816"]
BINLOG_PARSER_07_QUERY_TIMESTAMP = 1494906269  # SET TIMESTAMP for the CREATE TABLE (07.json 03:44:29Z)
BINLOG_PARSER_07_QUERY = (
    "CREATE TABLE `departments` (\n  `dept_no` char(4) NOT NULL,\n  `dept_name` varchar(40) NOT NULL,\n"
    "  PRIMARY KEY (`dept_no`),\n  UNIQUE KEY `dept_name` (`dept_name`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8"
)
BINLOG_PARSER_07_XID = 456
# STRING(12) meta=65036 (0xFE0C: real type CHAR, 12 bytes) and VARSTRING(120).
BINLOG_PARSER_07_TYPES = [254, 15]
BINLOG_PARSER_07_METAS = [12, 120]
# (rows-event offset, epoch seconds "#170516 3:45:19"/"3:45:29" UTC, row) per 07.json.
BINLOG_PARSER_07_ROWS = [
    (723, 1494906319, ("ABC", "DEF")),  # dept_no, dept_name
    (819, 1494906329, ("RST", "XYZ")),
]

# ---------------------------------------------------------------------------------------------
# apecloud/mysql-binlog-connector-rust tests/parse_file_tests: only event counts are asserted
# there (see EVENT_COUNTS). Values: from the statements logged in the file.
# mysql-bin.000057 (8.0.31, compressed payloads, MINIMAL metadata -> no ENUM/SET labels):
#   ROWS_QUERY "insert into b values(1)" -> a.b row (1,)
#   ROWS_QUERY "update test_table_3 set enum_field='large', set_field='c', product_item_2=
#     'product_3_value' where product_id=55555" and "insert into test_table_3 values(6666,
#     'product_item_value_2', now(), 111, 'description_1', now(), 'large', 'd', 'b3', '{"c": 1}',
#     'product_item_2_value', now(), now(), 2222, 'description_3_value', now(), now(), 222,
#     'description_4_value', now())".
#   The ENUM/SET definitions are not in this file, so labels are unknown: 'large' must decode to the
#   same ENUM index in both statements, SET 'd' and 'c' to single bits (8 and 4, members a,b,c,d).
#   now() in a TIMESTAMP2 column is the statement time: equal to the event timestamp (UTC); in a
#   DATE column the date part (the docker server runs in UTC).
# ---------------------------------------------------------------------------------------------
APECLOUD_57_FILE = "mysql-binlog-connector-rust/mysql-bin.000057"
APECLOUD_57_INSERT_B = (1,)
APECLOUD_57_ENUM_INDEX, APECLOUD_57_SET_INDEX = 6, 7
APECLOUD_57_SET_D, APECLOUD_57_SET_C = 0b1000, 0b0100
APECLOUD_57_JSON = '{"c": 1}'
APECLOUD_57_INSERT_LITERALS = {  # column index -> value from the INSERT statement text
    0: 6666,
    1: "product_item_value_2",
    3: 111,
    4: "description_1",
    8: b"b3\x00",  # BINARY(3) (collation 63): the server logs 'b3' and pads it back to 3 bytes
    10: "product_item_2_value",
    13: 2222,
    14: "description_3_value",
    17: 222,
    18: "description_4_value",
}
APECLOUD_57_NOW_TIMESTAMP_COLUMNS = [5, 15, 19]  # TIMESTAMP2
APECLOUD_57_NOW_DATE_COLUMNS = [2, 11, 12, 16]  # DATE
APECLOUD_57_UPDATE_AFTER_ITEM2 = (10, "product_3_value")
APECLOUD_57_UPDATE_KEY = (0, 55555)
APECLOUD_57_GTIDS = [
    "76f3e7be-6720-11ed-9cad-0242ac110002:11",
    "76f3e7be-6720-11ed-9cad-0242ac110002:12",
    "76f3e7be-6720-11ed-9cad-0242ac110002:13",
]
APECLOUD_57_PREVIOUS = "76f3e7be-6720-11ed-9cad-0242ac110002:1-10"

# mysql-bin.000080 (5.7.40): the `emoji` table is utf8mb4 VARCHAR(255) (meta 1020), but the row
# logged for it is (2, '') -- its VARCHAR length prefix is 0x0000 in the bytes at offset 2381
# (`... fc 02000000 0000`), so an empty string is the correct decoding, not a lost emoji.
APECLOUD_80_FILE = "mysql-binlog-connector-rust/mysql-bin.000080"
APECLOUD_80_EMOJI_ROW = (2, "")
APECLOUD_80_EMOJI_META = [0, 1020]
APECLOUD_80_GTID_RANGE = ("58cf6502-63db-11ed-8079-0242ac110002", 53, 62)
APECLOUD_80_PREVIOUS = "58cf6502-63db-11ed-8079-0242ac110002:1-52"

# ---------------------------------------------------------------------------------------------
# avaitla/mysqlbinlog2parquet test/scenarios/03-mixed-types.sql (HEAD c16ff039; the binlog is
# byte-identical to test/samples/03-mixed-types.binlog there), generated with
# --binlog-row-metadata=FULL --binlog-rows-query-log-events=ON (test/generate-binlogs.sh):
#   metrics(id BIGINT PK, name VARCHAR(128), value DOUBLE, flag BOOLEAN, payload JSON,
#           captured_at DATETIME(3))
#   INSERT (1,'metric_a',1.5,TRUE,JSON_OBJECT('k',1),'2024-01-01 00:00:00.000'),
#          (2,'metric_b',2.25,FALSE,JSON_ARRAY(1,2,3),'2024-01-01 00:00:01.500'),
#          (3,'metric_c',NULL,TRUE,NULL,'2024-01-01 00:00:02.250');
#   UPDATE metrics SET value = 9.99 WHERE id = 2;
# BOOLEAN is TINYINT(1): TRUE -> 1. MySQL prints JSON_OBJECT('k', 1) as {"k": 1} and
# JSON_ARRAY(1, 2, 3) as [1, 2, 3]. DATETIME(3) keeps its 3 fraction digits.
# ---------------------------------------------------------------------------------------------
MIXED_TYPES_FILE = "mysqlbinlog2parquet/03-mixed-types.binlog"
MIXED_TYPES_NAMES = ["id", "name", "value", "flag", "payload", "captured_at"]
MIXED_TYPES_INSERT = [
    (1, "metric_a", 1.5, 1, '{"k": 1}', "2024-01-01 00:00:00.000"),
    (2, "metric_b", 2.25, 0, "[1, 2, 3]", "2024-01-01 00:00:01.500"),
    (3, "metric_c", None, 1, None, "2024-01-01 00:00:02.250"),
]
MIXED_TYPES_UPDATE = [
    (
        (2, "metric_b", 2.25, 0, "[1, 2, 3]", "2024-01-01 00:00:01.500"),
        (2, "metric_b", 9.99, 0, "[1, 2, 3]", "2024-01-01 00:00:01.500"),
    ),
]
MIXED_TYPES_JSON_COLUMN = 4

# ---------------------------------------------------------------------------------------------
# rust-us/mysql-cdc-rs tests/src/binlog/test_5_7.rs (HEAD 86339996), test_begin_load_query_and_
# exec_load_query on tests/events/5.7/17_18_load/log.bin: output[4] is BeginLoadQuery(file_id 1,
# block_data "1,\"abc\"\n"); output[5] is ExecuteLoadQueryEvent(thread_id 23, file_id 1,
# start_pos 9, end_pos 37, schema "default", query below). output[0] is the FDE.
# ---------------------------------------------------------------------------------------------
MYSQL_CDC_RS_FILE = "mysql-cdc-rs/log.bin"
MYSQL_CDC_RS_BEGIN_LOAD = {"index": 4, "file_id": 1, "data": b'1,"abc"\n'}
MYSQL_CDC_RS_EXECUTE_LOAD = {
    "index": 5,
    "thread_id": 23,
    "file_id": 1,
    "fn_pos_start": 9,
    "fn_pos_end": 37,
    "schema": "default",
    "query": "LOAD DATA INFILE '/tmp/data.txt' INTO TABLE `boxercrab` FIELDS TERMINATED BY ',' OPTIONALLY  "
    "ENCLOSED BY '\"' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (`i`, `c`)",
}

# ---------------------------------------------------------------------------------------------
# mysql/mysql-server mysql-test/suite/binlog/t/binlog_old_versions.test (generating SQL at its end)
# and r/binlog_old_versions.result (commit 08761c10b487959065c43d0892eec429640b2d39): table
# contents after replaying each old binlog.
# Row-based part: INSERT t1 (0,'one'),(1,'two'); UPDATE t1 SET a=a+1; DELETE FROM t1 WHERE a=2.
# Then statements: t2 (3,'first stm in trx'), t1 (3,'last stm in trx: next event should be xid'),
# SET @x=4 + INSERT (@x,'four') (USER_VAR), INSERT (RAND()*1000000,'random') (RAND seeds),
# INSERT (LAST_INSERT_ID(),'last_insert_id') (INTVAR), LOAD DATA of 17920 lines into t3.
# ---------------------------------------------------------------------------------------------
OLD_VERSIONS_ROW_EVENTS = [
    ("INSERT", [(0, "one"), (1, "two")]),
    ("UPDATE", [((0, "one"), (1, "one")), ((1, "two"), (2, "two"))]),
    ("DELETE", [(2, "two")]),
]
OLD_VERSIONS_T3_COUNT = 17920
# "==== Read modern binlog (version 5.1.23) ====" section.
VER_5_1_23_FILE = "rust_mysql_common/ver_5_1_23.001"
VER_5_1_23_T1 = [
    (0, "last_insert_id"),
    (1, "one"),
    (3, "last stm in trx: next event should be xid"),
    (4, "four"),
    (674568, "random"),
]
VER_5_1_23_T2 = [(3, "first stm in trx")]
# "==== Read binlog from alcatel tree (mysql-5.1-wl2325-5.0-drop6) ====": the result replays the
# row file (unreadable here, see BAD_FILES) and then the statement file; the statement file alone
# yields t1 without the row-based (1, 'one').
WL2325_S_FILE = "rust_mysql_common/ver_5_1-wl2325_s.001"
WL2325_S_T1 = [
    (0, "last_insert_id"),
    (3, "last stm in trx: next event should be xid"),
    (4, "four"),
    (781729, "random"),
]
# ver_trunk_row_v2.001 (5.6.4-m7) was made with the same SQL; .result has no section for it, so
# everything but the RAND-derived value is checked against the same expectations.
VER_TRUNK_FILE = "rust_mysql_common/ver_trunk_row_v2.001"

# ---------------------------------------------------------------------------------------------
# rust_mysql_common/json.binlog.000001 (8.0.22, binlog_row_value_options=PARTIAL_JSON, MINIMAL
# row image). No value listing exists upstream; the table is
#   t(id INT PK, json_col JSON, name VARCHAR(100) AS (json_col->>'$.name'), age INT AS (json_col->'$.age'))
# so every full row image must agree with its own generated columns. The PARTIAL_UPDATE_ROWS event at
# offset 3750 was decoded by hand from its bytes: before image = id only; value_options = 1 and a
# one-byte partial_bits (the table has one JSON column); after image = json_col as a diff
# REPLACE '$.age' <int16>, name and age. Expected (id, name, age) per row:
# ---------------------------------------------------------------------------------------------
JSON_BINLOG_FILE = "rust_mysql_common/json.binlog.000001"
JSON_BINLOG_PARTIAL_OFFSET = 3750
JSON_BINLOG_PARTIAL_ROWS = [
    (1, "Joe", 26),
    (2, "Sue", 34),
    (3, "Pete", 42),
    (4, "Joe", 26),
    (5, "Sue", 34),
    (6, "Pete", 42),
]

# ---------------------------------------------------------------------------------------------
# Structural facts from the fixtures README (no value listing exists for these files).
# ---------------------------------------------------------------------------------------------
KINGBUS_FILE = "kingbus/flikedev1-c8pyy-relay-bin.000284"
KINGBUS_TABLE_MAPS = 40
KINGBUS_FDES = 2
HIDDEN_GCOL_FILE = "rust_mysql_common/rpl_unfiltered_hidden_gcol.000001"
HIDDEN_GCOL_TYPES = [3, 8, 252]  # a INT, the hidden BIGINT of INDEX i((a+1)), b TEXT
INVISIBLE_COLUMNS_FILE = "rust_mysql_common/binlog-invisible-columns.000001"
# t1 (f1 INT UNSIGNED INVISIBLE, f2 INT UNSIGNED INVISIBLE, f3 INT, f4 TEXT, f5 BLOB,
#     f6 BIGINT UNSIGNED INVISIBLE), per the CREATE TABLE in the file.
INVISIBLE_COLUMNS_NAMES = ["f1", "f2", "f3", "f4", "f5", "f6"]
INVISIBLE_COLUMNS_VISIBLE = [False, False, True, True, True, False]
INVISIBLE_COLUMNS_UNSIGNED = [True, True, False, False, False, True]
UPDATE_PARTIAL_ROW_FILE = "rust_mysql_common/update-partial-row.binlog"
GTID_5_6_FILE = "rust_mysql_common/binlog_transaction_with_GTID.000001"
GTID_5_6 = [
    "006c2cf2-b1ea-11e4-9057-8c705a3d3e78:1",
    "006c2cf2-b1ea-11e4-9057-8c705a3d3e78:2",
    "006c2cf2-b1ea-11e4-9057-8c705a3d3e78:3",
]
GTID_5_6_QUERIES = [
    "CREATE TABLE t1 (c1 INT)",
    "BEGIN",
    "INSERT INTO t1 VALUES (1)",
    "COMMIT",
    "DROP TABLE `t1` /* generated by server */",
]
