"""Canal's servers: the embedded API (:mod:`pycanal.server.embedded`) and the deployer that builds
it from a Canal conf dir (:mod:`pycanal.server.deployer`)."""

from .deployer import Deployer, build_instance
from .embedded import CanalServerError, CanalServerWithEmbedded, Message
from .tcp import CanalTcpServer

__all__ = [
    "CanalServerError",
    "CanalServerWithEmbedded",
    "CanalTcpServer",
    "Deployer",
    "Message",
    "build_instance",
]
