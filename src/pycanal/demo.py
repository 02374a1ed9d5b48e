"""The main job on embedded defaults: make a binlog with a private MariaDB and decode it.

Run with ``make demo`` (or ``python -m pycanal.demo``). It starts a throw-away MariaDB with ROW
binlog and FULL row metadata, runs a small shop workload (inserts, updates, deletes, one ALTER
TABLE), copies the binlog to ``var/demo/`` and decodes it with ``pycanal binlog decode`` in
both output formats. Later issues grow this into the full server + Spark pipeline demo.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

from .testing.mariadb import PrivateMariaDB

SCHEMA = [
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, email VARCHAR(128),"
    " vip BOOLEAN DEFAULT FALSE, created TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3))",
    "CREATE TABLE shop.products (id INT PRIMARY KEY, title VARCHAR(100) NOT NULL,"
    " price DECIMAL(10,2) NOT NULL, stock INT UNSIGNED NOT NULL, tags SET('new','sale','eco'),"
    " spec JSON)",
    "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL,"
    " status ENUM('new','paid','shipped','cancelled') NOT NULL, total DECIMAL(12,2), placed DATETIME(6))",
]


def workload(db: PrivateMariaDB, seed: int = 7) -> None:
    rnd = random.Random(seed)
    db.execute("CREATE DATABASE shop")
    for ddl in SCHEMA:
        db.execute(ddl)
    names = ["Ada Lovelace", "Grace Hopper", "Édith Piaf", "李小龙", "Zoë 🚀"]
    for i, name in enumerate(names, 1):
        db.execute(
            "INSERT INTO shop.customers (id, name, email) VALUES (%s, %s, %s)", (i, name, f"c{i}@example.com")
        )
    for i in range(1, 6):
        db.execute(
            "INSERT INTO shop.products VALUES (%s, %s, %s, %s, %s, %s)",
            (
                i,
                f"Product {i}",
                f"{rnd.randrange(100, 99999) / 100:.2f}",
                rnd.randrange(0, 500),
                rnd.choice(["new", "sale,eco", ""]),
                f'{{"weight_g": {i * 100}, "color": "blue"}}',
            ),
        )
    with db.root_connection() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        for i in range(1, 9):
            cur.execute(
                "INSERT INTO shop.orders VALUES (%s, %s, 'new', %s, '2026-11-21 10:00:00.123456')",
                (i, rnd.randrange(1, 6), f"{rnd.randrange(100, 50000) / 100:.2f}"),
            )
        cur.execute("COMMIT")
    db.execute("UPDATE shop.orders SET status = 'paid' WHERE id <= 4")
    db.execute("UPDATE shop.customers SET vip = TRUE, email = NULL WHERE id = 2")
    db.execute("ALTER TABLE shop.customers ADD COLUMN phone VARCHAR(20) AFTER email")
    db.execute("UPDATE shop.customers SET phone = '+1-555-0100' WHERE id = 1")
    db.execute("DELETE FROM shop.orders WHERE id = 8")


def main() -> int:
    out_dir = Path("var/demo")
    out_dir.mkdir(parents=True, exist_ok=True)
    print("pycanal demo: starting a private MariaDB (ROW binlog, FULL row metadata) ...", flush=True)
    with PrivateMariaDB(binlog_row_metadata="FULL") as db:
        print(f"  {db.version} on 127.0.0.1:{db.port}", flush=True)
        first = db.flush_binary_logs()
        workload(db)
        db.flush_binary_logs()
        binlog = out_dir / first.name
        shutil.copyfile(first, binlog)
    print(f"  workload done; binlog copied to {binlog} ({binlog.stat().st_size} bytes)\n", flush=True)
    commands = [
        [sys.executable, "-m", "pycanal.cli", "binlog", "decode", str(binlog)],
        [sys.executable, "-m", "pycanal.cli", "binlog", "decode", "--format", "jsonl", str(binlog)],
    ]
    for cmd in commands:
        print("$ pycanal " + " ".join(cmd[3:]), flush=True)
        result = subprocess.run(cmd, check=False)
        if result.returncode:
            return result.returncode
        print(flush=True)
    print(f"Decode it again any time: .venv/bin/pycanal binlog decode {binlog} [--format jsonl]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
