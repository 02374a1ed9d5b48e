"""``pycanal server`` (the instances of a Canal conf dir behind Canal's TCP protocol) and
``pycanal tail`` (a destination's entries from a pycanal or Canal server, printed)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from . import checks
from .checks import CliError

__all__ = ["server", "tail"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def server(
    conf: Annotated[Path, typer.Option("--conf", help="Canal conf dir (canal.properties + <dest>/).")],
    log_level: Annotated[str, typer.Option("--log-level", help="Logging level.")] = "INFO",
    zk_session_timeout: Annotated[
        float,
        typer.Option("--zk-session-timeout", help="ZooKeeper session timeout (s) with canal.zkServers."),
    ] = 10.0,
) -> None:
    """Run a pycanal server: the instances of a Canal conf dir, Canal's TCP protocol on canal.port
    and the Prometheus metrics on canal.metrics.pull.port, until SIGTERM or Ctrl-C."""
    from pycanal.config import ConfigError
    from pycanal.deployer.launcher import CanalLauncher, LauncherError
    from pycanal.heap import hold_long_lived

    if not conf.is_dir():
        what = "no such directory" if not conf.exists() else "not a directory"
        raise CliError(f"--conf {str(conf)!r}: {what}")
    if not (conf / "canal.properties").is_file():
        raise CliError(f"--conf {str(conf)!r}: no canal.properties in it")
    checks.choice("--log-level", log_level.upper(), _LEVELS)
    if not zk_session_timeout > 0:
        raise CliError(f"--zk-session-timeout {zk_session_timeout!r}: must be above 0")
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr
    )
    hold_long_lived()  # the store keeps up to its size of events alive
    try:
        CanalLauncher(conf, session_timeout=zk_session_timeout).run()
    except (ConfigError, LauncherError) as exc:
        raise CliError(str(exc), code=1) from None


def tail(
    address: Annotated[
        str | None, typer.Option("--address", help="The pycanal or Canal server, HOST:PORT.")
    ] = None,
    destination: Annotated[
        str | None, typer.Option("--destination", help="The destination to subscribe to.")
    ] = None,
    filter_regex: Annotated[
        str, typer.Option("--filter", help="Canal filter regex on schema.table (replaces the instance's).")
    ] = "",
    user: Annotated[str, typer.Option("--user", help="canal.user of the server.")] = "",
    password: Annotated[str, typer.Option("--password", help="Its password.")] = "",
    client_id: Annotated[
        int, typer.Option("--client-id", help="The client id (Canal's default 1001).")
    ] = 1001,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Entries per get.")] = 1000,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", help="Exit after the batch that brings this many row changes (default: never)."
        ),
    ] = None,
    kafka: Annotated[
        str | None,
        typer.Option("--kafka", help="Read Canal's Kafka topic instead: the brokers, HOST:PORT[,...]."),
    ] = None,
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", metavar="<str>", help="With --kafka: a topic (repeatable; ^regex too)."),
    ] = None,
    group: Annotated[
        str, typer.Option("--group", help="With --kafka: the consumer group whose offsets it commits.")
    ] = "pycanal-tail",
    kafka_config: Annotated[
        list[str] | None,
        typer.Option(
            "--kafka-config",
            metavar="KEY=VALUE",
            help="With --kafka: a client setting (repeatable), librdkafka's or a kafka.* key of "
            "canal.properties without the prefix, e.g. security.protocol=SASL_PLAINTEXT, "
            'sasl.mechanism=PLAIN, sasl.jaas.config=\'...PlainLoginModule required username="u" '
            'password="p";\'.',
        ),
    ] = None,
) -> None:
    """Print a destination's entries in Canal's example-client layout, acking each batch once
    printed; with --kafka, the records of Canal's topics (protobuf packets in that layout, flat
    messages as their JSON), committing the offsets once printed."""
    from pycanal.client import CanalClientError, SimpleConnector
    from pycanal.client.printer import message_lines
    from pycanal.protocol import EntryProtocol_pb2 as pb

    if kafka is not None:
        _tail_kafka(kafka, topic or [], group, limit, kafka_config or [])
        return
    if kafka_config:
        raise CliError("--kafka-config: only with --kafka")
    if address is None:
        raise CliError("--address: give the server's HOST:PORT (or --kafka HOST:PORT --topic T)")
    if destination is None:
        raise CliError("--destination: give the destination's name")
    host, port = checks.address("--address", address)
    if not destination:
        raise CliError("--destination '': give the destination's name")
    checks.regex("--filter", filter_regex)
    checks.count("--client-id", client_id, 1)
    checks.count("--batch-size", batch_size, 1)
    checks.count("--limit", limit, 1)
    out = sys.stdout
    conn = SimpleConnector((host, port), destination, user, password, client_id=client_id)
    rows = 0
    try:
        conn.connect()
        conn.subscribe(filter_regex)
        while limit is None or rows < limit:
            message = conn.get_without_ack(batch_size, 1000)
            if message.id == -1:
                continue
            entries = message.entries
            for line in message_lines(message.id, entries):
                out.write(line)
                out.write("\n")
            out.flush()
            conn.ack(message.id)
            for e in entries:
                if e.entryType == pb.ROWDATA:
                    rows += len(pb.RowChange.FromString(e.storeValue).rowDatas)
    except BrokenPipeError:
        raise typer.Exit(0) from None
    except (CanalClientError, OSError) as exc:
        raise CliError(f"{host}:{port} destination {destination}: {exc}", code=1) from None
    finally:
        conn.disconnect()


def _client_settings(items: list[str]) -> dict[str, str]:
    """``--kafka-config KEY=VALUE`` items (a ``kafka.`` prefix dropped, as canal.properties writes
    them), with a Java client's PLAIN/SCRAM ``sasl.jaas.config`` read as the producer reads it. A
    value is never shown: it may be a password."""
    from pycanal.mq.kafka_config import ProducerConfigError, sasl_config

    settings = checks.kafka_settings("--kafka-config", items)
    try:
        return sasl_config(settings, prefix="--kafka-config ")
    except ProducerConfigError as exc:
        raise CliError(str(exc)) from None


def _masked(text: str, settings: dict[str, str]) -> str:
    """``text`` without the values of the secret settings (passwords)."""
    for key, value in settings.items():
        if value and re.search(r"password|secret", key, re.I):
            text = text.replace(value, "***")
    return text


def _tail_kafka(brokers: str, topics: list[str], group: str, limit: int | None, config: list[str]) -> None:
    """``pycanal tail --kafka``: Canal's topics printed as ``tail`` prints a destination."""
    from confluent_kafka import KafkaException

    from pycanal.client.printer import message_lines
    from pycanal.mq.consumer import KafkaConsumer

    for part in brokers.split(","):
        checks.address("--kafka", part)
    if not topics or not all(topics):
        raise CliError("--topic: give the topic to read (with --kafka)")
    checks.count("--limit", limit, 1)
    settings = _client_settings(config)
    out = sys.stdout
    rows = 0
    try:
        with KafkaConsumer(brokers, topics, group_id=group, config=settings) as consumer:
            for message in consumer.messages():
                if message.flat is not None:
                    out.write(message.flat.to_json().decode("utf-8", "replace"))
                    out.write("\n")
                else:
                    for line in message_lines(message.batch_id, message.entries):
                        out.write(line)
                        out.write("\n")
                out.flush()
                consumer.commit()
                rows += message.row_count
                if limit is not None and rows >= limit:
                    return
    except BrokenPipeError:
        raise typer.Exit(0) from None
    except (KafkaException, ValueError) as exc:
        raise CliError(
            f"--kafka {brokers} --topic {','.join(topics)}: {_masked(str(exc), settings)}", code=1
        ) from None
