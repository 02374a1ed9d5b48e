"""``pycanal.binlog.splits`` compiled (``scripts/build_ext.py``) against its Python source, and
the rule (``pycanal.compiled.twin``) that picks the compiled twin only when it is current.

The interpreted scan is the oracle: on every fixture file and on seeded damaged copies of each
(bytes overwritten, the file cut short: headers that end the scan early, sizes past the end,
flags and types changed), both must give the same split candidates and end offset.
``tests/test_parallel.py`` runs the splits the twin gives through the multi-process decode.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import sysconfig
from functools import partial
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
    built = compiled.built_from(source)
    # A stand-in for the compiled module: twin() only imports it and reads BUILT_FROM.
    (pkg / "_mod_c.py").write_text(f"WHICH = 'compiled'\nBUILT_FROM = {built!r}\n")
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


def _wheel_twin(tmp_path: Path, sample: Path, env: dict[str, str]) -> str:
    """Build pycanal's wheel as ``pip install .`` does (setup.py, scripts/build_ext.py), install
    it alone in a directory, and say which scan runs from there on a fixture file."""
    repo = Path(__file__).resolve().parent.parent
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    # A copy of the checkout: the build writes build/ and *.egg-info beside the sources.
    shutil.copytree(
        repo, tmp_path / "repo", ignore=shutil.ignore_patterns(".*", "build", "var", "__pycache__", "*.so")
    )
    run = partial(subprocess.run, check=True, capture_output=True, text=True, env={**os.environ, **env})
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(tmp_path / "repo")])
    (wheel,) = wheels.glob("pycanal-*.whl")
    run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)])
    probe = (
        "import sys; from pathlib import Path; from pycanal import compiled; from pycanal.binlog import splits\n"
        "t = compiled.twin(splits); data = Path(sys.argv[1]).read_bytes()\n"
        "assert t.scan(data) == splits.scan(data); print(t.__name__, Path(t.__file__).parent == Path(splits.__file__).parent)"
    )
    out = run(
        [sys.executable, "-c", probe, str(sample)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": os.environ["PATH"]},
    )
    return out.stdout.strip()


def _largest(fixtures_dir: Path) -> Path:
    return max(_fixture_files(fixtures_dir), key=lambda p: p.stat().st_size)


def test_the_wheel_carries_the_twin(tmp_path: Path, fixtures_dir: Path, compiled_splits) -> None:
    assert _wheel_twin(tmp_path, _largest(fixtures_dir), {}) == "pycanal.binlog._splits_c True"


def test_a_wheel_built_without_a_c_compiler_runs_interpreted(tmp_path: Path, fixtures_dir: Path) -> None:
    # The install goes on without the twin (scripts/build_ext.py's BuildTwins): the Python scan runs.
    assert _wheel_twin(tmp_path, _largest(fixtures_dir), {"CC": "false"}) == "pycanal.binlog.splits True"
