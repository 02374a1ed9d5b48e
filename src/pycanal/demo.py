"""The main job on embedded defaults: MariaDB -> pycanal server -> Spark -> Delta tables, checked.

Run with ``make demo`` (or ``python -m pycanal.demo [--seconds 30]``). It

1. starts a private MariaDB (ROW binlog, FULL row metadata) on a free loopback port;
2. starts ``pycanal server`` with the shipped ``conf/`` (environment overrides point it at that
   MariaDB, a free port and ``var/demo/data``);
3. starts a Spark structured stream ``format("canal")`` -> ``foreachBatch(ChangeApplier)`` writing
   a change log and current-state Delta tables under ``var/demo/lake``;
4. the shop (customers, products, orders, order_items) already has rows, written before pycanal
   starts: the stream first takes them with the initial snapshot (``snapshot="initial"``) while a
   timed workload of inserts, updates and deletes with an ``ALTER TABLE`` in the middle runs,
   printing progress (rows written, captured by the server, applied by Spark; the replication
   lag; the snapshot);
5. once Spark has applied everything, compares every table of the source with its current-state
   table: row count and a checksum over every value, which must be equal;
6. runs a Spark SQL query over the lake and prints it as a ``spark-sql`` command that runs as
   printed, then how to read the tables with delta-rs and DuckDB (every reader here applies
   deletion vectors, which the tables have by default).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .spark.job import snapshot_progress, start_pipeline
from .spark.session import delta_options, delta_package, spark_session
from .testing._process import free_port
from .testing.mariadb import PrivateMariaDB

ROOT = Path("var/demo")
CONF = Path(__file__).resolve().parents[2] / "conf"  # the repository's shipped conf/
TABLES = {"customers": "id", "products": "id", "orders": "id", "order_items": "id"}
SCHEMA = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, email VARCHAR(128),"
    " vip BOOLEAN DEFAULT FALSE, created TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))",
    "CREATE TABLE shop.products (id INT PRIMARY KEY, title VARCHAR(100) NOT NULL,"
    " price DECIMAL(10,2) NOT NULL, stock INT UNSIGNED NOT NULL, tags SET('new','sale','eco'), spec JSON)",
    "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL,"
    " status ENUM('new','paid','shipped','cancelled') NOT NULL, total DECIMAL(12,2), placed DATETIME(6))",
    "CREATE TABLE shop.order_items (id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL, product_id INT NOT NULL,"
    " qty SMALLINT NOT NULL, price DECIMAL(10,2) NOT NULL)",
]
# The Spark SQL the demo runs and prints over the lake: Delta tables by path, as any Spark user reads them.
QUERY = (
    "SELECT status, count(*) AS orders, sum(total) AS total FROM delta.`{lake}/current/shop/orders`"
    " GROUP BY status ORDER BY status"
)
# The same table through delta-rs' SQL (DataFusion), which applies deletion vectors: the tables have
# them by default, and DeltaTable.to_pandas() / to_pyarrow_table() refuse such tables.
DELTA_RS = [
    "from deltalake import DeltaTable, QueryBuilder",
    'print(QueryBuilder().register("orders", DeltaTable("{lake}/current/shop/orders"))'
    '.execute("SELECT status, count(*) AS orders FROM orders GROUP BY status ORDER BY status").read_all())',
]
NAMES = ["Ada Lovelace", "Grace Hopper", "Édith Piaf", "李小龙", "Zoë 🚀", "Alan Turing", "Emmy Noether"]


def say(msg: str) -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- the workload
class Workload:
    """Random shop traffic; ``rows`` counts the row changes written."""

    def __init__(
        self,
        db: PrivateMariaDB,
        seconds: float,
        seed: int = 7,
        ids: dict[str, int] | None = None,
        alter: bool = True,
    ) -> None:
        self.db, self.seconds, self.rnd = db, seconds, random.Random(seed)
        self.rows = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.alter, self.altered = alter, False  # an ALTER TABLE half-way; done
        self.ids = dict(ids) if ids is not None else {t: 0 for t in TABLES}

    def run(self) -> None:
        try:
            with self.db.root_connection("shop") as conn, conn.cursor() as cur:
                end = time.monotonic() + self.seconds
                half = time.monotonic() + self.seconds / 2
                while time.monotonic() < end:
                    if self.alter and not self.altered and time.monotonic() > half:
                        cur.execute("ALTER TABLE customers ADD COLUMN phone VARCHAR(20) AFTER email")
                        self.altered = True
                    self.rows += self.transaction(cur)
                    conn.commit()
                    time.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001 - reported by main
            self.error = exc
        finally:
            self.done.set()

    def _new(self, table: str) -> int:
        self.ids[table] += 1
        return self.ids[table]

    def transaction(self, cur: Any) -> int:
        r, n = self.rnd, 0
        for _ in range(r.randint(1, 3)):
            cid = self._new("customers")
            cols = "(id, name, email, vip" + (", phone)" if self.altered else ")")
            vals = [cid, r.choice(NAMES), f"c{cid}@example.com", r.random() < 0.2]
            if self.altered:
                vals.append(f"+1-555-{r.randrange(10000):04d}")
            cur.execute(f"INSERT INTO customers {cols} VALUES ({', '.join(['%s'] * len(vals))})", vals)
            n += 1
        if r.random() < 0.5:
            pid = self._new("products")
            cur.execute(
                "INSERT INTO products VALUES (%s, %s, %s, %s, %s, %s)",
                (pid, f"Product {pid}", f"{r.randrange(100, 99999) / 100:.2f}", r.randrange(500),
                 r.choice(["new", "sale,eco", ""]), json.dumps({"weight_g": pid * 10, "color": "blue"})),
            )  # fmt: skip
            n += 1
        if self.ids["products"]:
            oid = self._new("orders")
            items = r.randint(1, 5)
            cur.execute(
                "INSERT INTO orders VALUES (%s, %s, 'new', %s, %s)",
                (oid, r.randint(1, self.ids["customers"]), f"{r.randrange(100, 50000) / 100:.2f}",
                 datetime.now(UTC).replace(tzinfo=None)),
            )  # fmt: skip
            rows = [
                (self._new("order_items"), oid, r.randint(1, self.ids["products"]), r.randint(1, 9),
                 f"{r.randrange(100, 9999) / 100:.2f}")
                for _ in range(items)
            ]  # fmt: skip
            cur.executemany("INSERT INTO order_items VALUES (%s, %s, %s, %s, %s)", rows)
            n += 1 + items
        if self.ids["orders"] > 5:
            n += cur.execute(
                "UPDATE orders SET status = %s WHERE id = %s",
                (r.choice(["paid", "shipped", "cancelled"]), r.randint(1, self.ids["orders"])),
            )
            n += cur.execute(
                "UPDATE products SET stock = stock + 1 WHERE id = %s", (r.randint(1, self.ids["products"]),)
            )
            if r.random() < 0.3:
                n += cur.execute(
                    "DELETE FROM order_items WHERE id = %s", (r.randint(1, self.ids["order_items"]),)
                )
            if r.random() < 0.1:
                n += cur.execute("UPDATE customers SET vip = NOT vip, email = NULL WHERE id = %s",
                                 (r.randint(1, self.ids["customers"]),))  # fmt: skip
        return n


# ----------------------------------------------------------------------------- comparison
def compare(db: PrivateMariaDB, lake: Path, spark: Any) -> bool:
    """Each table of the source against the lake as Spark's Delta reads it."""
    from .spark.check import compare_table

    ok = True
    say(
        f"\n{'table':<12} {'source rows':>11} {'target rows':>11}  {'source checksum':<16}  {'target checksum':<16}"
    )
    with db.root_connection("shop") as conn:
        for table, key in TABLES.items():
            c = compare_table(conn, lake, "shop", table, key, spark=spark)
            ok &= c.equal
            verdict = "OK" if c.equal else f"DIFFERENT: {c.first_difference}"
            say(
                f"{table:<12} {c.source_rows:>11,} {c.target_rows:>11,}  {c.source_digest:<16}  "
                f"{c.target_digest:<16}  {verdict}"
            )
    return ok


# ----------------------------------------------------------------------------- processes
def start_server(
    db: PrivateMariaDB, start: tuple[str, int], port: int, metrics: int, conf: Path
) -> subprocess.Popen:
    env = dict(
        os.environ,
        CANAL_IP="127.0.0.1",
        CANAL_PORT=str(port),
        CANAL_METRICS_PULL_PORT=str(metrics),
        CANAL_FILE_DATA_DIR=str((ROOT / "data").resolve()),
        CANAL_INSTANCE_MASTER_ADDRESS=f"{db.host}:{db.port}",
        CANAL_INSTANCE_MASTER_JOURNAL_NAME=start[0],
        CANAL_INSTANCE_MASTER_POSITION=str(start[1]),
        CANAL_INSTANCE_DBUSERNAME=db.repl_user,
        CANAL_INSTANCE_DBPASSWORD=db.repl_password,
        CANAL_INSTANCE_FILTER_REGEX="shop\\..*",
    )
    log = (ROOT / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pycanal.cli", "server", "--conf", str(conf), "--log-level", "WARNING"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pycanal server exited: see {ROOT / 'server.log'}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    raise RuntimeError("pycanal server did not start listening")


def scrape(port: int) -> dict[str, float]:
    out = {}
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith(("canal_instance_put_rows{", "pycanal_instance_replication_lag_seconds{")):
            name, value = line.split("{", 1)[0], line.rsplit(" ", 1)[1]
            out[name] = float(value)
    return out


def spark_sql(sql: str) -> list[str]:
    """The ``spark-sql`` command that runs ``sql`` with Delta Lake for Spark: the one in this
    pyspark's package (pip's ``bin/spark-sql`` finds its Spark only with the virtualenv's python
    first on the PATH), Delta's package and SQL settings."""
    import pyspark

    conf = [f"{k}={v}" for k, v in delta_options().items() if k != "spark.jars.packages"]
    return [
        str(Path(pyspark.__file__).parent / "bin" / "spark-sql"),
        "--packages", delta_package(),
        *[a for c in conf for a in ("--conf", c)],
        "-e", sql,
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="pycanal's end-to-end demo")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the workload runs")
    ap.add_argument(
        "--preload-seconds", type=float, default=10.0, help="the workload's run before pycanal starts"
    )
    ap.add_argument("--conf", type=Path, default=CONF, help="the Canal conf dir (default: the shipped conf/)")
    args = ap.parse_args(argv)
    if not (args.conf / "canal.properties").is_file():
        ap.error(f"{args.conf} has no canal.properties")
    if ROOT.exists():
        shutil.rmtree(ROOT)
    (ROOT / "spark-tmp").mkdir(parents=True)
    lake = (ROOT / "lake").resolve()
    say("pycanal demo: MariaDB -> pycanal server -> Spark -> Delta tables")
    say("1. starting a private MariaDB (ROW binlog, FULL row metadata) ...")
    with PrivateMariaDB(binlog_row_metadata="FULL") as db:
        say(f"   {db.version} on 127.0.0.1:{db.port}")
        say(
            f"   a shop that already has rows: {args.preload_seconds:.0f}s of orders before pycanal starts ..."
        )
        for ddl in SCHEMA:
            db.execute(ddl)
        history = Workload(db, args.preload_seconds, seed=1, alter=False)
        history.run()
        if history.error is not None:
            raise history.error
        existing = sum(db.query(f"SELECT COUNT(*) FROM shop.{t}")[0][0] for t in TABLES)
        say(f"   {existing:,} rows in {len(TABLES)} tables")
        start = db.current_binlog()
        port, metrics = free_port(), free_port()
        say(f"2. starting `pycanal server --conf conf` (TCP 127.0.0.1:{port}, metrics :{metrics}) ...")
        server = start_server(db, start, port, metrics, args.conf)
        pipeline = spark = None
        try:
            say("3. starting Spark (local[2]) and the stream format('canal') -> apply_changes,")
            say("   with the initial snapshot of the existing rows (snapshot='initial') ...")
            t0 = time.monotonic()
            spark = spark_session((ROOT / "spark-tmp").resolve(), "pycanal-demo")
            pipeline = start_pipeline(spark, lake, address=f"127.0.0.1:{port}", filter="shop\\..*",
                                      snapshot="initial", source=f"{db.host}:{db.port}", source_user=db.repl_user,
                                      source_password=db.repl_password, snapshot_chunk_rows=2000)  # fmt: skip
            query = pipeline.query
            say(f"   Spark ready in {time.monotonic() - t0:.0f}s")
            say(
                f"4. a {args.seconds:.0f}s workload (inserts, updates, deletes, one ALTER TABLE) during the snapshot"
            )
            work = Workload(db, args.seconds, ids=history.ids)
            threading.Thread(target=work.run, daemon=True).start()
            applied = 0
            seen: set[int] = set()
            deadline = None
            last_captured = -1
            while True:
                time.sleep(2)
                for p in query.recentProgress:
                    if p["batchId"] not in seen and p["numInputRows"]:
                        seen.add(p["batchId"])  # the stream's rows (Spark counts a staged part once)
                        b = p["batchId"]
                        applied += pipeline.applier.rows_in.get(b, 0) - pipeline.applier.reads_in.get(b, 0)
                m = scrape(metrics)
                captured = int(m.get("canal_instance_put_rows", 0))
                lag = m.get("pycanal_instance_replication_lag_seconds", 0.0)
                snapshot = snapshot_progress(query) or "-"
                say(
                    f"   written {work.rows:>7,}  captured {captured:>7,}  applied {applied:>7,}  "
                    f"lag {lag:4.1f}s  snapshot {snapshot}{'  (ALTER TABLE done)' if work.altered else ''}"
                )
                if query.exception() is not None:
                    raise RuntimeError(f"the Spark query failed: {query.exception()}")
                if work.done.is_set():
                    if work.error is not None:
                        raise work.error
                    deadline = deadline or time.monotonic() + 120
                    # Done when the server captured nothing new since the last poll and Spark
                    # applied every captured row change (its rows also count the DDL statements).
                    if captured == last_captured and applied >= captured and snapshot == "done":
                        break
                    last_captured = captured
                    if time.monotonic() > deadline:
                        raise RuntimeError("Spark did not catch up within 120 s")
            pipeline.stop()  # waits for the last batch's current state
            say("5. source vs target, per table (the lake read by Spark's Delta):")
            ok = compare(db, lake, spark)
            say("\n6. a Spark SQL query over the lake (Delta tables by path), run here:")
            sql = QUERY.format(lake=lake)
            say(f"   {sql}")
            for row in spark.sql(sql).collect():
                say(f"   {row['status']:<10} {row['orders']:>7,} orders  {row['total']:>14}")
            say("   the same from a shell (Spark's Delta from Maven, as pycanal's sessions get it):")
            say(f"   {shlex.join(spark_sql(sql))}")
        finally:
            if pipeline is not None and pipeline.query.isActive:
                pipeline.query.stop()
            if spark is not None:
                spark.stop()
            server.terminate()
            server.wait(timeout=30)
    say("\n7. the tables, for any Delta reader that applies deletion vectors:")
    say(f"   change log (Delta):     {lake}/changelog   (partitioned by date)")
    say(f"   current state (Delta):  {lake}/current/shop/<table>")
    say(f"   PySpark: spark.read.format('delta').load('{lake}/current/shop/orders').show()")
    say("   delta-rs (Python; not DeltaTable.to_pandas(), which refuses deletion vectors):")
    for line in DELTA_RS:
        say(f"     {line.format(lake=lake)}")
    say(f"   DuckDB:  SELECT * FROM delta_scan('{lake}/current/shop/orders')")
    say("\nall tables equal" if ok else "\nTABLES DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
