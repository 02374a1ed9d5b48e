"""The real binlog fixtures (shared/fixtures/binlog): every file decodes, the bad ones fail with a
located ``BinlogError``, and the decoded content matches the expected values collected from the
fixtures' source repositories (see ``fixture_expectations.py`` for the provenance of each value).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

import fixture_expectations as X
from binlog_fixtures import FIXTURES_DIR
from pycanal.binlog import MISSING, BinlogError, JsonText, read_events
from pycanal.binlog import events as ev
from pycanal.binlog.rows import JsonPatch
from pycanal.parse.canonical import Recorder, to_json_line

# Parametrization needs the file names at collection time, so the directory is computed here the
# same way conftest's `fixtures_dir` does; the tests themselves take the path from that fixture,
# which fails (never skips) when the directory is missing.
_DIR = FIXTURES_DIR
_NOT_BINLOGS = {"README.md", "SHA256SUMS"}
_MISSING_DIR = "<fixtures directory missing>"


def _list_fixtures() -> list[str]:
    if not _DIR.is_dir():
        return [_MISSING_DIR]
    return sorted(
        p.relative_to(_DIR).as_posix() for p in _DIR.rglob("*") if p.is_file() and p.name not in _NOT_BINLOGS
    )


ALL_FILES = _list_fixtures()
GOOD_FILES = [f for f in ALL_FILES if f not in X.BAD_FILES]


def _params(files: list[str]) -> list:
    return list(files)


# ----------------------------------------------------------------------------------- helpers
_CACHE: dict[Path, list[ev.Event]] = {}


def walk(events: list[ev.Event]):
    """Top-level events, with the inner events of TRANSACTION_PAYLOAD right after their payload."""
    for e in events:
        yield e
        if isinstance(e, ev.TransactionPayloadEvent):
            yield from e.events


def decode_all(path: Path) -> list[ev.Event]:
    """Decode a whole file, touching the rows of every rows event (inner ones included)."""
    if path not in _CACHE:
        events = list(read_events(path))
        for e in walk(events):
            if isinstance(e, ev.RowsEvent):
                e.rows  # noqa: B018 - rows decode lazily
        _CACHE[path] = events
    return _CACHE[path]


def events_of(fixtures_dir: Path, rel: str) -> list[ev.Event]:
    return decode_all(fixtures_dir / rel)


def rows_events(events: list[ev.Event], table: str | None = None) -> list[ev.RowsEvent]:
    return [
        e
        for e in walk(events)
        if isinstance(e, ev.RowsEvent) and (table is None or e.table_map.table == table)
    ]


def utc(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def assert_decimal(value: object, text: str) -> None:
    """Equal to ``text`` and carrying exactly its scale digits."""
    want = Decimal(text)
    assert isinstance(value, Decimal), (value, text)
    assert value == want, (value, text)
    assert value.as_tuple().exponent == want.as_tuple().exponent, f"{value!r} lost scale digits of {text}"


def as_text(value: object) -> object:
    """TEXT without charset metadata (pre-8.0) is indistinguishable from BLOB: accept bytes or str."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def cli_command() -> list[str]:
    script = Path(sys.executable).with_name("pycanal")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pycanal.cli"]


# ----------------------------------------------------------------------------- the fixture set
def test_fixture_set_is_complete(fixtures_dir: Path) -> None:
    assert len(ALL_FILES) == X.FIXTURE_COUNT, ALL_FILES
    sums = {}
    for line in (fixtures_dir / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.strip()] = digest
    assert sorted(sums) == ALL_FILES
    for rel, digest in sums.items():
        assert hashlib.sha256((fixtures_dir / rel).read_bytes()).hexdigest() == digest, rel
    named = set(X.BAD_FILES) | set(X.EVENT_COUNTS)
    named |= {v for k, v in vars(X).items() if k.endswith("_FILE") and isinstance(v, str)}
    assert named <= set(ALL_FILES), named - set(ALL_FILES)


@pytest.mark.parametrize("rel", _params(GOOD_FILES))
def test_good_file_decodes_completely(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / rel
    events = decode_all(path)
    assert events and events[0].type == 15, "a binlog starts with its FORMAT_DESCRIPTION event"
    pos = 4
    for e in events:  # contiguous framing up to the end of the file
        assert e.pos == pos and e.file == path.name
        pos += e.size
    assert pos == path.stat().st_size
    records = list(Recorder().records(events))
    for rec in records:
        line = to_json_line(rec)
        assert json.loads(line)["type"] == rec["type"]
    n_rows = sum(len(e.rows) for e in rows_events(events))
    assert sum(r["type"] in ("INSERT", "UPDATE", "DELETE") for r in records) == n_rows


@pytest.mark.parametrize("rel", sorted(X.BAD_FILES))
def test_bad_file_raises_located_error(fixtures_dir: Path, rel: str) -> None:
    """Bad input fails with a BinlogError naming the file and the offset of the bad event.

    tiflow/mysql-bin.000001 is in this list although the server wrote it correctly: MariaDB 10.0
    logs its hi-res TIMESTAMP(n) columns as type 7 without fsp metadata, so a row's length cannot be
    known from the binlog alone (4 bytes for TIMESTAMP, 4 + (n+1)//2 for TIMESTAMP(n)). It must fail
    clearly rather than guess; the table's DDL (schema history, a later issue) will decode it.
    """
    path = fixtures_dir / rel
    offset = X.BAD_FILES[rel]
    seen: list[ev.Event] = []
    with pytest.raises(BinlogError) as info:
        for e in read_events(path):
            seen.append(e)
            for inner in walk([e]):
                if isinstance(inner, ev.RowsEvent):
                    inner.rows  # noqa: B018
    err = info.value
    message = str(err)
    assert "\n" not in message
    assert str(path) in message or path.name in message
    assert f"offset {offset}" in message
    assert err.offset == offset
    # Everything before the bad event decoded (the error is at an event boundary).
    end = seen[-1].pos + seen[-1].size if seen else 4
    assert offset in {e.pos for e in seen} | {end}
    if rel == "tiflow/mysql-bin.000001":
        assert "steven.t" in message, "the message should name the table whose rows cannot be decoded"


def test_corrupt_relay_bad_event_is_the_171_byte_query(fixtures_dir: Path) -> None:
    # rust_mysql_common accepts only one kind of failure here: a QUERY_EVENT of event_size 171.
    data = (fixtures_dir / "rust_mysql_common/corrupt-relay-bin.000624").read_bytes()
    at = X.BAD_FILES["rust_mysql_common/corrupt-relay-bin.000624"]
    assert data[at + 4] == 2 and int.from_bytes(data[at + 9 : at + 13], "little") == 171


@pytest.mark.parametrize(
    "rel", ["rust_mysql_common/binlog_truncated_event.000001", "rust_mysql_common/corrupt-relay-bin.000624"]
)
def test_cli_bad_file_exits_nonzero_with_one_line(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / rel
    proc = subprocess.run(
        [*cli_command(), "binlog", "decode", str(path), "--format", "jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and f"offset {X.BAD_FILES[rel]}" in lines[0]


def test_cli_jsonl_matches_binlog_parser_01(fixtures_dir: Path) -> None:
    proc = subprocess.run(
        [
            *cli_command(),
            "binlog",
            "decode",
            str(fixtures_dir / X.BINLOG_PARSER_01_FILE),
            "--format",
            "jsonl",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    changes = [r for r in recs if r["type"] in ("INSERT", "UPDATE", "DELETE")]
    want = []
    for kind, table, _, _, row in X.BINLOG_PARSER_01_RECORDS:
        cols = X.BINLOG_PARSER_01_COLUMNS[table]
        if kind == "Update":
            want.append(("UPDATE", table, [row[0][c] for c in cols], [row[1][c] for c in cols]))
        elif kind == "Insert":
            want.append(("INSERT", table, None, [row[c] for c in cols]))
        else:
            want.append(("DELETE", table, [row[c] for c in cols], None))
    assert [(r["type"], r["table"], r["before"], r["after"]) for r in changes] == want


@pytest.mark.parametrize("rel", sorted(X.EVENT_COUNTS))
def test_event_counts(fixtures_dir: Path, rel: str) -> None:
    assert len(events_of(fixtures_dir, rel)) == X.EVENT_COUNTS[rel]


# -------------------------------------------------------------------------------- go-mysql
def test_go_mysql_decimals(fixtures_dir: Path) -> None:
    (e,) = rows_events(events_of(fixtures_dir, X.GO_MYSQL_DECIMAL_FILE))
    tm = e.table_map
    assert (tm.schema, tm.table) == ("test", "decodedecimal")
    precisions = tuple(m >> 8 for m in tm.metas[1:12])
    scales = tuple(m & 0xFF for m in tm.metas[1:12])
    assert precisions == X.GO_MYSQL_DECIMAL_PRECISIONS and scales == X.GO_MYSQL_DECIMAL_SCALES
    assert len(e.rows) == len(X.GO_MYSQL_DECIMAL_ROWS)
    for row, (row_id, decimals, prec, scale) in zip(e.rows, X.GO_MYSQL_DECIMAL_ROWS, strict=True):
        assert (row[0], row[12], row[13]) == (row_id, prec, scale)
        for value, text in zip(row[1:12], decimals, strict=True):
            assert_decimal(value, text)


# ------------------------------------------------------------------------ rust_mysql_common
def test_time_issue_negative_time2(fixtures_dir: Path) -> None:
    (e,) = rows_events(events_of(fixtures_dir, X.TIME_ISSUE_FILE))
    assert e.table_map.types == [19] and e.table_map.metas == [0]  # TIME2, fsp 0
    assert e.rows == [(X.TIME_ISSUE_VALUE,)]


def test_minimal_row_metadata_unsigned(fixtures_dir: Path) -> None:
    for e in rows_events(events_of(fixtures_dir, X.MINIMAL_ROW_METADATA_FILE)):
        tm = e.table_map
        assert tm.unsigned[X.MINIMAL_ROW_UNSIGNED_INDEX] is True
        assert tm.collations[X.MINIMAL_ROW_CHARSET_INDEX] == X.MINIMAL_ROW_CHARSET
        assert e.rows[0][X.MINIMAL_ROW_UNSIGNED_INDEX] == X.MINIMAL_ROW_UNSIGNED_VALUE


def test_mysql_type_bit(fixtures_dir: Path) -> None:
    events = rows_events(events_of(fixtures_dir, X.MYSQL_TYPE_BIT_FILE))
    assert events
    for e in events:
        assert e.kind == "INSERT" and e.table_map.types == [16, 252, 16]
        assert e.rows and all(row == X.MYSQL_TYPE_BIT_ROW for row in e.rows)


def test_enum_string_set(fixtures_dir: Path) -> None:
    events = rows_events(events_of(fixtures_dir, X.ENUM_SET_FILE))
    assert [(e.kind, e.rows) for e in events] == X.ENUM_SET_EVENTS
    for e in events:
        tm = e.table_map
        assert tm.names == X.ENUM_SET_NAMES
        assert tm.types == [254, 15, 247, 248, 252]  # CHAR(128) is a real CHAR despite length > 255
        assert tm.enum_labels[2] == X.ENUM_SET_ENUM_LABELS
        assert tm.set_labels[3] == X.ENUM_SET_SET_LABELS


def test_vector_values(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.VECTOR_FILE)
    foo = rows_events(events, "foo")
    assert len(foo) == 2
    for e in foo:
        assert e.table_map.types == [8, 242]
        assert e.rows == X.VECTOR_FOO_ROWS
        for (_, raw), floats in zip(e.rows, X.VECTOR_FOO_FLOATS, strict=True):
            as_f32 = [struct.unpack("<f", struct.pack("<f", f))[0] for f in floats]
            assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == as_f32
    for e in rows_events(events):
        tm = e.table_map
        dims = [d for d in tm.vector_dims if d is not None]
        assert dims == X.VECTOR_DIMS[tm.table]
        for row in e.rows:
            for t, d, value in zip(tm.types, tm.vector_dims, row, strict=True):
                if t == 242:
                    assert isinstance(value, bytes) and len(value) == 4 * d


def test_gtid_tag(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.GTID_TAG_FILE)
    (prev,) = [e for e in events if isinstance(e, ev.PreviousGtidsEvent)]
    assert prev.gtid_set == X.GTID_TAG_PREVIOUS_TEXT
    assert list(prev.info.gtid_set.members()) == X.GTID_TAG_PREVIOUS_MEMBERS
    (gtid,) = [e for e in events if e.type == 42]
    assert gtid.gtid == X.GTID_TAG_TEXT
    assert (gtid.info.uuid, gtid.info.tag, gtid.info.gno) == (X.GTID_TAG_UUID, X.GTID_TAG_TAG, X.GTID_TAG_GNO)
    (rows,) = rows_events(events)
    assert rows.table_map.types == [3, 3, 246]
    assert rows.rows[0][0] == X.GTID_TAG_GNO  # the orders row (3, 100, 250.00) of transaction 3
    assert_decimal(rows.rows[0][2], "250.00")


def test_mariadb_bin_full_metadata(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.MARIADB_BIN_FILE)
    assert [e.gtid for e in events if isinstance(e, ev.GtidEvent)] == X.MARIADB_BIN_GTIDS
    annotate = [e.query for e in events if isinstance(e, ev.RowsQueryEvent)]
    assert annotate and all("values ('foo', 'JSON', '{\"foo\":1}')" in q for q in annotate)
    rows = rows_events(events)
    assert len(rows) == 2
    ids = []
    for e in rows:
        tm = e.table_map
        assert (tm.schema, tm.table) == (X.MARIADB_BIN_SCHEMA, X.MARIADB_BIN_TABLE)
        assert tm.names == X.MARIADB_BIN_NAMES
        assert [i for i, _ in tm.primary_key] == X.MARIADB_BIN_PRIMARY_KEY
        assert tm.collations == X.MARIADB_BIN_COLLATIONS
        for i, labels in X.MARIADB_BIN_ENUM_LABELS.items():
            assert tm.enum_labels[i] == labels
        (row,) = e.rows
        ids.append(row[0])
        assert row[1:4] == X.MARIADB_BIN_VALUES
        assert row[4] == utc(e.timestamp)  # created DEFAULT CURRENT_TIMESTAMP, printed in UTC
    assert ids[1] == ids[0] + 1  # AUTO_INCREMENT id


def test_json_opaque_values(fixtures_dir: Path) -> None:
    rows = rows_events(events_of(fixtures_dir, X.JSON_OPAQUE_FILE))
    values = []
    for e in rows:
        assert e.table_map.names == ["a"] and e.table_map.types == [245]
        (row,) = e.rows
        assert isinstance(row[0], JsonText)
        values.append(str(row[0]))
    assert values == X.JSON_OPAQUE_EXPECTED


def test_transaction_compression_inner_events(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.TRANSACTION_COMPRESSION_FILE)
    assert [e.type for e in events] == [15, 35, 34, 40, 4]
    (payload,) = [e for e in events if isinstance(e, ev.TransactionPayloadEvent)]
    assert payload.compression == 0  # zstd
    assert [e.type for e in payload.events] == X.TRANSACTION_COMPRESSION_INNER
    assert payload.events[2].rows == [(1,)]


def test_json_binlog_full_images_match_generated_columns(fixtures_dir: Path) -> None:
    """Up to the PARTIAL_UPDATE_ROWS event, every JSON document agrees with its generated columns."""
    n = 0
    for e in read_events(fixtures_dir / X.JSON_BINLOG_FILE):
        if e.type == 39:
            assert e.pos == X.JSON_BINLOG_PARTIAL_OFFSET
            break
        if isinstance(e, ev.RowsEvent):
            for row in e.rows:
                for image in row if e.kind == "UPDATE" else (row,):
                    assert isinstance(image[1], JsonText)
                    doc = json.loads(image[1])
                    assert (doc["name"], doc["age"]) == (image[2], image[3])
                    n += 1
    assert n == 3 + 3 + 12  # 3 single inserts, one 3-row insert, one 6-row update (2 images each)


def test_json_binlog_partial_update(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.JSON_BINLOG_FILE)
    (partial,) = [e for e in events if e.type == 39]
    assert partial.pos == X.JSON_BINLOG_PARTIAL_OFFSET and partial.kind == "UPDATE"
    got = []
    for before, after in partial.rows:
        assert before[1:] == (MISSING, MISSING, MISSING)  # MINIMAL before image: the key only
        assert after[0] is MISSING
        got.append((before[0], after[2], after[3]))
        # MINIMAL before image: no base document, so the JSON value is the server's diff.
        assert isinstance(after[1], JsonPatch)
        assert after[1] == [(0, "$.age", after[3])]
    assert got == X.JSON_BINLOG_PARTIAL_ROWS


def test_hidden_generated_column(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.HIDDEN_GCOL_FILE)
    assert sum(e.type == 15 for e in events) == 2 and sum(e.type == 4 for e in events) == 2
    (e,) = rows_events(events)
    assert e.table_map.types == X.HIDDEN_GCOL_TYPES  # one more column than the user declared
    (row,) = e.rows
    assert row[0] == 1 and row[1] is MISSING and isinstance(row[2], str)


def test_invisible_columns_metadata(fixtures_dir: Path) -> None:
    rows = rows_events(events_of(fixtures_dir, X.INVISIBLE_COLUMNS_FILE))
    assert [e.kind for e in rows] == ["INSERT", "INSERT", "UPDATE"]
    for e in rows:
        tm = e.table_map
        assert tm.names == X.INVISIBLE_COLUMNS_NAMES
        assert tm.visible == X.INVISIBLE_COLUMNS_VISIBLE
        assert tm.unsigned == X.INVISIBLE_COLUMNS_UNSIGNED
        for image in e.rows[0] if e.kind == "UPDATE" else e.rows:
            assert image[3] is None or isinstance(image[3], str)  # TEXT, utf8mb4
            assert isinstance(image[4], bytes)  # BLOB


def test_update_partial_row_images(fixtures_dir: Path) -> None:
    rows = {
        e.kind: e for e in rows_events(events_of(fixtures_dir, X.UPDATE_PARTIAL_ROW_FILE)) if e.table == "ba"
    }
    for before, after in rows["UPDATE"].rows:
        assert before[1] is MISSING and after[1] is MISSING
        assert all(isinstance(v, int) for v in (before[0], before[2], after[0], after[2]))
    for row in rows["DELETE"].rows:
        assert row[1] is MISSING and row[2] is MISSING and isinstance(row[0], int)
    assert all(MISSING not in row for row in rows["INSERT"].rows)


def test_mysql_5_6_gtids(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.GTID_5_6_FILE)
    assert [e.gtid for e in events if isinstance(e, ev.GtidEvent)] == X.GTID_5_6
    assert [e.query for e in events if type(e) is ev.QueryEvent] == X.GTID_5_6_QUERIES


# --------------------------------------------------------------------- mysql-binlog-connector-java
def test_aurora_padding_event_is_kept(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.AURORA_FILE)
    assert [(e.pos, e.type, e.next_pos) for e in events] == X.AURORA_EVENTS
    padding = events[3]
    assert isinstance(padding, ev.OpaqueEvent) and padding.flags & 0x80  # LOG_EVENT_IGNORABLE_F
    assert events[-1].query == X.AURORA_LAST_QUERY


def test_sakila(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.SAKILA_FILE)
    assert sum(e.type == 23 for e in events) == X.SAKILA_WRITE_ROWS_EVENTS
    assert sum(e.type == 19 for e in events) == X.SAKILA_TABLE_MAPS
    counts: Counter[str] = Counter()
    first: dict[str, tuple] = {}
    for e in rows_events(events):
        assert e.kind == "INSERT" and e.table_map.schema == "sakila"
        counts[e.table] += len(e.rows)
        first.setdefault(e.table, e.rows[0])
    assert dict(counts) == X.SAKILA_ROW_COUNTS
    for table, want in X.SAKILA_FIRST_ROWS.items():
        got = first[table]
        assert len(got) == len(want), table
        for value, expected in zip(got, want, strict=True):
            if isinstance(value, Decimal):
                assert_decimal(value, expected)
            else:
                assert as_text(value) == expected, (table, got)


def test_mysql_compressed_payload(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, "mysql-binlog-connector-java/mysql-bin.compressed")
    (payload,) = [e for e in events if isinstance(e, ev.TransactionPayloadEvent)]
    assert [e.type for e in payload.events] == [2, 19, 31, 16]
    (update,) = rows_events(payload.events)
    ((before, after),) = update.rows
    assert before[0] == after[0] == 1 and before != after


# ----------------------------------------------------------------------------------- canal
def test_canal_rows_and_old_temporals(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.CANAL_FILE)
    kinds = Counter(e.kind for e in rows_events(events))
    assert dict(kinds) == X.CANAL_ROWS_EVENT_COUNTS
    assert {e.type for e in rows_events(events)} == {23, 24, 25}  # rows v1 only
    # Old DATETIME (12) / TIMESTAMP (7) values are valid and in the file's 2011-2012 time frame.
    for e in rows_events(events):
        for i, t in enumerate(e.table_map.types):
            if t not in (7, 12):
                continue
            for row in e.rows:
                for image in row if e.kind == "UPDATE" else (row,):
                    when = datetime.strptime(image[i], "%Y-%m-%d %H:%M:%S")
                    assert datetime(2011, 1, 1) < when < datetime(2013, 1, 1)
    # TIMESTAMP DEFAULT/ON UPDATE CURRENT_TIMESTAMP: the event time itself, in UTC.
    xdual = rows_events(events, "xdual")
    assert len(xdual) > 1 and xdual[0].kind == "INSERT" and all(e.kind == "UPDATE" for e in xdual[1:])
    assert xdual[0].rows == [(1, utc(xdual[0].timestamp))]
    last = xdual[0].rows[0]
    for e in xdual[1:]:
        ((before, after),) = e.rows
        assert before == last and after == (1, utc(e.timestamp))
        last = after
    # DATETIME from NOW(): the server's local wall-clock (UTC+8).
    by_pos = {e.pos: e for e in rows_events(events, "testpk")}
    for pos in X.CANAL_TESTPK_NOW_INSERTS:
        (row,) = by_pos[pos].rows
        assert row[2] == utc(by_pos[pos].timestamp + X.CANAL_LOCAL_UTC_OFFSET)


# ----------------------------------------------------------------------------- mariadb-poc
def test_mariadb_poc_metadata(fixtures_dir: Path) -> None:
    path = fixtures_dir / X.MARIADB_POC_FILE
    events = decode_all(path)
    want = X.MARIADB_POC
    fde = events[0]
    assert (fde.server_id, fde.server_version, fde.binlog_version) == (
        want["server_id"],
        want["server_version"],
        want["binlog_version"],
    )
    assert min(e.timestamp for e in events) == want["first_timestamp"] == fde.timestamp
    assert max(e.timestamp for e in events) == want["last_timestamp"]
    (glist,) = [e for e in events if isinstance(e, ev.GtidListEvent)]
    assert glist.gtid_set == want["gtid_list"]
    gtids = [e.gtid for e in events if isinstance(e, ev.GtidEvent)]
    assert gtids[0] == want["first_gtid"] and gtids[-1] == want["last_gtid"]
    assert [int(g.split("-")[2]) for g in gtids] == list(range(262581, 262668))
    last = events[-1]
    assert isinstance(last, ev.RotateEvent) and last.next_file == want["rotate_next_file"]
    assert last.next_pos == last.pos + last.size == want["log_pos"] == path.stat().st_size
    assert not any(isinstance(e, ev.StopEvent) for e in events)


# ---------------------------------------------------------------------------- binlog-parser
def test_binlog_parser_01(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.BINLOG_PARSER_01_FILE)
    assert [(e.pos, e.type, e.next_pos) for e in events] == X.BINLOG_PARSER_01_EVENTS
    assert events[0].timestamp == events[0].create_timestamp == X.BINLOG_PARSER_01_FDE_TIMESTAMP
    starts = [pos for pos, _ in X.BINLOG_PARSER_01_TIMESTAMPS] + [1 << 62]
    for (start, ts), end in zip(X.BINLOG_PARSER_01_TIMESTAMPS, starts[1:], strict=True):
        assert {e.timestamp for e in events if start <= e.pos < end} == {ts}
    assert [e.xid for e in events if isinstance(e, ev.XidEvent)] == X.BINLOG_PARSER_01_XIDS
    got = []
    for i, e in enumerate(events):
        if not isinstance(e, ev.RowsEvent):
            continue
        assert e.table_map.metas == X.BINLOG_PARSER_01_METAS[e.table]
        xid = next(x.xid for x in events[i:] if isinstance(x, ev.XidEvent))
        cols = X.BINLOG_PARSER_01_COLUMNS[e.table]
        kind = {"INSERT": "Insert", "UPDATE": "Update", "DELETE": "Delete"}[e.kind]
        for row in e.rows:
            if e.kind == "UPDATE":
                data = (dict(zip(cols, row[0], strict=True)), dict(zip(cols, row[1], strict=True)))
            else:
                data = dict(zip(cols, row, strict=True))
            got.append((kind, e.table, e.next_pos, xid, data))
    assert got == X.BINLOG_PARSER_01_RECORDS


def test_binlog_parser_07(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.BINLOG_PARSER_07_FILE)
    assert [(e.pos, e.type, e.next_pos) for e in events] == X.BINLOG_PARSER_07_EVENTS
    assert {e.server_id for e in events} == {X.BINLOG_PARSER_07_SERVER_ID}
    assert events[0].checksum_alg == 0
    assert events[1].gtid_set == X.BINLOG_PARSER_07_GTID_LIST
    assert events[2].binlog_file == X.BINLOG_PARSER_07_CHECKPOINT
    assert [e.gtid for e in events if isinstance(e, ev.GtidEvent)] == X.BINLOG_PARSER_07_GTIDS
    (query,) = [e for e in events if isinstance(e, ev.QueryEvent)]
    assert (query.schema, query.query, query.timestamp) == (
        "test_db",
        X.BINLOG_PARSER_07_QUERY,
        X.BINLOG_PARSER_07_QUERY_TIMESTAMP,
    )
    assert events[-1].xid == X.BINLOG_PARSER_07_XID
    rows = rows_events(events)
    assert [(e.pos, e.timestamp, e.rows) for e in rows] == [
        (p, t, [r]) for p, t, r in X.BINLOG_PARSER_07_ROWS
    ]
    for e in rows:
        assert (e.table_map.schema, e.table_map.table) == ("test_db", "departments")
        assert e.table_map.types == X.BINLOG_PARSER_07_TYPES
        assert e.table_map.metas == X.BINLOG_PARSER_07_METAS


# ---------------------------------------------------------------- mysql-binlog-connector-rust
def test_apecloud_000057(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.APECLOUD_57_FILE)
    assert events[1].gtid_set == X.APECLOUD_57_PREVIOUS
    assert [e.gtid for e in events if isinstance(e, ev.GtidEvent)] == X.APECLOUD_57_GTIDS
    assert sum(isinstance(e, ev.TransactionPayloadEvent) for e in events) == 2
    queries = [e.query for e in walk(events) if isinstance(e, ev.RowsQueryEvent)]
    assert queries[0] == "insert into b values(1)"
    assert queries[1].startswith("update test_table_3 set enum_field='large', set_field='c'")
    assert queries[2].startswith("insert into test_table_3 values(6666,")
    b, update, insert = rows_events(events)
    assert b.table == "b" and b.rows == [X.APECLOUD_57_INSERT_B]
    assert update.kind == "UPDATE" and insert.kind == "INSERT"
    ((before, after),) = update.rows
    (row,) = insert.rows
    key, value = X.APECLOUD_57_UPDATE_KEY
    assert before[key] == after[key] == value
    item, text = X.APECLOUD_57_UPDATE_AFTER_ITEM2
    assert after[item] == text
    # ENUM/SET without labels (MINIMAL metadata): 'large' is one index, SET members are bits.
    assert after[X.APECLOUD_57_ENUM_INDEX] == row[X.APECLOUD_57_ENUM_INDEX]
    assert isinstance(row[X.APECLOUD_57_ENUM_INDEX], int)
    assert after[X.APECLOUD_57_SET_INDEX] == X.APECLOUD_57_SET_C
    assert row[X.APECLOUD_57_SET_INDEX] == X.APECLOUD_57_SET_D
    for image in (before, after, row):
        assert isinstance(image[9], JsonText) and image[9] == X.APECLOUD_57_JSON
    for i, want in X.APECLOUD_57_INSERT_LITERALS.items():
        assert row[i] == want, i
    now = utc(insert.timestamp)
    for i in X.APECLOUD_57_NOW_TIMESTAMP_COLUMNS:
        assert row[i] == now
    for i in X.APECLOUD_57_NOW_DATE_COLUMNS:
        assert row[i] == now[:10]
    for i in X.APECLOUD_57_NOW_TIMESTAMP_COLUMNS:  # the old row was written earlier the same day
        assert before[i] == after[i] and before[i][:10] == now[:10] and before[i] <= now


def test_apecloud_000080(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.APECLOUD_80_FILE)
    assert events[1].gtid_set == X.APECLOUD_80_PREVIOUS
    uuid, first, last = X.APECLOUD_80_GTID_RANGE
    assert [e.gtid for e in events if isinstance(e, ev.GtidEvent)] == [
        f"{uuid}:{n}" for n in range(first, last + 1)
    ]
    (emoji,) = rows_events(events, "emoji")
    assert emoji.table_map.metas == X.APECLOUD_80_EMOJI_META
    assert emoji.rows == [X.APECLOUD_80_EMOJI_ROW]


# ----------------------------------------------------------------------- mysqlbinlog2parquet
def test_mixed_types(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.MIXED_TYPES_FILE)
    queries = [e.query for e in events if isinstance(e, ev.RowsQueryEvent)]
    assert queries[0].startswith("INSERT INTO metrics (id, name, value, flag, payload, captured_at) VALUES")
    assert queries[1] == "UPDATE metrics SET value = 9.99 WHERE id = 2"
    insert, update = rows_events(events)
    for e in (insert, update):
        assert e.table_map.names == X.MIXED_TYPES_NAMES
        assert e.table_map.types == [8, 15, 5, 1, 245, 18] and e.table_map.metas[5] == 3  # DATETIME(3)
    assert insert.rows == X.MIXED_TYPES_INSERT
    assert update.rows == X.MIXED_TYPES_UPDATE
    for row in insert.rows:
        value = row[X.MIXED_TYPES_JSON_COLUMN]
        assert value is None or isinstance(value, JsonText)


# ------------------------------------------------------------------------------ mysql-cdc-rs
def test_mysql_cdc_rs_load_data(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.MYSQL_CDC_RS_FILE)
    want = X.MYSQL_CDC_RS_BEGIN_LOAD
    begin = events[want["index"]]
    assert begin.type == 17 and isinstance(begin, ev.LoadDataEvent)
    assert (begin.file_id, begin.data) == (want["file_id"], want["data"])
    want = X.MYSQL_CDC_RS_EXECUTE_LOAD
    exe = events[want["index"]]
    assert exe.type == 18 and isinstance(exe, ev.ExecuteLoadQueryEvent)
    for field in ("thread_id", "file_id", "fn_pos_start", "fn_pos_end", "schema", "query"):
        assert getattr(exe, field) == want[field], field


# -------------------------------------------------------- binlog_old_versions (mysql-server)
_INSERT_VALUES = re.compile(r"^INSERT INTO (\w+) VALUES \((.+), '(.*)'\)$")


def _mysql_rand(seed1: int, seed2: int) -> float:
    """The first RAND() value of a session seeded from a RAND_EVENT (MySQL's my_rnd)."""
    max_value = 0x3FFFFFFF
    return ((seed1 * 3 + seed2) % max_value) / max_value


def replay_old_versions(events: list[ev.Event]) -> dict:
    """Apply the row events and the few statement shapes of binlog_old_versions.test."""
    tables: dict = {"t1": [], "t2": [], "t3": 0}
    user_vars: dict[str, object] = {}
    intvars: dict[int, int] = {}
    rand: tuple[int, int] | None = None
    loads: dict[int, bytearray] = {}
    for e in events:
        if isinstance(e, ev.RowsEvent):
            rows = tables[e.table]
            for r in e.rows:
                if e.kind == "INSERT":
                    rows.append(r)
                elif e.kind == "DELETE":
                    rows.remove(r)
                else:
                    rows[rows.index(r[0])] = r[1]
        elif isinstance(e, ev.UserVarEvent):
            user_vars[e.name] = e.value
        elif isinstance(e, ev.IntvarEvent):
            intvars[e.kind] = e.value
        elif isinstance(e, ev.RandEvent):
            rand = (e.seed1, e.seed2)
        elif isinstance(e, ev.LoadDataEvent):
            loads.setdefault(e.file_id, bytearray()).extend(e.data)
        elif isinstance(e, ev.ExecuteLoadQueryEvent):
            tables["t3"] += bytes(loads.pop(e.file_id)).count(b"\n")
        elif isinstance(e, ev.QueryEvent) and (m := _INSERT_VALUES.match(e.query)):
            expr = m[2]
            if expr.startswith("@"):
                a = user_vars[expr[1:]]
            elif expr == "RAND() * 1000000":
                a = round(_mysql_rand(*rand) * 1000000)  # INT column: the double is rounded
            elif expr == "LAST_INSERT_ID()":
                a = intvars[1]  # INTVAR type 1 = LAST_INSERT_ID
            else:
                a = int(expr)
            tables[m[1]].append((a, m[3]))
    return tables


def test_ver_5_1_23_replays_to_result(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.VER_5_1_23_FILE)
    assert [(e.kind, e.rows) for e in rows_events(events)] == X.OLD_VERSIONS_ROW_EVENTS
    assert {e.type for e in rows_events(events)} == {23, 24, 25}  # rows v1
    tables = replay_old_versions(events)
    assert sorted(tables["t1"]) == X.VER_5_1_23_T1
    assert sorted(tables["t2"]) == X.VER_5_1_23_T2
    assert tables["t3"] == X.OLD_VERSIONS_T3_COUNT


def test_ver_trunk_row_v2_replays(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.VER_TRUNK_FILE)
    assert [(e.kind, e.rows) for e in rows_events(events)] == X.OLD_VERSIONS_ROW_EVENTS
    assert {e.type for e in rows_events(events)} == {30, 31, 32}  # rows v2 (5.6.4)
    tables = replay_old_versions(events)
    (rand_row,) = [r for r in tables["t1"] if r[1] == "random"]
    assert 0 <= rand_row[0] < 1000000
    assert sorted(r for r in tables["t1"] if r[1] != "random") == [
        r for r in X.VER_5_1_23_T1 if r[1] != "random"
    ]
    assert sorted(tables["t2"]) == X.VER_5_1_23_T2
    assert tables["t3"] == X.OLD_VERSIONS_T3_COUNT


def test_wl2325_statement_file_replays_to_result(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.WL2325_S_FILE)
    assert not rows_events(events)
    tables = replay_old_versions(events)
    assert sorted(tables["t1"]) == X.WL2325_S_T1
    assert sorted(tables["t2"]) == X.VER_5_1_23_T2
    assert tables["t3"] == X.OLD_VERSIONS_T3_COUNT


# ------------------------------------------------------------------------------------ kingbus
def test_kingbus_relay_log_structure(fixtures_dir: Path) -> None:
    events = events_of(fixtures_dir, X.KINGBUS_FILE)
    types = Counter(e.type for e in events)
    assert types[15] == X.KINGBUS_FDES and types[19] == X.KINGBUS_TABLE_MAPS
    assert types[30] and types[31] and types[32]
    assert events[0].flags & 0x40  # LOG_EVENT_RELAY_LOG_F on the relay log's own FDE
    assert any(isinstance(e, ev.RotateEvent) and e.server_id == 0 for e in events)
