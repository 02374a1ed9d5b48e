"""Canal's servers: the embedded API (:mod:`pycanal.server.embedded`)."""

from .embedded import CanalServerError, CanalServerWithEmbedded, Message

__all__ = ["CanalServerError", "CanalServerWithEmbedded", "Message"]
