"""``LocalBinlogParser``: the binlog files of a directory, decoded in order, for backfill and
offline work (Canal's ``LocalBinlogEventParser``)::

    parser = LocalBinlogParser("/var/lib/mysql", start=("mysql-bin.000007", 4))
    parser = LocalBinlogParser("/backup/binlogs", timestamp_ms=1718000000000, history=history)
    for event in parser.events():
        ...

Files are the ones named ``<basename>.<digits>`` (the basename is guessed from the directory
when not given), sorted by sequence number; after each file the parser follows its ROTATE to the
file it names (or the next one by number) and ends after the last file. One ``EventDecoder`` is
carried across files.

Start by ``start`` = ``(file, position)``, by ``timestamp_ms`` = the boundary after the last
transaction committed before that time (files scanned from the newest backwards; the oldest
file's beginning when none is older), or from the oldest file's beginning.

``history`` (a :class:`~pycanal.parse.meta.SchemaHistory`) completes every TABLE_MAP and gets
every QUERY event, like the live stream; it is started at the start position unless it already
is. ``table_meta`` is a plain decoder hook instead. ``filter`` drops the events of other tables.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from ..binlog import events as ev
from ..binlog.decoder import EventDecoder
from ..binlog.reader import read_events
from ..binlog.tablemap import TableMap
from ..mysql.connection import BinlogPosition
from .filter import TableFilter
from .meta import SchemaHistory
from .meta.store import file_seq
from .stream import EventGate, StreamError, last_boundary_before

__all__ = ["LocalBinlogParser", "binlog_files"]

_NAME = re.compile(r"^(?P<base>.+)\.(?P<seq>\d+)$")


def binlog_files(directory: str | os.PathLike, basename: str | None = None) -> list[Path]:
    """The binlog files in ``directory`` (``<basename>.<digits>``), sorted by sequence number.
    Without ``basename``, the most common one among such names is taken."""
    d = Path(directory)
    if not d.is_dir():
        raise StreamError(f"{d} is not a directory")
    named = [(m["base"], p) for p in d.iterdir() if p.is_file() and (m := _NAME.match(p.name))]
    if basename is None:
        if not named:
            return []
        basename = Counter(base for base, _ in named).most_common(1)[0][0]
    files = [p for base, p in named if base == basename]
    return sorted(files, key=lambda p: file_seq(p.name))


class LocalBinlogParser:
    """Decoded events of the binlog files in a directory (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        start: BinlogPosition | tuple[str, int] | None = None,
        timestamp_ms: int | None = None,
        basename: str | None = None,
        history: SchemaHistory | None = None,
        table_meta: Callable[[TableMap], TableMap] | None = None,
        filter: TableFilter | str | None = None,
    ) -> None:
        if start is not None and timestamp_ms is not None:
            raise StreamError("give start or timestamp_ms, not both")
        if history is not None and table_meta is not None:
            raise StreamError("give history or table_meta, not both")
        self.directory = Path(directory)
        if basename is None and start is not None:
            m = _NAME.match(str(start[0]) if not isinstance(start, BinlogPosition) else start.file)
            basename = m["base"] if m else None
        self.basename = basename
        if start is not None and not isinstance(start, BinlogPosition):
            start = BinlogPosition(str(start[0]), int(start[1]))
        self.requested_start = start
        self.timestamp_ms = timestamp_ms
        self.history = history
        self.table_meta = table_meta if table_meta is not None else (history.table_meta if history else None)
        if isinstance(filter, str):
            filter = TableFilter(filter)
        self.filter = filter
        self.gate = EventGate(history, filter)
        self.start_position: BinlogPosition | None = None
        self.position: BinlogPosition | None = None  # after the last event yielded

    def files(self) -> list[Path]:
        return binlog_files(self.directory, self.basename)

    def resolve(self) -> BinlogPosition:
        """The start position (file and offset) for the configured start."""
        files = self.files()
        if not files:
            raise StreamError(f"no binlog files in {self.directory}")
        if self.requested_start is not None:
            start = self.requested_start
            if not (self.directory / start.file).is_file():
                raise StreamError(f"binlog file {start.file!r} is not in {self.directory}")
            pos = start
        elif self.timestamp_ms is not None:
            pos = BinlogPosition(files[0].name, 4)
            for path in reversed(files):
                found = last_boundary_before(read_events(path), self.timestamp_ms)
                if found is not None:
                    pos = BinlogPosition(path.name, found)
                    break
        else:
            pos = BinlogPosition(files[0].name, 4)
        self.start_position = pos
        return pos

    def events(self) -> Iterator[ev.Event]:
        """The events from the start position to the end of the last file."""
        start = self.start_position or self.resolve()
        history = self.history
        if history is not None and history.model is None:
            history.start((start.file, start.position))
        decoder = EventDecoder(str(self.directory), start.file, table_meta=self.table_meta)
        accept = self.gate.accept
        path: Path | None = self.directory / start.file
        offset: int | None = start.position
        while path is not None:
            next_name: str | None = None
            for e in read_events(path, start_position=offset, decoder=decoder):
                if isinstance(e, ev.RotateEvent):
                    next_name = e.next_file
                elif e.next_pos:
                    self.position = BinlogPosition(path.name, e.next_pos)
                if accept(e):
                    yield e
            path, offset = self._next_file(path, next_name), None

    def _next_file(self, path: Path, rotate_to: str | None) -> Path | None:
        if rotate_to:
            candidate = self.directory / rotate_to
            if candidate.is_file():
                return candidate
        later = [p for p in self.files() if file_seq(p.name) > file_seq(path.name)]
        return later[0] if later else None
