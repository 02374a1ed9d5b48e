"""Errors shared across packages, in a module that imports nothing (a client's HA election raises
a server error without importing the server)."""

__all__ = ["CanalServerError"]


class CanalServerError(RuntimeError):
    """Canal's ``CanalServerException``."""
