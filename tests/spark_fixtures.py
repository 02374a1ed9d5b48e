"""The one SparkSession of a test session (settings from /work/shared/research/spark.md), and
helpers the Spark tests share to capture a block of statements' binlog and its change rows.

Use it with ``from spark_fixtures import spark  # noqa: F401`` in a test module, or register this
module as a plugin (``pytest_plugins = ["spark_fixtures"]``). Either way every module gets the
same session: it is built once per process and stopped when the test session ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_SESSION: list[Any] = []


def _session() -> Any:
    if not _SESSION:
        from pycanal.spark.session import spark_session

        local_dir = tempfile.mkdtemp(prefix="pycanal-spark-")
        spark = spark_session(local_dir, "pycanal-tests")
        # Parquet files not written by Spark hold dates before 1582 in the proleptic calendar.
        spark.conf.set("spark.sql.parquet.datetimeRebaseModeInRead", "CORRECTED")
        spark.conf.set("spark.sql.parquet.int96RebaseModeInRead", "CORRECTED")
        _SESSION.extend([spark, local_dir])
    return _SESSION[0]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A SparkSession (local[2]) with pycanal's data sources registered."""
    session = _session()
    yield session
    if _SESSION:
        local_dir = _SESSION[1]
        _SESSION.clear()
        session.stop()
        shutil.rmtree(local_dir, ignore_errors=True)


# --------------------------------------------------------------------------- binlog captures
@dataclass
class Binlog:
    """The binlog files a block of statements went to, and where the block started."""

    files: list[Path]
    start: tuple[str, int]

    def events(self, decoder: Any = None) -> Iterator[Any]:
        from pycanal.binlog import read_events

        for path in self.files:
            start = self.start[1] if path.name == self.start[0] else None
            yield from read_events(path, start_position=start, decoder=decoder)

    def rows(self, tables: str) -> list[Any]:
        """The change rows of the tables matching the Canal-style regex ``tables``."""
        from pycanal.parse.filter import TableFilter
        from pycanal.spark.event_rows import EventRows

        return list(EventRows(accepts=TableFilter(tables)).rows(self.events()))


def capture(server: Any, run: Callable[[], None]) -> Binlog:
    """FLUSH BINARY LOGS, ``run()``, FLUSH again: the files (and start) ``run``'s statements went to."""
    first = server.flush_binary_logs().name
    start = server.current_binlog()
    run()
    last = server.flush_binary_logs().name
    names = [p.name for p in server.binlog_files()]
    return Binlog([server.binlog_dir / n for n in names[names.index(first) : names.index(last)]], start)


def arrow_rows(rows: list[Any]) -> Any:
    """Change rows as an Arrow table (what ``apply_changes`` gets from a DataFrame's ``toArrow``)."""
    import pyarrow as pa

    from pycanal.spark.rows import to_record_batch

    return pa.Table.from_batches([to_record_batch(rows)])
