"""``pycanal dump`` against a private MariaDB writing MINIMAL row metadata: the same jsonl lines
as ``pycanal binlog decode`` on the same files, with the column names (and ENUM/SET labels)
filled in from the schema history; starts by file+position, GTID and timestamp; the filter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pycanal.testing import PrivateMariaDB

SCHEMA = "pycanal"
T1, T2, T3 = "dump_t1", "dump_t2", "dump_t3"
ROW_TYPES = ("INSERT", "UPDATE", "DELETE")


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pycanal.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def jsonl(out: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@dataclass
class Workload:
    db: PrivateMariaDB
    start: tuple[str, int]
    end: tuple[str, int]
    files: list[Path]
    timestamp_ms: int  # between batch 1 and batch 2
    batch2_file: str

    def dump(self, *args: str) -> subprocess.CompletedProcess[str]:
        d = self.db
        return run(
            "dump",
            "--source",
            f"{d.host}:{d.port}",
            "--user",
            d.repl_user,
            "--password",
            d.repl_password,
            *args,
        )


def write_batch(db: PrivateMariaDB, base: int) -> None:
    with db.root_connection(SCHEMA) as conn, conn.cursor() as cur:
        for i in range(base, base + 3):
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {T1} VALUES (%s, %s, %s, %s)", (i, f"name-{i}", -i, 4294967295 - i))
            cur.execute(f"INSERT INTO {T2} VALUES (%s, %s)", (i, f"v{i}"))
            cur.execute("COMMIT")
        cur.execute(f"UPDATE {T1} SET s = CONCAT(s, '!') WHERE id = %s", (base,))
        cur.execute(f"DELETE FROM {T2} WHERE id = %s", (base + 1,))
        cur.execute(f"INSERT INTO {T3} VALUES (%s, 'b', 'x,z', 200)", (base,))


@pytest.fixture(scope="module")
def workload(mariadb_minimal: PrivateMariaDB) -> Workload:
    db = mariadb_minimal
    for t in (T1, T2, T3):
        db.execute(f"DROP TABLE IF EXISTS `{SCHEMA}`.`{t}`")
    db.execute(
        f"CREATE TABLE `{SCHEMA}`.`{T1}` (id INT PRIMARY KEY, s VARCHAR(40), n BIGINT, u INT UNSIGNED)"
    )
    db.execute(f"CREATE TABLE `{SCHEMA}`.`{T2}` (id INT PRIMARY KEY, v VARCHAR(10))")
    db.execute(
        f"CREATE TABLE `{SCHEMA}`.`{T3}` (id INT PRIMARY KEY, e ENUM('a','b','c'), st SET('x','y','z'), "
        "ti TINYINT UNSIGNED)"
    )
    db.flush_binary_logs()
    start = db.current_binlog()
    write_batch(db, 100)
    db.flush_binary_logs()
    ts = (int(time.time()) + 1) * 1000
    while time.time() * 1000 < ts + 20:
        time.sleep(0.05)
    batch2_file = db.current_binlog()[0]
    write_batch(db, 200)
    db.flush_binary_logs()
    write_batch(db, 300)
    end = db.current_binlog()
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start[0]) : names.index(end[0]) + 1]]
    return Workload(db, start, end, files, ts, batch2_file)


@pytest.fixture(scope="module")
def full(workload: Workload) -> list[dict[str, Any]]:
    f, p = workload.start
    return jsonl(workload.dump("--start", f"{f}:{p}", "--stop-at-end", "--format", "jsonl"))


def without_columns(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "columns"}


def test_jsonl_equals_binlog_decode_with_names(workload: Workload, full: list[dict[str, Any]]) -> None:
    decoded = jsonl(
        run(
            "binlog",
            "decode",
            "--format",
            "jsonl",
            "--start-position",
            str(workload.start[1]),
            *map(str, workload.files),
        )
    )
    assert len(full) == len(decoded)
    rows = 0
    for got, want in zip(full, decoded, strict=True):
        if got["type"] in ROW_TYPES:
            rows += 1
            assert want["columns"] is None  # MINIMAL metadata: the file has no names
            assert got["columns"], got
        if got.get("table") == T3:
            # ENUM/SET labels come from the history; the file only has the numbers.
            assert got["columns"] == ["id", "e", "st", "ti"]
            assert got["after"][1:] == ["b", ["x", "z"], 200]
            assert want["after"][1] == 2
            assert got["after"][0] == want["after"][0] and got["after"][3] == want["after"][3]
            continue
        assert without_columns(got) == without_columns(want)
    assert rows == 3 * (3 * 2 + 3)
    t1 = [r for r in full if r["table"] == T1]
    assert t1[0]["columns"] == ["id", "s", "n", "u"]
    assert t1[0]["after"] == [100, "name-100", -100, 4294967195]
    # The stream ran to the end SHOW MASTER STATUS reported: past the last record there are only
    # events that make no record (MariaDB writes its BINLOG_CHECKPOINT after a flush, when it
    # likes), never a transaction.
    last_file, last_end = full[-1]["file"], full[-1]["next_pos"]
    assert last_file == workload.end[0] and last_end <= workload.end[1]
    tail = [
        kind
        for _, pos, kind, *_ in workload.db.query(f"SHOW BINLOG EVENTS IN '{last_file}'")
        if last_end <= pos < workload.end[1]
    ]
    assert set(tail) <= {"Binlog_checkpoint", "Gtid_list"}, tail


def test_start_in_the_middle(workload: Workload, full: list[dict[str, Any]]) -> None:
    gtids = [i for i, r in enumerate(full) if r["type"] == "GTID"]
    i = gtids[len(gtids) // 2]
    rec = full[i]
    got = jsonl(workload.dump("--start", f"{rec['file']}:{rec['pos']}", "--stop-at-end", "--format", "jsonl"))
    assert got == full[i:]


def test_gtid_resume(workload: Workload, full: list[dict[str, Any]]) -> None:
    gtids = [i for i, r in enumerate(full) if r["type"] == "GTID"]
    i = gtids[len(gtids) // 3]
    got = jsonl(workload.dump("--gtid", full[i]["gtid"], "--stop-at-end", "--format", "jsonl"))
    nxt = next(j for j in gtids if j > i)
    assert got == full[nxt:]


def test_timestamp_start(workload: Workload, full: list[dict[str, Any]]) -> None:
    got = jsonl(
        workload.dump("--timestamp", str(workload.timestamp_ms), "--stop-at-end", "--format", "jsonl")
    )
    first = next(i for i, r in enumerate(full) if r["file"] == workload.batch2_file)
    assert got == full[first:]
    assert got[0]["ts"] * 1000 >= workload.timestamp_ms


def test_filter(workload: Workload, full: list[dict[str, Any]]) -> None:
    f, p = workload.start
    got = jsonl(
        workload.dump(
            "--start", f"{f}:{p}", "--stop-at-end", "--format", "jsonl", "--filter", rf"{SCHEMA}\.{T2}"
        )
    )
    tables = {r["table"] for r in got if r["type"] in ROW_TYPES}
    assert tables == {T2}
    assert [r for r in got if r["type"] in ROW_TYPES] == [
        r for r in full if r["type"] in ROW_TYPES and r["table"] == T2
    ]
    # Transaction markers stay.
    assert sum(r["type"] == "COMMIT" for r in got) == sum(r["type"] == "COMMIT" for r in full)


def test_text_format(workload: Workload) -> None:
    f, p = workload.start
    out = workload.dump("--start", f"{f}:{p}", "--stop-at-end")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "BEGIN ----> Thread id: 0" in lines
    assert any(f"name[{SCHEMA},{T1}] , eventType : INSERT" in line for line in lines)
    # Names and types from the schema history, though the binlog has MINIMAL metadata; values and
    # types as a Canal client gets them (the column type of SHOW CREATE TABLE, ENUM's index).
    assert "s : name-100 type=varchar(40) update=true" in lines
    assert "u : 4294967195 type=int(10) unsigned update=true" in lines
    assert "e : 2 type=enum('a','b','c') update=true" in lines


def test_stop_at_end_from_the_end_is_empty(workload: Workload) -> None:
    out = workload.dump("--stop-at-end", "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""


def test_errors_are_one_line(workload: Workload) -> None:
    out = workload.dump("--start", "no-such-file.000001:4", "--stop-at-end")
    assert out.returncode != 0
    assert out.stderr.startswith("pycanal: error: ") and len(out.stderr.strip().splitlines()) == 1
    out = run("dump", "--source", "127.0.0.1:1", "--user", "x", "--stop-at-end")
    assert out.returncode != 0
    assert out.stderr.startswith("pycanal: error: ") and len(out.stderr.strip().splitlines()) == 1
    out = workload.dump("--start", "bad", "--stop-at-end")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
