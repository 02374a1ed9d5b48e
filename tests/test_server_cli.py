"""``pycanal server --conf DIR`` and ``pycanal tail`` as processes over the private MariaDB: the
TCP protocol on canal.port with authentication, the metrics on canal.metrics.pull.port, the
seed-002 text layout, and a clean stop on SIGTERM."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from pycanal.server.wire import password_hash
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import free_port

pytestmark = pytest.mark.mariadb

PYCANAL = [sys.executable, "-m", "pycanal.cli"]


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=49) as server:
        yield server


def write_conf(root: Path, db: PrivateMariaDB, port: int, metrics: int, start: tuple[str, int]) -> None:
    (root / "shop").mkdir(parents=True)
    (root / "canal.properties").write_text(
        "canal.ip = 127.0.0.1\n"
        f"canal.port = {port}\n"
        f"canal.metrics.pull.port = {metrics}\n"
        "canal.user = canal\n"
        f"canal.passwd = {password_hash('s3cret')}\n"
        "canal.destinations = shop\n"
        "canal.conf.dir = .\n"
        f"canal.file.data.dir = {root}/data\n"
        "canal.auto.scan = false\n"
    )
    (root / "shop" / "instance.properties").write_text(
        f"canal.instance.master.address = {db.host}:{db.port}\n"
        f"canal.instance.master.journal.name = {start[0]}\n"
        f"canal.instance.master.position = {start[1]}\n"
        f"canal.instance.dbUsername = {db.repl_user}\n"
        f"canal.instance.dbPassword = {db.repl_password}\n"
        "canal.instance.filter.regex = pycanal\\\\.cli_orders\n"
    )


def wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited {proc.returncode}:\n{log.read_text()}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"server not listening:\n{log.read_text()}")


class Served(NamedTuple):
    address: str
    metrics: int
    proc: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def served(db: PrivateMariaDB, tmp_path: Path, start: tuple[str, int]) -> Iterator[Served]:
    """A ``pycanal server`` process from ``start`` (filter ``pycanal.cli_orders``), listening."""
    port, metrics = free_port(), free_port()
    conf = tmp_path / "conf"
    write_conf(conf, db, port, metrics, start)
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*PYCANAL, "server", "--conf", str(conf)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_listening(port, proc, log)
        yield Served(f"127.0.0.1:{port}", metrics, proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def tail_lines(address: str, limit: int, *more: str) -> list[str]:
    done = subprocess.run(
        [*PYCANAL, "tail", "--address", address, "--destination", "shop", "--user", "canal"]
        + ["--password", "s3cret", "--limit", str(limit), *more],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def body(lines: list[str]) -> list[str]:
    """The entry lines of the text layout: no batch headers, no blank lines, no delays."""
    return [DELAY.sub("delay", line) for line in lines if line and not line.startswith("*")]


DELAY = re.compile(r"delay : -?\d+ms")


def test_tail_limit_acks_the_batches_it_printed(db: PrivateMariaDB, tmp_path: Path) -> None:
    db.execute("DROP TABLE IF EXISTS pycanal.cli_orders")
    db.execute("CREATE TABLE pycanal.cli_orders (id INT PRIMARY KEY, item VARCHAR(20), qty INT)")
    start = db.current_binlog()
    db.execute("INSERT INTO pycanal.cli_orders VALUES (1, 'apple', 3)")
    with served(db, tmp_path, start) as server:
        first = tail_lines(server.address, 1)
        db.execute("INSERT INTO pycanal.cli_orders VALUES (2, 'pear', 5)")
        second = tail_lines(server.address, 1)
    assert "item : apple type=varchar(20) update=true" in first
    assert "item : pear type=varchar(20) update=true" in second
    assert "item : apple type=varchar(20) update=true" not in second  # the first run acked it


def test_tail_and_dump_print_one_layout(db: PrivateMariaDB, tmp_path: Path) -> None:
    db.execute("DROP TABLE IF EXISTS pycanal.cli_orders")
    start = db.current_binlog()
    db.execute(
        "CREATE TABLE pycanal.cli_orders (id INT PRIMARY KEY, price DECIMAL(6,2), at DATETIME(3), "
        "note VARCHAR(9) CHARACTER SET latin1, tag ENUM('a','b'))"
    )
    db.execute("INSERT INTO pycanal.cli_orders VALUES (1, 1.50, '2024-02-29 10:11:12.125', 'caf\xe9', 'b')")
    db.execute("UPDATE pycanal.cli_orders SET price = 2.25, tag = NULL WHERE id = 1")
    db.execute("DELETE FROM pycanal.cli_orders WHERE id = 1")
    source = [*PYCANAL, "dump", "--source", f"{db.host}:{db.port}", "--user", db.repl_user]
    source += ["--password", db.repl_password, "--filter", "pycanal\\.cli_orders", "--stop-at-end"]
    dumped = subprocess.run([*source, "--start", f"{start[0]}:{start[1]}"], capture_output=True, text=True)
    assert dumped.returncode == 0, dumped.stderr
    with served(db, tmp_path, start) as server:
        tailed = tail_lines(server.address, 3)
    assert body(tailed) == body(dumped.stdout.splitlines())
    assert "----------------> binlog" in "\n".join(
        tailed
    ) and "name[pycanal,cli_orders] , eventType : CREATE" in ("\n".join(tailed))
    assert "price : 1.50 type=decimal(6,2) update=true" in tailed
    assert "note : caf\xe9 type=varchar(9) update=true" in tailed


def test_server_and_tail(db: PrivateMariaDB, tmp_path: Path) -> None:
    db.execute("DROP TABLE IF EXISTS pycanal.cli_orders")
    db.execute("CREATE TABLE pycanal.cli_orders (id INT PRIMARY KEY, item VARCHAR(20), qty INT)")
    start = db.current_binlog()
    db.execute("INSERT INTO pycanal.cli_orders VALUES (1, 'apple', 3), (2, 'pear', 5)")
    db.execute("UPDATE pycanal.cli_orders SET qty = 4 WHERE id = 1")
    with served(db, tmp_path, start) as server:
        addr, metrics, proc, log = server
        bad = subprocess.run(
            [
                *PYCANAL,
                "tail",
                "--address",
                addr,
                "--destination",
                "shop",
                "--user",
                "canal",
                "--password",
                "no",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 1 and "auth failed" in bad.stderr
        done = subprocess.run(
            [*PYCANAL, "tail", "--address", addr, "--destination", "shop", "--user", "canal"]
            + ["--password", "s3cret", "--limit", "3"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        text = done.stdout
        assert "* Batch Id: [" in text and "BEGIN ----> Thread id:" in text
        assert "name[pycanal,cli_orders] , eventType : INSERT" in text
        assert "item : pear type=varchar(20) update=true" in text
        assert "qty : 4 type=int(11) update=true" in text and "item : apple type=varchar(20)\n" in text
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read().decode()
        assert 'canal_instance{destination="shop"} 1.0' in scraped
        assert 'canal_instance_put_rows{destination="shop"} 3.0' in scraped
        assert 'canal_instance_client_packets{destination="shop",packetType="GET"}' in scraped
        assert 'canal_instance_client_request_latency_count{destination="shop"}' in scraped
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        server_log = log.read_text()
        assert "event=server-stopped" in server_log
        assert "s3cret" not in server_log and password_hash("s3cret") not in server_log
