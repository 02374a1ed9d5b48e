"""End to end (issue 4): a conf-dir deployed server in a child process, an embedded client that
consumes with get_without_ack / ack and rollbacks + re-gets; the process is SIGKILLed mid-stream
twice and restarted. Every row arrives at least once, duplicates come only from what was not
acknowledged at the kill, and the cursor in ``meta.dat`` always names a transaction boundary: the
offset of a transaction-ending event (Xid / COMMIT / DDL), Canal's TRANSACTIONEND entry position
(checked with ``SHOW BINLOG EVENTS``).

The client logs every batch it received (``G``, flushed + fsync'ed before the ack) and every ack
(``A``, after the ack and a meta flush). ``meta.flush`` after each ack makes the ack durable at
once; with only the periodic flush (``canal.file.flush.period``) a kill also replays what was
acked since the last flush (still at-least-once, but more duplicates).

What a kill may replay: the received-but-unacked batch, plus the rows after the last transaction
boundary (begin or end entry: a batch's ack position) of the acked stream -- Canal's cursor only
ever moves to a boundary.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb

ROWS = 50_000  # the workload
TABLE = "e2e_rows"
DEST = "e2e"
BATCH = 64  # entries per get (ITEMSIZE)
KILL_AT = (0.3, 0.65)  # fractions of the rows received when each SIGKILL comes
DEADLINE = 120.0

CHILD = r"""
import os, random, sys
from pycanal.meta import ClientIdentity
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.deployer.controller import Deployer

conf, log_path, stop_path, run, batch = sys.argv[1:6]
run, batch = int(run), int(batch)
rng = random.Random(run)
deployer = Deployer(conf).start(scan_thread=False)
server = deployer.server
client = ClientIdentity("@DEST@", 1001, "")
server.subscribe(client)
meta = server.instance("@DEST@").meta_manager
out = open(log_path, "a")

def write(line, sync=False):
    out.write(line + "\n")
    out.flush()
    if sync:
        os.fsync(out.fileno())

def tokens(msg):
    toks = []
    for e in msg.parsed_entries():
        if e.entryType in (pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND):
            toks.append("|")
        elif e.entryType == pb.ROWDATA and e.header.tableName == "@TABLE@":
            change = pb.RowChange.FromString(e.storeValue)
            for row in change.rowDatas:
                toks += [c.value for c in row.afterColumns if c.name == "id"]
    return toks

write(f"S {run}", True)
while True:
    msg = server.get_without_ack(client, batch, timeout=0.2)
    if msg.id == -1:
        if os.path.exists(stop_path):
            break
        continue
    if rng.random() < 0.05:  # roll back, get again: the same entries come first
        server.rollback(client)
        again = server.get_without_ack(client, batch, timeout=0.2)
        ok = len(again.entries) >= len(msg.entries) and again.entries[: len(msg.entries)] == msg.entries
        write(f"R {run} {msg.id} {again.id}" if ok else f"X {run} {msg.id} {again.id}")
        msg = again
    write(f"G {run} {msg.id} " + ",".join(tokens(msg)), True)
    server.ack(client, msg.id)
    meta.flush(["@DEST@"])
    write(f"A {run} {msg.id}")
deployer.stop()
write(f"E {run}", True)
""".replace("@DEST@", DEST).replace("@TABLE@", TABLE)


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=43) as server:
        yield server


def write_conf(root: Path, db: PrivateMariaDB, start: tuple[str, int], data: Path) -> None:
    (root / DEST).mkdir(parents=True)
    (root / "canal.properties").write_text(
        f"canal.destinations = {DEST}\n"
        "canal.conf.dir = .\n"
        f"canal.file.data.dir = {data}\n"
        "canal.file.flush.period = 1000\n"
        "canal.auto.scan = false\n"
        "canal.instance.memory.buffer.size = 4096\n"
        "canal.instance.memory.batch.mode = ITEMSIZE\n"
    )
    (root / DEST / "instance.properties").write_text(
        f"canal.instance.master.journal.name = {start[0]}\n"
        f"canal.instance.master.position = {start[1]}\n"
        f"canal.instance.dbUsername = {db.repl_user}\n"
        f"canal.instance.dbPassword = {db.repl_password}\n"
        f"canal.instance.filter.regex = pycanal\\\\.{TABLE}\n"
        "canal.instance.transaction.size = 512\n"
    )


def write_workload(db: PrivateMariaDB, errors: list[BaseException]) -> None:
    """ROWS rows in transactions of 1..40 rows (some of two statements)."""
    rng = random.Random(4)
    try:
        conn = db.root_connection("pycanal")
        with conn.cursor() as cur:
            i = 0
            while i < ROWS:
                n = min(rng.randint(1, 40), ROWS - i)
                rows = [(i + k, f"v{i + k}") for k in range(n)]
                half = n // 2 if n > 1 and rng.random() < 0.3 else n
                cur.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s)", rows[:half])
                if half < n:
                    cur.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s)", rows[half:])
                conn.commit()
                i += n
        conn.close()
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


class Log:
    """The client's log: per run, the batches (id, tokens, acked)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs: dict[int, list[dict]] = {}
        self.rollbacks = 0
        self.mismatches: list[str] = []
        self.ended: set[int] = set()

    def read(self) -> Log:
        self.runs, self.rollbacks, self.mismatches, self.ended = {}, 0, [], set()
        text = self.path.read_text() if self.path.exists() else ""
        lines = text.split("\n")[:-1]  # a torn last line (no newline) is ignored
        for line in lines:
            kind, run, *rest = line.split(" ")
            batches = self.runs.setdefault(int(run), [])
            if kind == "G":
                toks = rest[1].split(",") if len(rest) > 1 and rest[1] else []
                batches.append({"id": int(rest[0]), "tokens": toks, "acked": False})
            elif kind == "A":
                assert batches[-1]["id"] == int(rest[0])
                batches[-1]["acked"] = True
            elif kind == "R":
                self.rollbacks += 1
            elif kind == "X":
                self.mismatches.append(line)
            elif kind == "E":
                self.ended.add(int(run))
        return self

    def rows(self, run: int | None = None) -> list[int]:
        runs = [run] if run is not None else sorted(self.runs)
        return [int(t) for r in runs for b in self.runs.get(r, []) for t in b["tokens"] if t != "|"]


def at_risk(log: Log, upto: int) -> set[int]:
    """Rows a restart after run ``upto`` may deliver again: the unacked batch, and the acked
    stream's rows after its last transaction boundary."""
    stream = [
        t for r in sorted(log.runs) if r <= upto for b in log.runs[r] if b["acked"] for t in b["tokens"]
    ]
    tail: list[int] = []
    for t in stream:
        tail = [] if t == "|" else [*tail, int(t)]
    unacked = [b for b in log.runs.get(upto, []) if not b["acked"]]
    assert len(unacked) <= 1, "at most one outstanding batch at a time"
    return set(tail) | {int(t) for b in unacked for t in b["tokens"] if t != "|"}


def boundaries(db: PrivateMariaDB, journal: str) -> set[int]:
    """The offsets of the transaction-ending events (Xid, COMMIT, standalone statements) in
    ``journal`` and their ends. A batch's ack point is its last TRANSACTIONEND / DDL entry (as in
    Canal's ``meta.dat``, the offset of that event: a restart repeats only the lone
    TRANSACTIONEND) or its last begin without GTID (the end of the previous transaction)."""
    out = set()
    for row in db.query(f"SHOW BINLOG EVENTS IN '{journal}'"):
        _log, pos, etype, _sid, end, info = row[:6]
        if etype == "Xid" or (etype == "Query" and not str(info).upper().startswith("BEGIN")):
            out.update((int(pos), int(end)))
    return out


def check_cursor(db: PrivateMariaDB, data: Path) -> tuple[str, int]:
    doc = json.loads((data / DEST / "meta.dat").read_text())
    (client,) = doc["clientDatas"]
    pos = client["cursor"]["postion"]
    journal, position = pos["journalName"], int(pos["position"])
    if position not in boundaries(db, journal):
        near = [
            r[:6] for r in db.query(f"SHOW BINLOG EVENTS IN '{journal}'") if abs(int(r[1]) - position) < 700
        ]
        raise AssertionError(
            f"meta.dat cursor {journal}:{position} is not a transaction-ending event: {near}"
        )
    return journal, position


def test_sigkill_mid_stream_at_least_once(db: PrivateMariaDB, tmp_path: Path) -> None:
    db.execute(f"CREATE TABLE pycanal.{TABLE} (id INT PRIMARY KEY, v VARCHAR(20))")
    start = db.current_binlog()
    conf, data = tmp_path / "conf", tmp_path / "data"
    write_conf(conf, db, start, data)
    script = tmp_path / "client.py"
    script.write_text(CHILD)
    log_path, stop_path = tmp_path / "client.log", tmp_path / "stop"
    env = {**os.environ, "CANAL_INSTANCE_MASTER_ADDRESS": f"{db.host}:{db.port}"}
    log = Log(log_path)
    deadline = time.monotonic() + DEADLINE

    def spawn(run: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, str(script), str(conf), str(log_path), str(stop_path), str(run), str(BATCH)],
            env=env,
            stderr=open(tmp_path / f"child{run}.err", "wb"),  # noqa: SIM115
        )

    def wait_rows(proc: subprocess.Popen[bytes], n: int) -> None:
        while len(set(log.read().rows())) < n:
            assert proc.poll() is None, (tmp_path / f"child{run}.err").read_text()[-3000:]
            assert time.monotonic() < deadline, f"only {len(set(log.rows()))} of {n} rows"
            time.sleep(0.05)

    errors: list[BaseException] = []
    writer = threading.Thread(target=write_workload, args=(db, errors), daemon=True)
    cursors = []
    run = 1
    proc = spawn(run)
    writer.start()
    try:
        for frac in KILL_AT:
            wait_rows(proc, int(ROWS * frac))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            cursors.append(check_cursor(db, data))  # the cursor at the kill: a boundary
            risk = at_risk(log.read(), run)
            before = set(log.rows())
            run += 1
            proc = spawn(run)
            wait_rows(proc, len(before) + 1)
            # what the restarted run delivered again was at risk at the kill
            log.read()
            again = [r for r in log.rows(run) if r in before]
            assert set(again) <= risk, (
                f"run {run} repeated rows that were acked: {sorted(set(again) - risk)[:20]}"
            )
        writer.join(timeout=max(1.0, deadline - time.monotonic()))
        assert not errors, errors
        wait_rows(proc, ROWS)
        stop_path.touch()
        assert proc.wait(timeout=30) == 0, (tmp_path / f"child{run}.err").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.read()
    assert run in log.ended and len(log.runs) == len(KILL_AT) + 1
    rows = log.rows()
    assert set(rows) == set(range(ROWS)), "every row arrives at least once"
    # duplicates: within a run never; across a kill only rows at risk at that kill
    for r in sorted(log.runs):
        assert len(log.rows(r)) == len(set(log.rows(r))), f"run {r} delivered a row twice"
    for r in sorted(log.runs)[1:]:
        earlier = set().union(*(log.rows(p) for p in log.runs if p < r))
        repeated = {x for x in log.rows(r) if x in earlier}
        assert repeated <= at_risk(log, r - 1)
    assert len(rows) - ROWS <= sum(len(at_risk(log, r)) for r in sorted(log.runs)[:-1])
    assert log.rollbacks > 0 and not log.mismatches, log.mismatches
    end = check_cursor(db, data)
    assert end >= max(cursors)
