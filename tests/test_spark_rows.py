"""Change rows (``pycanal.spark.rows``) from binlog events and from Canal entries agree.

A private MariaDB (binlog_row_metadata=FULL) runs the seeded all-types workload plus tables with
a composite key and none, and DDL (ADD/RENAME COLUMN, RENAME/TRUNCATE/DROP TABLE). The binlog
is decoded once; its events become rows directly (``EventRows``) and through Canal entries
(``EntryRows``) built by pycanal's converters in several configurations: enum/set as index or
label, TIMESTAMP in UTC or another zone, GTID mode on, declared types from the schema history,
entries as messages or serialized bytes. Every configuration must give the same rows.
No Spark here.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import workload
from entry_oracle import EntryConverter
from pycanal.binlog import EventDecoder, read_events
from pycanal.binlog.events import QueryEvent
from pycanal.binlog.gtid import MariadbGtidSet
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import SchemaHistory
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.spark.entry_rows import EntryRows
from pycanal.spark.event_rows import EventRows
from pycanal.spark.rows import ChangeRow, RowsError, to_record_batch
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb

SEED = 6_2026


@dataclasses.dataclass
class Capture:
    db: str
    files: list[Path]
    start: tuple[str, int]
    history: SchemaHistory  # started before the workload: the model there
    entries: dict[str, list] = dataclasses.field(default_factory=dict)  # per configuration, made once


@pytest.fixture(scope="module")
def capture(mariadb: PrivateMariaDB) -> Capture:
    db = f"spark_rows_{uuid.uuid4().hex[:8]}"
    spec = workload.ALL_TYPES
    mariadb.execute(f"CREATE DATABASE `{db}`")
    first = mariadb.flush_binary_logs()
    start = mariadb.current_binlog()
    history = SchemaHistory(connect=lambda: mariadb.root_connection(), filter=TableFilter(f"{db}\\..*"))
    history.start(start)
    conn = mariadb.root_connection(db)
    try:
        with conn.cursor() as cur:
            cur.execute(spec.create_sql(db))
            cur.execute("CREATE TABLE two (b VARCHAR(8), a INT, v DECIMAL(8,3), PRIMARY KEY (b, a))")
            cur.execute("CREATE TABLE nokey (x INT, y VARCHAR(10))")
        workload.run(conn, workload.generate(spec, db, SEED, ops=120))
        with conn.cursor() as cur:
            for sql in (
                "INSERT INTO two VALUES ('k', 1, 1.5), ('k', 2, -0.001), ('z', 1, NULL)",
                "UPDATE two SET a = 3 WHERE b = 'k' AND a = 1",
                "DELETE FROM two WHERE b = 'z'",
                "INSERT INTO nokey VALUES (1, 'a'), (1, 'a'), (NULL, NULL)",
                "UPDATE nokey SET y = 'b' WHERE x = 1",
                "ALTER TABLE two ADD COLUMN w INT DEFAULT 7, RENAME COLUMN v TO v2",
                "INSERT INTO two (b, a, v2) VALUES ('q', 9, 2)",
                "RENAME TABLE nokey TO nokey2",
                "TRUNCATE TABLE nokey2",
                "DROP TABLE nokey2",
                f"CREATE TABLE `{db}`.later (id BIGINT UNSIGNED PRIMARY KEY, s SET('a','b'))",
                "INSERT INTO later VALUES (18446744073709551615, 'a,b')",
            ):
                cur.execute(sql)
    finally:
        conn.close()
    last = mariadb.flush_binary_logs()
    names = [p.name for p in mariadb.binlog_files()]
    files = [mariadb.binlog_dir / n for n in names[names.index(first.name) : names.index(last.name)]]
    return Capture(db, files, start, history)


def events(
    cap: Capture, decoder: EventDecoder | None = None, history: SchemaHistory | None = None
) -> Iterator:
    for path in cap.files:
        start = cap.start[1] if path.name == cap.start[0] else None
        for e in read_events(path, start_position=start, decoder=decoder):
            if history is not None and isinstance(e, QueryEvent):
                history.apply_event(e)
            yield e


def only(cap: Capture) -> TableFilter:
    return TableFilter(f"{cap.db}\\..*")


def event_rows(cap: Capture) -> list[ChangeRow]:
    return list(EventRows(accepts=only(cap)).rows(events(cap)))


ENTRY_VARIANTS = ["index_utc", "label_kolkata", "gtid_mode_bytes", "history_declared_types"]


def configuration(cap: Capture, variant: str) -> tuple[Callable[[], Any], list]:
    """(new row builder, its input) of one configuration: "events" or one of ``ENTRY_VARIANTS``."""
    if variant == "events":
        return (lambda: EventRows(accepts=only(cap))), list(events(cap))
    kw: dict[str, Any] = {}
    history = None
    if variant == "index_utc":
        converter: Any = EntryConverter()
    elif variant == "label_kolkata":
        converter = EntryConverter(enum_set="label", timezone="Asia/Kolkata")
        kw["timezone"] = "Asia/Kolkata"
    elif variant == "gtid_mode_bytes":
        converter = RawEntryConverter(gtid_set=MariadbGtidSet())
    else:
        converter, history = EntryConverter(), cap.history  # the history follows the DDL: once only
    if variant not in cap.entries:
        decoder = EventDecoder(table_meta=history.table_meta) if history is not None else None
        cap.entries[variant] = [en for e in events(cap, decoder, history) for en in converter.convert(e)]
    return (lambda: EntryRows(accepts=only(cap), **kw)), cap.entries[variant]


def test_rows_from_events_look_right(capture: Capture) -> None:
    rows = event_rows(capture)
    db = capture.db
    ops = Counter((r.table, r.op) for r in rows)
    assert ops[("t_all_types", "INSERT")] > 50 and ops[("t_all_types", "DELETE")] > 5
    assert ops[("two", "INSERT")] == 4 and ops[("nokey", "INSERT")] == 3
    positions = [(r.position.file, r.position.offset, r.position.row) for r in rows]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert all(r.position.gtid and r.position.gtid.startswith("0-1-") for r in rows)

    two = [r for r in rows if r.table == "two" and r.op != "DDL"]
    assert json.loads(two[0].after) == {"b": "k", "a": 1, "v": "1.500"}
    assert two[0].pk == '{"b":"k","a":1}'  # column order, whatever the key order
    key_change = two[3]
    assert (key_change.op, key_change.pk) == ("UPDATE", '{"b":"k","a":3}')
    assert json.loads(key_change.before)["a"] == 1
    assert two[4].op == "DELETE" and two[4].pk == '{"b":"z","a":1}' and two[4].after is None
    assert json.loads(two[-1].after) == {"b": "q", "a": 9, "v2": "2.000", "w": 7}
    assert all(r.pk is None for r in rows if r.table == "nokey")
    later = [r for r in rows if r.table == "later" and r.op == "INSERT"]
    assert later[0].pk == '{"id":18446744073709551615}' and json.loads(later[0].after)["s"] == ["a", "b"]

    ddl = [(r.database, r.table, r.sql.split()[0]) for r in rows if r.op == "DDL"]
    assert ddl == [
        (db, "t_all_types", "CREATE"),
        (db, "two", "CREATE"),
        (db, "nokey", "CREATE"),
        (db, "two", "ALTER"),
        (db, "nokey", "RENAME"),
        (db, "nokey2", "RENAME"),
        (db, "nokey2", "TRUNCATE"),
        (db, "nokey2", "DROP"),
        (db, "later", "CREATE"),
    ]
    rename = [r for r in rows if r.op == "DDL" and r.sql.startswith("RENAME")]
    assert rename[0].position.offset == rename[1].position.offset and [r.position.row for r in rename] == [
        0,
        1,
    ]
    assert all(r.sql_database == db for r in rows if r.op == "DDL")

    batch = to_record_batch(rows)
    assert batch.num_rows == len(rows)
    assert batch.column("position").field("offset").to_pylist() == [r.position.offset for r in rows]


@pytest.mark.parametrize("variant", ENTRY_VARIANTS)
def test_rows_from_entries_equal_rows_from_events(capture: Capture, variant: str) -> None:
    expected = event_rows(capture)
    new, entries = configuration(capture, variant)
    got = list(new().rows(entries))
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e, f"{g}\n!=\n{e}"


def test_entries_resume_inside_an_event(capture: Capture) -> None:
    """A stream batch that starts mid-transaction continues from the previous builder's state
    (GTID, row numbering within an offset) and gives the same rows as one pass."""
    rows = event_rows(capture)
    conv = EntryConverter()
    entries = [en for e in events(capture) for en in conv.convert(e)]
    cut = len(entries) // 2
    first = EntryRows(accepts=only(capture))
    head = list(first.rows(entries[:cut]))
    tail = list(EntryRows(accepts=only(capture), gtid=first.gtid, resume=first.resume).rows(entries[cut:]))
    assert head + tail == rows

    first = EntryRows(accepts=only(capture))
    batches = list(first.batches(entries[:cut], rows_per_batch=16))
    batches += EntryRows(accepts=only(capture), gtid=first.gtid, resume=first.resume).batches(entries[cut:])
    assert pa.Table.from_batches(batches).equals(pa.Table.from_batches([to_record_batch(rows)]))


@pytest.mark.parametrize("variant", ["events", *ENTRY_VARIANTS])
def test_batches_equal_the_rows(capture: Capture, variant: str) -> None:
    """``batches()`` (cut inside events here) holds what ``to_record_batch`` makes of ``rows()``."""
    new, source = configuration(capture, variant)
    rows = list(new().rows(source))
    batches = list(new().batches(source, rows_per_batch=7))
    assert [b.num_rows for b in batches] == [min(7, len(rows) - i) for i in range(0, len(rows), 7)]
    assert pa.Table.from_batches(batches).equals(pa.Table.from_batches([to_record_batch(rows)]))


def test_no_column_names_is_an_error(capture: Capture) -> None:
    stripped: dict[int, object] = {}

    def no_names(tm):  # the same object per layout, as the decoder requires
        return stripped.setdefault(id(tm), dataclasses.replace(tm, names=None))

    with pytest.raises(RowsError, match=r"t_all_types at mysql-bin\.\d+:\d+: the binlog has no column names"):
        list(EventRows(accepts=only(capture)).rows(events(capture, EventDecoder(table_meta=no_names))))


def test_unknown_mysql_type_is_an_error() -> None:
    from pycanal.protocol import EntryProtocol_pb2 as pb

    change = pb.RowChange(eventType=pb.INSERT)
    change.rowDatas.add().afterColumns.add(name="g", mysqlType="hologram", value="x", sqlType=12)
    entry = pb.Entry(
        entryType=pb.ROWDATA,
        header=pb.Header(schemaName="d", tableName="t", logfileName="mysql-bin.000001", logfileOffset=99),
        storeValue=change.SerializeToString(),
    )
    with pytest.raises(RowsError, match=r"column 'g' \(hologram\) of d\.t at mysql-bin\.000001:99"):
        list(EntryRows().rows([entry.SerializeToString()]))
