"""The Python that Spark starts (``PYSPARK_PYTHON``, the ``pycanal-spark-python`` command): the
job's interpreter, importing pyspark from its installed package instead of ``pyspark.zip``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the ``PYTHONPATH`` of
every Python process it starts: its worker daemon, the data source planners, the streaming
source's runner. A zip holds no compiled bytecode and cannot cache it, so every fresh process
compiles the pyspark modules it imports from source again: 0.5-0.6 s of CPU a process here
(``import pyspark.worker``: 0.74 s from the zip, 0.17 s from the package), on a query's start-up
path for the planners and the runner. With pip's pyspark the zip is a copy of the package it
sits in (``SPARK_HOME`` is that package's directory), so this command takes the zips off
``PYTHONPATH`` and runs this interpreter with Spark's arguments; against another Spark
installation (a cluster's ``SPARK_HOME``) the path is left as it is. It also takes off the jar
of Spark's core, which Spark adds for installations that keep pyspark in it: with pip's layout
it holds no Python, and every import that walks the path read its directory (the
``--packages`` jars: ``session.python_jars_only``).
"""

from __future__ import annotations

import os
import sys


def spark_extras(path: list[str], spark_home: str | None) -> list[str]:
    """The zips under ``spark_home/python/lib`` and the jars under ``spark_home/jars`` on
    ``path`` when ``spark_home`` is the pyspark package on ``path`` (pip's layout: the zips are
    copies of it, and its jars hold no Python); else none."""
    if not spark_home:
        return []
    home = os.path.realpath(spark_home)
    lib, jars = (os.path.join(home, *d) + os.sep for d in (("python", "lib"), ("jars",)))
    extras = [
        p for p in path
        if (p.endswith(".zip") and os.path.realpath(p).startswith(lib))
        or (p.endswith(".jar") and os.path.realpath(p).startswith(jars))
    ]  # fmt: skip
    packaged = any(
        os.path.realpath(os.path.join(p, "pyspark")) == home for p in path if p and p not in extras
    )
    return extras if packaged else []


def main() -> None:
    """Run this interpreter with Spark's arguments, the pyspark zips and jars off its ``PYTHONPATH``."""
    env = dict(os.environ)
    drop = {os.path.realpath(z) for z in spark_extras(sys.path, env.get("SPARK_HOME"))}
    if drop and env.get("PYTHONPATH"):
        parts = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(p for p in parts if not p or os.path.realpath(p) not in drop)
    os.execve(sys.executable, [sys.executable, *sys.argv[1:]], env)
