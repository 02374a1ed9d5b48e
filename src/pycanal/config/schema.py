"""The typed schema of Canal's configuration keys: type, Canal's default, scope and meaning.

``KEYS`` maps each supported key to a :class:`Key`. ``PASSTHROUGH_PREFIXES`` and
``PASSTHROUGH_PATTERNS`` name keys that are known to Canal (MQ, cloud, per-destination overrides)
and accepted without typing or warning (``kafka.*``, ``rabbitmq.*``, ...: the broker clients'
keys). Any other key draws a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEYS",
    "PASSTHROUGH_PATTERNS",
    "PASSTHROUGH_PREFIXES",
    "Key",
    "is_known",
]


class _BadValue(ValueError):
    pass


def _str(raw: str) -> str:
    return raw.strip()


def _opt_str(raw: str) -> str | None:
    raw = raw.strip()
    return raw or None


def _raw(raw: str) -> str:
    return raw  # regexes and SQL: whitespace may matter; only outer blanks are trimmed below


def _int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise _BadValue("not an integer") from None


def _opt_int(raw: str) -> int | None:
    return None if not raw.strip() else _int(raw)


def _opt_positive(raw: str) -> int | None:
    return None if not raw.strip() else _positive(_int)(raw)


def _bool(raw: str) -> bool:
    v = raw.strip().lower()
    if v == "true":
        return True
    if v in ("false", ""):
        return False
    raise _BadValue("not a boolean (true or false)")


def _positive(parse: Callable[[str], int]) -> Callable[[str], int]:
    def check(raw: str) -> int:
        v = parse(raw)
        if v <= 0:
            raise _BadValue("must be > 0")
        return v

    return check


def _non_negative(raw: str) -> int:
    v = _int(raw)
    if v < 0:
        raise _BadValue("must be >= 0")
    return v


def _power_of_two(raw: str) -> int:
    v = _int(raw)
    if v <= 0 or v & (v - 1):
        raise _BadValue("must be a power of 2 (> 0)")
    return v


def _port(raw: str) -> int:
    v = _int(raw)
    if not 1 <= v <= 65535:
        raise _BadValue("not a TCP port (1..65535)")
    return v


def parse_address(raw: str) -> tuple[str, int]:
    text = raw.strip()
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port:
        raise _BadValue("not an address (host:port)")
    try:
        number = int(port)
    except ValueError:
        raise _BadValue("not an address (host:port): bad port") from None
    if not 1 <= number <= 65535:
        raise _BadValue("not an address (host:port): port out of 1..65535")
    return host, number


def _opt_address(raw: str) -> tuple[str, int] | None:
    return None if not raw.strip() else parse_address(raw)


def _list(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _enum(*choices: str) -> Callable[[str], str]:
    by_lower = {c.lower(): c for c in choices}

    def check(raw: str) -> str:
        v = raw.strip()
        if v.lower() not in by_lower:
            raise _BadValue(f"not one of {', '.join(choices)}")
        return by_lower[v.lower()]

    return check


def _passwd_hash(raw: str) -> str | None:
    v = raw.strip()
    if not v:
        return None
    if not re.fullmatch(r"[0-9A-Fa-f]{40}", v):
        raise _BadValue("must be HEX(SHA1(SHA1(password))), 40 hex digits (see docs/configuration.md)")
    return v.upper()


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    default: str | None  # the raw default (None: unset), placeholders allowed
    parse: Callable[[str], Any]
    scope: str  # "server" (canal.properties) or "instance" (either file)
    doc: str

    def convert(self, raw: str) -> Any:
        return self.parse(raw)


KEYS: dict[str, Key] = {}


def _k(name: str, default: str | None, parse: Callable[[str], Any], scope: str, doc: str) -> None:
    KEYS[name] = Key(name, default, parse, scope, doc)


S, I = "server", "instance"  # noqa: E741
# --------------------------------------------------------------------- server (canal.properties)
_k("canal.id", "1", _int, S, "server id (informational)")
_k("canal.ip", "", _opt_str, S, "bind IP of the TCP server (empty: all interfaces)")
_k("canal.register.ip", "", _opt_str, S, "IP registered in ZooKeeper (empty: the host's IP)")
_k("canal.port", "11111", _port, S, "TCP protocol port")
_k("canal.metrics.pull.port", "11112", _port, S, "Prometheus metrics port")
_k("canal.user", "", _opt_str, S, "TCP client user (unset: no authentication)")
_k("canal.passwd", "", _passwd_hash, S, "TCP client password as HEX(SHA1(SHA1(pwd))), upper case")
_k("canal.admin.manager", "", _opt_address, S, "canal-admin address host:port (unset: no admin)")
_k("canal.admin.port", "11110", _port, S, "admin port")
_k("canal.admin.user", "admin", _str, S, "admin user")
_k("canal.admin.passwd", "", _passwd_hash, S, "admin password, hashed like canal.passwd")
_k("canal.admin.register.auto", "false", _bool, S, "auto-register with canal-admin")
_k("canal.admin.register.cluster", "", _opt_str, S, "admin cluster name")
_k("canal.admin.register.name", "", _opt_str, S, "admin registration name")
_k("canal.zkServers", "", _opt_str, S, "ZooKeeper connect string; enables HA and ZooKeeper metas")
_k("canal.zookeeper.flush.period", "1000", _positive(_int), S, "ZooKeeper cursor flush period (ms)")
_k("canal.withoutNetty", "false", _bool, S, "embedded only: no TCP server")
_k("canal.serverMode", "tcp", _enum("tcp", "kafka", "rocketMQ", "rabbitMQ", "pulsarMQ"), S, "server mode")
_k("canal.file.data.dir", "${canal.conf.dir}", _str, S, "directory of <destination>/meta.dat and parse.dat")
_k("canal.file.flush.period", "1000", _positive(_int), S, "meta.dat / parse.dat flush period (ms)")
_k("canal.destinations", "", _list, S, "comma list of destinations started at boot")
_k("canal.conf.dir", ".", _str, S, "the conf dir holding <destination>/instance.properties")
_k("canal.auto.scan", "true", _bool, S, "watch the conf dir: add, remove and reload instances")
_k("canal.auto.scan.interval", "5", _positive(_int), S, "auto-scan interval (s)")
_k(
    "canal.auto.reset.latest.pos.mode",
    "false",
    _bool,
    S,
    "jump to the latest position when the binlog is purged",
)
_k("canal.instance.global.mode", "spring", _enum("spring", "manager"), S, "where instance configs come from")
_k("canal.instance.global.lazy", "false", _bool, S, "start instances on first subscribe")
_k(
    "canal.instance.global.manager.address",
    "${canal.admin.manager:}",
    _str,
    S,
    "admin address for manager mode",
)
_k("canal.instance.global.spring.xml", "classpath:spring/file-instance.xml", _str, S, "instance wiring")
_k("canal.instance.tsdb.spring.xml", "classpath:spring/tsdb/h2-tsdb.xml", _str, S, "TSDB wiring")
# --------------------------------------------------------------------- instance (either file)
_k("canal.instance.destination", "", _str, I, "the destination's name (set by the loader)")
_k("canal.instance.memory.buffer.size", "16384", _power_of_two, I, "store slots (a power of 2)")
_k("canal.instance.memory.buffer.memunit", "1024", _positive(_int), I, "bytes per memory unit (MEMSIZE)")
_k("canal.instance.memory.batch.mode", "MEMSIZE", _enum("MEMSIZE", "ITEMSIZE"), I, "batch size unit")
_k("canal.instance.memory.rawEntry", "true", _bool, I, "keep serialized entries in the store")
_k("canal.instance.transaction.size", "1024", _positive(_int), I, "transaction buffer (events)")
_k("canal.instance.fallbackIntervalInSeconds", "60", _non_negative, I, "rewind (s) after a source switch")
_k("canal.instance.detecting.enable", "false", _bool, I, "heartbeat the source")
_k("canal.instance.detecting.sql", "select 1", _str, I, "heartbeat SQL")
_k("canal.instance.detecting.interval.time", "3", _positive(_int), I, "heartbeat interval (s)")
_k("canal.instance.detecting.retry.threshold", "3", _positive(_int), I, "failed heartbeats before a switch")
_k("canal.instance.detecting.heartbeatHaEnable", "false", _bool, I, "switch to the standby on failure")
_k("canal.instance.network.receiveBufferSize", "16384", _positive(_int), I, "MySQL socket receive buffer")
_k("canal.instance.network.sendBufferSize", "16384", _positive(_int), I, "MySQL socket send buffer")
_k("canal.instance.network.soTimeout", "30", _positive(_int), I, "MySQL socket timeout (s)")
_k("canal.instance.filter.regex", ".*\\..*", _str, I, "table white list (comma list of regexes)")
_k("canal.instance.filter.black.regex", "", _str, I, "table black list")
_k("canal.instance.filter.field", "", _str, I, "column white list (db.table:c1/c2,...)")
_k("canal.instance.filter.black.field", "", _str, I, "column black list")
_k("canal.instance.filter.druid.ddl", "true", _bool, I, "parse DDL with the full parser")
_k("canal.instance.filter.query.dcl", "false", _bool, I, "drop DCL query events")
_k("canal.instance.filter.query.dml", "false", _bool, I, "drop DML query events")
_k("canal.instance.filter.query.ddl", "false", _bool, I, "drop DDL query events")
_k("canal.instance.filter.table.error", "false", _bool, I, "ignore table-meta errors")
_k("canal.instance.filter.rows", "false", _bool, I, "drop row events")
_k("canal.instance.filter.transaction.entry", "false", _bool, I, "drop transaction begin/end entries")
_k("canal.instance.filter.dml.insert", "false", _bool, I, "drop inserts")
_k("canal.instance.filter.dml.update", "false", _bool, I, "drop updates")
_k("canal.instance.filter.dml.delete", "false", _bool, I, "drop deletes")
_k("canal.instance.binlog.format", "ROW,STATEMENT,MIXED", _list, I, "accepted binlog_format values")
_k("canal.instance.binlog.image", "FULL,MINIMAL,NOBLOB", _list, I, "accepted binlog_row_image values")
_k("canal.instance.get.ddl.isolation", "false", _bool, I, "a DDL comes alone in its batch")
_k("canal.instance.parser.parallel", "true", _bool, I, "decode and convert in a second process")
_k(
    "canal.instance.parser.lingerMs",
    "5",
    _int,
    I,
    "pycanal: how long after the last chunk the parallel parser's next one waits for more events",
)
_k("canal.instance.parser.parallelThreadSize", "", _opt_int, I, "checked, not used: one conversion process")
_k(
    "canal.instance.parser.parallelBufferSize",
    "256",
    _power_of_two,
    I,
    "checked, not used: chunks of 512 events",
)
_k("canal.instance.tsdb.enable", "true", _bool, I, "table-meta history (TSDB)")
_k(
    "canal.instance.tsdb.dir",
    "${canal.file.data.dir:../conf}/${canal.instance.destination:}",
    _str,
    I,
    "TSDB dir",
)
_k(
    "canal.instance.tsdb.url",
    "jdbc:h2:${canal.instance.tsdb.dir}/h2;CACHE_SIZE=1000;MODE=MYSQL;",
    _str,
    I,
    "TSDB URL",
)
_k("canal.instance.tsdb.dbUsername", "canal", _str, I, "TSDB user")
_k("canal.instance.tsdb.dbPassword", "canal", _str, I, "TSDB password")
_k("canal.instance.tsdb.snapshot.interval", "24", _positive(_int), I, "TSDB snapshot interval (h)")
_k("canal.instance.tsdb.snapshot.expire", "360", _positive(_int), I, "TSDB snapshot expiry (h)")
_k("canal.instance.mysql.slaveId", "0", _non_negative, I, "replica server_id (0: pick one)")
_k("canal.instance.gtidon", "false", _bool, I, "dump by GTID")
_k("canal.instance.master.address", "127.0.0.1:3306", parse_address, I, "source host:port")
_k("canal.instance.master.journal.name", "", _opt_str, I, "start binlog file")
_k("canal.instance.master.position", "", _opt_int, I, "start offset")
_k("canal.instance.master.timestamp", "", _opt_int, I, "start time (ms)")
_k("canal.instance.master.gtid", "", _opt_str, I, "start GTID set")
_k("canal.instance.standby.address", "", _opt_address, I, "standby host:port")
_k("canal.instance.standby.journal.name", "", _opt_str, I, "standby start binlog file")
_k("canal.instance.standby.position", "", _opt_int, I, "standby start offset")
_k("canal.instance.standby.timestamp", "", _opt_int, I, "standby start time (ms)")
_k("canal.instance.standby.gtid", "", _opt_str, I, "standby start GTID set")
_k("canal.instance.dbUsername", "canal", _str, I, "replication user")
_k("canal.instance.dbPassword", "canal", _raw, I, "replication password")
_k("canal.instance.defaultDatabaseName", "", _opt_str, I, "default schema of the connection")
_k("canal.instance.connectionCharset", "UTF-8", _str, I, "decoding charset")
_k("canal.instance.enableDruid", "false", _bool, I, "dbPassword is encrypted (with pwdPublicKey)")
_k("canal.instance.pwdPublicKey", "", _opt_str, I, "public key for the encrypted password")
for _source in ("master", "standby"):  # Canal 1.1.8's SslInfo of each source
    _k(
        f"canal.instance.{_source}.sslMode",
        "DISABLED",
        _enum("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"),
        I,
        f"TLS to the {_source} (every connection to it)",
    )
    _k(
        f"canal.instance.{_source}.tlsVersions",
        "",
        _str,
        I,
        "TLS protocols, e.g. TLSv1.2,TLSv1.3 (default both)",
    )
    for _store, _what in (
        ("trust", "CA certificates checked against"),
        ("client", "client certificate and key"),
    ):
        _k(
            f"canal.instance.{_source}.{_store}CertificateKeyStoreUrl",
            "",
            _str,
            I,
            f"keystore of the {_what} (file: URL or path)",
        )
        _k(
            f"canal.instance.{_source}.{_store}CertificateKeyStoreType",
            "",
            _str,
            I,
            "PKCS12 or PEM (JKS is refused)",
        )
        _k(f"canal.instance.{_source}.{_store}CertificateKeyStorePassword", "", _raw, I, "its password")
del _source, _store, _what
_k("canal.instance.multi.stream.on", "false", _bool, I, "PolarDB-X multi-stream")
_k("canal.instance.rds.accesskey", "", _opt_str, I, "Aliyun RDS OSS binlog key")
_k("canal.instance.rds.secretkey", "", _opt_str, I, "Aliyun RDS OSS binlog secret")
_k("canal.instance.rds.instanceId", "", _opt_str, I, "Aliyun RDS instance")

# --------------------------------------------------------------------- MQ mode (canal.serverMode != tcp)
# The producer's keys are read from canal.properties (connector core's AbstractMQProducer and
# CanalConstants); a destination's routing from either file (CanalMQConfig in the instance's Spring
# beans, whose placeholders trim values and turn a missing key into "", i.e. unset).
_k("canal.mq.flatMessage", "true", _bool, S, "MQ records are FlatMessage JSON (false: protobuf Packets)")
_k("canal.mq.canalBatchSize", "50", _positive(_int), S, "entries per store batch sent to the MQ")
_k("canal.mq.canalGetTimeout", "100", _int, S, "store wait per batch (ms); <= 0: wait without a timeout")
_k("canal.mq.accessChannel", "local", _str, S, "RocketMQ: local or cloud (Aliyun message trace)")
_k("canal.mq.database.hash", "true", _bool, S, "partitionHash includes the database name's hash")
_k("canal.mq.send.thread.size", "30", _positive(_int), S, "MQ send threads")
_k("canal.mq.build.thread.size", "8", _positive(_int), S, "MQ message build threads")
_k(
    "canal.mq.transaction",
    "false",
    _bool,
    S,
    "pycanal: Kafka transactions, exactly once for read_committed consumers (Kafka mode)",
)
_k(
    "canal.mq.partitionOrder",
    "false",
    _bool,
    S,
    "pycanal: with partitionHash, DDL copied to every partition and records marked for ordering",
)
_k("canal.mq.topic", "", _opt_str, I, "the destination's topic (also dynamicTopic's fallback)")
_k("canal.mq.partition", "0", _non_negative, I, "the fixed partition without partitionHash")
_k("canal.mq.partitionsNum", "", _opt_positive, I, "partition count for partitionHash (unset: 1)")
_k("canal.mq.partitionHash", "", _opt_str, I, "row hash rules: db.table:c1^c2, db.table:$pk$ or db.table")
_k("canal.mq.dynamicTopic", "", _opt_str, I, "topic routing: [topic:]db or db\\.table regexes, comma list")
_k("canal.mq.dynamicTopicPartitionNum", "", _opt_str, I, "partition count per topic: topic:n, comma list")
_k("canal.mq.enableDynamicQueuePartition", "false", _bool, I, "RocketMQ: queue count from the broker")
# <= 1.1.4 names, still honoured by 1.1.8's producers (each copied over its kafka.*/rocketmq.* key).
_k("canal.mq.servers", None, _opt_str, S, "old name of kafka.bootstrap.servers (and rabbitmq.host)")
_k("canal.mq.acks", None, _opt_str, S, "old name of kafka.acks")
_k("canal.mq.compressionType", None, _opt_str, S, "old name of kafka.compression.type")
_k("canal.mq.retries", None, _opt_str, S, "old name of kafka.retries")
_k("canal.mq.batchSize", None, _opt_str, S, "old name of kafka.batch.size")
_k("canal.mq.lingerMs", None, _opt_str, S, "old name of kafka.linger.ms")
_k("canal.mq.maxRequestSize", None, _opt_str, S, "old name of kafka.max.request.size")
_k("canal.mq.bufferMemory", None, _opt_str, S, "old name of kafka.buffer.memory")
_k("canal.mq.kafka.kerberos.enable", None, _opt_str, S, "old name of kafka.kerberos.enable")
_k("canal.mq.kafka.kerberos.krb5.file", None, _opt_str, S, "old name of kafka.kerberos.krb5.file")
_k("canal.mq.kafka.kerberos.jaas.file", None, _opt_str, S, "old name of kafka.kerberos.jaas.file")
_k("canal.mq.producerGroup", None, _opt_str, S, "old name of rocketmq.producer.group")
_k("canal.mq.namespace", None, _opt_str, S, "old name of rocketmq.namespace")

# Every canal.mq.* key Canal 1.1.8 reads is declared above, so a misspelt one warns; the broker
# clients' own keys pass through (CanalKafkaProducer hands every kafka.* key to the client).
PASSTHROUGH_PREFIXES = (
    "canal.aliyun.",
    "kafka.",
    "rocketmq.",
    "rabbitmq.",
    "pulsarmq.",
)
PASSTHROUGH_PATTERNS = (
    # per-destination overrides in canal.properties: canal.instance.<dest>.mode / lazy / ...
    re.compile(r"canal\.instance\.[^.]+\.(mode|lazy|manager\.address|spring\.xml)"),
)


def is_known(key: str) -> bool:
    return (
        key in KEYS
        or key.startswith(PASSTHROUGH_PREFIXES)
        or any(p.fullmatch(key) for p in PASSTHROUGH_PATTERNS)
    )
