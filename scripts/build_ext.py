"""Build the compiled twins of the modules ``pycanal.compiled.COMPILED`` lists.

Two ways in, one builder: ``setup.py`` hands :class:`BuildTwins` to setuptools, so ``pip install
.`` (a wheel) and ``pip install -e .`` build the twins; ``scripts/setup.sh`` also runs this file,
which rebuilds in place a twin older than its module's source (an edited module in a checkout)
and is a no-op when each is current. Cython compiles each module under its own name (a ``.pxd``
beside it gives types) into ``_<name>_c.<extension suffix>`` beside the module, with
``_<name>_c.src``, the source it was built from; ``pycanal.compiled`` loads it in the module's
place while the two match. Optional: without Cython or a C compiler the modules run interpreted;
the install goes on with one line saying so, and this script exits with 1.

    .venv/bin/python scripts/build_ext.py [--force]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, Extension
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # pycanal.compiled needs only the standard library

from pycanal.compiled import COMPILED, built_from, twin_file  # noqa: E402 - what the twins are checked by

# annotation_typing off: an annotation stays a hint, as in Python (``x: int = None`` must not
# reject None); binding on: functions keep Python's introspection.
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True}


def source_of(module: str) -> Path:
    return ROOT / "src" / Path(*module.split(".")).with_suffix(".py")


def extension(module: str) -> Extension:
    """The module itself as a Cython extension of its own name (its init function is the
    module's, so the twin loads as the module). No debug information: the 15 twins take 3.6 MB
    and 32 s to build instead of 21 MB and 42 s."""
    return Extension(module, [os.path.relpath(source_of(module), ROOT)], extra_compile_args=["-g0"])


class BuildTwins(build_ext):
    """setuptools' ``build_ext`` that cythonizes each twin first, names it ``_<name>_c`` with its
    ``.src`` record beside it, compiles as many at a time as there are CPUs, and leaves out (one
    line, the module runs interpreted) a twin that does not build, unless ``optional`` is False."""

    optional = True

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def get_ext_filename(self, fullname: str) -> str:
        head, tail = os.path.split(super().get_ext_filename(fullname))
        name, _, suffix = tail.partition(".")
        return os.path.join(head, f"_{name}_c.{suffix}")

    def build_extensions(self) -> None:
        # Cython in this thread, one module after the other (its compiler is not thread-safe);
        # then setuptools compiles the C files ``parallel`` at a time.
        kept = []
        for ext in self.extensions:
            try:
                from Cython.Build import cythonize

                scratch = os.path.join(self.build_temp, "cython")
                (c,) = cythonize([ext], compiler_directives=DIRECTIVES, quiet=True, build_dir=scratch)
                ext.sources = c.sources  # the C file; ext keeps what setuptools set on it
                kept.append(ext)
            except Exception as exc:  # noqa: BLE001 - optional: any failure leaves the Python module
                self._skip(ext, exc)
        self.extensions = kept
        super().build_extensions()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
            self._record(ext)
        except Exception as exc:  # noqa: BLE001 - optional: any failure leaves the Python module
            self._skip(ext, exc)

    def copy_extensions_to_source(self) -> None:
        super().copy_extensions_to_source()  # --inplace: the twins built in build/ go beside their modules
        for ext in self.extensions:
            self._record(ext)

    def _record(self, ext: Extension) -> None:
        """``_<name>_c.src`` beside the twin: the source it was built from."""
        binary = Path(self.get_ext_fullpath(ext.name))
        binary.with_name(binary.name.partition(".")[0] + ".src").write_bytes(built_from(source_of(ext.name)))

    def _skip(self, ext: Extension, exc: Exception) -> None:
        if not self.optional:
            raise exc
        print(f"build_ext: {ext.name} not compiled, its module runs interpreted: {exc}", file=sys.stderr)


def setup_kwargs() -> dict:
    """What ``setup.py`` passes to ``setup()``: the twins' extensions and their builder."""
    return {"ext_modules": [extension(m) for m in COMPILED], "cmdclass": {"build_ext": BuildTwins}}


def build_in_place(modules: list[str]) -> None:
    """Build ``modules``' twins beside their modules in ``src/``."""
    with tempfile.TemporaryDirectory(prefix="pycanal-build-") as tmp:
        os.chdir(ROOT)  # setuptools wants the extensions' sources and package_dir relative
        dist = Distribution({"ext_modules": [extension(m) for m in modules], "package_dir": {"": "src"}})
        cmd = BuildTwins(dist)
        cmd.optional, cmd.inplace = False, True
        cmd.build_temp = str(Path(tmp) / "temp")
        cmd.ensure_finalized()
        cmd.run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build even when up to date")
    args = parser.parse_args()
    stale = [m for m in COMPILED if args.force or twin_file(source_of(m)) is None]
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
