"""Build the compiled twins of the modules below (see ``pycanal.compiled``): run by
``scripts/setup.sh`` after the install, a no-op when each twin was built from its current
source. Each module is copied to ``_<name>_c.py`` (with its ``.pxd``, and the digest it is built
from) in a temporary package, compiled by Cython and a C compiler, and the extension is placed
beside the module. Optional: without Cython or a C compiler the modules run interpreted, and this
script says so in one line and exits with 1.

    .venv/bin/python scripts/build_ext.py [--force]
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
MODULES = ["pycanal.binlog.splits"]  # the scan of every event header before a file is split


def _twin_name(module: str) -> str:
    package, _, name = module.rpartition(".")
    return f"{package}._{name}_c"


def _built_from(twin: str) -> str | None:
    try:
        return getattr(importlib.import_module(twin), "BUILT_FROM", None)
    except ImportError:
        return None


def build(module: str, force: bool) -> bool:
    """Build ``module``'s twin unless it is up to date; True when it was built."""
    from pycanal.compiled import source_digest

    source = SRC / Path(*module.split(".")).with_suffix(".py")
    digest = source_digest(source)
    twin = _twin_name(module)
    if not force and _built_from(twin) == digest:
        return False
    from Cython.Build import cythonize  # only when there is something to build
    from setuptools import Distribution, Extension

    short = twin.rpartition(".")[2]
    with tempfile.TemporaryDirectory(prefix="pycanal-build-") as tmp:
        root = Path(tmp) / "src"
        packages = module.split(".")[:-1]
        pkg = root.joinpath(*packages)
        pkg.mkdir(parents=True)
        for depth in range(1, len(packages) + 1):
            root.joinpath(*packages[:depth], "__init__.py").touch()
        copy = pkg / f"{short}.py"
        copy.write_text(source.read_text() + f"\nBUILT_FROM = {digest!r}\n")
        if source.with_suffix(".pxd").exists():
            shutil.copyfile(source.with_suffix(".pxd"), copy.with_suffix(".pxd"))
        extensions = cythonize(
            [Extension(twin, [str(copy)])], compiler_directives={"language_level": 3}, quiet=True
        )
        dist = Distribution({"ext_modules": extensions})
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib, cmd.build_temp = str(Path(tmp) / "lib"), str(Path(tmp) / "temp")
        cmd.ensure_finalized()
        cmd.run()
        (built,) = (Path(tmp) / "lib").joinpath(*twin.split(".")[:-1]).glob(f"{short}.*")
        target = source.parent
        for old in target.glob(f"{short}.*.so"):
            old.unlink()
        shutil.copyfile(built, target / built.name)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build even when up to date")
    args = parser.parse_args()
    sys.path.insert(0, str(SRC))
    for module in MODULES:
        try:
            if build(module, args.force):
                print(f"build_ext: compiled {module}")
        except Exception as exc:  # noqa: BLE001 - optional: any failure leaves the Python module
            print(f"build_ext: {module} not compiled, it runs interpreted: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
