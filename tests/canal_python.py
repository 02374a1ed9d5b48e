"""Running the unmodified canal-python 0.4 client (PyPI) against pycanal, shared by its tests.

canal-python's generated protobuf code needs protobuf <= 3.20, so it runs in its own venv
(``.venv-canal-python``, made by scripts/setup.sh) as a subprocess that prints ``RESULT <json>``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pycanal.instance import CanalInstance
from pycanal.meta import MemoryMetaManager
from pycanal.protocol.position import EntryPosition
from pycanal.testing import PrivateMariaDB

VENV_PYTHON = Path(__file__).resolve().parent.parent / ".venv-canal-python" / "bin" / "python"


def run_script(
    script: str, *args: str, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run ``script`` with canal-python's interpreter; (the process, its RESULT object)."""
    if not VENV_PYTHON.exists():
        pytest.fail(f"{VENV_PYTHON} is missing: run scripts/setup.sh (it installs canal-python 0.4 there)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONNOUSERSITE"] = "1"
    proc = subprocess.run(
        [str(VENV_PYTHON), "-c", script, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result,) = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return proc, result


def instance_from_here(db: PrivateMariaDB, destination: str) -> CanalInstance:
    """An instance of ``destination`` reading ``db`` from its current binlog position."""
    file, pos = db.current_binlog()
    parser = {
        "master_address": (db.host, db.port),
        "username": db.repl_user,
        "password": db.repl_password,
        "master_position": EntryPosition(file, pos),
    }
    return CanalInstance(destination, parser=parser, meta_manager=MemoryMetaManager())
