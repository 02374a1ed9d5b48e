"""Canal's servers: the embedded API (:mod:`pycanal.server.embedded`) and the deployer that builds
it from a Canal conf dir (:mod:`pycanal.server.deployer`)."""

from importlib import import_module
from typing import Any

__all__ = [
    "CanalServerError",
    "CanalServerWithEmbedded",
    "CanalTcpServer",
    "Deployer",
    "Message",
    "build_instance",
]

# Where each name lives, imported on first use: a client importing the protocol's codec
# (``pycanal.server.wire``) does not pull in the server, its instances and parsers.
_HOMES = {
    "CanalServerError": "embedded",
    "CanalServerWithEmbedded": "embedded",
    "CanalTcpServer": "tcp",
    "Deployer": "deployer",
    "Message": "embedded",
    "build_instance": "deployer",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)
