"""``pycanal.binlog.parallel``: split points and the multi-process decode.

The reference is always a single-process ``read_events`` over the whole file. The consumer
below turns each part's events into canonical JSON lines (``canonical.Recorder``) twice:

* **plain**: a fresh ``Recorder``. It learns the current GTID from GTID events, so for a part
  that starts at a statement *inside* a transaction (a split inside a huge transaction) the
  lines up to that transaction's end have ``"gtid": null`` where the single-process decode has
  the GTID: the GTID event is in the previous part. For such parts the lines are compared
  field by field without ``gtid`` (positions, row images, columns, SQL: everything else), and
  the only difference allowed is exactly that missing GTID. Parts that start at a transaction
  start must match line for line, GTID included.
* **primed**: the ``Recorder``'s GTID set from ``PartEvents.transaction_gtid`` (the decoded GTID
  event of the transaction the part starts inside) before recording. Then the concatenated lines
  of all parts equal the single-process lines exactly, for every file and part count.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from binlog_fixtures import FIXTURES_DIR
from pycanal.binlog import BinlogError, read_events
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.events import RowsEvent
from pycanal.binlog.parallel import (
    Part,
    WorkerTraceback,
    decode_parallel,
    iter_parallel,
    plan_parts,
    split_points,
)
from pycanal.binlog.reader import iter_frames
from pycanal.parse.canonical import Recorder, to_json_line

NAMED_FIXTURES = [
    "mysql-binlog-connector-java/mysql-bin.sakila",
    "canal/mysql-bin.000001",
    "mysql-binlog-connector-java/mysql-bin.checksum-crc32",
    "rust_mysql_common/transaction_compression.000001",
    "mariadb-poc/mariadb-repl-bin.000005",
]
PART_COUNTS = range(1, 9)


# --------------------------------------------------------------------------- consumers (top level: pickled)
def _lines(recorder: Recorder, events: Iterable[Any]) -> list[str]:
    return [to_json_line(rec) for rec in recorder.records(events)]


def canonical_parts(events: Any) -> tuple[bool, list[str], list[str]]:
    """(part starts mid-transaction, plain lines, lines primed with the transaction's GTID)."""
    evs = list(events)
    mid = bool(getattr(events, "mid_transaction", False))
    primed_rec = Recorder()
    gtid = getattr(events, "transaction_gtid", None)
    if gtid is not None:
        primed_rec.gtid = gtid.gtid
    primed = _lines(primed_rec, evs)
    plain = _lines(Recorder(), evs) if mid else primed  # not mid: nothing was primed
    return mid, plain, primed


def count_rows(events: Any) -> int:
    """Decode every row (the values are built, then dropped)."""
    n = 0
    for e in events:
        if isinstance(e, RowsEvent):
            n += len(e.rows)
    return n


def canonical_lines(events: Any) -> list[str]:
    return _lines(Recorder(), events)


def count_events(events: Any) -> int:
    return sum(1 for _ in events)


def mark_part(events: Any, marks: str) -> int:
    """Leave a file named after the part in ``marks`` (it was started), then count its events."""
    Path(marks, str(events.index)).touch()
    return count_events(events)


def worker_pid(events: Any) -> int:
    for _ in events:
        pass
    return os.getpid()


# --------------------------------------------------------------------------- helpers
def event_starts(data: bytes) -> list[int]:
    starts = []
    try:
        for pos, _raw in iter_frames(data, "<test>"):
            starts.append(pos)
    except BinlogError:
        pass
    return starts


def check_points(data: bytes, parts: int) -> list[int]:
    points = split_points(data, parts)
    assert points[0] == 4
    assert 1 <= len(points) <= parts
    assert points == sorted(set(points)), points
    assert set(points[1:]) <= set(event_starts(data)), points
    assert split_points(data, parts) == points  # pure
    return points


def without_gtid(line: str) -> dict[str, Any]:
    rec = json.loads(line)
    rec.pop("gtid")
    return rec


def assert_parallel_equals_single(path: Path, parts_range: Iterable[int] = PART_COUNTS) -> dict[int, int]:
    """The checks of the module docstring; returns {parts: parts that started mid-transaction}."""
    data = path.read_bytes()
    expected = canonical_lines(read_events(path))
    mid_counts = {}
    for parts in parts_range:
        points = check_points(data, parts)
        results = decode_parallel(path, canonical_parts, workers=2, parts=parts)
        assert len(results) == len(points)
        primed = [line for _, _, lines in results for line in lines]
        assert primed == expected, f"{path.name}, {parts} parts: primed lines differ"
        plain_all = []
        i = 0
        for mid, plain, primed_lines in results:
            want = expected[i : i + len(plain)]
            assert len(primed_lines) == len(plain)
            if not mid:
                assert plain == want, f"{path.name}, {parts} parts: a part at a transaction start differs"
            else:
                assert [without_gtid(x) for x in plain] == [without_gtid(x) for x in want]
                for got, exp in zip(plain, want, strict=True):
                    g, x = json.loads(got)["gtid"], json.loads(exp)["gtid"]
                    assert g == x or g is None, (got, exp)
            plain_all += plain
            i += len(plain)
        assert i == len(expected)
        mid_counts[parts] = sum(1 for mid, _, _ in results if mid)
    return mid_counts


# --------------------------------------------------------------------------- split points
def test_split_points_degenerate_inputs() -> None:
    assert split_points(b"", 4) == [4]
    assert split_points(b"\xfebi", 4) == [4]
    assert split_points(b"not a binlog at all" * 10, 4) == [4]
    assert split_points(b"\xfebin" + b"\0" * 10, 8) == [4]  # truncated header: no split
    with pytest.raises(ValueError):
        split_points(b"\xfebin", 0)


def test_split_points_accept_bytes_memoryview_and_mmap(fixtures_dir: Path) -> None:
    path = fixtures_dir / NAMED_FIXTURES[0]
    data = path.read_bytes()
    want = split_points(data, 5)
    assert len(want) > 1
    assert split_points(memoryview(data), 5) == want
    assert split_points(bytearray(data), 5) == want
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert split_points(mm, 5) == want


def test_split_points_are_roughly_equal_where_transactions_allow(fixtures_dir: Path) -> None:
    # Files of many similar transactions split into near-equal parts.
    for name in ("canal/mysql-bin.000001", "mariadb-poc/mariadb-repl-bin.000005"):
        data = (fixtures_dir / name).read_bytes()
        for parts in (2, 4, 8):
            points = split_points(data, parts)
            assert len(points) == parts
            sizes = [b - a for a, b in zip(points, points[1:] + [len(data)], strict=True)]
            ideal = (len(data) - 4) / parts
            assert max(sizes) < 1.25 * ideal, (name, parts, sizes)


def test_sakila_splits_inside_its_huge_transactions(fixtures_dir: Path) -> None:
    # Sakila's data load has transactions of 400-500 KB holding two INSERT statements each: with
    # enough parts, the statement boundary (a TABLE_MAP after a STMT_END_F rows event) is used.
    data = (fixtures_dir / NAMED_FIXTURES[0]).read_bytes()
    plan = plan_parts(data, 8)
    mid = [p for p in plan if p.transaction_start is not None]
    assert mid, plan
    for p in mid:
        assert data[p.start + 4] == E.TABLE_MAP
        assert data[p.transaction_start + 4] == E.QUERY  # BEGIN: this 5.5 file has no GTIDs
        assert p.gtid_pos is None
    assert all(isinstance(p, Part) for p in plan)
    assert [p.stop for p in plan] == [p.start for p in plan[1:]] + [None]


# --------------------------------------------------------------------------- parallel == single
@pytest.mark.parametrize("name", NAMED_FIXTURES)
def test_parallel_decode_equals_single_process(fixtures_dir: Path, name: str) -> None:
    assert_parallel_equals_single(fixtures_dir / name)


def _all_fixture_files() -> list[str]:
    if not FIXTURES_DIR.is_dir():
        return []
    return sorted(
        str(p.relative_to(FIXTURES_DIR))
        for p in FIXTURES_DIR.rglob("*")
        if p.is_file()
        and p.name not in ("README.md", "SHA256SUMS")
        and str(p.relative_to(FIXTURES_DIR)) not in NAMED_FIXTURES  # those have their own test
    )


@pytest.mark.parametrize("name", _all_fixture_files())
def test_every_fixture_parallel_equals_single_or_fails_alike(fixtures_dir: Path, name: str) -> None:
    path = fixtures_dir / name
    try:
        expected = canonical_lines(read_events(path))
    except BinlogError as exc:
        for parts in (1, 2, 3, 8):
            with pytest.raises(BinlogError) as got:
                decode_parallel(path, canonical_lines, workers=2, parts=parts)
            assert (got.value.message, got.value.source, got.value.offset) == (
                exc.message,
                exc.source,
                exc.offset,
            )
        return
    for parts in (2, 3, 8):
        check_points(path.read_bytes(), parts)
        got = decode_parallel(path, canonical_parts, workers=2, parts=parts)
        assert [line for _, _, lines in got for line in lines] == expected


def test_consumers_run_in_worker_processes(fixtures_dir: Path) -> None:
    pids = decode_parallel(fixtures_dir / NAMED_FIXTURES[0], worker_pid, workers=2, parts=4)
    assert len(pids) == 4
    assert os.getpid() not in pids


def test_results_are_taken_before_more_parts_start(fixtures_dir: Path, tmp_path: Path) -> None:
    """``iter_parallel`` hands a part to a worker only while fewer than twice the workers' results
    wait: a reader that stops after the first result has started 2 of 6 parts, not all of them."""
    path = fixtures_dir / NAMED_FIXTURES[0]
    assert len(plan_parts(path.read_bytes(), 6)) == 6
    results = iter_parallel(path, partial(mark_part, marks=str(tmp_path)), workers=1, parts=6)
    first = next(results)
    time.sleep(1.0)  # what was handed over has started by now
    assert first > 0 and sorted(p.name for p in tmp_path.iterdir()) == ["0", "1"]
    rest = list(results)
    assert len(rest) == 5 and len(list(tmp_path.iterdir())) == 6
    assert [first, *rest] == decode_parallel(path, count_events, workers=2, parts=6)


def test_bad_arguments(fixtures_dir: Path) -> None:
    path = fixtures_dir / NAMED_FIXTURES[1]
    with pytest.raises(ValueError):
        decode_parallel(path, canonical_lines, workers=0)
    with pytest.raises(ValueError):
        decode_parallel(path, canonical_lines, parts=0)


# --------------------------------------------------------------------------- errors from workers
def _event_at_fraction(data: bytes, fraction: float, types: set[int] | None = None) -> tuple[int, int]:
    """(offset, size) of the first event (of ``types``) at or after ``fraction`` of the file."""
    for pos, raw in iter_frames(data, "<test>"):
        if pos >= len(data) * fraction and (types is None or raw[4] in types):
            return pos, len(raw)
    raise AssertionError("no such event")


def _single_error(path: Path, consume: Any = canonical_lines) -> BinlogError:
    with pytest.raises(BinlogError) as exc:
        consume(read_events(path))
    return exc.value


def _corrupt(fixtures_dir: Path, tmp_path: Path, name: str, how: str) -> Path:
    data = bytearray((fixtures_dir / name).read_bytes())
    rows_types = {E.WRITE_ROWS_V1, E.UPDATE_ROWS_V1, E.DELETE_ROWS_V1, E.WRITE_ROWS, E.UPDATE_ROWS}
    if how == "crc":  # a flipped byte inside a rows event: CRC32 mismatch
        pos, size = _event_at_fraction(bytes(data), 0.7, rows_types)
        data[pos + size - 10] ^= 0x40
    elif how == "truncated":  # the file ends inside an event
        pos, size = _event_at_fraction(bytes(data), 0.6)
        del data[pos + size // 2 :]
    elif how == "bad_size":  # an event header with a size below 19
        pos, _ = _event_at_fraction(bytes(data), 0.5)
        data[pos + 9 : pos + 13] = (7).to_bytes(4, "little")
    elif how == "columns":  # a rows event whose column count disagrees with its TABLE_MAP
        pos, _ = _event_at_fraction(bytes(data), 0.7, rows_types)
        data[pos + 19 + 8] += 1  # rows v1: 8-byte post-header, then the packed column count
    elif how == "row_data":  # bad row data: found lazily, while ``consume`` reads the rows
        pos, size = _event_at_fraction(bytes(data), 0.7, rows_types)
        out = tmp_path / f"{Path(name).name}.{how}"
        for at in range(pos + size - 1, pos + size - 200, -1):
            trial = bytearray(data)
            trial[at] = 0xFF
            out.write_bytes(trial)
            try:
                count_rows(read_events(out))
            except BinlogError as exc:
                if "row data" in exc.message and exc.offset == pos:
                    return out
        raise AssertionError("no single-byte change made the row data undecodable")
    out = tmp_path / f"{Path(name).name}.{how}"
    out.write_bytes(data)
    return out


@pytest.mark.parametrize(
    "name, how",
    [
        ("mysql-binlog-connector-java/mysql-bin.checksum-crc32", "crc"),
        ("mysql-binlog-connector-java/mysql-bin.checksum-crc32", "truncated"),
        ("mysql-binlog-connector-java/mysql-bin.sakila", "bad_size"),
        ("mysql-binlog-connector-java/mysql-bin.sakila", "columns"),
        ("canal/mysql-bin.000001", "row_data"),
        ("canal/mysql-bin.000001", "truncated"),
    ],
)
def test_corrupt_file_raises_the_same_binlog_error_from_a_worker(
    fixtures_dir: Path, tmp_path: Path, name: str, how: str
) -> None:
    path = _corrupt(fixtures_dir, tmp_path, name, how)
    want = _single_error(path, count_rows)
    assert want.offset is not None and want.offset > len(path.read_bytes()) * 0.3
    for parts in PART_COUNTS:
        with pytest.raises(BinlogError) as got:
            decode_parallel(path, count_rows, workers=2, parts=parts)
        err = got.value
        assert type(err) is BinlogError
        assert (err.message, err.source, err.offset) == (want.message, want.source, want.offset)
        assert str(err) == str(want)
        assert isinstance(err.__cause__, WorkerTraceback)
        assert "Traceback" in str(err.__cause__)


def test_empty_and_bad_magic_files_fail_like_read_events(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    bad = tmp_path / "bad"
    bad.write_bytes(b"GIF89a" + b"\0" * 100)
    for path in (empty, bad):
        want = _single_error(path)
        with pytest.raises(BinlogError) as got:
            decode_parallel(path, canonical_lines, workers=2, parts=4)
        assert (got.value.message, got.value.source, got.value.offset) == (
            want.message,
            want.source,
            want.offset,
        )


# --------------------------------------------------------------------------- a live MariaDB binlog
def test_mariadb_huge_transaction_splits_at_statement_boundaries(mariadb: Any, tmp_path: Path) -> None:
    """A binlog from the private MariaDB: small transactions around one transaction of ~1 MB
    made of many INSERT / UPDATE / DELETE statements (ANNOTATE_ROWS on), so the split points
    inside it are statement starts (the ANNOTATE_ROWS before a TABLE_MAP after STMT_END_F)."""
    suffix = uuid.uuid4().hex[:8]
    t1, t2 = f"par_a_{suffix}", f"par_b_{suffix}"
    schema = mariadb.database
    mariadb.execute(
        f"CREATE TABLE `{schema}`.`{t1}` (id INT PRIMARY KEY, k INT, c VARCHAR(120), "
        "d DECIMAL(12,2), t DATETIME(3), j JSON) ENGINE=InnoDB"
    )
    mariadb.execute(
        f"CREATE TABLE `{schema}`.`{t2}` (id BIGINT PRIMARY KEY, b BLOB, e ENUM('x','y','z'), "
        "f DOUBLE) ENGINE=InnoDB"
    )
    first = mariadb.flush_binary_logs()
    with mariadb.root_connection(schema) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO `{t1}` VALUES (0, 0, 'before', 0.00, '2024-01-01 00:00:00.000', '[]')")
        conn.begin()
        for s in range(120):
            base = s * 40
            vals = ",".join(
                f"({base + i}, {i * 7 % 13}, '{'c' * (40 + i)}-{s}', {s}.{i:02d}, "
                f"'2024-02-{1 + i % 28:02d} 12:34:56.{i:03d}', '{{\"s\": {s}, \"i\": {i}}}')"
                for i in range(1, 41)
            )
            cur.execute(f"INSERT INTO `{t1}` VALUES {vals}")
            vals2 = ",".join(
                f"({base + i}, REPEAT('b{i}', {20 + i}), '{'xyz'[i % 3]}', {i}.5e{s % 5})"
                for i in range(1, 21)
            )
            cur.execute(f"INSERT INTO `{t2}` VALUES {vals2}")
            if s % 3 == 0:
                cur.execute(
                    f"UPDATE `{t1}` SET k = k + 100, c = CONCAT(c, '+') WHERE id BETWEEN {base} AND {base + 15}"
                )
            if s % 4 == 1:
                cur.execute(f"DELETE FROM `{t2}` WHERE id BETWEEN {base + 1} AND {base + 5}")
        conn.commit()
        cur.execute(f"UPDATE `{t1}` SET c = 'after' WHERE id = 0")
        cur.execute(f"DELETE FROM `{t1}` WHERE id = 0")
    last = mariadb.flush_binary_logs()
    assert last != first
    path = tmp_path / first.name
    shutil.copyfile(first, path)
    data = path.read_bytes()
    assert len(data) > 800_000

    # Where the one big transaction is, and that the split points fall inside it.
    gtids = [pos for pos, raw in iter_frames(data, "x") if raw[4] == E.MARIADB_GTID]
    sizes = sorted(((b - a, a) for a, b in zip(gtids, gtids[1:], strict=False)), reverse=True)
    big_size, big_start = sizes[0]
    assert big_size > 0.9 * len(data)
    for parts in (2, 5, 8):
        plan = plan_parts(data, parts)
        assert len(plan) == parts
        for p in plan[1:]:
            assert big_start < p.start < big_start + big_size
            assert p.transaction_start == big_start and p.gtid_pos == big_start
            assert data[p.start + 4] == E.MARIADB_ANNOTATE_ROWS
        bounds = [p.start for p in plan] + [len(data)]
        ideal = (len(data) - 4) / parts
        assert max(b - a for a, b in zip(bounds, bounds[1:], strict=False)) < 1.1 * ideal

    mids = assert_parallel_equals_single(path)
    assert all(mids[parts] == parts - 1 for parts in PART_COUNTS), mids

    # The rows themselves (not only their JSON lines) match, part by part.
    expected_rows = [r for e in read_events(path) if isinstance(e, RowsEvent) for r in e.rows]
    got_rows = [r for part in decode_parallel(path, all_rows, workers=2, parts=7) for r in part]
    assert got_rows == expected_rows
    assert len(expected_rows) > 120 * 60


def all_rows(events: Any) -> list:
    return [r for e in events if isinstance(e, RowsEvent) for r in e.rows]
