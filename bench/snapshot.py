"""The initial snapshot: its readers, and a table's existing rows into the lake under load.

    .venv/bin/python bench/snapshot.py   # --rows 1000000 --chunk-rows 50000 --processes 2 --rate 1000

sysbench ``prepare`` fills one table of ``--rows`` rows (``sbtest1``: INT key, INT, CHAR(120),
CHAR(60)) in a private MariaDB. Then, each alone on the idle source, the single-connection read
limits and pycanal's chunk reader:

* ``mariadb --quick -e 'SELECT * ...' > /dev/null``: the C client, the ceiling;
* PyMySQL's ``SSCursor``, values left undecoded: the Python driver alone;
* connectorx (Rust, the rows straight into Arrow), on one connection and on ``--processes``;
* ``pycanal.snapshot.read_chunk`` over the table's chunks in one process: consistent snapshot,
  binlog position, values in the binlog decoder's form;
* the same + ``SnapshotRows`` into Arrow record batches (what a Spark executor yields);
* that, the chunks spread over ``--processes`` processes (what executors do).

Then the lake (``--rate`` 0 skips it): sysbench ``oltp_write_only`` at ``--rate`` transactions/s
alone for ``--writer-seconds`` (its rate alone, from the server's ``Com_commit``), then a
``pycanal server`` (conf/'s store) and the job (``start_pipeline``, ``snapshot="initial"``,
``--chunk-rows`` rows a chunk, local[2]) start while the writer keeps writing at that rate. The
clock runs from the query's start until the micro-batch whose end offset says the snapshot is
done is applied to the current-state table (runs before stop 28 stopped it when that micro-batch
was planned: ``last_batch_planned_s``); then the lake is compared with the source (rows and sum
of ``k``) until equal. ``--resnapshot``: before that,
the table is snapshotted again while it streams (``pycanal snapshot``'s request), timed from the
request to the snapshot's end.

Prints JSON: rows/s of each reader and ratios to the C client and to ``SSCursor``; the
snapshot's rows/s into the Delta table (and over connectorx's one-connection read, when the
readers ran), the writer's rate during it against its rate alone, the
current state's rounds (count, seconds, rows) until the lake equalled the source.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lake as lake_bench  # noqa: E402
import oltp as oltp_bench  # noqa: E402
import servers  # noqa: E402
from pycanal.snapshot import describe, plan_chunks, read_chunk  # noqa: E402
from pycanal.snapshot.reader import connect  # noqa: E402
from pycanal.spark.apply import applied_batch_ids  # noqa: E402
from pycanal.spark.canal_options import snapshot_requests  # noqa: E402
from pycanal.spark.current import table_path  # noqa: E402
from pycanal.spark.delta.tablestate import read_rows  # noqa: E402
from pycanal.spark.job import start_pipeline  # noqa: E402
from pycanal.spark.maintenance import Maintenance  # noqa: E402
from pycanal.spark.session import spark_session  # noqa: E402
from pycanal.spark.snapshot import request_snapshot  # noqa: E402
from pycanal.spark.snapshot_rows import SnapshotRows  # noqa: E402
from pycanal.testing._process import free_port  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB, _find_binary  # noqa: E402

_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[snapshot-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def c_client(db: PrivateMariaDB, table: str) -> int:
    exe = _find_binary("mariadb", "mysql")
    cmd = [exe, f"--socket={db.socket}", "--user=root", "--quick", "--batch", "--skip-column-names",
           "-e", f"SELECT * FROM `{db.database}`.`{table}`"]  # fmt: skip
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True).stdout
    return out.count(b"\n")


def sscursor(params: dict[str, Any], database: str, table: str) -> int:
    import pymysql.cursors

    with connect(**params) as conn, conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT * FROM `{database}`.`{table}`")
        n = 0
        while rows := cur.fetchmany(10_000):
            n += len(rows)
        return n


def connectorx_read(params: dict[str, Any], database: str, table: str, partitions: int) -> int:
    """connectorx (Rust: the rows straight into Arrow, no Python object per value; its default,
    the binary protocol), the whole table in one query, split over ``partitions`` connections on
    sysbench's key ``id`` if above 1."""
    import connectorx as cx

    url = f"mysql://{params['user']}:{params['password']}@{params['host']}:{params['port']}/{database}"
    query = f"SELECT * FROM `{table}`"
    split = {"partition_on": "id", "partition_num": partitions} if partitions > 1 else {}
    return cx.read_sql(url, query, return_type="arrow", **split).num_rows


def chunks(params: dict[str, Any], database: str, table: str, chunk_rows: int) -> list[Any]:
    with connect(**params) as conn:
        t = describe(conn, database, table)
        return [(t, c) for c in plan_chunks(conn, t, chunk_rows)]


def read_chunks(params: dict[str, Any], work: list[Any], arrow: bool) -> int:
    n = 0
    with connect(**params) as conn:
        for t, c in work:
            read = read_chunk(conn, t, c)
            if arrow:  # the READ rows (a chunk's CHUNK row, its key range, is not a row of the table)
                n += sum(
                    pc.sum(pc.equal(b.column("op"), "READ")).as_py() or 0
                    for b in SnapshotRows().batches([read])
                )
            else:
                n += len(read.rows)
    return n


def _part(args: tuple) -> int:
    return read_chunks(*args)


def commits(db: PrivateMariaDB) -> int:
    return int(db.query("SHOW GLOBAL STATUS LIKE 'Com_commit'")[0][1])


def writer(db: PrivateMariaDB, rate: int, seconds: int) -> subprocess.Popen[bytes]:
    cmd = ["sysbench", "oltp_write_only", "--db-driver=mysql", f"--mysql-socket={db.socket}", "--mysql-user=root",
           f"--mysql-db={db.database}", "--tables=1", "--threads=4", f"--rate={rate}", f"--time={seconds}",
           "--events=0", "run"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def rate_of(db: PrivateMariaDB, seconds: float, done: Any = None) -> float:
    """Transactions/s committed on the source over ``seconds`` (or until ``done()``)."""
    c0, t0 = commits(db), time.monotonic()
    while time.monotonic() - t0 < seconds and not (done and done()):
        time.sleep(0.2)
    return (commits(db) - c0) / (time.monotonic() - t0)


def snapshot_state(lake: Path) -> Any:
    return snapshot_offset(lake)[1]


def snapshot_offset(lake: Path) -> tuple[int | None, Any]:
    """The last planned micro-batch and the snapshot's state at its end offset."""
    offsets = sorted((lake / "_checkpoint" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    if not offsets:
        return None, None
    return int(offsets[-1].name), json.loads(offsets[-1].read_text().splitlines()[-1]).get("snap")


def in_delta(pipeline: Any, lake: Path, batch: int) -> None:
    """Wait until micro-batch ``batch`` is applied to the current-state tables."""
    while not any(b >= batch for b in applied_batch_ids(lake)):
        if pipeline.query.exception() is not None:
            raise RuntimeError(f"the query failed: {pipeline.query.exception()}")
        time.sleep(0.1)


def lake_k(db: PrivateMariaDB, lake: Path, table: str) -> Any:
    """The lake table's ``k`` column (None: not there yet)."""
    from deltalake import DeltaTable

    try:
        return read_rows(DeltaTable(str(table_path(lake, db.database, table))), ["k"])
    except Exception:  # noqa: BLE001 - not there yet
        return None


def lake_equal(db: PrivateMariaDB, lake: Path, table: str) -> bool:
    ((count, ksum),) = db.query(f"SELECT COUNT(*), COALESCE(SUM(k), 0) FROM `{db.database}`.`{table}`")
    data = lake_k(db, lake, table)
    return data is not None and (data.num_rows, sum(data.column("k").to_pylist())) == (count, int(ksum))


def near(db: PrivateMariaDB, lake: Path, table: str) -> bool:
    """Whether the lake's table has 99% of the source's rows or more."""
    ((count,),) = db.query(f"SELECT COUNT(*) FROM `{db.database}`.`{table}`")
    data = lake_k(db, lake, table)
    return data is not None and data.num_rows >= 0.99 * count


def resnapshot(pipeline: Any, db: PrivateMariaDB, lake: Path, table: str) -> dict[str, Any]:
    """An ad-hoc snapshot of the whole table again, the writer running (``pycanal snapshot``'s
    request): seconds from the request to the snapshot's end, and the current state's rounds
    meanwhile."""
    while not near(db, lake, table):  # the initial snapshot's rounds out of the way (the writer runs)
        time.sleep(0.5)
    before = len(pipeline.applier.rounds)
    t0 = time.monotonic()
    request_snapshot(snapshot_requests(lake), [f"{db.database}.{table}"])
    while snapshot_state(lake) == "done":  # not taken yet
        time.sleep(0.2)
    while (end := snapshot_offset(lake))[1] != "done":
        if pipeline.query.exception() is not None:
            raise RuntimeError(f"the query failed: {pipeline.query.exception()}")
        time.sleep(0.2)
    in_delta(pipeline, lake, end[0])
    secs = time.monotonic() - t0
    rounds = list(pipeline.applier.rounds)[before:]
    out = {
        "seconds": round(secs, 1),
        "rounds": len(rounds),
        "rounds_seconds": round(sum(r[1] for r in rounds), 2),
    }
    log(f"re-snapshot: {out}")
    return out


def into_lake(args: argparse.Namespace, db: PrivateMariaDB, table: str, tmp: Path) -> dict[str, Any]:
    alone_proc = writer(db, args.rate, int(args.writer_seconds) + 5)
    time.sleep(2)
    alone = rate_of(db, args.writer_seconds)
    alone_proc.terminate()
    alone_proc.wait()
    log(f"the writer alone: {alone:,.0f} txn/s")
    port = free_port()
    conf = tmp / "conf"
    servers.write_conf(conf, db, port, db.current_binlog(), ".*", servers.shipped_settings())
    server = servers.start_server(conf, port, tmp / "server.log")
    spark = spark_session(tmp / "spark-tmp", "pycanal-snapshot-bench", master="local[2]")
    lake = tmp / "lake"
    proc = writer(db, args.rate, 3600)
    try:
        time.sleep(2)
        (rows,) = db.query(f"SELECT COUNT(*) FROM `{db.database}`.`{table}`")[0]
        t0 = time.monotonic()
        log("query start")
        pipeline = start_pipeline(spark, lake, address=f"127.0.0.1:{port}", destination="bench",
                                  filter=f"{db.database}\\..*",
                                  snapshot="initial", source=f"{db.host}:{db.port}", source_user=db.repl_user,
                                  source_password=db.repl_password, snapshot_chunk_rows=args.chunk_rows,
                                  snapshot_parallelism=args.parallelism, snapshot_reader=args.reader,
                                  apply_share=args.apply_share,
                                  maintenance=Maintenance(deletion_vectors=args.deletion_vectors))  # fmt: skip
        try:
            first_chunks: list[float] = []  # when the first micro-batch with chunks was planned
            last: list[int] = []  # the micro-batch whose end offset says the snapshot is done

            def done() -> bool:
                batch, state = snapshot_offset(lake)
                if not first_chunks and isinstance(state, dict) and state.get("read"):
                    first_chunks.append(time.monotonic() - t0)
                if state == "done" and batch is not None:
                    last.append(batch)
                return state == "done" or pipeline.query.exception() is not None

            c0, w0 = commits(db), time.monotonic()
            rate_of(db, 3600, done)
            planned = time.monotonic() - t0
            if pipeline.query.exception() is not None:
                raise RuntimeError(f"the query failed: {pipeline.query.exception()}")
            in_delta(pipeline, lake, last[0])
            during = (commits(db) - c0) / (time.monotonic() - w0)
            secs = time.monotonic() - t0
            startup = first_chunks[0] if first_chunks else None
            log(
                f"snapshot in the Delta table after {secs:.1f} s (its last micro-batch planned after "
                f"{planned:.1f} s); the writer meanwhile: {during:,.0f} txn/s"
            )
            for p in pipeline.query.recentProgress[:3]:
                log(f"batch {p['batchId']} at {p['timestamp']}: {p['durationMs']}")
            stats = lake_bench.batch_stats(pipeline, 0)
            log(f"micro-batches: {stats}")
            again = resnapshot(pipeline, db, lake, table) if args.resnapshot else None
            proc.terminate()
            proc.wait()
            deadline = time.monotonic() + 600
            while not lake_equal(db, lake, table):
                if time.monotonic() > deadline:
                    raise RuntimeError("the lake never equalled the source")
                time.sleep(0.5)
            equal_s = time.monotonic() - t0
            rounds = list(pipeline.applier.rounds)  # (at, seconds, batches, rows) of each current-state round
        finally:
            pipeline.stop()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
        spark.stop()
        server.terminate()
        server.wait(timeout=30)
    return {
        "rows_at_start": int(rows),
        "snapshot_s": round(secs, 1),  # query start -> the last chunks applied to the Delta table
        "last_batch_planned_s": round(planned, 1),  # (the clock of runs before stop 28)
        "rows_per_s": round(int(rows) / secs),
        "startup_s": round(startup, 1) if startup else None,  # query start -> first chunks planned
        "rows_per_s_after_startup": round(int(rows) / (secs - startup)) if startup else None,
        "lake_equal_after_s": round(equal_s, 1),
        "reader": args.reader,
        "apply_share": args.apply_share,
        "deletion_vectors": args.deletion_vectors,
        "writer_rate": args.rate,
        "writer_alone_txn_per_s": round(alone),
        "writer_during_txn_per_s": round(during),
        "writer_during_vs_alone": round(during / alone, 2),
        "micro_batches": stats,
        **({"resnapshot": again} if again else {}),
        "current_state": {  # its rounds until the lake equalled the source
            "rounds": len(rounds),
            "seconds": round(sum(r[1] for r in rounds), 2),
            "rows": sum(r[3] for r in rounds),
            # chunks whose executor-written files were committed as they are / left for their READ rows
            "chunk_files": dict(pipeline.applier.chunk_files),
            # chunks whose executor-written change-log files were committed as they are / written again
            "changelog_files": dict(pipeline.applier.changelog_files),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--parallelism", type=int, help="the job's snapshotParallelism (chunks per micro-batch)")
    ap.add_argument(
        "--rate", type=int, default=1000, help="the writer's txn/s during the lake run (0: no lake run)"
    )
    ap.add_argument(
        "--writer-seconds", type=float, default=10.0, help="seconds the writer's rate alone is measured"
    )
    ap.add_argument("--skip-readers", action="store_true")
    ap.add_argument(
        "--reader", choices=("connectorx", "pymysql"), default="connectorx", help="the job's chunk reader"
    )
    ap.add_argument(
        "--apply-share", type=float, default=1.0, help="the job's apply_share (current-state rounds)"
    )
    ap.add_argument("--deletion-vectors", action=argparse.BooleanOptionalAction,
                    default=Maintenance().deletion_vectors, help="the job's --deletion-vectors")  # fmt: skip
    ap.add_argument(
        "--resnapshot", action="store_true", help="then snapshot the table again while it streams (ad hoc)"
    )
    args = ap.parse_args(argv)
    lake_run: dict[str, Any] | None = None
    work: list[Any] = []
    with (
        tempfile.TemporaryDirectory(prefix="pycanal-snapshot-") as tmp,
        PrivateMariaDB(extra_args=["--innodb-buffer-pool-size=512M", "--innodb-log-file-size=256M"]) as db,
    ):
        log(f"sysbench prepare: 1 x {args.rows:,} rows")
        oltp_bench.sysbench(db, "oltp_read_only", "prepare", "--tables=1", f"--table-size={args.rows}")
        table = "sbtest1"
        params = {"host": db.host, "port": db.port, "user": db.repl_user, "password": db.repl_password}
        results: dict[str, Any] = {}

        def record(name: str, secs: float, n: int) -> None:
            if n != args.rows:
                raise SystemExit(f"{name}: read {n:,} rows of {args.rows:,}")
            results[name] = {"seconds": round(secs, 2), "rows_per_s": round(n / secs)}
            log(f"{name}: {n / secs:,.0f} rows/s")

        c_client(db, table)  # warm the buffer pool
        if args.rate:
            lake_run = into_lake(args, db, table, Path(tmp))
            log(f"lake: {lake_run}")
        if args.skip_readers:
            print(json.dumps({"lake": lake_run}, indent=2))
            return 0
        record("mariadb_cli_quick", *timed(lambda: c_client(db, table)))
        record("pymysql_sscursor", *timed(lambda: sscursor(params, db.database, table)))
        record("connectorx", *timed(lambda: connectorx_read(params, db.database, table, 1)))
        record(
            f"connectorx_{args.processes}_connections",
            *timed(lambda: connectorx_read(params, db.database, table, args.processes)),
        )
        work = chunks(params, db.database, table, args.chunk_rows)
        log(f"{len(work)} chunks of ~{args.chunk_rows:,} rows")
        record("read_chunk", *timed(lambda: read_chunks(params, work, False)))
        record("read_chunk_to_arrow", *timed(lambda: read_chunks(params, work, True)))
        parts = [(params, work[i :: args.processes], True) for i in range(args.processes)]
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(args.processes) as pool:
            record(
                f"read_chunk_to_arrow_{args.processes}_processes", *timed(lambda: sum(pool.map(_part, parts)))
            )
    c, s = results["mariadb_cli_quick"]["rows_per_s"], results["pymysql_sscursor"]["rows_per_s"]
    for r in results.values():
        r["ratio_vs_mariadb_cli"] = round(r["rows_per_s"] / c, 2)
        r["ratio_vs_sscursor"] = round(r["rows_per_s"] / s, 2)
    if lake_run is not None:  # the snapshot into the lake against connectorx's read of the table
        lake_run["ratio_vs_connectorx"] = round(
            lake_run["rows_per_s"] / results["connectorx"]["rows_per_s"], 3
        )
    out = {
        "rows": args.rows,
        "chunk_rows": args.chunk_rows,
        "chunks": len(work),
        "readers": results,
        "lake": lake_run,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg(),
        },
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
