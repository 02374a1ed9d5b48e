"""PySpark's worker daemon, importing pyspark from its installed package instead of ``pyspark.zip``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on its Python
processes' path. A zip holds no compiled bytecode and cannot cache it, so every fresh worker
compiles the pyspark modules it imports from source again: 0.5-0.6 s of CPU per process here
(``import pyspark.worker``: 0.74 s from the zip, 0.17 s from the package). With pip's pyspark the
zip is a copy of the package it sits in (``SPARK_HOME`` is that package's directory), so this
daemon (``spark.python.daemon.module``, set by ``pycanal.spark.job.spark_session``) moves the
zips behind the package's own directory and runs ``pyspark.daemon``; the workers it forks inherit
the path. Against another Spark installation (a cluster's ``SPARK_HOME``) the path is left as is.
"""

from __future__ import annotations

import os
import runpy
import sys


def installed_first(path: list[str], spark_home: str | None) -> list[str]:
    """``path`` with the zips under ``spark_home/python/lib`` last, when ``spark_home`` is the
    pyspark package on ``path`` (pip's layout); else ``path`` unchanged."""
    if not spark_home:
        return path
    home = os.path.realpath(spark_home)
    lib = os.path.join(home, "python", "lib") + os.sep
    zips = [p for p in path if p.endswith(".zip") and os.path.realpath(p).startswith(lib)]
    if not zips:
        return path
    packaged = any(os.path.realpath(os.path.join(p, "pyspark")) == home for p in path if p and p not in zips)
    if not packaged:
        return path
    return [p for p in path if p not in zips] + zips


if __name__ == "__main__":
    sys.path[:] = installed_first(sys.path, os.environ.get("SPARK_HOME"))
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
