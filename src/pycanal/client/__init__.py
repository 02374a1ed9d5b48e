"""Canal clients over Canal's TCP protocol.

* :class:`SimpleConnector` (:mod:`pycanal.client.simple`): one server, Canal's
  ``SimpleCanalConnector`` semantics, plus :meth:`SimpleConnector.stream` for Python loops.
"""

from .cluster import ClusterConnector
from .running import ClientRunningMonitor
from .simple import CanalClientError, Message, SimpleConnector

__all__ = ["CanalClientError", "ClientRunningMonitor", "ClusterConnector", "Message", "SimpleConnector"]
