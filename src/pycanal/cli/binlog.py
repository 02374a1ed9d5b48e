"""``pycanal binlog decode`` (binlog files) and ``pycanal dump`` (a live source): row changes,
DDL and transaction markers as Canal's example client prints the entries a server serves
(``text``), or as one JSON object per change (``jsonl``)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, TextIO

import typer

from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType
from pycanal.binlog.decoder import EventDecoder
from pycanal.binlog.errors import BinlogError
from pycanal.binlog.reader import read_events
from pycanal.parse.canonical import Recorder, to_json_line

from . import checks
from .checks import CliError

if TYPE_CHECKING:
    from pycanal.binlog.parallel import PartEvents

__all__ = ["Format", "decode", "dump"]

_HEARTBEATS = frozenset({EventType.HEARTBEAT, EventType.HEARTBEAT_V2})
# jsonl of a file this large is decoded in parts by a process per core (by default): below it the
# pool's start costs more than it saves. A part is at most _PART_BYTES of the file.
_PARALLEL_BYTES = 4 << 20
_PART_BYTES = 8 << 20
_CHUNK_CHARS = 1 << 18


class Format(StrEnum):
    text = "text"
    jsonl = "jsonl"


def _text_batches(events: Iterable[ev.Event]) -> Iterator[list[str]]:
    """The text layout's lines, one transaction (one batch of Canal's example client) at a time:
    the entries pycanal's server builds for these events (``RawEntryConverter``)."""
    from pycanal.client.printer import message_lines, transaction_batches
    from pycanal.parse.rawentry import RawEntryConverter
    from pycanal.protocol import EntryProtocol_pb2 as pb

    convert = RawEntryConverter()
    entries = (pb.Entry.FromString(raw) for e in events for raw in convert.convert(e))
    for batch_id, batch in enumerate(transaction_batches(entries), 1):
        yield list(message_lines(batch_id, batch))


def _events(files: list[Path], start: int | None, stop: int | None) -> Iterator[ev.Event]:
    decoder = EventDecoder()
    for n, path in enumerate(files):
        yield from read_events(
            path,
            start_position=start if n == 0 else None,
            stop_position=stop if n == len(files) - 1 else None,
            decoder=decoder,
        )


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
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="With jsonl: processes decoding parts of each file (0: one per core once a file "
            "is 4 MiB or more; 1: this process only).",
        ),
    ] = 0,
) -> None:
    """Decode binlog files into row changes, DDL and transaction markers."""
    for path in files:
        checks.given_file("binlog file", path)
    checks.count("--start-position", start_position, 4)
    checks.count("--stop-position", stop_position, 5)
    checks.count("--workers", workers, 0)
    if start_position is not None and stop_position is not None and stop_position <= start_position:
        raise CliError(
            f"--stop-position {stop_position} is not after --start-position {start_position}: "
            "the range selects no event"
        )
    ranged = start_position is not None or stop_position is not None
    if workers > 1 and (fmt is not Format.jsonl or ranged):
        raise CliError(
            f"--workers {workers}: only --format jsonl of whole files is decoded in parts (text numbers "
            "its batches through the files; a position range is read in one process)"
        )
    if workers == 0:
        big = fmt is Format.jsonl and not ranged and any(p.stat().st_size >= _PARALLEL_BYTES for p in files)
        workers = (os.cpu_count() or 1) if big else 1
    out = sys.stdout
    events = _events(files, start_position, stop_position)
    try:
        if fmt is Format.jsonl and workers > 1:
            written = sum(_write_parts(out, path, workers) for path in files)
        elif fmt is Format.jsonl:
            written = _write(out, Recorder().lines(events))
        else:
            written = _write(out, (line for batch in _text_batches(events) for line in batch))
    except BinlogError as exc:
        out.flush()
        raise CliError(str(exc)) from None
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None
    if not written and (start_position is not None or stop_position is not None):
        where = files[0] if len(files) == 1 else f"{files[0]} .. {files[-1]}"
        stop = stop_position if stop_position is not None else "the end"
        raise CliError(
            f"{where}: positions {start_position or 4} to {stop} hold no row change, DDL or transaction"
        )


def _write(out: TextIO, lines: Iterable[str]) -> int:
    """Write ``lines`` in chunks of 1,024 lines or 256 Ki characters, whichever comes first (one
    write per line costs as much as making the line; 1,024 lines of 42 KB rows, joined and encoded
    as one 43 MB text, took 40% longer than the same lines 64 at a time); when the input fails
    midway, what came before the bad event is written first. Returns the count."""
    chunk: list[str] = []
    n = size = 0
    try:
        for line in lines:
            chunk.append(line)
            size += len(line)
            if size >= _CHUNK_CHARS or len(chunk) == 1024:
                n += len(chunk)
                chunk.append("")
                out.write("\n".join(chunk))
                chunk = []
                size = 0
    finally:
        if chunk:
            n += len(chunk)
            chunk.append("")
            out.write("\n".join(chunk))
    return n


def _write_parts(out: TextIO, path: Path, workers: int) -> int:
    """The jsonl lines of ``path`` decoded in parts by ``workers`` processes, written in file order
    (the lines are the same as one process writes: ``tests/test_parallel.py``). A part (at most
    ``_PART_BYTES`` of the file) leaves its lines in a file of a temporary directory (``TMPDIR``),
    which the kernel copies to the output (``_append``) and which goes as soon as it is written."""
    # Whole rounds of ``workers`` parts: 5 parts on 2 workers leave the fifth decoding alone.
    from pycanal.binlog.parallel import iter_parallel  # the process pool: only for a file in parts

    parts = workers * max(1, -(-path.stat().st_size // (_PART_BYTES * workers)))
    written = 0
    out.flush()
    raw = out.buffer  # the parts come encoded as ``out`` encodes: written as they are
    with tempfile.TemporaryDirectory(prefix="pycanal-decode-") as spool:
        consume = partial(_jsonl_part, encoding=out.encoding, errors=out.errors or "strict", spool=spool)
        with contextlib.closing(iter_parallel(path, consume, workers, parts)) as results:
            for lines, count, error in results:
                _append(raw, lines)
                written += count
                if error is not None:  # after the lines before the bad event, as one process writes them
                    raise BinlogError(*error)
    return written


def _append(raw: BinaryIO, path: str) -> None:
    """The file ``path`` written to ``raw`` and removed: by ``sendfile`` where the output is a file
    descriptor that takes it (a pipe, a file, /dev/null), else read and written. Through the pool's
    pipe a part's lines cost a pickled copy each way and the pipe's copies (0.3-0.8 s of system
    time for the 300k-row file of ``bench/decode.py``)."""
    with open(path, "rb") as part:
        os.unlink(path)
        try:
            fd = raw.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation: a stream in memory
            fd = None
        if fd is not None:
            raw.flush()
            size, sent = os.fstat(part.fileno()).st_size, 0
            try:
                while sent < size:
                    n = os.sendfile(fd, part.fileno(), sent, size - sent)
                    if not n:  # never short of what fstat said: a part's lines are not cut silently
                        raise OSError(errno.EIO, f"a part's lines ended at {sent} of {size} bytes")
                    sent += n
                return
            except OSError as exc:  # an output sendfile refuses (O_APPEND, a terminal): copied below
                if sent or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
        shutil.copyfileobj(part, raw, 1 << 20)


def _jsonl_part(
    events: PartEvents, encoding: str, errors: str, spool: str
) -> tuple[str, int, tuple[str, str | None, int | None] | None]:
    """A worker's part (top level: it is pickled by name): the file in ``spool`` holding its lines
    encoded as the output encodes, their count and the decode error that ended the part early
    (message, source, offset), if one did. The recorder starts with the GTID of the transaction
    the part starts inside. Written as ``_write`` writes (1,024 lines a write: encoded as one text,
    a part's 100k lines of the 300k-row file took 2.5 times as long), so the parent, which writes
    every part in turn, only has the kernel copy bytes."""
    recorder = Recorder()
    gtid = events.transaction_gtid
    if gtid is not None:
        recorder.gtid = gtid.gtid
    error = None

    def until_error() -> Iterator[str]:
        nonlocal error
        try:
            yield from recorder.lines(events)
        except BinlogError as exc:
            error = (exc.message, exc.source, exc.offset)

    try:
        fd, name = tempfile.mkstemp(suffix=".jsonl", dir=spool)
        with open(fd, "w", encoding=encoding, errors=errors, newline="") as f:
            count = _write(f, until_error())
    except OSError as exc:  # the temporary directory full, or a file size limit
        raise CliError(
            f"{events.path}: the lines of its part at offset {events.start} cannot be written to the "
            f"temporary directory {spool} (TMPDIR): {exc.strerror or exc}",
            code=1,
        ) from None
    return name, count, error


def _start(text: str) -> tuple[str, int]:
    file, sep, pos = text.rpartition(":")
    if not sep or not file or not pos.isdigit() or int(pos) < 4:
        raise CliError(f"--start {text!r}: expected FILE:POS with POS at least 4")
    return file, int(pos)


def _gtid(text: str) -> None:
    """A MySQL (``uuid:1-5,...``) or MariaDB (``domain-server-seq,...``) GTID set."""
    from pycanal.binlog.gtid import MariadbGtidSet, MysqlGtidSet

    try:
        MysqlGtidSet.parse(text)
    except BinlogError:
        try:
            MariadbGtidSet.parse(text)
        except BinlogError:
            raise CliError(
                f"--gtid {text!r}: expected a MySQL (UUID:1-5,...) or MariaDB (DOMAIN-SERVER-SEQ,...) GTID set"
            ) from None


class _SchemaNote:
    """The schema history's corrections, said once: a stream that starts before a DDL begins
    with the server's schema of today, which the first rows do not fit. They are decoded with
    the binlog's own column metadata (a table they do not fit either is an error, not a note)."""

    said = False

    def __call__(self, message: str) -> None:
        if not self.said:
            self.said = True
            print(
                "pycanal dump: note: a table changed after the start position, so the server's schema of "
                "today does not fit its first rows: they are decoded with the binlog's own column metadata "
                f"(first: {message})",
                file=sys.stderr,
            )


_ROW_TYPES = frozenset({"INSERT", "UPDATE", "DELETE", "GTID", "BEGIN"})


def dump(
    source: Annotated[
        str, typer.Option("--source", help="The source server, HOST:PORT (port 3306 if none).")
    ],
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
    host, port = checks.address("--source", source, default_port=3306)
    if sum(x is not None for x in (start, gtid, timestamp)) > 1:
        raise CliError("give at most one of --start, --gtid and --timestamp")
    position = _start(start) if start is not None else None
    if gtid is not None:
        _gtid(gtid)
    checks.count("--timestamp", timestamp, 0)
    checks.regex("--filter", filter_regex)
    checks.regex("--black-filter", black_regex)
    checks.count("--server-id", server_id, 1)
    if server_id is not None and server_id >= 2**32:
        raise CliError(f"--server-id {server_id}: must be below 4294967296")
    if history is not None and not history.parent.is_dir():
        raise CliError(f"--history {str(history)!r}: no directory {str(history.parent)!r}")
    _dump(
        host, port, user, password, position, gtid, timestamp, filter_regex, black_regex, fmt,
        stop_at_end, history, server_id,
    )  # fmt: skip


def _dump(
    host: str, port: int, user: str, password: str, start: tuple[str, int] | None, gtid: str | None,
    timestamp: int | None, filter_regex: str | None, black_regex: str | None, fmt: Format,
    stop_at_end: bool, history: Path | None, server_id: int | None,
) -> None:  # fmt: skip
    import pymysql

    from pycanal.mysql.errors import MysqlError
    from pycanal.parse.filter import TableFilter
    from pycanal.parse.meta import SchemaHistoryError
    from pycanal.parse.stream import ReplicaStream, StreamError

    out = sys.stdout
    stream = None
    try:
        flt = TableFilter(filter_regex, black_regex) if filter_regex or black_regex else None
        stream = ReplicaStream(
            host, port, user, password, start=start, gtid=gtid, timestamp_ms=timestamp, filter=flt,
            stop_at_end=stop_at_end, history_path=history, server_id=server_id, alarm=_SchemaNote(),
        )  # fmt: skip
        events = (e for e in stream.events() if e.type not in _HEARTBEATS)
        if fmt is Format.jsonl:
            _dump_jsonl(out, Recorder().records(events))
        else:
            for batch in _text_batches(events):
                batch.append("")
                out.write("\n".join(batch))
                out.flush()
        out.flush()
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None
    except (
        BinlogError, MysqlError, SchemaHistoryError, StreamError, pymysql.err.MySQLError, OSError, ValueError,
    ) as exc:  # fmt: skip
        out.flush()
        raise CliError(f"{host}:{port}: {exc}", code=1) from None
    finally:
        if stream is not None:
            stream.close()


def _dump_jsonl(out: TextIO, records: Iterable[dict[str, Any]]) -> None:
    for rec in records:
        out.write(to_json_line(rec))
        out.write("\n")
        if rec["type"] not in _ROW_TYPES:
            out.flush()
