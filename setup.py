"""What pyproject.toml cannot declare: the compiled twins (``scripts/build_ext.py``), so that
``pip install .`` builds them into the wheel when Cython and a C compiler are there."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
from build_ext import setup_kwargs  # noqa: E402

setup(**setup_kwargs())
