"""The Prometheus endpoint (Canal's metric names, label ``destination``) over a live instance."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pycanal.instance import CanalInstance
from pycanal.meta import ClientIdentity
from pycanal.protocol.position import EntryPosition
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.metrics import serve_metrics
from pycanal.testing import PrivateMariaDB

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=48) as server:
        yield server


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_follow_the_stream(db: PrivateMariaDB) -> None:
    db.execute("CREATE TABLE pycanal.mx (id INT PRIMARY KEY, v VARCHAR(20))")
    file, pos = db.current_binlog()
    for t in range(5):
        db.execute(f"INSERT INTO pycanal.mx VALUES {', '.join(f'({t * 10 + i}, {i!r})' for i in range(10))}")
    server = CanalServerWithEmbedded()
    server.add_instance(
        CanalInstance(
            "mx",
            parser={
                "master_address": (db.host, db.port),
                "username": db.repl_user,
                "password": db.repl_password,
                "master_position": EntryPosition(file, pos),
                "heartbeat_period": 0.5,
            },
            store={"buffer_size": 1024, "batch_mode": "ITEMSIZE"},
            filter=r"pycanal\.mx",
        )
    )
    stats = {"mx": {"packets": {"get": 3}, "bytes": 100, "empty_batches": 1, "errors": 0}}
    stats["mx"]["latency_buckets"] = {0.01: 2, float("inf"): 3}
    stats["mx"]["latency_sum"] = 0.5
    http, _ = serve_metrics(server, 0, client_stats=lambda: stats)
    port = http.server_port
    client = ClientIdentity("mx", 1001, "")
    try:
        server.subscribe(client)
        rows = 0
        deadline = time.monotonic() + 30
        while rows < 50:
            assert time.monotonic() < deadline
            msg = server.get_without_ack(client, 4, timeout=0.2)
            if msg.id != -1:
                server.ack(client, msg.id)
                rows = scrape(port)[("canal_instance_ack_rows", (("destination", "mx"),))]
        m = scrape(port)
        d = (("destination", "mx"),)
        assert m[("canal_instance", d)] == 1 and m[("canal_instance_subscriptions", d)] == 1
        assert m[("canal_instance_put_rows", d)] == m[("canal_instance_ack_rows", d)] == 50
        assert m[("canal_instance_transactions", d)] == 5
        assert m[("canal_instance_received_binlog_bytes", d)] > 50 * 10
        # produce = consume: every event put was acknowledged, with its bytes
        assert m[("canal_instance_store_produce_seq", d)] == m[("canal_instance_store_consume_seq", d)] > 10
        assert m[("canal_instance_store_produce_mem", d)] == m[("canal_instance_store_consume_mem", d)] > 0
        assert m[("canal_instance_put_delay", d)] > 0  # binlog time of the last put is in the past
        assert m[("canal_instance_client_packets", (("destination", "mx"), ("packetType", "get")))] == 3
        assert m[("canal_instance_client_request_latency_count", d)] == 3
        # idle: the source heartbeats, the lag is 0
        deadline = time.monotonic() + 10
        while scrape(port)[("pycanal_instance_replication_lag_seconds", d)] != 0:
            assert time.monotonic() < deadline, "the lag never went back to 0 while idle"
            time.sleep(0.2)
        server.stop("mx")
        assert scrape(port)[("canal_instance", d)] == 0
    finally:
        http.shutdown()
        server.stop()
