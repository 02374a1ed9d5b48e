"""Parity with the real Canal: one MariaDB binlog served by Alibaba Canal 1.1.7 and by pycanal.

Set-up (one pair per module, ~5 s): a private MariaDB 10.11 (ROW binlog, FULL row metadata), its
binlog rotated; Canal (:class:`pycanal.testing.canal.PrivateCanal`, JVM time zone UTC,
``-Duser.timezone=UTC``, because Canal prints TIMESTAMP columns in the JVM's zone and pycanal in UTC)
and pycanal's server (:class:`pycanal.deployer.launcher.CanalLauncher` in this process, from a conf
dir written here) both serve the same destinations, with the same ``instance.properties`` keys
(source, start position, filters, TSDB, GTID mode), over TCP; each destination of each server is
read by pycanal's ``SimpleConnector``. Every workload ends with a marker row; the entries up to it
are compared field by field (:func:`compare`: Header, RowChange, every Column, TransactionBegin/End;
entries aligned by binlog position, entry type and event type).

The destinations (:data:`DESTS`), each on the whole binlog:

* ``main``: Canal's shipped example (``.*\\..*``, black list ``mysql\\.slave_.*``, TSDB on);
* ``tsdboff``: the same with ``canal.instance.tsdb.enable = false``;
* ``filters``: ``filter.regex`` and ``filter.black.regex``;
* ``qdml``: ``filter.query.dml`` and ``filter.query.dcl``; ``qddl``: ``filter.query.ddl``;
* ``gtid``: ``canal.instance.gtidon = true``.

Canal's TSDB (table-meta history, on by default) is on except in ``tsdboff``. Its documented quirk on
MariaDB -- a configured ``master.journal.name``/``master.position`` is moved back to the last
transaction begin/end the TSDB finds before it, i.e. to the file's start on MariaDB, which logs no
BEGIN query -- is made harmless rather than avoided: both servers start at offset 4 of a freshly
rotated file, where Canal's rewind (``findPositionWithMasterIdAndTimestamp``) lands on the same
position. Both settings are compared; where Canal's output depends on the TSDB (``mysqlType``,
MariaDB JSON) the expected differences below say which.

Every difference is either fixed in pycanal or listed in ``docs/compatibility.md`` ("Checked against
Canal 1.1.7") and named in :data:`KNOWN`; each test pins which known differences it shows on which
destinations (``expected=``), so a change on either side fails: an unexplained difference, or a
pinned one that no longer shows.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest

from pycanal.client.simple import SimpleConnector
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port

pytestmark = pytest.mark.mariadb

DB = "canalref"
OTHER = "canalref_other"
STORE_SIZE = 4096  # entries in each store: smaller than the 10,000-row transaction (see its test)

DESTS: dict[str, dict[str, object]] = {
    "main": {},
    "tsdboff": {"tsdb.enable": False},
    "filters": {
        "filter.regex": rf"{DB}\.keep_.*,{DB}\.marker,{OTHER}\..*",
        "filter.black.regex": rf"{DB}\.keep_black.*",
    },
    "qdml": {"filter.query.dml": True, "filter.query.dcl": True},
    "qddl": {"filter.query.ddl": True},
    "gtid": {"gtidon": True},
}
TSDB_ON = frozenset(d for d, props in DESTS.items() if props.get("tsdb.enable", True))
ALL = frozenset(DESTS)


# ---------------------------------------------------------------------------------------- servers
@dataclass
class Reader:
    """One destination of one server, read with pycanal's client; entries kept as received."""

    name: str
    conn: SimpleConnector
    logs: Callable[[], str] = lambda: ""
    pending: list[pb.Entry] = field(default_factory=list)

    def until(self, marker: int, timeout: float = 60.0) -> list[pb.Entry]:
        """The entries up to the transaction end after marker row ``marker``."""
        deadline = time.monotonic() + timeout
        seen = -1
        i = 0
        while True:
            while i < len(self.pending):
                e = self.pending[i]
                if seen < 0 and _is_marker(e, marker):
                    seen = i
                elif seen >= 0 and e.entryType == pb.TRANSACTIONEND:
                    out, self.pending = self.pending[: i + 1], self.pending[i + 1 :]
                    return out
                i += 1
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name}: no marker {marker} within {timeout}s ({len(self.pending)} entries)\n{self.logs()}"
                )
            self.pending += self.conn.get(4000, timeout=200).entries


def _is_marker(e: pb.Entry, marker: int) -> bool:
    if e.entryType != pb.ROWDATA or e.header.tableName != "marker" or e.header.eventType != pb.INSERT:
        return False
    change = pb.RowChange.FromString(e.storeValue)
    return any(c.value == str(marker) for r in change.rowDatas for c in r.afterColumns if c.name == "id")


@dataclass
class Pair:
    db: PrivateMariaDB
    canal: Any
    pycanal: Any
    readers: dict[tuple[str, str], Reader]
    markers: int = 0

    def drain(self) -> dict[str, tuple[list[pb.Entry], list[pb.Entry]]]:
        """Write a marker row; every destination's entries (Canal's, pycanal's) up to it."""
        self.markers += 1
        self.db.execute(f"INSERT INTO {DB}.marker VALUES ({self.markers})")
        return {
            d: (self.readers["canal", d].until(self.markers), self.readers["py", d].until(self.markers))
            for d in DESTS
        }


def _props(d: dict[str, object]) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v).replace("\\", "\\\\")

    return "".join(f"{k} = {value(v)}\n" for k, v in d.items())


def _instance_key(key: str) -> str:
    return key if key.startswith("canal.") else f"canal.instance.{key}"


def _write_pycanal_conf(
    root: Path, db: PrivateMariaDB, port: int, dests: dict[str, dict[str, object]]
) -> None:
    """pycanal's conf dir: Canal's keys, the values PrivateCanal gives Canal."""
    root.mkdir(parents=True)
    server = {
        "canal.ip": "127.0.0.1",
        "canal.port": port,
        "canal.metrics.pull.port": free_port(),
        "canal.destinations": ",".join(dests),
        "canal.conf.dir": root,
        "canal.file.data.dir": root / "data",
        "canal.auto.scan": False,
    }
    (root / "canal.properties").write_text(_props(server))
    for name, props in dests.items():
        (root / name).mkdir()
        instance = {
            "canal.instance.master.address": f"{db.host}:{db.port}",
            "canal.instance.dbUsername": db.repl_user,
            "canal.instance.dbPassword": db.repl_password,
            "canal.instance.filter.regex": r".*\..*",
            "canal.instance.filter.black.regex": r"mysql\.slave_.*",
            **{_instance_key(k): v for k, v in props.items()},
        }
        (root / name / "instance.properties").write_text(_props(instance))


def _parser_state(launcher: Any, destination: str) -> str:
    """What pycanal's parser of ``destination`` did, for a reader that got nothing."""
    p = launcher.deployer.server.instance(destination).event_parser
    return (
        f"pycanal parser: runs={p.runs} received_bytes={p.received_bytes} "
        f"start={p.last_start_position} last_error={p.last_error!r}"
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    from pycanal.deployer.launcher import CanalLauncher
    from pycanal.testing.canal import PrivateCanal

    with PrivateMariaDB(server_id=57) as db:
        for schema in (DB, OTHER):
            db.execute(f"CREATE DATABASE {schema} CHARACTER SET utf8mb4")
        db.execute(f"CREATE TABLE {DB}.marker (id INT PRIMARY KEY)")
        db.execute("FLUSH BINARY LOGS")
        start = {"master.journal.name": db.current_binlog()[0], "master.position": 4}
        store = {"memory.buffer.size": STORE_SIZE}
        dests = {name: {**start, **store, **props} for name, props in DESTS.items()}
        # GTID mode starts from the GTID set (Canal with the TSDB also needs a timestamp for it)
        gtid = db.query("SELECT @@global.gtid_binlog_pos")[0][0]
        dests["gtid"].update({"master.gtid": gtid, "master.timestamp": int(time.time() * 1000)})
        canal = PrivateCanal.for_mariadb(db, destinations=dests, timezone="UTC")
        launcher = None
        readers: dict[tuple[str, str], Reader] = {}
        try:
            canal.start()
            conf = tmp_path_factory.mktemp("pycanal-reference") / "conf"
            _write_pycanal_conf(conf, db, free_port(), dests)
            launcher = CanalLauncher(conf).start()
            for d in DESTS:
                for side, address in (("canal", canal.address), ("py", f"127.0.0.1:{launcher.tcp.port}")):
                    conn = SimpleConnector(address, d)
                    conn.connect()
                    conn.subscribe()  # no filter: the instance's own
                    logs = canal.logs if side == "canal" else lambda d=d: _parser_state(launcher, d)
                    readers[side, d] = Reader(f"{side}/{d}", conn, logs)
            p = Pair(db, canal, launcher, readers)
            p.drain()  # the marker table's own entries
            yield p
        finally:
            for r in readers.values():
                r.conn.disconnect()
            if launcher is not None:
                launcher.stop()
            canal.stop()


# ---------------------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class Diff:
    """One difference: ``path`` names the field (``entry[12].rowDatas[0].afterColumns[3].value``,
    the column by its ``index``); an entry only one side has is ``entry[i]`` with a summary."""

    dest: str
    path: str
    canal: object
    pycanal: object
    table: str = ""
    column: str = ""
    mysql_type: str = ""
    entry: str = ""
    empty_txn: bool = False  # an extra TRANSACTIONEND that Canal's sink would get without row data
    only: Any = field(default=None, compare=False, repr=False)  # the entry only one side has

    @property
    def leaf(self) -> str:
        """The field's name (``value``, ``mysqlType``, ``props``), ``entry`` for a whole entry."""
        return self.path.rsplit(".", 1)[-1] if "]." in self.path else "entry"

    def __str__(self) -> str:
        where = " ".join(x for x in (self.table, self.column, self.mysql_type) if x)
        return f"{self.dest}:{self.path}: canal={self.canal!r} pycanal={self.pycanal!r}  [{where}]"


_PAYLOAD = {
    pb.ROWDATA: pb.RowChange,
    pb.TRANSACTIONBEGIN: pb.TransactionBegin,
    pb.TRANSACTIONEND: pb.TransactionEnd,
    pb.GTIDLOG: pb.Pair,
}


def _key(e: pb.Entry) -> tuple[str, int, int, int]:
    return (e.header.logfileName, e.header.logfileOffset, e.entryType, e.header.eventType)


def _summary(e: pb.Entry) -> str:
    h = e.header
    kind = pb.EntryType.Name(e.entryType)
    sql = ""
    if e.entryType == pb.ROWDATA:
        kind += " " + pb.EventType.Name(h.eventType)
        sql = pb.RowChange.FromString(e.storeValue).sql
        sql = f" {sql[:80]!r}" if sql else ""
    return f"{kind} {h.logfileName}:{h.logfileOffset}{sql}"


class _Walk:
    def __init__(self, dest: str, table: str, out: list[Diff]) -> None:
        self.dest, self.table, self.out = dest, table, out

    def message(self, path: str, a: Any, b: Any, column: str = "", mysql_type: str = "") -> None:
        for fd in a.DESCRIPTOR.fields:
            name = fd.name
            va, vb = getattr(a, name), getattr(b, name)
            p = f"{path}.{name}"
            if fd.message_type is not None and fd.message_type.name == "Pair":
                va, vb = [(x.key, x.value) for x in va], [(x.key, x.value) for x in vb]
                if va != vb:
                    self.add(p, va, vb, column, mysql_type)
            elif fd.message_type is not None and fd.message_type.name == "Column":
                self.columns(p, va, vb)
            elif fd.message_type is not None and fd.is_repeated:
                if len(va) != len(vb):
                    self.add(f"{p}.len", len(va), len(vb))
                for i, (x, y) in enumerate(zip(va, vb, strict=False)):
                    self.message(f"{p}[{i}]", x, y)
            elif fd.message_type is not None:
                self.message(p, va, vb, column, mysql_type)
            else:
                # proto3 presence: a oneof member set to its default still differs from an unset one
                ha = fd.containing_oneof is None or a.HasField(name)
                hb = fd.containing_oneof is None or b.HasField(name)
                if va != vb or ha != hb:
                    self.add(p, va if ha else None, vb if hb else None, column, mysql_type)

    def columns(self, path: str, a: Any, b: Any) -> None:
        ca, cb = {c.index: c for c in a}, {c.index: c for c in b}
        if [c.index for c in a] != sorted(ca) or [c.index for c in b] != sorted(cb):
            self.add(f"{path}.order", [c.index for c in a], [c.index for c in b])
        for i in sorted(ca.keys() | cb.keys()):
            x, y = ca.get(i), cb.get(i)
            if x is None or y is None:
                c = x or y
                self.add(f"{path}[{i}]", "present" if x else "absent", "present" if y else "absent", c.name)
            else:
                self.message(f"{path}[{i}]", x, y, x.name, x.mysqlType)

    def add(self, path: str, a: object, b: object, column: str = "", mysql_type: str = "") -> None:
        self.out.append(Diff(self.dest, path, a, b, self.table, column, mysql_type))


def _empty_flush(entries: list[pb.Entry], j: int) -> bool:
    """Entry ``j`` (a TRANSACTIONEND) reaches Canal's sink without row data: the transaction buffer
    flushes at every transaction begin/end and after every ROWDATA entry that is not DML, so the end
    goes with row data only when a DML entry comes right before it."""
    prev = entries[j - 1] if j else None
    return not (prev is not None and prev.entryType == pb.ROWDATA and prev.header.eventType in _DML)


_DML = (pb.INSERT, pb.UPDATE, pb.DELETE)


def compare(dest: str, canal: list[pb.Entry], py: list[pb.Entry]) -> list[Diff]:
    """Every difference between Canal's entries and pycanal's, entries aligned by
    (logfileName, logfileOffset, entryType, eventType)."""
    out: list[Diff] = []
    sm = difflib.SequenceMatcher(None, [_key(e) for e in canal], [_key(e) for e in py], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                a, b = canal[i], py[j]
                walk = _Walk(dest, f"{a.header.schemaName}.{a.header.tableName}".strip("."), out)
                walk.message(f"entry[{i}].header", a.header, b.header)
                cls = _PAYLOAD.get(a.entryType)
                if cls is not None and a.storeValue != b.storeValue:
                    walk.message(f"entry[{i}]", cls.FromString(a.storeValue), cls.FromString(b.storeValue))
            continue
        for i in range(i1, i2):
            e = canal[i]
            out.append(
                Diff(
                    dest,
                    f"entry[{i}]",
                    _summary(e),
                    None,
                    f"{e.header.schemaName}.{e.header.tableName}".strip("."),
                    entry=_summary(e),
                )
            )
        for j in range(j1, j2):
            e = py[j]
            table = f"{e.header.schemaName}.{e.header.tableName}".strip(".")
            out.append(
                Diff(
                    dest,
                    f"entry[py {j}]",
                    None,
                    _summary(e),
                    table,
                    entry=_summary(e),
                    empty_txn=_empty_flush(py, j),
                    only=e,
                )
            )
    return out


# ------------------------------------------------------------------------------- known differences
@dataclass(frozen=True)
class Known:
    """A difference between Canal 1.1.7 and pycanal that is understood: ``docs/compatibility.md``,
    "Checked against Canal 1.1.7", says why (same name there)."""

    name: str
    match: Callable[[Diff], bool]


def _mysql_type_words(t: str) -> str:
    """A column type without what DDL spelling changes: case, integer display widths, BOOLEAN."""
    t = re.sub(r"^bool(ean)?$", "tinyint", t.lower())
    return re.sub(r"\b(tinyint|smallint|mediumint|int|bigint|year)\(\d+\)", r"\1", t)


def _decimal_equal(a: object, b: object) -> bool:
    try:
        return Decimal(str(a)) == Decimal(str(b))
    except InvalidOperation:
        return False


def _charset_loss(canal: object, py: object) -> bool:
    """Canal's text is the column's bytes decoded as UTF-8 (its connection charset)."""
    if not isinstance(canal, str) or not isinstance(py, str):
        return False
    for charset in ("cp1252", "latin-1", "gbk", "utf-16-be"):
        try:
            raw = py.encode(charset)
        except UnicodeEncodeError:
            continue
        if raw.decode("utf-8", "replace") == canal:
            return True
    return False


def _utf8_as_latin1(canal: object, py: object) -> bool:
    return isinstance(py, str) and canal == py.encode("utf-8").decode("latin-1")


def _informational(e: pb.Entry | None) -> bool:
    if e is None or e.entryType != pb.ROWDATA or e.header.eventType != pb.QUERY:
        return False
    change = pb.RowChange.FromString(e.storeValue)
    return (
        not change.HasField("isDdl")
        and not e.header.schemaName
        and not e.header.tableName
        and bool(change.sql)
    )


def _binlog_type(desc: object) -> str:
    """The type pycanal derives from the binlog (FULL metadata) for ``DESC``'s text."""
    t = _mysql_type_words(str(desc)).replace(" zerofill", "")
    t = re.sub(r"^(float|double)\(\d+,\d+\)", r"\1", t)
    return _BINLOG_TYPES.get(t, t)


# MariaDB types the binlog logs as another: spatial types as GEOMETRY, INET6/UUID/INET4 as BINARY(n).
_BINLOG_TYPES = {
    **dict.fromkeys(
        (
            "point",
            "linestring",
            "polygon",
            "multipoint",
            "multilinestring",
            "multipolygon",
            "geometrycollection",
        ),
        "geometry",
    ),
    "inet6": "binary(16)",
    "uuid": "binary(16)",
    "inet4": "binary(4)",
}


KNOWN = [
    # pycanal opens a MariaDB transaction (GTID event, no BEGIN query) with TRANSACTIONBEGIN; Canal does not.
    Known("mariadb-begin", lambda d: d.canal is None and d.entry.startswith("TRANSACTIONBEGIN")),
    # Canal's sink drops a transaction end flushed without row data (filterEmtryTransactionEntry: all but
    # one every 5 s); pycanal keeps it.
    Known(
        "empty-transaction",
        lambda d: d.canal is None and d.empty_txn and d.entry.startswith("TRANSACTIONEND"),
    ),
    # With the TSDB, Canal's mysqlType is the type as the replayed DDL spells it ("INT", "TINYINT unsigned").
    Known(
        "tsdb-ddl-spelling",
        lambda d: (
            d.leaf == "mysqlType"
            and d.dest in TSDB_ON
            and _mysql_type_words(d.canal) == _mysql_type_words(d.pycanal)
        ),
    ),
    # MariaDB JSON (a LONGTEXT) under the TSDB: Canal reads "JSON" as a binary type: BLOB, bytes as ISO-8859-1.
    Known(
        "tsdb-mariadb-json",
        lambda d: (
            d.dest in TSDB_ON
            and d.mysql_type == "JSON"
            and (
                (d.leaf == "mysqlType" and (d.canal, d.pycanal) == ("JSON", "longtext"))
                or (d.leaf == "sqlType" and (d.canal, d.pycanal) == (2004, 2005))
                or (d.leaf == "value" and _utf8_as_latin1(d.canal, d.pycanal))
            )
        ),
    ),
    # Without the TSDB pycanal has no schema history: mysqlType from the binlog (no display widths, ...).
    Known(
        "binlog-mysqltype",
        lambda d: d.leaf == "mysqlType" and d.dest not in TSDB_ON and _binlog_type(d.canal) == d.pycanal,
    ),
    # BINARY(n): pycanal keeps the trailing 0x00 padding (what SELECT returns); Canal has the logged bytes.
    Known(
        "binary-padding",
        lambda d: (
            d.leaf == "value"
            and d.mysql_type.lower().startswith("binary(")
            and isinstance(d.pycanal, str)
            and d.pycanal.rstrip("\x00") == d.canal
        ),
    ),
    # DECIMAL: Canal leaves out the last group of fraction digits when it is zero (12.00 -> "12.0").
    Known(
        "decimal-scale",
        lambda d: (
            d.leaf == "value"
            and d.mysql_type.lower().startswith("decimal")
            and _decimal_equal(d.canal, d.pycanal)
            and len(str(d.canal)) < len(str(d.pycanal))
        ),
    ),
    # Text in a column charset other than utf8: Canal decodes the bytes as UTF-8 (U+FFFD for the rest).
    Known("column-charset", lambda d: d.leaf == "value" and _charset_loss(d.canal, d.pycanal)),
    # MariaDB INET6/UUID/INET4 (binary strings): Canal decides "binary" from the type's name, so reads a CHAR:
    # the logged bytes (trailing zero bytes cut) as UTF-8 text; pycanal a BLOB of the value's bytes.
    Known(
        "mariadb-binary-types",
        lambda d: (
            d.mysql_type.lower() in ("inet6", "uuid", "inet4")
            and (
                (d.leaf == "sqlType" and (d.canal, d.pycanal) == (1, 2004))
                or (
                    d.leaf == "value"
                    and isinstance(d.pycanal, str)
                    and d.pycanal.encode("latin-1").rstrip(b"\x00").decode("utf-8", "replace") == d.canal
                )
            )
        ),
    ),
    # GTID mode on MariaDB: pycanal sets Header.gtid and the curtGtid prop; Canal neither.
    Known(
        "mariadb-gtid-header",
        lambda d: (
            d.dest == "gtid"
            and (
                (d.path.endswith("header.gtid") and d.canal == "" and d.pycanal)
                or (
                    d.path.endswith("header.props")
                    and [kv for kv in d.pycanal if kv[0] != "curtGtid"] == d.canal  # type: ignore[union-attr]
                )
            )
        ),
    ),
    # Statements that name no table or database (accounts, views, routines, ALTER DATABASE, REPLACE,
    # SAVEPOINT, maintenance): Canal drops them, pycanal keeps them as QUERY entries without isDdl.
    Known("no-name-statement", lambda d: d.canal is None and _informational(d.only)),
    # ALTER TABLE adding only a CHECK or FOREIGN KEY: Druid gives no result, so Canal drops it.
    Known(
        "alter-check-or-fk",
        lambda d: (
            d.canal is None
            and d.entry.startswith("ROWDATA ALTER")
            and re.search(r"ALTER TABLE \S+ ADD (CONSTRAINT \S+ )?(CHECK|FOREIGN KEY)", d.entry, re.I)
            is not None
        ),
    ),
    # INTVAR LAST_INSERT_ID: Canal prints SET INSERT_ID for both kinds of INTVAR event.
    Known(
        "intvar-last-insert-id",
        lambda d: (
            d.leaf == "sql"
            and d.canal == str(d.pycanal).replace("SET LAST_INSERT_ID", "SET INSERT_ID", 1) != d.pycanal
        ),
    ),
]


def check(
    result: dict[str, tuple[list[pb.Entry], list[pb.Entry]]],
    expected: dict[str, frozenset[str]],
    show: int = 40,
) -> None:
    """Every difference is a known one, and the known ones pinned in ``expected`` (name ->
    destinations) all show, on exactly those destinations."""
    unknown: list[Diff] = []
    seen: dict[str, set[str]] = {}
    for dest, (canal, py) in result.items():
        assert canal, f"{dest}: no entries from Canal"
        for d in compare(dest, canal, py):
            rule = next((k for k in KNOWN if k.match(d)), None)
            if rule is None:
                unknown.append(d)
            else:
                seen.setdefault(rule.name, set()).add(dest)
    problems = [f"{len(unknown)} unexplained differences (first {min(show, len(unknown))}):"]
    problems += [f"  {d}" for d in unknown[:show]]
    for name in expected.keys() | seen.keys():
        want, got = set(expected.get(name, ())), seen.get(name, set())
        if want != got:
            problems.append(f"known difference {name!r}: expected on {sorted(want)}, seen on {sorted(got)}")
    assert not unknown and len(problems) == 1, "\n".join(problems)


# ---------------------------------------------------------------------------------------- workloads
def run(db: PrivateMariaDB, statements: list[str], session: tuple[str, ...] = ()) -> None:
    """The statements on one root connection (database ``canalref``, autocommit)."""
    conn = db.root_connection(DB)
    try:
        with conn.cursor() as cur:
            for sql in (*session, *statements):
                cur.execute(sql)
    finally:
        conn.close()


ZERO_DATES = "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'"  # zero dates and zero-in-date values

NUM = """CREATE TABLE t_num (
 id INT PRIMARY KEY,
 ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
 i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, izf INT(6) ZEROFILL,
 f FLOAT, d DOUBLE, f2 FLOAT(7,3), d2 DOUBLE(12,4),
 dec1 DECIMAL(20,6), dec2 DECIMAL(10,0), dec3 DECIMAL(65,30), dec4 DECIMAL(5,5), decu DECIMAL(8,2) UNSIGNED,
 b1 BIT(1), b8 BIT(8), b12 BIT(12), b64 BIT(64), bo BOOLEAN, y YEAR
)"""
NUM_ROWS = [
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808,"
    " 18446744073709551615, 42, 1.5, 1e10, 1234.567, 12345678.1234, -12345.6789, 42,"
    " -12345678901234567890123456789012345.123456789012345678901234567891, 0.12345, 999999.99,"
    " b'1', b'11111111', b'101010101010', b'1111111111111111111111111111111111111111111111111111111111111111', TRUE, 2024)",
    "(2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, 0, -0.0, 0.1, -0.001, 0.0001,"
    " 0.000001, -1, 0, -0.00001, 0, b'0', b'0', b'0', b'0', FALSE, 1901)",
    "(3, -1, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775808, 1, 3.4028234e38,"
    " 1.7976931348623157e308, 9999.999, -99999999.9999, 0, 9999999999, 0.000000000000000000000000000001, 0.99999,"
    " 0.01, b'1', b'10000000', b'100000000000',"
    " b'1000000000000000000000000000000000000000000000000000000000000000', -1, 2155)",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1e-10, 123456789.0, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0)",
    "(5, 0, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 1234567, 1e7, 1e-3, 0.5, 1e7,"
    " 12.5, 5, 1.5, 0.5, 12.00, b'0', b'1', b'1', b'1', 127, 2000)",
]

TIME = """CREATE TABLE t_time (
 id INT PRIMARY KEY,
 da DATE, t TIME, t1 TIME(1), t3 TIME(3), t6 TIME(6),
 dt DATETIME, dt1 DATETIME(1), dt3 DATETIME(3), dt6 DATETIME(6),
 ts TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL, ts6 TIMESTAMP(6) NULL, y YEAR
)"""
TIME_ROWS = [
    "(1, '2024-02-29', '-838:59:59', '-00:00:00.5', '838:59:58.999', '-12:34:56.000001',"
    " '2024-02-29 12:34:56', '2024-02-29 12:34:56.1', '1000-01-01 00:00:00.001', '9999-12-31 23:59:59.999999',"
    " '1970-01-01 00:00:01', '2038-01-19 03:14:07.99', '2024-02-29 12:34:56.123456', 2024)",
    "(2, '0000-00-00', '00:00:00', '00:00:00.0', '-00:00:01.250', '23:59:59.999999',"
    " '0000-00-00 00:00:00', '0000-00-00 00:00:00.0', '2024-00-00 00:00:00.000', '2024-02-00 10:00:00.000010',"
    " '0000-00-00 00:00:00', '0000-00-00 00:00:00.00', '2001-09-09 01:46:40.000001', 0)",
    "(3, '1000-01-01', '838:59:59', '-838:59:59.0', '-01:00:00.001', '-838:59:58.999999',"
    " '2000-01-01 00:00:00', '2000-01-01 00:00:00.9', '2000-01-01 00:00:00.5', '2000-01-01 00:00:00.000001',"
    " '2024-06-30 23:59:59', '2024-06-30 23:59:59.01', '2024-06-30 23:59:59.500000', 1901)",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]

STR = """CREATE TABLE t_str (
 id INT PRIMARY KEY,
 c CHAR(5), vc VARCHAR(20), vcl VARCHAR(300), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
 c1 CHAR(4) CHARACTER SET latin1, vc1 VARCHAR(10) CHARACTER SET latin1, tx1 TEXT CHARACTER SET latin1,
 cg CHAR(4) CHARACTER SET gbk, vcg VARCHAR(10) CHARACTER SET gbk, txg TEXT CHARACTER SET gbk,
 vc3 VARCHAR(10) CHARACTER SET utf8mb3, vcb VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
 vcu VARCHAR(10) CHARACTER SET ucs2, vca VARCHAR(10) CHARACTER SET ascii,
 bn BINARY(4), vb VARBINARY(8), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
 e ENUM('a','b','c'), e2 ENUM('x-ray','', 'yes'), st SET('x','y','z'), st2 SET('a','b','c','d','e','f','g','h','i'),
 j JSON, g GEOMETRY, p POINT, ls LINESTRING, i6 INET6, u UUID, i4 INET4
)"""
STR_ROWS = [
    "(1, 'ab', 'héllo wörld', REPEAT('ü', 300), 'tiny', 'text 🙂', 'medium', 'long',"
    " 'café', 'naïve', 'über', '中文', '汉字测试', '中文文本', 'ascii3', 'Bin', 'ucs2', 'asc',"
    " 'ab', 'xyz', 0x00ff, 0x0001fffe, 'mblob', 0xdeadbeef,"
    " 'b', 'x-ray', 'x,z', 'a,i', '{\"a\": [1, 2.5, null, \"ü\"], \"b\": {\"c\": true}}',"
    " ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(3.5 -4)'), ST_GeomFromText('LINESTRING(0 0, 1 1, 2 3)'),"
    " '2001:db8::ff00:42:8329', '123e4567-e89b-12d3-a456-426655440000', '192.168.0.1')",
    "(2, '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', '',"
    " '', '', '', '', '', '', 'a', '', '', '', '[]', NULL, NULL, NULL, '::',"
    " '00000000-0000-0000-0000-000000000000', '0.0.0.0')",
    "(3, 'a  ', 'trail  ', ' lead', 'x', 'y', 'z', 'w', 'a ', 'b ', 'c ', 'd ', 'e ', 'f ', 'g', 'h', 'i', 'j',"
    " 0x61000000, 0x6100, 0x00, 0x0000, 0x20, 0x80818283, 'c', 'yes', 'x,y,z', 'a,b,c,d,e,f,g,h,i', '\"str\"',"
    " ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('POINT(0 0)'),"
    " ST_GeomFromText('LINESTRING(0 0, 1 1)'), '::1', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '255.255.255.255')",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]
TABLES = {"t_num": (NUM, NUM_ROWS), "t_time": (TIME, TIME_ROWS), "t_str": (STR, STR_ROWS)}
_VALUES = ALL - {"filters"}  # the typed tables are not in the filters destination's white list
# The known differences of rows of the typed tables (values, types, names), and of every workload.
TYPED: dict[str, frozenset[str]] = {
    "mariadb-begin": ALL,
    "empty-transaction": frozenset({"filters"}),
    "tsdb-ddl-spelling": TSDB_ON & _VALUES,
    "tsdb-mariadb-json": TSDB_ON & _VALUES,
    "binlog-mysqltype": frozenset({"tsdboff"}),
    "binary-padding": _VALUES,
    "decimal-scale": _VALUES,
    "column-charset": _VALUES,
    "mariadb-binary-types": _VALUES,
    "mariadb-gtid-header": frozenset({"gtid"}),
}


def test_column_types(pair: Pair) -> None:
    stmts = []
    for name, (ddl, rows) in TABLES.items():
        stmts.append(ddl)
        stmts += [f"INSERT INTO {name} VALUES {row}" for row in rows]
        stmts.append(f"INSERT INTO {name} (id) VALUES (100)")
    run(pair.db, stmts, session=(ZERO_DATES,))
    check(pair.drain(), expected=TYPED)


def test_updates_deletes_and_transactions(pair: Pair) -> None:
    """UPDATE (``updated`` flags, NULL to value and back, every column family), DELETE, a transaction
    of several statements, a non-transactional table (COMMIT query, no XID) and an XA transaction."""
    run(
        pair.db,
        [
            "UPDATE t_num SET ti = ti + 1, dec1 = 1.5, b12 = b'1', f = 2.5 WHERE id = 1",
            "UPDATE t_num SET ti = NULL, y = NULL WHERE id = 2",
            "UPDATE t_num SET ti = 5, dec3 = 7 WHERE id = 4",
            "UPDATE t_num SET y = 2001",
            "UPDATE t_str SET vc = 'changed', c1 = 'été', j = '{\"x\": 1}', e = 'c', st = '', bn = 'zz' WHERE id = 1",
            "UPDATE t_str SET tx = NULL, bl = NULL, g = ST_GeomFromText('POINT(9 9)') WHERE id = 3",
            "UPDATE t_time SET ts = '2030-01-01 00:00:00', t = '-01:02:03', dt6 = NOW(6) WHERE id = 1",
            "DELETE FROM t_time WHERE id = 3",
            "DELETE FROM t_str WHERE id IN (2, 3)",
            "BEGIN",
            "INSERT INTO t_num (id, ti) VALUES (10, 1), (11, 2)",
            "UPDATE t_num SET ti = 3 WHERE id = 10",
            "DELETE FROM t_num WHERE id = 11",
            "COMMIT",
            "BEGIN",
            "INSERT INTO t_num (id) VALUES (12)",
            "ROLLBACK",
            "CREATE TABLE t_aria (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=Aria",
            "INSERT INTO t_aria VALUES (1, 'a'), (2, 'b')",
            "UPDATE t_aria SET v = 'c' WHERE id = 1",
            "XA START 'xa1'",
            "INSERT INTO t_num (id) VALUES (20)",
            "XA END 'xa1'",
            "XA PREPARE 'xa1'",
            "XA COMMIT 'xa1'",
        ],
        session=(ZERO_DATES,),
    )
    check(pair.drain(), expected=TYPED)


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_partial_row_images(pair: Pair, image: str) -> None:
    """``binlog_row_image`` MINIMAL / NOBLOB (session): before images of the key only, after images
    of the changed columns (NOBLOB: every column but unchanged BLOB/TEXT); a table without a
    primary key logs whole before images."""
    table = f"t_{image.lower()}"
    run(
        pair.db,
        [
            f"CREATE TABLE {table} (a INT, b VARCHAR(10), c TEXT, d DECIMAL(6,2))",
            f"INSERT INTO {table} VALUES (1, 'x', 'long text', 1.50), (2, 'y', NULL, NULL)",
            f"UPDATE {table} SET b = 'z' WHERE a = 1",
            f"DELETE FROM {table} WHERE a = 2",
            "INSERT INTO t_num (id, ti, dec1) VALUES (30, 1, 3)",
            "UPDATE t_num SET ti = 2, f = 0.5 WHERE id = 30",
            "UPDATE t_str SET tx = 'new text', vc = 'v' WHERE id = 1",
            "UPDATE t_str SET vc = 'w' WHERE id = 1",
            "DELETE FROM t_num WHERE id = 30",
        ],
        session=(f"SET SESSION binlog_row_image = {image}",),
    )
    expected = dict(TYPED)
    del expected["tsdb-mariadb-json"]  # JSON is a BLOB-family column: in neither image
    if image == "MINIMAL":  # only changed columns and keys: no BINARY, INET6 or latin1 column
        del expected["binary-padding"], expected["mariadb-binary-types"], expected["column-charset"]
    check(pair.drain(), expected=expected)


# Canal's statement classes (tests/test_canal_parity.py's TABLE), live: every one MariaDB accepts.
DDL = [
    # table DDL
    "CREATE TABLE t (id int)",
    f"CREATE TABLE {OTHER}.t (id int, c int, KEY ci (c))",
    "CREATE TEMPORARY TABLE tmp (id int)",  # not logged with binlog_format=ROW
    "CREATE TABLE `t2` LIKE t",
    "ALTER TABLE t ADD COLUMN c int",
    "ALTER TABLE t ENGINE=InnoDB",
    "ALTER TABLE t ADD INDEX i (c), ENGINE=InnoDB",
    "ALTER TABLE t ADD INDEX i2 (c), ADD COLUMN d int",
    "ALTER TABLE t ADD UNIQUE KEY u (c)",
    "ALTER TABLE t ADD PRIMARY KEY (id)",
    "ALTER TABLE t DROP INDEX i",
    "ALTER TABLE t DROP KEY i2",
    "ALTER TABLE t ADD CONSTRAINT chk CHECK (c > 0)",
    "ALTER TABLE t DROP CONSTRAINT chk",
    "ALTER TABLE t DROP PRIMARY KEY",
    "CREATE TABLE fk_parent (id int PRIMARY KEY)",
    "CREATE TABLE fk_child (id int, pid int, CONSTRAINT fk FOREIGN KEY (pid) REFERENCES fk_parent (id))",
    "ALTER TABLE fk_child DROP FOREIGN KEY fk",
    "ALTER TABLE t RENAME TO t3",
    "CREATE TABLE a (id int)",
    f"CREATE TABLE {OTHER}.b (id int)",
    f"DROP TABLE IF EXISTS a, {OTHER}.b",
    "CREATE INDEX i ON t3 (c)",
    f"DROP INDEX ci ON {OTHER}.t",
    "TRUNCATE TABLE t3",
    "TRUNCATE t3",
    "CREATE TABLE a (id int)",
    "CREATE TABLE c (id int)",
    "RENAME TABLE a TO b, c TO d",
    "DROP TEMPORARY TABLE tmp",
    # database statements
    "CREATE DATABASE canalref_inventory",
    "CREATE SCHEMA IF NOT EXISTS canalref_inventory",
    "ALTER DATABASE canalref_inventory CHARACTER SET latin1",
    "DROP DATABASE IF EXISTS canalref_inventory",
    # statement DML (STATEMENT binlog), and the events around it: USER_VAR, INTVAR, RAND
    "SET SESSION binlog_format = 'STATEMENT'",
    "INSERT INTO t3 VALUES (1, 1, 1)",
    f"UPDATE {OTHER}.t SET c = 1",
    "UPDATE b JOIN d ON b.id = d.id SET b.id = 1",
    "DELETE FROM t3 WHERE id = 1",
    "REPLACE INTO t3 VALUES (2, 2, 2)",
    "SET @v = 5",
    "INSERT INTO t3 (id, c) VALUES (@v, @v)",
    "CREATE TABLE ai (id int AUTO_INCREMENT PRIMARY KEY, v int)",
    "INSERT INTO ai (v) VALUES (1)",
    "INSERT INTO ai (v) VALUES (LAST_INSERT_ID())",
    "INSERT INTO t3 (id, c) VALUES (6, RAND() > 2)",
    "SET SESSION binlog_format = 'ROW'",
    # accounts, views, routines, triggers
    "CREATE USER 'u_ref'@'%' IDENTIFIED BY 'p'",
    "GRANT SELECT, INSERT ON canalref.* TO 'u_ref'@'%'",
    "REVOKE INSERT ON canalref.* FROM 'u_ref'@'%'",
    "ALTER USER 'u_ref'@'%' IDENTIFIED BY 'q'",
    "SET PASSWORD FOR 'u_ref'@'%' = PASSWORD('x')",
    "DROP USER 'u_ref'@'%'",
    "CREATE ROLE r_ref",
    "DROP ROLE r_ref",
    "CREATE VIEW v AS SELECT 1",
    "DROP VIEW v",
    "CREATE PROCEDURE p() SELECT 1",
    "DROP PROCEDURE p",
    "CREATE TRIGGER tr BEFORE INSERT ON t3 FOR EACH ROW SET NEW.c = 1",
    "DROP TRIGGER tr",
    # savepoints inside a transaction, maintenance
    "BEGIN",
    "INSERT INTO d VALUES (7)",
    "SAVEPOINT `s1`",
    "INSERT INTO d VALUES (8)",
    "ROLLBACK TO `s1`",
    "COMMIT",
    "ANALYZE TABLE t3",
    "OPTIMIZE TABLE t3",
    "FLUSH PRIVILEGES",
    # rows after the DDL: the columns both servers know by now (no rows of t3: see CANAL_TSDB_STOPS)
    "INSERT INTO d VALUES (1)",
    f"INSERT INTO {OTHER}.t VALUES (1, 2)",
]


def test_ddl_and_statements(pair: Pair) -> None:
    run(pair.db, DDL)
    entries = ALL - {"qddl"}  # filter.query.ddl drops every entry of a QUERY event
    check(
        pair.drain(),
        expected={
            "mariadb-begin": ALL,
            "empty-transaction": frozenset({"filters", "qdml", "qddl"}),
            "tsdb-ddl-spelling": TSDB_ON,
            "binlog-mysqltype": frozenset({"tsdboff"}),
            "mariadb-gtid-header": frozenset({"gtid"}),
            "no-name-statement": entries - {"qdml"},  # filter.query.dcl drops them
            "alter-check-or-fk": entries - {"filters"},
            "intvar-last-insert-id": ALL - {"qdml"},  # only filter.query.dml drops INTVAR entries
        },
    )


def test_transaction_of_10000_rows(pair: Pair) -> None:
    """10,000 single-row INSERTs in one transaction: 20,000 entries (ANNOTATE_ROWS text + rows) with
    each store holding 4,096 (``STORE_SIZE``), so both servers must hand the transaction over in
    parts -- their transaction buffers flush every ``canal.instance.transaction.size`` (1,024)
    entries -- and the client acks its start before its end was read. The split is not visible in
    the entries; they must be the same, in order. The table's DDL is spelled as the server prints
    its types (``int(11)``), so the TSDB's spelling matches and the entries compare byte for byte."""
    conn = pair.db.root_connection(DB)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE big (id int(11) NOT NULL, v varchar(20) DEFAULT NULL, PRIMARY KEY (id))"
            )
            cur.execute("BEGIN")
            for i in range(10_000):
                cur.execute(f"INSERT INTO big VALUES ({i}, 'v{i}')")
            cur.execute("COMMIT")
            for sql in ("INSERT INTO big VALUES (-1, 'after')", "DELETE FROM big WHERE id = -1"):
                cur.execute(sql)  # two short transactions: the filters destination's empty ones
    finally:
        conn.close()
    result = pair.drain()
    for dest in ("main", "gtid"):
        for side in result[dest]:
            rows = [e for e in side if e.header.tableName == "big" and e.header.eventType in _DML]
            assert len(rows) == 10_002, (dest, len(rows))
    check(
        result,
        expected={
            "mariadb-begin": ALL,
            "empty-transaction": frozenset({"filters"}),
            "binlog-mysqltype": frozenset({"tsdboff"}),
            "mariadb-gtid-header": frozenset({"gtid"}),
        },
    )


def test_table_filters(pair: Pair) -> None:
    """White and black lists on DML and DDL (``filters``: ``canalref.keep_.*``, the marker and
    ``canalref_other.*``, black list ``canalref.keep_black.*``): a DDL is delivered when any table it
    names passes, a RENAME when its old or its new name does; the SQL behind rows events (no table)
    passes every filter. In two steps, so that no table is renamed or dropped before both servers
    read its rows (Canal without the TSDB reads a table's columns when it reads its rows: see
    ``test_where_canal_stops``)."""
    run(
        pair.db,
        [
            "CREATE TABLE keep_a (id INT PRIMARY KEY, v VARCHAR(10))",
            "CREATE TABLE keep_black_b (id INT PRIMARY KEY, v VARCHAR(10))",
            "CREATE TABLE drop_c (id INT PRIMARY KEY, v VARCHAR(10))",
            f"CREATE TABLE {OTHER}.o (id INT PRIMARY KEY, v VARCHAR(10))",
            "CREATE TABLE drop_d (id INT)",
            "CREATE TABLE keep_e (id INT)",
            "INSERT INTO keep_a VALUES (1, 'a')",
            "INSERT INTO keep_black_b VALUES (1, 'b')",
            "INSERT INTO drop_c VALUES (1, 'c')",
            f"INSERT INTO {OTHER}.o VALUES (1, 'o')",
            "BEGIN",
            "INSERT INTO drop_c VALUES (2, 'c')",
            "INSERT INTO keep_a VALUES (2, 'a')",
            "UPDATE keep_black_b SET v = 'bb'",
            f"DELETE FROM {OTHER}.o",
            "COMMIT",
            "ALTER TABLE keep_black_b ADD COLUMN w INT",
            "ALTER TABLE drop_c ADD COLUMN w INT",
            "TRUNCATE keep_a",
        ],
    )
    expected = {
        "mariadb-begin": ALL,
        "empty-transaction": frozenset({"filters"}),
        "tsdb-ddl-spelling": TSDB_ON,
        "binlog-mysqltype": frozenset({"tsdboff"}),
        "mariadb-gtid-header": frozenset({"gtid"}),
    }
    check(pair.drain(), expected=expected)
    run(
        pair.db,
        [
            "RENAME TABLE drop_c TO keep_c",  # the new name passes
            "INSERT INTO keep_c VALUES (3, 'c', 3)",
            "ALTER TABLE keep_e RENAME TO drop_e",  # the old name passes
            "RENAME TABLE drop_e TO drop_e2",  # neither
            "DROP TABLE drop_d, keep_black_b",  # neither passes
            "CREATE TABLE drop_f (id INT)",
            "DROP TABLE drop_f, drop_e2, keep_a",  # the last passes
            "INSERT INTO keep_c VALUES (4, 'd', 4)",
            "INSERT INTO keep_c VALUES (5, 'e', 5)",
        ],
    )
    # No transaction without rows now; keep_c came from drop_c, outside the filters destination's
    # TSDB, so Canal read its columns from the server (SHOW CREATE TABLE's spelling, as pycanal's).
    del expected["empty-transaction"]
    expected["tsdb-ddl-spelling"] = TSDB_ON - {"filters"}
    check(pair.drain(), expected=expected)


# Binlogs Canal 1.1.7 cannot get past on MariaDB (its parser fails the event and retries it forever):
# destination -> (its instance.properties, statements, the row pycanal delivers, Canal's error). Serial
# parsers (canal.instance.parser.parallel = false, on both servers): Canal's parallel one decodes ahead
# and logs some of these errors only ~15 s later.
CANAL_STOPS: dict[str, tuple[dict[str, object], list[str], dict[str, str], str]] = {
    # MariaDB counts YEAR columns in the TABLE_MAP's signedness bits, Canal does not: it reads the
    # next numeric column's bit one column late, and with the TSDB its metadata check fails.
    "year": (
        {"filter.regex": rf"{DB}\.stop_year", "parser.parallel": False},
        [
            "CREATE TABLE stop_year (id INT PRIMARY KEY, y YEAR, n TINYINT)",
            "INSERT INTO stop_year VALUES (1, 2024, -1)",
        ],
        {"id": "1", "y": "2024", "n": "-1"},
        r"MySQL8\.0 unmatch column metadata .* table : canalref\.stop_year",
    ),
    # ADD PRIMARY KEY makes the column NOT NULL and DROP PRIMARY KEY leaves it so; the TSDB's replay
    # of the DDL makes it nullable again, and the check against the binlog's nullability fails.
    "pk": (
        {"filter.regex": rf"{DB}\.stop_pk", "parser.parallel": False},
        [
            "CREATE TABLE stop_pk (id INT, v INT)",
            "ALTER TABLE stop_pk ADD PRIMARY KEY (id)",
            "ALTER TABLE stop_pk DROP PRIMARY KEY",
            "INSERT INTO stop_pk VALUES (1, 2)",
        ],
        {"id": "1", "v": "2"},
        r"MySQL8\.0 unmatch column metadata .* table : canalref\.stop_pk",
    ),
    # Without the TSDB Canal reads a table's columns from the server when it reads its rows: a table
    # renamed (or dropped) since is gone.
    "rename": (
        {"filter.regex": rf"{DB}\.stop_ren.*", "tsdb.enable": False, "parser.parallel": False},
        [
            "CREATE TABLE stop_ren (id INT PRIMARY KEY, v VARCHAR(5))",
            "INSERT INTO stop_ren VALUES (1, 'a')",
            "RENAME TABLE stop_ren TO stop_ren2",
        ],
        {"id": "1", "v": "a"},
        r"Table 'canalref\.stop_ren' doesn't exist",
    ),
    # MariaDB's COMPRESSED columns: Canal cannot decode their TABLE_MAP (an IndexOutOfBoundsException
    # reading its signedness bits; "unknow type : 22" with the parallel parser), nor its TSDB's Druid
    # their DDL. That stops every destination of the server, whatever its filter: last in the binlog,
    # so the others have stopped on their own events before.
    "compressed": (
        {"filter.regex": rf"{DB}\.stop_comp", "parser.parallel": False},
        [
            "CREATE TABLE stop_comp (id INT PRIMARY KEY, vc VARCHAR(200) COMPRESSED, bl BLOB COMPRESSED)",
            "INSERT INTO stop_comp VALUES (1, REPEAT('abc', 50), REPEAT('x', 300))",
        ],
        {"id": "1", "vc": "abc" * 50, "bl": "x" * 300},
        r"IndexOutOfBoundsException[^\n]*\n(?:\s+at .*\n)*?\s+at com\.taobao\.tddl\.dbsync\.binlog\.event\.TableMapLogEvent",
    ),
}


def test_where_canal_stops(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Canal 1.1.7 stops a destination on each of these binlogs (its log names the error, it delivers
    no row and retries the event every 10-20 s); pycanal delivers the rows with their values. A
    private MariaDB of its own, and both servers start after the statements, at offset 4 of the
    binlog file they are in, so what Canal reads is not a race with the DDL."""
    from pycanal.deployer.launcher import CanalLauncher
    from pycanal.testing.canal import PrivateCanal

    with PrivateMariaDB(server_id=58) as db:
        db.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
        db.execute("FLUSH BINARY LOGS")
        start = {"master.journal.name": db.current_binlog()[0], "master.position": 4}
        for _props, statements, _row, _error in CANAL_STOPS.values():
            run(db, statements)
        dests = {name: {**start, **props} for name, (props, *_rest) in CANAL_STOPS.items()}
        conf = tmp_path_factory.mktemp("pycanal-stops") / "conf"
        _write_pycanal_conf(conf, db, free_port(), dests)
        canal = PrivateCanal.for_mariadb(db, destinations=dests, timezone="UTC", wait_for_parser=False)
        with canal, CanalLauncher(conf) as py:
            for name, (_props, _statements, row, error) in CANAL_STOPS.items():
                with SimpleConnector(f"127.0.0.1:{py.tcp.port}", name) as conn:
                    conn.subscribe()
                    rows = _rows_until(conn, 1)
                assert rows == [row], name
                deadline = time.monotonic() + 30
                # the parser threads of Canal's parallel parser log to canal.log, the parser to <name>.log
                logs = (canal.log_file(), canal.log_file(name))
                while not any(re.search(error, p.read_text(errors="replace")) for p in logs if p.exists()):
                    assert time.monotonic() < deadline, f"{name}: Canal logged no {error!r}\n{canal.logs()}"
                    time.sleep(0.2)
                with canal.connector(name) as conn:
                    conn.subscribe()
                    assert _rows_until(conn, 0, wait=0.5) == [], name


def _rows_until(conn: SimpleConnector, want: int, wait: float = 30.0) -> list[dict[str, str]]:
    """The after images of INSERT rows (name -> value) once ``want`` came, or after ``wait`` s."""
    rows: list[dict[str, str]] = []
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and (want == 0 or len(rows) < want):
        for e in conn.get(100, timeout=200).entries:
            if e.entryType == pb.ROWDATA and e.header.eventType == pb.INSERT:
                for r in pb.RowChange.FromString(e.storeValue).rowDatas:
                    rows.append({c.name: c.value for c in r.afterColumns})
    return rows


# Canal 1.1.7's own DruidDdlParser.parse(sql, schema), run on its jars: the classification behind every
# QUERY entry (LogEventConvert.parseQueryEvent), statement by statement.
_DDP_SOURCE = """
import com.alibaba.otter.canal.parse.inbound.mysql.ddl.DdlResult;
import com.alibaba.otter.canal.parse.inbound.mysql.ddl.DruidDdlParser;
import java.io.*;
public class Ddp {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        for (String line; (line = in.readLine()) != null;) {
            String[] p = line.split("\\t", 2);
            StringBuilder sb = new StringBuilder();
            for (DdlResult r : DruidDdlParser.parse(p[1].replace("\\\\n", "\\n"), p[0].isEmpty() ? null : p[0])) {
                sb.append(r.getType()).append('|').append(r.getSchemaName()).append('|').append(r.getTableName()).append(';');
            }
            out.println(sb);
        }
    }
}
"""

# Statements beyond the parity table and the live DDL: the DML naming rules, quoting, MariaDB syntax.
DDP_EXTRA = [
    ("shop", "UPDATE a, b SET a.c = 1"),
    ("shop", "UPDATE a JOIN b JOIN c SET a.c = 1"),
    ("shop", "UPDATE other.a x LEFT JOIN b y USING (id) SET x.c = 1"),
    ("shop", "DELETE a, b FROM a JOIN b"),
    ("shop", "DELETE t1 FROM a t1 JOIN b"),
    ("shop", "DELETE FROM a, b USING a JOIN b"),
    ("shop", "DELETE other.a FROM other.a JOIN b"),
    ("shop", "INSERT INTO `we``ird` VALUES (1)"),
    ("shop", "INSERT INTO t SELECT * FROM u"),
    ("shop", "CREATE TABLE IF NOT EXISTS `x`.`y` (id int)"),
    ("shop", "ALTER TABLE t ADD COLUMN c int, ADD INDEX (c), DROP INDEX d, RENAME TO u"),
    ("shop", "ALTER TABLE t CHANGE c d bigint, ALGORITHM=INPLACE"),
    ("shop", "CREATE UNIQUE INDEX i ON other.t (c)"),
    ("shop", "RENAME TABLE other.a TO b"),
    ("shop", "DROP TABLE a"),
    ("", "TRUNCATE other.t"),
    ("shop", "CREATE DATABASE `quoted_db`"),
    ("shop", "DROP SCHEMA IF EXISTS `quoted_db`"),
]

# Where pycanal's classifier answers otherwise, on purpose (docs/compatibility.md, "Canal parity"):
# statement -> Canal's results.
DDP_DIFFERENCES = {
    # ALTER TABLE adding only a CHECK or FOREIGN KEY: Druid gives no result (Canal drops the event).
    "ALTER TABLE t ADD CONSTRAINT chk CHECK (c > 0)": [],
    # A quoted name keeps Druid's escaping (a doubled backtick) or the quotes of a database name.
    "INSERT INTO `we``ird` VALUES (1)": [("INSERT", "shop", "we``ird")],
    "CREATE DATABASE `quoted_db`": [("QUERY", "`quoted_db`", None)],
    "DROP SCHEMA IF EXISTS `quoted_db`": [("QUERY", "`quoted_db`", None)],
}


def _canal_ddl_parser(
    tmp: Path, cases: list[tuple[str, str]]
) -> list[list[tuple[str, str | None, str | None]]]:
    import subprocess

    from pycanal.testing.canal import canal_classpath
    from pycanal.testing.zookeeper import find_java

    java = find_java()
    source = tmp / "Ddp.java"
    source.write_text(_DDP_SOURCE)
    stdin = "".join(f"{schema}\t{sql.replace(chr(10), chr(92) + 'n')}\n" for schema, sql in cases)
    done = subprocess.run(
        [java, "-cp", ":".join(canal_classpath(java)), str(source)],
        input=stdin.encode(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    lines = done.stdout.decode().splitlines()
    assert len(lines) == len(cases), done.stderr.decode(errors="replace")[-3000:]
    none = lambda v: None if v == "null" else v  # noqa: E731
    return [
        [(t, none(s), none(n)) for t, s, n in (item.split("|") for item in line.split(";") if item)]
        for line in lines
    ]


def test_ddl_classifier_as_canal(tmp_path: Path) -> None:
    """pycanal's ``parse_ddl`` against Canal 1.1.7's ``DruidDdlParser`` (its jars, its Druid 1.2.17)
    on the parity table's statements, the live DDL of ``test_ddl_and_statements`` and more: the same
    event types, schemas and tables, in order (Druid's repeated results once)."""
    from pycanal.parse.ddl import parse_ddl
    from test_canal_parity import TABLE

    cases = [(schema, sql) for sql, schema, _canal in TABLE]
    cases += [(DB, sql) for sql in DDL if not sql.startswith(("SET ", "BEGIN", "COMMIT"))]
    cases += DDP_EXTRA
    canal = _canal_ddl_parser(tmp_path, cases)
    differ = {}
    for (schema, sql), want in zip(cases, canal, strict=True):
        got = [(r.type.value, r.schema, r.table) for r in parse_ddl(sql, schema or None)]
        want = list(dict.fromkeys(want))
        if got != want:
            differ[sql] = want
    assert differ == DDP_DIFFERENCES


def test_gtid_mode_dumps_by_gtid(pair: Pair) -> None:
    """``gtid`` (``canal.instance.gtidon`` with ``master.gtid``) is read by GTID by both servers:
    MariaDB's log names their dumps ``using_gtid(1)`` from the configured set; the other
    destinations dump by file and position."""
    dumps = re.findall(
        r"Start binlog_dump to slave_server\((\d+)\), pos\([^)]*\), using_gtid\((\d)\)",
        Path(pair.db.error_log).read_text(),
    )  # type: ignore[arg-type]
    by_gtid = {int(sid) for sid, gtid in dumps if gtid == "1"}
    parser = pair.pycanal.deployer.server.instance("gtid").event_parser
    assert {pair.canal.slave_ids["gtid"], parser.slave_id} <= by_gtid
    others = {pair.canal.slave_ids[d] for d in DESTS if d != "gtid"}
    assert others and not others & by_gtid
