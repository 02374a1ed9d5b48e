"""RawEntryConverter: byte-for-byte the entries of the protobuf oracle (``entry_oracle``) +
SerializeToString().

On every good binlog fixture (several option sets, GTID mode), on the readable prefix of the bad
ones, and on a live private MariaDB binlog with every column family (NULLs, UPDATE updated
flags, unsigned widening, TIMESTAMP in non-UTC zones, ENUM/SET labels). Partial row images
(MISSING columns) come from the NDB fixture ``update-partial-row.binlog``. The sakila fixture prints the
conversion speed of both converters (not asserted).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import fixture_expectations as X
import workload
from binlog_fixtures import FIXTURES_DIR
from entry_oracle import EntryConverter, image
from pycanal.binlog import events as ev
from pycanal.binlog import read_events
from pycanal.binlog.errors import BinlogError, TableIdNotFoundError
from pycanal.binlog.gtid import MariadbGtidSet, MysqlGtidSet
from pycanal.binlog.rows import MISSING
from pycanal.parse import rowcode as R
from pycanal.parse.columns import ColumnRule, ColumnRules, EntryColumn, Kind, Text
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.protocol import CanalEntry as C
from pycanal.protocol.wire import encode_varint
from pycanal.store.event import Event
from pycanal.testing import PrivateMariaDB

DIR = FIXTURES_DIR

ALL_FILES = (
    sorted(
        p.relative_to(DIR).as_posix()
        for p in DIR.rglob("*")
        if p.is_file() and p.name not in ("README.md", "SHA256SUMS")
    )
    if DIR.is_dir()
    else []
)
GOOD = [name for name in ALL_FILES if name not in X.BAD_FILES]

OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"timezone": "Asia/Shanghai"},
    {"timezone": "America/New_York", "enum_set": "label", "filter_query_dml": True},
]


def both(events: list[ev.Event], **options: Any) -> tuple[list[bytes], list[bytes]]:
    """(the oracle's entries serialized, RawEntryConverter bytes) for the same events."""
    expected, got, _conv = both_conv(events, **options)
    return expected, got


def both_conv(events: list[ev.Event], **options: Any) -> tuple[list[bytes], list[bytes], RawEntryConverter]:
    """``both`` and the RawEntryConverter. It runs first: rows not decoded yet take the fused
    path (bytes to entries), then the oracle decodes the same events' rows (lazily)."""
    expected_conv = EntryConverter(**options)
    raw_conv = RawEntryConverter(**options)
    records = [r for e in events for r in raw_conv.records(e)]
    got = [r.raw for r in records]
    expected = [entry.SerializeToString() for e in events for entry in expected_conv.convert(e)]
    for k, r in enumerate(records):  # what the records say is what their bytes say
        assert _fields(r) == _fields(Event.from_raw(r.raw)), f"record {k}"
    return expected, got, raw_conv


def _fields(r: Event) -> tuple:
    return (r.journal_name, r.position, r.event_length, r.execute_time, r.server_id, r.gtid, r.entry_type,
            r.event_type, r.is_ddl, r.rows, r.size)  # fmt: skip


def assert_same(expected: list[bytes], got: list[bytes]) -> None:
    assert len(got) == len(expected)
    for k, (want, have) in enumerate(zip(expected, got, strict=True)):
        if want != have:  # show the decoded difference, then fail on the bytes
            assert C.Entry.FromString(have) == C.Entry.FromString(want), f"entry {k}"
            assert have == want, f"entry {k}: same message, different bytes"


# --------------------------------------------------------------------------- wire helpers
def test_varint():
    assert encode_varint(0) == b"\x00"
    assert encode_varint(127) == b"\x7f"
    assert encode_varint(300) == b"\xac\x02"
    assert encode_varint(-7) == b"\xf9" + b"\xff" * 8 + b"\x01"  # int32 -7: 10 bytes
    assert encode_varint((1 << 64) - 1) == b"\xff" * 9 + b"\x01"


def test_column_edge_encodings():
    """Index 0 (left out), negative sqlType, empty value (left out), long values, key flag."""
    for value in ("", "x", "é" * 70, "z" * 200, "y" * 5000, "w" * 20000):
        for before in (None, "", "x", "other"):
            col = dict(index=0, sqlType=-7, name="c", isKey=True, isNull=False, mysqlType="bit(1)")
            expected = C.RowChange(tableId=0, eventType=C.UPDATE, isDdl=False)
            row = expected.rowDatas.add()
            if before is not None:
                row.beforeColumns.add(**col, value=before)
            row.afterColumns.add(**col, value=value, updated=before != value)
            # the same through the generated code
            rule = ColumnRule(Kind.FORMATTED, -7, -7, lambda v: (-7, v), text=Text.AS_IS)
            plan = [EntryColumn(0, "c", True, "bit(1)", rule)]
            encode = R._compile(plan, [R._ColumnCode(plan[0])], "UPDATE")
            parts = [b"\x10\x02\x50\x00"]
            encode([((before if before is not None else MISSING,), (value,))], parts)
            assert b"".join(parts) == expected.SerializeToString()


# --------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("name", GOOD)
@pytest.mark.parametrize("options", range(len(OPTION_SETS)))
def test_good_fixture_bytes_identical(fixtures_dir: Path, name: str, options: int):
    events = list(read_events(fixtures_dir / name))
    expected, got = both(events, **OPTION_SETS[options])
    assert_same(expected, got)


@pytest.mark.parametrize("name", sorted(X.BAD_FILES))
def test_bad_fixture_same_prefix_same_error(fixtures_dir: Path, name: str):
    """Up to the bad event both give the same bytes; at it both raise BinlogError."""
    expected_conv, raw_conv = EntryConverter(), RawEntryConverter()
    expected: list[bytes] = []
    got: list[bytes] = []
    with pytest.raises(BinlogError):
        for e in read_events(fixtures_dir / name):
            try:
                have = raw_conv.convert(e)  # first: the fused path reads the undecoded rows
            except BinlogError:
                with pytest.raises(BinlogError):
                    expected_conv.convert(e)
                raise
            expected += [entry.SerializeToString() for entry in expected_conv.convert(e)]
            got += have
    assert_same(expected, got)


@pytest.mark.parametrize(
    ("name", "gtid_set"),
    [
        ("rust_mysql_common/mysql-enum-string-set.000001", lambda: MysqlGtidSet()),
        ("mysql-binlog-connector-rust/mysql-bin.000057", lambda: MysqlGtidSet()),  # payloads
        ("rust_mysql_common/mariadb-bin.000001", lambda: MariadbGtidSet.parse("0-1-0")),
        ("binlog-parser/mysql-bin.07", lambda: MariadbGtidSet()),
    ],
)
def test_gtid_mode_bytes_identical(fixtures_dir: Path, name: str, gtid_set: Any):
    events = list(read_events(fixtures_dir / name))
    expected, got = both(events, gtid_set=gtid_set())
    assert_same(expected, got)
    headers = [C.Entry.FromString(raw).header for raw in got]
    assert any(h.gtid for h in headers) and any(p.key == "curtGtid" for h in headers for p in h.props)


def test_transaction_payload_rows_take_payload_position(fixtures_dir: Path):
    events = list(read_events(fixtures_dir / "mysql-binlog-connector-rust" / "mysql-bin.000057"))
    payloads = [e for e in events if isinstance(e, ev.TransactionPayloadEvent)]
    assert payloads
    raw_conv = RawEntryConverter()
    for p in payloads:
        entries = [C.Entry.FromString(raw) for raw in raw_conv.convert(p)]
        rowdata = [x for x in entries if x.entryType == C.ROWDATA and x.header.eventType == C.INSERT]
        assert rowdata
        for entry in entries:
            assert (entry.header.logfileOffset, entry.header.eventLength) == (p.pos, p.size)


def test_rows_without_table_map_raise(fixtures_dir: Path):
    events = list(read_events(fixtures_dir / "binlog-parser" / "mysql-bin.01"))
    rows_event = next(e for e in events if isinstance(e, ev.RowsEvent))
    rows_event.table_map = None
    with pytest.raises(TableIdNotFoundError):
        RawEntryConverter().convert(rows_event)


def test_sakila_speed(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]):
    """Prints rows/s of the oracle (+ SerializeToString) and RawEntryConverter (not asserted;
    rows are decoded beforehand so only the conversion is timed)."""
    events = list(read_events(fixtures_dir / "mysql-binlog-connector-java" / "mysql-bin.sakila"))
    nrows = sum(len(e.rows) for e in events if isinstance(e, ev.RowsEvent))
    assert nrows == 47273

    def timed(make: Any, serialize: bool) -> float:
        best = float("inf")
        for _ in range(3):
            conv = make()
            start = time.perf_counter()
            if serialize:
                for e in events:
                    for entry in conv.convert(e):
                        entry.SerializeToString()
            else:
                for e in events:
                    conv.convert(e)
            best = min(best, time.perf_counter() - start)
        return nrows / best

    before = timed(EntryConverter, True)
    after = timed(RawEntryConverter, False)
    with capsys.disabled():
        print(
            f"\nsakila {nrows} rows: protobuf oracle+SerializeToString {before:,.0f} rows/s, "
            f"RawEntryConverter {after:,.0f} rows/s ({after / before:.1f}x)"
        )


# --------------------------------------------------------------------------- live MariaDB
COLUMNS = """
 id INT PRIMARY KEY,
 ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
 i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
 f FLOAT, d DOUBLE, dec1 DECIMAL(20,6), dec2 DECIMAL(10,0),
 b1 BIT(1), b12 BIT(12),
 dt DATETIME, dt3 DATETIME(3), ts TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL, t TIME, t2 TIME(2), da DATE, y YEAR,
 e ENUM('a','b','c'), st SET('x','y','z'),
 c CHAR(5), vc VARCHAR(20), bn BINARY(4), vb VARBINARY(8),
 tt TINYTEXT, tx TEXT, bl BLOB, lb LONGBLOB, j JSON, g GEOMETRY
"""
ROW1 = """(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
  -9223372036854775808, 18446744073709551615, 1.5, 1e10, -12345.6789, 42, b'1', b'101010101010',
  '2024-02-29 12:34:56', '2024-02-29 12:34:56.789', '2024-03-10 07:30:00', '2024-01-01 00:00:00.123456',
  '-838:59:59', '12:34:56.78', '2024-02-29', 2024, 'b', 'x,z', 'ab', 'héllo wörld', X'0102', X'00FF80',
  'tiny', '中文', X'DEADBEEF', '', '{"a": [1, 2]}', ST_GeomFromText('POINT(1 2)'))"""
ROW2 = """(2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -0.0, 3.25e-7, 0, -0, b'0', b'0',
  '0000-00-00 00:00:00', '1000-01-01 00:00:00.001', '1970-01-01 00:00:01', '2038-01-19 03:14:07.999999',
  '00:00:00', '-00:00:00.01', '0000-00-00', 0, '', '', '', '', '', '',
  '', '', '', REPEAT('L', 70000), '[]', NULL)"""


@pytest.fixture(scope="module")
def live_events(mariadb: PrivateMariaDB) -> list[ev.Event]:
    suffix = uuid.uuid4().hex[:8]
    schema = f"rawentry_{suffix}"
    table = f"`{schema}`.`types`"
    file, pos = mariadb.current_binlog()
    mariadb.execute(f"CREATE DATABASE `{schema}`")
    statements = [
        f"CREATE TABLE {table} ({COLUMNS}) DEFAULT CHARSET=utf8mb4",
        "SET SESSION sql_mode = ''",
        f"INSERT INTO {table} VALUES {ROW1}",
        f"INSERT INTO {table} VALUES {ROW2}",
        f"INSERT INTO {table} (id) VALUES (3), (4), (5)",  # NULL everywhere else
        f"UPDATE {table} SET vc = 'changed', ts = NULL, tiu = 7 WHERE id = 1",  # value, to NULL, unwidened
        f"UPDATE {table} SET ts = '2020-06-01 12:00:00', tx = 'from null' WHERE id = 3",  # from NULL
        f"UPDATE {table} SET id = id + 100 WHERE id IN (4, 5)",  # key change, NULLs unchanged
        f"UPDATE {table} SET biu = 9223372036854775808, iu = 2147483647 WHERE id = 2",
        "BEGIN",
        f"DELETE FROM {table} WHERE id = 2",
        f"INSERT INTO {table} (id, tx, e, st) VALUES (6, 'in a transaction', 'c', 'y')",
        "COMMIT",
    ]
    with mariadb.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for sql in statements:
            cur.execute(sql)
        conn.commit()
    # every column family of MariaDB through the seeded workload (its own tables in the schema)
    ddl = [workload.Statement(workload.ALL_TYPES.create_sql(schema))]
    with mariadb.root_connection() as conn:
        conn.autocommit(True)
        workload.run(conn, ddl + workload.generate(workload.ALL_TYPES, schema, seed=7, ops=120))
    mariadb.flush_binary_logs()
    assert mariadb.binlog_dir is not None
    events = list(read_events(Path(mariadb.binlog_dir) / file, start_position=pos))
    mariadb.execute(f"DROP DATABASE `{schema}`")
    return events


LIVE_OPTIONS: list[dict[str, Any]] = [
    {},
    {"timezone": "Asia/Shanghai"},
    {"timezone": "America/New_York", "enum_set": "label"},
    {"timezone": "Europe/Berlin", "gtid_set": MariadbGtidSet()},
]


@pytest.mark.parametrize("options", range(len(LIVE_OPTIONS)))
def test_live_mariadb_bytes_identical(live_events: list[ev.Event], options: int):
    opts = dict(LIVE_OPTIONS[options])
    if "gtid_set" in opts:
        opts["gtid_set"] = opts["gtid_set"].copy()
    expected, got = both(live_events, **opts)
    assert_same(expected, got)

    # the stream really exercises what the fast path must get right
    changes = [
        (C.Entry.FromString(raw).header, C.RowChange.FromString(C.Entry.FromString(raw).storeValue))
        for raw in got
        if C.Entry.FromString(raw).entryType == C.ROWDATA
    ]
    rows = [
        (h, ch, r) for h, ch in changes if ch.eventType in (C.INSERT, C.UPDATE, C.DELETE) for r in ch.rowDatas
    ]
    types = [(h, r) for h, ch, r in rows if h.tableName == "types"]
    assert {ch.eventType for _, ch, _ in rows} == {C.INSERT, C.UPDATE, C.DELETE}
    cols = [c for _, r in types for c in (*r.beforeColumns, *r.afterColumns)]
    assert any(c.isNull for c in cols) and any(c.value == "" and not c.isNull for c in cols)
    after_update = [c for h, r in types if h.eventType == C.UPDATE for c in r.afterColumns]
    assert any(c.updated for c in after_update) and any(not c.updated for c in after_update)
    assert any(c.updated and c.isNull for c in after_update)  # to NULL
    assert any(c.name == "biu" and c.sqlType == 3 for c in cols)  # BIGINT UNSIGNED widened
    assert any(c.name == "tiu" and c.sqlType == -6 and not c.isNull for c in cols)  # not widened
    ts = {c.value for c in cols if c.name == "ts" and not c.isNull}
    if opts.get("timezone") == "Asia/Shanghai":
        assert "2024-03-10 15:30:00" in ts
    elif not opts.get("timezone"):
        assert "2024-03-10 07:30:00" in ts
    if opts.get("enum_set") == "label":
        assert any(c.name == "e" and c.value == "b" for c in cols)
    if "gtid_set" in opts:
        assert all(h.gtid for h, _, _ in rows)
    assert sum(1 for h, _ in changes if h.tableName == workload.ALL_TYPES.name) > 20


# --------------------------------------------------------------------------- specialised code
def _plan_and_values() -> tuple[list[EntryColumn], list[list[Any]]]:
    """One column per rule the fast code specialises (and ones it calls), each with values
    covering its branches: NULL, unsigned widening bounds, negative zero, bytes in a text column,
    UTC / zoned TIMESTAMP, Java double text, an empty ``mysqlType``."""
    from decimal import Decimal

    from pycanal.binlog.constants import ColumnType as T
    from pycanal.binlog.tablemap import TableMap

    def rule(t: int, unsigned: bool = False, collation: int | None = None, labels: list[str] | None = None,
             **options: Any) -> ColumnRule:  # fmt: skip
        """The rule of a one-column table of type ``t``."""
        tm = TableMap(1, 0, "s", "t", [t], [0], [True], unsigned=[unsigned], collations=[collation],
                      enum_labels=[labels] if t == T.ENUM else None,
                      set_labels=[labels] if t == T.SET else None)  # fmt: skip
        return ColumnRules(**options).rule(tm, 0, None)

    columns = [
        ("INT", rule(T.LONG), [1, -2147483648, 0, None, 7]),
        ("TINYINT UNSIGNED", rule(T.TINY, unsigned=True), [0, 127, 128, 255, None]),
        (
            "BIGINT UNSIGNED",
            rule(T.LONGLONG, unsigned=True),
            [None, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 5],
        ),
        (
            "DECIMAL",
            rule(T.NEWDECIMAL),
            [Decimal("-0.00"), Decimal("12.50"), None, Decimal("-3.1"), Decimal("0E-5")],
        ),
        ("DATETIME", rule(T.DATETIME2), ["2024-02-29 12:34:56", None, "0000-00-00 00:00:00"]),
        ("TIMESTAMP UTC", rule(T.TIMESTAMP2), ["2024-03-10 07:30:00", "1970-01-01 00:00:01.5", None]),
        (
            "TIMESTAMP zoned",
            rule(T.TIMESTAMP2, timezone="Asia/Shanghai"),
            ["2024-03-10 07:30:00", None, "2038-01-19 03:14:07.999999", "0000-00-00 00:00:00"],
        ),
        ("DOUBLE", rule(T.DOUBLE), [1e10, -0.0, None, 3.25e-7, float("nan")]),
        ("BIT", rule(T.BIT), [1, 4095, None]),
        ("VARCHAR", rule(T.VARCHAR), ["héllo", b"\xff\x00ab", "", None, "ab", b"ab"]),
        ("CHAR BINARY", rule(T.STRING, collation=63), [b"\x80", "中文", None]),  # NULL: BLOB
        ("ENUM", rule(T.ENUM, labels=["a", "b"]), ["b", 2, "", None]),
        ("SET labels", rule(T.SET, labels=["x", "y"], enum_set="label"), [["x", "y"], 3, None, []]),
        ("", rule(T.SHORT, unsigned=True), [None, 40000, 3]),  # no mysqlType
    ]
    plan = [EntryColumn(i, f"c{i}", i == 0, mt.lower(), r) for i, (mt, r, _) in enumerate(columns)]
    return plan, [values for *_, values in columns]


def _rows_for(values: list[list[Any]], n: int) -> list[tuple]:
    return [tuple(vals[k % len(vals)] for vals in values) for k in range(n)]


def _expected_rowdatas(plan: list[EntryColumn], kind: str, rows: list) -> bytes:
    """The oracle's row images (``image``) serialized by protobuf."""
    from pycanal.protocol import EntryProtocol_pb2 as pb

    change = pb.RowChange()
    for row in rows:
        rd = change.rowDatas.add()
        if kind == "INSERT":
            image(rd.afterColumns, plan, row, None)
        elif kind == "DELETE":
            image(rd.beforeColumns, plan, row, False)
        else:
            image(rd.afterColumns, plan, row[1], image(rd.beforeColumns, plan, row[0], False))
    return change.SerializeToString()


def _table_code(plan: list[EntryColumn]) -> Any:
    from types import SimpleNamespace

    return R.TableCode(plan, SimpleNamespace(schema="s", table="t"))


def test_fast_code_specialises_every_rule():
    plan, _ = _plan_and_values()
    kinds = [(col.rule.kind.name, col.rule.text.name if col.rule.text else None) for col in plan]
    assert kinds == [
        ("INTEGER", None),
        ("UNSIGNED", None),
        ("UNSIGNED", None),
        ("FORMATTED", "DECIMAL"),
        ("FORMATTED", "STR"),
        ("FORMATTED", "AS_IS"),
        ("FORMATTED", "ZONED"),
        ("FORMATTED", "DOUBLE"),
        ("FORMATTED", "STR"),
        ("CHARS", None),
        ("CHARS", None),
        ("ENUM", None),
        ("SET", None),
        ("UNSIGNED", None),
    ]
    assert (plan[10].rule.sql_type, plan[10].rule.null_type) == (1, 2004)  # CHAR; NULL is BLOB
    src = _table_code(plan).fast_encoder("UPDATE").source
    assert "b'%d' % v0" in src and "if v1 >= L1" in src and "s = f'{v3:f}'" in src
    assert "bx5 = v5.encode()" in src and "F6(v6)" in src and "bx4 = str(v4).encode()" in src


@pytest.mark.parametrize("kind", ["INSERT", "DELETE", "UPDATE"])
def test_fast_code_matches_convert(kind: str):
    """Every specialised branch against the oracle's ``image``: NULLs, widening bounds, updated
    flags (value changed, unchanged, to/from NULL; bytes vs str of the same text)."""
    plan, values = _plan_and_values()
    rows = _rows_for(values, 60)
    if kind == "UPDATE":
        # a column of n values is unchanged where n divides the step
        pairs = [(rows[k], rows[k + step]) for step in range(7) for k in range(0, 50, 3)]
        nulls = tuple(None for _ in plan)
        pairs += [(nulls, rows[3]), (rows[4], nulls), (nulls, nulls)]
        text, raw = rows[4], rows[5]  # VARCHAR "ab" -> b"ab": same text, other sqlType, not updated
        assert (text[9], raw[9]) == ("ab", b"ab")
        pairs += [(text, raw), (raw, text)]
        rows = pairs
    code = _table_code(plan)
    out: list[bytes] = [b"head"]
    code.encode_rows(kind, rows, out)
    assert out[0] == b"head"
    assert b"".join(out[1:]) == _expected_rowdatas(plan, kind, rows)
    # the fast encoder alone gives the same (no fallback was needed)
    fast: list[bytes] = []
    code.fast_encoder(kind)(rows, fast)
    assert fast == out[1:]


@pytest.mark.parametrize("kind", ["INSERT", "DELETE", "UPDATE"])
def test_fast_code_falls_back_on_missing_columns(kind: str):
    """A ``MISSING`` column (partial row image) after some rows: the whole event is rewritten by
    the generic encoder, nothing of the fast attempt is left in ``out``."""
    plan, values = _plan_and_values()
    rows = _rows_for(values, 8)
    partial = tuple(MISSING if j % 3 == 1 else v for j, v in enumerate(rows[0]))
    if kind == "UPDATE":
        rows = [(rows[1], rows[2]), (rows[3], rows[4]), (partial, rows[5]), (rows[6], partial)]
    else:
        rows = [rows[1], rows[2], partial, rows[3]]
    code = _table_code(plan)
    with pytest.raises(R._Partial):
        code.fast_encoder(kind)(rows, [])
    out: list[bytes] = [b"head"]
    code.encode_rows(kind, rows, out)
    assert out[0] == b"head"
    assert b"".join(out[1:]) == _expected_rowdatas(plan, kind, rows)


# --------------------------------------------------------------------------- fused path
FUSED_COLUMNS = """
 id BIGINT PRIMARY KEY, i INT, iu INT UNSIGNED, bu BIGINT UNSIGNED, m MEDIUMINT,
 c CHAR(10), vc VARCHAR(300), tx TEXT, l1 VARCHAR(10) CHARACTER SET latin1, vb VARBINARY(10),
 d DECIMAL(12,2), d0 DECIMAL(5,0), d30 DECIMAL(30,10), dfrac DECIMAL(4,4),
 dt DATETIME, dt6 DATETIME(6), da DATE
"""
FUSED_ROWS = [
    "(1, -2147483648, 4294967295, 18446744073709551615, -8388608, 'abc', 'héllo 中文 😀', 'x', 'é', X'00FF',"
    " -1234567890.12, -99999, -12345678901234567890.0123456789, -0.0001,"
    " '9999-12-31 23:59:59', '1000-01-01 00:00:00.000001', '9999-12-31')",
    "(2, 0, 0, 0, 0, '', '', '', '', '', 0, 0, 0, 0, '0000-00-00 00:00:00', '0000-00-00 00:00:00.000000',"
    " '0000-00-00')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(4, 2147483647, 2147483648, 9223372036854775808, 8388607, 'ünï', REPEAT('ß', 300), REPEAT('€', 2000),"
    " 'abc', 'z', 9999999999.99, 99999, 12345678901234567890.0123456789, 0.9999,"
    " '2024-02-29 12:34:56', '2024-02-29 12:34:56.123456', '2024-02-00')",
    "(5, -1, 1, 1, -1, ' a ', 'tab\\there', 'line\\nbreak', 'x', X'', -0.01, -1, -0.0000000001, -0.5,"
    " '1970-01-01 00:00:00', '2001-02-03 04:05:06.5', '0001-01-01')",
]


@pytest.fixture(scope="module")
def fused_binlog(mariadb: PrivateMariaDB) -> tuple[Path, int]:
    schema = f"rawfused_{uuid.uuid4().hex[:8]}"
    table = f"`{schema}`.`fused`"
    file, pos = mariadb.current_binlog()
    mariadb.execute(f"CREATE DATABASE `{schema}`")
    statements = [
        f"CREATE TABLE {table} ({FUSED_COLUMNS}) DEFAULT CHARSET=utf8mb4",
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        *(f"INSERT INTO {table} VALUES {row}" for row in FUSED_ROWS),
        f"INSERT INTO {table} VALUES " + ", ".join(r.replace("(", "(1000 + ", 1) for r in FUSED_ROWS),
        f"UPDATE {table} SET vc = 'changed', d = -d, da = NULL, c = c WHERE id IN (1, 2, 4, 5)",
        f"UPDATE {table} SET i = 5, vc = 'from null', d = 0.5 WHERE id = 3",  # from NULL
        f"UPDATE {table} SET id = id + 100 WHERE id = 1",  # key change, the rest unchanged
        f"DELETE FROM {table} WHERE id IN (2, 3, 4)",
    ]
    with mariadb.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for sql in statements:
            cur.execute(sql)
        conn.commit()
    mariadb.flush_binary_logs()
    assert mariadb.binlog_dir is not None
    mariadb.execute(f"DROP DATABASE `{schema}`")
    return Path(mariadb.binlog_dir) / file, pos


@pytest.fixture
def fused_events(fused_binlog: tuple[Path, int]) -> list[ev.Event]:
    """The fused table's events, read afresh (rows not decoded yet)."""
    path, pos = fused_binlog
    events = []
    for e in read_events(path, start_position=pos):
        events.append(e)
        if isinstance(e, ev.QueryEvent) and e.query.startswith("DROP DATABASE"):
            break
    return events


@pytest.mark.parametrize("options", range(len(LIVE_OPTIONS)))
def test_fused_types_bytes_identical(fused_events: list[ev.Event], options: int):
    """Every fused column type (ints at their limits, utf8 multibyte/empty strings, latin1 and
    binary through the value code, negative and zero DECIMALs, zero dates, NULLs) through the
    fused path, byte-identical; afterwards the events' rows are still there (lazily decoded)."""
    opts = dict(LIVE_OPTIONS[options])
    if "gtid_set" in opts:
        opts["gtid_set"] = opts["gtid_set"].copy()
    rows_events = [e for e in fused_events if isinstance(e, ev.RowsEvent) and e.table == "fused"]
    assert {e.kind for e in rows_events} == {"INSERT", "UPDATE", "DELETE"}
    assert all(e._rows is None for e in rows_events)
    expected, got, conv = both_conv(fused_events, **opts)
    assert_same(expected, got)
    assert conv.fused_events == sum(isinstance(e, ev.RowsEvent) for e in fused_events)
    assert sum(len(e.rows) for e in rows_events) == 5 + 5 + 4 + 1 + 1 + 3
    code = next(iter(v for k, v in rows_events[0].table_map.decoders.items() if k == conv._code_key))
    fused = [enc for enc in code._fused.values() if enc is not None]
    # c, vc, tx, d*, dt*, da from their bytes; per image (an UPDATE has two)
    assert sorted(enc.direct for enc in fused) == [10, 10, 20]
    values = [
        c.value
        for raw in got
        if C.Entry.FromString(raw).entryType == C.ROWDATA
        for r in C.RowChange.FromString(C.Entry.FromString(raw).storeValue).rowDatas
        for c in (*r.beforeColumns, *r.afterColumns)
    ]
    for text in ("héllo 中文 😀", "-12345678901234567890.0123456789", "0.0000000000", "-0.0001", "0.0000"):
        assert text in values
    for text in ("0000-00-00 00:00:00", "0000-00-00", "2024-02-00", "1000-01-01 00:00:00.000001", "-0.01"):
        assert text in values


def test_fused_bad_row_data_falls_back_to_the_decoder_error(fused_events: list[ev.Event]):
    """Row data the fused code cannot read (here truncated) goes through the decoder, which
    reports it as it always does."""
    event = next(e for e in fused_events if isinstance(e, ev.RowsEvent) and e.table == "fused")
    decode, data = R._row_source(event)
    event.row_data = data[:-3]
    with pytest.raises(BinlogError):
        RawEntryConverter().convert(event)
    event.row_data = data
    assert R._row_source(event) == (decode, data)


def test_fused_path_off_and_after_decoding(live_events: list[ev.Event]):
    """``fused=False`` and events whose rows were already decoded take the value path."""
    conv = RawEntryConverter(fused=False)
    for e in live_events:
        conv.convert(e)
    assert conv.fused_events == 0
    for e in live_events:
        if isinstance(e, ev.RowsEvent):
            e.rows  # noqa: B018
            assert R._row_source(e) is None


def test_fused_path_taken_on_sakila(fixtures_dir: Path):
    """Every rows event of the sakila fixture (ints, strings of an unlogged charset, TIMESTAMPs,
    DECIMALs, ...) goes through the fused path, byte-identical."""
    events = list(read_events(fixtures_dir / "mysql-binlog-connector-java" / "mysql-bin.sakila"))
    expected, got, conv = both_conv(events)
    assert_same(expected, got)
    assert conv.fused_events == sum(isinstance(e, ev.RowsEvent) for e in events) == 1374
    assert conv.rows_converted == 47273
