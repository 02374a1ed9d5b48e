"""The storage's errors, and secrets kept out of them."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["StorageError", "mask"]

_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class StorageError(OSError):
    """A store refused or failed a request: the message names the URI, never a secret."""


def mask(text: str, options: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret of ``options`` and of the environment replaced by ``***``."""
    for source in (options or {}, os.environ):
        for key, value in source.items():
            if key.upper() in _SECRETS and value and len(value) >= 4:
                text = text.replace(value, "***")
    return text
