"""``Recorder.lines`` (the fast path of ``pycanal binlog decode --format jsonl``) writes exactly
``to_json_line`` of each record ``Recorder.records`` gives, on every binlog fixture (partial row
images, JSON diffs, every column type, MySQL and MariaDB), up to the bad event of a corrupt one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlog_fixtures import FIXTURES_DIR
from pycanal.binlog import read_events
from pycanal.binlog.errors import BinlogError
from pycanal.binlog.events import RowsEvent
from pycanal.binlog.tablemap import TableMap
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


_VALUES = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.floats(allow_nan=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_lines_of_rows_whose_nulls_and_types_move_equal_the_records(data: st.DataObject) -> None:
    """One table's events whose rows put NULLs and values of other types in different columns
    from row to row and event to event: the images compiled per value shape (a NULL taking the
    column's type seen last) still write each value as the records do."""
    n = data.draw(st.integers(1, 5))
    tm = TableMap(1, 0, "s", "t", [3] * n, [0] * n, [True] * n, names=[f"c{i}" for i in range(n)])
    events = []
    for pos in range(data.draw(st.integers(1, 6))):
        kind = data.draw(st.sampled_from(["INSERT", "UPDATE", "DELETE"]))
        image = st.tuples(*[_VALUES] * n)
        rows = data.draw(
            st.lists(st.tuples(image, image) if kind == "UPDATE" else image, min_size=1, max_size=4)
        )
        e = RowsEvent(30, 0, 1, 100, 200, 0, 100 * (pos + 1), "f", kind=kind, table_map=tm, column_count=n)
        e._rows = rows
        events.append(e)
    assert list(Recorder().lines(events)) == [to_json_line(r) for r in Recorder().records(events)]
