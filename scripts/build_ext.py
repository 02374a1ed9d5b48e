"""Build the compiled twins of the modules below (see ``pycanal.compiled``).

Two ways in, one builder: ``setup.py`` hands :class:`BuildTwins` to setuptools, so ``pip install
.`` (a wheel) and ``pip install -e .`` build the twins; ``scripts/setup.sh`` also runs this file,
which rebuilds in place a twin older than its module's source (an edited module in a checkout)
and is a no-op when each is current. Each module is copied to ``_<name>_c.py`` (with its ``.pxd``
and the source of both) in a scratch package and compiled by Cython and a C compiler. Optional:
without Cython or a C compiler the modules run interpreted; the install goes on with one line
saying so, and this script exits with 1.

    .venv/bin/python scripts/build_ext.py [--force]
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, Extension
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # pycanal.compiled needs only the standard library

from pycanal.compiled import built_from  # noqa: E402 - what the twins are checked by

MODULES = ["pycanal.binlog.splits"]  # the scan of every event header before a file is split


def twin_name(module: str) -> str:
    package, _, name = module.rpartition(".")
    return f"{package}._{name}_c"


def generate(module: str, scratch: Path) -> Extension:
    """``module``'s twin as a Python source under ``scratch`` (a package tree, so Cython knows
    its full name), recording the source it copies."""
    source = ROOT / "src" / Path(*module.split(".")).with_suffix(".py")
    twin = twin_name(module)
    packages = twin.split(".")[:-1]
    pkg = scratch.joinpath(*packages)
    pkg.mkdir(parents=True, exist_ok=True)
    for depth in range(1, len(packages) + 1):
        scratch.joinpath(*packages[:depth], "__init__.py").touch()
    copy = pkg / f"{twin.rpartition('.')[2]}.py"
    text = source.read_text(encoding="utf-8") + f"\nBUILT_FROM = {built_from(source)!r}\n"
    copy.write_text(text, encoding="utf-8")
    if source.with_suffix(".pxd").exists():
        shutil.copyfile(source.with_suffix(".pxd"), copy.with_suffix(".pxd"))
    return Extension(twin, [os.path.relpath(copy, ROOT)])


class BuildTwins(build_ext):
    """setuptools' ``build_ext`` that cythonizes each twin first, and leaves out (one line, the
    module runs interpreted) a twin that does not build, unless ``optional`` is False."""

    optional = True

    def build_extension(self, ext: Extension) -> None:
        try:
            from Cython.Build import cythonize

            (c,) = cythonize([ext], compiler_directives={"language_level": 3}, quiet=True)
            ext.sources = c.sources  # the C file; ext keeps what setuptools set on it
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - optional: any failure leaves the Python module
            if not self.optional:
                raise
            print(f"build_ext: {ext.name} not compiled, its module runs interpreted: {exc}", file=sys.stderr)


def setup_kwargs() -> dict:
    """What ``setup.py`` passes to ``setup()``: the twins' extensions and their builder."""
    scratch = ROOT / "build" / "twins"
    return {"ext_modules": [generate(m, scratch) for m in MODULES], "cmdclass": {"build_ext": BuildTwins}}


def _current(module: str) -> bool:
    source = ROOT / "src" / Path(*module.split(".")).with_suffix(".py")
    try:
        twin = importlib.import_module(twin_name(module))
    except ImportError:
        return False
    return getattr(twin, "BUILT_FROM", None) == built_from(source)


def build_in_place(modules: list[str]) -> None:
    """Build ``modules``' twins beside their modules in ``src/``."""
    with tempfile.TemporaryDirectory(prefix="pycanal-build-") as tmp:
        os.chdir(ROOT)  # setuptools wants the extensions' sources and package_dir relative
        dist = Distribution(
            {"ext_modules": [generate(m, Path(tmp) / "src") for m in modules], "package_dir": {"": "src"}}
        )
        cmd = BuildTwins(dist)
        cmd.optional, cmd.inplace = False, True
        cmd.build_temp = str(Path(tmp) / "temp")
        cmd.ensure_finalized()
        cmd.run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build even when up to date")
    args = parser.parse_args()
    stale = [m for m in MODULES if args.force or not _current(m)]
    if not stale:
        return 0
    try:
        build_in_place(stale)
    except Exception as exc:  # noqa: BLE001 - optional: any failure leaves the Python modules
        print(f"build_ext: {', '.join(stale)} not compiled, they run interpreted: {exc}", file=sys.stderr)
        return 1
    print(f"build_ext: compiled {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
