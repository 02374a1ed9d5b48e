"""``pycanal pipeline`` (a destination streamed into a lake by Spark), ``pycanal snapshot`` (a
running pipeline asked to read tables again) and ``pycanal lag`` (how far behind each table is).
Every option is checked before Spark's JVM starts or the lake is made."""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

import typer

from . import checks
from .checks import CliError

__all__ = ["lag", "pipeline", "snapshot"]


def _flag(name: str) -> str:
    """The flag of a ``format("canal")`` option: ``snapshotServerIds`` -> ``--snapshot-server-ids``."""
    return "--" + re.sub(r"(?<=[a-z])(?=[A-Z])", "-", name).lower()


def pipeline(
    lake: Annotated[
        str,
        typer.Option(
            "--lake",
            help="The lake: change log, Delta tables, checkpoint. A path, or s3://bucket/prefix "
            "(the AWS_* settings: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).",
        ),
    ],
    address: Annotated[str, typer.Option("--address", help="The pycanal or Canal server, HOST:PORT.")] = "",
    zk_servers: Annotated[str, typer.Option("--zk-servers", help="ZooKeeper (cluster discovery).")] = "",
    kafka: Annotated[
        str,
        typer.Option("--kafka", help="Kafka brokers, HOST:PORT[,...]: Canal's topics instead of a server."),
    ] = "",
    topic: Annotated[str, typer.Option("--topic", help="With --kafka: the topics, NAME[,NAME...].")] = "",
    topic_pattern: Annotated[
        str, typer.Option("--topic-pattern", help="With --kafka: the topics, a regex.")
    ] = "",
    kafka_config: Annotated[
        list[str] | None,
        typer.Option(
            "--kafka-config",
            metavar="KEY=VALUE",
            help="With --kafka: a setting of Spark's Kafka consumer (repeatable; the Java client's names, "
            "a kafka.* key of canal.properties without the prefix), e.g. security.protocol=SASL_PLAINTEXT, "
            'sasl.mechanism=SCRAM-SHA-256, sasl.jaas.config=\'...ScramLoginModule required username="u" '
            'password="p";\'.',
        ),
    ] = None,
    destination: Annotated[str, typer.Option("--destination", help="The destination.")] = "example",
    client_id: Annotated[int, typer.Option("--client-id", help="The client id.")] = 1001,
    filter_regex: Annotated[str, typer.Option("--filter", help="Canal filter regex on schema.table.")] = "",
    master: Annotated[
        str, typer.Option("--master", help="Spark master URL; '' under spark-submit (its --master).")
    ] = "local[*]",
    driver_java_options: Annotated[
        str | None,
        typer.Option(
            "--driver-java-options", help="The driver JVM's flags (local runs; default: measured ones)."
        ),
    ] = None,
    class_archive: Annotated[
        str,
        typer.Option(
            "--class-archive",
            help="The driver JVM's class archive: auto (this machine's: python -m pycanal.spark.jvm), off, or a path.",
        ),
    ] = "auto",
    trigger: Annotated[str, typer.Option("--trigger", help="Micro-batch trigger interval.")] = "1 second",
    apply_threads: Annotated[int, typer.Option("--apply-threads", help="Tables written at once.")] = 2,
    apply_on: Annotated[
        str, typer.Option("--apply-on", help="Where the tables are written: driver or executors.")
    ] = "driver",
    apply_share: Annotated[
        float,
        typer.Option("--apply-share", help="The share of the time the tables' apply may take (1: no pause)."),
    ] = 1.0,
    cache_mb: Annotated[
        int, typer.Option("--cache-mb", help="Rows of recently written table files kept in memory (MB).")
    ] = 256,
    progress: Annotated[
        float, typer.Option("--progress", help="Seconds between progress lines (0: none).")
    ] = 10.0,
    stall_timeout: Annotated[
        float,
        typer.Option(
            "--stall-timeout",
            help="Seconds the source may hold entries without a micro-batch before it fetches them again, "
            "then fails the query (0: never).",
        ),
    ] = 120.0,
    deletion_vectors: Annotated[
        bool,
        typer.Option(
            "--deletion-vectors/--no-deletion-vectors",
            help="Changes to big table files as Delta deletion vectors, not rewrites (readers: Spark's Delta, "
            "delta-rs' QueryBuilder, not its to_pyarrow_table/to_pandas); --no-deletion-vectors: copy-on-write.",
        ),
    ] = True,
    snapshot: Annotated[
        str, typer.Option("--snapshot", help="initial: the tables' existing rows first; never.")
    ] = "never",
    source: Annotated[str, typer.Option("--source", help="The MySQL/MariaDB to snapshot, HOST:PORT.")] = "",
    source_user: Annotated[
        str, typer.Option("--source-user", help="Its user (SELECT, REPLICATION CLIENT).")
    ] = "",
    source_password: Annotated[str, typer.Option("--source-password", help="Its password.")] = "",
    source_ssl_mode: Annotated[
        str | None,
        typer.Option(
            "--source-ssl-mode",
            help="TLS to it: DISABLED (default), PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY.",
        ),
    ] = None,
    source_ssl_ca: Annotated[
        str | None,
        typer.Option(
            "--source-ssl-ca",
            help="A PEM file of the CAs VERIFY_CA/VERIFY_IDENTITY check (default: the system's).",
        ),
    ] = None,
    snapshot_chunk_rows: Annotated[
        int | None, typer.Option("--snapshot-chunk-rows", help="Rows per snapshot chunk (50000).")
    ] = None,
    snapshot_parallelism: Annotated[
        int | None, typer.Option("--snapshot-parallelism", help="Snapshot chunks per micro-batch (4).")
    ] = None,
    snapshot_reader: Annotated[
        str | None, typer.Option("--snapshot-reader", help="The chunk reader: connectorx or pymysql.")
    ] = None,
    snapshot_server_ids: Annotated[
        str | None,
        typer.Option(
            "--snapshot-server-ids",
            help="Replica ids of the chunks' binlog window reads, LOW-HIGH (5400-6399).",
        ),
    ] = None,
) -> None:
    """Stream a destination (or Canal's Kafka topics) into a lake (change log + current-state Delta
    tables) exactly once, until SIGTERM or Ctrl-C."""
    from pycanal.spark.canal_options import OptionError, check_trigger, source_options
    from pycanal.spark.session import (
        DRIVER_JAVA_OPTIONS,
        KAFKA_DRIVER_JAVA_OPTIONS,
        archive_options,
        check_java_options,
        check_master,
    )

    stream: dict[str, Any] = {
        "address": address or None, "zk_servers": zk_servers or None, "destination": destination,
        "client_id": client_id, "filter": filter_regex, "stall_timeout": stall_timeout, "snapshot": snapshot,
        "source": source, "source_user": source_user, "source_password": source_password,
        "source_ssl_mode": source_ssl_mode, "source_ssl_ca": source_ssl_ca,
        "snapshot_chunk_rows": snapshot_chunk_rows, "snapshot_parallelism": snapshot_parallelism,
        "snapshot_reader": snapshot_reader, "snapshot_server_ids": snapshot_server_ids, "kafka": kafka,
        "topic": topic, "topic_pattern": topic_pattern,
        "kafka_config": checks.kafka_settings("--kafka-config", kafka_config or []),
    }  # fmt: skip
    checks.lake_uri("--lake", lake)  # its form only: the store is tried last
    try:
        source_options(lake, **stream)  # the stream's options, as the query checks them
    except OptionError as exc:
        raise CliError(exc.text(_flag)) from None
    default_java = KAFKA_DRIVER_JAVA_OPTIONS if kafka else DRIVER_JAVA_OPTIONS
    java_options = default_java if driver_java_options is None else driver_java_options
    archive = None if class_archive == "off" else class_archive
    for option, value, check in (
        ("--master", master, check_master),
        ("--driver-java-options", java_options, check_java_options),
        ("--trigger", trigger, check_trigger),
        ("--class-archive", class_archive, lambda _: archive_options(archive)),
    ):
        try:
            check(value)
        except ValueError as exc:
            raise CliError(f"{option} {value!r}: {exc}") from None
    checks.count("--apply-threads", apply_threads, 1)
    checks.choice("--apply-on", apply_on, ("driver", "executors"))
    checks.fraction("--apply-share", apply_share)
    checks.count("--cache-mb", cache_mb, 0)
    if not progress >= 0:
        raise CliError(f"--progress {progress!r}: must be 0 (none) or more seconds")
    lake = checks.new_lake("--lake", lake)  # last: nothing made when another option is wrong
    from pycanal.spark.job import run  # Spark, pandas and Delta: ~1 s of imports once the options hold
    from pycanal.spark.maintenance import Maintenance

    code = run(
        lake,
        master=master or None,
        java_options=java_options,
        class_archive=archive,
        progress_seconds=progress,
        trigger=trigger,
        apply_threads=apply_threads,
        apply_share=apply_share,
        apply_on=apply_on,
        cache_mb=cache_mb,
        maintenance=Maintenance(deletion_vectors=deletion_vectors),
        **stream,
    )
    raise typer.Exit(code)


def snapshot(
    lake: Annotated[
        str, typer.Option("--lake", help="The lake of a running pipeline (started with --source).")
    ],
    tables: Annotated[list[str], typer.Argument(help="Tables to snapshot again, as db.table.")],
) -> None:
    """Ask a running pipeline to snapshot tables again while it streams (a table newly added to
    its filter, or one to read afresh): taken at its next micro-batch."""
    from pycanal.spark.canal_options import SIGNALS_MARK, snapshot_requests
    from pycanal.spark.snapshot import request_snapshot

    root = checks.lake_dir("--lake", lake)
    requests = snapshot_requests(root)
    if not (requests / SIGNALS_MARK).exists():
        raise CliError(
            f"--lake {str(lake)!r}: its pipeline takes no snapshot requests (start it with --source and --filter)"
        )
    try:
        path = request_snapshot(requests, tables)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    typer.echo(f"requested: {', '.join(tables)} ({path})")


def lag(lake: Annotated[str, typer.Option("--lake", help="The lake of a pipeline.")]) -> None:
    """Per table: the source's commit time of the last change applied to its current-state table,
    and how long ago that was."""
    from pycanal.spark.apply import table_times

    root = checks.lake_dir("--lake", lake)
    last = table_times(root)
    now = time.time()
    for name, at in sorted(last.items(), key=lambda kv: kv[1]):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
        typer.echo(f"{name}\t{stamp}Z\t{now - at:.1f} s")
    if not last:
        typer.echo(f"no applied micro-batch with changes under {lake} yet", err=True)
