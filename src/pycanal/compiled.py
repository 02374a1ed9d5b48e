"""Compiled twins of pure-Python modules, and the rule that loads one in the module's place.

The modules in :data:`COMPILED` are compiled by Cython in pure-Python mode (a ``.pxd`` beside a
module gives it types) by the install (``setup.py``) and by ``scripts/setup.sh``
(``scripts/build_ext.py``): each into ``_<name>_c.<extension suffix>`` beside its source, with
``_<name>_c.src``, the source it was built from. Importing such a module loads its twin instead
(a finder :func:`install` puts first on ``sys.meta_path``) only if the twin was built from the
source as it is now, so an edited module never runs stale: it runs interpreted until
``scripts/setup.sh`` builds it again. ``PYCANAL_PURE_PYTHON=1`` keeps every module interpreted:
the Python source is the fallback and the tests' oracle (:func:`interpreted` loads it beside the
twin in one process).

Why these modules: on a stream of small transactions the parser is bound by the CPU of its two
processes (framing, the small events' decode, the entries' bytes, the store), in code spread over
them with no single hot spot; compiled as they are they cost 10-14% less CPU (bench/oltp.py,
docs/benchmarks.md). The scan of ``pycanal.binlog.splits`` has types (its ``.pxd``): 5-10x. So do
the classes every event of a stream goes through in the reading process (the packet reader, the
decoder, the frame converter, the hand-over to the conversion process, the transaction buffer,
the store's record): as ``cdef`` classes their state is a struct and their calls among themselves
are C calls, 17-19% less server CPU again. A ``.pxd`` may ``cimport`` from another listed module
(the entry converter calls the wire format's writers and the store's record as C functions): its
twin then records that module's sources too, and loads only beside that module's twin.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from types import ModuleType

__all__ = ["COMPILED", "built_from", "install", "interpreted", "is_compiled", "twin_file"]

COMPILED = (
    "pycanal.binlog.splits",  # the scan of every event header before a file is split (typed)
    # The parser's hot path on small transactions, compiled as it is.
    "pycanal.mysql.packets",
    "pycanal.mysql.connection",
    "pycanal.binlog.decoder",
    "pycanal.binlog.gtid.mariadb",
    "pycanal.protocol.wire",
    "pycanal.parse.rawentry",
    "pycanal.parse.rowcode",  # per rows event, around the per-table code it generates (which stays Python)
    "pycanal.parse.logevent",
    "pycanal.parse.gtidstate",
    "pycanal.parse.buffer",
    "pycanal.parse.worker",
    "pycanal.parse.parser",
    "pycanal.store.event",
    "pycanal.store.memory",
    "pycanal.sink.entry",
)


def built_from(source: str | os.PathLike[str]) -> bytes:
    """What a twin of the module at ``source`` (a ``.py``) records: the module and its ``.pxd``,
    and those of the modules the ``.pxd`` cimports from (a twin compiled against their
    declarations is stale when they change), compared whole (exact, and no ``hashlib`` to import:
    5 ms of every process's start-up)."""
    source = os.fspath(source)
    out = _read(source) + b"\0"
    pxd = source[:-3] + ".pxd"
    if os.path.exists(pxd):
        out += _read(pxd)
        for dep in _cimported(pxd):
            out += b"\0" + built_from(dep)
    return out


def twin_file(source: str | os.PathLike[str]) -> str | None:
    """The twin of the module at ``source`` (its ``.py``) if one was built from the module as it
    is now, and the modules it cimports from have theirs (it calls into them: it cannot load
    beside their interpreted source), else None. (``os.path``, not ``pathlib``: every pycanal
    process imports this.)"""
    source = os.fspath(source)
    directory, name = os.path.split(source)
    stem = os.path.join(directory, f"_{name[:-3]}_c")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        binary = stem + suffix
        if os.path.isfile(binary):
            try:
                if _read(stem + ".src") != built_from(source):
                    return None
            except OSError:
                return None
            pxd = source[:-3] + ".pxd"
            deps = _cimported(pxd) if os.path.exists(pxd) else []
            return binary if all(twin_file(dep) for dep in deps) else None
    return None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _cimported(pxd: str) -> list[str]:
    """The sources of the pycanal modules a ``.pxd`` cimports from (``from pycanal.x cimport``)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [
        os.path.join(root, *line.split()[1].decode().split(".")) + ".py"
        for line in _read(pxd).splitlines()
        if line.startswith(b"from pycanal.") and b" cimport " in line
    ]


def _pure() -> bool:
    return os.environ.get("PYCANAL_PURE_PYTHON", "") not in ("", "0")


class _TwinFinder:
    """Finds a :data:`COMPILED` module's current twin; anything else is left to the next finder."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if fullname not in COMPILED or _pure():
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)  # type: ignore[arg-type]
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        binary = twin_file(spec.origin)
        if binary is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, binary)
        spec = importlib.machinery.ModuleSpec(fullname, loader, origin=binary)
        spec.has_location = True
        return spec


def install() -> None:
    """Put the twins' finder first on ``sys.meta_path`` (``pycanal/__init__`` does, once)."""
    if not any(isinstance(f, _TwinFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TwinFinder())


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from its compiled twin."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def interpreted(name: str) -> ModuleType:
    """A fresh module object of ``name``'s Python source, whatever ``import`` gives (not put in
    ``sys.modules``): the oracle a twin is compared with in one process."""
    import importlib.util

    parent = importlib.import_module(name.rpartition(".")[0])
    spec = importlib.machinery.PathFinder.find_spec(name, parent.__path__)
    if spec is None or spec.loader is None:
        raise ImportError(f"no source for {name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
