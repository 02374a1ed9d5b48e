"""``pycanal.binlog.splits`` compiled (``scripts/build_ext.py``) against its Python source.

The interpreted scan is the oracle: on every fixture file and on seeded damaged copies of each
(bytes overwritten, the file cut short: headers that end the scan early, sizes past the end,
flags and types changed), both must give the same split candidates and end offset.
``tests/test_parallel.py`` runs the splits the twin gives through the multi-process decode.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pycanal import compiled
from pycanal.binlog import splits


def _fixture_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("README.md", "SHA256SUMS"))


def _damaged(data: bytes, rnd: random.Random, copies: int) -> list[bytes]:
    out = []
    for _ in range(copies):
        d = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            if len(d) > 4:
                d[rnd.randrange(4, len(d))] = rnd.randrange(256)
        if rnd.random() < 0.5 and len(d) > 5:
            del d[rnd.randrange(4, len(d)) :]
        out.append(bytes(d))
    return out


@pytest.fixture(scope="module")
def interpreted_splits():
    """The Python scan, the oracle; the module as imported runs compiled (tests/test_compiled.py
    fails where it does not)."""
    return compiled.interpreted("pycanal.binlog.splits")


def test_compiled_scan_equals_interpreted_on_fixtures_and_damaged_copies(
    fixtures_dir: Path, interpreted_splits
) -> None:
    rnd = random.Random(20261130)
    checked = candidates = 0
    for path in _fixture_files(fixtures_dir):
        data = path.read_bytes()
        for variant in [data, data[:3], *_damaged(data, rnd, 12)]:
            expected = interpreted_splits.scan(variant)
            assert splits.scan(variant) == expected, path.name
            assert splits.scan(memoryview(variant)) == expected, path.name
            checked += 1
            candidates += len(expected[0]) + len(expected[1])
    assert checked > 400 and candidates > 1000  # the fixtures were there, and they split
