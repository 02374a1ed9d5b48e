"""``ConvertWorker`` (the parser's second process) on every binlog fixture: the records equal the
inline ``LogEventConvert``'s, in order and byte for byte, with filters and in GTID mode; on the
corrupt fixtures the same records come before the same error. Events are fed as the parser feeds
them: the reading side decodes what is not in ``UNDECODED`` and checks the rest."""

from __future__ import annotations

import gc
import os
import select
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import fixture_expectations as X
from pycanal.binlog import events as ev
from pycanal.binlog.decoder import EventDecoder
from pycanal.binlog.errors import BinlogError
from pycanal.binlog.gtid import MariadbGtidSet, MysqlGtidSet
from pycanal.binlog.reader import check_magic, iter_frames
from pycanal.parse.eventfilter import EventFilters, FieldFilter
from pycanal.parse.filter import TableFilter
from pycanal.parse.logevent import LogEventConvert
from pycanal.parse.rawentry import RawEntryConverter
from pycanal.parse.worker import UNDECODED, ConvertWorker, ConvertWorkerError
from pycanal.store.event import Event
from test_rawentry import ALL_FILES


def _fields(r: Event) -> tuple:
    return (r.raw, r.journal_name, r.position, r.event_length, r.execute_time, r.server_id, r.gtid,
            r.entry_type, r.event_type, r.is_ddl, r.rows, r.size)  # fmt: skip


def _convert(options: dict[str, Any]) -> LogEventConvert:
    gtid = options.get("gtid_set")
    return LogEventConvert(
        RawEntryConverter(gtid_set=gtid() if gtid else None, filter_query_dml=options.get("query_dml", False)),
        TableFilter(options.get("filter"), options.get("black")),
        EventFilters(query_dml=options.get("query_dml", False), delete=options.get("no_delete", False),
                     table_error=True),
        FieldFilter(options.get("fields", "")),
        lambda _message: None,
    )  # fmt: skip


def _frames(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    check_magic(data[:4], str(path))
    out = []
    try:
        for pos, raw in iter_frames(data, str(path)):
            out.append((pos, raw))
    except BinlogError:
        pass  # a truncated tail: the events before it are the stream
    return out


def inline(path: Path, options: dict[str, Any]) -> tuple[list[tuple], str | None]:
    decoder = EventDecoder(str(path), path.name)
    convert = _convert(options)
    out: list[tuple] = []
    try:
        for pos, raw in _frames(path):
            event = decoder.decode(raw, pos)
            if isinstance(event, ev.RotateEvent):  # as the replication connection does
                decoder.file = event.next_file
            out += [_fields(r) for r in convert.records(event)]
    except BinlogError as exc:
        return out, f"{type(exc).__name__}: {exc}"
    return out, None


def parallel(path: Path, options: dict[str, Any], chunk_events: int) -> tuple[list[tuple], str | None]:
    decoder = EventDecoder(str(path), path.name)
    worker = ConvertWorker(_convert(options), decoder, with_meta=False, warn=lambda _m: None,
                           chunk_events=chunk_events)  # fmt: skip
    out: list[tuple] = []
    try:
        try:
            for pos, raw in _frames(path):
                if raw[4] in UNDECODED:
                    decoder.check(raw, pos)
                    event = None
                else:
                    event = decoder.decode(raw, pos)
                    if isinstance(event, ev.RotateEvent):
                        decoder.file = event.next_file
                if worker.feed(raw, pos, event):
                    out += [_fields(r) for r in worker.take()]
        except BinlogError as exc:  # found here: what the worker had before it, then the error
            error = f"{type(exc).__name__}: {exc}"
            worker.flush()
            while worker.busy:
                worker.wait()
            out += [_fields(r) for r in worker.take()]
            return out, error
        worker.flush()
        while worker.busy:
            worker.wait()
        out += [_fields(r) for r in worker.take()]
        try:
            out += [_fields(r) for r in worker.take()]
        except BinlogError as exc:  # found by the worker
            return out, f"{type(exc).__name__}: {exc}"
        return out, None
    finally:
        worker.close()


OPTIONS: list[dict[str, Any]] = [
    {},
    {"query_dml": True, "no_delete": True, "black": r"mysql\..*"},
    {"fields": "test.t1:id,test.test:id"},
]
CHUNKS = [1, 7, 512]


@pytest.mark.parametrize("name", ALL_FILES)
def test_worker_records_equal_inline(fixtures_dir: Path, name: str) -> None:
    path = fixtures_dir / name
    for k, options in enumerate(OPTIONS):
        expected, expected_error = inline(path, options)
        got, error = parallel(path, options, CHUNKS[k % len(CHUNKS)])
        assert error == expected_error, f"options {k}"
        assert len(got) == len(expected), f"options {k}"
        for i, (want, have) in enumerate(zip(expected, got, strict=True)):
            assert have == want, f"options {k}, record {i}"
    if name in X.BAD_FILES:  # the error is where the fixture's notes put it
        if expected_error is not None:
            assert f"offset {X.BAD_FILES[name]}" in expected_error
        else:  # a cut-off event: the stream ends before it
            frames = _frames(path)
            assert (
                frames[-1][0] + len(frames[-1][1]) == X.BAD_FILES[name] if frames else X.BAD_FILES[name] == 4
            )


@pytest.mark.parametrize(
    ("name", "gtid_set"),
    [
        ("rust_mysql_common/mysql-enum-string-set.000001", MysqlGtidSet),
        ("mysql-binlog-connector-rust/mysql-bin.000057", MysqlGtidSet),  # compressed payloads
        ("rust_mysql_common/mariadb-bin.000001", lambda: MariadbGtidSet.parse("0-1-0")),
        ("binlog-parser/mysql-bin.07", MariadbGtidSet),
    ],
)
def test_worker_gtid_mode_records_equal_inline(fixtures_dir: Path, name: str, gtid_set: Any) -> None:
    path = fixtures_dir / name
    expected, expected_error = inline(path, {"gtid_set": gtid_set})
    got, error = parallel(path, {"gtid_set": gtid_set}, 3)
    assert (got, error) == (expected, expected_error)
    assert any(r[6] for r in got)  # the Headers carry the GTID set


class _Finalized:
    """A finalizer that takes ``lock``."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.me = self  # a cycle: only the collector frees it

    def __del__(self) -> None:
        with self.lock:
            pass


def test_worker_never_collects_the_heap_it_forked_with(fixtures_dir: Path) -> None:
    """A garbage cycle of the server whose finalizer takes a lock another thread holds at the
    fork: collected in the worker, it would wait for a thread the fork did not copy, and the
    destination would get no entry (a parser's SQLite schema store did this under test load)."""
    path = fixtures_dir / "rust_mysql_common/mariadb-bin.000001"
    expected, _ = inline(path, {})
    lock, held, release = threading.Lock(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    gc.disable()  # the cycle stays garbage until the worker forks
    try:
        _Finalized(lock)
        holder.start()
        held.wait()
        decoder = EventDecoder(str(path), path.name)
        worker = ConvertWorker(_convert({}), decoder, with_meta=False, warn=lambda _m: None)
        try:
            out = []
            for pos, raw in _frames(path):
                event = None if raw[4] in UNDECODED else decoder.decode(raw, pos)
                if worker.feed(raw, pos, event):
                    out += [_fields(r) for r in worker.take()]
            worker.flush()
            while worker.busy:
                assert select.select([worker.fileno()], [], [], 20)[0], "the worker never answered"
                worker.wait()
            out += [_fields(r) for r in worker.take()]
        finally:
            release.set()
            worker.close()
    finally:
        release.set()
        holder.join()
        gc.enable()
    assert out == expected


@pytest.mark.parametrize("how", ["wait", "flush"])
def test_a_worker_that_stops_answering_is_killed_and_raises(fixtures_dir: Path, how: str) -> None:
    """A hung worker (here stopped by SIGSTOP) fails the parser's run after ``answer_timeout``
    instead of holding the destination for ever: through a blocking ``wait`` and through the
    ``flush`` the parser calls while it polls."""
    path = fixtures_dir / "rust_mysql_common/mariadb-bin.000001"
    decoder = EventDecoder(str(path), path.name)
    worker = ConvertWorker(_convert({}), decoder, with_meta=False, warn=lambda _m: None, answer_timeout=0.5)
    try:
        os.kill(worker.pid, signal.SIGSTOP)
        for pos, raw in _frames(path):
            worker.feed(raw, pos, None if raw[4] in UNDECODED else decoder.decode(raw, pos))
        began = time.monotonic()
        with pytest.raises(ConvertWorkerError, match=f"pid {worker.pid}.* did not answer within"):
            worker.flush()
            if how == "wait":
                worker.wait()
            else:
                while time.monotonic() < began + 10:
                    worker.flush()
                    time.sleep(0.05)
        assert 0.4 < time.monotonic() - began < 5
        with pytest.raises(ProcessLookupError):  # killed and reaped
            os.kill(worker.pid, 0)
    finally:
        worker.close()
