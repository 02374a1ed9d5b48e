"""``apply_changes``: change log and current-state Delta tables, exactly once, against a real MariaDB.

Change rows come from the private MariaDB's binlog (``EventRows``); the target is read back with
DuckDB (from delta-rs's live file list) and compared value by value with a ``SELECT`` of the
source. Covered: every column type of the seeded all-types workload, MERGE semantics (last change
per key, key changes, deletes), replaying micro-batches (whole, and after a crash in the middle of
one), DDL evolution, and clear errors. The last test runs the same path through Spark: the
``binlog`` source, ``apply_changes`` on a DataFrame and Spark's Delta reading the result.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import struct
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

import workload
from pycanal.spark.apply import ApplyError, ChangeApplier, applied_batch_ids, apply_changes
from pycanal.spark.changelog import ChangeLog
from pycanal.spark.check import log_difference, normalize
from pycanal.spark.current import table_path
from pycanal.spark.current_state import APP_ID
from pycanal.spark.delta.tablestate import read_rows, read_table
from pycanal.spark.rows import ChangeRow, RowPosition
from pycanal.testing import PrivateMariaDB
from spark_fixtures import _session, arrow_rows, capture, spark  # noqa: F401

SEED = 20261121


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def duck() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


def current_rows(target: Path, db: str, table: str, order: str = "id") -> tuple[list[str], list[tuple]]:
    """The table's columns and rows as DuckDB sees delta-rs' read of it (its deletion vectors
    applied: the files alone would hold the rows they hide), ordered by ``order``."""
    path = table_path(target, db, table)
    # pycanal's reader of the last checkpoint and the entries after it reads what delta-rs reads
    ours, theirs = read_table(path), read_rows(DeltaTable(str(path)))
    assert ours.schema == theirs.schema
    assert sorted(map(repr, ours.to_pylist())) == sorted(map(repr, theirs.to_pylist()))
    if not theirs.num_rows:
        return [], []
    con = duck()
    con.register("current_table", theirs)
    rel = con.sql(f"SELECT * FROM current_table ORDER BY {order}")
    return rel.columns, rel.fetchall()


def delta_state(target: Path) -> dict[str, Any]:
    """Everything a replay must leave alone: Delta versions and files, change-log files and markers."""
    state: dict[str, Any] = {}
    for log in sorted((target / "current").glob("*/*/_delta_log")):
        t = DeltaTable(str(log.parent))
        state[str(log.parent)] = (t.version(), sorted(t.file_uris()), t.transaction_version(APP_ID))
    for path in sorted((target / "changelog").rglob("*")):
        if path.is_file():
            state[str(path)] = (path.stat().st_mtime_ns, path.stat().st_size)
    return state


# --------------------------------------------------------------------------- the all-types workload
def _time_text(v: dt.timedelta, fsp: int) -> str:
    micro = (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
    sign = "-" if micro < 0 else ""
    secs, micro = divmod(abs(micro), 1_000_000)
    text = f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    return text + f".{micro:06d}"[: fsp + 1] if fsp else text


def expected(col: workload.Column, v: Any) -> Any:
    """A SELECT value (PyMySQL, session time zone UTC) as the current-state table must hold it."""
    if v is None:
        return None
    k = col.kind
    if k == "int":
        return Decimal(v) if col.bits == 64 and col.unsigned else v
    if k == "decimal":
        return v if col.precision <= 38 else f"{v:f}"
    if k == "float":  # selected as DOUBLE: the exact float32 value
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if k == "bit":
        n = int.from_bytes(v, "big")
        return Decimal(n) if col.bits == 64 else n
    if k in ("date", "datetime", "timestamp") and isinstance(v, str):
        return None  # a zero date, stored as NULL (zero_dates="null")
    if k == "timestamp":
        return v.replace(tzinfo=dt.UTC)
    if k == "time":
        return _time_text(v, col.fsp)
    if k == "set":
        return v.split(",") if v else []
    if k == "inet6":
        return socket.inet_pton(socket.AF_INET6, v)
    if k == "uuid":
        return uuid.UUID(v).bytes
    return v


def same(a: Any, b: Any) -> bool:
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    return type(a) is type(b) and a == b


def assert_same_as_source(server: PrivateMariaDB, target: Path, db: str, spec: workload.TableSpec) -> int:
    names, got = current_rows(target, db, spec.name)
    assert names == ["id"] + [c.name for c in spec.columns]
    # Spark's Delta, the reader Spark users have, reads the same rows
    by_spark = _session().read.format("delta").load(str(table_path(target, db, spec.name))).toArrow()
    assert by_spark.column_names == names
    assert sorted(tuple(map(normalize, r.values())) for r in by_spark.to_pylist()) == sorted(
        tuple(map(normalize, r)) for r in got
    )
    select = ", ".join(
        ["id"] + [f"CAST(`{c.name}` AS DOUBLE)" if c.kind == "float" else f"`{c.name}`" for c in spec.columns]
    )
    want = server.query(f"SELECT {select} FROM `{db}`.`{spec.name}` ORDER BY id")
    assert [r[0] for r in got] == [r[0] for r in want]
    problems = []
    for g, w in zip(got, want, strict=True):
        for col, gv, wv in zip(spec.columns, g[1:], w[1:], strict=True):
            if not same(gv, expected(col, wv)):
                problems.append(
                    f"id={g[0]} `{col.name}` {col.sql}: target {gv!r:.80} source {expected(col, wv)!r:.80}"
                )
    assert not problems, "\n".join(problems[:20])
    return len(got)


@pytest.fixture(scope="module")
def all_types(mariadb: PrivateMariaDB) -> tuple[str, list[ChangeRow]]:
    db = unique("spark_apply")
    mariadb.execute(f"CREATE DATABASE `{db}`")

    def run() -> None:
        with mariadb.root_connection(db) as conn:
            with conn.cursor() as cur:
                cur.execute(workload.ALL_TYPES.create_sql(db))
            workload.run(conn, workload.generate(workload.ALL_TYPES, db, SEED, ops=150))

    return db, capture(mariadb, run).rows(f"{db}\\..*")


def apply_in_batches(target: Path, rows: list[ChangeRow], cuts: int, **options: Any) -> ChangeApplier:
    table = arrow_rows(rows)
    applier = ChangeApplier(target, **options)
    bounds = [len(rows) * k // cuts for k in range(cuts + 1)]
    for batch_id, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        applier(table.slice(lo, hi - lo), batch_id)
    return applier


def test_all_types_target_equals_source(mariadb: PrivateMariaDB, all_types: tuple, tmp_path: Path) -> None:
    db, rows = all_types
    apply_in_batches(tmp_path, rows, 3, zero_dates="null")
    assert assert_same_as_source(mariadb, tmp_path, db, workload.ALL_TYPES) > 40

    files = DeltaTable(str(table_path(tmp_path, db, "t_all_types"))).file_uris()
    types = {r[0]: r[1] for r in duck().sql(f"DESCRIBE SELECT * FROM read_parquet({files!r})").fetchall()}
    assert {k: types[k] for k in ("ti", "tiu", "iu", "biu", "dec12_4u", "dec65_30", "fl", "b17", "b64", "yr")} == {
        "ti": "TINYINT", "tiu": "SMALLINT", "iu": "BIGINT", "biu": "DECIMAL(20,0)", "dec12_4u": "DECIMAL(12,4)",
        "dec65_30": "VARCHAR", "fl": "FLOAT", "b17": "BIGINT", "b64": "DECIMAL(20,0)", "yr": "SMALLINT",
    }  # fmt: skip
    assert {k: types[k] for k in ("dt", "dtm3", "ts6", "tm6", "en", "st", "js", "bl", "geo", "ip")} == {
        "dt": "DATE", "dtm3": "TIMESTAMP", "ts6": "TIMESTAMP WITH TIME ZONE", "tm6": "VARCHAR", "en": "VARCHAR",
        "st": "VARCHAR[]", "js": "VARCHAR", "bl": "BLOB", "geo": "BLOB", "ip": "BLOB",
    }  # fmt: skip

    # The change log holds every row once, with the batch it came in.
    log = (
        duck()
        .execute(
            f"SELECT count(*), count(DISTINCT (position.file, position.offset, position.row)), min(batch_id), max(batch_id) "
            f"FROM read_parquet({change_log_files(tmp_path)!r})"
        )
        .fetchone()
    )
    assert log == (len(rows), len(rows), 0, 2)


def test_zero_dates_are_an_error_by_default(all_types: tuple, tmp_path: Path) -> None:
    _, rows = all_types
    with pytest.raises(
        ApplyError,
        match=r"t_all_types \(at mysql-bin\.\d+:\d+\): column `(dt|dtm\d|ts\d)` \(\w+(\(\d\))?\) holds the zero date '.*zero_dates='null'",
    ):
        apply_in_batches(tmp_path, rows, 1)


def test_replaying_batches_changes_nothing(all_types: tuple, tmp_path: Path) -> None:
    db, rows = all_types
    table = arrow_rows(rows)
    apply_in_batches(tmp_path, rows, 3, zero_dates="null")
    before = delta_state(tmp_path)
    cut = len(rows) // 3
    applier = ChangeApplier(tmp_path, zero_dates="null")  # as after a restart
    applier(table.slice(cut, cut), 1)
    apply_changes(table.slice(0, cut), 0, tmp_path, zero_dates="null")
    assert delta_state(tmp_path) == before
    assert (
        DeltaTable(str(table_path(tmp_path, db, "t_all_types"))).transaction_version(APP_ID) // 1_000_000 == 2
    )


def test_crash_inside_a_batch_then_replay(
    all_types: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the change-log files and some steps: the replay completes the batch and the
    result is the same as an uninterrupted run (no duplicate in the change log, no lost change)."""
    db, rows = all_types
    table = arrow_rows(rows)
    clean = tmp_path / "clean"
    apply_in_batches(clean, rows, 2, zero_dates="null")

    crashed = tmp_path / "crashed"
    half = len(rows) // 2
    ChangeApplier(crashed, zero_dates="null")(table.slice(0, half), 0)
    real_journal = ChangeApplier._journal

    def crash_after_first_step(self: ChangeApplier, batch_id: int, step: int, first: int) -> None:
        real_journal(self, batch_id, step, first)
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(ChangeApplier, "_journal", crash_after_first_step)
    with pytest.raises(KeyboardInterrupt):
        ChangeApplier(crashed, zero_dates="null")(table.slice(half), 1)
    monkeypatch.undo()
    # The change log has the batch (Spark may commit it now); the current state does not yet.
    assert ChangeLog(crashed).committed(1)
    assert applied_batch_ids(crashed) == [0]
    ChangeApplier(crashed, zero_dates="null")(table.slice(half), 1)  # caught up, then a no-op
    assert applied_batch_ids(crashed) == [0, 1]

    assert current_rows(crashed, db, "t_all_types") == current_rows(clean, db, "t_all_types")
    count = "SELECT count(*), count(DISTINCT (position.file, position.offset, position.row)) FROM read_parquet({})"
    assert duck().execute(count.format(change_log_files(crashed))).fetchone() == (len(rows), len(rows))


def test_background_apply_equals_inline_and_recovers_after_a_crash(
    all_types: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``background=True``: the current state of batch N is applied while batch N+1 is read. The
    result equals the inline one; a process dying while a background apply runs (after the
    change log has the batch and Spark has committed it) loses nothing: the next applier catches
    up from the change log before its first batch."""
    db, rows = all_types
    table = arrow_rows(rows)
    clean = tmp_path / "clean"
    apply_in_batches(clean, rows, 3, zero_dates="null")

    smooth = tmp_path / "background"
    apply_in_batches(smooth, rows, 3, zero_dates="null", background=True).wait()
    assert current_rows(smooth, db, "t_all_types") == current_rows(clean, db, "t_all_types")
    assert applied_batch_ids(smooth) == [0, 1, 2]

    crashed = tmp_path / "crashed"
    cut = len(rows) // 3
    applier = ChangeApplier(crashed, zero_dates="null", background=True)
    applier(table.slice(0, cut), 0)
    real_journal = ChangeApplier._journal

    def die_in_batch_1(self: ChangeApplier, batch_id: int, step: int, first: int) -> None:
        real_journal(self, batch_id, step, first)
        if batch_id == 1:
            raise KeyboardInterrupt("simulated process death")

    monkeypatch.setattr(ChangeApplier, "_journal", die_in_batch_1)
    applier(table.slice(cut, cut), 1)  # returns once batch 1 is in the change log
    with pytest.raises(KeyboardInterrupt):
        applier.wait()
    monkeypatch.undo()
    assert ChangeLog(crashed).batches(-1) == [0, 1] and applied_batch_ids(crashed) == [0]
    restarted = ChangeApplier(crashed, zero_dates="null", background=True)
    restarted(table.slice(2 * cut), 2)  # Spark goes on with batch 2: batch 1 is caught up first
    restarted.wait()
    assert applied_batch_ids(crashed) == [0, 1, 2]
    assert current_rows(crashed, db, "t_all_types") == current_rows(clean, db, "t_all_types")
    count = "SELECT count(*), count(DISTINCT (position.file, position.offset, position.row)) FROM read_parquet({})"
    assert duck().execute(count.format(change_log_files(crashed))).fetchone() == (len(rows), len(rows))


def test_a_background_error_fails_the_next_batch(tmp_path: Path) -> None:
    """The error of batch N's background apply is raised by the next call once it is known, before
    that call's batch is committed; a new applier tries batch N again."""
    unknown = [row("INSERT", 100, None, item(b"a", 1, "x"))]
    applier = ChangeApplier(tmp_path, background=True)
    applier(arrow_rows(unknown), 0)
    settle(applier)
    with pytest.raises(ApplyError, match=r"rows of shop\.item \(first at mysql-bin\.000007:100\)"):
        applier(arrow_rows([row("INSERT", 200, None, item(b"b", 2, "y"))]), 1)
    assert ChangeLog(tmp_path).batches(-1) == [0] and applied_batch_ids(tmp_path) == []
    with pytest.raises(ApplyError, match="the table is not in the schema model"):
        ChangeApplier(tmp_path, background=True)(arrow_rows(unknown), 0)


def settle(applier: ChangeApplier) -> None:
    """Wait until the background apply loop has ended (without taking its error)."""
    deadline = time.monotonic() + 30
    while applier._pending is not None:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def hold_applies(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[list[int]]]:
    """Background applies wait for the event; the batch ids of each apply are recorded."""
    release, applies = threading.Event(), []
    real_apply = ChangeApplier._apply

    def held_apply(self: ChangeApplier, tables: list[pa.Table], ids: list[int]) -> None:
        assert release.wait(30)
        applies.append(ids)
        real_apply(self, tables, ids)

    monkeypatch.setattr(ChangeApplier, "_apply", held_apply)
    return release, applies


def test_batches_committed_during_an_apply_are_applied_together(
    all_types: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While batch 0's current state is applied, batches 1-4 go into the change log (Spark is not
    held back) and then into the current state as one apply; the result equals the inline one,
    and every batch has its applied record."""
    db, rows = all_types
    clean = tmp_path / "clean"
    apply_in_batches(clean, rows, 5, zero_dates="null")
    release, applies = hold_applies(monkeypatch)
    queued = tmp_path / "queued"
    applier = apply_in_batches(queued, rows, 5, zero_dates="null", background=True)
    assert ChangeLog(queued).batches(-1) == [0, 1, 2, 3, 4] and applied_batch_ids(queued) == []
    release.set()
    applier.wait()
    assert applies == [[0], [1, 2, 3, 4]]
    assert applied_batch_ids(queued) == [0, 1, 2, 3, 4]
    assert current_rows(queued, db, "t_all_types") == current_rows(clean, db, "t_all_types")


def test_a_full_queue_holds_the_next_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``max_queued`` committed batches wait for a running apply: the next call waits."""
    release, applies = hold_applies(monkeypatch)
    applier = ChangeApplier(tmp_path, schema_ddl=SHOP, background=True, max_queued=2)
    for b in range(3):  # batch 0 is being applied, 1 and 2 wait
        applier(arrow_rows([row("INSERT", 100 + b, None, item(b"a", b, "x"))]), b)
    third = threading.Thread(
        target=applier, args=(arrow_rows([row("INSERT", 200, None, item(b"b", 1, "y"))]), 3)
    )
    third.start()
    third.join(0.5)
    assert third.is_alive() and ChangeLog(tmp_path).batches(-1) == [0, 1, 2]
    release.set()
    third.join(30)
    applier.wait()
    assert ChangeLog(tmp_path).batches(-1) == [0, 1, 2, 3] and applied_batch_ids(tmp_path) == [0, 1, 2, 3]
    assert applies[0] == [0] and sum(applies, []) == [0, 1, 2, 3]


def test_apply_share_spaces_rounds_and_wait_cuts_the_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``apply_share``: after a round of A seconds the next starts no sooner than A / share after
    the round's start (batches committed meanwhile are applied together); ``wait()`` starts the
    waiting round at once."""
    real_apply, starts = ChangeApplier._apply, []

    def slow_apply(self: ChangeApplier, tables: list[pa.Table], ids: list[int]) -> None:
        starts.append((time.monotonic(), ids))
        time.sleep(0.3)
        real_apply(self, tables, ids)

    monkeypatch.setattr(ChangeApplier, "_apply", slow_apply)
    applier = ChangeApplier(tmp_path, schema_ddl=SHOP, background=True, apply_share=0.25)
    applier(arrow_rows([row("INSERT", 100, None, item(b"a", 0, "x"))]), 0)
    while not starts:
        time.sleep(0.01)
    for b in (1, 2):  # committed during round 0 and its pause
        applier(arrow_rows([row("INSERT", 100 + b, None, item(b"a", b, "x"))]), b)
    settle(applier)
    assert [ids for _, ids in starts] == [[0], [1, 2]]
    assert starts[1][0] - starts[0][0] >= 0.3 / 0.25  # round 0 took >= 0.3 s
    applier(arrow_rows([row("INSERT", 200, None, item(b"b", 1, "y"))]), 3)
    while len(starts) < 3:
        time.sleep(0.01)
    applier(arrow_rows([row("INSERT", 201, None, item(b"b", 2, "y"))]), 4)
    called = time.monotonic()
    applier.wait()  # round 3's pause is >= 1.2 s; the wait ends it
    assert [ids for _, ids in starts] == [[0], [1, 2], [3], [4]]
    assert starts[3][0] - called < 0.9
    assert applied_batch_ids(tmp_path) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="apply_share"):
        ChangeApplier(tmp_path, apply_share=0)


def test_a_crash_inside_a_joint_apply_is_redone_with_the_same_batches(
    all_types: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process dying after a step of an apply of batches 1-3: the restarted applier applies
    1-3 together again (the journal names them; the same rows make the same steps), then the
    rest; the tables equal an uninterrupted run and the change log has every change once."""
    db, rows = all_types
    table = arrow_rows(rows)
    clean = tmp_path / "clean"
    apply_in_batches(clean, rows, 5, zero_dates="null")
    crashed = tmp_path / "crashed"
    release, applies = hold_applies(monkeypatch)
    real_journal = ChangeApplier._journal
    journaled: list[tuple[int, int, int]] = []

    def die_in_batches_1_3(self: ChangeApplier, batch_id: int, step: int, first: int) -> None:
        real_journal(self, batch_id, step, first)
        journaled.append((first, batch_id, step))
        if batch_id == 3:
            raise KeyboardInterrupt("simulated process death")

    monkeypatch.setattr(ChangeApplier, "_journal", die_in_batches_1_3)
    applier = ChangeApplier(crashed, zero_dates="null", background=True)
    bounds = [len(rows) * k // 5 for k in range(6)]
    for b in range(4):
        applier(table.slice(bounds[b], bounds[b + 1] - bounds[b]), b)
    release.set()
    with pytest.raises(KeyboardInterrupt):
        applier.wait()
    monkeypatch.undo()
    assert applies == [[0], [1, 2, 3]] and journaled[-1][:2] == (1, 3)
    assert ChangeLog(crashed).batches(-1) == [0, 1, 2, 3] and applied_batch_ids(crashed) == [0]
    release2, applies2 = hold_applies(monkeypatch)
    release2.set()
    restarted = ChangeApplier(crashed, zero_dates="null", background=True)
    restarted(table.slice(bounds[4]), 4)
    restarted.wait()
    assert applies2 == [[1, 2, 3], [4]]
    assert applied_batch_ids(crashed) == [0, 1, 2, 3, 4]
    assert current_rows(crashed, db, "t_all_types") == current_rows(clean, db, "t_all_types")
    count = "SELECT count(*), count(DISTINCT (position.file, position.offset, position.row)) FROM read_parquet({})"
    assert duck().execute(count.format(change_log_files(crashed))).fetchone() == (len(rows), len(rows))


def test_an_empty_batch_writes_nothing_and_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty micro-batch (the source's way to get the last batch committed) leaves no marker
    and returns while the previous batch's current state is still being applied; a background
    failure known by then is raised by it."""
    release, _ = hold_applies(monkeypatch)
    applier = ChangeApplier(tmp_path, schema_ddl=SHOP, background=True)
    applier(arrow_rows([row("INSERT", 100, None, item(b"a", 1, "x"))]), 0)
    applier(arrow_rows([]), 1)  # returns with batch 0's current state still held
    assert (
        not release.is_set() and ChangeLog(tmp_path).batches(-1) == [0] and applied_batch_ids(tmp_path) == []
    )
    release.set()
    applier.wait()
    assert applied_batch_ids(tmp_path) == [0] and ChangeLog(tmp_path).batches(-1) == [0]

    failing = ChangeApplier(tmp_path / "failing", background=True)  # no schema: the table is unknown
    failing(arrow_rows([row("INSERT", 100, None, item(b"a", 1, "x"))]), 0)
    settle(failing)
    with pytest.raises(ApplyError, match="the table is not in the schema model"):
        failing(arrow_rows([]), 1)


# --------------------------------------------------------------------------- MERGE semantics
SHOP = "CREATE TABLE shop.item (sku VARBINARY(8), n INT, name VARCHAR(20), PRIMARY KEY (sku, n))"


def row(op: str, offset: int, before: dict | None, after: dict | None) -> ChangeRow:
    image = after if after is not None else before
    assert image is not None
    pk = json.dumps({"sku": image["sku"], "n": image["n"]}, separators=(",", ":"))
    ts = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    dump = lambda d: None if d is None else json.dumps(d, separators=(",", ":"))  # noqa: E731
    return ChangeRow(
        op,
        "shop",
        "item",
        pk,
        dump(before),
        dump(after),
        RowPosition("mysql-bin.000007", offset, 0, None),
        ts,
        None,
        None,
    )


def item(sku: bytes, n: int, name: str | None) -> dict:
    import base64

    return {"sku": {"base64": base64.b64encode(sku).decode()}, "n": n, "name": name}


def test_merge_keeps_the_last_change_per_key(tmp_path: Path) -> None:
    a1, a2, b1, c1 = item(b"a", 1, "a1"), item(b"a", 2, "a2"), item(b"b", 1, "b1"), item(b"c", 1, "c1")
    batch0 = [row("INSERT", 100, None, a1), row("INSERT", 110, None, b1), row("INSERT", 120, None, c1)]
    batch1 = [
        row("UPDATE", 300, a1, a2),  # key change: a/1 deleted, a/2 inserted
        row("INSERT", 310, None, item(b"a", 1, "again")),  # the old key comes back
        row("UPDATE", 320, b1, item(b"b", 1, "b-new")),
        row("DELETE", 330, item(b"b", 1, "b-new"), None),  # last change of b/1: gone
        row("DELETE", 340, c1, None),
        row("INSERT", 350, None, item(b"c", 1, "c-back")),  # last change of c/1: there
        row("DELETE", 360, item(b"\x00z", 9, None), None),  # a key the target never had
    ]
    # Batch 1 arrives shuffled: binlog order is the position, not the order of the rows.
    shuffled = arrow_rows(batch1).take(pa.array([3, 6, 0, 5, 1, 4, 2]))
    applier = ChangeApplier(tmp_path, schema_ddl=SHOP)
    applier(arrow_rows(batch0), 0)
    applier(shuffled, 1)
    names, got = current_rows(tmp_path, "shop", "item", "sku, n")
    assert names == ["sku", "n", "name"]
    assert got == [(b"a", 1, "again"), (b"a", 2, "a2"), (b"c", 1, "c-back")]
    history = DeltaTable(str(table_path(tmp_path, "shop", "item"))).history()
    assert [h["operation"] for h in history][:2] == ["MERGE", "MERGE"]


def test_the_change_log_is_folded_while_streaming(
    spark: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every ``fold_every`` applied batches the applier folds the change log (in the background
    with ``background=True``): readers get every row once, the tables are untouched, the applied
    records the fold covers are dropped (per-table times kept), and a fold that dies is redone."""
    from pycanal.spark import changelog
    from pycanal.spark.apply import table_times
    from pycanal.spark.maintenance import Maintenance

    batches = [
        [row("INSERT", 100 * b, None, item(b"k%d" % b, 1, "new"))]
        + ([row("UPDATE", 100 * b + 50, item(b"k0", 1, "x"), item(b"k0", 1, f"b{b}"))] if b else [])
        for b in range(10)
    ]
    clean = ChangeApplier(tmp_path / "clean", schema_ddl=SHOP, maintenance=Maintenance(fold_every=0))
    for b, rows in enumerate(batches):
        clean(arrow_rows(rows), b)
    assert ChangeLog(tmp_path / "clean").folded_through() == -1

    upkeep = Maintenance(fold_every=2, fold_fanout=2, retention_hours=0)
    streamed = tmp_path / "streamed"
    applier = ChangeApplier(streamed, schema_ddl=SHOP, background=True, maintenance=upkeep)
    for b, rows in enumerate(batches[:6]):
        applier(arrow_rows(rows), b)
    applier.wait()
    folded = ChangeLog(streamed).folded_through()  # 1 where the first round applied batches 0-1 alone
    assert folded >= 1 and min(applied_batch_ids(streamed)) == folded

    real = changelog._write_parquet

    def die_folding(path: Path, table: pa.Table) -> int:
        if "/part-" in str(path):
            raise KeyboardInterrupt("simulated process death")
        return real(path, table)

    monkeypatch.setattr(changelog, "_write_parquet", die_folding)
    inline = ChangeApplier(streamed, schema_ddl=SHOP, maintenance=upkeep)
    with pytest.raises(KeyboardInterrupt):  # batch 6 or 7 is applied, then its fold dies
        for b in (6, 7):
            inline(arrow_rows(batches[b]), b)
    monkeypatch.undo()
    restarted = ChangeApplier(streamed, schema_ddl=SHOP, maintenance=upkeep)
    for b in range(10):
        restarted(arrow_rows(batches[b]), b)  # Spark replays what it had not committed
    assert ChangeLog(streamed).folded_through() >= 8
    assert current_rows(streamed, "shop", "item", "sku") == current_rows(
        tmp_path / "clean", "shop", "item", "sku"
    )
    count = "SELECT count(*), count(DISTINCT (position.file, position.offset, position.row)) FROM read_parquet({})"
    assert duck().execute(count.format(change_log_files(streamed))).fetchone() == (19, 19)
    assert (
        table_times(streamed)
        == table_times(tmp_path / "clean")
        == {"shop.item": batches[9][0].ts.timestamp()}
    )
    # Spark's Delta reads folded and unfolded files alike, the partition value as a column; a
    # stream of the change log gets every change once (the folds change no data).
    applier = ChangeApplier(streamed, schema_ddl=SHOP, maintenance=Maintenance(fold_every=0))
    applier(arrow_rows([row("DELETE", 5000, item(b"k1", 1, "new"), None)]), 10)
    log = ChangeLog(streamed)
    assert any(p.name.startswith("batch-") for p in log.files()) and log.folded_through() >= 8
    changes = spark.read.format("delta").load(str(log.dir))
    got = changes.groupBy("table_name", "date").count().collect()
    assert [tuple(r) for r in got] == [("shop.item", dt.date(2026, 11, 21), 20)]
    stream = spark.readStream.format("delta").load(str(log.dir)).writeStream.format("memory")
    query = stream.queryName("changes_once").trigger(availableNow=True).start()
    query.awaitTermination()
    assert spark.sql("SELECT count(*), count(DISTINCT position) FROM changes_once").first() == (20, 20)
    assert log_difference(spark, log.dir) is None  # Spark's replay of the log is pycanal's
    history = spark.sql(f"DESCRIBE HISTORY delta.`{log.dir}`").select("operation").collect()
    assert {r[0] for r in history} >= {"STREAMING UPDATE", "OPTIMIZE"}


def change_log_files(target: Path) -> list[str]:
    return [str(p) for p in ChangeLog(target).files()]


# --------------------------------------------------------------------------- DDL
def test_a_ddl_statement_closes_only_the_tables_it_changes(tmp_path: Path) -> None:
    """The open tables (their state read from the log) stay open across a statement on another
    table: reopening hundreds of them after every DDL statement cost seconds of lag."""
    other = SHOP.replace("shop.item", "shop.other")
    applier = ChangeApplier(tmp_path, schema_ddl=f"{SHOP};\n{other};")

    def on(table: str, r: ChangeRow) -> ChangeRow:
        return r._replace(table=table)

    applier(arrow_rows([row("INSERT", 100, None, item(b"a", 1, "x")),
                        on("other", row("INSERT", 110, None, item(b"b", 1, "y")))]), 0)  # fmt: skip
    opened = dict(applier._tables)
    assert len(opened) == 2
    alter = row("INSERT", 200, None, item(b"z", 1, "z"))._replace(
        op="DDL", pk=None, after=None, sql="ALTER TABLE shop.item ADD COLUMN extra INT NOT NULL DEFAULT 5",
        sql_database="shop",
    )  # fmt: skip
    applier(arrow_rows([alter, on("other", row("INSERT", 210, None, item(b"c", 1, "z")))]), 1)
    item_path, other_path = (str(table_path(tmp_path, "shop", t)) for t in ("item", "other"))
    assert applier._tables[other_path] is opened[other_path]
    assert item_path not in applier._tables
    applier(arrow_rows([row("INSERT", 300, None, {**item(b"d", 1, "w"), "extra": 6})]), 2)
    assert applier._tables[item_path] is not opened[item_path]
    assert [f.name for f in DeltaTable(item_path).schema().fields] == ["sku", "n", "name", "extra"]
    assert read_rows(DeltaTable(other_path)).num_rows == 2


def test_ddl_evolves_the_tables(mariadb: PrivateMariaDB, tmp_path: Path) -> None:
    db = unique("spark_ddl")
    mariadb.execute(f"CREATE DATABASE `{db}`")
    statements = [
        "CREATE TABLE p (id INT PRIMARY KEY, a VARCHAR(10), b INT, c DATE)",
        "CREATE TABLE gone (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE bag (x INT, y VARCHAR(5))",
        "INSERT INTO p VALUES (1, 'one', 10, '2024-01-01'), (2, 'two', 20, NULL)",
        "INSERT INTO gone VALUES (1, 1)",
        "INSERT INTO bag VALUES (1, 'a'), (1, 'a')",
        "ALTER TABLE p ADD COLUMN d INT NOT NULL DEFAULT 7, ADD COLUMN e VARCHAR(3) DEFAULT 'x''y' AFTER id",
        "ALTER TABLE p DROP COLUMN b, RENAME COLUMN a TO name, MODIFY c DATETIME",
        "INSERT INTO p (id, name) VALUES (3, 'three')",
        "ALTER TABLE p CHANGE name title VARCHAR(20), ADD COLUMN f TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP",
        "UPDATE p SET title = 'uno' WHERE id = 1",
        "RENAME TABLE p TO q",
        "INSERT INTO q (id, title) VALUES (4, 'four')",
        "TRUNCATE TABLE gone",
        "INSERT INTO gone VALUES (5, 5)",
        "DROP TABLE bag",
        "CREATE TABLE nokey (id INT PRIMARY KEY)",
        "ALTER TABLE nokey DROP PRIMARY KEY",
        "CREATE TABLE again (id INT PRIMARY KEY, v INT)",
        "INSERT INTO again VALUES (1, 1)",
        "DROP TABLE again",
        "CREATE TABLE again (k VARCHAR(4) PRIMARY KEY)",
        "INSERT INTO again VALUES ('new')",
        f"CREATE DATABASE `{db}_x`",
        f"CREATE TABLE `{db}_x`.t (id INT PRIMARY KEY)",
        f"INSERT INTO `{db}_x`.t VALUES (1)",
        f"DROP DATABASE `{db}_x`",
    ]

    def run() -> None:
        with mariadb.root_connection(db) as conn, conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)

    rows = capture(mariadb, run).rows(f"{db}(_x)?\\..*")
    apply_in_batches(tmp_path, rows, 4)

    names, got = current_rows(tmp_path, db, "q")
    assert names == ["id", "e", "title", "c", "d", "f"]
    source = mariadb.query(f"SELECT id, e, title, c, d, f FROM `{db}`.q ORDER BY id")
    assert [r[:5] for r in got] == [r[:5] for r in source]
    # f's DEFAULT CURRENT_TIMESTAMP is known to the server only: rows that existed when it was added
    # are NULL (with a warning), rows written after carry it in their row images.
    assert [r[5] for r in got] == [
        source[0][5].replace(tzinfo=dt.UTC),
        None,
        None,
        source[3][5].replace(tzinfo=dt.UTC),
    ]
    warnings = [
        w
        for p in sorted((tmp_path / "_pycanal" / "applied").iterdir())
        for w in json.loads(p.read_text())["warnings"]
    ]
    assert any("current_timestamp()" in w and "existing rows get NULL" in w for w in warnings), warnings
    assert current_rows(tmp_path, db, "gone") == (["id", "v"], [(5, 5)])
    assert not table_path(tmp_path, db, "p").exists() and not table_path(tmp_path, db, "bag").exists()
    assert not table_path(tmp_path, db, "nokey").exists()  # lost its key: retired
    retired = sorted(
        p.relative_to(tmp_path / "_pycanal" / "retired").parent
        for p in (tmp_path / "_pycanal" / "retired").glob("*/*/*")
    )
    assert retired == [Path(db, "again"), Path(db, "nokey"), Path(f"{db}_x", "t")]
    assert current_rows(tmp_path, db, "again", "k") == (
        ["k"],
        [("new",)],
    )  # the new table, not the dropped one
    assert not (tmp_path / "current" / f"{db}_x").exists() or not any(
        (tmp_path / "current" / f"{db}_x").iterdir()
    )

    log = (
        duck()
        .sql(
            f"SELECT op, \"table\", sql FROM read_parquet({change_log_files(tmp_path)!r}) WHERE op = 'DDL' "
            "ORDER BY position.file, position.offset, position.row"
        )
        .fetchall()
    )
    assert [(t, s.split()[0]) for _, t, s in log] == [
        ("p", "CREATE"), ("gone", "CREATE"), ("bag", "CREATE"), ("p", "ALTER"), ("p", "ALTER"), ("p", "ALTER"),
        ("p", "RENAME"), ("q", "RENAME"), ("gone", "TRUNCATE"), ("bag", "DROP"), ("nokey", "CREATE"), ("nokey", "ALTER"),
        ("again", "CREATE"), ("again", "DROP"), ("again", "CREATE"), (None, "CREATE"), ("t", "CREATE"), (None, "DROP"),
    ]  # fmt: skip
    bag = (
        duck()
        .execute(f"SELECT count(*) FROM read_parquet({change_log_files(tmp_path)!r}) WHERE \"table\" = 'bag'")
        .fetchone()
    )
    assert bag == (4,)  # CREATE, two INSERTs, DROP; never a current-state table


def test_rows_of_a_table_the_model_does_not_know(tmp_path: Path) -> None:
    rows = [row("INSERT", 100, None, item(b"a", 1, "x"))]
    with pytest.raises(
        ApplyError,
        match=r"rows of shop\.item \(first at mysql-bin\.000007:100\): the table is not in the schema model",
    ):
        ChangeApplier(tmp_path)(arrow_rows(rows), 0)
    # In the change log, not applied: the next start tries it again (and fails the same way).
    assert ChangeLog(tmp_path).batches(-1) == [0] and applied_batch_ids(tmp_path) == []
    with pytest.raises(ApplyError, match="the table is not in the schema model"):
        ChangeApplier(tmp_path)(arrow_rows(rows), 0)


# --------------------------------------------------------------------------- through Spark
def test_executors_write_the_tables_as_the_driver_does(
    spark: Any,  # noqa: F811 - the fixture
    mariadb: PrivateMariaDB,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``apply_on="executors"``: Spark tasks write the tables (the driver's own writes are made
    to fail), through DDL (a table dropped and created again with another key, which an executor
    must not write with what it kept of the old one): the tables equal the driver's; an error in
    a task comes back as the driver's error, with the table and position."""
    from pycanal.spark.current_state import CurrentState

    db = unique("spark_exec")
    mariadb.execute(f"CREATE DATABASE `{db}`")
    statements = [
        "CREATE TABLE p (id INT PRIMARY KEY, a VARCHAR(10), b INT)",
        "CREATE TABLE again (id INT PRIMARY KEY, v INT)",
        *[f"INSERT INTO p VALUES ({i}, 'p{i}', {i})" for i in range(1, 30)],
        *[f"INSERT INTO again VALUES ({i}, {i})" for i in range(1, 30)],
        "UPDATE p SET b = b + 1 WHERE id < 10",
        "ALTER TABLE p ADD COLUMN c INT NOT NULL DEFAULT 7, DROP COLUMN a",
        "UPDATE p SET c = id WHERE id > 20",
        "DELETE FROM again WHERE id > 25",
        "DROP TABLE again",
        "CREATE TABLE again (k VARCHAR(4) PRIMARY KEY, v INT)",
        *[f"INSERT INTO again VALUES ('k{i}', {i})" for i in range(1, 20)],
        "DELETE FROM p WHERE id = 5",
    ]

    def run() -> None:
        with mariadb.root_connection(db) as conn, conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)

    rows = capture(mariadb, run).rows(f"{db}\\..*")
    apply_in_batches(tmp_path / "driver", rows, 5)
    table = arrow_rows(rows)

    def not_here(*args: Any) -> None:
        raise AssertionError("a table written by the driver")

    monkeypatch.setattr(CurrentState, "_merge", not_here)
    applier = ChangeApplier(tmp_path / "exec", apply_on="executors", background=True)
    bounds = [len(rows) * k // 5 for k in range(6)]
    for batch_id, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        applier(spark.createDataFrame(table.slice(lo, hi - lo)), batch_id)
    applier.wait()
    for name, key in (("p", "id"), ("again", "k")):
        assert current_rows(tmp_path / "exec", db, name, key) == current_rows(
            tmp_path / "driver", db, name, key
        )
    assert current_rows(tmp_path / "exec", db, "p")[0] == ["id", "b", "c"]

    bad = ChangeApplier(tmp_path / "bad", schema_ddl=SHOP, apply_on="executors")
    image = {k: v for k, v in item(b"a", 1, "x").items() if k != "name"}  # binlog_row_image=MINIMAL
    with pytest.raises(
        ApplyError, match=r"shop\.item at mysql-bin\.000007:100: the after image has 2 of the 3"
    ):
        bad(spark.createDataFrame(arrow_rows([row("INSERT", 100, None, image)])), 0)


def test_binlog_source_into_apply_changes_read_by_spark(
    spark: Any,  # noqa: F811 - the fixture
    mariadb: PrivateMariaDB,
    tmp_path: Path,
) -> None:
    db = unique("spark_e2e")
    mariadb.execute(f"CREATE DATABASE `{db}`")
    spec = workload.TableSpec(
        "mixed",
        tuple(
            c
            for c in workload.ALL_TYPES.columns
            if c.name in ("biu", "dec20_5", "dtm6", "ts3", "vc_u8", "bl", "st", "yr")
        ),
    )

    def run() -> None:
        with mariadb.root_connection(db) as conn:
            with conn.cursor() as cur:
                cur.execute(spec.create_sql(db))
            workload.run(conn, workload.generate(spec, db, SEED, ops=80))

    binlog = capture(mariadb, run)
    df = spark.read.format("binlog").option("tables", f"{db}\\..*").load([str(p) for p in binlog.files])
    apply_changes(df, 0, tmp_path, zero_dates="null")
    assert_same_as_source(mariadb, tmp_path, db, spec)

    current = spark.read.format("delta").load(str(table_path(tmp_path, db, "mixed")))
    assert [f.dataType.simpleString() for f in current.schema.fields] == [
        "int", "decimal(20,0)", "decimal(20,5)", "smallint", "timestamp_ntz", "timestamp", "string", "binary", "array<string>",
    ]  # fmt: skip
    # Spark gives TIMESTAMP values as naive local datetimes: compare instants.
    by_spark = sorted(
        r[:5] + (r[5] and r[5].astimezone(dt.UTC),) + r[6:] for r in map(tuple, current.collect())
    )
    _, by_duckdb = current_rows(tmp_path, db, "mixed")
    assert by_spark == sorted(by_duckdb)
    changes = spark.read.format("delta").load(str(tmp_path / "changelog")).where(f"table_name = '{db}.mixed'")
    assert changes.count() == len(binlog.rows(f"{db}\\..*"))


def test_snapshot_read_rows_merge_as_upserts_and_the_replayed_stream_converges(tmp_path: Path) -> None:
    """READ rows (a snapshot chunk at binlog position 500) upsert like INSERTs, after the stream
    rows before them in a batch; the stream's changes up to 500 replayed in a later batch end on
    the snapshot's rows, and the change log keeps op READ."""
    a, b = item(b"a", 1, "a-old"), item(b"b", 1, "b-old")
    batch0 = [row("INSERT", 100, None, a), row("INSERT", 110, None, b)]
    batch1 = [
        row("READ", 500, None, item(b"a", 1, "a-500")),
        row("READ", 500, None, item(b"d", 1, "d-500")),  # a row the stream never showed
        row("UPDATE", 200, b, item(b"b", 1, "b-200")),  # before the chunk's position
    ]
    batch2 = [  # the stream catching up to the chunk's position and past it
        row("UPDATE", 300, a, item(b"a", 1, "a-300")),
        row("UPDATE", 400, item(b"a", 1, "a-300"), item(b"a", 1, "a-500")),
        row("INSERT", 450, None, item(b"d", 1, "d-500")),
        row("DELETE", 600, item(b"b", 1, "b-200"), None),
    ]
    applier = ChangeApplier(tmp_path, schema_ddl=SHOP)
    applier(arrow_rows(batch0), 0)
    applier(arrow_rows(batch1), 1)
    assert current_rows(tmp_path, "shop", "item", "sku, n")[1] == [
        (b"a", 1, "a-500"), (b"b", 1, "b-200"), (b"d", 1, "d-500"),
    ]  # fmt: skip
    applier(arrow_rows(batch2), 2)
    assert current_rows(tmp_path, "shop", "item", "sku, n")[1] == [(b"a", 1, "a-500"), (b"d", 1, "d-500")]
    ops = sorted(r["op"] for r in read_change_log_rows(tmp_path))
    assert ops.count("READ") == 2 and len(ops) == 9


def read_change_log_rows(target: Path) -> list[dict]:
    return ChangeLog(target).read().to_pylist()


def test_a_snapshot_chunk_read_after_a_ddl_the_stream_has_not_brought_yet(tmp_path: Path) -> None:
    """A chunk read after ALTER TABLE ADD COLUMN (its rows have the column) applied while the
    model has not seen the ALTER: its rows as the model has them; the ALTER then adds the column
    with its default, which the source gave those rows too. And the other way (DROP COLUMN)."""
    applier = ChangeApplier(tmp_path, schema_ddl=SHOP)
    applier(arrow_rows([row("READ", 500, None, {**item(b"a", 1, "x"), "extra": 5})]), 0)
    assert current_rows(tmp_path, "shop", "item", "sku, n")[1] == [(b"a", 1, "x")]
    alter = row("INSERT", 400, None, item(b"z", 1, "z"))._replace(
        op="DDL", pk=None, after=None, sql="ALTER TABLE shop.item ADD COLUMN extra INT NOT NULL DEFAULT 5",
        sql_database="shop",
    )  # fmt: skip
    applier(arrow_rows([alter]), 1)
    assert current_rows(tmp_path, "shop", "item", "sku, n") == (
        ["sku", "n", "name", "extra"],
        [(b"a", 1, "x", 5)],
    )
    image = item(b"b", 1, "y")
    del image["name"]  # read after a DROP COLUMN name the stream has not brought yet
    applier(arrow_rows([row("READ", 900, None, {**image, "extra": 6})]), 2)
    assert current_rows(tmp_path, "shop", "item", "sku, n")[1] == [(b"a", 1, "x", 5), (b"b", 1, None, 6)]


def test_all_types_from_a_snapshot_equal_the_source(
    mariadb: PrivateMariaDB, all_types: tuple, tmp_path: Path
) -> None:
    """The all-types table read by the snapshot (its CREATE TABLE from SHOW CREATE TABLE, then
    chunks of READ rows) instead of its binlog: the lake holds the source's values."""
    from pycanal.snapshot import describe, plan_chunks, read_chunk, read_schema
    from pycanal.snapshot.reader import connect
    from pycanal.spark.snapshot_rows import SnapshotRows

    db, _ = all_types
    p = mariadb.repl_params()
    with connect(p["host"], p["port"], p["user"], p["password"]) as conn:
        reads: list[Any] = [read_schema(conn, [(db, "t_all_types")])]
        t = describe(conn, db, "t_all_types")
        reads += [read_chunk(conn, t, c) for c in plan_chunks(conn, t, 13)]
    rows = list(SnapshotRows().rows(reads))
    assert [r.op for r in rows[:2]] == ["DDL", "READ"] and len(reads) > 3
    applier = ChangeApplier(tmp_path, zero_dates="null")
    for batch_id, read in enumerate(reads):  # a micro-batch per partition, as the Spark source has them
        applier(arrow_rows(list(SnapshotRows().rows([read]))), batch_id)
    assert assert_same_as_source(mariadb, tmp_path, db, workload.ALL_TYPES) > 40


@pytest.mark.parametrize("reader", ["pymysql", "connectorx"])
def test_all_types_chunk_files_equal_the_source(
    mariadb: PrivateMariaDB, all_types: tuple, tmp_path: Path, reader: str
) -> None:
    """The all-types table's chunks written as current-state data files where they were read
    (``chunk_files``: integers and texts straight from connectorx's arrays, the other columns from
    the chunk's images): the driver commits them as they are, and the lake holds the source's values."""
    from pycanal.snapshot import describe, plan_chunks, read_chunk, read_schema
    from pycanal.snapshot.reader import Source, connect
    from pycanal.snapshot.window import read_chunk_window
    from pycanal.spark.chunk_files import write_chunk_file
    from pycanal.spark.snapshot_rows import SnapshotRows
    from pycanal.storage import lake_path

    db, _ = all_types
    p = mariadb.repl_params()
    with connect(p["host"], p["port"], p["user"], p["password"]) as conn:
        schema = read_schema(conn, [(db, "t_all_types")])
        t = describe(conn, db, "t_all_types")
        source = Source(p["host"], p["port"], p["user"], p["password"])
        reads = [
            read_chunk(conn, t, c) if reader == "pymysql" else read_chunk_window(conn, source, t, c, 5400)
            for c in plan_chunks(conn, t, 13)
        ]
    create = schema.creates[0][2]
    applier = ChangeApplier(tmp_path, zero_dates="null")
    applier(pa.Table.from_batches(list(SnapshotRows().batches([schema]))), 0)
    named = []
    for batch_id, read in enumerate(reads, 1):
        rows = pa.Table.from_batches(
            list(
                SnapshotRows().batches(
                    [read], chunk_file=lambda r, a: write_chunk_file(lake_path(tmp_path), r, create, a)
                )
            )
        )
        chunk = [
            json.loads(a)
            for o, a in zip(rows["op"].to_pylist(), rows["after"].to_pylist(), strict=True)
            if o == "CHUNK"
        ]
        named += [c["file"]["name"] for c in chunk if "file" in c]
        applier(rows, batch_id)
    assert assert_same_as_source(mariadb, tmp_path, db, workload.ALL_TYPES) > 40
    log = table_path(tmp_path, db, "t_all_types") / "_delta_log"
    added = {
        json.loads(line)["add"]["path"]
        for name in log.listdir() if name.endswith(".json")
        for line in (log / name).read_text().splitlines() if line.startswith('{"add"')
    }  # fmt: skip
    # chunks with zero dates are not typed where they are read (as "error" would); the others are
    assert len(named) >= len(reads) // 2 and set(named) <= added


def test_the_stream_before_a_snapshot_declaration_is_left_to_the_chunks(tmp_path: Path) -> None:
    """The snapshot declares a table with its schema at position 1000 (SHOW CREATE TABLE there);
    the stream still brings older rows (the old schema) and the ALTER that made the new one:
    both are in the snapshot already, so the current state skips them and takes the chunks' rows
    and the stream after 1000."""
    from pycanal.spark.rows import SNAPSHOT_DDL

    def ddl(offset: int, sql: str) -> ChangeRow:
        return row("INSERT", offset, None, item(b"z", 1, "z"))._replace(
            op="DDL", pk=None, after=None, sql=sql, sql_database="shop"
        )

    create = (SNAPSHOT_DDL + "CREATE TABLE IF NOT EXISTS `item` (`sku` varbinary(8) NOT NULL, `n` int(11) NOT NULL, "
              "`name` varchar(20), `extra` int(11) NOT NULL DEFAULT 5, PRIMARY KEY (`sku`, `n`))")  # fmt: skip
    applier = ChangeApplier(tmp_path)
    applier(arrow_rows([ddl(1000, create)]), 0)
    applier(
        arrow_rows([
            row("INSERT", 500, None, item(b"a", 1, "old")),  # the old schema: 3 columns
            ddl(600, "ALTER TABLE item ADD COLUMN extra INT NOT NULL DEFAULT 5"),
            row("READ", 1200, None, {**item(b"a", 1, "read"), "extra": 5}),
            row("INSERT", 1300, None, {**item(b"b", 1, "new"), "extra": 6}),
        ]),
        1,
    )  # fmt: skip
    assert current_rows(tmp_path, "shop", "item", "sku, n") == (
        ["sku", "n", "name", "extra"], [(b"a", 1, "read", 5), (b"b", 1, "new", 6)]
    )  # fmt: skip
    record = json.loads((tmp_path / "_pycanal" / "applied" / f"{1:020d}.json").read_text())
    assert record["warnings"] == [
        "DDL at mysql-bin.000007:600 skipped: the snapshot's schema of shop.item is later"
    ]
    # A new applier (a restarted job) knows the declaration from the saved schema model.
    again = ChangeApplier(tmp_path)
    again(arrow_rows([row("UPDATE", 900, item(b"b", 1, "new"), item(b"b", 1, "older"))]), 2)
    assert current_rows(tmp_path, "shop", "item", "sku, n")[1] == [(b"a", 1, "read", 5), (b"b", 1, "new", 6)]


def all_types_chunks(mariadb: PrivateMariaDB, all_types: tuple) -> tuple[str, Any, list[Any]]:
    """The all-types table's database, its ``read_schema`` and its chunks of 13 rows, read."""
    from pycanal.snapshot import describe, plan_chunks, read_chunk, read_schema
    from pycanal.snapshot.reader import connect

    db, _ = all_types
    p = mariadb.repl_params()
    with connect(p["host"], p["port"], p["user"], p["password"]) as conn:
        schema = read_schema(conn, [(db, "t_all_types")])
        t = describe(conn, db, "t_all_types")
        return db, schema, [read_chunk(conn, t, c) for c in plan_chunks(conn, t, 13)]


def test_staged_snapshot_chunks_apply_as_their_rows(
    mariadb: PrivateMariaDB, all_types: tuple, tmp_path: Path
) -> None:
    """Chunks an executor staged (the source's ``stage``): the batch's STAGED rows stand for the files'
    rows, so the lake and the change log are what the rows themselves give. The files go once their
    batch is committed, leftovers of batches that never committed at the next start, and a missing
    file fails the batch naming it."""
    from pycanal.spark.canal_options import stage_dir
    from pycanal.spark.snapshot_rows import SnapshotRows
    from pycanal.spark.stage import STAGED, stage_rows

    def _stage(stage: Path, r: Any, batches: Any) -> pa.RecordBatch:
        return stage_rows(stage, batches, r.table.schema, r.table.name, RowPosition(r.file, r.pos, 0, None))

    db, schema, reads = all_types_chunks(mariadb, all_types)
    stage = stage_dir(tmp_path)
    (stage / "left-by-a-failed-task.arrow").write_bytes(b"partial")
    applier = ChangeApplier(tmp_path, zero_dates="null")
    applier(pa.Table.from_batches(list(SnapshotRows().batches([schema]))), 0)
    assert stage.listdir() == []  # cleared before the first batch is read

    markers = pa.Table.from_batches([_stage(stage, r, SnapshotRows().batches([r])) for r in reads])
    assert markers["op"].to_pylist() == [STAGED] * len(reads) and len(stage.listdir()) == len(reads)
    applier(markers, 1)
    assert stage.listdir() == []
    assert assert_same_as_source(mariadb, tmp_path, db, workload.ALL_TYPES) > 40
    logged = [r for r in read_change_log_rows(tmp_path) if r["op"] == "READ"]
    assert sorted(r["after"] for r in logged) == sorted(
        r.after for r in SnapshotRows().rows(reads) if r.op == "READ"
    )  # every row once, as the rows themselves

    gone = _stage(stage, reads[0], SnapshotRows().batches([reads[0]]))
    path = gone.column("sql")[0].as_py()
    Path(path).unlink()
    with pytest.raises(RuntimeError, match=f"staged in {path} cannot be read"):
        applier(pa.Table.from_batches([gone]), 2)


def test_chunks_staged_as_change_log_files_are_committed_as_they_are(
    mariadb: PrivateMariaDB, all_types: tuple, tmp_path: Path
) -> None:
    """Chunks an executor wrote as change-log files of their micro-batch (``write_unnamed``): the
    batch's entry adds those files as they are, the lake and the change log are what the rows
    give; a file written for another batch than the one it comes in is written again by the
    driver and deleted; files of a batch that never committed go at the next start."""
    from pycanal.spark.changelog import write_unnamed
    from pycanal.spark.snapshot_rows import SnapshotRows
    from pycanal.spark.stage import staged_row

    def _logged(r: Any, batch: int) -> tuple[pa.RecordBatch, dict]:
        rows = pa.Table.from_batches(list(SnapshotRows().batches([r])))
        log = write_unnamed(tmp_path, rows, batch)
        at = RowPosition(r.file, r.pos, 0, None)
        when = dt.datetime.fromtimestamp(r.seconds, dt.UTC)
        path = changelog.dir / log["path"]
        return staged_row(path, rows.num_rows, r.table.schema, r.table.name, at, when, log), log

    db, schema, reads = all_types_chunks(mariadb, all_types)
    changelog = ChangeLog(tmp_path)
    _, never = _logged(reads[0], 9)  # a batch that never committed
    applier = ChangeApplier(tmp_path, zero_dates="null")
    applier(pa.Table.from_batches(list(SnapshotRows().batches([schema]))), 0)
    assert not (changelog.dir / never["path"]).exists()

    staged = [_logged(r, 1) for r in reads]
    applier(pa.Table.from_batches([m for m, _ in staged]), 1)
    assert applier.changelog_files == {"taken": len(reads), "rewritten": 0}
    live = {a["path"] for a in changelog.state().live.values()}
    assert {log["path"] for _, log in staged} <= live  # committed as they are
    assert assert_same_as_source(mariadb, tmp_path, db, workload.ALL_TYPES) > 40
    logged = [r for r in read_change_log_rows(tmp_path) if r["op"] == "READ"]
    assert sorted(r["after"] for r in logged) == sorted(
        r.after for r in SnapshotRows().rows(reads) if r.op == "READ"
    )  # every row once, as the rows themselves
    assert changelog.read_batch(1).num_rows == sum(len(r.rows) for r in reads) + len(reads)  # and CHUNK rows
    assert changelog.batches(0) == [1]

    marker, log = _logged(reads[1], 7)  # numbered for another batch: the driver writes its rows
    applier(pa.Table.from_batches([marker]), 2)
    assert applier.changelog_files == {"taken": len(reads), "rewritten": 1}
    assert not (changelog.dir / log["path"]).exists()
    again = changelog.read_batch(2)
    assert again.num_rows == len(reads[1].rows) + 1 and set(again["op"].to_pylist()) == {"READ", "CHUNK"}
    assert changelog.batches(0) == [1, 2]


def test_chunks_read_without_their_images_where_their_files_are_taken(
    mariadb: PrivateMariaDB, all_types: tuple, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk's change-log file whose CHUNK row names a current-state file is read without its
    READ rows' images; where the table takes the file nothing else is needed, and where it does
    not (a table without deletion vectors) the batch is applied again as the change log has it.
    Either way the lake is the source's and the change log has every row with its image."""
    import logging

    from pycanal.snapshot import describe, plan_chunks, read_chunk
    from pycanal.snapshot.reader import connect, show_create
    from pycanal.spark.changelog import write_unnamed
    from pycanal.spark.chunk_files import write_chunk_file
    from pycanal.spark.maintenance import Maintenance
    from pycanal.spark.snapshot_rows import SnapshotRows
    from pycanal.spark.stage import expand_staged, staged_row
    from pycanal.storage import lake_path

    db, schema, _ = all_types_chunks(mariadb, all_types)
    mariadb.execute(f"CREATE TABLE IF NOT EXISTS {db}.tick (id INT AUTO_INCREMENT PRIMARY KEY)")
    p = mariadb.repl_params()
    with connect(p["host"], p["port"], p["user"], p["password"]) as conn:
        t = describe(conn, db, "t_all_types")
        with conn.cursor() as cur:
            create = show_create(cur, db, "t_all_types")
        reads = []
        for c in plan_chunks(conn, t, 13):
            mariadb.execute(f"INSERT INTO {db}.tick VALUES ()")  # each chunk at a position of its own
            reads.append(read_chunk(conn, t, c))
    for vectors in (True, False):
        lake = tmp_path / f"vectors-{vectors}"
        changelog = ChangeLog(lake)
        applier = ChangeApplier(lake, zero_dates="null", maintenance=Maintenance(deletion_vectors=vectors))
        applier(pa.Table.from_batches(list(SnapshotRows().batches([schema]))), 0)
        markers = []
        for i, r in enumerate(reads):  # as an executor of batch 1 stages them (snapshot_read)

            def file(read: Any, afters: pa.Array, lake: Path = lake) -> dict | None:
                return write_chunk_file(lake_path(lake), read, create, afters)

            rows = pa.Table.from_batches(list(SnapshotRows().batches([r], chunk_file=file)))
            log = write_unnamed(lake, rows, 1, i)
            log["chunk"] = rows.column("after")[rows.num_rows - 1].as_py()
            when = dt.datetime.fromtimestamp(r.seconds, dt.UTC)
            at = RowPosition(r.file, r.pos, 0, None)
            markers.append(
                staged_row(changelog.dir / log["path"], rows.num_rows, db, "t_all_types", at, when, log)
            )
        lean, _ = expand_staged(pa.Table.from_batches(markers), lambda path, log: True)
        reads_only = lean.filter(pc.equal(lean["op"], "READ"))
        assert reads_only.num_rows > 40 and reads_only["after"].null_count == reads_only.num_rows
        with caplog.at_level(logging.INFO, logger="pycanal.spark.apply"):
            caplog.clear()
            applier(pa.Table.from_batches(markers), 1)
        again = "applying them as the change log has them" in caplog.text
        assert applier.chunk_files["taken"] == (len(reads) if vectors else 0) and again is not vectors
        assert assert_same_as_source(mariadb, lake, db, workload.ALL_TYPES) > 40
        logged = [r for r in read_change_log_rows(lake) if r["op"] == "READ"]
        assert len(logged) == reads_only.num_rows and all(r["after"] for r in logged)


def test_a_snapshot_chunk_deletes_the_rows_of_its_range_the_source_did_not_have(tmp_path: Path) -> None:
    """A chunk's CHUNK row (its key range, after its READ rows at its position) deletes the rows
    of that range the lake has (a drifted table, a stream upsert before the position) and the
    chunk lacks; rows outside the range and keys changed after the position stay."""

    def inv(
        op: str, offset: int, n: int, key: int | None, v: int | None, old: int | None = None
    ) -> ChangeRow:
        image = None if key is None else json.dumps({"id": key, "v": v}, separators=(",", ":"))
        before = None if old is None else json.dumps({"id": old, "v": 0}, separators=(",", ":"))
        if op == "DELETE":
            image, before = None, json.dumps({"id": key, "v": v}, separators=(",", ":"))
        return ChangeRow(
            op, "shop", "inv", None if key is None else json.dumps({"id": key}), before, image,
            RowPosition("mysql-bin.000007", offset, n, None), dt.datetime(2026, 11, 21, tzinfo=dt.UTC), None, None,
        )  # fmt: skip

    def chunk(
        offset: int, n: int, lower: int | None, upper: int | None, *, legacy: bool = False
    ) -> ChangeRow:
        def bound(v: int | None) -> str | list | None:  # a key image; a list in lakes written before those
            return None if v is None else [v] if legacy else json.dumps({"id": v})

        bounds = {"lower": bound(lower), "upper": bound(upper)}
        return inv("CHUNK", offset, n, None, None)._replace(after=json.dumps(bounds))

    applier = ChangeApplier(tmp_path, schema_ddl="CREATE TABLE shop.inv (id INT PRIMARY KEY, v INT)")
    applier(arrow_rows([inv("INSERT", 100 + i, 0, i, i) for i in range(1, 7)]), 0)  # the lake: 1..6
    applier(
        arrow_rows([
            inv("INSERT", 200, 0, 7, 7),  # outside the range
            inv("INSERT", 210, 0, 0, 0),  # inside, gone again before the chunk's position
            inv("READ", 500, 0, 1, 10),
            inv("READ", 500, 1, 3, 30),
            chunk(500, 2, None, 5),  # [-inf, 5): 0, 2 and 4 were not there at 500
        ]),
        1,
    )  # fmt: skip
    assert current_rows(tmp_path, "shop", "inv")[1] == [(1, 10), (3, 30), (5, 5), (6, 6), (7, 7)]
    applier(
        arrow_rows([
            inv("READ", 700, 0, 5, 55),
            chunk(700, 1, 5, None, legacy=True),  # [5, +inf): 6 and 7 were not there at 700
            inv("INSERT", 800, 0, 8, 8),  # after the chunk: stays
            inv("UPDATE", 810, 0, 9, 9, old=5),  # a key change after the chunk
        ]),
        2,
    )  # fmt: skip
    assert current_rows(tmp_path, "shop", "inv")[1] == [(1, 10), (3, 30), (8, 8), (9, 9)]
    logged = [r["op"] for r in read_change_log_rows(tmp_path)]
    assert logged.count("CHUNK") == 2  # in the change log: a replay of it deletes the same rows


def test_a_chunk_applied_with_the_next_micro_batch_keeps_the_keys_its_window_left_out(tmp_path: Path) -> None:
    """A connectorx chunk is its range at H less the keys changed in its window (L, H]; their
    changes come in a later micro-batch, at positions before H. Applied in one round with that
    batch (the background apply's queue, catch_up after a crash), those changes come after the
    chunk's range deletes, as they do in rounds of their own: nothing is lost."""

    def inv(
        op: str, offset: int, n: int, key: int | None, v: int | None, after: str | None = None
    ) -> ChangeRow:
        image = after if key is None else json.dumps({"id": key, "v": v}, separators=(",", ":"))
        return ChangeRow(
            op, "shop", "inv", None if key is None else json.dumps({"id": key}), None, image,
            RowPosition("mysql-bin.000007", offset, n, None), dt.datetime(2026, 11, 21, tzinfo=dt.UTC), None, None,
        )  # fmt: skip

    whole = json.dumps({"lower": None, "upper": None})
    batches = [
        [inv("INSERT", 100, 0, 5, 5)],  # in the lake before the chunk, deleted in its window
        # the chunk at H = 500, read in a window from L = 300: keys 2 and 5 changed in it
        [inv("READ", 500, 0, 1, 1), inv("READ", 500, 1, 3, 3), inv("CHUNK", 500, 2, None, None, whole)],
        [  # the stream after the chunk's micro-batch: the window's changes, then later ones
            inv("INSERT", 400, 0, 2, 2), inv("INSERT", 410, 0, 5, 50),
            inv("UPDATE", 600, 0, 3, 33)._replace(before='{"id":3,"v":3}'), inv("INSERT", 610, 0, 4, 4),
        ],
    ]  # fmt: skip
    ddl = "CREATE TABLE shop.inv (id INT PRIMARY KEY, v INT)"
    expected = [(1, 1), (2, 2), (3, 33), (4, 4), (5, 50)]
    one_by_one = tmp_path / "one-by-one"
    applier = ChangeApplier(one_by_one, schema_ddl=ddl)
    for batch_id, rows in enumerate(batches):
        applier(arrow_rows(rows), batch_id)
    assert current_rows(one_by_one, "shop", "inv")[1] == expected
    together = tmp_path / "together"
    ChangeApplier(together, schema_ddl=ddl)(arrow_rows(batches[0]), 0)
    log = ChangeLog(together)
    for batch_id, rows in enumerate(batches[1:], 1):  # in the change log, not applied: a crash
        log.write(arrow_rows(rows), batch_id)
        log.commit(batch_id)
    again = ChangeApplier(together, schema_ddl=ddl)
    again.catch_up()  # batches 1 and 2 in one round
    assert json.loads((together / "_pycanal" / "applied" / f"{2:020d}.json").read_text())["applied_with"] == [
        1,
        2,
    ]
    assert current_rows(together, "shop", "inv")[1] == expected


def test_a_snapshot_declaration_of_a_table_without_ranged_chunks_empties_it(tmp_path: Path) -> None:
    """A re-snapshot of a table the lake has, whose chunks carry no key range the lake can test
    (a collated text key): the stream's delete before the declaration is skipped like every row
    there, so the declaration empties the table and the chunks bring back what the source has."""
    from pycanal.spark.rows import SNAPSHOT_DDL

    def tag(op: str, offset: int, name: str, n: int | None) -> ChangeRow:
        image = json.dumps({"name": name, "n": n}, separators=(",", ":"))
        return ChangeRow(
            op, "shop", "tag", json.dumps({"name": name}), image if op == "DELETE" else None,
            None if op == "DELETE" else image, RowPosition("mysql-bin.000007", offset, 0, None),
            dt.datetime(2026, 11, 21, tzinfo=dt.UTC), None, None,
        )  # fmt: skip

    create = tag("INSERT", 400, "z", 0)._replace(
        op="DDL", pk=None, after=None, sql_database="shop",
        sql=SNAPSHOT_DDL + "CREATE TABLE IF NOT EXISTS `tag` (`name` varchar(20) NOT NULL, `n` int(11), "
        "PRIMARY KEY (`name`))",
    )  # fmt: skip
    applier = ChangeApplier(
        tmp_path, schema_ddl="CREATE TABLE shop.tag (name VARCHAR(20) PRIMARY KEY, n INT)"
    )
    applier(
        arrow_rows([tag("INSERT", 100, "a", 1), tag("INSERT", 110, "b", 1), tag("INSERT", 120, "c", 1)]), 0
    )
    applier(arrow_rows([create, tag("READ", 500, "a", 2), tag("READ", 500, "c", 1)._replace(
        position=RowPosition("mysql-bin.000007", 500, 1, None))]), 1)  # fmt: skip
    applier(arrow_rows([tag("DELETE", 300, "b", 1)]), 2)  # the stream, behind: before the declaration
    assert current_rows(tmp_path, "shop", "tag", "name")[1] == [("a", 2), ("c", 1)]


def test_a_chunk_range_compares_composite_keys_in_order() -> None:
    from pycanal.spark.arrow import in_range

    a, b = pa.array([1, 1, 2, 2, 3, 0]), pa.array([5, 9, 0, 7, 1, 100])
    assert in_range([a, b], [1, 9], [2, 7]).to_pylist() == [False, True, True, False, False, False]
    assert in_range([a, b], None, [1, 6]).to_pylist() == [True, False, False, False, False, True]
    assert in_range([a, b], [2, 0], None).to_pylist() == [False, False, True, True, True, False]
    assert in_range([a], None, None).to_pylist() == [True] * 6
    big = pa.array([2**64 - 1, 2**63, 5], pa.uint64())  # BIGINT UNSIGNED past int64
    assert in_range([big], [2**63], [2**64 - 1]).to_pylist() == [False, True, False]
