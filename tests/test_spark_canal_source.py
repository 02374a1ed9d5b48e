"""``format("canal")`` (``pycanal.spark.canal_source``) against a real server: the private MariaDB,
an embedded pycanal server with a ``CanalTcpServer`` in this process, and the shared SparkSession.

1. A workload of inserts, updates, deletes and DDL (one transaction longer than ``batchSize``)
   streams through ``readStream.format("canal")`` into ``foreachBatch``: the rows equal
   ``EventRows`` over the same binlog, in a total order, each once, micro-batches split over
   two partitions.
2. Exactly once through a crash between the sink write and Spark's commit: ``foreachBatch``
   raises after keeping a batch (its start inside a long transaction), the query is restarted
   from its checkpoint with a new runner, Spark replays that micro-batch and it yields the same
   rows, although the server has newer changes by then; all batches together have every change
   exactly once.
3. A replay the server cannot serve fails with the destination and the positions (no Spark).
4. With ``zkServers`` the runner connects to the server ZooKeeper names as running, and after
   that server goes away to the one named next, resuming from the acked cursor: every row once
   (the runner's calls made directly, as Spark makes them, and ``read`` on a pickled reader).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from pycanal.binlog import read_events
from pycanal.ha import ServerRunningData
from pycanal.instance import CanalInstance
from pycanal.meta import ClientIdentity, MemoryMetaManager
from pycanal.parse.filter import TableFilter
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.protocol.position import EntryPosition
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.tcp import CanalTcpServer
from pycanal.spark.canal_source import CanalStreamReader
from pycanal.spark.entry_rows import EntryRows
from pycanal.spark.event_rows import EventRows
from pycanal.spark.rows import to_record_batch
from pycanal.testing import PrivateMariaDB
from spark_fixtures import spark  # noqa: F401

pytestmark = pytest.mark.mariadb

BATCH = 60  # entries per micro-batch: the long transactions below take several
PAD = "x" * 100


class Canal:
    """An embedded server over the private MariaDB, one destination per test, and its TCP port."""

    def __init__(self, db: PrivateMariaDB) -> None:
        self.db = db
        self.server = CanalServerWithEmbedded()
        self.tcp = CanalTcpServer(self.server).start()

    def destination(self, name: str) -> tuple[str, tuple[str, int]]:
        """A new database ``name`` and a destination parsing from here (GTIDs on, as EventRows)."""
        self.db.execute(f"CREATE DATABASE {name}")
        start = self.db.current_binlog()
        parser = {
            "master_address": (self.db.host, self.db.port),
            "username": self.db.repl_user,
            "password": self.db.repl_password,
            "master_position": EntryPosition(*start),
            "gtid_mode": True,
            "transaction_size": 64,
        }
        instance = CanalInstance(name, parser, store={"buffer_size": 1024}, meta_manager=MemoryMetaManager())
        self.server.add_instance(instance)
        return name, start

    def stop(self) -> None:
        self.tcp.stop()
        self.server.stop()


@pytest.fixture(scope="module")
def canal(mariadb: PrivateMariaDB) -> Iterator[Canal]:
    c = Canal(mariadb)
    yield c
    c.stop()


def run_sql(db: PrivateMariaDB, database: str, transactions: list[list[str]]) -> None:
    conn = db.root_connection(database)
    try:
        with conn.cursor() as cur:
            for statements in transactions:
                conn.begin()  # one transaction (the connection autocommits otherwise)
                for sql in statements:
                    cur.execute(sql)
                conn.commit()
    finally:
        conn.close()


def expected_rows(db: PrivateMariaDB, database: str, start: tuple[str, int]) -> list[dict[str, Any]]:
    """EventRows over the binlog from ``start`` to now (the files are closed first)."""
    db.flush_binary_logs()
    names = [p.name for p in db.binlog_files()]
    files = [db.binlog_dir / n for n in names[names.index(start[0]) : -1]]

    def events() -> Iterator[Any]:
        for path in files:
            yield from read_events(path, start_position=start[1] if path.name == start[0] else None)

    rows = list(EventRows(accepts=TableFilter(f"{database}\\..*")).rows(events()))
    return to_record_batch(rows).to_pylist()


class Collector:
    """A ``foreachBatch`` sink keeping every micro-batch's rows (and partition count) by batch id.
    ``crash``: a row predicate; the first batch with such a row is kept, then the sink raises,
    as a driver dying after the sink's write and before Spark's commit."""

    def __init__(self, crash: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.batches: dict[int, list[dict[str, Any]]] = {}
        self.partitions: dict[int, int] = {}
        self.replays: list[int] = []
        self.crash = crash
        self.crashed: int | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.toArrow().to_pylist()
        if batch_id in self.batches:
            self.replays.append(batch_id)
        self.batches[batch_id] = rows
        self.partitions[batch_id] = df.rdd.getNumPartitions()
        if self.crash is not None and self.crashed is None and any(self.crash(r) for r in rows):
            self.crashed = batch_id
            raise RuntimeError(f"simulated crash after writing batch {batch_id}")

    def count(self) -> int:
        return sum(len(r) for r in self.batches.values())

    def rows(self) -> list[dict[str, Any]]:
        return [r for b in sorted(self.batches) for r in self.batches[b]]


def start_query(session: Any, canal: Canal, destination: str, checkpoint: Path, sink: Collector) -> Any:
    return (
        session.readStream.format("canal")
        .option("address", f"127.0.0.1:{canal.tcp.port}")
        .option("destination", destination)
        .option("filter", f"{destination}\\..*")
        .option("batchSize", BATCH)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def wait_for(query: Any, done: Callable[[], bool], what: str, deadline: float = 120.0) -> None:
    end = time.monotonic() + deadline
    while not done():
        if query.exception() is not None:
            raise AssertionError(f"the query failed while waiting for {what}: {query.exception()}")
        assert time.monotonic() < end, f"no {what} within {deadline}s"
        time.sleep(0.2)


def stop_when_idle(query: Any, sink: Collector, rows: int) -> None:
    """Stop once ``rows`` rows arrived and the query is idle (no micro-batch being planned)."""
    wait_for(query, lambda: sink.count() >= rows, f"{rows} rows")
    time.sleep(1.0)
    wait_for(query, lambda: not query.status["isTriggerActive"], "an idle query")
    query.stop()


def offsets(checkpoint: Path) -> dict[int, dict[str, Any]]:
    """The source's end offset of every micro-batch in the checkpoint's offset log."""
    out = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            out[int(path.name)] = json.loads(path.read_text().splitlines()[-1])
    return out


def long_transaction(table: str, first: int, n: int) -> list[str]:
    """``n`` single-row statements in one transaction: 2 entries each (rows + annotation)."""
    return [f"INSERT INTO {table} VALUES ({i}, 'long{i}', {i}.5)" for i in range(first, first + n)]


def test_stream_equals_binlog(spark: Any, canal: Canal, tmp_path: Path) -> None:  # noqa: F811
    name = f"canal_src_{uuid.uuid4().hex[:8]}"
    destination, start = canal.destination(name)
    run_sql(
        canal.db,
        name,
        [
            [
                "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(120), d DECIMAL(10,2))",
                "CREATE TABLE nokey (x INT)",
            ],
            [  # ~100 KB of entries: its micro-batch is cut into two partitions, whatever the timing
                "INSERT INTO t VALUES " + ", ".join(f"({i}, 'v{i}{PAD}', {i}.25)" for i in range(500))
            ],
            [
                "UPDATE t SET v = 'u' WHERE id < 40",
                "DELETE FROM t WHERE id >= 480",
                "INSERT INTO nokey VALUES (1)",
            ],
            long_transaction("t", 1000, 100),
            ["ALTER TABLE t ADD COLUMN w INT DEFAULT 7"],
            *[[f"UPDATE t SET d = d + 1 WHERE id = {i}"] for i in range(20)],
            ["UPDATE t SET id = id + 5000 WHERE id = 3", "DELETE FROM nokey"],
            ["RENAME TABLE nokey TO nokey2", "DROP TABLE nokey2"],
        ],
    )
    expected = expected_rows(canal.db, name, start)
    sink = Collector()
    checkpoint = tmp_path / "checkpoint"
    query = start_query(spark, canal, destination, checkpoint, sink)
    client = ClientIdentity(destination, 1001)
    try:
        stop_when_idle(query, sink, len(expected))
        # Idle, Spark commits the last batch only when it plans another: the source asks for an
        # empty one, and so the server's cursor gets to the end.
        wait_for(query, lambda: not canal.server.list_batch_ids(client), "acks of every batch")
    finally:
        query.stop()
    cursor = canal.server.instance(destination).meta_manager.get_cursor(client)
    last_dml = max(r["position"]["offset"] for r in sink.rows() if r["op"] != "DDL")
    assert cursor is not None and (cursor.postion.journal_name, cursor.postion.position) >= (
        start[0],
        last_dml,
    )

    got = sink.rows()
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e
    keys = [(r["position"]["file"], r["position"]["offset"], r["position"]["row"]) for r in got]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)  # totally ordered, no duplicate
    assert {r["op"] for r in got} == {"INSERT", "UPDATE", "DELETE", "DDL"}
    assert all(r["position"]["gtid"] for r in got)
    assert not sink.replays
    ends = offsets(checkpoint)
    assert any(o.get("txn") for o in ends.values()), "the long transaction was never cut"
    big = max(sink.batches, key=lambda b: len(sink.batches[b]))
    assert sink.partitions[big] >= 2


def test_replayed_batch_yields_the_same_rows(spark: Any, canal: Canal, tmp_path: Path) -> None:  # noqa: F811
    name = f"canal_rep_{uuid.uuid4().hex[:8]}"
    destination, start = canal.destination(name)
    run_sql(
        canal.db,
        name,
        [
            ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2))"],
            *[
                [f"INSERT INTO t VALUES ({i}, 'a{i}', {i})", f"UPDATE t SET v = 'b{i}' WHERE id = {i}"]
                for i in range(30)
            ],
            ["DELETE FROM t WHERE id < 10"],
            long_transaction("t", 100, 70),  # the crash comes in the batch with its end
            ["UPDATE t SET d = -1 WHERE id >= 100"],
            ["ALTER TABLE t DROP COLUMN d"],
        ],
    )
    expected = expected_rows(canal.db, name, start)
    checkpoint = tmp_path / "checkpoint"

    first = Collector(crash=lambda r: r["after"] is not None and '"id":169,' in r["after"])
    query = start_query(spark, canal, destination, checkpoint, first)
    try:
        with pytest.raises(Exception, match="simulated crash"):
            query.awaitTermination(120)
    finally:
        query.stop()
    crashed = first.crashed
    assert crashed is not None and not (checkpoint / "commits" / str(crashed)).exists()
    ends = offsets(checkpoint)
    assert ends[crashed - 1].get("txn"), "the replayed batch should start inside the long transaction"

    second = Collector()  # a new query: a new runner, a new connection
    query = start_query(spark, canal, destination, checkpoint, second)
    try:
        stop_when_idle(
            query, second, len(expected) - sum(len(first.batches[b]) for b in first.batches if b < crashed)
        )
    finally:
        query.stop()

    assert min(second.batches) == crashed  # Spark replayed it, with the same batch id
    assert second.batches[crashed] == first.batches[crashed]  # the same rows, the same positions
    assert offsets(checkpoint)[crashed] == ends[crashed]
    union = {**first.batches, **second.batches}
    got = [r for b in sorted(union) for r in union[b]]
    assert got == expected  # every change exactly once, in binlog order


def test_a_batch_the_server_cannot_give_again_is_an_error(canal: Canal) -> None:
    """A replay whose end the server never hands out (or does not have) fails, naming both."""
    name = f"canal_err_{uuid.uuid4().hex[:8]}"
    destination, start = canal.destination(name)
    run_sql(canal.db, name, [["CREATE TABLE t (id INT PRIMARY KEY)"], ["INSERT INTO t VALUES (1)"]])
    file, pos = canal.db.current_binlog()
    options = {"address": f"127.0.0.1:{canal.tcp.port}", "destination": destination, "timeout": "1"}
    reader = CanalStreamReader(options)
    try:
        initial = reader.initialOffset()
        with pytest.raises(
            RuntimeError, match=rf"destination {name} .*\(the server cursor, {file}:{pos + 99}#0\]"
        ):
            reader.partitions(initial, {"file": file, "pos": pos + 99, "k": 0})
        with pytest.raises(
            RuntimeError, match=rf"{file}:{start[1] + 1}#0\] does not match the server's stream"
        ):
            reader.partitions(initial, {"file": file, "pos": start[1] + 1, "k": 0})
    finally:
        reader.stop()
    with pytest.raises(ValueError, match=f"destination {name}: bad offset"):
        reader.partitions({"file": file}, initial)
    with pytest.raises(ValueError, match="give one of option address HOST:PORT and option zkServers"):
        CanalStreamReader({"destination": "x"})
    with pytest.raises(ValueError, match="option batchSize 'many': must be an integer"):
        CanalStreamReader({**options, "batchSize": "many"})


def test_zk_servers_follow_the_running_server(canal: Canal, zookeeper: Any) -> None:
    name = f"canal_zk_{uuid.uuid4().hex[:8]}"
    destination, start = canal.destination(name)
    run_sql(
        canal.db,
        name,
        [
            ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))"],
            *[[f"INSERT INTO t VALUES ({i}, 'v')"] for i in range(40)],
        ],
    )
    expected = expected_rows(canal.db, name, start)
    chroot = f"/pycanal-canal-source-{uuid.uuid4().hex[:8]}"
    admin = zookeeper.client()
    running = f"{chroot}/otter/canal/destinations/{destination}/running"
    first, second = CanalTcpServer(canal.server).start(), CanalTcpServer(canal.server).start()
    admin.create(running, ServerRunningData(f"127.0.0.1:{first.port}").to_json(), makepath=True)
    options = {
        "zkServers": zookeeper.hosts + chroot,
        "destination": destination,
        "batchSize": "30",
        "timeout": "20",
    }
    reader = CanalStreamReader(options)
    rows: list[dict[str, Any]] = []
    try:
        offset, previous = reader.initialOffset(), None
        deadline = time.monotonic() + 60
        while len(rows) < len(expected):
            assert time.monotonic() < deadline, f"{len(rows)} of {len(expected)} rows"
            end = reader.latestOffset(offset, ReadAllAvailable())
            if end == offset:
                time.sleep(0.1)
                continue
            if previous is not None:
                reader.commit(previous)  # Spark commits batch N-1 once batch N is planned
            for part in reader.partitions(offset, end):
                rows += [r for b in pickle.loads(pickle.dumps(reader)).read(part) for r in b.to_pylist()]
            if previous is None:  # the server goes away; ZooKeeper names another
                admin.set(running, ServerRunningData(f"127.0.0.1:{second.port}").to_json())
                first.stop()
            previous, offset = offset, end
        assert reader._feed is not None and reader._feed.conn is not None
        assert reader._feed.conn.address == ("127.0.0.1", second.port)
    finally:
        reader.stop()
        first.stop()
        second.stop()
        admin.delete(chroot, recursive=True)
        admin.stop()
    assert rows == expected


def test_batch_bytes_caps_a_micro_batch(canal: Canal) -> None:
    """``batchBytes`` bounds the serialized entries of a micro-batch (one position's entries
    excepted); a transaction bigger than that is cut between positions, and every row comes once."""
    name = f"canal_bytes_{uuid.uuid4().hex[:8]}"
    destination, start = canal.destination(name)
    run_sql(
        canal.db,
        name,
        [
            ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))"],
            [f"INSERT INTO t VALUES ({i}, '{'x' * 150}')" for i in range(30)],  # one long transaction
            *[[f"INSERT INTO t VALUES ({i}, 'short')"] for i in range(30, 50)],
        ],
    )
    expected = expected_rows(canal.db, name, start)
    cap = 2000
    options = {"address": f"127.0.0.1:{canal.tcp.port}", "destination": destination, "batchBytes": str(cap)}
    reader = CanalStreamReader(options)
    rows: list[dict[str, Any]] = []
    sizes: list[int] = []
    cut_inside = False
    try:
        offset, previous = reader.initialOffset(), None
        deadline = time.monotonic() + 60
        while len(rows) < len(expected):
            assert time.monotonic() < deadline, f"{len(rows)} of {len(expected)} rows"
            end = reader.latestOffset(offset, ReadAllAvailable())
            if end == offset or "tick" in end:
                time.sleep(0.05)
                offset = {k: v for k, v in end.items() if k != "tick"}
                if previous is not None:
                    reader.commit(previous)
                continue
            if previous is not None:
                reader.commit(previous)
            cut_inside |= bool(end.get("txn"))
            parts = reader.partitions(offset, end)
            sizes.append(sum(len(raw) for p in parts for raw in p.entries))
            # what EntryRows does not read stays in the runner: no BEGIN, no SQL behind rows events
            shipped = [pb.Entry.FromString(raw) for p in parts for raw in p.entries]
            assert not [
                e for e in shipped if e.entryType == pb.TRANSACTIONBEGIN or e.header.eventType == pb.QUERY
            ]
            for part in parts:
                rows += [r for b in pickle.loads(pickle.dumps(reader)).read(part) for r in b.to_pylist()]
            previous, offset = end, end
    finally:
        reader.stop()
    assert rows == expected
    assert cut_inside, "the long transaction was not cut"
    assert len(sizes) > 5 and max(sizes) <= cap, sizes
    with pytest.raises(ValueError, match="option batchBytes 0: must be from 1 to"):
        CanalStreamReader({**options, "batchBytes": "0"})


def drive(reader: CanalStreamReader, n: int, seconds: float = 60.0) -> list[dict[str, Any]]:
    """Call the runner as Spark does until ``n`` rows were read: ``latestOffset`` every trigger, a
    micro-batch when it moved (an empty one for a ``tick``), the previous micro-batch committed
    once the next one is planned, ``read`` on a pickled reader. Each offset numbers its
    micro-batch as Spark does (from 0)."""
    rows: list[dict[str, Any]] = []
    offset, previous = reader.initialOffset(), None
    deadline = time.monotonic() + seconds
    batch = 0
    while len(rows) < n:
        assert time.monotonic() < deadline, f"no progress: {len(rows)} of {n} rows in {seconds:g}s"
        end = reader.latestOffset(offset, ReadAllAvailable())
        if end == offset:
            time.sleep(0.05)
            continue
        assert end["batch"] == batch, (end, batch)
        batch += 1
        if previous is not None:
            reader.commit(previous)
        for part in reader.partitions(offset, end):
            rows += [r for b in pickle.loads(pickle.dumps(reader)).read(part) for r in b.to_pylist()]
        previous, offset = end, end
    return rows


def test_a_full_store_that_ends_inside_a_transaction(canal: Canal) -> None:
    """Issue 43's stall. A server's transaction buffer also flushes at the QUERY entry of a rows
    event's SQL (Canal's rule for non-DML entries), so with ``filter.query.dml`` off (Canal's
    default) a transaction can reach the store in two puts, and a full store can end between
    them. A new runner's first GET takes the whole store as one server batch, which ends inside
    a transaction: a micro-batch cannot end on its last entry, Spark's commit cannot ack it whole,
    the store stays full, no transaction end ever comes. Every row must arrive all the same."""
    name = f"canal_full_{uuid.uuid4().hex[:8]}"
    canal.db.execute(f"CREATE DATABASE {name}")
    start = canal.db.current_binlog()
    run_sql(
        canal.db,
        name,
        [
            ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))"],
            *[[f"INSERT INTO t VALUES ({i}, 'v')"] for i in range(40)],
        ],
    )
    expected = expected_rows(canal.db, name, start)
    parser = {
        "master_address": (canal.db.host, canal.db.port),
        "username": canal.db.repl_user,
        "password": canal.db.repl_password,
        "master_position": EntryPosition(*start),
        "filter": f"{name}\\..*",
        "gtid_mode": True,  # as EventRows
        "transaction_size": 2,  # a put per flush: [BEGIN, QUERY] then [ROWDATA, END]
    }
    instance = CanalInstance(name, parser, store={"buffer_size": 64}, meta_manager=MemoryMetaManager())
    canal.server.add_instance(instance, lazy=False)
    store = instance.event_store
    deadline = time.monotonic() + 30
    while store.put_seq - store.ack_seq < 63:  # the DDL alone, then pairs: 63 of 64 slots, then full
        assert time.monotonic() < deadline, f"the store did not fill: {store.stats()}"
        time.sleep(0.05)
    tail = store._slots[store.put_seq & store._mask]
    assert tail is not None and tail.entry_type != pb.TRANSACTIONEND  # the store ends inside one
    reader = CanalStreamReader(
        {"address": f"127.0.0.1:{canal.tcp.port}", "destination": name, "timeout": "10"}
    )
    try:
        assert drive(reader, len(expected)) == expected
    finally:
        reader.stop()


def test_a_cut_inside_an_event_numbers_its_rows_on(fixtures_dir: Path) -> None:
    """A micro-batch that ends inside one event's entries (a TRANSACTION_PAYLOAD holds many rows
    events at one position) carries the rows numbered there, and the next batch's rows go on from
    it: the two batches' rows equal one pass over all the entries."""
    from pycanal.client import Message
    from pycanal.parse.rawentry import RawEntryConverter
    from pycanal.spark.canal_feed import Feed
    from pycanal.spark.canal_options import canal_options

    conv = RawEntryConverter()
    events = read_events(fixtures_dir / "binlog-parser" / "mysql-bin.01")
    entries = [pb.Entry.FromString(raw) for e in events for raw in conv.convert(e)]
    iud = (pb.INSERT, pb.UPDATE, pb.DELETE)
    changes = [e for e in entries if e.entryType == pb.ROWDATA and e.header.eventType in iud]
    assert len(changes) >= 3
    for e in changes:  # as one compressed transaction's rows events: all at one position
        e.header.logfileOffset = changes[0].header.logfileOffset
    begin = next(e for e in entries if e.entryType == pb.TRANSACTIONBEGIN)
    raws = [e.SerializeToString() for e in [begin, *changes]]
    feed = Feed(canal_options({"address": "127.0.0.1:1", "destination": "d"}))
    feed.ingest(Message(1, raws))
    cut = feed.entries[2]  # BEGIN, then the second rows entry: inside the position
    offset = feed.offset(cut)
    assert offset["row"] == sum(len(pb.RowChange.FromString(e.storeValue).rowDatas) for e in changes[:2])
    first = list(EntryRows().rows(raws[:3]))
    rest = EntryRows(resume=(offset["file"], offset["pos"], offset["row"]))
    assert first + list(rest.rows(raws[3:])) == list(EntryRows().rows(raws))
    assert feed.offset(feed.entries[-1])["row"] == len(list(EntryRows().rows(raws)))  # the tail: all rows


def test_a_replayed_snapshot_batch_without_the_source_option_is_an_error() -> None:
    """A checkpoint's last micro-batch that reads snapshot chunks, replayed by a query started
    without the snapshot's ``source``: an error naming the option, not its chunks left out."""
    reader = CanalStreamReader({"address": "127.0.0.1:1", "destination": "d"})
    start = {"file": "mysql-bin.000003", "pos": 4, "k": 0, "snap": {"left": [["db", "t"]]}}
    end = {**start, "snap": {"left": [["db", "t"]], "read": [["db", "t", None, [50000]]]}}
    with pytest.raises(
        ValueError, match="destination d: .* mysql-bin.000003:4 reads snapshot chunks.* no source option"
    ):
        reader.partitions(start, end)
    assert reader.partitions(start, {**start, "tick": 1}) == []  # no chunks: nothing to say


def test_the_runner_keys_entries_across_files_and_messages() -> None:
    """Each queued entry's key is ``entry_key`` of its position and its rank there: the rank goes
    on across a message boundary at one position and starts again at a new position or file (a
    rotation to a file of the same offset, and past ``.999999``)."""
    from pycanal.client import Message
    from pycanal.spark.canal_feed import Feed, entry_key
    from pycanal.spark.canal_options import canal_options

    def raw(kind: int, file: str, pos: int) -> bytes:
        e = pb.Entry(entryType=kind)
        e.header.logfileName, e.header.logfileOffset = file, pos
        return e.SerializeToString()

    B, E, Q = pb.TRANSACTIONBEGIN, pb.TRANSACTIONEND, pb.ROWDATA
    at = [
        (B, "mysql-bin.000009", 4), (E, "mysql-bin.000009", 4), (B, "mysql-bin.000009", 4),
        (E, "mysql-bin.000009", 90), (Q, "mysql-bin.000009", 90), (B, "mysql-bin.000010", 90),
        (E, "mysql-bin.000010", 90), (B, "mysql-bin.999999", 7), (E, "mysql-bin.1000000", 7),
        (Q, "mysql-bin.1000000", 7),
    ]  # fmt: skip
    feed = Feed(canal_options({"address": "127.0.0.1:1", "destination": "d"}))
    for batch, (start, end) in enumerate([(0, 2), (2, 5), (5, 10)]):
        feed.ingest(Message(batch, [raw(*a) for a in at[start:end]]))
    ranks = [0, 1, 2, 0, 1, 0, 1, 0, 0, 1]
    assert [q.key for q in feed.entries] == [
        entry_key(f, p, k) for (_, f, p), k in zip(at, ranks, strict=True)
    ]
    assert sorted(q.key for q in feed.entries) == [q.key for q in feed.entries]


def test_a_stalled_runner_says_so_fetches_again_then_fails(
    canal: Canal, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The watchdog: a runner that holds entries and plans nothing from them for stallTimeout
    (here a planner that never plans: any stall to come) logs why and fetches them again, then
    fails the query rather than sit still; Spark's progress shows how long it has been stuck."""
    from pycanal.spark.canal_feed import Feed

    name = f"canal_stuck_{uuid.uuid4().hex[:8]}"
    destination, _start = canal.destination(name)
    run_sql(canal.db, name, [["CREATE TABLE t (id INT PRIMARY KEY)"], ["INSERT INTO t VALUES (1)"]])
    monkeypatch.setattr(Feed, "plan_end", lambda self, top, drained: None)
    options = {"address": f"127.0.0.1:{canal.tcp.port}", "destination": destination, "stallTimeout": "1"}
    reader = CanalStreamReader(options)
    try:
        offset = reader.initialOffset()
        deadline = time.monotonic() + 30
        with pytest.raises(
            RuntimeError, match=r"no micro-batch for \d+s while \d+ entries .* also after fetching"
        ):
            while time.monotonic() < deadline:
                assert reader.latestOffset(offset, ReadAllAvailable()) == offset
                time.sleep(0.2)
        report = reader.reportLatestOffset()
        assert report is not None and report["queued"] > 0 and report["stuck"] >= 1
    finally:
        reader.stop()
    assert "rolling back and fetching them again" in caplog.text
    with pytest.raises(ValueError, match="option stallTimeout .soon.: must be seconds"):
        CanalStreamReader({**options, "stallTimeout": "soon"})


def test_the_planners_import_neither_the_runners_nor_the_executors_modules() -> None:
    """Spark imports the source's module in a fresh Python process for each planning step of a
    query's start, one after another: the connector and entry queue (the runner's), the entries'
    reader and the stage (the executors'), pyarrow (the schema planner declares a Spark schema),
    and the snapshot's executor side (its binlog window, the stage, the chunk-file writer with
    pandas behind it) load only where they are used."""
    code = (
        "import sys, pycanal.spark.canal_source as c\n"
        "c.CanalDataSource({'address': '127.0.0.1:1', 'stage': '/tmp/s', 'snapshot.lake': '/tmp/l'}).schema()\n"
        "later = ['pycanal.spark.canal_feed', 'pycanal.spark.entry_rows', 'pycanal.spark.stage', 'zstandard',\n"
        "         'pyarrow']\n"
        "print(','.join(m for m in later if m in sys.modules))\n"
        "import pycanal.spark.snapshot  # the runner's snapshot planning\n"
        "executors = ('pycanal.spark.snapshot_read', 'pycanal.snapshot.window', 'pycanal.spark.stage',\n"
        "             'pycanal.spark.chunk_files', 'pandas')\n"
        "print(','.join(m for m in executors if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["", ""]


def test_offsets_number_their_micro_batches_as_spark_does() -> None:
    """An offset that moves numbers the micro-batch after its start's; one that does not move is
    its start (no micro-batch, the same JSON); a checkpoint's offsets without numbers stay so."""
    from pycanal.spark.canal_source import INITIAL_OFFSET, _numbered

    first = _numbered(INITIAL_OFFSET, {"file": "b.000001", "pos": 4, "k": 0})
    assert first["batch"] == 0
    tick = _numbered(first, {**first, "tick": 1})
    assert tick["batch"] == 1
    assert _numbered(tick, dict(tick)) is tick
    old = {"file": "b.000001", "pos": 4, "k": 0}
    assert "batch" not in _numbered(old, {"file": "b.000001", "pos": 9, "k": 0})
