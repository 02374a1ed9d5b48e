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
   committed, or pika with a prefetch of 2,000 and an ack of every 500 messages. It is attached to
   the topic (assigned its partition: no group to join) or the queue before the server starts, and
   reads in a thread of its own while the main thread starts the server: a consumer that came late
   (a group join took 3 s on a loaded machine, and Canal's start-up was waited for) read a backlog
   already sent and clocked 87k rows/s. The clock runs from the first message to the one that
   completes the file's row changes: start-up (Canal's JVM 2-6 s, pycanal's 1-2 s) is reported
   apart, not counted. The CPU seconds of the server, the broker (its process tree: Kafka's JVM,
   the RabbitMQ node's beam) and the consumer (this process), all from the server's start, are
   reported beside the rate: everything shares 2 cores. No warm-up: Canal's JIT warms up inside
   the run.

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
import functools
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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


class KafkaReader:
    """The topic's one partition from its start, read committed, assigned rather than subscribed:
    no group to join, so it reads from the moment it exists."""

    def __init__(self, kafka: PrivateKafka, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(kafka.client_config(**{
            "group.id": f"bench-{topic}", "isolation.level": "read_committed", "enable.auto.commit": False,
        }))  # fmt: skip
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def poll(self) -> list[bytes]:
        """The values of the records that came within 0.2 s (partition EOF and such skipped)."""
        return [r.value() for r in self.consumer.consume(1000, 0.2) if not r.error()]

    def close(self) -> None:
        self.consumer.close()


def consume(open_reader: Callable[[], Any], broker_pid: int, name: str, rows: int, timeout: float,
            attached: threading.Event, stop: threading.Event) -> dict[str, Any]:  # fmt: skip
    """Read ``name`` (a topic or a queue) until ``rows`` row changes came, in a thread of its own:
    the reader (``open_reader()``, with ``poll()`` and ``close()``) is attached (``attached`` set)
    before the server starts and reads on while the main thread starts it, so no message waits
    unread and the clock is honest. Returns when the first message came (``first``, monotonic),
    the rows/s from it to the last, and the CPU seconds the broker and this process (the consumer)
    used from the attach on."""
    reader = open_reader()
    attached.set()
    cpu0, broker0 = time.process_time(), servers.usage(broker_pid)["cpu_s"]
    seen, first, deadline = 0, None, time.monotonic() + timeout
    try:
        while seen < rows:
            if stop.is_set():
                raise RuntimeError(f"{name}: stopped after {seen:,} of {rows:,} row changes")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: {seen:,} of {rows:,} row changes in {timeout:g} s")
            for value in reader.poll():
                if first is None:
                    first = time.monotonic()
                seen += touch(value)
        done = time.monotonic()
    finally:
        reader.close()
    if seen != rows:
        raise RuntimeError(
            f"{name}: {seen:,} row changes, the file holds {rows:,} (at least once sent some twice)"
        )
    assert first is not None
    return {"rows_per_s": round(rows / (done - first)), "wall_s": round(done - first, 3), "first": first,
            "consumer_cpu_s": round(time.process_time() - cpu0, 2),
            "broker_cpu_s": round(servers.usage(broker_pid)["cpu_s"] - broker0, 2)}  # fmt: skip


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


@contextlib.contextmanager
def serve(mode: str, db: PrivateMariaDB, keys: dict[str, str], start: tuple[str, int], topic: str, tmp: Path,
          profile: Path | None) -> Iterator[int]:  # fmt: skip
    """The server of ``mode`` running (its pid), with the MQ ``keys``; with ``profile``, a py-spy
    profile of a pycanal server there."""
    kind, broker, flat, transaction = MODES[mode]
    if kind == "pycanal":
        conf = pycanal_conf(tmp / topic, db, start, {**keys, "canal.mq.transaction": str(transaction).lower()},
                            topic, flat)  # fmt: skip
        with (tmp / f"{topic}.log").open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "pycanal.cli", "server", "--conf", str(conf)],
                                    stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        spy = servers.profile_of(proc.pid, profile / f"{mode}.txt") if profile is not None else None
        try:
            yield proc.pid
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
            proc.terminate()
            proc.wait(30)
        return
    from pycanal.testing.canal import PrivateCanal

    if broker == "rabbitmq":
        mq_rabbitmq.check_plugin()
    canal = PrivateCanal.for_mariadb(
        db,
        destinations={"bench": {"filter.regex": f"{db.database}\\.sbtest.*", "master.journal.name": start[0],
                                "master.position": start[1], "canal.mq.topic": topic}},
        canal_properties={**keys, "canal.mq.flatMessage": flat},
        quick_start=False, jvm_args=servers.CANAL_HEAP, timezone="UTC", log_level="WARN",
    )  # fmt: skip
    with canal:
        assert canal.pid is not None
        yield canal.pid


def run(mode: str, db: PrivateMariaDB, brokers: dict[str, Any], start: tuple[str, int], rows: int, tmp: Path,
        timeout: float, profile: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """One run of ``mode``: a fresh topic or queue, the consumer attached to it, then the server
    started; the consumer's figures (:func:`consume`) with the start-up (server start to first
    message) and the server's CPU seconds (its process tree) over the run."""
    broker = MODES[mode][1]
    topic = f"bench-{mode.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    mq = brokers[broker]
    if broker == "kafka":
        mq.create_topic(topic, 1)
        keys = {"canal.serverMode": "kafka", "kafka.bootstrap.servers": mq.bootstrap_servers}
        reader: Callable[[], Any] = functools.partial(KafkaReader, mq, topic)
    else:
        mq_rabbitmq.declare(mq, topic)
        keys = mq_rabbitmq.keys(mq, topic)
        reader = functools.partial(mq_rabbitmq.Reader, mq, topic)
    attached, stop = threading.Event(), threading.Event()
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(consume, reader, mq.pid, topic, rows, timeout, attached, stop)
        try:
            while not attached.wait(0.1):
                if reading.done():
                    reading.result()  # the reader could not attach: its error
            started = time.monotonic()
            with serve(mode, db, keys, start, topic, tmp, profile) as pid:
                res = reading.result()
                res["startup_s"] = round(res.pop("first") - started, 3)
                return {**res, "server_cpu_s": servers.usage(pid)["cpu_s"]}
        finally:
            stop.set()


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
