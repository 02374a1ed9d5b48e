"""The real Alibaba Canal (Java) as a private, throw-away test component, beside pycanal.

``PrivateCanal`` writes a Canal conf directory into a temporary directory — ``canal.properties``,
one ``<destination>/instance.properties`` per destination, the Spring files an instance is built from
(``spring/base-instance.xml``, ``spring/file-instance.xml``, ``spring/memory-instance.xml``, and for the
table-meta history ``spring/tsdb/h2-tsdb.xml`` with its MyBatis mappers) and ``logback.xml``, all
written here from Canal's documented keys and bean properties, not copied — then starts Canal's server
with the machine's Java on a free loopback port and waits until it serves: a ``SimpleConnector``
subscribes to every destination and each destination's parser has found its start position in the
binlog (a wrong address or password fails :meth:`PrivateCanal.start` with Canal's own log lines).

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
  flags are :data:`.launcher.JVM_FLAGS` (from Canal's ``startup.sh``) plus the heap and GC (``quick_start``).
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

The package
-----------
* ``launcher.py``: the version, where the jars are, the compiled launcher and the JVM's command line.
* ``properties.py``: ``canal.properties`` and ``instance.properties`` (Canal's defaults, Java syntax).
* ``spring.py``, ``tsdb.py``: the Spring instance files, and the TSDB's with its MyBatis mappers.
* ``conf.py``: the conf dir they make up, with ``logback.xml``.
* ``server.py``: :class:`PrivateCanal`, the process (on :class:`~pycanal.testing._process.PrivateServer`).
"""

from .launcher import CANAL_VERSION, CanalStartError, canal_classpath, canal_home
from .server import PrivateCanal

__all__ = [
    "CANAL_VERSION",
    "CanalStartError",
    "PrivateCanal",
    "canal_classpath",
    "canal_home",
]
