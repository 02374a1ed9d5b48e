"""The real Alibaba Canal (Java) as a private, throw-away test component, beside pycanal.

``PrivateCanal`` writes a Canal conf directory into a temporary directory — ``canal.properties``,
one ``<destination>/instance.properties`` per destination, the Spring files an instance is built from
(``spring/base-instance.xml``, ``spring/file-instance.xml``, ``spring/memory-instance.xml``, and for the
table-meta history ``spring/tsdb/h2-tsdb.xml`` with its MyBatis mappers) and ``logback.xml``, all
written here from Canal's documented keys and bean properties, not copied — then starts Canal's server
with the machine's Java on a free loopback port and waits until it serves: a ``SimpleConnector``
subscribes to every destination and each destination's parser has found its start position in the
binlog (a wrong address or password fails :meth:`start` with Canal's own log lines).

    with PrivateCanal.for_mariadb(db, destinations={"example": {"filter.regex": r"pycanal\\..*"}}) as canal:
        conn = canal.connector("example")          # a connected pycanal SimpleConnector
        conn.subscribe()
        message = conn.get(100, timeout=2000)

Which Canal, and how it is run (found out for issue 36)
--------------------------------------------------------
* **Canal 1.1.8's server is not on Maven Central.** Of 1.1.8 (2025-01-16) Central serves only
  ``canal.common``, ``canal.protocol``, ``canal.client``, ``canal.filter``, ``canal.meta``,
  ``canal.store``, ``canal.sink``, ``canal.parse.driver`` and ``canal.parse.dbsync``;
  ``canal.parse``, ``canal.instance.*``, ``canal.server``, ``connector.*`` and ``canal.deployer`` are
  missing (``mvn``: "Could not find artifact com.alibaba.otter:canal.deployer:jar:1.1.8 in central").
  ``canal.deployer`` itself stops at 1.1.4 there; the release tarball is on GitHub only, which these
  machines cannot reach.
* So this runs **Canal 1.1.7** (2023-10), the newest release whose whole server is on Central
  (``scripts/canal/pom.xml``: ``canal.server`` 1.1.7 and everything it pulls in; ``setup.sh`` copies
  the jars to ``$PYCANAL_CANAL_HOME``, default ``~/.cache/pycanal/canal-1.1.7/lib``). Between 1.1.7
  and 1.1.8 the row-value decoding changed little (JSON partial updates, Percona/PolarDB-X and
  MariaDB 11's ``Q_CHARACTER_SET_COLLATIONS``; the DDL parser and the TSDB were touched).
* The deployer (``CanalLauncher``/``CanalController``) is the missing piece: ``scripts/canal/
  PycanalCanalMain.java`` (compiled here on first use, ~2 s) wires Canal's own ``CanalServerWithEmbedded``,
  ``SpringCanalInstanceGenerator`` and ``CanalServerWithNetty`` as the deployer does for a standalone
  server in Spring mode, and loads an MQ producer by Canal's ``ExtensionLoader`` for
  ``canal.serverMode`` other than ``tcp``. It has no ZooKeeper, admin port or instance auto-scan. It
  keeps 1.1.8's rule that ``canal.user`` needs ``canal.passwd`` (Canal issue #4941; 1.1.8's other
  #4941 rule, ``canal.admin.passwd``, only applies with ``canal.admin.manager``, which is not used),
  and 1.1.8's fix of issue #4907: 1.1.7's parser sets the TSDB's system properties to "" after
  building its TSDB, which then override the next destination's ``canal.instance.tsdb.url``, so only
  the first destination with the TSDB ever started; the launcher removes them after each
  destination starts.
* Java: OpenJDK 17 runs it as it is, no ``--add-opens`` needed (Canal 1.1.x is compiled for Java 8);
  Temurin 25 runs it too, printing only a ``sun.misc.Unsafe`` deprecation warning (Guava 22). The
  flags are :data:`JVM_FLAGS` (from Canal's ``startup.sh``) plus the heap and GC (``quick_start``).
  Start-up to serving: about 1.5 s without the TSDB, 2-3.5 s with it.
* Table metadata: Canal's shipped default, a TSDB in an embedded H2 database per destination
  (``canal.instance.tsdb.enable = true`` with ``spring/tsdb/h2-tsdb.xml``), here under the temporary
  directory; ``tsdb=False`` turns it off (Canal then reads table structure live with ``DESC``).
* Each destination gets a random ``canal.instance.mysql.slaveId``: Canal's own (host address +
  destination hash) would be the same for two servers with the same destination name, and MariaDB
  drops the older dump of a replica id that connects again.
* Metrics (``canal.prometheus``) are not on Central at 1.1.7 either; the metrics port is off.

What Canal 1.1.7 does against MariaDB 10.11 (seen here, for whoever compares it with pycanal)
--------------------------------------------------------------------------------------------
* With the TSDB on, a configured ``master.journal.name``/``master.position`` (and no timestamp) is
  moved back: Canal scans the file from its start for the last transaction begin or end (BEGIN
  query, XID) whose event ends before the position. MariaDB logs a GTID event instead of BEGIN and
  its DDL has no XID, so with the position right after a commit Canal started at the file's start
  (offset 4) and delivered the entries before the position again. Without the TSDB it starts
  exactly at the position.
* No TRANSACTIONBEGIN entries for MariaDB transactions (no BEGIN query event); TRANSACTIONEND comes
  from the XID. ANNOTATE_ROWS becomes a QUERY entry with the statement, no schema or table, and
  passes any table filter.
* ``Column.mysqlType`` is the DDL's text when the TSDB replayed the CREATE TABLE (``INT``), ``DESC``'s
  otherwise (``int(11)``).
* A destination stops for good (the event fails, is retried every 10-20 s) on a YEAR column before a
  numeric one (MariaDB's signedness bits), a column left NOT NULL by ADD/DROP PRIMARY KEY (both with
  the TSDB), a MariaDB COMPRESSED column (its TABLE_MAP, whatever the filter) and, without the
  TSDB, rows of a table renamed or dropped since. While a destination
  is in that loop MariaDB sent no heartbeats to the other replicas of the server, Canal's and
  pycanal's, whose dumps then timed out after 25 s (seen alike with a replica that starts and
  closes a dump every 2 s). ``tests/test_canal_reference.py`` pins these and every entry-level
  difference from pycanal.

Logs land under the temporary directory (the JVM's working directory): ``logs/canal/canal.log`` and
``logs/<destination>/<destination>.log``; ``canal.out`` has the JVM's own output.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr

from ._process import die_with_parent, emergency_cleanup, tail
from ._process import free_port as _free_port
from .zookeeper import find_java

if TYPE_CHECKING:
    from pycanal.client.simple import SimpleConnector

    from .mariadb import PrivateMariaDB

__all__ = [
    "CANAL_VERSION",
    "CanalStartError",
    "PrivateCanal",
    "canal_classpath",
    "canal_home",
]

CANAL_VERSION = "1.1.7"
"""The Canal release that runs (scripts/canal/pom.xml): 1.1.8's server is not on Maven Central."""

MAIN_CLASS = "PycanalCanalMain"

JVM_FLAGS = (
    "-Xss1m",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Dfile.encoding=UTF-8",
    "-DappName=otter-canal",
)
"""JVM options of Canal's ``startup.sh`` (1.1.8, Java >= 11) but its heap (``-Xms2g -Xmx3g``; ``heap_mb``
here), GC (``quick_start``), heap dumps and ``-XX:-UseBiasedLocking`` (deprecated in Java 17, gone in 18)."""

_REPO_CANAL_DIR = Path(__file__).resolve().parents[3] / "scripts" / "canal"
_LAUNCHER_SOURCE = _REPO_CANAL_DIR / f"{MAIN_CLASS}.java"

# Canal needs no clean shutdown when the test process dies.
_DIE_WITH_PARENT = die_with_parent(signal.SIGKILL)

_STARTED = "PYCANAL-CANAL STARTED"
_FAILED = "PYCANAL-CANAL FAILED"
# The parser's log lines (MysqlEventParser / AbstractEventParser) that say how a dump began.
_PARSER_OK = re.compile(r"find start position successfully")
_PARSER_ERROR = re.compile(r"dump address .* has an error|CanalParseException|parse events has an error")


class CanalStartError(RuntimeError):
    """Canal could not be started, or did not serve in time."""


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[.*?\] (\w+)\s+\S+ - (.*)$")


def _error_summary(text: str, at: int) -> str:
    """The log message at ``at`` and the innermost ``Caused by`` of its stack trace."""
    lines = text[text.rfind("\n", 0, at) + 1 :].splitlines()
    m = _LOG_LINE.match(lines[0])
    message = m.group(2).strip() if m else lines[0].strip()
    cause = ""
    for line in lines[1:]:
        if _LOG_LINE.match(line):
            break
        if line.startswith("Caused by: "):
            cause = line[len("Caused by: ") :].strip()
    return f"{message} ({cause})" if cause else message


def canal_home() -> Path:
    """Where ``setup.sh`` puts Canal's jars (``lib/``): ``$PYCANAL_CANAL_HOME``, else
    ``~/.cache/pycanal/canal-<version>``."""
    override = os.environ.get("PYCANAL_CANAL_HOME")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "pycanal" / f"canal-{CANAL_VERSION}"


def _javac_for(java: str) -> str:
    sibling = Path(os.path.realpath(java)).parent / "javac"
    if sibling.is_file():
        return str(sibling)
    found = shutil.which("javac")
    if not found:
        raise FileNotFoundError("javac not found: install a JDK (openjdk-17-jdk-headless)")
    return found


def _launcher_classes(home: Path, lib: Path, java: str) -> Path:
    """The compiled launcher, made on first use (and again whenever its source changes)."""
    source = _LAUNCHER_SOURCE.read_bytes()
    out = home / f"launcher-{hashlib.sha256(source).hexdigest()[:12]}"
    if (out / f"{MAIN_CLASS}.class").is_file():
        return out
    work = Path(tempfile.mkdtemp(prefix=".launcher-", dir=home))
    try:
        proc = subprocess.run(
            [_javac_for(java), "--release", "8", "-nowarn", "-encoding", "UTF-8", "-cp", f"{lib}/*"]
            + ["-d", str(work), str(_LAUNCHER_SOURCE)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise CanalStartError(f"javac {_LAUNCHER_SOURCE} failed:\n{proc.stdout}{proc.stderr}")
        with contextlib.suppress(OSError):  # a parallel session made it first
            work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def canal_classpath(java: str | None = None) -> list[str]:
    """Canal's runtime classpath after the conf dir: the launcher's classes and the cached jars."""
    home = canal_home()
    lib = home / "lib"
    if not any(lib.glob("canal.server-*.jar")):
        raise FileNotFoundError(
            f"Canal {CANAL_VERSION}'s jars are not in {lib}: run scripts/setup.sh (mvn copies them there) "
            "or point PYCANAL_CANAL_HOME at a directory with lib/"
        )
    if not _LAUNCHER_SOURCE.is_file():
        raise FileNotFoundError(f"{_LAUNCHER_SOURCE} is missing: PrivateCanal runs from a pycanal checkout")
    classes = _launcher_classes(home, lib, java or find_java())
    return [str(classes), f"{lib}/*"]


# ---------------------------------------------------------------------------------------------- files
def _prop_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _escape_prop(text: str, key: bool = False) -> str:
    """Java ``Properties.load`` syntax (ISO-8859-1, backslash escapes)."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=: #!" and (key or (i == 0 and ch in " #!")):
            out.append("\\" + ch)
        elif ord(ch) > 0xFF:
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _write_properties(path: Path, props: Mapping[str, object], header: str) -> None:
    lines = [f"# {header}"]
    lines += [f"{_escape_prop(k, key=True)} = {_escape_prop(_prop_value(v))}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="latin-1")


def _instance_key(key: str) -> str:
    return (
        key
        if key.startswith(("canal.", "kafka.", "rocketmq.", "rabbitmq.", "pulsarmq."))
        else f"canal.instance.{key}"
    )


def _beans_head(by_name: bool = True) -> str:
    # Canal's instance files also wire beans by name (the parser's eventSink, for one); the TSDB's
    # must not (Spring's "environment" bean would land in MyBatis' Configuration).
    autowire = ' default-autowire="byName"' if by_name else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<beans xmlns="http://www.springframework.org/schema/beans"\n'
        '       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"\n'
        '       xsi:schemaLocation="http://www.springframework.org/schema/beans '
        f'http://www.springframework.org/schema/beans/spring-beans.xsd"{autowire}>\n'
    )


def _prop(name: str, key: str, default: str = "") -> str:
    """A bean property from a Canal key, with Canal's documented default."""
    return f'    <property name="{name}" value={quoteattr("${" + key + ":" + default + "}")}/>\n'


def _bean(bean_id: str | None, cls: str, body: str = "", extra: str = "", indent: str = "  ") -> str:
    ident = f' id="{bean_id}"' if bean_id else ""
    if not body:
        return f'{indent}<bean{ident} class="{cls}"{extra}/>\n'
    return f'{indent}<bean{ident} class="{cls}"{extra}>\n{body}{indent}</bean>\n'


# The parser's properties: (bean property, Canal key, Canal's default).
_PARSER_PROPERTIES = (
    ("destination", "canal.instance.destination", ""),
    ("slaveId", "canal.instance.mysql.slaveId", "0"),
    ("detectingEnable", "canal.instance.detecting.enable", "false"),
    ("detectingSQL", "canal.instance.detecting.sql", "select 1"),
    ("detectingIntervalInSeconds", "canal.instance.detecting.interval.time", "5"),
    ("fieldFilter", "canal.instance.filter.field", ""),
    ("fieldBlackFilter", "canal.instance.filter.black.field", ""),
    ("transactionSize", "canal.instance.transaction.size", "1024"),
    ("receiveBufferSize", "canal.instance.network.receiveBufferSize", "16384"),
    ("sendBufferSize", "canal.instance.network.sendBufferSize", "16384"),
    ("defaultConnectionTimeoutInSeconds", "canal.instance.network.soTimeout", "30"),
    ("connectionCharset", "canal.instance.connectionCharset", "UTF-8"),
    ("fallbackIntervalInSeconds", "canal.instance.fallbackIntervalInSeconds", "60"),
    ("filterQueryDml", "canal.instance.filter.query.dml", "false"),
    ("filterQueryDcl", "canal.instance.filter.query.dcl", "false"),
    ("filterQueryDdl", "canal.instance.filter.query.ddl", "false"),
    ("useDruidDdlFilter", "canal.instance.filter.druid.ddl", "true"),
    ("filterDmlInsert", "canal.instance.filter.dml.insert", "false"),
    ("filterDmlUpdate", "canal.instance.filter.dml.update", "false"),
    ("filterDmlDelete", "canal.instance.filter.dml.delete", "false"),
    ("filterRows", "canal.instance.filter.rows", "false"),
    ("filterTableError", "canal.instance.filter.table.error", "false"),
    ("supportBinlogFormats", "canal.instance.binlog.format", "ROW,STATEMENT,MIXED"),
    ("supportBinlogImages", "canal.instance.binlog.image", "FULL,MINIMAL,NOBLOB"),
    ("enableTsdb", "canal.instance.tsdb.enable", "true"),
    ("tsdbSpringXml", "canal.instance.tsdb.spring.xml", ""),
    ("tsdbJdbcUrl", "canal.instance.tsdb.url", ""),
    ("tsdbJdbcUserName", "canal.instance.tsdb.dbUsername", ""),
    ("tsdbJdbcPassword", "canal.instance.tsdb.dbPassword", ""),
    ("tsdbSnapshotInterval", "canal.instance.tsdb.snapshot.interval", "24"),
    ("tsdbSnapshotExpire", "canal.instance.tsdb.snapshot.expire", "360"),
    ("isGTIDMode", "canal.instance.gtidon", "false"),
    ("parallel", "canal.instance.parser.parallel", "true"),
    ("parallelThreadSize", "canal.instance.parser.parallelThreadSize", ""),
    ("parallelBufferSize", "canal.instance.parser.parallelBufferSize", "256"),
    ("autoResetLatestPosMode", "canal.auto.reset.latest.pos.mode", "false"),
    ("multiStreamEnable", "canal.instance.multi.stream.on", "false"),
)

_PKG = "com.alibaba.otter.canal"


def _base_instance_xml() -> str:
    """Properties (canal.properties, then the destination's instance.properties, system properties
    first), the host:port editor, and the abstract parser every instance's parser derives from."""
    placeholder = _bean(
        None,
        f"{_PKG}.instance.spring.support.PropertyPlaceholderConfigurer",
        '    <property name="ignoreResourceNotFound" value="true"/>\n'
        '    <property name="systemPropertiesModeName" value="SYSTEM_PROPERTIES_MODE_OVERRIDE"/>\n'
        '    <property name="locationNames">\n'
        "      <list>\n"
        "        <value>classpath:canal.properties</value>\n"
        "        <value>classpath:${canal.instance.destination:}/instance.properties</value>\n"
        "      </list>\n"
        "    </property>\n",
        ' lazy-init="false"',
    )
    editors = _bean("socketAddressEditor", f"{_PKG}.instance.spring.support.SocketAddressEditor") + _bean(
        None,
        "org.springframework.beans.factory.config.CustomEditorConfigurer",
        '    <property name="propertyEditorRegistrars"><list><ref bean="socketAddressEditor"/></list></property>\n',
    )
    # Canal's parser class: a MySQL parser that could also fetch an Aliyun RDS's archived binlogs.
    parser = _bean(
        "baseEventParser",
        f"{_PKG}.parse.inbound.mysql.rds.RdsBinlogEventParserProxy",
        _prop("accesskey", "canal.aliyun.accesskey")
        + _prop("secretkey", "canal.aliyun.secretkey")
        + _prop("instanceId", "canal.instance.rds.instanceId"),
        ' abstract="true"',
    )
    return _beans_head() + placeholder + editors + parser + "</beans>\n"


def _auth_info(prefix: str) -> str:
    return _bean(
        None,
        f"{_PKG}.parse.support.AuthenticationInfo",
        _prop("address", f"canal.instance.{prefix}.address")
        + _prop("username", "canal.instance.dbUsername", "retl")
        + _prop("password", "canal.instance.dbPassword", "retl")
        + _prop("enableDruid", "canal.instance.enableDruid", "false")
        + _prop("defaultDatabaseName", "canal.instance.defaultDatabaseName"),
        ' init-method="initPwd"',
        indent="      ",
    )


def _position(prefix: str) -> str:
    return _bean(
        None,
        f"{_PKG}.protocol.position.EntryPosition",
        _prop("journalName", f"canal.instance.{prefix}.journal.name")
        + _prop("position", f"canal.instance.{prefix}.position")
        + _prop("timestamp", f"canal.instance.{prefix}.timestamp")
        + _prop("gtid", f"canal.instance.{prefix}.gtid"),
        indent="      ",
    )


def _instance_xml(meta: str, standby: bool) -> str:
    """An instance: parser -> sink -> memory store, positions in a file (``file``: Canal's
    ``FileMixedMetaManager``, ``meta.dat``) or in memory (``memory``)."""
    ref = lambda name: f'    <property name="{name}" ref="{name}"/>\n'  # noqa: E731
    instance = _bean(
        "instance",
        f"{_PKG}.instance.spring.CanalInstanceWithSpring",
        _prop("destination", "canal.instance.destination")
        + "".join(
            ref(n)
            for n in ("eventParser", "eventSink", "eventStore", "metaManager", "alarmHandler", "mqConfig")
        ),
    )
    alarm = _bean("alarmHandler", f"{_PKG}.common.alarm.LogAlarmHandler")
    if meta == "file":
        meta_bean = _bean(
            "metaManager",
            f"{_PKG}.meta.FileMixedMetaManager",
            _prop("dataDir", "canal.file.data.dir", "../conf")
            + _prop("period", "canal.file.flush.period", "1000"),
        )
        positions = (
            f'      <bean class="{_PKG}.parse.index.FailbackLogPositionManager">\n'
            f'        <constructor-arg><bean class="{_PKG}.parse.index.MemoryLogPositionManager"/></constructor-arg>\n'
            f'        <constructor-arg><bean class="{_PKG}.parse.index.MetaLogPositionManager">'
            '<constructor-arg ref="metaManager"/></bean></constructor-arg>\n'
            "      </bean>\n"
        )
    else:
        meta_bean = _bean("metaManager", f"{_PKG}.meta.MemoryMetaManager")
        positions = f'      <bean class="{_PKG}.parse.index.MemoryLogPositionManager"/>\n'
    store = _bean(
        "eventStore",
        f"{_PKG}.store.memory.MemoryEventStoreWithBuffer",
        _prop("bufferSize", "canal.instance.memory.buffer.size", "16384")
        + _prop("bufferMemUnit", "canal.instance.memory.buffer.memunit", "1024")
        + _prop("batchMode", "canal.instance.memory.batch.mode", "MEMSIZE")
        + _prop("ddlIsolation", "canal.instance.get.ddl.isolation", "false")
        + _prop("raw", "canal.instance.memory.rawEntry", "true"),
    )
    sink = _bean(
        "eventSink",
        f"{_PKG}.sink.entry.EntryEventSink",
        ref("eventStore")
        + _prop("filterTransactionEntry", "canal.instance.filter.transaction.entry", "false"),
    )
    regex = f"{_PKG}.filter.aviater.AviaterRegexFilter"
    parser_body = "".join(_prop(*p) for p in _PARSER_PROPERTIES)
    parser_body += (
        '    <property name="haController">\n'
        + _bean(
            None,
            f"{_PKG}.parse.ha.HeartBeatHAController",
            _prop("detectingRetryTimes", "canal.instance.detecting.retry.threshold", "3")
            + _prop("switchEnable", "canal.instance.detecting.heartbeatHaEnable", "false"),
            indent="      ",
        )
        + "    </property>\n"
        + ref("alarmHandler")
        + ref("eventSink")
        + '    <property name="eventFilter">\n'
        f'      <bean class="{regex}"><constructor-arg index="0" value="${{canal.instance.filter.regex:.*\\..*}}"/></bean>\n'
        "    </property>\n"
        '    <property name="eventBlackFilter">\n'
        f'      <bean class="{regex}"><constructor-arg index="0" value="${{canal.instance.filter.black.regex:}}"/>'
        '<constructor-arg index="1" value="false"/></bean>\n'
        "    </property>\n"
        f'    <property name="logPositionManager">\n{positions}    </property>\n'
        f'    <property name="masterInfo">\n{_auth_info("master")}    </property>\n'
        f'    <property name="masterPosition">\n{_position("master")}    </property>\n'
    )
    if standby:
        parser_body += (
            f'    <property name="standbyInfo">\n{_auth_info("standby")}    </property>\n'
            f'    <property name="standbyPosition">\n{_position("standby")}    </property>\n'
        )
    parser = f'  <bean id="eventParser" parent="baseEventParser">\n{parser_body}  </bean>\n'
    mq = _bean(
        "mqConfig",
        f"{_PKG}.instance.core.CanalMQConfig",
        _prop("topic", "canal.mq.topic")
        + _prop("dynamicTopic", "canal.mq.dynamicTopic")
        + _prop("partition", "canal.mq.partition")
        + _prop("partitionsNum", "canal.mq.partitionsNum")
        + _prop("partitionHash", "canal.mq.partitionHash")
        + _prop("dynamicTopicPartitionNum", "canal.mq.dynamicTopicPartitionNum")
        + _prop("enableDynamicQueuePartition", "canal.mq.enableDynamicQueuePartition"),
    )
    return (
        _beans_head()
        + '  <import resource="classpath:spring/base-instance.xml"/>\n'
        + instance
        + alarm
        + meta_bean
        + store
        + sink
        + parser
        + mq
        + "</beans>\n"
    )


def _tsdb_xml() -> str:
    """The table-meta history (``DatabaseTableMeta``) in H2 through Canal's MyBatis DAOs; the DAOs
    create their tables from the DDL inside canal.parse's jar."""
    dao = "com.alibaba.otter.canal.parse.inbound.mysql.tsdb"
    placeholder = _bean(
        None,
        f"{_PKG}.instance.spring.support.PropertyPlaceholderConfigurer",
        '    <property name="ignoreResourceNotFound" value="true"/>\n'
        '    <property name="systemPropertiesModeName" value="SYSTEM_PROPERTIES_MODE_OVERRIDE"/>\n'
        '    <property name="locationNames"><list>'
        "<value>classpath:canal.properties</value>"
        "<value>classpath:${canal.instance.destination:}/instance.properties</value>"
        "</list></property>\n",
        ' lazy-init="false"',
    )
    datasource = _bean(
        "dataSource",
        "com.alibaba.druid.pool.DruidDataSource",
        '    <property name="driverClassName" value="org.h2.Driver"/>\n'
        + _prop("url", "canal.instance.tsdb.url")
        + _prop("username", "canal.instance.tsdb.dbUsername")
        + _prop("password", "canal.instance.tsdb.dbPassword")
        + '    <property name="initialSize" value="0"/>\n'
        '    <property name="maxActive" value="4"/>\n'
        '    <property name="maxWait" value="10000"/>\n'
        '    <property name="validationQuery" value="SELECT 1"/>\n',
        ' destroy-method="close"',
    )
    factory = _bean(
        "sqlSessionFactory",
        "org.mybatis.spring.SqlSessionFactoryBean",
        '    <property name="dataSource" ref="dataSource"/>\n'
        '    <property name="mapperLocations" value="classpath:spring/tsdb/sql-map/*.xml"/>\n'
        '    <property name="configuration">\n'
        '      <bean class="org.apache.ibatis.session.Configuration">'
        '<property name="mapUnderscoreToCamelCase" value="true"/></bean>\n'
        "    </property>\n",
    )
    daos = "".join(
        _bean(name, f"{dao}.dao.{cls}", '    <property name="sqlSessionFactory" ref="sqlSessionFactory"/>\n')
        for name, cls in (("metaHistoryDAO", "MetaHistoryDAO"), ("metaSnapshotDAO", "MetaSnapshotDAO"))
    )
    meta = _bean(
        "tableMetaTSDB",
        f"{dao}.DatabaseTableMeta",
        '    <property name="metaHistoryDAO" ref="metaHistoryDAO"/>\n'
        '    <property name="metaSnapshotDAO" ref="metaSnapshotDAO"/>\n',
        ' destroy-method="destory"',
    )
    return _beans_head(by_name=False) + placeholder + meta + datasource + factory + daos + "</beans>\n"


_MAPPER_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<!DOCTYPE mapper PUBLIC "-//mybatis.org//DTD Mapper 3.0//EN" "http://mybatis.org/dtd/mybatis-3-mapper.dtd">\n'
)


def _mapper(namespace: str, statements: Sequence[tuple[str, str, str, str]]) -> str:
    body = "".join(
        f'  <{kind} id="{sid}"{attrs}>\n    {_xml_escape(sql)}\n  </{kind}>\n'
        for kind, sid, attrs, sql in statements
    )
    return f'{_MAPPER_HEAD}<mapper namespace="{namespace}">\n{body}</mapper>\n'


def _tsdb_mappers() -> dict[str, str]:
    """The statements of Canal's ``MetaHistoryMapper`` / ``MetaSnapshotMapper`` interfaces: DDL history
    rows between the snapshot and a binlog time, and the latest snapshot before a time (row 0 is the
    one being built)."""
    dao = "com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao"
    pos_cols = "destination, binlog_file, binlog_offest, binlog_master_id, binlog_timestamp"
    pos_vals = "#{destination}, #{binlogFile}, #{binlogOffest}, #{binlogMasterId}, #{binlogTimestamp}"
    history = _mapper(
        f"{dao}.MetaHistoryMapper",
        [
            (
                "select",
                "findByTimestamp",
                f' parameterType="map" resultType="{dao}.MetaHistoryDO"',
                "SELECT * FROM meta_history WHERE destination = #{destination}"
                " AND binlog_timestamp >= #{snapshotTimestamp} AND binlog_timestamp <= #{timestamp}"
                " ORDER BY binlog_timestamp, id",
            ),
            (
                "insert",
                "insert",
                f' parameterType="{dao}.MetaHistoryDO"',
                f"INSERT INTO meta_history (gmt_create, gmt_modified, {pos_cols},"
                " use_schema, sql_schema, sql_table, sql_text, sql_type, extra)"
                f" VALUES (CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, {pos_vals},"
                " #{useSchema}, #{sqlSchema}, #{sqlTable}, #{sqlText}, #{sqlType}, #{extra})",
            ),
            (
                "delete",
                "deleteByName",
                ' parameterType="map"',
                "DELETE FROM meta_history WHERE destination = #{destination}",
            ),
            (
                "delete",
                "deleteByTimestamp",
                ' parameterType="map"',
                "DELETE FROM meta_history WHERE destination = #{destination} AND binlog_timestamp < #{timestamp}",
            ),
        ],
    )
    snapshot = _mapper(
        f"{dao}.MetaSnapshotMapper",
        [
            (
                "select",
                "findByTimestamp",
                f' parameterType="map" resultType="{dao}.MetaSnapshotDO"',
                "SELECT * FROM meta_snapshot WHERE destination = #{destination} AND binlog_timestamp < #{timestamp}"
                " ORDER BY binlog_timestamp DESC, id DESC LIMIT 1",
            ),
            (
                "insert",
                "insert",
                f' parameterType="{dao}.MetaSnapshotDO"',
                f"INSERT INTO meta_snapshot (gmt_create, gmt_modified, {pos_cols}, data, extra)"
                f" VALUES (CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, {pos_vals}, #{{data}}, #{{extra}})",
            ),
            (
                "update",
                "update",
                f' parameterType="{dao}.MetaSnapshotDO"',
                "UPDATE meta_snapshot SET gmt_modified = CURRENT_TIMESTAMP, binlog_file = #{binlogFile},"
                " binlog_offest = #{binlogOffest}, binlog_master_id = #{binlogMasterId},"
                " binlog_timestamp = #{binlogTimestamp}, data = #{data}, extra = #{extra}"
                " WHERE destination = #{destination} AND binlog_timestamp = 0",
            ),
            (
                "delete",
                "deleteByName",
                ' parameterType="map"',
                "DELETE FROM meta_snapshot WHERE destination = #{destination}",
            ),
            (
                "delete",
                "deleteByTimestamp",
                ' parameterType="map"',
                "DELETE FROM meta_snapshot WHERE destination = #{destination}"
                " AND binlog_timestamp < #{timestamp} AND binlog_timestamp > 0",
            ),
        ],
    )
    return {"history.xml": history, "snapshot.xml": snapshot}


def _logback_xml(log_dir: Path, level: str) -> str:
    """One file per destination (MDC ``destination``, set by Canal's threads), ``canal`` for the rest."""
    pattern = "%d{yyyy-MM-dd HH:mm:ss.SSS} [%thread] %-5level %logger{56} - %msg%n"
    return (
        "<configuration>\n"
        '  <appender name="SIFT" class="ch.qos.logback.classic.sift.SiftingAppender">\n'
        "    <discriminator><key>destination</key><defaultValue>canal</defaultValue></discriminator>\n"
        "    <sift>\n"
        '      <appender name="FILE-${destination}" class="ch.qos.logback.core.FileAppender">\n'
        f"        <file>{_xml_escape(str(log_dir))}/${{destination}}/${{destination}}.log</file>\n"
        f"        <encoder><pattern>{_xml_escape(pattern)}</pattern></encoder>\n"
        "      </appender>\n"
        "    </sift>\n"
        "  </appender>\n"
        f'  <logger name="com.alibaba.otter.canal" level="{level}"/>\n'
        f'  <logger name="{MAIN_CLASS}" level="INFO"/>\n'
        '  <root level="WARN"><appender-ref ref="SIFT"/></root>\n'
        "</configuration>\n"
    )


# ---------------------------------------------------------------------------------------------- server
class PrivateCanal:
    """Canal's server in a temporary directory (see the module docstring).

    Parameters:
        address: the MySQL/MariaDB source, ``host:port``.
        username, password: the account Canal replicates with (REPLICATION SLAVE, REPLICATION CLIENT
            and SELECT).
        destinations: destination names, or a mapping name -> that destination's
            ``instance.properties`` overrides. Keys without a ``canal.``/MQ prefix get
            ``canal.instance.``: ``{"filter.regex": "shop\\\\..*", "master.journal.name": f,
            "master.position": 4, "gtidon": True}``; values are str/int/bool.
        instance_properties: overrides for every destination (a destination's own win).
        canal_properties: more ``canal.properties`` keys, e.g. ``{"canal.serverMode": "kafka"}``.
        tsdb: keep the table-meta history in H2 (Canal's default); False reads table structure live.
        meta: ``"file"`` (Canal's default ``file-instance.xml``: cursors in ``meta.dat``) or ``"memory"``.
        user, passwd: ``canal.user`` / ``canal.passwd`` for clients (plain password; none by default).
        heap_mb: the JVM's ``-Xmx`` (and ``-Xms``).
        quick_start: serial GC and C1 only: faster start-up, slower steady state. False for benchmarks
            (``startup.sh``'s G1 options and the full JIT).
        java: the ``java`` binary (default :func:`find_java`: ``$JAVA_HOME``, else PATH: Java 17 here).
        jvm_args: more JVM options, last.
        timezone: ``-Duser.timezone`` (Canal formats TIMESTAMP values in the JVM's zone).
        wait_for_parser: :meth:`start` also waits until each parser found its start position (and
            fails on the parser's connection errors).
        keep: keep the temporary directory after :meth:`stop`.

    MQ modes (``canal.serverMode``) load their producer from ``$PYCANAL_CANAL_HOME/plugin`` (linked as
    ``plugin/`` beside the conf dir), e.g. connector.kafka's ``jar-with-dependencies`` (see the pom).
    """

    host = "127.0.0.1"

    def __init__(
        self,
        address: str,
        username: str = "repl",
        password: str = "repl",
        *,
        destinations: Mapping[str, Mapping[str, object] | None] | Sequence[str] = ("example",),
        instance_properties: Mapping[str, object] | None = None,
        canal_properties: Mapping[str, object] | None = None,
        tsdb: bool = True,
        meta: str = "file",
        user: str | None = None,
        passwd: str | None = None,
        heap_mb: int = 512,
        quick_start: bool = True,
        java: str | None = None,
        jvm_args: Sequence[str] = (),
        timezone: str | None = None,
        wait_for_parser: bool = True,
        keep: bool = False,
        startup_timeout: float = 90.0,
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
        log_level: str = "INFO",
    ) -> None:
        if meta not in ("file", "memory"):
            raise ValueError(f"meta must be 'file' or 'memory', not {meta!r}")
        if isinstance(destinations, str):
            destinations = [destinations]
        if isinstance(destinations, Mapping):
            self.destinations: dict[str, dict[str, object]] = {
                name: dict(over or {}) for name, over in destinations.items()
            }
        else:
            self.destinations = {name: {} for name in destinations}
        if not self.destinations:
            raise ValueError("PrivateCanal needs at least one destination")
        for name in self.destinations:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"bad destination name {name!r}")
        self.source = address
        self.username = username
        self.password = password
        self.instance_properties = dict(instance_properties or {})
        self.canal_properties = dict(canal_properties or {})
        self.tsdb = tsdb
        self.meta = meta
        self.user = user
        self.passwd = passwd
        self.heap_mb = heap_mb
        self.quick_start = quick_start
        self.java = java
        self.jvm_args = list(jvm_args)
        self.timezone = timezone
        self.wait_for_parser = wait_for_parser
        self.keep = keep
        self.startup_timeout = startup_timeout
        self._base_dir = base_dir
        self.die_with_parent = die_with_parent
        self.log_level = log_level
        self.port = 0
        self.root_dir: Path | None = None
        self.conf_dir: Path | None = None
        self.data_dir: Path | None = None
        self.log_dir: Path | None = None
        self.out_file: Path | None = None
        self.command: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0
        self.slave_ids: dict[str, int] = {}
        self._finalizer: weakref.finalize | None = None
        self._stopped = False

    @classmethod
    def for_mariadb(cls, db: PrivateMariaDB, **kwargs: Any) -> PrivateCanal:
        """A Canal replicating from a :class:`~pycanal.testing.mariadb.PrivateMariaDB` as its repl user."""
        return cls(f"{db.host}:{db.port}", db.repl_user, db.repl_password, **kwargs)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> PrivateCanal:
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """Canal's TCP address, ``127.0.0.1:<port>``."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def serves_tcp(self) -> bool:
        mode = str(self.canal_properties.get("canal.serverMode", "tcp")).strip().lower()
        return mode == "tcp" and _prop_value(self.canal_properties.get("canal.withoutNetty")) != "true"

    def log_file(self, destination: str | None = None) -> Path:
        """``logs/canal/canal.log``, or a destination's ``logs/<destination>/<destination>.log``."""
        assert self.log_dir is not None, "Canal not started"
        name = destination or "canal"
        return self.log_dir / name / f"{name}.log"

    def logs(self, lines: int = 40) -> str:
        """The tails of Canal's output and logs, for error messages."""
        parts = []
        files = [self.out_file] if self.out_file else []
        if self.log_dir is not None:
            files += [self.log_file()] + [self.log_file(d) for d in self.destinations]
        for path in files:
            text = tail(path, lines) if path is not None else ""
            if text.strip():
                parts.append(f"--- {path}\n{text}")
        return "\n".join(parts) or "(Canal wrote no log)"

    def start(self) -> PrivateCanal:
        """Write the conf dir, start Canal and wait until it serves (see the class docstring)."""
        if self.process is not None:
            raise RuntimeError("PrivateCanal already started")
        t0 = time.monotonic()
        java = self.java or find_java()
        classpath = canal_classpath(java)
        base = Path(self._base_dir) if self._base_dir is not None else Path(tempfile.gettempdir())
        self.root_dir = Path(tempfile.mkdtemp(prefix="pycanal-canal-", dir=base))
        self.conf_dir = self.root_dir / "conf"
        self.data_dir = self.root_dir / "data"
        self.log_dir = self.root_dir / "logs"
        self.out_file = self.root_dir / "canal.out"
        for d in (self.conf_dir, self.data_dir, self.log_dir):
            d.mkdir()
        self._finalizer = weakref.finalize(self, emergency_cleanup, None, self.root_dir, self.keep)
        try:
            self._write_static_conf()
            for attempt in range(8):
                if attempt:  # a port clash: no state or log lines of the last try
                    for d in (self.data_dir, self.log_dir):
                        shutil.rmtree(d)
                        d.mkdir()
                self.port = _free_port()
                self._write_canal_properties()
                if self._launch_and_wait(java, classpath):
                    break
                if attempt == 7:
                    raise CanalStartError(f"Canal could not bind a free port after 8 attempts\n{self.logs()}")
        except BaseException:
            self._kill_quietly()
            self._finalizer()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Terminate Canal (SIGTERM: its shutdown hook stops the instances, then SIGKILL) and remove
        the temporary directory unless ``keep``. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._kill_quietly()
        if self._finalizer is not None:
            self._finalizer.detach()
        if not self.keep and self.root_dir is not None:
            shutil.rmtree(self.root_dir, ignore_errors=True)

    def connector(self, destination: str | None = None, **kwargs: Any) -> SimpleConnector:
        """A connected pycanal :class:`~pycanal.client.simple.SimpleConnector` (the caller
        disconnects it); the destination defaults to the only/first one."""
        from pycanal.client.simple import SimpleConnector

        dest = destination or next(iter(self.destinations))
        conn = SimpleConnector(self.address, dest, self.user or "", self.passwd or "", **kwargs)
        conn.connect()
        return conn

    # ------------------------------------------------------------------ configuration
    def _instance_properties(self, name: str) -> dict[str, object]:
        assert self.data_dir is not None
        props: dict[str, object] = {
            "canal.instance.master.address": self.source,
            "canal.instance.dbUsername": self.username,
            "canal.instance.dbPassword": self.password,
            "canal.instance.connectionCharset": "UTF-8",
            "canal.instance.mysql.slaveId": self.slave_ids.setdefault(
                name, random.randint(10_000, 2**31 - 1)
            ),
            "canal.instance.gtidon": False,
            "canal.instance.master.journal.name": "",
            "canal.instance.master.position": "",
            "canal.instance.master.timestamp": "",
            "canal.instance.master.gtid": "",
            "canal.instance.tsdb.enable": self.tsdb,
            "canal.instance.filter.regex": r".*\..*",
            "canal.instance.filter.black.regex": r"mysql\.slave_.*",
            "canal.mq.topic": name,
            "canal.mq.partition": 0,
        }
        if self.tsdb:
            url = f"jdbc:h2:{self.data_dir / name / 'h2'};CACHE_SIZE=1000;MODE=MYSQL;"
            props["canal.instance.tsdb.url"] = url
        for source in (self.instance_properties, self.destinations[name]):
            props.update({_instance_key(k): v for k, v in source.items()})
        return props

    def _canal_properties(self) -> dict[str, object]:
        """Canal's documented server and instance defaults, then ours, then the caller's."""
        from pycanal.server.wire import password_hash

        assert self.data_dir is not None
        props: dict[str, object] = {
            "canal.ip": self.host,
            "canal.port": self.port,
            "canal.metrics.pull.port": 0,  # canal.prometheus is not on Maven Central for 1.1.7
            "canal.zkServers": "",
            "canal.withoutNetty": False,
            "canal.serverMode": "tcp",
            "canal.file.data.dir": self.data_dir,
            "canal.file.flush.period": 1000,
            "canal.instance.memory.buffer.size": 16384,
            "canal.instance.memory.buffer.memunit": 1024,
            "canal.instance.memory.batch.mode": "MEMSIZE",
            "canal.instance.memory.rawEntry": True,
            "canal.instance.detecting.enable": False,
            "canal.instance.detecting.sql": "select 1",
            "canal.instance.detecting.interval.time": 3,
            "canal.instance.detecting.retry.threshold": 3,
            "canal.instance.detecting.heartbeatHaEnable": False,
            "canal.instance.transaction.size": 1024,
            "canal.instance.fallbackIntervalInSeconds": 60,
            "canal.instance.network.receiveBufferSize": 16384,
            "canal.instance.network.sendBufferSize": 16384,
            "canal.instance.network.soTimeout": 30,
            "canal.instance.filter.druid.ddl": True,
            "canal.instance.filter.query.dcl": False,
            "canal.instance.filter.query.dml": False,
            "canal.instance.filter.query.ddl": False,
            "canal.instance.filter.table.error": False,
            "canal.instance.filter.rows": False,
            "canal.instance.filter.transaction.entry": False,
            "canal.instance.filter.dml.insert": False,
            "canal.instance.filter.dml.update": False,
            "canal.instance.filter.dml.delete": False,
            "canal.instance.binlog.format": "ROW,STATEMENT,MIXED",
            "canal.instance.binlog.image": "FULL,MINIMAL,NOBLOB",
            "canal.instance.get.ddl.isolation": False,
            "canal.instance.parser.parallel": True,
            "canal.instance.parser.parallelBufferSize": 256,
            "canal.instance.tsdb.spring.xml": "classpath:spring/tsdb/h2-tsdb.xml" if self.tsdb else "",
            "canal.instance.tsdb.dbUsername": "canal",
            "canal.instance.tsdb.dbPassword": "canal",
            "canal.instance.tsdb.snapshot.interval": 24,
            "canal.instance.tsdb.snapshot.expire": 360,
            "canal.destinations": ",".join(self.destinations),
            "canal.auto.scan": False,
            "canal.auto.reset.latest.pos.mode": False,
            "canal.instance.global.mode": "spring",
            "canal.instance.global.lazy": False,
            "canal.instance.global.spring.xml": f"classpath:spring/{self.meta}-instance.xml",
            "canal.mq.flatMessage": True,
            "canal.mq.canalBatchSize": 50,
            "canal.mq.canalGetTimeout": 100,
            "canal.mq.accessChannel": "local",
            "canal.mq.database.hash": True,
            "canal.mq.send.thread.size": 30,
            "canal.mq.build.thread.size": 8,
        }
        if self.user:
            props["canal.user"] = self.user
            props["canal.passwd"] = password_hash(self.passwd) if self.passwd else ""
        props.update(self.canal_properties)
        return props

    def _write_canal_properties(self) -> None:
        assert self.conf_dir is not None
        _write_properties(
            self.conf_dir / "canal.properties", self._canal_properties(), "written by PrivateCanal"
        )

    def _write_static_conf(self) -> None:
        assert self.conf_dir is not None and self.log_dir is not None
        spring = self.conf_dir / "spring"
        (spring / "tsdb" / "sql-map").mkdir(parents=True)
        standby = any(
            "canal.instance.standby.address" in {_instance_key(k) for k in src}
            for src in (self.instance_properties, *self.destinations.values())
        )
        (spring / "base-instance.xml").write_text(_base_instance_xml())
        (spring / "file-instance.xml").write_text(_instance_xml("file", standby))
        (spring / "memory-instance.xml").write_text(_instance_xml("memory", standby))
        (spring / "tsdb" / "h2-tsdb.xml").write_text(_tsdb_xml())
        for name, text in _tsdb_mappers().items():
            (spring / "tsdb" / "sql-map" / name).write_text(text)
        (self.conf_dir / "logback.xml").write_text(_logback_xml(self.log_dir, self.log_level))
        # MQ producers: Canal's ExtensionLoader looks in plugin/ beside the first classpath entry (conf/).
        plugins = canal_home() / "plugin"
        if plugins.is_dir():
            (self.conf_dir.parent / "plugin").symlink_to(plugins, target_is_directory=True)
        for name in self.destinations:
            (self.conf_dir / name).mkdir()
            _write_properties(
                self.conf_dir / name / "instance.properties",
                self._instance_properties(name),
                f"destination {name}, written by PrivateCanal",
            )

    def _command(self, java: str, classpath: list[str]) -> list[str]:
        assert self.conf_dir is not None
        cmd = [java, f"-Xms{self.heap_mb}m", f"-Xmx{self.heap_mb}m", *JVM_FLAGS]
        if self.quick_start:
            cmd += ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
        else:
            cmd += ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=250", "-XX:+UseGCOverheadLimit"]
            cmd += ["-XX:+ExplicitGCInvokesConcurrent"]
        if self.timezone:
            cmd.append(f"-Duser.timezone={self.timezone}")
        cmd += [
            f"-Dlogback.configurationFile={self.conf_dir / 'logback.xml'}",
            f"-Dcanal.conf={self.conf_dir / 'canal.properties'}",
            *self.jvm_args,
            "-cp",
            os.pathsep.join([str(self.conf_dir), *classpath]),
            MAIN_CLASS,
        ]
        return cmd

    # ------------------------------------------------------------------ start-up
    def _launch_and_wait(self, java: str, classpath: list[str]) -> bool:
        """Start Canal on ``self.port``; True when it serves, False on a port clash."""
        assert self.root_dir is not None and self.out_file is not None
        self.command = self._command(java, classpath)
        out = open(self.out_file, "wb")  # noqa: SIM115 - closed below
        try:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.root_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_DIE_WITH_PARENT
                if self.die_with_parent and sys.platform.startswith("linux")
                else None,
            )
        finally:
            out.close()
        assert self._finalizer is not None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, emergency_cleanup, self.process, self.root_dir, self.keep)

        deadline = time.monotonic() + self.startup_timeout
        while True:
            output = self.out_file.read_text(errors="replace")
            if _FAILED in output:
                if "BindException" in output or "Address already in use" in output:
                    self._kill_quietly()
                    self.process = None
                    return False
                reason = output[output.index(_FAILED) + len(_FAILED) :].splitlines()[0].strip()
                raise CanalStartError(f"Canal failed to start: {reason}\n{self.logs()}")
            rc = self.process.poll()
            if rc is not None:
                raise CanalStartError(f"Canal exited with code {rc} during start-up\n{self.logs()}")
            if _STARTED in output:
                break
            self._check_deadline(deadline, "did not start")
            time.sleep(0.1)
        eager = [name for name in self.destinations if not self.lazy(name)]  # lazy: started by a client
        if self.serves_tcp:
            for name in eager:
                self._wait_subscribe(name, deadline)
        if self.wait_for_parser:
            for name in eager:
                self._wait_parser(name, deadline)
        return True

    def lazy(self, destination: str) -> bool:
        """``canal.instance.<destination>.lazy``, else ``canal.instance.global.lazy``: the instance
        starts when a client first subscribes (and :meth:`start` does not wait for it)."""
        props = self.canal_properties
        value = props.get(f"canal.instance.{destination}.lazy", props.get("canal.instance.global.lazy"))
        return _prop_value(value) == "true" if value is not None else False

    def _check_deadline(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline:
            raise CanalStartError(f"Canal {what} within {self.startup_timeout:g}s\n{self.logs()}")

    def _wait_subscribe(self, name: str, deadline: float) -> None:
        """A pycanal client connects and subscribes (Canal's own instance filter), then leaves."""
        from pycanal.client.simple import CanalClientError

        while True:
            try:
                conn = self.connector(name, so_timeout=5.0)
            except CanalClientError as exc:
                error: Exception = exc
            else:
                try:
                    conn.subscribe()
                    conn.unsubscribe()
                    return
                except CanalClientError as exc:
                    error = exc
                finally:
                    conn.disconnect()
            if self.process is not None and self.process.poll() is not None:
                raise CanalStartError(f"Canal exited during start-up\n{self.logs()}")
            self._check_deadline(deadline, f"did not serve destination {name!r} ({error})")
            time.sleep(0.2)

    def _wait_parser(self, name: str, deadline: float) -> None:
        """Until the parser's log says it found its start position, or that it failed."""
        path = self.log_file(name)
        while True:
            text = path.read_text(errors="replace") if path.exists() else ""
            m = _PARSER_ERROR.search(text)
            if m:
                raise CanalStartError(
                    f"Canal's parser for destination {name!r} cannot replicate from {self.source}: "
                    f"{_error_summary(text, m.start())}\n{self.logs()}"
                )
            if _PARSER_OK.search(text):
                return
            if self.process is not None and self.process.poll() is not None:
                raise CanalStartError(f"Canal exited during start-up\n{self.logs()}")
            self._check_deadline(deadline, f"parser for {name!r} found no start position")
            time.sleep(0.1)

    def _kill_quietly(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __repr__(self) -> str:
        state = "running" if self.running else ("stopped" if self._stopped else "not started")
        return f"<PrivateCanal {CANAL_VERSION} {state} port={self.port} source={self.source} destinations={list(self.destinations)}>"
