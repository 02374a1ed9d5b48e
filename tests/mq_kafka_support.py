"""Shared by the Kafka-mode tests: a conf dir for ``pycanal server`` in kafka mode, the server as a
child process, a checkable MariaDB workload (every row change counted as MariaDB reports it), and
readers that turn a topic's records back into row changes, replay them and check each record's
partition against pycanal.mq's rules."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pycanal.mq import MQDestination, MQOptions, build_records
from pycanal.mq.flat import FlatMessage
from pycanal.mq.partition import flat_partitions
from pycanal.protocol import CanalProtocol_pb2 as cp
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port
from pycanal.testing.kafka import KafkaRecord

_ROW_TYPES = {pb.INSERT: "INSERT", pb.UPDATE: "UPDATE", pb.DELETE: "DELETE"}

PYCANAL = [sys.executable, "-m", "pycanal.cli"]


def wait_for(what: str, done: Callable[[], object], timeout: float = 90.0, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def refused_start(
    mariadb: PrivateMariaDB,
    conf_dir: Path,
    canal: Mapping[str, str],
    instance: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``pycanal server`` on a conf dir of ``canal`` settings that must stop it at start: exit 1,
    no traceback; the finished process (its output as text)."""
    conf = write_conf(
        conf_dir,
        mariadb,
        mariadb.current_binlog(),
        bootstrap="127.0.0.1:9",
        tables="pycanal\\\\.nothing",
        canal=canal,
        instance={"canal.mq.topic": "t", **(instance or {})},
    )
    done = subprocess.run(
        [*PYCANAL, "server", "--conf", str(conf)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


def every_row_once(records: Callable[[], Iterable[KafkaRecord]], expected: int) -> None:
    """Wait until the flat rows of ``records()`` hold ``expected`` row changes, then check none
    came twice (batches refused before were resent whole, none acked before)."""
    wait_for(
        f"{expected} row changes",
        lambda: len({r.key for r in flat_rows(records())[0]}) >= expected,
        timeout=90,
    )
    assert len(flat_rows(records())[0]) == expected


def write_conf(
    root: Path,
    db: PrivateMariaDB,
    start: tuple[str, int],
    *,
    bootstrap: str,
    tables: str,
    canal: Mapping[str, object] | None = None,
    instance: Mapping[str, object] | None = None,
    destination: str = "shop",
) -> Path:
    """A conf dir serving ``destination`` from ``start``, filter ``tables``, in kafka mode."""
    (root / destination).mkdir(parents=True)
    server = {
        "canal.serverMode": "kafka",
        "canal.destinations": destination,
        "canal.conf.dir": ".",
        "canal.file.data.dir": f"{root}/data",
        "canal.auto.scan": "false",
        "kafka.bootstrap.servers": bootstrap,
        "canal.metrics.pull.port": free_port(),  # not Canal's 11112: another test's server may have it
        **(canal or {}),
    }
    inst = {
        "canal.instance.master.address": f"{db.host}:{db.port}",
        "canal.instance.master.journal.name": start[0],
        "canal.instance.master.position": start[1],
        "canal.instance.dbUsername": db.repl_user,
        "canal.instance.dbPassword": db.repl_password,
        "canal.instance.filter.regex": tables,
        **(instance or {}),
    }
    (root / "canal.properties").write_text("".join(f"{k} = {v}\n" for k, v in server.items()))
    (root / destination / "instance.properties").write_text("".join(f"{k} = {v}\n" for k, v in inst.items()))
    return root


class Server:
    """``pycanal server --conf DIR`` as a child process, its output in ``log``."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.conf, self.log = conf, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*PYCANAL, "server", "--conf", str(self.conf)], stdout=out, stderr=subprocess.STDOUT
            )
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


@dataclass
class Workload:
    """Tables (``a``, ``b``, or ``names``) in ``pycanal``: multi-row INSERTs, a 500-row transaction, UPDATEs,
    an ALTER TABLE between them, a primary-key UPDATE and DELETEs; ``rows`` counts the row changes
    MariaDB reported, per table."""

    db: PrivateMariaDB
    suffix: str
    seed: int = 7
    rows: Counter[str] = field(default_factory=Counter)
    names: tuple[str, ...] = ("a", "b")  # round() writes them all, mixed() a and b
    next_id: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.names:
            self.next_id.setdefault(name, 1)

    def table(self, name: str) -> str:
        return f"mqk_{name}_{self.suffix}"

    @property
    def regex(self) -> str:
        return f"pycanal\\\\.mqk_[ab]_{self.suffix}"

    def create(self) -> None:
        for name in self.names:
            self.db.execute(
                f"CREATE TABLE pycanal.{self.table(name)} (id INT PRIMARY KEY, name VARCHAR(40), qty INT, note TEXT NULL)"
            )

    def _exec(self, cur: object, name: str, sql: str) -> None:
        cur.execute(sql.replace("{t}", f"pycanal.{self.table(name)}"))  # type: ignore[attr-defined]
        self.rows[name] += cur.rowcount  # type: ignore[attr-defined]

    def _values(self, r: random.Random, name: str, n: int) -> str:
        out = []
        for _ in range(n):
            i = self.next_id[name]
            self.next_id[name] += 1
            note = "NULL" if r.random() < 0.2 else f"'n{r.randint(0, 10**6)}'"
            out.append(f"({i}, 'row {i} é', {r.randint(0, 1000)}, {note})")
        return ", ".join(out)

    def round(self, k: int) -> None:
        """One small round: a few INSERTs, an UPDATE and a DELETE in each table."""
        r = random.Random(f"{self.seed}:{k}")
        conn = self.db.root_connection()
        try:
            with conn.cursor() as cur:
                for name in self.names:
                    self._exec(
                        cur,
                        name,
                        f"INSERT INTO {{t}} (id, name, qty, note) VALUES {self._values(r, name, 12)}",
                    )
                    self._exec(cur, name, f"UPDATE {{t}} SET qty = qty + 1 WHERE id % 9 = {k % 9}")
                    self._exec(cur, name, f"DELETE FROM {{t}} WHERE id = {r.randint(1, self.next_id[name])}")
        finally:
            conn.close()

    def mixed(self) -> None:
        """The whole mix once (DDL mid-stream, a big transaction, a key update)."""
        r = random.Random(self.seed)
        conn = self.db.root_connection()
        try:
            with conn.cursor() as cur:
                for _ in range(5):
                    self._exec(
                        cur, "a", f"INSERT INTO {{t}} (id, name, qty, note) VALUES {self._values(r, 'a', 20)}"
                    )
                cur.execute("BEGIN")
                for _ in range(5):
                    self._exec(
                        cur,
                        "b",
                        f"INSERT INTO {{t}} (id, name, qty, note) VALUES {self._values(r, 'b', 100)}",
                    )
                cur.execute("COMMIT")
                self._exec(cur, "a", "UPDATE {t} SET qty = qty + 1 WHERE id % 7 = 0")
                cur.execute(f"ALTER TABLE pycanal.{self.table('a')} ADD COLUMN extra VARCHAR(10) NULL")
                self._exec(cur, "a", "UPDATE {t} SET extra = 'x' WHERE id % 11 = 0")
                self._exec(cur, "a", "UPDATE {t} SET id = id + 100000 WHERE id IN (3, 5)")
                self._exec(cur, "b", "DELETE FROM {t} WHERE id % 5 = 0")
                self._exec(cur, "b", "UPDATE {t} SET note = NULL WHERE id % 13 = 0")
        finally:
            conn.close()

    def state(self, name: str) -> dict[int, tuple[object, ...]]:
        rows = self.db.query(f"SELECT * FROM pycanal.{self.table(name)}")
        return {row[0]: tuple(row) for row in rows}


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change read back from a record; ``key`` tells a resent copy from a new change."""

    table: str
    type: str
    after: tuple[tuple[str, str | None], ...]
    before: tuple[tuple[str, str | None], ...]
    key: str


def flat_rows(records: Iterable[KafkaRecord]) -> tuple[list[RowChange], list[FlatMessage]]:
    """The row changes of flat records, and the DDL/QUERY messages."""
    rows, other = [], []
    for rec in records:
        msg = FlatMessage.from_json(rec.value or b"")
        if msg.type not in ("INSERT", "UPDATE", "DELETE"):
            other.append(msg)
            continue
        for i, data in enumerate(msg.data or []):
            old = (msg.old or [None] * len(msg.data or []))[i] or {}
            key = json.dumps([msg.database, msg.table, msg.type, msg.es, data, old], sort_keys=True)
            rows.append(RowChange(msg.table or "", msg.type, tuple(data.items()), tuple(old.items()), key))
    return rows, other


def packet_entries(value: bytes) -> tuple[int, list[bytes]]:
    packet = cp.Packet.FromString(value)
    assert packet.type == cp.MESSAGES
    messages = cp.Messages.FromString(packet.body)
    return messages.batch_id, list(messages.messages)


def proto_rows(records: Iterable[KafkaRecord]) -> tuple[list[RowChange], list[pb.Entry]]:
    """The row changes of protobuf records (keyed by binlog position), and the DDL entries."""
    rows, ddl = [], []
    for rec in records:
        for raw in packet_entries(rec.value or b"")[1]:
            entry = pb.Entry.FromString(raw)
            if entry.entryType != pb.ROWDATA:
                continue
            change = pb.RowChange.FromString(entry.storeValue)
            h = entry.header
            if change.isDdl or change.eventType not in _ROW_TYPES:
                ddl.append(entry)
                continue
            for rd in change.rowDatas:
                after = tuple((c.name, None if c.isNull else c.value) for c in rd.afterColumns)
                before = tuple((c.name, None if c.isNull else c.value) for c in rd.beforeColumns)
                key = json.dumps([h.logfileName, h.logfileOffset, after, before])
                rows.append(RowChange(h.tableName, _ROW_TYPES[change.eventType], after, before, key))
    return rows, ddl


def replay(rows: list[RowChange], table: str) -> dict[int, tuple[object, ...]]:
    """A table's rows after applying its distinct row changes in binlog order (protobuf keys)."""
    state: dict[int, tuple[object, ...]] = {}
    distinct = {r.key: r for r in rows if r.table == table}
    for r in sorted(distinct.values(), key=lambda r: json.loads(r.key)[:2]):
        if r.type != "INSERT":
            del state[int(dict(r.before)["id"])]
        if r.type != "DELETE":
            after = dict(r.after)
            state[int(after["id"])] = (int(after["id"]), after["name"], int(after["qty"]), after["note"])
    return state


def check_partitions(
    records: Iterable[KafkaRecord], flat: bool, dest: MQDestination, options: MQOptions
) -> int:
    """Every record is what pycanal.mq builds for its own content: a flat message re-split by
    ``partitionHash`` gives itself at its own partition only, a protobuf packet's entries rebuilt
    give the same bytes at the same partition. Returns how many records were checked."""
    checked = 0
    for rec in records:
        value = rec.value or b""
        fixed = replace(dest, topic=rec.topic, dynamic_topic=None, dynamic_topic_partition_num=None)
        if flat:
            msg = FlatMessage.from_json(value)
            assert msg.to_json() == value, "flat JSON does not read back to the same bytes"
            if dest.partition_hash:
                parts = flat_partitions(msg, dest.partitions_num, dest.partition_hash, options.database_hash)
                assert [i for i, p in enumerate(parts) if p is not None] == [rec.partition], (rec, msg)
            else:
                assert rec.partition == (dest.partition or 0)
        else:
            batch_id, entries = packet_entries(value)
            raw = not dest.partition_hash and not dest.dynamic_topic and batch_id != 0
            rebuilt = build_records(batch_id, entries, raw, fixed, options, 0)
            assert [(r.partition, r.value) for r in rebuilt] == [(rec.partition, value)], rec
        checked += 1
    return checked


def row_count(entries: Iterable[bytes | pb.Entry]) -> int:
    """The row changes (INSERT/UPDATE/DELETE rows, no DDL) of a batch's entries."""
    n = 0
    for raw in entries:
        entry = raw if isinstance(raw, pb.Entry) else pb.Entry.FromString(raw)
        if entry.entryType == pb.ROWDATA:
            change = pb.RowChange.FromString(entry.storeValue)
            if not change.isDdl and change.eventType in (pb.INSERT, pb.UPDATE, pb.DELETE):
                n += len(change.rowDatas)
    return n


Built = tuple[int, list[Any], bool, int, list[Any]]  # batch id, entries, raw, ts, its records


def recorded_run(
    conf: Path, work: Workload, sender: Callable[[Mapping[str, Any]], Any], builder: Callable[..., list[Any]]
) -> tuple[list[Built], Any]:
    """The server of ``conf`` in this process with an MQ starter whose sender is ``sender(config)``:
    ``work.mixed()`` written, every batch's records recorded as ``builder`` built them, until the
    acked batches hold all of the workload's rows (none failed). The batches and the config."""
    from pycanal.deployer import Deployer
    from pycanal.deployer.mq import mq_options
    from pycanal.mq.starter import MQStarter

    built: list[Built] = []

    def recording(batch_id, entries, raw, dest, options, ts):  # type: ignore[no-untyped-def]
        records = builder(batch_id, entries, raw, dest, options, ts)
        built.append((batch_id, list(entries), raw, ts, records))
        return records

    deployer = Deployer(conf)
    cfg = deployer.config
    starter = MQStarter(
        deployer.server,
        {},
        mq_options(cfg),
        lambda _d: sender(cfg),
        batch_size=cfg["canal.mq.canalBatchSize"],
        get_timeout_ms=cfg["canal.mq.canalGetTimeout"],
        builder=recording,
    )
    deployer.attach_mq(starter)
    deployer.start()
    try:
        work.mixed()
        expected = sum(work.rows.values())
        wait_for(
            f"{expected} row changes in acked batches",
            lambda: (
                starter.stats()["shop"].batches == len(built)
                and sum(row_count(b[1]) for b in built) >= expected
            ),
        )
        stats = starter.stats()["shop"]
    finally:
        deployer.stop()
    assert stats.failures == 0, stats.last_error
    assert sum(row_count(b[1]) for b in built) == expected
    return built, cfg
