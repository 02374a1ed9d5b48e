"""One destination's runtime (Canal's ``CanalInstance``): parser → sink → store, plus meta."""

from .core import CanalInstance, CanalInstanceError

__all__ = ["CanalInstance", "CanalInstanceError"]
