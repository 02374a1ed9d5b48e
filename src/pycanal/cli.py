"""The ``pycanal`` command line."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .binlog.canonical import Recorder, to_json_line
from .binlog.constants import EventType
from .binlog.decoder import EventDecoder
from .binlog.errors import BinlogError
from .binlog.printer import TextPrinter
from .binlog.reader import read_events

app = typer.Typer(
    help="pycanal: MySQL/MariaDB binlog subscription and consumption, after Alibaba Canal.",
    no_args_is_help=True,
    add_completion=False,
)
binlog_app = typer.Typer(help="Work with binlog files.", no_args_is_help=True)
app.add_typer(binlog_app, name="binlog")


_HEARTBEATS = frozenset({EventType.HEARTBEAT, EventType.HEARTBEAT_V2})


class Format(StrEnum):
    text = "text"
    jsonl = "jsonl"


def _events(files: list[Path], start: int | None, stop: int | None):
    decoder = EventDecoder()
    for n, path in enumerate(files):
        yield from read_events(
            path,
            start_position=start if n == 0 else None,
            stop_position=stop if n == len(files) - 1 else None,
            decoder=decoder,
        )


@binlog_app.command("decode")
def decode(
    files: Annotated[list[Path], typer.Argument(help="Binlog files, decoded in order.")],
    fmt: Annotated[
        Format, typer.Option("--format", help="text (Canal client layout) or jsonl.")
    ] = Format.text,
    start_position: Annotated[
        int | None, typer.Option(help="Start at this event offset of the first file.")
    ] = None,
    stop_position: Annotated[
        int | None, typer.Option(help="Stop before this offset of the last file.")
    ] = None,
) -> None:
    """Decode binlog files into row changes, DDL and transaction markers."""
    recorder = Recorder()
    out = sys.stdout
    try:
        events = _events(files, start_position, stop_position)
        if fmt is Format.jsonl:
            lines = recorder.lines(events)
        else:
            lines = TextPrinter().lines(recorder.records(events), recorder.tables)
        _write_lines(out, lines)
    except BinlogError as exc:
        out.flush()
        typer.echo(f"pycanal: error: {exc}", err=True)
        raise typer.Exit(2) from None
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None


def _write_lines(out, lines) -> None:  # noqa: ANN001
    """Write ``lines`` in chunks (one write per line costs as much as making the line); when the
    input fails midway, what came before the bad event is written first."""
    chunk: list[str] = []
    try:
        for line in lines:
            chunk.append(line)
            if len(chunk) == 1024:
                chunk.append("")
                out.write("\n".join(chunk))
                chunk = []
    finally:
        if chunk:
            chunk.append("")
            out.write("\n".join(chunk))


def _source(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, 3306
    if not port.isdigit():
        raise ValueError(f"bad --source {text!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def _start(text: str) -> tuple[str, int]:
    file, sep, pos = text.rpartition(":")
    if not sep or not file or not pos.isdigit():
        raise ValueError(f"bad --start {text!r}: expected FILE:POS")
    return file, int(pos)


_ROW_TYPES = frozenset({"INSERT", "UPDATE", "DELETE", "GTID", "BEGIN"})


@app.command("dump")
def dump(
    source: Annotated[str, typer.Option("--source", help="The source server, HOST:PORT.")],
    user: Annotated[str, typer.Option("--user", help="Replication account.")] = "",
    password: Annotated[str, typer.Option("--password", help="Its password.")] = "",
    start: Annotated[str | None, typer.Option("--start", help="Start at FILE:POS.")] = None,
    gtid: Annotated[str | None, typer.Option("--gtid", help="Start after this GTID set.")] = None,
    timestamp: Annotated[
        int | None,
        typer.Option("--timestamp", help="Start at the last transaction boundary before this time (ms)."),
    ] = None,
    filter_regex: Annotated[
        str | None, typer.Option("--filter", help="Canal filter regex on schema.table (comma-separated).")
    ] = None,
    black_regex: Annotated[
        str | None, typer.Option("--black-filter", help="Canal black-list regex on schema.table.")
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", help="text (Canal client layout) or jsonl.")
    ] = Format.text,
    stop_at_end: Annotated[
        bool,
        typer.Option("--stop-at-end", help="Exit at the end position SHOW MASTER STATUS reports at start."),
    ] = False,
    history: Annotated[
        Path | None, typer.Option("--history", help="Schema history SQLite file (default: temporary).")
    ] = None,
    server_id: Annotated[
        int | None, typer.Option("--server-id", help="Replica server id (default: random).")
    ] = None,
) -> None:
    """Stream a source's binlog live as row changes, DDL and transaction markers.

    The current end of the binlog is the start unless --start, --gtid or --timestamp says otherwise.
    Column names, signedness and ENUM/SET labels come from the schema history (information_schema
    plus every DDL in the stream), also when the server writes MINIMAL row metadata."""
    import pymysql

    from .mysql.errors import MysqlError
    from .parse.filter import TableFilter
    from .parse.meta import SchemaHistoryError
    from .parse.stream import ReplicaStream, StreamError

    out = sys.stdout
    stream = None
    try:
        if sum(x is not None for x in (start, gtid, timestamp)) > 1:
            raise ValueError("give at most one of --start, --gtid and --timestamp")
        host, port = _source(source)
        flt = TableFilter(filter_regex, black_regex) if filter_regex or black_regex else None
        stream = ReplicaStream(
            host,
            port,
            user,
            password,
            start=_start(start) if start is not None else None,
            gtid=gtid,
            timestamp_ms=timestamp,
            filter=flt,
            stop_at_end=stop_at_end,
            history_path=history,
            server_id=server_id,
        )
        recorder = Recorder()
        events = (e for e in stream.events() if e.type not in _HEARTBEATS)
        records = recorder.records(events)
        if fmt is Format.jsonl:
            for rec in records:
                out.write(to_json_line(rec))
                out.write("\n")
                if rec["type"] not in _ROW_TYPES:
                    out.flush()
        else:
            for line in TextPrinter().lines(records, recorder.tables):
                out.write(line)
                out.write("\n")
                if not line.startswith(" "):
                    out.flush()
        out.flush()
    except (
        BinlogError,
        MysqlError,
        SchemaHistoryError,
        StreamError,
        pymysql.err.MySQLError,
        OSError,
        ValueError,
    ) as exc:
        if isinstance(exc, BrokenPipeError):
            sys.stderr.close()
            raise typer.Exit(0) from None
        out.flush()
        typer.echo(f"pycanal: error: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        out.flush()
        raise typer.Exit(130) from None
    finally:
        if stream is not None:
            stream.close()


@app.command("server")
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
    import logging

    from .config import ConfigError
    from .heap import hold_long_lived
    from .server.launcher import CanalLauncher, LauncherError

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr
    )
    hold_long_lived()  # the store keeps up to its size of events alive
    try:
        CanalLauncher(conf, session_timeout=zk_session_timeout).run()
    except (ConfigError, LauncherError, OSError) as exc:
        typer.echo(f"pycanal: error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command("tail")
def tail(
    address: Annotated[str, typer.Option("--address", help="The pycanal or Canal server, HOST:PORT.")],
    destination: Annotated[str, typer.Option("--destination", help="The destination to subscribe to.")],
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
        int | None, typer.Option("--limit", help="Exit after this many row changes (default: never).")
    ] = None,
) -> None:
    """Print a destination's entries in Canal's example-client layout, acking each batch once
    printed."""
    from .client import CanalClientError, SimpleConnector
    from .client.printer import message_lines
    from .protocol import EntryProtocol_pb2 as pb

    out = sys.stdout
    conn = SimpleConnector(address, destination, user, password)
    rows = 0
    try:
        conn.connect()
        conn.subscribe(filter_regex)
        for message in conn.stream(batch_size=batch_size, timeout=1000):
            entries = message.entries
            memsize = sum(len(r) for r in message.raw_entries)
            for line in message_lines(message.id, entries, memsize):
                out.write(line)
                out.write("\n")
            out.flush()
            for e in entries:
                if e.entryType == pb.ROWDATA:
                    rows += len(pb.RowChange.FromString(e.storeValue).rowDatas)
            if limit is not None and rows >= limit:
                break
    except (CanalClientError, OSError, ValueError) as exc:
        if isinstance(exc, BrokenPipeError):
            raise typer.Exit(0) from None
        typer.echo(f"pycanal: error: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finally:
        conn.disconnect()


@app.command("pipeline")
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
    until SIGTERM or Ctrl-C: ``python -m pycanal.spark.job`` as a command."""
    from .spark.job import DRIVER_JAVA_OPTIONS, run
    from .spark.jvm import archive_options
    from .spark.maintenance import Maintenance

    if not address and not zk_servers:
        typer.echo("pycanal: error: give --address or --zk-servers", err=True)
        raise typer.Exit(2)
    if apply_on not in ("driver", "executors"):
        typer.echo("pycanal: error: --apply-on is driver or executors", err=True)
        raise typer.Exit(2)
    if snapshot_reader not in (None, "connectorx", "pymysql"):
        typer.echo("pycanal: error: --snapshot-reader is connectorx or pymysql", err=True)
        raise typer.Exit(2)
    if snapshot not in ("never", "initial") or (snapshot == "initial" and not source):
        typer.echo(
            "pycanal: error: --snapshot is never or initial; initial needs --source HOST:PORT", err=True
        )
        raise typer.Exit(2)
    archive = None if class_archive == "off" else class_archive
    try:
        archive_options(archive)
    except ValueError as exc:
        typer.echo(f"pycanal: error: --class-archive: {exc}", err=True)
        raise typer.Exit(2) from None
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
    )
    raise typer.Exit(code)


@app.command("snapshot")
def snapshot(
    lake: Annotated[
        Path, typer.Option("--lake", help="The lake of a running pipeline (started with --source).")
    ],
    tables: Annotated[list[str], typer.Argument(help="Tables to snapshot again, as db.table.")],
) -> None:
    """Ask a running pipeline to snapshot tables again while it streams (a table newly added to
    its filter, or one to read afresh): taken at its next micro-batch."""
    from .spark.job import snapshot_requests
    from .spark.snapshot import request_snapshot

    try:
        path = request_snapshot(snapshot_requests(lake), tables)
    except ValueError as exc:
        typer.echo(f"pycanal: error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"requested: {', '.join(tables)} ({path})")


@app.command("lag")
def lag(lake: Annotated[Path, typer.Option("--lake", help="The lake of a pipeline.")]) -> None:
    """Per table: the source's commit time of the last change applied to its current-state table,
    and how long ago that was."""
    import time

    from .spark.apply import table_times

    last = table_times(lake)
    now = time.time()
    for name, at in sorted(last.items(), key=lambda kv: kv[1]):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
        typer.echo(f"{name}\t{stamp}Z\t{now - at:.1f} s")
    if not last:
        typer.echo(f"no applied micro-batch with changes under {lake}", err=True)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
