"""``Recorder.lines`` (the fast path of ``pycanal binlog decode --format jsonl``) writes exactly
``to_json_line`` of each record ``Recorder.records`` gives, on every binlog fixture (partial row
images, JSON diffs, every column type, MySQL and MariaDB), up to the bad event of a corrupt one."""

from __future__ import annotations

import pytest

from binlog_fixtures import FIXTURES_DIR
from pycanal.binlog import read_events
from pycanal.binlog.errors import BinlogError
from pycanal.parse.canonical import Recorder, to_json_line

DIR = FIXTURES_DIR
FILES = sorted(
    str(p.relative_to(DIR))
    for p in DIR.rglob("*")
    if p.is_file() and p.name not in ("README.md", "SHA256SUMS")
)


def _collect(it) -> tuple[list, type | None]:
    out = []
    try:
        for x in it:
            out.append(x)
    except BinlogError as exc:
        return out, type(exc)
    return out, None


@pytest.mark.parametrize("name", FILES)
def test_lines_equal_the_records(name: str) -> None:
    fast, fast_error = _collect(Recorder().lines(read_events(DIR / name)))
    records, error = _collect(Recorder().records(read_events(DIR / name)))
    assert fast == [to_json_line(r) for r in records]
    assert fast_error is error
