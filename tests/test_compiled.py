"""The compiled twins (``pycanal.compiled``, ``scripts/build_ext.py``): every listed module runs
compiled in this checkout, a twin loads only when built from the module as it is, a wheel carries
the twins (and installs without them where there is no C compiler), and the interpreted modules
are the oracle: every fixture binlog decodes and converts to the same entry bytes and the same
errors both ways."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from functools import partial
from pathlib import Path

import pytest

from pycanal import compiled

REPO = Path(__file__).resolve().parent.parent


def _no_compiler_here() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is None


def test_every_listed_module_runs_compiled() -> None:
    if os.environ.get("PYCANAL_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("PYCANAL_PURE_PYTHON is set: every module runs interpreted")
    modules = {name: importlib.import_module(name) for name in compiled.COMPILED}
    missing = [name for name, module in modules.items() if not compiled.is_compiled(module)]
    if missing and _no_compiler_here():
        pytest.skip("no C compiler: scripts/build_ext.py cannot build the twins here")
    assert not missing, f"{missing} run interpreted: scripts/setup.sh builds their twins"


def test_a_twin_loads_only_when_built_from_the_current_source(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "mod.py"
    source.write_text("WHICH = 'interpreted'\n")
    (tmp_path / "mod.pxd").write_text("# types\n")
    binary = tmp_path / ("_mod_c" + importlib.machinery.EXTENSION_SUFFIXES[0])
    record = tmp_path / "_mod_c.src"
    assert compiled.twin_file(source) is None  # nothing built
    binary.write_bytes(b"a stand-in: twin_file() only compares the record with the source")
    assert compiled.twin_file(source) is None  # no record of what it was built from
    record.write_bytes(compiled.built_from(source))
    assert compiled.twin_file(source) == str(binary)
    (tmp_path / "mod.pxd").write_text("# other types\n")  # the .pxd counts: a new one is a new build
    assert compiled.twin_file(source) is None
    (tmp_path / "mod.pxd").write_text("# types\n")
    source.write_text("WHICH = 'edited'\n")  # an edited module runs as it is, never stale
    assert compiled.twin_file(source) is None
    # PYCANAL_PURE_PYTHON: the finder leaves every module to Python's own import.
    monkeypatch.setenv("PYCANAL_PURE_PYTHON", "1")
    assert compiled._TwinFinder().find_spec("pycanal.binlog.splits") is None
    monkeypatch.delenv("PYCANAL_PURE_PYTHON")
    spec = compiled._TwinFinder().find_spec("pycanal.binlog.splits")
    assert spec is None or spec.origin.endswith(importlib.machinery.EXTENSION_SUFFIXES[0])
    assert compiled._TwinFinder().find_spec("pycanal.binlog.events") is None  # not listed


def test_a_twin_that_cimports_loads_only_with_current_twins_of_what_it_cimports(
    tmp_path: Path, monkeypatch
) -> None:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]

    def module(name: str, text: str) -> Path:
        source = tmp_path / f"{name}.py"
        source.write_text(text)
        (tmp_path / f"{name}.pxd").write_text(f"# {name}'s types\n")
        (tmp_path / f"_{name}_c{suffix}").write_bytes(b"a stand-in")
        return source

    dep, mod = module("dep", "X = 1\n"), module("mod", "Y = 2\n")
    monkeypatch.setattr(compiled, "_cimported", lambda pxd: [str(dep)] if pxd.endswith("mod.pxd") else [])
    for source in (dep, mod):
        (tmp_path / f"_{source.stem}_c.src").write_bytes(compiled.built_from(source))
    assert compiled.twin_file(mod) == str(tmp_path / f"_mod_c{suffix}")
    assert b"X = 1" in compiled.built_from(mod)  # the cimported module's source is part of the record
    dep.write_text("X = 2\n")  # dep edited: its twin is stale, and so is mod's, compiled against it
    assert compiled.twin_file(dep) is None and compiled.twin_file(mod) is None
    (tmp_path / "_dep_c.src").write_bytes(compiled.built_from(dep))  # dep rebuilt, mod not
    assert compiled.twin_file(dep) is not None and compiled.twin_file(mod) is None
    (tmp_path / "_mod_c.src").write_bytes(compiled.built_from(mod))
    assert compiled.twin_file(mod) is not None
    (tmp_path / f"_dep_c{suffix}").unlink()  # dep runs interpreted: mod's twin cannot load beside it
    assert compiled.twin_file(mod) is None
    monkeypatch.undo()
    rawentry = REPO / "src" / "pycanal" / "parse" / "rawentry.pxd"
    assert compiled._cimported(str(rawentry)) == [
        str(REPO / "src" / "pycanal" / "protocol" / "wire.py"),
        str(REPO / "src" / "pycanal" / "store" / "event.py"),
    ]


def test_interpreted_is_the_source_whatever_import_gives() -> None:
    from pycanal.binlog import splits

    pure = compiled.interpreted("pycanal.binlog.splits")
    assert not compiled.is_compiled(pure) and pure is not splits
    assert pure.__file__ == str(REPO / "src" / "pycanal" / "binlog" / "splits.py")


# An oracle run: every fixture file decoded and converted, one digest of its entries' bytes (or its
# error) per file. The same script runs compiled and interpreted.
_PROBE = r"""
import hashlib, json, sys
from pathlib import Path
from pycanal import compiled
from pycanal.binlog import read_events
from pycanal.parse.rawentry import RawEntryConverter
import pycanal.binlog.decoder, pycanal.parse.rawentry
out = {"compiled": [compiled.is_compiled(pycanal.binlog.decoder), compiled.is_compiled(pycanal.parse.rawentry)]}
for path in sorted(p for p in Path(sys.argv[1]).rglob("*") if p.is_file() and p.suffix not in (".md",) and p.name != "SHA256SUMS"):
    h, n = hashlib.sha256(), 0
    conv = RawEntryConverter(timezone="Asia/Shanghai")
    try:
        for event in read_events(str(path)):
            for raw in conv.convert(event):
                h.update(raw); n += 1
        end = "end"
    except Exception as exc:
        end = f"{type(exc).__name__}: {exc}"
    out[str(path.relative_to(sys.argv[1]))] = [n, h.hexdigest(), end]
print(json.dumps(out))
"""


def _oracle_run(fixtures_dir: Path, pure: bool) -> dict:
    env = {**os.environ, "PYCANAL_PURE_PYTHON": "1" if pure else "0"}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(fixtures_dir)], env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    return json.loads(out)


def test_compiled_and_interpreted_decode_every_fixture_alike(fixtures_dir: Path) -> None:
    pure, built = _oracle_run(fixtures_dir, True), _oracle_run(fixtures_dir, False)
    assert pure.pop("compiled") == [False, False]
    which = built.pop("compiled")
    if which != [True, True] and not _no_compiler_here():
        pytest.fail("the twins are not built: scripts/setup.sh builds them")
    assert built == pure
    files = list(pure.values())
    assert len(files) >= 38 and sum(n for n, _, _ in files) > 3_000  # the fixtures were there
    assert any(end != "end" for _, _, end in files)  # and the damaged ones fail the same way


# The typed classes (a .pxd beside the module) against their source on random input: the replication
# packets cut at random points, and the transaction buffer's batches and positions.
_TYPED_PROBE = r"""
import hashlib, json, random
from pycanal import compiled
import pycanal.mysql.packets as P, pycanal.parse.buffer as B, pycanal.store.event as S
from pycanal.mysql.errors import ProtocolError
from pycanal.protocol import EntryProtocol_pb2 as pb
out = {"compiled": [compiled.is_compiled(m) for m in (P, B, S)]}
rng, h = random.Random(7), hashlib.sha256()
payloads = [b"\x00" + rng.randbytes(rng.choice((0, 1, 30, 300, 70000))) for _ in range(400)]
payloads.insert(200, b"\x00" + rng.randbytes(P.MAX_PAYLOAD + 5))  # split over two packets
stream, seq = bytearray(), 0
for body in payloads:
    framed, seq = P.frame_packet(body, seq)
    stream += framed
for capacity in (16, 1 << 20):
    reader, p = P.PacketReader(capacity), 0
    while p < len(stream):
        step = rng.choice((1, 3, 64, 5000, 1 << 17))
        reader.feed(stream[p : p + step])
        p += step
        h.update(repr(reader.needed()).encode())
        while (item := reader.next_body()) is not None:
            h.update(repr((item[0], len(item[1]))).encode() + item[1])
    h.update(repr((reader.seq, reader.buffered)).encode())
bad = P.PacketReader(64)
bad.feed(b"\x01\x00\x00\x05\x00")
try:
    bad.next_body()
except ProtocolError as exc:
    h.update(str(exc).encode())
kinds = [(pb.TRANSACTIONBEGIN, pb.UPDATE), (pb.ROWDATA, pb.INSERT), (pb.ROWDATA, pb.QUERY),
         (pb.ROWDATA, pb.ALTER), (pb.TRANSACTIONEND, pb.UPDATE), (pb.HEARTBEAT, pb.MHEARTBEAT), (pb.GTIDLOG, pb.GTID)]
for size, deferred in ((4, False), (8, True), (1024, True)):
    batches, positions = [], []
    buf = B.TransactionBuffer(size, lambda b: batches.append([(r.position, r.entry_type, r.is_ddl, r.size) for r in b]),
                              positions.append, deferred=deferred)
    for i in range(3000):
        entry_type, event_type = rng.choice(kinds)
        buf.add_all([S.record(rng.randbytes(rng.randrange(40)), "mysql-bin.000001", i * 10, 10, i, 1, "", entry_type, event_type, i % 3)])
        if rng.random() < 0.05:
            buf.commit()
    buf.flush()
    buf.commit()
    h.update(repr((batches, positions, len(buf))).encode())
out["digest"] = h.hexdigest()
print(json.dumps(out))
"""


def test_the_typed_classes_compiled_and_interpreted_alike() -> None:
    def run(pure: bool) -> dict:
        env = {**os.environ, "PYCANAL_PURE_PYTHON": "1" if pure else "0"}
        done = subprocess.run([sys.executable, "-c", _TYPED_PROBE], env=env, check=True, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        return json.loads(done.stdout)

    pure, built = run(True), run(False)
    assert pure.pop("compiled") == [False, False, False]
    if built.pop("compiled") != [True, True, True] and not _no_compiler_here():
        pytest.fail("the twins are not built: scripts/setup.sh builds them")
    assert built == pure


# ------------------------------------------------------------------------------ the wheel
def _wheel_probe(tmp_path: Path, env: dict[str, str]) -> dict[str, bool]:
    """Build pycanal's wheel as ``pip install .`` does (setup.py, scripts/build_ext.py), install
    it alone in a directory, and say which modules run compiled from there."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    # A copy of the checkout: the build writes build/ and *.egg-info beside the sources.
    ignore = shutil.ignore_patterns(".*", "build", "var", "__pycache__", "*.so", "_*_c.src")
    shutil.copytree(REPO, tmp_path / "repo", ignore=ignore)
    run = partial(subprocess.run, check=True, capture_output=True, text=True, env={**os.environ, **env})
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(tmp_path / "repo")])
    (wheel,) = wheels.glob("pycanal-*.whl")
    run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)])
    probe = (
        "import importlib, json; from pycanal import compiled\n"
        "print(json.dumps({m: compiled.is_compiled(importlib.import_module(m)) for m in compiled.COMPILED}))"
    )
    out = run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": os.environ["PATH"]}
    )
    return json.loads(out.stdout)


def test_the_wheel_carries_the_twins(tmp_path: Path) -> None:
    if _no_compiler_here():
        pytest.skip("no C compiler: the wheel cannot carry twins here")
    # Built at -O0 (CFLAGS come after Python's -O3): what is tested is the packaging, and the 16
    # twins compile in 33 s instead of 124 s alone (268 s beside the suite's workers, 2026-12-02).
    assert _wheel_probe(tmp_path, {"CFLAGS": "-O0"}) == dict.fromkeys(compiled.COMPILED, True)


def test_a_wheel_built_without_a_c_compiler_runs_interpreted(tmp_path: Path) -> None:
    # The install goes on without the twins (scripts/build_ext.py's BuildTwins): Python runs.
    assert _wheel_probe(tmp_path, {"CC": "false"}) == dict.fromkeys(compiled.COMPILED, False)
