"""Package names imported on first use (PEP 562): a package whose ``__init__`` re-exports heavy
submodules does not make every import of one of its light submodules pay for all of them."""

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_names(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` from its submodule."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{home}", package), name)

    return __getattr__
