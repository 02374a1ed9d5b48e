"""A canal-python 0.4 consumer that treats ``isDdl`` entries as schema changes replays a workload.

The consumer is the kind Canal's users write against Canal's example client: an entry with
``RowChange.isDdl`` is a schema change it executes on its target (``USE ddlSchemaName`` first), and
it refuses any ``isDdl`` statement that is no table, index or database DDL; INSERT/UPDATE/DELETE
entries are applied by primary key; everything else (transaction markers, informational QUERY
entries) is skipped. The workload interleaves account statements, database statements, table DDL,
a view, and savepoints inside transactions with row changes. The consumer runs unmodified
canal-python in its own venv and prints its replay plan; this test applies the plan to a second
private MariaDB and compares every table with the source.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from canal_python import instance_from_here, run_script
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.tcp import CanalTcpServer
from pycanal.testing import PrivateMariaDB

CONSUMER = r"""
import json, re, sys, time
from canal.client import Client
from canal.protocol import EntryProtocol_pb2 as pb

port, destination, table_filter = sys.argv[1:4]
SCHEMA_CHANGE = re.compile(
    r"\s*(CREATE|ALTER|DROP|RENAME|TRUNCATE)\s+(TEMPORARY\s+)?(TABLE|DATABASE|SCHEMA|INDEX|UNIQUE\s+INDEX)\b", re.I
)
client = Client()
client.connect(host="127.0.0.1", port=int(port))
client.check_valid(username=b"", password=b"")
client.subscribe(client_id=b"1001", destination=destination.encode(), filter=table_filter.encode())
plan, skipped, done = [], [], False
deadline = time.time() + 60
while not done and time.time() < deadline:
    message = client.get(100)
    for entry in message["entries"]:
        if entry.entryType != pb.EntryType.ROWDATA:
            continue
        change = pb.RowChange()
        change.MergeFromString(entry.storeValue)
        h = entry.header
        if change.isDdl:
            if not SCHEMA_CHANGE.match(change.sql):
                sys.exit(f"refusing an unknown DDL at {h.logfileName}:{h.logfileOffset}: {change.sql!r}")
            # a database statement runs without USE (the binlog names the database it creates)
            use = "" if change.eventType == pb.EventType.QUERY else change.ddlSchemaName
            plan.append({"ddl": change.sql, "use": use})
            done = h.tableName == "zz_end"
        elif change.eventType in (pb.EventType.INSERT, pb.EventType.UPDATE, pb.EventType.DELETE):
            for row in change.rowDatas:
                image = lambda cols: {c.name: None if c.isNull else c.value for c in cols}
                keys = [c.name for c in (row.beforeColumns or row.afterColumns) if c.isKey]
                plan.append({"op": pb.EventType.Name(change.eventType), "schema": h.schemaName,
                             "table": h.tableName, "keys": keys, "before": image(row.beforeColumns),
                             "after": image(row.afterColumns)})
        else:
            skipped.append([pb.EventType.Name(change.eventType), change.sql])
    if not message["entries"]:
        time.sleep(0.05)
client.disconnect()
print("RESULT " + json.dumps({"plan": plan, "skipped": skipped, "done": done}))
"""

WORKLOAD = [
    "CREATE DATABASE parity_a",
    "CREATE USER 'parity_u'@'127.0.0.1' IDENTIFIED BY 'p1'",
    "CREATE TABLE parity_a.t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(8,2))",
    "GRANT SELECT, INSERT ON parity_a.* TO 'parity_u'@'127.0.0.1'",
    "INSERT INTO parity_a.t VALUES (1, 'one', 1.50), (2, 'two', NULL), (3, 'three', 3.25)",
    "ALTER USER 'parity_u'@'127.0.0.1' IDENTIFIED BY 'p2'",
    "ALTER TABLE parity_a.t ADD COLUMN w INT DEFAULT 7",
    "UPDATE parity_a.t SET v = 'uno', w = 11 WHERE id = 1",
    # savepoints inside a transaction: QUERY events between the rows
    ["BEGIN", "INSERT INTO parity_a.t VALUES (4, 'four', 4.00, 4)", "SAVEPOINT s1",
     "UPDATE parity_a.t SET n = 2.00 WHERE id = 2", "SAVEPOINT s2", "DELETE FROM parity_a.t WHERE id = 3",
     "COMMIT"],
    "CREATE VIEW parity_a.v AS SELECT id, v FROM parity_a.t",
    "CREATE DATABASE parity_b",
    "ALTER DATABASE parity_b CHARACTER SET utf8mb4",
    "CREATE TABLE parity_b.u (k VARCHAR(10) PRIMARY KEY, x INT)",
    "INSERT INTO parity_b.u VALUES ('a', 1), ('b', 2)",
    "CREATE INDEX ix ON parity_a.t (w)",
    "REVOKE INSERT ON parity_a.* FROM 'parity_u'@'127.0.0.1'",
    "RENAME TABLE parity_b.u TO parity_b.u2",
    "UPDATE parity_b.u2 SET x = 20 WHERE k = 'b'",
    "SET PASSWORD FOR 'parity_u'@'127.0.0.1' = PASSWORD('p3')",
    "CREATE TABLE parity_b.gone (id INT PRIMARY KEY)",
    "INSERT INTO parity_b.gone VALUES (1)",
    "DROP TABLE parity_b.gone",
    "DROP USER 'parity_u'@'127.0.0.1'",
    "INSERT INTO parity_a.t VALUES (5, 'five', 5.55, 5)",
    "CREATE TABLE parity_a.zz_end (id INT PRIMARY KEY)",
]  # fmt: skip


def _apply(conn, plan: list[dict]) -> None:
    with conn.cursor() as cur:
        for step in plan:
            if "ddl" in step:
                if step["use"]:
                    cur.execute(f"USE `{step['use']}`")
                cur.execute(step["ddl"])
                continue
            table = f"`{step['schema']}`.`{step['table']}`"
            if step["op"] in ("UPDATE", "DELETE"):
                where = " AND ".join(f"`{k}` = %s" for k in step["keys"])
                cur.execute(f"DELETE FROM {table} WHERE {where}", [step["before"][k] for k in step["keys"]])
            if step["op"] in ("INSERT", "UPDATE"):
                cols = list(step["after"])
                names = ", ".join(f"`{c}`" for c in cols)
                cur.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(cols))})",
                            [step["after"][c] for c in cols])  # fmt: skip
    conn.commit()


def _tables(server: PrivateMariaDB) -> dict[str, list[tuple]]:
    out = {}
    for schema, table in server.query(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema LIKE 'parity\\_%%' AND table_type = 'BASE TABLE' ORDER BY 1, 2"
    ):
        out[f"{schema}.{table}"] = server.query(f"SELECT * FROM `{schema}`.`{table}` ORDER BY 1")
    return out


def test_isddl_consumer_replays_accounts_databases_and_ddl(
    mariadb: PrivateMariaDB, mariadb_factory: Callable[..., PrivateMariaDB]
) -> None:
    target = mariadb_factory(server_id=9)
    embedded = CanalServerWithEmbedded()
    embedded.add_instance(instance_from_here(mariadb, "parity"))
    tcp = CanalTcpServer(embedded).start()
    try:
        conn = mariadb.root_connection()
        with conn.cursor() as cur:
            for step in WORKLOAD:
                for sql in [step] if isinstance(step, str) else step:
                    cur.execute(sql)
                conn.commit()
        conn.close()
        source = _tables(mariadb)
        _, result = run_script(CONSUMER, str(tcp.port), "parity", r"parity_a\..*,parity_b\..*")
    finally:
        tcp.stop()
        embedded.stop()
        mariadb.execute("DROP DATABASE IF EXISTS parity_a")
        mariadb.execute("DROP DATABASE IF EXISTS parity_b")
        mariadb.execute("DROP USER IF EXISTS 'parity_u'@'127.0.0.1'")
    assert result["done"], result
    # Everything that is no schema change came as an informational QUERY entry (nothing dropped):
    # the account statements, the view, the savepoints and ALTER DATABASE.
    skipped = [sql for kind, sql in result["skipped"] if kind == "QUERY"]
    for word in ("CREATE USER", "GRANT", "ALTER USER", "REVOKE", "SET PASSWORD", "DROP USER", "VIEW",
                 "SAVEPOINT `s1`", "SAVEPOINT `s2`", "ALTER DATABASE"):  # fmt: skip
        assert any(word in sql for sql in skipped), (word, json.dumps(skipped, indent=0))

    tconn = target.root_connection()
    try:
        _apply(tconn, result["plan"])
    finally:
        tconn.close()
    assert sorted(source) == ["parity_a.t", "parity_a.zz_end", "parity_b.u2"]
    assert [r[:2] for r in source["parity_a.t"]] == [(1, "uno"), (2, "two"), (4, "four"), (5, "five")]
    assert _tables(target) == source
