"""``format("canal")``'s options (docs/spark.md lists them), read and checked in one place: when
the query starts (the runner's feed, its planner and the executors' readers take them from here)
and, the same way, by ``pycanal pipeline`` before it starts Spark (``source_options``); and
the options of a pipeline that reads Canal's topics through Spark's Kafka source
(``kafka_options``). No Spark here, so that a wrong option is named without starting a JVM."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pycanal.config.schema import parse_address
from pycanal.mysql.tls import SSL_MODES
from pycanal.parse.filter import TableFilter
from pycanal.storage import LakePath, lake_path

if TYPE_CHECKING:
    from pycanal.snapshot.reader import Source

__all__ = [
    "KAFKA_RECORDS_PER_BATCH",
    "SIGNALS_MARK",
    "CanalOptions",
    "OptionError",
    "SnapshotOptions",
    "canal_options",
    "check_trigger",
    "kafka_options",
    "snapshot_options",
    "snapshot_requests",
    "source_options",
    "stage_dir",
]


SIGNALS_MARK = "_taken-here"
"""The file a query that takes snapshot requests (``snapshotSignals``) puts in their directory: a
request where none is is refused (and S3 has no empty directories)."""


class OptionError(ValueError):
    """A wrong option: its name, the value given (None: beside the point, and always for a
    password) and why, where ``{name}`` stands for another option. ``text`` words it with the
    caller's names for the options (the command line's flags); ``str`` with Spark's."""

    def __init__(self, option: str, value: object, reason: str) -> None:
        self.option, self.value, self.reason = option, value, reason
        super().__init__("format('canal'): " + self.text(lambda name: f"option {name}"))

    def text(self, name: Callable[[str], str]) -> str:
        given = "" if self.value is None else f" {self.value!r}"
        return f"{name(self.option)}{given}: " + re.sub(r"\{(\w+)\}", lambda m: name(m[1]), self.reason)


class SnapshotOptions(NamedTuple):
    host: str
    port: int
    user: str
    password: str
    chunk_rows: int
    parallelism: int
    initial: bool  # snapshot=initial
    signals: LakePath | None  # the directory of ad-hoc snapshot requests
    reader: str  # connectorx (a chunk's binlog window read by the executor) or pymysql
    server_ids: range  # the window reads' replica ids, one per chunk of a micro-batch
    lake: LakePath | None = None  # where executors write a chunk's current-state data file (``chunk_files``)
    ssl_mode: str = "DISABLED"  # TLS to the source, Canal's sslMode names, on every snapshot connection
    ssl_ca: str = ""  # a PEM file of the CAs VERIFY_CA / VERIFY_IDENTITY check (default: the system's)

    @property
    def source(self) -> Source:
        from pycanal.snapshot.reader import Source  # PyMySQL: not for the schema planner

        return Source(self.host, self.port, self.user, self.password, self.ssl_mode, self.ssl_ca)


class CanalOptions(NamedTuple):
    """The options, Spark's names in snake case (``batchSize``: ``batch_size``)."""

    address: str
    zk_servers: str
    destination: str
    client_id: int
    filter: str
    user: str
    password: str
    timezone: str
    batch_size: int
    batch_bytes: int
    fetch_size: int
    num_partitions: int
    timeout: float
    stall_timeout: float
    stage: LakePath | None
    snapshot: SnapshotOptions | None


_HOST_PORT = "expected HOST:PORT (a port from 1 to 65535)"
# The options that set a snapshot up: they mean nothing without its source.
_SNAPSHOT_ONLY = (
    "sourceUser",
    "sourcePassword",
    "snapshotChunkRows",
    "snapshotParallelism",
    "snapshotReader",
    "snapshotServerIds",
    "snapshotLake",
    "sourceSslMode",
    "sourceSslCa",
)


def _host_port(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[v6]:PORT``) -> (host, port); None when it is not one."""
    try:
        return parse_address(text)
    except ValueError:
        return None


def _int(options: dict[str, str], name: str, default: int, high: int = 2**31 - 1) -> int:
    raw = options.get(name.lower())
    try:
        value = int(raw) if raw is not None else default
    except ValueError:
        raise OptionError(name, raw, "must be an integer") from None
    if not 1 <= value <= high:
        raise OptionError(name, value, f"must be from 1 to {high}")
    return value


def _seconds(options: dict[str, str], name: str, default: float) -> float:
    raw = options.get(name.lower())
    try:
        value = float(raw) if raw is not None else default
    except ValueError:
        raise OptionError(name, raw, "must be seconds (0 or more)") from None
    if not value >= 0:
        raise OptionError(name, value, "must be seconds (0 or more)")
    return value


def _choice(options: dict[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """One of ``allowed``, any case; the first when not given."""
    value = options.get(name.lower(), allowed[0]).lower()
    if value not in allowed:
        raise OptionError(name, value, f"must be one of {', '.join(allowed)}")
    return value


def _server_ids(text: str) -> range:
    low, dash, high = text.partition("-")
    high = high if dash else low
    if not (low.strip().isdigit() and high.strip().isdigit() and 0 < int(low) <= int(high) < 2**32):
        raise OptionError(
            "snapshotServerIds", text, "expected LOW-HIGH (or one id), 0 < LOW <= HIGH < 4294967296"
        )
    return range(int(low), int(high) + 1)


def snapshot_options(options: dict[str, str]) -> SnapshotOptions | None:
    """The snapshot options (``options``: lower-case keys), None when the query takes no snapshot
    (no ``source``)."""
    mode = _choice(options, "snapshot", ("never", "initial"))
    reader = _choice(options, "snapshotReader", ("connectorx", "pymysql"))
    ids = options.get("snapshotserverids", "5400-6399")
    server_ids = _server_ids(ids)
    chunk_rows = _int(options, "snapshotChunkRows", 50_000)
    parallelism = _int(options, "snapshotParallelism", 4)
    source = options.get("source", "")
    if not source:
        if mode == "initial":
            raise OptionError("snapshot", mode, "needs {source} HOST:PORT (the MySQL/MariaDB to read)")
        given = next((name for name in _SNAPSHOT_ONLY if options.get(name.lower())), None)
        if given is not None:
            raise OptionError(given, None, "needs {source} (it sets up the snapshots read there)")
        return None
    at = _host_port(source)
    if at is None:
        raise OptionError("source", source, _HOST_PORT)
    if not options.get("filter"):
        raise OptionError(
            "source",
            source,
            "needs {filter}: the tables a snapshot may read (a client cannot see the server's)",
        )
    if reader == "connectorx" and len(server_ids) < parallelism:
        raise OptionError(
            "snapshotServerIds",
            ids,
            f"{len(server_ids)} ids, fewer than {{snapshotParallelism}} ({parallelism}): each chunk of a "
            "micro-batch reads its binlog window as a replica of its own",
        )
    ssl_mode = options.get("sourcesslmode", "DISABLED").strip().upper()
    if ssl_mode not in SSL_MODES:
        raise OptionError("sourceSslMode", options["sourcesslmode"], f"must be one of {', '.join(SSL_MODES)}")
    ssl_ca = options.get("sourcesslca", "")
    if ssl_ca and not os.path.isfile(ssl_ca):
        raise OptionError("sourceSslCa", ssl_ca, "is not a file (a PEM file of CA certificates)")
    signals, lake = options.get("snapshotsignals"), options.get("snapshotlake")
    return SnapshotOptions(
        *at,
        options.get("sourceuser", ""),
        options.get("sourcepassword", ""),
        chunk_rows,
        parallelism,
        mode == "initial",
        lake_path(signals) if signals else None,
        reader,
        server_ids,
        lake_path(lake) if lake else None,
        ssl_mode,
        ssl_ca,
    )


def canal_options(raw: Any) -> CanalOptions:
    """The options of ``raw`` (Spark's, any case of their names), checked: an ``OptionError``
    names a wrong one."""
    options = {k.lower(): v for k, v in raw.items()}
    address, zk_servers = options.get("address", ""), options.get("zkservers", "")
    if bool(address) == bool(zk_servers):
        raise OptionError("address", None, "give one of {address} HOST:PORT and {zkServers} HOST:PORT[,...]")
    if address and _host_port(address) is None:
        raise OptionError("address", address, _HOST_PORT)
    if zk_servers and any(_host_port(s) is None for s in zk_servers.partition("/")[0].split(",")):
        raise OptionError("zkServers", zk_servers, "expected HOST:PORT[,HOST:PORT...][/chroot]")
    destination = options.get("destination", "")
    if not destination:
        raise OptionError("destination", destination, "give the destination's name")
    client_id = _int(options, "clientId", 1001, 2**15 - 1)  # a Java short in Canal
    table_filter = options.get("filter", "")
    try:
        TableFilter(table_filter)
    except ValueError as exc:
        raise OptionError("filter", table_filter, str(exc)) from None
    batch_size = _int(options, "batchSize", 65536)
    return CanalOptions(
        address,
        zk_servers,
        destination,
        client_id,
        table_filter,
        options.get("user", ""),
        options.get("password", ""),
        options.get("timezone", "UTC"),
        batch_size,
        _int(options, "batchBytes", 32 * 1024 * 1024),
        min(batch_size, _int(options, "fetchSize", 8192)),
        _int(options, "numPartitions", 2),
        _seconds(options, "timeout", 60.0),
        _seconds(options, "stallTimeout", 120.0),
        lake_path(options["stage"]) if options.get("stage") else None,
        snapshot_options(options),
    )


# Records a micro-batch of Canal's topics takes at most (Spark's maxOffsetsPerTrigger): a flat
# message is one entry, a protobuf record one of the server's batches (canal.mq.canalBatchSize).
KAFKA_RECORDS_PER_BATCH = 10_000

# Kafka's topic names (its Topic.validate): 1 to 249 of these characters, not "." or "..".
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


# Consumer settings Spark's Kafka source sets itself and refuses from a user (its docs, "Kafka
# Specific Configurations"), and the brokers, which --kafka gives.
_SPARK_OWNS = frozenset({
    "bootstrap.servers", "group.id", "auto.offset.reset", "key.deserializer", "value.deserializer",
    "enable.auto.commit", "interceptor.classes",
})  # fmt: skip


def kafka_options(
    kafka: str, topic: str = "", topic_pattern: str = "", config: dict[str, str] | None = None
) -> dict[str, str]:
    """The options of Spark's Kafka source reading Canal's topics from the brokers ``kafka``
    (``HOST:PORT[,HOST:PORT...]``): ``topic`` (names, comma-separated) or ``topic_pattern`` (a
    regex), from the earliest offset on the first run (then from the checkpoint's), at most
    ``KAFKA_RECORDS_PER_BATCH`` records a micro-batch (its rows go to the driver: a backlog is
    taken in steps); ``config``: more settings of its consumer (Java client names, as
    ``kafka.<name>``: a secured broker's ``security.protocol``, ``sasl.*``, ``ssl.*``); an
    ``OptionError`` names a wrong one (``kafka``, ``topic``, ``topicPattern``, ``kafkaConfig``)."""
    if not kafka or any(_host_port(one) is None for one in kafka.split(",")):
        raise OptionError("kafka", kafka, "expected HOST:PORT[,HOST:PORT...] (a port from 1 to 65535)")
    if bool(topic) == bool(topic_pattern):
        raise OptionError("kafka", None, "give one of {topic} NAME[,NAME...] and {topicPattern} REGEX")
    options = {
        "kafka.bootstrap.servers": kafka,
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
        "maxOffsetsPerTrigger": str(KAFKA_RECORDS_PER_BATCH),
        # A server with canal.mq.transaction = true leaves aborted records in its topics: they
        # are skipped (and a topic without transactions reads the same).
        "kafka.isolation.level": "read_committed",
        "includeHeaders": "true",  # pycanal.order: how a topic's partitions are merged
    }
    for key in config or {}:
        if key in _SPARK_OWNS or not key:
            raise OptionError(
                "kafkaConfig",
                key,
                "set by Spark's Kafka source itself (or by {kafka}): not a setting to give",
            )
        options[f"kafka.{key}"] = config[key]  # type: ignore[index]
    if topic:
        names = topic.split(",")
        bad = next((n for n in names if not _TOPIC.fullmatch(n) or n in (".", "..")), None)
        if bad is not None:
            raise OptionError("topic", bad, "a topic name is 1 to 249 of a-z A-Z 0-9 . _ - (not . or ..)")
        return options | {"subscribe": topic}
    try:
        re.compile(topic_pattern)
    except re.error as exc:
        raise OptionError("topicPattern", topic_pattern, f"not a regex: {exc}") from None
    return options | {"subscribePattern": topic_pattern}


# A processing-time trigger as Spark reads it (its interval strings): "1 second", "500
# milliseconds", "interval 1 minute 30 seconds": units spelled out, a fraction (9 digits) of seconds only.
_TERM = r"\+?(\d+\s+(week|day|hour|minute|millisecond|microsecond)|(\d+\.?\d{0,9}|\.\d{1,9})\s+second)s?"
_TRIGGER = re.compile(rf"\s*(interval\s+)?{_TERM}(\s+{_TERM})*\s*", re.I)


def check_trigger(trigger: str) -> None:
    """A processing-time interval Spark takes: Spark itself finds a wrong one only once the
    query starts. ValueError says what is wrong."""
    if not _TRIGGER.fullmatch(trigger):
        raise ValueError(
            "expected an interval such as '1 second', '500 milliseconds' or '2 minutes' (units spelled out)"
        )


def source_options(
    lake: str | Path,
    *,
    address: str | None = None,
    zk_servers: str | None = None,
    destination: str = "example",
    client_id: int = 1001,
    filter: str = "",
    user: str = "",
    password: str = "",
    batch_size: int | None = None,
    batch_bytes: int | None = None,
    stall_timeout: float | None = None,
    stage: bool = True,
    snapshot: str = "never",
    source: str = "",
    source_user: str = "",
    source_password: str = "",
    source_ssl_mode: str | None = None,
    source_ssl_ca: str | None = None,
    snapshot_chunk_rows: int | None = None,
    snapshot_parallelism: int | None = None,
    snapshot_reader: str | None = None,
    snapshot_server_ids: str | None = None,
    kafka: str | None = None,
    kafka_config: dict[str, str] | None = None,
    topic: str = "",
    topic_pattern: str = "",
) -> dict[str, str]:
    """``format("canal")``'s options for a pipeline into ``lake``, checked as the query will
    check them (``canal_options``: an ``OptionError`` names a wrong one), so that a caller can
    refuse them before Spark starts. ``batch_size``, ``batch_bytes``: the source's ``batchSize``
    and ``batchBytes``, entries and bytes per micro-batch; ``stage``: the executors hand the rows
    to the driver as files in the lake's stage, not through Spark; ``snapshot`` ``"initial"``: the
    existing rows of the filter's tables first, read from ``source`` (HOST:PORT) as
    ``source_user`` (TLS: ``source_ssl_mode``, ``source_ssl_ca``), see ``pycanal.spark.snapshot``
    (``snapshot_reader``, ``snapshot_server_ids``: its options ``snapshotReader``, ``snapshotServerIds``;
    ``stall_timeout``: its ``stallTimeout``, seconds without progress before its watchdog acts);
    with a ``source`` the pipeline also takes ad-hoc snapshot requests, ``pycanal snapshot --lake``.
    ``kafka`` (brokers, HOST:PORT[,...]) with ``topic`` or ``topic_pattern``: Canal's topics read
    through Spark's Kafka source instead of a server (``canal_options.kafka_options``, with
    ``kafka_config``: its consumer's settings); the server's options, its filter and the snapshot
    then have no meaning and are refused."""
    if kafka or topic or topic_pattern:
        given = {"address": address, "zkServers": zk_servers, "filter": filter, "user": user,
                 "batchSize": batch_size, "batchBytes": batch_bytes, "snapshot": snapshot != "never",
                 "source": source, "snapshotChunkRows": snapshot_chunk_rows,
                 "snapshotParallelism": snapshot_parallelism, "snapshotReader": snapshot_reader,
                 "snapshotServerIds": snapshot_server_ids, "sourceSslMode": source_ssl_mode,
                 "sourceSslCa": source_ssl_ca}  # fmt: skip
        name = next((n for n, v in given.items() if v), None)
        if name is not None:
            raise OptionError(name, None, "a server's option: {kafka} reads Canal's topics instead")
        if not kafka:
            raise OptionError(
                "topic" if topic else "topicPattern", None, "needs {kafka} HOST:PORT (the brokers)"
            )
        return kafka_options(kafka, topic, topic_pattern, kafka_config)
    if kafka_config:
        raise OptionError("kafkaConfig", None, "needs {kafka} HOST:PORT (a setting of the Kafka consumer)")
    if not address and not zk_servers:
        raise OptionError(
            "address",
            None,
            "give one of {address} HOST:PORT, {zkServers} HOST:PORT[,...] and {kafka} HOST:PORT",
        )
    lake = lake_path(lake)
    options: dict[str, Any] = {
        "destination": destination, "clientId": client_id, "filter": filter, "address": address or None,
        "zkServers": zk_servers or None, "batchSize": batch_size or None, "batchBytes": batch_bytes or None,
        "stallTimeout": stall_timeout, "stage": stage_dir(lake) if stage else None, "snapshot": snapshot,
        "source": source or None, "sourceUser": source_user or None, "sourcePassword": source_password or None,
        "sourceSslMode": source_ssl_mode, "sourceSslCa": source_ssl_ca,
        "snapshotSignals": snapshot_requests(lake) if source else None, "snapshotLake": lake if source else None,
        "snapshotChunkRows": snapshot_chunk_rows, "snapshotParallelism": snapshot_parallelism,
        "snapshotReader": snapshot_reader, "snapshotServerIds": snapshot_server_ids,
    }  # fmt: skip
    if user:
        options.update(user=user, password=password)
    checked = {k: str(v) for k, v in options.items() if v is not None}
    canal_options(checked)
    return checked


def snapshot_requests(lake: str | Path | LakePath) -> LakePath:
    """Where a pipeline into ``lake`` takes ad-hoc snapshot requests from."""
    return lake_path(lake) / "_pycanal" / "snapshot-requests"


def stage_dir(target_dir: str | Path | LakePath) -> LakePath:
    """Where the pipeline into ``target_dir`` has executors stage their rows (the source's
    ``stage``): the micro-batch's rows come from there (``expand_staged``)."""
    return lake_path(target_dir) / "_pycanal" / "stage"
