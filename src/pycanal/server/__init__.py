"""Canal's server module: the embedded API (:mod:`pycanal.server.embedded`), Canal's TCP protocol
(:mod:`pycanal.server.tcp`, :mod:`pycanal.server.wire`) and the metrics (:mod:`pycanal.server.metrics`).
:mod:`pycanal.deployer` builds them from a Canal conf dir."""

from pycanal._lazy import lazy_names

__all__ = [
    "CanalServerError",
    "CanalServerWithEmbedded",
    "CanalTcpServer",
    "Message",
]

# Where each name lives, imported on first use: a client importing the protocol's codec
# (``pycanal.server.wire``) does not pull in the server, its instances and parsers.
__getattr__ = lazy_names(
    __name__,
    {
        "CanalServerError": "embedded",
        "CanalServerWithEmbedded": "embedded",
        "CanalTcpServer": "tcp",
        "Message": "embedded",
    },
)
