"""Kafka client benchmark: which Python client sends Canal's records fastest (records/s, MB/s, CPU).

pycanal's MQ mode needs one Kafka producer; the two maintained candidates are confluent-kafka
(librdkafka, C) and kafka-python (pure Python). Each sends ``--records`` values of ``--size`` bytes
(random bytes, so no codec gains) to a fresh one-partition topic of a private broker
(``pycanal.testing.kafka.PrivateKafka``), with the producer settings Canal ships (``kafka.*`` in
canal.properties: acks=all, batch.size=16384, linger.ms=1, no compression, one request in flight),
and the time runs from the first send until every delivery is acknowledged, as the MQ starter waits
before it acks a batch. Every delivery report is checked (count and no error), and the topic's end
offset must equal the records sent. The clients alternate for ``--repeat`` rounds (default 3) and
the median counts. One JSON object on stdout; progress on stderr. Run from the project root:

    .venv/bin/python bench/kafka_clients.py [--records 200000] [--size 500] [--repeat 3]

kafka-python is not a pycanal dependency: ``pip install kafka-python`` for this comparison.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pycanal.testing.kafka import KAFKA_VERSION, PrivateKafka  # noqa: E402

# canal.properties' kafka.* defaults (Canal 1.1.8), in each client's spelling.
CANAL_SETTINGS = {
    "acks": "all",
    "batch.size": 16384,
    "linger.ms": 1,
    "compression.type": "none",
    "max.in.flight.requests.per.connection": 1,
}

_log = logging.getLogger("bench.kafka_clients")


def _confluent(bootstrap: str, topic: str, values: list[bytes]) -> int:
    from confluent_kafka import Producer

    errors = 0
    delivered = 0

    def report(err: object, _msg: object) -> None:
        nonlocal errors, delivered
        delivered += 1
        if err is not None:
            errors += 1

    producer = Producer(
        {"bootstrap.servers": bootstrap, "logger": _log, "enable.idempotence": False, **CANAL_SETTINGS}
    )
    for value in values:
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=report)
                break
            except BufferError:  # librdkafka's queue is full: serve delivery reports first
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0 or delivered != len(values) or errors:
        raise RuntimeError(f"confluent-kafka: {delivered} delivered, {errors} failed of {len(values)}")
    return delivered


def _kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        batch_size=CANAL_SETTINGS["batch.size"],
        linger_ms=CANAL_SETTINGS["linger.ms"],
        compression_type=None,
        max_in_flight_requests_per_connection=1,
        enable_idempotence=False,
    )
    futures = [producer.send(topic, value, partition=0) for value in values]
    producer.flush(120)
    failed = sum(1 for f in futures if not f.succeeded())
    producer.close()
    if failed:
        raise RuntimeError(f"kafka-python: {failed} of {len(values)} failed")
    return len(futures)


CLIENTS: dict[str, Callable[[str, str, list[bytes]], int]] = {
    "confluent-kafka": _confluent,
    "kafka-python": _kafka_python,
}


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    import confluent_kafka

    return {
        "confluent-kafka": version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka-python": version("kafka-python"),
        "kafka-broker": KAFKA_VERSION,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    values = [os.urandom(args.size) for _ in range(args.records)]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in CLIENTS}
    with PrivateKafka(heap_mb=512) as broker:
        for round_ in range(args.repeat):
            for name, send in CLIENTS.items():
                topic = f"bench-{name}-{round_}"
                broker.create_topic(topic, partitions=1)
                cpu0, t0 = time.process_time(), time.perf_counter()
                sent = send(broker.bootstrap_servers, topic, values)
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
                end = len(broker.records(topic))
                if end != sent:
                    raise RuntimeError(f"{name}: topic {topic} holds {end} records, {sent} sent")
                run = {
                    "seconds": round(wall, 3),
                    "cpu_seconds": round(cpu, 3),
                    "records_per_s": round(sent / wall),
                    "mb_per_s": round(sent * args.size / wall / 1e6, 2),
                }
                runs[name].append(run)
                print(f"{name} round {round_ + 1}: {run}", file=sys.stderr)
    medians = {name: statistics.median(r["records_per_s"] for r in rs) for name, rs in runs.items()}
    print(
        json.dumps(
            {
                "records": args.records,
                "record_bytes": args.size,
                "settings": CANAL_SETTINGS,
                "median_records_per_s": medians,
                "ratio_confluent_over_kafka_python": round(
                    medians["confluent-kafka"] / medians["kafka-python"], 2
                ),
                "runs": runs,
                "versions": _versions(),
                "cores": os.cpu_count(),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
