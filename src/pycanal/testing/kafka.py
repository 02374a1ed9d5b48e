"""A private, throw-away Apache Kafka broker for tests, benchmarks and the demo.

``PrivateKafka`` runs Kafka 4 from the jars ``scripts/setup.sh`` copies out of Maven Central
(``scripts/kafka/pom.xml``) with the machine's Java: one KRaft node that is both broker and controller,
in a temporary directory, on two free loopback ports. Kafka 4 has no ZooKeeper mode and no tarball on
Maven Central, so the fixture does what the tarball's scripts do: ``kafka.tools.StorageTool format`` the
log directory with a fresh cluster id, then ``kafka.Kafka server.properties``. It is ready when a topic
can be created and listed (a broker that answers metadata requests may still lack a quorum leader).

    with PrivateKafka(partitions=3) as kafka:
        kafka.bootstrap_servers          # "127.0.0.1:<port>"
        kafka.create_topic("t", partitions=3)
        kafka.records("t")               # every record, partition by partition
        kafka.restart(kill=True)         # same ports and log dirs: the records survive

The internal topics have replication factor 1 and few partitions, and the JVM a small heap: a broker for
one machine's tests, not for measuring Kafka.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._process import PortTaken, PrivateServer, find_java, free_port, tail

__all__ = ["KAFKA_VERSION", "KafkaRecord", "KafkaStartError", "PrivateKafka", "kafka_home"]

KAFKA_VERSION = "4.4.0"
"""The Kafka release that runs: ``kafka.version`` in scripts/kafka/pom.xml."""

_READY_TOPIC = "__pycanal_ready"
_log = logging.getLogger(__name__)


class KafkaStartError(RuntimeError):
    """The private Kafka could not be started or did not become ready."""


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One record read back by :meth:`PrivateKafka.records`."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def kafka_home() -> Path:
    """Where ``setup.sh`` puts Kafka's jars (``lib/``): ``$PYCANAL_KAFKA_HOME``, else
    ``~/.cache/pycanal/kafka-<version>``."""
    override = os.environ.get("PYCANAL_KAFKA_HOME")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "pycanal" / f"kafka-{KAFKA_VERSION}"


def _kafka_lib() -> Path:
    lib = kafka_home() / "lib"
    if not any(lib.glob("kafka_2.13-*.jar")):
        raise FileNotFoundError(
            f"Kafka {KAFKA_VERSION}'s jars are not in {lib}: run scripts/setup.sh (mvn copies them there) "
            "or point PYCANAL_KAFKA_HOME at a directory with lib/"
        )
    return lib


def _cluster_id() -> str:
    """A Kafka ``Uuid`` string (base64url, no padding) as ``StorageTool random-uuid`` makes, without
    a JVM: not the zero or metadata-topic id, not starting with ``-`` (it would read as an option)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if int.from_bytes(raw, "big") > 1 and not text.startswith("-"):
            return text


class PrivateKafka(PrivateServer):
    """A single-node KRaft Kafka in a temporary directory (see the module docstring).

    Parameters:
        partitions: ``num.partitions``, the partition count of an auto-created topic.
        auto_create: ``auto.create.topics.enable``: False makes a send to a missing topic fail.
        heap_mb: the JVM's ``-Xmx`` (and ``-Xms``).
        properties: more ``server.properties`` keys (last wins), e.g. ``{"message.max.bytes": 2_000_000}``.
        keep, startup_timeout, base_dir, die_with_parent: see
            :class:`~pycanal.testing._process.PrivateServer`.
    """

    name = "Kafka"
    dir_prefix = "kafka"
    start_error = KafkaStartError
    stop_grace = 20.0

    def __init__(
        self,
        *,
        partitions: int = 1,
        auto_create: bool = True,
        heap_mb: int = 512,
        properties: Mapping[str, object] | None = None,
        keep: bool = False,
        startup_timeout: float = 90.0,
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            keep=keep, startup_timeout=startup_timeout, base_dir=base_dir, die_with_parent=die_with_parent
        )
        self.partitions = int(partitions)
        self.auto_create = auto_create
        self.heap_mb = heap_mb
        self.properties = dict(properties or {})
        self.controller_port = 0
        self.cluster_id = ""
        self.data_dir: Path | None = None
        self.config_file: Path | None = None
        self.log_file: Path | None = None
        self.out_file: Path | None = None
        self.format_log: Path | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The clients' ``bootstrap.servers`` (Canal's ``kafka.bootstrap.servers``)."""
        return f"{self.host}:{self.port}"

    # ------------------------------------------------------------------ clients
    def admin(self) -> Any:
        """A confluent-kafka ``AdminClient`` on this broker."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config())

    def client_config(self, **more: object) -> dict[str, object]:
        """A confluent-kafka client configuration for this broker; librdkafka's log lines go to the
        ``pycanal.testing.kafka`` logger instead of stderr."""
        return {"bootstrap.servers": self.bootstrap_servers, "logger": _log, **more}

    def create_topic(self, name: str, partitions: int | None = None, timeout: float = 30.0) -> None:
        """Create ``name`` (``partitions`` default: the broker's ``num.partitions``) and wait until
        the broker's metadata lists every partition with a leader."""
        from confluent_kafka.admin import NewTopic

        count = self.partitions if partitions is None else int(partitions)
        admin = self.admin()  # referenced until the futures are done: its end cancels them
        futures = admin.create_topics([NewTopic(name, count, 1)], operation_timeout=timeout)
        futures[name].result(timeout)
        self._wait_for_leaders(name, count, timeout)

    def topics(self) -> dict[str, int]:
        """Every topic but Kafka's internal ones and the readiness probe's, with its partition count."""
        meta = self.admin().list_topics(timeout=10)
        return {
            name: len(topic.partitions) for name, topic in meta.topics.items() if not name.startswith("__")
        }

    def records(self, topic: str, timeout: float = 30.0, *, committed: bool = False) -> list[KafkaRecord]:
        """Every record of ``topic`` up to its high watermarks, partition by partition in offset order
        (read with partitions assigned directly: no consumer group, nothing committed). With
        ``committed`` the consumer is ``read_committed``: up to the last stable offsets, without the
        records of aborted transactions."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            self.client_config(
                **{
                    "group.id": "pycanal-testing",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed" if committed else "read_uncommitted",
                }
            )
        )
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is not None:
                raise KeyError(f"topic {topic!r}: {meta.error}")
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in meta.partitions
            }
            todo = {p for p, (low, high) in ends.items() if high > low}
            consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in sorted(todo)])
            out: dict[int, list[KafkaRecord]] = {p: [] for p in ends}
            deadline = time.monotonic() + timeout
            while todo:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic!r}: partitions {sorted(todo)} not read to the end")
                for msg in consumer.consume(1000, 1.0):
                    part = msg.partition()
                    if msg.error() is None:
                        headers = tuple(msg.headers() or ())
                        out[part].append(
                            KafkaRecord(topic, part, msg.offset(), msg.key(), msg.value(), headers)
                        )
                        if msg.offset() + 1 >= ends[part][1]:
                            todo.discard(part)
                    elif msg.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(part)
                    else:
                        raise RuntimeError(f"reading {topic!r}: {msg.error()}")
            return [record for p in sorted(out) for record in out[p]]
        finally:
            consumer.close()

    def restart(self, kill: bool = False) -> None:
        """Stop the broker (SIGTERM and a controlled shutdown, or SIGKILL with ``kill=True``) and start
        it again on the same ports and log directory: topics and records survive."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            raise RuntimeError("PrivateKafka is not running")
        if kill:
            proc.kill()
            proc.wait(10)
        else:
            super()._shut_down()
        try:
            self._launch_and_wait(fresh=False)
        except PortTaken:
            raise KafkaStartError(f"Kafka could not bind port {self.port} again on restart") from None

    # ------------------------------------------------------------------ internals
    def _start(self) -> None:
        assert self.root_dir is not None
        self.data_dir = self.root_dir / "data"
        self.config_file = self.root_dir / "server.properties"
        self.log_file = self.root_dir / "kafka.log"
        self.out_file = self.root_dir / "kafka.out"
        self.format_log = self.root_dir / "format.log"
        self._launch_on_free_port(self._launch_and_wait)

    def _log_files(self) -> list[Path]:
        return [p for p in (self.format_log, self.out_file, self.log_file) if p is not None and p.exists()]

    def _server_properties(self) -> dict[str, object]:
        host, data = self.host, self.data_dir
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{host}:{self.port},CONTROLLER://{host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": data,
            "num.partitions": self.partitions,
            "auto.create.topics.enable": str(self.auto_create).lower(),
            # One node: every internal topic has one replica, and few partitions to create.
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            # A 2-core machine shares the broker with the servers under test.
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
        }
        props.update(self.properties)
        return props

    def _write_config(self) -> None:
        assert self.config_file is not None
        lines = [f"{key}={value}" for key, value in self._server_properties().items()]
        self.config_file.write_text("# written by PrivateKafka\n" + "\n".join(lines) + "\n")

    def _java(self, main: str, *args: str, log: Path) -> list[str]:
        return [
            find_java(),
            f"-Xms{min(self.heap_mb, 256)}m",
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start-up
            "-Xshare:auto",
            "-Djava.awt.headless=true",
            f"-Dorg.slf4j.simpleLogger.logFile={log}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
            # Every client and component logs its whole configuration at INFO: hundreds of lines each.
            "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.config=warn",
            "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaConfig=warn",
            "-cp",
            f"{_kafka_lib()}/*",
            main,
            *args,
        ]

    def _format(self) -> None:
        """``StorageTool format`` the log directory with a new cluster id (a fresh directory)."""
        assert self.config_file is not None and self.format_log is not None and self.root_dir is not None
        self.cluster_id = _cluster_id()
        cmd = self._java(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(self.config_file),
            log=self.format_log,
        )
        with open(self.format_log, "ab") as out:
            proc = subprocess.run(cmd, cwd=self.root_dir, stdout=out, stderr=subprocess.STDOUT, timeout=120)
        if proc.returncode != 0:
            raise KafkaStartError(
                f"Kafka's StorageTool format failed (exit {proc.returncode}); {self.format_log}:\n"
                f"{tail(self.format_log)}"
            )

    def _launch_and_wait(self, fresh: bool = True) -> None:
        """Format (when ``fresh``), start the broker on ``self.port`` and wait until a topic can be
        created and listed."""
        assert self.root_dir is not None and self.out_file is not None and self.log_file is not None
        assert self.data_dir is not None
        if fresh:
            self.controller_port = free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
            if self.data_dir.exists():  # left by a try on a taken port
                shutil.rmtree(self.data_dir)
            self._write_config()
            self._format()
        self._launch(
            self._java("kafka.Kafka", str(self.config_file), log=self.log_file),
            self.out_file,
            cwd=self.root_dir,
            append=not fresh,
        )
        self._wait(self._not_ready, interval=0.2)

    def _not_ready(self) -> str | None:
        """None once the probe topic was created (or exists) and is listed with a leader; then it
        is deleted again."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        if not self._port_open():
            return f"accepted no connection on {self.bootstrap_servers}"
        admin = self.admin()
        try:
            futures = admin.create_topics(
                [NewTopic(_READY_TOPIC, 1, 1)], operation_timeout=5, request_timeout=5
            )
            try:
                futures[_READY_TOPIC].result(10)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    return f"created no topic ({exc.args[0].str()})"
            meta = admin.list_topics(_READY_TOPIC, timeout=5).topics.get(_READY_TOPIC)
            if meta is None or meta.error is not None or any(p.leader < 0 for p in meta.partitions.values()):
                return "listed no leader for a new topic"
        except KafkaException as exc:
            return f"served no admin request ({exc})"
        with contextlib.suppress(Exception):
            admin.delete_topics([_READY_TOPIC], operation_timeout=5)[_READY_TOPIC].result(10)
        return None

    def _port_open(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            return s.connect_ex((self.host, self.port)) == 0

    def _wait_for_leaders(self, name: str, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        admin = self.admin()
        while True:
            meta = admin.list_topics(name, timeout=5).topics.get(name)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == count
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout:g}s")
            time.sleep(0.05)

    def __repr__(self) -> str:
        return f"<PrivateKafka {KAFKA_VERSION} {self._state} bootstrap={self.bootstrap_servers}>"
