"""Compiled twins of pure-Python modules, and the rule that picks one at import.

A module listed in ``scripts/build_ext.py`` is compiled by Cython in pure-Python mode (its
``.pxd`` beside it gives the types) into ``<package>._<name>_c`` by the install (``setup.py``)
and by ``scripts/setup.sh``; the twin records the source it was built from. :func:`twin`
returns that compiled module only if it was built from the source as it is now, so an edited
module never runs stale: it runs interpreted until ``scripts/setup.sh`` builds it again.
``PYCANAL_PURE_PYTHON=1`` keeps every module interpreted (the Python source is the fallback and
the tests' oracle).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

__all__ = ["built_from", "twin"]


def built_from(source: Path) -> bytes:
    """What a twin of the module at ``source`` (a ``.py``) records: the module and its ``.pxd``,
    compared whole (exact, and no ``hashlib`` to import: 5 ms of every process's start-up)."""
    pxd = source.with_suffix(".pxd")
    return source.read_bytes() + b"\0" + (pxd.read_bytes() if pxd.exists() else b"")


def twin(module: ModuleType) -> ModuleType:
    """``module``'s compiled twin if one was built from its current source, else ``module``."""
    if os.environ.get("PYCANAL_PURE_PYTHON", "") not in ("", "0"):
        return module
    package, _, name = module.__name__.rpartition(".")
    try:
        compiled = importlib.import_module(f"{package}._{name}_c")
    except ImportError:
        return module
    try:
        current = built_from(Path(module.__file__ or ""))
    except OSError:  # no source file to compare with (a zip on the path): the module as it is
        return module
    return compiled if getattr(compiled, "BUILT_FROM", None) == current else module
