"""Where the shared binlog fixtures are: ``$PYCANAL_FIXTURES_DIR``, else ``shared/fixtures/binlog``
beside this checkout, else beside the checkout it was cloned from (a clone elsewhere, as CI's
``git clone . /tmp/fresh``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
_RELATIVE = Path("shared") / "fixtures" / "binlog"


def _origin() -> Path | None:
    """The local checkout this one was cloned from, if it was cloned from a path."""
    try:
        url = subprocess.run(["git", "-C", str(_REPO), "config", "remote.origin.url"],
                             capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(url).resolve() if url and "://" not in url and Path(url).is_dir() else None


def _fixtures_dir() -> Path:
    if env := os.environ.get("PYCANAL_FIXTURES_DIR"):
        return Path(env)
    beside = _REPO.parent / _RELATIVE
    origin = _origin()
    if not beside.is_dir() and origin is not None and (origin.parent / _RELATIVE).is_dir():
        return origin.parent / _RELATIVE
    return beside


FIXTURES_DIR = _fixtures_dir()
