"""``pycanal pipeline`` (a destination streamed into a lake by Spark), ``pycanal snapshot`` (a
running pipeline asked to read tables again) and ``pycanal lag`` (how far behind each table is).
Every option is checked before Spark's JVM starts or the lake is made."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated

import typer

from . import checks
from .checks import CliError

__all__ = ["lag", "pipeline", "snapshot"]

# Spark's master URLs (``SparkContext``'s forms); '' leaves the master to spark-submit.
_MASTER = re.compile(
    r"^(|local|local\[(\*|\d+)(,\d+)?\]|local-cluster\[\d+,\d+,\d+\]|spark://[^/\s]+:\d+(,[^/\s]+:\d+)*"
    r"|yarn|k8s://\S+|mesos://\S+)$"
)
# A processing-time trigger as Spark reads it: "1 second", "500 milliseconds", "interval 2 minutes".
_TRIGGER = re.compile(
    r"^\s*(interval\s+)?\d+(\.\d+)?\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)\s*$",
    re.I,
)


def _zk_servers(text: str) -> None:
    """ZooKeeper's connect string: ``HOST:PORT[,HOST:PORT...][/chroot]``."""
    for one in text.partition("/")[0].split(","):
        host, _, port = one.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CliError(f"--zk-servers {text!r}: expected HOST:PORT[,HOST:PORT...][/chroot]")


def pipeline(
    lake: Annotated[Path, typer.Option("--lake", help="The lake: change log, Delta tables, checkpoint.")],
    address: Annotated[str, typer.Option("--address", help="The pycanal or Canal server, HOST:PORT.")] = "",
    zk_servers: Annotated[str, typer.Option("--zk-servers", help="ZooKeeper (cluster discovery).")] = "",
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
            "--deletion-vectors",
            help="Changes to big table files as Delta deletion vectors, not rewrites (readers: Spark's Delta, "
            "delta-rs' scan/QueryBuilder, not its to_pyarrow_table).",
        ),
    ] = False,
    snapshot: Annotated[
        str, typer.Option("--snapshot", help="initial: the tables' existing rows first; never.")
    ] = "never",
    source: Annotated[str, typer.Option("--source", help="The MySQL/MariaDB to snapshot, HOST:PORT.")] = "",
    source_user: Annotated[
        str, typer.Option("--source-user", help="Its user (SELECT, REPLICATION CLIENT).")
    ] = "",
    source_password: Annotated[str, typer.Option("--source-password", help="Its password.")] = "",
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
    """Stream a destination into a lake (change log + current-state Delta tables) exactly once,
    until SIGTERM or Ctrl-C."""
    if bool(address) == bool(zk_servers):
        raise CliError("give one of --address HOST:PORT and --zk-servers HOST:PORT[,...]")
    if address:
        checks.address("--address", address)
    if zk_servers:
        _zk_servers(zk_servers)
    if not destination:
        raise CliError("--destination '': give the destination's name")
    checks.count("--client-id", client_id, 1)
    if client_id >= 2**15:
        raise CliError(f"--client-id {client_id}: must be below 32768 (a Java short in Canal)")
    checks.regex("--filter", filter_regex)
    if not _MASTER.match(master):
        raise CliError(
            f"--master {master!r}: expected a Spark master URL (local[*], local[N], spark://HOST:PORT, yarn, "
            "k8s://..., or '' under spark-submit)"
        )
    if not _TRIGGER.match(trigger):
        raise CliError(
            f"--trigger {trigger!r}: expected an interval such as '1 second' or '500 milliseconds'"
        )
    checks.count("--apply-threads", apply_threads, 1)
    checks.choice("--apply-on", apply_on, ("driver", "executors"))
    checks.fraction("--apply-share", apply_share)
    checks.count("--cache-mb", cache_mb, 0)
    if not progress >= 0:
        raise CliError(f"--progress {progress!r}: must be 0 (none) or more seconds")
    if not stall_timeout >= 0:
        raise CliError(f"--stall-timeout {stall_timeout!r}: must be 0 (never) or more seconds")
    checks.choice("--snapshot", snapshot, ("never", "initial"))
    if snapshot == "initial" and not source:
        raise CliError("--snapshot initial needs --source HOST:PORT (the MySQL/MariaDB to read)")
    if source:
        checks.address("--source", source)
        if not filter_regex:
            raise CliError(
                "--source needs --filter: the tables a snapshot may read (a client cannot see the server's filter)"
            )
    checks.count("--snapshot-chunk-rows", snapshot_chunk_rows, 1)
    checks.count("--snapshot-parallelism", snapshot_parallelism, 1)
    checks.choice("--snapshot-reader", snapshot_reader, ("connectorx", "pymysql"))
    checks.pair_range("--snapshot-server-ids", snapshot_server_ids)
    archive = None if class_archive == "off" else class_archive
    from pycanal.spark.session import archive_options

    try:
        archive_options(archive)
    except ValueError as exc:
        raise CliError(f"--class-archive {class_archive!r}: {exc}") from None
    lake = checks.new_lake("--lake", lake)  # last: nothing made when another option is wrong

    from pycanal.spark.job import run
    from pycanal.spark.maintenance import Maintenance
    from pycanal.spark.session import DRIVER_JAVA_OPTIONS

    code = run(
        lake,
        master=master or None,
        java_options=DRIVER_JAVA_OPTIONS if driver_java_options is None else driver_java_options,
        class_archive=archive,
        progress_seconds=progress,
        address=address or None,
        zk_servers=zk_servers or None,
        destination=destination,
        client_id=client_id,
        filter=filter_regex,
        trigger=trigger,
        apply_threads=apply_threads,
        apply_share=apply_share,
        apply_on=apply_on,
        cache_mb=cache_mb,
        maintenance=Maintenance(deletion_vectors=deletion_vectors),
        snapshot=snapshot,
        source=source,
        source_user=source_user,
        source_password=source_password,
        snapshot_chunk_rows=snapshot_chunk_rows,
        snapshot_parallelism=snapshot_parallelism,
        snapshot_reader=snapshot_reader,
        snapshot_server_ids=snapshot_server_ids,
        stall_timeout=stall_timeout,
    )
    raise typer.Exit(code)


def snapshot(
    lake: Annotated[
        Path, typer.Option("--lake", help="The lake of a running pipeline (started with --source).")
    ],
    tables: Annotated[list[str], typer.Argument(help="Tables to snapshot again, as db.table.")],
) -> None:
    """Ask a running pipeline to snapshot tables again while it streams (a table newly added to
    its filter, or one to read afresh): taken at its next micro-batch."""
    from pycanal.spark.job import snapshot_requests
    from pycanal.spark.snapshot import request_snapshot

    root = checks.lake_dir("--lake", lake)
    requests = snapshot_requests(root)
    if not requests.is_dir():
        raise CliError(
            f"--lake {str(lake)!r}: its pipeline takes no snapshot requests (start it with --source and --filter)"
        )
    try:
        path = request_snapshot(requests, tables)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    typer.echo(f"requested: {', '.join(tables)} ({path})")


def lag(lake: Annotated[Path, typer.Option("--lake", help="The lake of a pipeline.")]) -> None:
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
