"""Canal's servers: the embedded API (:mod:`pycanal.server.embedded`) and the deployer that builds
it from a Canal conf dir (:mod:`pycanal.server.deployer`)."""

from pycanal._lazy import lazy_names

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
__getattr__ = lazy_names(
    __name__,
    {
        "CanalServerError": "embedded",
        "CanalServerWithEmbedded": "embedded",
        "CanalTcpServer": "tcp",
        "Deployer": "deployer",
        "Message": "embedded",
        "build_instance": "deployer",
    },
)
