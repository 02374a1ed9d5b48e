"""Prometheus metrics with Canal's names (``canal.metrics.pull.port``), label ``destination``.

Canal's prometheus module pulls its numbers from the running instances when scraped; so does
:class:`CanalMetricsCollector`: nothing on the hot path but plain counters the parser, sink and
store keep anyway. Canal's counters are exposed under their exact names (``untyped``: the Python
client would append ``_total`` to a counter, which would break Canal's Grafana template).

Per destination:

* ``canal_instance`` (1 while running), ``canal_instance_subscriptions``, ``canal_instance_parser_mode``
  (label ``parallel``), ``canal_instance_store`` (labels ``batchMode``, ``size``);
* parser: ``canal_instance_received_binlog_bytes``, ``canal_instance_transactions``,
  ``canal_instance_publish_blocking_time`` / ``canal_instance_sink_blocking_time`` (ms),
  ``canal_instance_traffic_delay`` (ms from the last event's binlog time, 0 when the source is idle);
* store: ``canal_instance_store_produce_seq`` / ``_consume_seq`` (events put / acknowledged),
  ``_produce_mem`` / ``_consume_mem`` (bytes), ``canal_instance_put_rows`` / ``_get_rows`` /
  ``_ack_rows``, ``canal_instance_put_delay`` / ``_get_delay`` / ``_ack_delay`` (ms from the binlog
  time of the last event put / handed out / acknowledged);
* clients (from the TCP server's per-destination counters, when a server is given):
  ``canal_instance_client_packets`` (label ``packetType``), ``canal_instance_client_bytes``,
  ``canal_instance_client_empty_batches``, ``canal_instance_client_request_error``,
  ``canal_instance_client_request_latency`` (a histogram, seconds);
* beyond Canal: ``pycanal_instance_replication_lag_seconds``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric, UnknownMetricFamily

from pycanal.server.embedded import CanalServerWithEmbedded

__all__ = ["CanalMetricsCollector", "ClientStats", "serve_metrics"]

ClientStats = Callable[[], Mapping[str, Mapping[str, Any]]]
"""Per destination: ``packets`` (packet type -> count), ``bytes``, ``empty_batches``, ``errors``,
``latency_buckets`` (upper bound -> cumulative count, ending with ``+Inf``), ``latency_sum``."""

_D = ["destination"]


def _delay_ms(now_ms: int, at_ms: int) -> int:
    return max(0, now_ms - at_ms) if at_ms else 0


class CanalMetricsCollector:
    """A ``prometheus_client`` collector over an embedded server's instances."""

    def __init__(self, server: CanalServerWithEmbedded, client_stats: ClientStats | None = None) -> None:
        self.server = server
        self.client_stats = client_stats

    def collect(self) -> Iterator[Metric]:
        now_ms = int(time.time() * 1000)
        fams: dict[str, Any] = {}

        def fam(name: str, doc: str, kind: type = UnknownMetricFamily, labels: list[str] = _D) -> Any:
            if name not in fams:
                fams[name] = kind(name, doc, labels=labels)
            return fams[name]

        for dest in self.server.destinations:
            inst = self.server.instance(dest)
            running = inst.is_start
            fam("canal_instance", "instance running (1) or not", GaugeMetricFamily).add_metric(
                [dest], 1 if running else 0
            )
            if not running:
                continue
            meta = inst.meta_manager
            subs = len(meta.list_all_subscribe_info(dest)) if meta.is_start() else 0
            fam("canal_instance_subscriptions", "subscribed clients", GaugeMetricFamily).add_metric(
                [dest], subs
            )
            parser = inst.event_parser
            if parser is not None:
                fam(
                    "canal_instance_parser_mode",
                    "parser mode",
                    GaugeMetricFamily,
                    ["destination", "parallel"],
                ).add_metric([dest, "true" if parser.parallel else "false"], 1)
                fam("canal_instance_received_binlog_bytes", "binlog bytes received").add_metric(
                    [dest], parser.received_bytes
                )
                fam("canal_instance_transactions", "transactions received").add_metric(
                    [dest], parser.transactions
                )
                delay = 0 if parser.caught_up else _delay_ms(now_ms, parser.last_event_time * 1000)
                fam("canal_instance_traffic_delay", "ms behind the source", GaugeMetricFamily).add_metric(
                    [dest], delay
                )
                fam(
                    "pycanal_instance_replication_lag_seconds",
                    "seconds between the source's last event and now (0 when caught up)",
                    GaugeMetricFamily,
                ).add_metric([dest], delay / 1000.0)
            blocking_ms = inst.event_sink.blocking_time * 1000.0
            fam("canal_instance_publish_blocking_time", "ms the parser waited on the sink").add_metric(
                [dest], blocking_ms
            )
            fam("canal_instance_sink_blocking_time", "ms the sink waited on a full store").add_metric(
                [dest], blocking_ms
            )
            store = inst.event_store
            st = store.stats()
            fam(
                "canal_instance_store",
                "store settings",
                GaugeMetricFamily,
                ["destination", "batchMode", "size"],
            ).add_metric([dest, store.batch_mode, str(store.buffer_size)], 1)
            fam("canal_instance_store_produce_seq", "events put").add_metric([dest], st["put_seq"] + 1)
            fam("canal_instance_store_consume_seq", "events acknowledged").add_metric(
                [dest], st["ack_seq"] + 1
            )
            fam("canal_instance_store_produce_mem", "bytes put").add_metric([dest], st["put_mem"])
            fam("canal_instance_store_consume_mem", "bytes acknowledged").add_metric([dest], st["ack_mem"])
            for op in ("put", "get", "ack"):
                fam(f"canal_instance_{op}_rows", f"rows {op}").add_metric([dest], st[f"{op}_rows"])
                fam(
                    f"canal_instance_{op}_delay",
                    f"ms since the last {op} event's binlog time",
                    GaugeMetricFamily,
                ).add_metric([dest], _delay_ms(now_ms, st[f"{op}_time"]))
        if self.client_stats is not None:
            self._client_metrics(fam)
        yield from fams.values()

    def _client_metrics(self, fam: Callable[..., Any]) -> None:
        assert self.client_stats is not None
        for dest, st in sorted(self.client_stats().items()):
            packets = fam(
                "canal_instance_client_packets", "client packets", labels=["destination", "packetType"]
            )
            for kind, count in sorted(st.get("packets", {}).items()):
                packets.add_metric([dest, kind], count)
            fam("canal_instance_client_bytes", "bytes sent to clients").add_metric([dest], st.get("bytes", 0))
            fam("canal_instance_client_empty_batches", "empty GET replies").add_metric(
                [dest], st.get("empty_batches", 0)
            )
            fam("canal_instance_client_request_error", "client requests answered with an error").add_metric(
                [dest], st.get("errors", 0)
            )
            buckets = list(st.get("latency_buckets", {}).items())
            if buckets:
                fam(
                    "canal_instance_client_request_latency",
                    "client request latency (s)",
                    HistogramMetricFamily,
                ).add_metric([dest], [(str(b), c) for b, c in buckets], st.get("latency_sum", 0.0))


def serve_metrics(
    server: CanalServerWithEmbedded,
    port: int,
    host: str = "127.0.0.1",
    client_stats: ClientStats | None = None,
) -> tuple[Any, CollectorRegistry]:
    """Serve ``/metrics`` on ``host:port`` (0: a free port); returns (http server, registry).
    Stop with ``http_server.shutdown()``; the bound port is ``http_server.server_port``."""
    registry = CollectorRegistry()
    registry.register(CanalMetricsCollector(server, client_stats))
    http_server, _thread = start_http_server(port, addr=host, registry=registry)
    return http_server, registry
