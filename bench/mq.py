"""MQ benchmark (issue 39): a sysbench ``oltp_write_only`` backlog through a server in an MQ mode
(Kafka or RabbitMQ) into a private broker, read back by a consumer that parses every message.

1. The source: a private MariaDB, ``sysbench oltp_write_only`` for ``--events`` transactions alone in
   one binlog file (``bench/oltp.py``'s ``run_workload``); its rows are the file's row changes.
2. The brokers, each started only when a chosen mode needs it:
   ``pycanal.testing.kafka.PrivateKafka`` (Apache Kafka, KRaft, loopback), a fresh one-partition
   topic per run; ``pycanal.testing.rabbitmq.PrivateRabbitMQ`` (Debian's RabbitMQ node), a fresh
   durable queue per run behind a durable direct exchange (``bench/mq_rabbitmq.py``).
3. The servers, each a fresh process per run, from the file's start, with the shipped settings of a
   plain conf (``canal.mq.*``, ``kafka.*`` and ``rabbitmq.*`` defaults: flat messages,
   ``canalBatchSize`` 50, ``acks=all``; for RabbitMQ the broker's address, user, exchange, queue
   and routing key, and the vhost ``/``, which Canal 1.1.7 needs named):
   * ``pycanal server`` (``canal.serverMode = kafka``): flat and protobuf, at least once and
     ``canal.mq.transaction = true`` (read committed);
   * ``pycanal server`` (``canal.serverMode = rabbitMQ``): flat and protobuf; a batch counts as sent
     once the broker confirmed each of its messages (publisher confirms);
   * Alibaba Canal 1.1.7 (``pycanal.testing.canal``; 1.1.8's server is not on Maven Central) in
     kafka and in rabbitMQ mode, flat and protobuf, with ``startup.sh``'s G1 and heap: the anchor.
     Its RabbitMQ producer publishes without confirms. It is ``connector.rabbitmq``'s
     jar-with-dependencies, which ``scripts/setup.sh`` does not fetch: ``bench/mq_rabbitmq.py``
     copies it once with ``mvn`` and runs Canal from a home whose ``plugin/`` links it.
4. The consumer (this process) decodes every message (``pycanal.mq.consumer.decode_record``: flat
   JSON, or a protobuf ``Packet`` whose entries and ``RowChange`` are parsed; a RabbitMQ body is the
   bytes of a Kafka record's value) and touches every column value: confluent-kafka read
   committed, or pika with a prefetch of 2,000 and an ack of every 500 messages. The clock runs
   from the first message to the one that completes the file's row changes: start-up (Canal's JVM
   2-6 s, pycanal's ~1 s) is reported apart, not counted. The CPU seconds of the server (from its
   start), the broker (its process tree: Kafka's JVM, the RabbitMQ node's beam) and the consumer
   over the run are reported beside the rate: everything shares 2 cores. No warm-up: Canal's JIT
   warms up inside the run.

The modes alternate for ``--repeat`` rounds; the medians count, with each run listed. Ratios
against the goals of issue 39: flat >= 30k rows/s, protobuf >= 1.3x flat, transactional >= 0.8x
at least once, and pycanal / Canal per format; beside them (no goal) RabbitMQ / Kafka for pycanal
and pycanal / Canal in RabbitMQ mode. One JSON object on stdout; progress on stderr.

    .venv/bin/python bench/mq.py [--events 15000] [--repeat 3] [--skip-canal] [--modes M,...] [--profile DIR]

Spark from Kafka into the lake against the TCP pipeline is ``bench/pipeline.py --via kafka``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mq_rabbitmq  # noqa: E402
import oltp  # noqa: E402
import servers  # noqa: E402
from pycanal.mq.consumer import decode_record  # noqa: E402
from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402
from pycanal.testing._process import free_port  # noqa: E402
from pycanal.testing.kafka import PrivateKafka  # noqa: E402
from pycanal.testing.mariadb import PrivateMariaDB  # noqa: E402
from pycanal.testing.rabbitmq import PrivateRabbitMQ  # noqa: E402

_T0 = time.monotonic()
MODES = {  # name -> (server, broker, flat, transaction)
    "pycanal_flat": ("pycanal", "kafka", True, False),
    "pycanal_protobuf": ("pycanal", "kafka", False, False),
    "pycanal_flat_transactional": ("pycanal", "kafka", True, True),
    "pycanal_protobuf_transactional": ("pycanal", "kafka", False, True),
    "canal_flat": ("canal", "kafka", True, False),
    "canal_protobuf": ("canal", "kafka", False, False),
    "pycanal_rabbitmq_flat": ("pycanal", "rabbitmq", True, False),
    "pycanal_rabbitmq_protobuf": ("pycanal", "rabbitmq", False, False),
    "canal_rabbitmq_flat": ("canal", "rabbitmq", True, False),
    "canal_rabbitmq_protobuf": ("canal", "rabbitmq", False, False),
}


def log(msg: str) -> None:
    print(f"[mq-bench {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def touch(value: bytes | None) -> int:
    """Decode one record and touch every value of its rows: the row changes it carries."""
    message = decode_record("bench", 0, 0, value)
    if message.flat is not None:
        rows = 0
        if not message.flat.is_ddl:
            for image in (message.flat.data or [], message.flat.old or []):
                for row in image:
                    for _v in row.values():
                        pass
            rows = len(message.flat.data or [])
        return rows
    rows = 0
    for entry in message.entries:
        if entry.entryType != pb.ROWDATA:
            continue
        change = pb.RowChange.FromString(entry.storeValue)
        for data in change.rowDatas:
            for column in (*data.beforeColumns, *data.afterColumns):
                _ = column.value
            rows += 1
    return rows


def consume(kafka: PrivateKafka, topic: str, rows: int, started: float, timeout: float) -> dict[str, Any]:
    """Read ``topic`` until ``rows`` row changes came: when the first record came (after
    ``started``), the rows/s from it to the last, and the CPU seconds the broker and this consumer
    (its process) used meanwhile."""
    from confluent_kafka import Consumer

    assert kafka.pid is not None
    cpu0, broker0 = time.process_time(), servers.usage(kafka.pid)["cpu_s"]
    consumer = Consumer(kafka.client_config(**{
        "group.id": f"bench-{topic}", "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "enable.auto.commit": False,
    }))  # fmt: skip
    consumer.subscribe([topic])
    seen, first, deadline = 0, None, time.monotonic() + timeout
    try:
        while seen < rows:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {seen:,} of {rows:,} row changes in {timeout:g} s")
            for record in consumer.consume(1000, 0.2):
                if record.error():
                    continue  # partition EOF and such
                if first is None:
                    first = time.monotonic()
                seen += touch(record.value())
        done = time.monotonic()
    finally:
        consumer.close()
    if seen != rows:
        raise RuntimeError(
            f"{topic}: {seen:,} row changes, the file holds {rows:,} (at least once sent some twice)"
        )
    assert first is not None
    return {"rows_per_s": round(rows / (done - first)), "wall_s": round(done - first, 3),
            "startup_s": round(first - started, 3), "consumer_cpu_s": round(time.process_time() - cpu0, 2),
            "broker_cpu_s": round(servers.usage(kafka.pid)["cpu_s"] - broker0, 2)}  # fmt: skip


def pycanal_conf(root: Path, db: PrivateMariaDB, start: tuple[str, int], mq: dict[str, str], topic: str,
                 flat: bool) -> Path:  # fmt: skip
    """A plain conf dir in an MQ mode (``mq``: its keys): Canal's defaults but the source, the
    topic and the mode."""
    (root / "bench").mkdir(parents=True)
    server = {
        "canal.destinations": "bench", "canal.conf.dir": ".", "canal.file.data.dir": f"{root}/data",
        "canal.auto.scan": "false", "canal.metrics.pull.port": free_port(), "canal.mq.flatMessage": str(flat).lower(),
        **mq,
    }  # fmt: skip
    instance = {
        "canal.instance.master.address": f"{db.host}:{db.port}", "canal.instance.master.journal.name": start[0],
        "canal.instance.master.position": start[1], "canal.instance.dbUsername": db.repl_user,
        "canal.instance.dbPassword": db.repl_password, "canal.instance.filter.regex": f"{db.database}\\\\.sbtest.*",
        "canal.mq.topic": topic,
    }  # fmt: skip
    (root / "canal.properties").write_text("".join(f"{k} = {v}\n" for k, v in server.items()))
    (root / "bench" / "instance.properties").write_text("".join(f"{k} = {v}\n" for k, v in instance.items()))
    return root


def run(mode: str, db: PrivateMariaDB, brokers: dict[str, Any], start: tuple[str, int], rows: int, tmp: Path,
        timeout: float, profile: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """One run of ``mode``: its rates and the server's CPU seconds (its process tree) over the run;
    with ``profile``, a py-spy profile of a pycanal server there."""
    kind, broker, flat, transaction = MODES[mode]
    topic = f"bench-{mode.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    mq = brokers[broker]
    if broker == "kafka":
        mq.create_topic(topic, 1)
        keys = {"canal.serverMode": "kafka", "kafka.bootstrap.servers": mq.bootstrap_servers}

        def read(started: float) -> dict[str, Any]:
            return consume(mq, topic, rows, started, timeout)
    else:
        mq_rabbitmq.declare(mq, topic)
        keys = mq_rabbitmq.keys(mq, topic)

        def read(started: float) -> dict[str, Any]:
            return mq_rabbitmq.consume(mq, topic, rows, started, timeout, touch)

    started = time.monotonic()
    if kind == "pycanal":
        keys["canal.mq.transaction"] = str(transaction).lower()
        conf = pycanal_conf(tmp / topic, db, start, keys, topic, flat)
        with (tmp / f"{topic}.log").open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "pycanal.cli", "server", "--conf", str(conf)],
                                    stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        spy = servers.profile_of(proc.pid, profile / f"{mode}.txt") if profile is not None else None
        try:
            return {**read(started), "server_cpu_s": servers.usage(proc.pid)["cpu_s"]}
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
            proc.terminate()
            proc.wait(30)
    from pycanal.testing.canal import PrivateCanal

    home = mq_rabbitmq.canal_home_with_rabbitmq(tmp) if broker == "rabbitmq" else contextlib.nullcontext()
    with home:
        canal = PrivateCanal.for_mariadb(
            db,
            destinations={"bench": {"filter.regex": f"{db.database}\\.sbtest.*", "master.journal.name": start[0],
                                    "master.position": start[1], "canal.mq.topic": topic}},
            canal_properties={**keys, "canal.mq.flatMessage": flat},
            quick_start=False, jvm_args=servers.CANAL_HEAP, timezone="UTC", log_level="WARN",
        )  # fmt: skip
        with canal:
            assert canal.pid is not None
            return {**read(started), "server_cpu_s": servers.usage(canal.pid)["cpu_s"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--events", type=int, default=15_000, help="oltp_write_only transactions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-canal", action="store_true", help="no Canal 1.1.7 runs")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take")
    ap.add_argument("--profile", type=Path, help="py-spy profiles of the pycanal servers here (GIL holder)")
    ap.add_argument("--modes", help=f"comma-separated, of: {', '.join(MODES)} (default: all)")
    args = ap.parse_args(argv)
    chosen = args.modes.split(",") if args.modes else list(MODES)
    if unknown := sorted(set(chosen) - set(MODES)):
        ap.error(f"--modes: unknown {', '.join(unknown)}")
    modes = [m for m in MODES if m in chosen and not (args.skip_canal and MODES[m][0] == "canal")]
    load_start = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory(prefix="pycanal-mq-") as tmp_s:
        tmp = Path(tmp_s)
        db = oltp.source_db()
        with db, contextlib.ExitStack() as stack:
            brokers = {  # only the brokers the chosen modes need
                name: stack.enter_context(factory())
                for name, factory in (("kafka", PrivateKafka), ("rabbitmq", PrivateRabbitMQ))
                if any(MODES[m][1] == name for m in modes)
            }
            common = [f"--tables={args.tables}", f"--table-size={args.table_size}"]
            oltp.sysbench(db, "oltp_write_only", "prepare", *common)
            work = oltp.run_workload(db, "oltp_write_only", args.events, args.threads, common)
            start, rows = (work["file"].name, 4), work["rows"]
            for round_ in range(args.repeat):
                for mode in modes:
                    res = run(mode, db, brokers, start, rows, tmp, args.timeout, args.profile)
                    runs[mode].append(res)
                    log(
                        f"round {round_ + 1}: {mode} {res['rows_per_s']:,} rows/s (start-up {res['startup_s']} s, "
                        f"server CPU {res['server_cpu_s']} s)"
                    )
    result: dict[str, Any] = {"rows": rows, "sysbench_rows_per_s": work["sysbench"]["rows_per_s"]}
    for mode, rs in runs.items():
        rates = [r["rows_per_s"] for r in rs]
        result[mode] = {"rows_per_s_median": round(statistics.median(rates)), "rows_per_s": rates,
                        "startup_s": [r["startup_s"] for r in rs], "server_cpu_s": [r["server_cpu_s"] for r in rs],
                        "broker_cpu_s": [r["broker_cpu_s"] for r in rs],
                        "consumer_cpu_s": [r["consumer_cpu_s"] for r in rs]}  # fmt: skip

    def ratio(a: str, b: str) -> float | None:
        if a not in result or b not in result:
            return None
        return round(result[a]["rows_per_s_median"] / result[b]["rows_per_s_median"], 2)

    result["goals"] = {
        "flat_rows_per_s (>= 30,000)": result.get("pycanal_flat", {}).get("rows_per_s_median"),
        "protobuf_vs_flat (>= 1.3)": ratio("pycanal_protobuf", "pycanal_flat"),
        "transactional_vs_at_least_once, flat (>= 0.8)": ratio("pycanal_flat_transactional", "pycanal_flat"),
        "transactional_vs_at_least_once, protobuf (>= 0.8)": ratio(
            "pycanal_protobuf_transactional", "pycanal_protobuf"
        ),
        "pycanal_vs_canal, flat": ratio("pycanal_flat", "canal_flat"),
        "pycanal_vs_canal, protobuf": ratio("pycanal_protobuf", "canal_protobuf"),
    }
    result["ratios"] = {  # RabbitMQ against Kafka, and against Canal's RabbitMQ mode (no goal in issue 39)
        "rabbitmq_vs_kafka, pycanal flat": ratio("pycanal_rabbitmq_flat", "pycanal_flat"),
        "rabbitmq_vs_kafka, pycanal protobuf": ratio("pycanal_rabbitmq_protobuf", "pycanal_protobuf"),
        "pycanal_vs_canal, rabbitmq flat": ratio("pycanal_rabbitmq_flat", "canal_rabbitmq_flat"),
        "pycanal_vs_canal, rabbitmq protobuf": ratio("pycanal_rabbitmq_protobuf", "canal_rabbitmq_protobuf"),
    }
    result["settings"] = (
        "plain conf dirs: Canal's canal.mq.*, kafka.* and rabbitmq.* defaults (canalBatchSize 50, acks=all, one "
        "partition; RabbitMQ: a durable direct exchange and queue, persistent messages; the consumer acks "
        f"every {mq_rabbitmq.ACK_EVERY} with prefetch {mq_rabbitmq.PREFETCH}); Canal 1.1.7 with startup.sh's "
        "G1 and heap " + " ".join(servers.CANAL_HEAP)
    )
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                         "load_avg_at_start": [round(x, 2) for x in load_start]}  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
