"""The private MariaDB fixture itself: configuration, users, binlog on disk, clean stop."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pymysql
import pytest

from pycanal.testing import MariaDBStartError, PrivateMariaDB, mariadb_binlog_path
from pycanal.testing import _process as process_module

MAGIC = b"\xfebin"


def _variables(db: PrivateMariaDB, *names: str) -> dict[str, str]:
    rows = db.query(
        "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
        f"WHERE VARIABLE_NAME IN ({', '.join(['%s'] * len(names))})",
        [n.upper() for n in names],
    )
    return {k.lower(): v for k, v in rows}


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def test_full_server_configuration(mariadb: PrivateMariaDB) -> None:
    v = _variables(
        mariadb,
        "log_bin",
        "binlog_format",
        "binlog_checksum",
        "binlog_row_metadata",
        "binlog_row_image",
        "server_id",
        "port",
        "socket",
        "bind_address",
        "performance_schema",
    )
    assert v["log_bin"] == "ON"
    assert v["binlog_format"] == "ROW"
    assert v["binlog_checksum"] == "CRC32"
    assert v["binlog_row_metadata"] == "FULL"
    assert v["binlog_row_image"] == "FULL"
    assert v["server_id"] == "1"
    assert int(v["port"]) == mariadb.port
    assert v["socket"] == mariadb.socket
    assert v["bind_address"] == "127.0.0.1"
    assert v["performance_schema"] == "OFF"
    assert "MariaDB" in mariadb.version
    assert mariadb.version_info >= (10, 5, 0)
    assert mariadb.host == "127.0.0.1"
    assert mariadb.datadir is not None and mariadb.datadir.is_dir()
    assert mariadb.binlog_dir is not None and mariadb.binlog_dir.is_dir()
    # root's session is UTC and utf8mb4
    assert mariadb.query("SELECT @@session.time_zone, @@character_set_client, CURRENT_USER()") == [
        ("+00:00", "utf8mb4", "root@localhost")
    ]
    assert mariadb.query("SHOW DATABASES LIKE 'pycanal'") == [("pycanal",)]


def test_minimal_server_configuration(mariadb_minimal: PrivateMariaDB) -> None:
    v = _variables(mariadb_minimal, "binlog_row_metadata", "binlog_format", "binlog_checksum", "server_id")
    assert v == {
        "binlog_row_metadata": "MINIMAL",
        "binlog_format": "ROW",
        "binlog_checksum": "CRC32",
        "server_id": "2",
    }


def test_repl_user_over_tcp(mariadb: PrivateMariaDB) -> None:
    conn = pymysql.connect(
        host="127.0.0.1", port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
            assert file.startswith("mysql-bin.")
            assert pos >= 4
            cur.execute("SHOW BINARY LOGS")
            assert file in [row[0] for row in cur.fetchall()]
            cur.execute("SHOW BINLOG EVENTS IN %s LIMIT 3", (file,))
            events = cur.fetchall()
            assert events[0][2] == "Format_desc"
            cur.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'mysql'")
            assert cur.fetchone()[0] > 0
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0] == f"{mariadb.repl_user}@127.0.0.1"
    finally:
        conn.close()


def test_root_is_socket_only(mariadb: PrivateMariaDB) -> None:
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host="127.0.0.1", port=mariadb.port, user="root", password="", connect_timeout=5)


def test_insert_reaches_binlog_file(mariadb: PrivateMariaDB) -> None:
    mariadb.execute(
        "CREATE TABLE IF NOT EXISTS pycanal.fixture_probe (id INT PRIMARY KEY, v VARCHAR(64)) "
        "CHARACTER SET utf8mb4"
    )
    file_before, pos_before = mariadb.current_binlog()
    marker = f"probe-{os.getpid()}-{id(mariadb)}"
    assert mariadb.execute("INSERT INTO pycanal.fixture_probe VALUES (%s, %s)", (os.getpid(), marker)) == 1
    file_after, pos_after = mariadb.current_binlog()
    assert file_after == file_before and pos_after > pos_before

    files = mariadb.binlog_files()
    assert files and all(p.is_absolute() for p in files)
    path = files[-1]
    assert path.name == file_after
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    assert len(data) >= pos_after
    assert marker.encode() in data[pos_before:pos_after]

    types = [row[2] for row in mariadb.query("SHOW BINLOG EVENTS IN %s FROM %s", (file_after, pos_before))]
    assert "Table_map" in types
    assert "Write_rows_v1" in types

    # The mariadb-binlog tool reads the same file (from this statement on: the session's server
    # holds other tests' rows before it, whose values -v prints as the bytes they are).
    out = subprocess.run(
        [mariadb_binlog_path(), "--no-defaults", "--base64-output=decode-rows", "-v"]
        + [f"--start-position={pos_before}", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert marker in out


def test_flush_binary_logs(mariadb: PrivateMariaDB) -> None:
    before = mariadb.binlog_files()
    new = mariadb.flush_binary_logs()
    after = mariadb.binlog_files()
    assert len(after) == len(before) + 1
    assert after[-1] == new
    assert new.read_bytes().startswith(MAGIC)
    assert mariadb.current_binlog()[0] == new.name


def test_extra_args_and_stop_leaves_nothing(mariadb_factory) -> None:
    db = mariadb_factory(extra_args=["--log-bin-compress=ON"], server_id=7)
    assert db.query("SELECT @@log_bin_compress, @@server_id") == [(1, 7)]
    pid, root_dir, sock = db.pid, db.root_dir, db.socket
    assert pid is not None and root_dir is not None
    assert _processes_mentioning(str(root_dir)) == [pid]

    db.stop()
    assert not db.running
    assert db.process is not None and db.process.returncode is not None
    assert not Path(f"/proc/{pid}").exists()
    assert _processes_mentioning(str(root_dir)) == []
    assert not root_dir.exists()
    assert not os.path.exists(sock)
    db.stop()  # idempotent


def test_keep_leaves_the_directory() -> None:
    # A short base dir of its own: pytest's tmp_path can be too long for the server's socket path.
    base = Path(tempfile.mkdtemp(prefix="pck-"))
    try:
        db = PrivateMariaDB(keep=True, base_dir=base)
        with db:
            db.execute("CREATE TABLE pycanal.kept (id INT)")
        assert not db.running
        assert db.root_dir is not None and db.root_dir.parent == base
        assert (db.datadir / "pycanal" / "kept.frm").exists()  # type: ignore[operator]
        assert (db.binlog_dir / "mysql-bin.000001").exists()  # type: ignore[operator]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_start_failure_reports_error_log() -> None:
    db = PrivateMariaDB(extra_args=["--no-such-option-for-pycanal"], startup_timeout=30)
    with pytest.raises(MariaDBStartError, match="no-such-option-for-pycanal"):
        db.start()
    assert not db.running
    assert db.root_dir is not None and not db.root_dir.exists()


def test_port_clash_is_retried(monkeypatch: pytest.MonkeyPatch, mariadb_factory) -> None:
    # Hold a port, make the first probe return it: mariadbd fails to bind and is retried.
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    busy_port = busy.getsockname()[1]
    real_free_port = process_module.free_port
    handed_out: list[int] = []

    def fake_free_port() -> int:
        handed_out.append(busy_port if not handed_out else real_free_port())
        return handed_out[-1]

    monkeypatch.setattr(process_module, "free_port", fake_free_port)
    try:
        db = mariadb_factory()
        assert len(handed_out) == 2
        assert db.port == handed_out[1] != busy_port
        assert db.query("SELECT 1") == [(1,)]
    finally:
        busy.close()
