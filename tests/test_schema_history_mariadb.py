"""The schema model against a real MariaDB: a differential test of a long DDL sequence, the SQLite
history (restart, positions before/between/after DDL), and TABLE_MAP checking."""

from __future__ import annotations

import pytest

from pycanal.binlog import read_events
from pycanal.binlog.events import QueryEvent
from pycanal.parse.ddl import MODE_ANSI_QUOTES, MODE_NO_BACKSLASH_ESCAPES, MODE_REAL_AS_FLOAT, parse_statement
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import SchemaHistory, SchemaModel, load_schema

DBS = ("shd", "shd2", "shd3")
FILTER = TableFilter(r"shd\..*,shd2\..*,shd3\..*")

# (default schema, statement). Each runs on the server and in the model; after each the model
# must equal a fresh information_schema load, column by column.
STEPS: list[tuple[str | None, str]] = [
    (None, "CREATE DATABASE shd CHARACTER SET latin1 COLLATE latin1_swedish_ci"),
    (None, "CREATE DATABASE IF NOT EXISTS shd2 DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_unicode_ci"),
    (
        "shd",
        """CREATE TABLE t1 (
            id int unsigned NOT NULL AUTO_INCREMENT,
            ti tinyint(1) NOT NULL DEFAULT 0,
            si smallint(5) unsigned zerofill,
            mi mediumint,
            bi bigint(20) unsigned DEFAULT 42,
            b bool,
            i8 int8,
            r real,
            f float(7,3) unsigned,
            fp float(30),
            d double DEFAULT -1.25,
            dc decimal(12,2) NOT NULL DEFAULT 1.5,
            n numeric(10),
            bt bit(13),
            dt date DEFAULT '2020-01-01',
            tm time(3),
            dtm datetime(6),
            ts timestamp NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
            y year,
            c char(10),
            c2 char,
            nc national char(4),
            vc varchar(64) NOT NULL DEFAULT '',
            vcb varchar(20) BINARY,
            vcu varchar(30) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT 'it''s',
            vca varchar(5) ASCII,
            nv nvarchar(8),
            bn binary(16),
            vb varbinary(255),
            tt tinytext,
            tx text,
            t100 text(100),
            mt mediumtext CHARACTER SET utf8mb4,
            lt longtext,
            lv long varchar,
            tb tinyblob,
            bl blob,
            mb mediumblob,
            lb longblob,
            e enum('a','b''c','d e') DEFAULT 'a',
            s set('x','y','z') NOT NULL DEFAULT 'x,y',
            j json,
            g geometry,
            pt point,
            u uuid,
            ip inet6,
            PRIMARY KEY (id)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb3""",
    ),
    ("shd", "ALTER TABLE t1 ADD COLUMN a1 int AFTER id, ADD COLUMN a0 varchar(3) FIRST"),
    ("shd", "ALTER TABLE t1 DROP COLUMN mi, DROP n"),
    ("shd", "ALTER TABLE t1 MODIFY c varchar(20) CHARACTER SET latin1 NOT NULL AFTER a0"),
    ("shd", "ALTER TABLE t1 CHANGE COLUMN vc vc_renamed varchar(100) NULL DEFAULT 'x' FIRST"),
    ("shd", "ALTER TABLE t1 RENAME COLUMN tt TO tt2"),
    ("shd", "ALTER TABLE t1 ALTER COLUMN bi SET DEFAULT 7"),
    ("shd", "ALTER TABLE t1 ALTER COLUMN vc_renamed DROP DEFAULT"),
    ("shd", "ALTER TABLE t1 ADD (p1 int, p2 char(2) COLLATE latin1_bin)"),
    ("shd", "ALTER TABLE t1 MODIFY COLUMN id bigint unsigned NOT NULL AUTO_INCREMENT FIRST"),
    ("shd", "ALTER TABLE t1 CHANGE e e2 enum('a','b''c','d e','f') CHARACTER SET utf8mb4 AFTER id"),
    (
        "shd",
        "CREATE TABLE shd.t2 (a int NOT NULL, b varchar(10), c int, tx text, "
        "PRIMARY KEY (a, b(5))) ENGINE=InnoDB COLLATE=latin1_general_ci",
    ),
    ("shd", "ALTER TABLE t2 DROP PRIMARY KEY, ADD PRIMARY KEY (c)"),
    ("shd", "ALTER TABLE t2 CONVERT TO CHARACTER SET utf8mb4"),
    ("shd", "ALTER TABLE t2 DEFAULT CHARSET=ucs2"),
    ("shd", "ALTER TABLE t2 ADD d varchar(5), ADD e tinytext"),
    ("shd", "ALTER TABLE t2 CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin"),
    ("shd", "RENAME TABLE t1 TO t1r, t2 TO shd2.t2m"),
    ("shd", "ALTER TABLE t1r RENAME TO t1x"),
    ("shd2", "ALTER TABLE shd.t1x RENAME AS shd.t1y, ADD COLUMN z1 int"),
    ("shd", "TRUNCATE TABLE shd2.t2m"),
    ("shd", "CREATE TABLE t3 LIKE shd2.t2m"),
    ("shd", "CREATE TABLE IF NOT EXISTS t3 (z int)"),
    ("shd", "CREATE TABLE t4 (a int KEY, b text, c varchar(3) UNIQUE)"),
    (
        "shd",
        "ALTER TABLE t4 ADD COLUMN IF NOT EXISTS a int, DROP COLUMN IF EXISTS nope, ADD COLUMN IF NOT EXISTS d int",
    ),
    ("shd", "DROP TABLE t3, t4"),
    ("shd", "ALTER DATABASE shd CHARACTER SET utf8mb4"),
    ("shd", "CREATE TABLE t5 (a varchar(3), b int)"),
    ("shd", "CREATE INDEX i5 ON t5 (a)"),
    ("shd", "DROP INDEX i5 ON t5"),
    ("shd", "ALTER TABLE t5 ADD PRIMARY KEY (a)"),
    ("shd", "DROP INDEX `PRIMARY` ON t5"),
    ("shd", "RENAME TABLE t5 TO tmp, shd2.t2m TO t5, tmp TO shd2.t2m"),
    ("shd", "DROP DATABASE shd2"),
    (
        "shd",
        "/* leading */ CREATE TABLE `we``ird` (`col``1` int COMMENT 'x, y' /* inline */, `select` int, "
        "-- a line comment\n `Mixed` varchar(5) DEFAULT NULL) # trailing",
    ),
    ("shd", "ALTER TABLE `we``ird` ADD INDEX (`select`), ALGORITHM=INPLACE, LOCK=NONE"),
    ("shd", "ALTER TABLE `we``ird` CHANGE `mixed` `MIXED` varchar(6)"),
    (
        "shd",
        "CREATE TABLE t6 (a int NOT NULL, PRIMARY KEY (a)) /*!50100 PARTITION BY HASH (a) PARTITIONS 2 */",
    ),
    ("shd", "ALTER TABLE t6 ADD c varchar(10) COMPRESSED, ADD d blob COMPRESSED"),
    ("shd", "ALTER TABLE t6 ENGINE=InnoDB, COMMENT='hi'"),
    ("shd", "CREATE OR REPLACE TABLE t6 (x float unsigned, y double(5,2) zerofill, z int3, w middleint)"),
    ("shd", "DROP TABLE IF EXISTS t6, nope"),
    (
        "shd",
        "CREATE TABLE t7 (s serial, a text BINARY, b varchar(4) CHARACTER SET binary, c char(2) CHARSET binary, "
        "d text CHARACTER SET binary, e varchar(3) CHARSET utf8, f varchar(3) COLLATE utf8_bin, g text(1000), "
        "h tinytext CHARACTER SET latin1, i time(0), j decimal(5), k float(10,2), l bit DEFAULT b'1', "
        "m year DEFAULT 2020, n enum('p','q') CHARACTER SET latin1 COLLATE latin1_bin, o int(3) zerofill, "
        "p tinyint unsigned DEFAULT '7', q varchar(4) DEFAULT 12, r int DEFAULT NULL, t datetime DEFAULT NOW())",
    ),
    ("shd", "ALTER TABLE t7 MODIFY a varchar(10) NOT NULL, ADD u int PRIMARY KEY FIRST"),
    ("shd", "ALTER TABLE t7 DROP PRIMARY KEY, ADD PRIMARY KEY (r, a(3))"),
    ("shd", "ALTER TABLE t7 MODIFY r bigint, CHANGE a a2 varchar(12) CHARACTER SET latin1"),
    ("shd", "ALTER TABLE t7 CONVERT TO CHARACTER SET utf8mb4, DROP COLUMN s"),
    ("shd", "ALTER TABLE t7 ALTER COLUMN q SET DEFAULT 'abc', ALTER p SET DEFAULT 3, DROP COLUMN u"),
    ("shd", "ALTER TABLE t7 CONVERT TO CHARACTER SET utf8mb3 COLLATE utf8mb3_bin"),
    ("shd", "ALTER TABLE t7 COLLATE latin1_german1_ci, ADD v char(3), ADD w enum('a') FIRST"),
    ("shd", "CREATE TABLE t8 (a int NOT NULL, b int NOT NULL, UNIQUE KEY (a), KEY (b))"),
    ("shd", "ALTER TABLE t8 ADD CONSTRAINT pk PRIMARY KEY USING BTREE (b DESC, a)"),
    ("shd", "ALTER TABLE t8 RENAME COLUMN b TO B2, CHANGE a A2 int NOT NULL AFTER B2"),
    ("shd", "CREATE TABLE IF NOT EXISTS t9 SELECT 1 AS x, 'ab' AS y, NULL AS z"),
    ("shd", "CREATE TABLE IF NOT EXISTS t9 SELECT 2 AS x"),
    ("shd", "DROP TABLE t7, t8, t9"),
    # The session's collation_server (logged in the QUERY event) is CREATE DATABASE's default.
    (None, "SET SESSION collation_server = latin1_german1_ci"),
    (None, "CREATE DATABASE shd3"),
    (None, "SET SESSION collation_server = DEFAULT"),
    ("shd3", "CREATE TABLE t (a varchar(2), b text)"),
    # The session's sql_mode (logged too) decides how the statement reads.
    ("shd3", "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES,NO_BACKSLASH_ESCAPES,REAL_AS_FLOAT')"),
    ("shd3", 'CREATE TABLE "q""1" ("a b" int, c varchar(5) DEFAULT \'x\\\', r real)'),
    ("shd3", 'ALTER TABLE "q""1" ADD "d" varchar(5) DEFAULT \'it\'\'s\''),
    ("shd3", "SET SESSION sql_mode = DEFAULT"),
    (None, "DROP DATABASE shd3"),
    ("shd", "DROP DATABASE shd"),
]


def snapshot(model: SchemaModel) -> dict:
    """Everything the model says about our databases, in a comparable form."""
    out: dict = {}
    for _key, db in sorted(model.databases.items()):
        if db.name in DBS:
            out[f"db {db.name}"] = (db.charset, db.collation)
    for (schema, name), t in sorted(model.tables.items()):
        if schema not in DBS:
            continue
        out[f"{schema}.{name}"] = {
            "charset": (t.charset, t.collation),
            "pk": list(t.primary_key),
            "columns": [
                (
                    c.name,
                    c.column_type,
                    c.data_type,
                    c.nullable,
                    c.unsigned,
                    c.charset,
                    c.collation,
                    c.default,
                    c.labels,
                )
                for c in t.columns
            ],
        }
    return out


def assert_same(model: SchemaModel, live: SchemaModel, step: str) -> None:
    got, want = snapshot(model), snapshot(live)
    assert got.keys() == want.keys(), f"after {step!r}: tables differ"
    for k in want:
        if k.startswith("db "):
            assert got[k] == want[k], f"after {step!r}: database {k}"
            continue
        assert got[k]["charset"] == want[k]["charset"], f"after {step!r}: {k} default charset"
        assert got[k]["pk"] == want[k]["pk"], f"after {step!r}: {k} primary key"
        gcols, wcols = got[k]["columns"], want[k]["columns"]
        assert [c[0] for c in gcols] == [c[0] for c in wcols], f"after {step!r}: {k} column names/order"
        for g, w in zip(gcols, wcols, strict=True):
            assert g == w, f"after {step!r}: {k} column {w[0]}"


@pytest.fixture
def clean(mariadb):
    for db in DBS:
        mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
    yield mariadb
    for db in DBS:
        mariadb.execute(f"DROP DATABASE IF EXISTS {db}")


def binlog_queries(db, start: tuple[str, int]) -> list[QueryEvent]:
    """The QUERY events (DDL) the server wrote since ``start``."""
    path = db.binlog_dir / start[0]
    return [
        event
        for event in read_events(path, start[1])
        if isinstance(event, QueryEvent) and event.query not in ("BEGIN", "COMMIT")
    ]


def test_differential_ddl_sequence(clean, tmp_path):
    """Every step runs on the server; the history follows the DDL the server wrote to its binlog
    (at the real positions) and must equal a fresh information_schema load after each step.
    Then the reopened store reproduces the model in force before every step."""
    db = clean
    conn = db.root_connection()
    history = SchemaHistory(tmp_path / "h.db", connect=db.root_connection, filter=FILTER, snapshot_every=7)
    history.start(db.current_binlog())
    states = []  # (position before the step, model snapshot before the step)
    logged = 0
    try:
        for default_schema, sql in STEPS:
            before = db.current_binlog()
            states.append((before, snapshot(history.model)))
            with conn.cursor() as cur:
                if default_schema:
                    cur.execute(f"USE {default_schema}")
                cur.execute(sql)
            assert db.current_binlog()[0] == before[0], "the test expects no binlog rotation"
            for event in binlog_queries(db, before):
                history.apply_event(event)
                logged += 1
            live = load_schema(conn, FILTER.accepts)
            assert_same(history.model, live, sql)
        states.append((db.current_binlog(), snapshot(history.model)))
    finally:
        conn.close()
    history.close()
    # Not logged: SET, and CREATE TABLE IF NOT EXISTS on an existing table.
    assert logged >= len(STEPS) - 6

    reopened = SchemaHistory(tmp_path / "h.db", connect=None, filter=FILTER)
    for pos, want in states:
        assert snapshot(reopened.schema_at(pos)) == want, f"schema_at({pos})"
    reopened.close()


def test_a_filtered_load_reads_the_kept_schemas_columns_only(clean):
    """The filter limits the schemas whose columns are read: the tables it keeps come whole (as an
    unfiltered load has them), every database is known, and nothing else is loaded."""
    db = clean
    conn = db.root_connection()
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shd CHARACTER SET latin1")
            cur.execute("CREATE DATABASE shd2")
            cur.execute(
                "CREATE TABLE shd.a (id INT, k VARCHAR(10) CHARACTER SET utf8mb4, PRIMARY KEY (k(4), id))"
            )
            cur.execute("CREATE TABLE shd.skipped (id INT PRIMARY KEY)")
            cur.execute("CREATE TABLE shd2.b (id BIGINT UNSIGNED PRIMARY KEY, e ENUM('x','y') DEFAULT 'y')")
        everything = load_schema(conn)
        kept = load_schema(conn, TableFilter(r"shd\.a").accepts)
        none = load_schema(conn, TableFilter(r"nowhere\..*").accepts)
    finally:
        conn.close()
    assert set(kept.tables) == {("shd", "a")}
    assert kept.tables["shd", "a"] == everything.tables["shd", "a"]
    assert kept.tables["shd", "a"].primary_key == [("k", 4), ("id", 0)]
    assert ("shd2", "b") in everything.tables and ("mysql", "db") in everything.tables
    assert set(kept.databases) == set(none.databases) == set(everything.databases) >= {"shd", "shd2", "mysql"}
    assert not none.tables


def test_parser_reads_every_step():
    ansi = MODE_ANSI_QUOTES | MODE_NO_BACKSLASH_ESCAPES | MODE_REAL_AS_FLOAT
    for _, sql in STEPS:
        parse_statement(sql, ansi if '"q""1"' in sql else 0)
