"""Real MariaDB servers: an encrypted binlog (clear refusal) and XA transactions (decoded events
and canonical records).

Encrypted binlog: a private server with the ``file_key_management`` plugin and
``--encrypt-binlog=ON`` writes FORMAT_DESCRIPTION, then START_ENCRYPTION (164), then ciphertext.
pycanal must stop at the START_ENCRYPTION event with "encrypted binlog not supported" and that
event's offset, and the CLI must exit non-zero with that one line.

XA (MariaDB 10.5+ binlogs XA PREPARE as its own event group). What 10.11 writes:

* ``XA START .. XA END .. XA PREPARE``: a GTID event with FL_PREPARED_XA and the xid, the rows,
  a QUERY ``XA END X'..',X'..',fmt`` and an XA_PREPARE_LOG_EVENT (38, one_phase 0) that ends the
  group (``mariadb-binlog`` prints ``XA START`` at the GTID and ``XA PREPARE`` at event 38);
* ``XA COMMIT`` / ``XA ROLLBACK`` of a prepared transaction: a standalone GTID event with
  FL_COMPLETED_XA and the xid, then a QUERY ``XA COMMIT|ROLLBACK X'..',X'..',fmt``;
* ``XA COMMIT .. ONE PHASE``: an ordinary transaction (GTID without XA flags, rows, XID).
"""

from __future__ import annotations

import hashlib
import re
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pycanal.binlog import BinlogError, read_events
from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E
from pycanal.binlog.gtid import MariadbGtidEvent, MariadbXid
from pycanal.parse.canonical import Recorder
from pycanal.testing import PrivateMariaDB, find_server_binary, mariadb_binlog_path
from test_events import MARIADB1011

pytestmark = pytest.mark.mariadb

REPO_ROOT = Path(__file__).resolve().parent.parent
HEADER = struct.Struct("<IBIIIH")
ENCRYPTION_PLUGIN = "file_key_management.so"

Factory = Callable[..., PrivateMariaDB]


def pycanal_cli() -> Path:
    venv = REPO_ROOT / ".venv" / "bin" / "pycanal"
    return venv if venv.exists() else Path(sys.executable).with_name("pycanal")


def plugin_dir() -> Path:
    """The server's compiled-in plugin directory, as ``mariadbd --help --verbose`` reports it."""
    out = subprocess.run(
        [find_server_binary(), "--no-defaults", "--help", "--verbose"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    ).stdout
    m = re.search(r"^plugin[-_]dir\s+(\S+)", out, re.MULTILINE)
    assert m, "mariadbd --help --verbose does not report plugin-dir"
    return Path(m[1])


def frames(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, size) of every complete event header, read independently of pycanal."""
    out = []
    pos = 4
    while pos + 19 <= len(data):
        _, typ, _, size, _, _ = HEADER.unpack_from(data, pos)
        out.append((pos, typ, size))
        if size < 19:
            break
        pos += size
    return out


# --------------------------------------------------------------------------- encrypted binlog


def test_encrypted_binlog_is_refused_at_start_encryption(mariadb_factory: Factory, tmp_path: Path) -> None:
    plugin = plugin_dir() / ENCRYPTION_PLUGIN
    if not plugin.is_file():
        pytest.skip(f"MariaDB encryption plugin {plugin} is missing (not in this server package)")
    key_file = tmp_path / "binlog-keys.txt"
    key_file.write_text(f"1;{hashlib.sha256(b'pycanal encrypted binlog test').hexdigest()}\n")
    db = mariadb_factory(
        extra_args=[
            "--plugin-load-add=file_key_management",
            f"--file-key-management-filename={key_file}",
            "--encrypt-binlog=ON",
        ]
    )
    assert db.query("SELECT @@encrypt_binlog") == [(1,)]
    assert db.query(
        "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'file_key_management'"
    ) == [("ACTIVE",)]

    path = db.flush_binary_logs()
    db.execute("CREATE TABLE pycanal.enc (id INT PRIMARY KEY, v VARCHAR(40))")
    db.execute("INSERT INTO pycanal.enc VALUES (1, 'plaintext-marker-7f3a'), (2, 'b')")
    db.execute("UPDATE pycanal.enc SET v = 'c' WHERE id = 2")
    db.flush_binary_logs()

    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    assert b"plaintext-marker-7f3a" not in data  # the row data really is encrypted
    layout = frames(data)
    assert layout[0][1] == E.FORMAT_DESCRIPTION
    enc_pos, enc_type, enc_size = layout[1]
    assert enc_type == E.MARIADB_START_ENCRYPTION
    assert enc_pos == 4 + layout[0][2]
    assert enc_size == 19 + 17 + 4  # scheme, key version, 12-byte nonce, CRC32

    with pytest.raises(BinlogError) as info:
        list(read_events(path))
    err = info.value
    assert (err.source, err.offset) == (str(path), enc_pos)
    assert "encrypted binlog not supported" in err.message
    expected_line = f"{path}, offset {enc_pos}: {err.message}"
    assert str(err) == expected_line

    # What precedes the encryption event is readable.
    before = list(read_events(path, stop_position=enc_pos))
    assert [e.type for e in before] == [E.FORMAT_DESCRIPTION]
    assert before[0].server_version.startswith(db.version.split("-")[0])

    for fmt in ("text", "jsonl"):
        out = subprocess.run(
            [str(pycanal_cli()), "binlog", "decode", "--format", fmt, str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert out.returncode != 0, fmt
        assert out.stdout == "", fmt
        assert out.stderr.splitlines() == [f"pycanal: error: {expected_line}"], fmt


# --------------------------------------------------------------------------- XA


def xid_text(xid: MariadbXid) -> str:
    """The xid as the server writes it in XA statements: X'gtrid',X'bqual',formatID."""
    return f"X'{xid.gtrid.hex()}',X'{xid.bqual.hex()}',{xid.format_id}"


@pytest.fixture(scope="module")
def xa_binlog() -> Iterator[tuple[PrivateMariaDB, Path, list[ev.Event], str]]:
    """One private server; a binlog file holding only the XA workload (events and the
    ``mariadb-binlog`` text of that file). The server is left running for the module."""
    db = PrivateMariaDB()
    db.start()
    try:
        db.execute("CREATE TABLE pycanal.xa (id INT PRIMARY KEY, v VARCHAR(10))")
        path = db.flush_binary_logs()
        with db.root_connection() as conn, conn.cursor() as cur:
            # 1. two-phase, committed
            cur.execute("XA START 'gt1','bq1',7")
            cur.execute("INSERT INTO pycanal.xa VALUES (1, 'a')")
            cur.execute("XA END 'gt1','bq1',7")
            cur.execute("XA PREPARE 'gt1','bq1',7")
            cur.execute("XA COMMIT 'gt1','bq1',7")
            # 2. two-phase, prepared here ...
            cur.execute("XA START 'gt2'")
            cur.execute("INSERT INTO pycanal.xa VALUES (2, 'b')")
            cur.execute("XA END 'gt2'")
            cur.execute("XA PREPARE 'gt2'")
            first = conn.thread_id()
        # ... and rolled back from another connection after the first one has gone: the server
        # detaches the prepared XA when it has ended that connection's thread, which a new
        # connection can overtake (XAER_NOTA).
        deadline = time.monotonic() + 30
        while db.query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (first,))[0][0]:
            assert time.monotonic() < deadline, "the XA's first connection never ended"
            time.sleep(0.01)
        with db.root_connection() as conn, conn.cursor() as cur:
            cur.execute("XA RECOVER")
            assert [row[3] for row in cur.fetchall()] == [b"gt2"]
            cur.execute("XA ROLLBACK 'gt2'")
            # 3. one phase
            cur.execute("XA START 'gt3'")
            cur.execute("INSERT INTO pycanal.xa VALUES (3, 'c')")
            cur.execute("XA END 'gt3'")
            cur.execute("XA COMMIT 'gt3' ONE PHASE")
        db.flush_binary_logs()
        assert db.query("SELECT id, v FROM pycanal.xa ORDER BY id") == [(1, "a"), (3, "c")]
        events = list(read_events(path))
        text = subprocess.run(
            [mariadb_binlog_path(), "--no-defaults", str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        yield db, path, events, text
    finally:
        db.stop()


def user_events(events: list[ev.Event]) -> list[ev.Event]:
    skip = {E.FORMAT_DESCRIPTION, E.MARIADB_GTID_LIST, E.MARIADB_BINLOG_CHECKPOINT, E.ROTATE}
    return [e for e in events if e.type not in skip]


def test_server_fde_matches_the_hand_built_one(xa_binlog) -> None:
    db, _, events, _ = xa_binlog
    fde = events[0]
    assert isinstance(fde, ev.FormatDescriptionEvent)
    assert fde.checksum_alg == 1
    if db.version_info[:2] != (10, 11):
        pytest.skip(f"the hand-built FDE models MariaDB 10.11, this server is {db.version}")
    assert fde.post_header_lengths == MARIADB1011.post_header


def test_xa_events_mariadb_writes(xa_binlog) -> None:
    _, _, events, _ = xa_binlog
    evs = user_events(events)
    g = E.MARIADB_GTID
    assert [e.type for e in evs] == [
        # 1. prepare group, then commit group
        g, E.MARIADB_ANNOTATE_ROWS, E.TABLE_MAP, E.WRITE_ROWS_V1, E.QUERY, E.XA_PREPARE,
        g, E.QUERY,
        # 2. prepare group, then rollback group
        g, E.MARIADB_ANNOTATE_ROWS, E.TABLE_MAP, E.WRITE_ROWS_V1, E.QUERY, E.XA_PREPARE,
        g, E.QUERY,
        # 3. XA COMMIT ONE PHASE: an ordinary transaction
        g, E.MARIADB_ANNOTATE_ROWS, E.TABLE_MAP, E.WRITE_ROWS_V1, E.XID,
    ]  # fmt: skip
    xid1 = MariadbXid(7, b"gt1", b"bq1")
    xid2 = MariadbXid(1, b"gt2", b"")

    def gtid_info(e: ev.Event) -> MariadbGtidEvent:
        assert isinstance(e, ev.GtidEvent)
        assert isinstance(e.info, MariadbGtidEvent)
        return e.info

    for prep, done, xid, verb in ((0, 6, xid1, "COMMIT"), (8, 14, xid2, "ROLLBACK")):
        p = gtid_info(evs[prep])
        assert p.prepared_xa and not p.completed_xa
        assert not p.standalone and p.transactional
        assert p.xid == xid
        assert evs[prep + 3].rows == ([(1, "a")] if xid is xid1 else [(2, "b")])
        assert evs[prep + 4].query == f"XA END {xid_text(xid)}"
        xa = evs[prep + 5]
        assert isinstance(xa, ev.XaPrepareEvent)
        assert (xa.one_phase, xa.format_id, xa.gtrid, xa.bqual) == (
            False,
            xid.format_id,
            xid.gtrid,
            xid.bqual,
        )
        c = gtid_info(evs[done])
        assert c.completed_xa and not c.prepared_xa
        assert c.standalone
        assert c.xid == xid
        assert c.seq_no == p.seq_no + 1
        assert evs[done + 1].query == f"XA {verb} {xid_text(xid)}"
    one = gtid_info(evs[16])
    assert one.xid is None and not (one.prepared_xa or one.completed_xa or one.standalone)
    assert evs[19].rows == [(3, "c")]
    assert isinstance(evs[20], ev.XidEvent)


def test_xa_parts_agree_with_mariadb_binlog(xa_binlog) -> None:
    _, _, events, text = xa_binlog
    xa_events = [e for e in events if isinstance(e, ev.XaPrepareEvent)]
    assert len(xa_events) == 2
    for e in xa_events:
        xid = MariadbXid(e.format_id, e.gtrid, e.bqual)
        # mariadb-binlog: "XA START <xid>" at the GTID event, "XA PREPARE <xid>" at event 38.
        assert f"XA START {xid_text(xid)}" in text
        assert f"# at {e.pos}\n" in text
        after = text.split(f"# at {e.pos}\n", 1)[1]
        assert re.search(
            rf"end_log_pos {e.next_pos} .*XID = {re.escape(xid_text(xid))}\nXA PREPARE {re.escape(xid_text(xid))}\n",
            after,
        )


def xa_records(events: list[ev.Event]) -> list[dict]:
    return list(Recorder().records(events))


def groups(records: list[dict]) -> list[list[dict]]:
    """Records split at each GTID record (one list per event group)."""
    out: list[list[dict]] = []
    for r in records:
        if r["type"] == "GTID":
            out.append([])
        if out:
            out[-1].append(r)
    return out


def test_xa_canonical_records(xa_binlog) -> None:
    _, _, events, _ = xa_binlog
    records = xa_records(events)
    x1 = "X'677431',X'627131',7"
    x2 = "X'677432',X'',1"
    assert [(r["type"], r["gtid"], r["xid"], r["sql"], r["after"]) for r in records] == [
        ("GTID", "0-1-2", None, None, None),
        ("BEGIN", "0-1-2", None, None, None),
        ("INSERT", "0-1-2", None, None, (1, "a")),
        ("QUERY", "0-1-2", None, f"XA END {x1}", None),
        ("XAPREPARE", "0-1-2", None, f"XA PREPARE {x1}", None),
        ("GTID", "0-1-3", None, None, None),
        ("XACOMMIT", "0-1-3", None, f"XA COMMIT {x1}", None),
        ("GTID", "0-1-4", None, None, None),
        ("BEGIN", "0-1-4", None, None, None),
        ("INSERT", "0-1-4", None, None, (2, "b")),
        ("QUERY", "0-1-4", None, f"XA END {x2}", None),
        ("XAPREPARE", "0-1-4", None, f"XA PREPARE {x2}", None),
        ("GTID", "0-1-5", None, None, None),
        ("XAROLLBACK", "0-1-5", None, f"XA ROLLBACK {x2}", None),
        ("GTID", "0-1-6", None, None, None),
        ("BEGIN", "0-1-6", None, None, None),
        ("INSERT", "0-1-6", None, None, (3, "c")),
        ("COMMIT", "0-1-6", events[-2].xid, None, None),
    ]
    # The one-phase group is an ordinary, closed transaction.
    assert events[-2].type == E.XID


_NOT_A_BOUNDARY = {"GTID", "BEGIN", "INSERT", "UPDATE", "DELETE", "QUERY", "DDL"}


def test_xa_prepare_group_is_closed(xa_binlog) -> None:
    _, _, events, _ = xa_binlog
    for group in groups(xa_records(events)):
        if len(group) > 1 and group[1]["type"] == "BEGIN":
            assert any(r["type"] not in _NOT_A_BOUNDARY for r in group[2:]), group


def test_xa_outcome_records_are_not_plain_queries(xa_binlog) -> None:
    _, _, events, _ = xa_binlog
    records = xa_records(events)
    kinds = {}
    for verb in ("COMMIT", "ROLLBACK"):
        query = next(e for e in events if isinstance(e, ev.QueryEvent) and e.query.startswith(f"XA {verb} "))
        kinds[verb] = [r["type"] for r in records if r["pos"] == query.pos and r["type"] != "GTID"]
    assert kinds["COMMIT"] and "QUERY" not in kinds["COMMIT"]
    assert kinds["ROLLBACK"] and "QUERY" not in kinds["ROLLBACK"]
    assert kinds["COMMIT"] != kinds["ROLLBACK"]
