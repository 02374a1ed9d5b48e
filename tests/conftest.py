"""Shared pytest fixtures: private MariaDB servers and the shared binlog fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from binlog_fixtures import FIXTURES_DIR
from pycanal.testing import PrivateMariaDB

_SERVER_FIXTURES = {"mariadb", "mariadb_minimal", "mariadb_factory"}


# `make test` runs the suite on a few workers (pytest-xdist, `--dist loadfile
# --no-loadscope-reorder`, TEST_WORKERS): a worker takes one file (or the lane below) at a time, in
# the order of the collection sorted here. The lane: the files whose jobs start several JVMs
# and wait on deadlines run one after another on one worker, so no two of them share the two cores
# (run side by side at the end of the suite, as xdist's default reordering by test count put them,
# they missed their deadlines on a loaded CI machine). The lane goes first, then the other files,
# slowest first (their durations in a full run), so that no long file starts last.
_LANE = [
    "test_spark_cluster_hosts.py", "test_spark_restart_backlog.py", "test_spark_snapshot_e2e.py",
    "test_spark_mixed_writers.py", "test_spark_s3.py",
]  # fmt: skip
_SLOW_FIRST = _LANE + [
    "test_spark_kafka.py", "test_mq_kafka.py", "test_cli.py", "test_spark_delta.py", "test_mq_kafka_auth.py",
    "test_cli_errors.py", "test_spark_apply.py", "test_canal_reference.py", "test_spark_tables_by_spark.py",
    "test_event_parser.py", "test_s3_fixture.py", "test_mq_kafka_split.py", "test_parse_worker.py",
    "test_kafka_fixture.py", "test_parallel.py", "test_mq_kafka_canal.py", "test_spark_canal_source.py",
    "test_schema_history_mariadb.py", "test_mq_rabbitmq.py", "test_mysql_live.py", "test_differential_mariadb.py",
    "test_spark_apply_parity.py", "test_mq_kafka_transaction.py", "test_ha.py", "test_snapshot.py",
]  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests that use a private server get the `mariadb` marker (so `-m "not mariadb"` works).
    for item in items:
        if _SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mariadb)
    rank = {name: i for i, name in enumerate(_SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: in-file order kept


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the lane's files as one unit of work (xdist's own ``loadgroup`` marks
    lose their group under pytest 9.2, whose node ids no longer come from ``_nodeid``)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LaneScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "lane" if scope.rsplit("/", 1)[-1] in _LANE else scope

    return LaneScheduling(config, log)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[PrivateMariaDB]:
    """A private MariaDB for the whole session: ROW binlog, CRC32, binlog_row_metadata=FULL.

    Started on first use, stopped at session end.  Shared by all tests: create your own
    uniquely named tables in the `pycanal` database and do not assume an empty binlog
    (use `current_binlog()` before your statements as the starting point)."""
    with PrivateMariaDB(binlog_row_metadata="FULL") as server:
        yield server


@pytest.fixture(scope="session")
def mariadb_minimal() -> Iterator[PrivateMariaDB]:
    """Like `mariadb` but with binlog_row_metadata=MINIMAL (server_id 2)."""
    with PrivateMariaDB(binlog_row_metadata="MINIMAL", server_id=2) as server:
        yield server


@pytest.fixture
def mariadb_factory() -> Iterator[Callable[..., PrivateMariaDB]]:
    """Start extra private servers with custom options, stopped when the test ends:
    `db = mariadb_factory(extra_args=["--log-bin-compress=ON"])`."""
    servers: list[PrivateMariaDB] = []

    def start(**kwargs: Any) -> PrivateMariaDB:
        server = PrivateMariaDB(**kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[Any]:
    """A private ZooKeeper (Debian package, standalone, free loopback port) for the whole session.

    Started on first use, stopped at session end. Shared by all tests: work under a unique chroot
    or unique paths (`zookeeper.client(chroot="/my-test")`)."""
    from pycanal.testing.zookeeper import PrivateZooKeeper

    with PrivateZooKeeper() as server:
        yield server


@pytest.fixture(scope="session")
def kafka() -> Iterator[Any]:
    """A private Kafka 4 broker (KRaft, one node, free loopback ports) for the whole session: topics
    are auto-created with one partition. Started on first use, stopped at session end. Shared by all
    tests: use unique topic names."""
    from pycanal.testing.kafka import PrivateKafka

    with PrivateKafka() as server:
        yield server


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[Any]:
    """A private RabbitMQ node (Debian's rabbitmq-server, free loopback ports, its own epmd) for the
    whole session, user ``pycanal``/``pycanal``. Shared by all tests: use unique queue names."""
    from pycanal.testing.rabbitmq import PrivateRabbitMQ

    with PrivateRabbitMQ() as server:
        yield server


@pytest.fixture
def kafka_factory() -> Iterator[Callable[..., Any]]:
    """Start extra private Kafka brokers with their own options, stopped when the test ends:
    `broker = kafka_factory(auto_create=False, partitions=3)`."""
    from pycanal.testing.kafka import PrivateKafka

    servers: list[PrivateKafka] = []

    def start(**kwargs: Any) -> PrivateKafka:
        server = PrivateKafka(**kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def servers() -> Iterator[list[Any]]:
    """pycanal servers a test started as processes (``mq_kafka_support.Server``), killed at its end."""
    started: list[Any] = []
    yield started
    for server in started:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """`<repo>/../shared/fixtures/binlog`; a missing directory is an error, never a skip."""
    if not FIXTURES_DIR.is_dir():
        pytest.fail(
            f"binlog fixtures directory {FIXTURES_DIR} is missing (expected next to the repository "
            "as shared/fixtures/binlog)",
            pytrace=False,
        )
    return FIXTURES_DIR


@pytest.fixture(params=["local", "cluster"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """None (Spark's master is local[*]), or a standalone cluster (a master and two 1-core
    workers from PySpark's jars, on loopback) started for the test."""
    if request.param == "local":
        yield None
        return
    from pycanal.testing.spark_cluster import SparkStandaloneCluster

    with SparkStandaloneCluster(workers=2, cores=1, memory="1g") as running:
        yield running


@pytest.fixture
def canal_factory(mariadb: PrivateMariaDB) -> Iterator[Callable[..., Any]]:
    """Start Alibaba Canal's own server (`pycanal.testing.canal.PrivateCanal`) on the session's MariaDB,
    stopped when the test ends: `canal = canal_factory(destinations={"example": {"filter.regex": r"..."}})`.
    `source=` another PrivateMariaDB."""
    from pycanal.testing.canal import PrivateCanal

    servers: list[PrivateCanal] = []

    def start(source: PrivateMariaDB | None = None, **kwargs: Any) -> PrivateCanal:
        server = PrivateCanal.for_mariadb(source or mariadb, **kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()
