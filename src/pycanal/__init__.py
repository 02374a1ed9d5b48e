"""pycanal: a Python implementation of Alibaba Canal (MySQL/MariaDB binlog CDC)."""

__version__ = "0.1.0"

from . import compiled as _compiled

_compiled.install()  # the compiled twins of pycanal.compiled.COMPILED load in their modules' place
