"""``pycanal.binlog.splits`` compiled (``scripts/build_ext.py``) against its Python source, and
the rule (``pycanal.compiled.twin``) that picks the compiled twin only when it is current.

The interpreted scan is the oracle: on every fixture file and on seeded damaged copies of each
(bytes overwritten, the file cut short: headers that end the scan early, sizes past the end,
flags and types changed), both must give the same split candidates and end offset.
``tests/test_parallel.py`` runs the splits the twin gives through the multi-process decode.
"""

from __future__ import annotations

import random
import shutil
import sysconfig
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
def compiled_splits():
    twin = compiled.twin(splits)
    if twin is splits:
        cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if shutil.which(cc) is None:
            pytest.skip(f"no C compiler ({cc}): scripts/build_ext.py cannot build the twin here")
        pytest.fail("pycanal.binlog._splits_c is missing or stale: scripts/setup.sh builds it")
    return twin


def test_compiled_scan_equals_interpreted_on_fixtures_and_damaged_copies(
    fixtures_dir: Path, compiled_splits
) -> None:
    rnd = random.Random(20261130)
    checked = candidates = 0
    for path in _fixture_files(fixtures_dir):
        data = path.read_bytes()
        for variant in [data, data[:3], *_damaged(data, rnd, 12)]:
            expected = splits.scan(variant)
            assert compiled_splits.scan(variant) == expected, path.name
            assert compiled_splits.scan(memoryview(variant)) == expected, path.name
            checked += 1
            candidates += len(expected[0]) + len(expected[1])
    assert checked > 400 and candidates > 1000  # the fixtures were there, and they split


def test_twin_only_when_built_from_the_current_source(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "twinpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = pkg / "mod.py"
    source.write_text("WHICH = 'interpreted'\n")
    (pkg / "mod.pxd").write_text("# types\n")
    digest = compiled.source_digest(source)
    # A stand-in for the compiled module: twin() only imports it and reads BUILT_FROM.
    (pkg / "_mod_c.py").write_text(f"WHICH = 'compiled'\nBUILT_FROM = {digest!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PYCANAL_PURE_PYTHON", raising=False)
    import twinpkg.mod as mod

    assert compiled.twin(mod).WHICH == "compiled"
    monkeypatch.setenv("PYCANAL_PURE_PYTHON", "1")
    assert compiled.twin(mod) is mod
    monkeypatch.delenv("PYCANAL_PURE_PYTHON")
    (pkg / "mod.pxd").write_text("# other types\n")  # the .pxd counts: a new one is a new build
    assert compiled.twin(mod) is mod
    (pkg / "mod.pxd").write_text("# types\n")
    source.write_text("WHICH = 'edited'\n")  # an edited module runs as it is, not stale
    assert compiled.twin(mod) is mod
    monkeypatch.setattr(mod, "__file__", str(tmp_path / "gone" / "mod.py"))  # no source to read
    assert compiled.twin(mod) is mod
