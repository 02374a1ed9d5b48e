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

With ``secured=True`` the one client listener is SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)
and KRaft's ``StandardAuthorizer`` denies whatever no ACL allows, as a production cluster is set up:

    with PrivateKafka(secured=True, users=("canal",)) as kafka:   # or {"canal": "its password"}
        kafka.passwords["canal"]         # generated unless given; the same for PLAIN and SCRAM
        kafka.grant("canal", "WRITE", "DESCRIBE", topic="t")
        kafka.user_config("canal", "SCRAM-SHA-512")   # a confluent-kafka configuration as that user

Its own calls (:meth:`~PrivateKafka.admin`, :meth:`~PrivateKafka.records`, the readiness probe) and the
broker's inter-broker and controller connections log in as the super user ``admin``.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._process import PrivateServer, find_java, free_port, tail

__all__ = [
    "ADMIN_USER",
    "KAFKA_VERSION",
    "SASL_MECHANISMS",
    "KafkaRecord",
    "KafkaStartError",
    "PrivateKafka",
    "jaas_quote",
    "kafka_home",
]

KAFKA_VERSION = "4.4.0"
"""The Kafka release that runs: ``kafka.version`` in scripts/kafka/pom.xml."""

_READY_TOPIC = "__pycanal_ready"
ADMIN_USER = "admin"
"""The secured broker's super user: the fixture's own client, inter-broker and controller logins."""
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
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


def jaas_quote(value: str) -> str:
    """``value`` as a double-quoted JAAS option value (``\\`` and ``"`` escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _properties_value(text: str) -> str:
    """``text`` as a ``.properties`` value that reads back as itself (backslashes, line breaks)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


class PrivateKafka(PrivateServer):
    """A single-node KRaft Kafka in a temporary directory (see the module docstring).

    Parameters:
        partitions: ``num.partitions``, the partition count of an auto-created topic.
        auto_create: ``auto.create.topics.enable``: False makes a send to a missing topic fail.
        heap_mb: the JVM's ``-Xmx`` (and ``-Xms``).
        properties: more ``server.properties`` keys (last wins), e.g. ``{"message.max.bytes": 2_000_000}``.
        secured: a SASL_PLAINTEXT listener and the ``StandardAuthorizer`` (see the module docstring).
        users: with ``secured``, the users besides ``admin`` (PLAIN and SCRAM logins): names, whose
            passwords are generated, or names and passwords.
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
        secured: bool = False,
        users: Iterable[str] | Mapping[str, str] = (),
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
        self.secured = secured
        given = dict(users) if isinstance(users, Mapping) else {name: "" for name in users}
        if given and not secured:
            raise ValueError("PrivateKafka: users need secured=True")
        if ADMIN_USER in given:
            raise ValueError(f"PrivateKafka: {ADMIN_USER!r} is the fixture's own super user")
        self.passwords: dict[str, str] = (
            {
                name: password or secrets.token_urlsafe(12)
                for name, password in {ADMIN_USER: "", **given}.items()
            }
            if secured
            else {}
        )
        """Each user's password (PLAIN and SCRAM alike), ``admin`` included; empty unless secured."""
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
        """A confluent-kafka client configuration for this broker (secured: logged in as ``admin``);
        librdkafka's log lines go to the ``pycanal.testing.kafka`` logger instead of stderr."""
        if self.secured:
            return self.user_config(ADMIN_USER, **more)
        return {"bootstrap.servers": self.bootstrap_servers, "logger": _log, **more}

    def user_config(self, user: str, mechanism: str = "PLAIN", **more: object) -> dict[str, object]:
        """A confluent-kafka client configuration logged in as ``user`` of the secured broker with
        ``mechanism`` (one of :data:`SASL_MECHANISMS`)."""
        if not self.secured:
            raise RuntimeError("PrivateKafka.user_config: the broker is not secured")
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r}: one of {', '.join(SASL_MECHANISMS)}")
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": self.passwords[user],
            "logger": _log,
            **more,
        }

    def grant(
        self,
        user: str,
        *operations: str,
        topic: str | None = None,
        group: str | None = None,
        transactional_id: str | None = None,
        cluster: bool = False,
        prefixed: bool = False,
        timeout: float = 30.0,
    ) -> None:
        """Allow ``user`` the ``operations`` (``"WRITE"``, ``"DESCRIBE"``, ``"READ"``,
        ``"IDEMPOTENT_WRITE"``, ... Kafka's names) on one resource: a topic, a consumer group, a
        transactional id (each a literal name, or a prefix with ``prefixed``) or the cluster. Returns
        once the broker's authorizer holds them."""
        self._acls(True, user, operations, topic, group, transactional_id, cluster, prefixed, timeout)

    def revoke(
        self,
        user: str,
        *operations: str,
        topic: str | None = None,
        group: str | None = None,
        transactional_id: str | None = None,
        cluster: bool = False,
        prefixed: bool = False,
        timeout: float = 30.0,
    ) -> None:
        """Remove what :meth:`grant` allowed (the same arguments)."""
        self._acls(False, user, operations, topic, group, transactional_id, cluster, prefixed, timeout)

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
            deadline = time.monotonic() + timeout
            ends = self._watermarks(consumer, topic, deadline)
            todo = {p for p, (low, high) in ends.items() if high > low}
            consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in sorted(todo)])
            out: dict[int, list[KafkaRecord]] = {p: [] for p in ends}
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
        self._restart(kill, lambda: self._launch_and_wait(fresh=False))

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _watermarks(consumer: Any, topic: str, deadline: float) -> dict[int, tuple[int, int]]:
        """Each partition's (low, high) offsets. While a partition has no leader yet (right after
        the topic is created or auto-created) the broker's answer is asked again until
        ``deadline``; librdkafka does not flag those errors retriable here."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        electing = {
            KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError.LEADER_NOT_AVAILABLE,
            KafkaError._TIMED_OUT,
        }
        while True:
            try:
                meta = consumer.list_topics(topic, timeout=10).topics[topic]
                if meta.error is None:
                    return {
                        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                        for p in meta.partitions
                    }
                error = meta.error
            except KafkaException as exc:
                error = exc.args[0]
            if error.code() not in electing:
                raise KeyError(f"topic {topic!r}: {error}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic!r}: {error}")
            time.sleep(0.2)

    def _acls(
        self,
        allow: bool,
        user: str,
        operations: tuple[str, ...],
        topic: str | None,
        group: str | None,
        transactional_id: str | None,
        cluster: bool,
        prefixed: bool,
        timeout: float,
    ) -> None:
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        if not self.secured:
            raise RuntimeError("PrivateKafka: ACLs need secured=True")
        resources = [
            (kind, name)
            for kind, name in (
                (ResourceType.TOPIC, topic),
                (ResourceType.GROUP, group),
                (ResourceType.TRANSACTIONAL_ID, transactional_id),
                (ResourceType.BROKER, "kafka-cluster" if cluster else None),  # Kafka's CLUSTER
            )
            if name is not None
        ]
        if len(resources) != 1 or not operations:
            raise ValueError("give operations and one of topic, group, transactional_id, cluster")
        kind, name = resources[0]
        pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
        principal = f"User:{user}"
        wanted = {AclOperation[op.upper()] for op in operations}
        admin = self.admin()
        if allow:
            bindings = [
                AclBinding(kind, name, pattern, principal, "*", op, AclPermissionType.ALLOW) for op in wanted
            ]
            futures = admin.create_acls(bindings, request_timeout=timeout)
        else:
            filters = [
                AclBindingFilter(kind, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
                for op in wanted
            ]
            futures = admin.delete_acls(filters, request_timeout=timeout)
        for future in futures.values():
            future.result(timeout)
        # The broker answers once the controller committed them; its authorizer holds them once
        # DescribeAcls (which it answers from the authorizer) lists them.
        match = AclBindingFilter(
            kind, name, pattern, principal, "*", AclOperation.ANY, AclPermissionType.ALLOW
        )
        deadline = time.monotonic() + timeout
        while True:
            listed = {
                b.operation for b in admin.describe_acls(match, request_timeout=timeout).result(timeout)
            }
            if (wanted <= listed) if allow else not (wanted & listed):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"ACLs of User:{user} on {name!r} not {'in' if allow else 'out of'} effect"
                )
            time.sleep(0.05)

    def _add_scram_users(self, timeout: float = 30.0) -> None:
        """Every user's SCRAM-SHA-256 and -512 credentials (PLAIN ones are in the listener's JAAS
        line); returns once each can log in with each."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = self.admin()
        for mechanism in (
            ScramMechanism.SCRAM_SHA_256,
            ScramMechanism.SCRAM_SHA_512,
        ):  # a user once a request
            upserts = [
                UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
                for user, password in self.passwords.items()
            ]
            for future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout).values():
                future.result(timeout)
        deadline = time.monotonic() + timeout
        for user in self.passwords:
            for mechanism in SASL_MECHANISMS[1:]:
                while True:
                    try:
                        AdminClient(self.user_config(user, mechanism)).list_topics(timeout=2)
                        break
                    except KafkaException:
                        if time.monotonic() > deadline:
                            raise KafkaStartError(
                                f"{mechanism} login of {user!r} refused\n{self.logs()}"
                            ) from None

    def _sasl_properties(self) -> dict[str, object]:
        """The secured broker's listener, authorizer and logins (``admin`` for its own connections)."""
        admin = f"username={jaas_quote(ADMIN_USER)} password={jaas_quote(self.passwords[ADMIN_USER])}"
        users = " ".join(f"user_{name}={jaas_quote(password)}" for name, password in self.passwords.items())
        plain = _properties_value(f"{_PLAIN_MODULE} required {admin} {users};")
        scram = f"{_SCRAM_MODULE} required;"
        return {
            "listeners": f"SASL_PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"SASL_PLAINTEXT://{self.host}:{self.port}",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram,
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN_USER}",
        }

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
        if self.secured:
            props.update(self._sasl_properties())
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
        if fresh and self.secured:
            self._add_scram_users()

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
