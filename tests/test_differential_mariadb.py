"""Differential test: pycanal's decoded binlog against the server's own table state.

For each server configuration (``VARIANTS``): create the tables of ``workload.py`` in a fresh
database, FLUSH BINARY LOGS, run the seeded workload, FLUSH again, decode the new binlog
file(s) with pycanal, replay the row events by primary key into a dict and compare every row
and column with a ``SELECT`` of the table (session time zone +00:00), converted into pycanal's
value conventions by the explicit converter ``expected_value`` below.  The same row events are
also compared with ``mariadb-binlog -v --base64-output=decode-rows`` for the types it prints
unambiguously.

Variants: binlog_row_metadata FULL (the shared ``mariadb`` server) and MINIMAL (the shared
``mariadb_minimal``); MariaDB compressed binlog events (``--log-bin-compress``, event types
165-171, a private server); binlog_row_image=MINIMAL (partial row images, a private server).

The COMPRESSED columns live in a table of their own, written to binlog files of their own.
The single-row tests at the end pin bugs this test found in the decoder: FLOAT near FLT_MAX,
and ENUM/SET labels logged in a latin1 column charset.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import re
import socket
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import workload
from pycanal.binlog import MISSING, read_events
from pycanal.binlog.events import QueryEvent, RowsEvent, TransactionPayloadEvent
from pycanal.binlog.tablemap import TableMap
from pycanal.testing import PrivateMariaDB, mariadb_binlog_path
from workload import ALL_TYPES, COMPRESSED, Column, TableSpec

pytestmark = pytest.mark.mariadb

SEED = 20240229
OPS = 220  # random operations per variant (plus one row per pool value of every column)

VARIANTS = ("full_metadata", "minimal_metadata", "compressed_binlog", "minimal_row_image")

# Event types of MariaDB's compressed binlog events.
QUERY_COMPRESSED = 165
ROWS_COMPRESSED = {166: "INSERT", 167: "UPDATE", 168: "DELETE", 169: "INSERT", 170: "UPDATE", 171: "DELETE"}

# Columns whose value is a fixed-length binary string: the server pads them with 0x00.
FIXED_BINARY_KINDS = {"binary", "inet6", "uuid"}


# --------------------------------------------------------------------------- servers
@pytest.fixture(scope="module")
def compressed_binlog_server() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(
        server_id=31, extra_args=["--log-bin-compress=ON", "--log-bin-compress-min-len=10"]
    ) as server:
        yield server


@pytest.fixture(scope="module")
def minimal_row_image_server() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=32, binlog_row_image="MINIMAL") as server:
        yield server


_SERVER_FIXTURE = {
    "full_metadata": "mariadb",
    "minimal_metadata": "mariadb_minimal",
    "compressed_binlog": "compressed_binlog_server",
    "minimal_row_image": "minimal_row_image_server",
}


# --------------------------------------------------------------------------- decoding
@dataclass
class Segment:
    """The binlog files written while one workload ran, and what pycanal decoded from them."""

    files: list[Path]
    events: list[RowsEvent] = field(default_factory=list)
    type_counts: Counter = field(default_factory=Counter)
    queries: list[QueryEvent] = field(default_factory=list)


def binlog_segment(server: PrivateMariaDB, run: Any) -> list[Path]:
    """FLUSH BINARY LOGS, ``run()``, FLUSH again: the files the statements went to."""
    first = server.flush_binary_logs().name
    run()
    last = server.flush_binary_logs().name
    names = [p.name for p in server.binlog_files()]
    return [server.binlog_dir / n for n in names[names.index(first) : names.index(last)]]


def decode_segment(files: list[Path], schema: str, table: str) -> Segment:
    seg = Segment(files)
    for path in files:
        for e in read_events(path):
            inner = e.events if isinstance(e, TransactionPayloadEvent) else [e]
            for x in inner:
                seg.type_counts[x.type] += 1
                if isinstance(x, QueryEvent):
                    seg.queries.append(x)
                if isinstance(x, RowsEvent) and x.schema == schema and x.table == table:
                    x.rows  # noqa: B018 - decode now, so errors point here
                    seg.events.append(x)
    return seg


@dataclass
class Replay:
    rows: dict[int, list[Any]]
    problems: list[str]  # before images that disagree with the replayed state, unknown keys...


def replay(events: list[RowsEvent], ncols: int, partial: bool) -> Replay:
    """Apply the row events by primary key (column 0).  With partial images, MISSING columns of
    an INSERT take the column default, NULL for every workload column; MISSING columns of an
    UPDATE's after image keep their value."""
    state: dict[int, list[Any]] = {}
    problems: list[str] = []

    def check_before(before: tuple, where: str) -> list[Any] | None:
        pk = before[0]
        if pk is MISSING:
            problems.append(f"{where}: before image without the primary key: {before!r:.300}")
            return None
        row = state.get(pk)
        if row is None:
            problems.append(f"{where}: before image of id={pk}, which the replay does not have")
            return None
        for i, v in enumerate(before):
            if v is MISSING:
                if not partial:
                    problems.append(f"{where}: id={pk} column {i} MISSING in a FULL row image")
                continue
            if not same(v, row[i]):
                problems.append(
                    f"{where}: id={pk} column {i}: before image {short(v)} but the replayed row has {short(row[i])}"
                )
        return row

    for e in events:
        where = f"{e.file}@{e.pos} {e.type_name}"
        for r in e.rows:
            if e.kind == "INSERT":
                if r[0] in state:
                    problems.append(f"{where}: INSERT of id={r[0]}, which the replay already has")
                if not partial and any(v is MISSING for v in r):
                    problems.append(f"{where}: INSERT id={r[0]} has MISSING columns in a FULL row image")
                state[r[0]] = [None if v is MISSING else v for v in r]
            elif e.kind == "UPDATE":
                before, after = r
                row = check_before(before, where)
                if row is None:
                    continue
                del state[before[0]]
                for i, v in enumerate(after):
                    if v is not MISSING:
                        row[i] = v
                    elif not partial:
                        problems.append(f"{where}: id={before[0]} column {i} MISSING in a FULL after image")
                if row[0] in state:
                    problems.append(f"{where}: UPDATE moves id={before[0]} onto existing id={row[0]}")
                state[row[0]] = row
            else:
                if check_before(r, where) is not None:
                    del state[r[0]]
    assert len({len(v) for v in state.values()} | {ncols}) == 1
    return Replay(state, problems)


# --------------------------------------------------------------------------- conventions
def short(v: Any, limit: int = 160) -> str:
    text = repr(v)
    if len(text) > limit:
        size = (
            f" ({len(v)} {'bytes' if isinstance(v, bytes) else 'chars'})"
            if isinstance(v, bytes | str)
            else ""
        )
        text = text[: limit - 40] + " ... " + text[-30:] + size
    return text


def type_label(col: Column) -> str:
    """The column's SQL type for messages, with long ENUM/SET member lists abbreviated."""
    if col.labels and len(col.sql) > 60:
        return f"{col.sql.split('(', 1)[0]}({len(col.labels)} members){col.sql.rsplit(')', 1)[1]}"
    return col.sql


def same(a: Any, b: Any) -> bool:
    """Exact equality in pycanal's conventions: same Python type (str subclasses are str), Decimal
    with the same digits and exponent, float with the same repr."""
    if a is None or b is None:
        return a is None and b is None
    ta = str if isinstance(a, str) else type(a)
    tb = str if isinstance(b, str) else type(b)
    if ta is not tb:
        return False
    if ta is Decimal:
        return a.as_tuple() == b.as_tuple()
    if ta is float:
        return repr(a) == repr(b)
    return a == b


def float32_shortest(x: float) -> float:
    """The shortest decimal that rounds to the same 32-bit float as ``x`` (a float32 value)."""
    f32 = ctypes.c_float(x).value
    if f32 == 0 or f32 != f32:
        return f32
    for digits in range(1, 10):
        r = float(f"{f32:.{digits}g}")
        if ctypes.c_float(r).value == f32:  # C's double->float conversion rounds to nearest
            return r
    return f32


def _fraction(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def _datetime_text(v: Any, fsp: int) -> str:
    if isinstance(v, str):  # PyMySQL leaves zero dates and zero-in-date values as the server's text
        return v
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}" + _fraction(
        v.microsecond, fsp
    )


def _time_text(v: Any, fsp: int) -> str:
    if isinstance(v, str):
        return v
    micro = (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
    sign = "-" if micro < 0 else ""
    secs, micro = divmod(abs(micro), 1_000_000)
    return f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}" + _fraction(micro, fsp)


# Python codecs for the workload's server charsets (needed where the table map does not say which
# charset a column has, and to compare strings with mariadb-binlog's output): MariaDB's latin1 is cp1252 with 0x81, 0x8D, 0x8F, 0x90 and
# 0x9D as the C1 controls.
_PY_CODECS = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf16": "utf-16-be",
    "ucs2": "utf-16-be",
    "gbk": "gbk",
    "sjis": "shift_jis",
    "cp1251": "cp1251",
}


def server_bytes(text: str, charset: str) -> bytes:
    """``text`` in the column charset, as the server stores it."""
    if charset == "latin1":
        return bytes(
            ord(ch) if ord(ch) in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else ch.encode("cp1252")[0] for ch in text
        )
    if charset == "sjis":  # MariaDB converts U+005C to the sjis full-width backslash 0x815F
        text = text.replace("\\", "\uff3c")
    return text.encode(_PY_CODECS[charset])


def expected_value(col: Column, v: Any, tm: TableMap, i: int) -> Any:
    """A SELECT value (as PyMySQL returns it) in pycanal's value conventions for column ``i``."""
    if v is None:
        return None
    k = col.kind
    if k in ("int", "year"):
        assert isinstance(v, int)
        return v
    if k == "decimal":
        assert isinstance(v, Decimal)
        return v
    if k == "float":  # selected as CAST(col AS DOUBLE): the exact float32 value
        return float32_shortest(v)
    if k == "double":
        return float(v)
    if k == "bit":
        return int.from_bytes(v, "big")
    if k == "date":
        return v if isinstance(v, str) else f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    if k in ("datetime", "timestamp"):
        return _datetime_text(v, col.fsp)
    if k == "time":
        return _time_text(v, col.fsp)
    if k == "inet6":
        return socket.inet_pton(socket.AF_INET6, v)
    if k == "uuid":
        return uuid.UUID(v).bytes
    if k == "enum":
        if tm.enum_labels and tm.enum_labels[i] is not None:
            return v
        return col.labels.index(v) + 1 if v else 0
    if k == "set":
        members = v.split(",") if v else []
        if tm.set_labels and tm.set_labels[i] is not None:
            return members
        return sum(1 << col.labels.index(m) for m in members)
    if col.charset == "binary" or k == "geometry":
        assert isinstance(v, bytes), (col.name, v)
        return v
    # character data: str when the table map names the charset, else by the unknown-charset rules
    assert isinstance(v, str), (col.name, v)
    if tm.collations is not None and tm.collations[i] is not None:
        return v
    raw = server_bytes(v, col.charset or "utf8mb4")
    if k in ("char", "varchar"):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    return raw  # TEXT/JSON without a charset look like BLOBs: bytes


def select_expr(col: Column) -> str:
    return f"CAST(`{col.name}` AS DOUBLE)" if col.kind == "float" else f"`{col.name}`"


def select_table(server: PrivateMariaDB, schema: str, spec: TableSpec) -> dict[int, tuple]:
    cols = ", ".join(["`id`"] + [select_expr(c) for c in spec.columns])
    rows = server.query(f"SELECT {cols} FROM `{schema}`.`{spec.name}` ORDER BY `id`")
    return {r[0]: r for r in rows}


# --------------------------------------------------------------------------- comparison
@dataclass
class Mismatch:
    pk: int
    column: Column
    expected: Any
    got: Any
    server: Any

    def message(self, variant: str, table: str) -> str:
        return (
            f"[{variant}] table {table} id={self.pk} column {self.column.name} ({type_label(self.column)}): "
            f"expected {short(self.expected)} (SELECT gave {short(self.server)}), decoded {short(self.got)}"
        )


def compare(
    spec: TableSpec, tm: TableMap, selected: dict[int, tuple], replayed: Replay
) -> tuple[list[str], list[Mismatch]]:
    problems: list[str] = []
    mismatches: list[Mismatch] = []
    for pk in sorted(set(selected) - set(replayed.rows)):
        problems.append(f"id={pk}: in the table but not in the replayed binlog")
    for pk in sorted(set(replayed.rows) - set(selected)):
        problems.append(f"id={pk}: in the replayed binlog but not in the table: {short(replayed.rows[pk])}")
    for pk in sorted(set(selected) & set(replayed.rows)):
        srow, drow = selected[pk], replayed.rows[pk]
        for i, col in enumerate(spec.columns, start=1):
            try:
                exp = expected_value(col, srow[i], tm, i)
            except Exception as exc:  # a converter problem is a test bug: say where
                raise AssertionError(
                    f"converter failed for id={pk} column {col.name}: {srow[i]!r:.200}"
                ) from exc
            if not same(exp, drow[i]):
                mismatches.append(Mismatch(pk, col, exp, drow[i], srow[i]))
    return problems, mismatches


# --------------------------------------------------------------------------- mariadb-binlog
@dataclass
class PrintedRow:
    kind: str
    table: str
    images: list[dict[int, bytes]]


_STMT_RE = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]*)`\.`([^`]*)`$")
_COL_RE = re.compile(rb"^###   @(\d+)=(.*)$")


def mariadb_binlog_rows(files: list[Path], schema: str, table: str) -> list[PrintedRow]:
    out = subprocess.run(
        [mariadb_binlog_path(), "--no-defaults", "-v", "--base64-output=decode-rows", *map(str, files)],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    rows: list[PrintedRow] = []
    cur: PrintedRow | None = None
    for line in out.split(b"\n"):
        if not line.startswith(b"###"):
            continue
        m = _STMT_RE.match(line)
        if m:
            kind = {b"INSERT INTO": "INSERT", b"UPDATE": "UPDATE", b"DELETE FROM": "DELETE"}[m[1]]
            cur = PrintedRow(kind, f"{m[2].decode()}.{m[3].decode()}", [])
            rows.append(cur)
            if kind == "INSERT":
                cur.images.append({})
            continue
        if line in (b"### WHERE", b"### SET"):
            assert cur is not None
            if not (cur.kind == "INSERT" and line == b"### SET"):
                cur.images.append({})
            continue
        m = _COL_RE.match(line)
        if m:
            assert cur is not None and cur.images, line[:200]
            cur.images[-1][int(m[1])] = m[2]
    return [r for r in rows if r.table == f"{schema}.{table}"]


def quoted(raw: bytes) -> bytes:
    """mariadb-binlog's my_b_write_quoted(): bytes below 0x20 as \\xNN, everything else as is."""
    return b"'" + b"".join(bytes([c]) if c > 0x1F else b"\\x%02x" % c for c in raw) + b"'"


def printed_value(col: Column, v: Any, tm: TableMap, i: int) -> bytes | None:
    """What ``mariadb-binlog -v`` prints for our decoded value ``v`` of column ``i``; None for the
    types it prints ambiguously or lossily (FLOAT/DOUBLE as %g, compressed columns)."""
    if v is None:
        return b"NULL"
    k = col.kind
    if k == "int":
        bits = col.bits
        s = v - (1 << bits) if v >= 1 << (bits - 1) else v
        return str(s).encode() + (f" ({s + (1 << bits)})".encode() if s < 0 else b"")
    if k == "year":
        return str(v + 1900 if v == 0 else v).encode()  # mariadb-binlog prints the zero year as 1900
    if k == "decimal":
        return format(v, "f").encode()
    if k == "bit":
        return b"b'" + format(v, f"0{col.bits}b").encode() + b"'"
    if k == "date":
        return b"'" + v.replace("-", ":").encode() + b"'"
    if k in ("datetime", "time"):
        return b"'" + v.encode() + b"'"
    if k == "timestamp":
        secs = 0
        if not v.startswith("0000-00-00"):
            d = dt.datetime.strptime(v[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
            secs = int(d.timestamp())
        return f"{secs}{v[19:]}".encode()
    if k == "enum":
        return str(v if isinstance(v, int) else (col.labels.index(v) + 1 if v else 0)).encode()
    if k == "set":  # the stored bytes (little-endian) in order, each byte's bits high to low
        mask = v if isinstance(v, int) else sum(1 << col.labels.index(m) for m in v)
        return b"b'" + "".join(f"{byte:08b}" for byte in mask.to_bytes(tm.metas[i], "little")).encode() + b"'"
    if k in ("float", "double") or col.compressed:
        return None
    if isinstance(v, str):
        v = server_bytes(v, col.charset or "utf8mb4")
    if k in FIXED_BINARY_KINDS:  # mariadb-binlog prints the logged bytes, without the 0x00 padding
        v = v.rstrip(b"\x00")
    return quoted(v)


def compare_with_mariadb_binlog(
    spec: TableSpec, events: list[RowsEvent], printed: list[PrintedRow]
) -> list[str]:
    ours = [(e, r) for e in events for r in e.rows]
    problems: list[str] = []
    if len(ours) != len(printed):
        return [f"pycanal decoded {len(ours)} row changes, mariadb-binlog printed {len(printed)}"]
    for n, ((e, r), p) in enumerate(zip(ours, printed, strict=True)):
        images = list(r) if e.kind == "UPDATE" else [r]
        if e.kind != p.kind or len(images) != len(p.images):
            problems.append(f"row change #{n}: pycanal {e.kind}, mariadb-binlog {p.kind}")
            continue
        for img_no, (img, pimg) in enumerate(zip(images, p.images, strict=True)):
            present = {i + 1 for i, v in enumerate(img) if v is not MISSING}
            if present != set(pimg):
                problems.append(
                    f"row change #{n} ({e.kind} image {img_no}): pycanal has columns {sorted(present)}, "
                    f"mariadb-binlog {sorted(pimg)}"
                )
                continue
            for i, v in enumerate(img):
                if v is MISSING:
                    continue
                col = spec.columns[i - 1] if i else None  # column 0 is the INT primary key
                exp = str(v).encode() if col is None else printed_value(col, v, e.table_map, i)
                if exp is None:
                    continue
                got = pimg[i + 1].rstrip(b" ") if col is not None and col.kind == "int" else pimg[i + 1]
                if exp != got:
                    name, sql = (col.name, type_label(col)) if col else ("id", "INT")
                    problems.append(
                        f"table {spec.name} id={img[0]} column {name} ({sql}) in row change #{n} "
                        f"({e.kind} image {img_no}): pycanal {short(v)} prints as {short(exp)}, "
                        f"mariadb-binlog printed {short(got)}"
                    )
    return problems


# --------------------------------------------------------------------------- one variant
@dataclass
class VariantRun:
    variant: str
    server: PrivateMariaDB
    schema: str
    partial: bool
    main: Segment
    ddl: list[str]
    compressed_files: list[Path]
    seconds: float  # to run the workloads and decode the main segment

    def selected(self, spec: TableSpec) -> dict[int, tuple]:
        return select_table(self.server, self.schema, spec)


def _prepare(server: PrivateMariaDB, variant: str) -> VariantRun:
    t0 = time.monotonic()
    schema = f"pycanal_diff_{variant}"
    server.execute(f"DROP DATABASE IF EXISTS `{schema}`")
    ddl = [
        f"CREATE DATABASE `{schema}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        ALL_TYPES.create_sql(schema),
        COMPRESSED.create_sql(schema),
    ]
    statements = [workload.Statement(sql) for sql in ddl] + workload.generate(ALL_TYPES, schema, SEED, OPS)
    comp_statements = workload.generate(COMPRESSED, schema, SEED, OPS // 4)

    def run(stmts: list[workload.Statement]) -> Any:
        def go() -> None:
            with server.root_connection() as conn:
                workload.run(conn, stmts)

        return go

    # The DDL goes to the same binlog files as the workload (long QUERY events to compress).
    main_files = binlog_segment(server, run(statements))
    # The COMPRESSED-column table gets its own binlog files: see test_compressed_columns.
    comp_files = binlog_segment(server, run(comp_statements))
    defaults = server.query(
        "SELECT COLUMN_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
        "AND COLUMN_NAME <> 'id' AND COLUMN_DEFAULT IS NOT NULL AND COLUMN_DEFAULT <> 'NULL'",
        (schema,),
    )
    assert defaults == [], f"replay assumes DEFAULT NULL everywhere: {defaults}"
    main = decode_segment(main_files, schema, ALL_TYPES.name)
    return VariantRun(
        variant,
        server,
        schema,
        server.binlog_row_image == "MINIMAL",
        main,
        ddl,
        comp_files,
        time.monotonic() - t0,
    )


_RUNS: dict[str, VariantRun] = {}


def _get_run(request: pytest.FixtureRequest, variant: str) -> VariantRun:
    """The run of ``variant`` (workload executed and decoded once per test module)."""
    if variant not in _RUNS:
        server = request.getfixturevalue(_SERVER_FIXTURE[variant])
        _RUNS[variant] = _prepare(server, variant)
    return _RUNS[variant]


@pytest.fixture(scope="module")
def _drop_schemas() -> Iterator[None]:
    yield
    for run in _RUNS.values():
        if run.server.running:
            run.server.execute(f"DROP DATABASE IF EXISTS `{run.schema}`")
    _RUNS.clear()


@pytest.fixture(scope="module", params=VARIANTS)
def variant_run(request: pytest.FixtureRequest, _drop_schemas: None) -> VariantRun:
    return _get_run(request, request.param)


def _table_map(run: VariantRun) -> TableMap:
    assert run.main.events, "no row events decoded for the workload table"
    tm = run.main.events[-1].table_map
    assert tm is not None
    return tm


# --------------------------------------------------------------------------- tests
def test_table_map_describes_the_table(variant_run: VariantRun) -> None:
    tm = _table_map(variant_run)
    n = len(ALL_TYPES.columns) + 1
    assert tm.column_count == n
    # FULL and MINIMAL both log signedness and the charsets of character columns
    assert tm.unsigned is not None and tm.collations is not None
    for i, c in enumerate(ALL_TYPES.columns, start=1):
        if c.kind in ("int", "decimal"):
            assert tm.unsigned[i] == c.unsigned, c.name
        if c.kind in ("char", "varchar", "text", "binary", "varbinary", "blob", "json", "inet6", "uuid"):
            assert tm.collations[i] is not None, c.name
    if variant_run.server.binlog_row_metadata == "FULL":
        assert tm.names == ["id"] + [c.name for c in ALL_TYPES.columns]
        assert tm.primary_key == [(0, 0)]
        for i, c in enumerate(ALL_TYPES.columns, start=1):
            if c.kind == "enum":
                assert tm.enum_labels[i] == list(c.labels), c.name
            if c.kind == "set":
                assert tm.set_labels[i] == list(c.labels), c.name
    else:
        assert tm.names is None and tm.enum_labels is None and tm.set_labels is None


def test_final_state_matches_select(variant_run: VariantRun) -> None:
    run = variant_run
    tm = _table_map(run)
    replayed = replay(run.main.events, tm.column_count, run.partial)
    selected = run.selected(ALL_TYPES)
    assert len(selected) > 50
    problems, mismatches = compare(ALL_TYPES, tm, selected, replayed)
    problems = [f"[{run.variant}] table {ALL_TYPES.name} {p}" for p in problems]
    for i, col in enumerate(ALL_TYPES.columns, start=1):  # every column was really compared
        values = {repr(r[i]) for r in selected.values() if r[i] is not None}
        if len(values) < min(3, len(col.pool)):
            problems.append(f"column {col.name}: only {len(values)} distinct non-NULL values in the table")
    if not any(all(v is None for v in r[1:]) for r in selected.values()):
        problems.append("no row is NULL in every column")
    problems += [m.message(run.variant, ALL_TYPES.name) for m in mismatches]
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:60])


def test_row_images_are_consistent(variant_run: VariantRun) -> None:
    """Each UPDATE/DELETE before image equals the row the replay built from earlier events
    (only the primary key with binlog_row_image=MINIMAL), and every kind of change occurred."""
    run = variant_run
    replayed = replay(run.main.events, _table_map(run).column_count, run.partial)
    assert not replayed.problems, "\n".join(replayed.problems[:40])
    kinds = Counter(e.kind for e in run.main.events)
    assert kinds["INSERT"] and kinds["UPDATE"] and kinds["DELETE"], kinds
    multi = [e for e in run.main.events if len(e.rows) > 1]
    assert multi, "no rows event carries more than one row"
    if run.partial:
        updates = [r for e in run.main.events if e.kind == "UPDATE" for r in e.rows]
        assert all(sum(v is not MISSING for v in before) == 1 for before, _ in updates)
        assert any(any(v is MISSING for v in after) for _, after in updates)


def test_matches_mariadb_binlog_output(variant_run: VariantRun) -> None:
    run = variant_run
    printed = mariadb_binlog_rows(run.main.files, run.schema, ALL_TYPES.name)
    assert printed, "mariadb-binlog printed no rows for the workload table"
    problems = compare_with_mariadb_binlog(ALL_TYPES, run.main.events, printed)
    assert not problems, f"[{run.variant}] {len(problems)} differences:\n" + "\n".join(problems[:60])


def test_compressed_binlog_events_occur(request: pytest.FixtureRequest, _drop_schemas: None) -> None:
    """--log-bin-compress really wrote compressed QUERY and rows events (and they decoded)."""
    variant_run = _get_run(request, "compressed_binlog")
    counts = variant_run.main.type_counts
    assert counts[QUERY_COMPRESSED] > 0, counts
    kinds = {ROWS_COMPRESSED[t] for t in counts if t in ROWS_COMPRESSED}
    assert kinds == {"INSERT", "UPDATE", "DELETE"}, counts
    compressed_rows = [e for e in variant_run.main.events if e.type in ROWS_COMPRESSED]
    assert len(compressed_rows) == len(variant_run.main.events)
    # the compressed QUERY events (the CREATE TABLEs; the server writes CREATE DATABASE as a
    # plain QUERY) decode to the statements as written
    compressed_ddl = [q.query for q in variant_run.main.queries if q.type == QUERY_COMPRESSED]
    assert compressed_ddl == variant_run.ddl[1:]


def test_ddl_query_events(variant_run: VariantRun) -> None:
    queries = [q.query for q in variant_run.main.queries if q.query not in ("BEGIN", "COMMIT", "ROLLBACK")]
    assert queries == variant_run.ddl


def test_compressed_columns(variant_run: VariantRun) -> None:
    run = variant_run
    seg = decode_segment(run.compressed_files, run.schema, COMPRESSED.name)
    tm = seg.events[-1].table_map
    replayed = replay(seg.events, tm.column_count, run.partial)
    problems, mismatches = compare(COMPRESSED, tm, run.selected(COMPRESSED), replayed)
    problems += [m.message(run.variant, COMPRESSED.name) for m in mismatches]
    assert not problems, "\n".join(problems[:40])


# --------------------------------------------------------------------------- pinned bugs
def _single_row(server: PrivateMariaDB, ddl: str, insert: str, table: str) -> list[tuple]:
    schema = "pycanal_diff_pinned"
    server.execute(f"DROP DATABASE IF EXISTS `{schema}`")
    server.execute(f"CREATE DATABASE `{schema}`")
    try:
        server.execute(ddl.format(t=f"`{schema}`.`{table}`"))
        files = binlog_segment(server, lambda: server.execute(insert.format(t=f"`{schema}`.`{table}`")))
        return [r for e in decode_segment(files, schema, table).events for r in e.rows]
    finally:
        server.execute(f"DROP DATABASE `{schema}`")


def test_float_near_max_is_decoded(mariadb: PrivateMariaDB) -> None:
    rows = _single_row(
        mariadb,
        "CREATE TABLE {t} (id INT PRIMARY KEY, f FLOAT)",
        "INSERT INTO {t} VALUES (1, 3.4028234663852886e38), (2, -3.4028234663852886e38), (3, 3.4028e38)",
        "float_max",
    )
    assert rows == [(1, 3.4028235e38), (2, -3.4028235e38), (3, 3.4028e38)]


def test_latin1_enum_and_set_labels(mariadb: PrivateMariaDB) -> None:
    rows = _single_row(
        mariadb,
        "CREATE TABLE {t} (id INT PRIMARY KEY, e ENUM('a','é','€') CHARACTER SET latin1, "
        "s SET('ü','x') CHARACTER SET latin1)",
        "INSERT INTO {t} VALUES (1, 'é', 'ü,x'), (2, '€', '')",
        "latin1_labels",
    )
    assert rows == [(1, "é", ["ü", "x"]), (2, "€", [])]


def test_mariadb_year_has_a_signedness_bit(mariadb_minimal: PrivateMariaDB) -> None:
    # MariaDB's SIGNEDNESS bitmap has a bit for YEAR (MySQL's has none): the columns after a
    # YEAR must keep their own signedness.
    rows = _single_row(
        mariadb_minimal,
        "CREATE TABLE {t} (y YEAR, b INT, c INT UNSIGNED, d INT, e TINYINT UNSIGNED)",
        "INSERT INTO {t} VALUES (2001, -1, 5, -7, 255)",
        "year_signedness",
    )
    assert rows == [(2001, -1, 5, -7, 255)]
