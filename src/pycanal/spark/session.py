"""How pycanal starts a Spark session: the driver JVM's flags (its class archive included), the
Python Spark's processes run, where a query's checkpoint logs go, and Delta Lake for Spark.

Delta Lake for Spark is in every session pycanal starts, as PySpark users add it: its Maven package
(``spark.jars.packages``: fetched by Spark's Ivy into ``~/.ivy2.5.2`` on first use, cached after;
``scripts/setup.sh`` fetches it) with Delta's SQL extension and catalog, so that
``spark.read.format("delta")``, ``DESCRIBE HISTORY``, ``OPTIMIZE`` and the rest work on the lake.
The package is the one built for the installed pyspark by the installed ``delta-spark``. Spark's
Kafka source (``spark-sql-kafka-0-10`` of the installed pyspark, :func:`kafka_package`) comes the
same way, for pipelines that read Canal's topics (``pycanal pipeline --kafka``).

Below the job (``job``) and the archive's training run (``jvm``), which both start sessions.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import socket
import sys
import zipfile
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pycanal.storage import LakePath

__all__ = [
    "CHECKPOINT_FILE_MANAGER",
    "DRIVER_JAVA_OPTIONS",
    "KAFKA_DRIVER_JAVA_OPTIONS",
    "archive_options",
    "cache_dir",
    "check_java_options",
    "check_master",
    "driver_address",
    "python_jars_only",
    "checkpoint_logs",
    "class_archive",
    "delta_options",
    "delta_package",
    "hadoop_version",
    "kafka_package",
    "s3a_options",
    "s3a_packages",
    "spark_packages",
    "spark_python",
    "spark_session",
]

# The driver JVM's flags. ParallelGC (research/spark.md). C1 only (no C2 JIT): the rows bypass the
# JVM (staged files), so its own work (scheduling, offsets, markers) runs no slower compiled by C1,
# while C2 spent 2-3 s of CPU compiling during a job's first minute (docs/benchmarks.md, "Spark
# pipeline").
DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:TieredStopAtLevel=1"
# The driver JVM's flags where it reads Canal's topics (``pycanal pipeline --kafka``): there every
# record passes through the JVM (Spark's Kafka source, its rows into Arrow for the executors' Python),
# where C2 pays: bench/pipeline.py --via kafka, flat, 5.7k rows/s with C1 only, 6.9k with C2, the
# JVM's CPU 5.3 -> 3.9 s a round (docs/benchmarks.md, "Spark from Kafka").
KAFKA_DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC"

# How Spark writes a query's offset and commit logs. Its default (Hadoop's FileContext API) runs a
# `readlink` or `chmod` process for most steps of a log file on a local filesystem where Hadoop has
# no native library (PySpark ships none): 7-12 processes forked by the driver JVM a micro-batch, the
# two logs' 90 ms of a micro-batch on an idle machine. The FileSystem API writes the same temporary
# file and renames it, with one `chmod` a file: 22 ms (at 5,000 txn/s: docs/benchmarks.md, "The lake
# with many tables"). On a local filesystem neither API's rename is atomic (both check first that
# the target does not exist).
CHECKPOINT_FILE_MANAGER = (
    "spark.sql.streaming.checkpointFileManagerClass",
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
)


def checkpoint_logs(spark: Any) -> None:
    """The session's ``spark.sql.streaming.checkpointFileManagerClass``, where unset, becomes
    ``CHECKPOINT_FILE_MANAGER``'s (a query's logs in a local or mounted directory)."""
    key, manager = CHECKPOINT_FILE_MANAGER
    if spark.conf.get(key, None) is None:
        spark.conf.set(key, manager)


def spark_python() -> str:
    """The Python Spark's processes run: ``pycanal-spark-python`` beside this interpreter
    (``pycanal.spark.python``), or this interpreter where that command is not installed."""
    launcher = Path(sys.executable).with_name("pycanal-spark-python")
    return str(launcher) if os.access(launcher, os.X_OK) else sys.executable


# ---------------------------------------------------------------------- Delta Lake for Spark
def delta_package() -> str:
    """The Maven coordinate of Delta Lake for this pyspark (``io.delta:delta-spark_4.2_2.13:4.4.0``
    for pyspark 4.2 and delta-spark 4.4.0: since Delta 4.1 the artifact names the Spark version)."""
    from importlib.metadata import version

    spark = ".".join(version("pyspark").split(".")[:2])
    return f"io.delta:delta-spark_{spark}_2.13:{version('delta-spark')}"


def kafka_package() -> str:
    """The Maven coordinate of Spark's Kafka source for this pyspark
    (``org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0``)."""
    from importlib.metadata import version

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version('pyspark')}"


def spark_packages() -> str:
    """``spark.jars.packages`` of every session pycanal starts: Delta Lake and Spark's Kafka
    source (fetched together by Ivy once, cached after)."""
    return f"{delta_package()},{kafka_package()}"


def delta_options() -> dict[str, str]:
    """The session settings that put Delta Lake (and Spark's Kafka source) into a session: the
    packages, Delta's SQL extension and catalog; under ``spark-submit`` pass them as
    ``--packages`` / ``--conf``."""
    return {
        "spark.jars.packages": spark_packages(),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }


def local_options(master: str | None) -> dict[str, str]:
    """Where ``master`` runs in this process (``local[N]``), Delta's log replay and Spark's file
    listings in as many tasks as it has threads: their defaults (50 tasks to rebuild a table's
    snapshot, up to 10,000 to list a directory for VACUUM) are a cluster's. On this 2-core
    machine the first read of a table after another writer's commits took 10-20 s, 1-2 s so; a
    VACUUM 47 s, 6 s."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master or "")
    if m is None:
        return {}
    threads = str(os.cpu_count() or 1) if m.group(1) == "*" else m.group(1) or "1"
    return {
        "spark.databricks.delta.snapshotPartitions": threads,
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": threads,
    }


# ---------------------------------------------------------------------- s3a (an object store)
# The AWS SDK v2 that hadoop-aws of each Hadoop release pyspark ships was built against
# (hadoop-project's aws-java-sdk-v2.version).
_AWS_SDK_FOR_HADOOP = {"3.5.0": "2.35.4"}
# hadoop-aws depends on the SDK's `bundle`, 686 MB for 2.35.4: its modules s3a uses instead, 19 MB
# with their dependencies. Of those, the ones pyspark ships in another version (netty 4.2, Apache
# HttpClient, commons-codec, slf4j) are left out, so that one version of each is on the class path.
_S3A_SDK_MODULES = ("s3", "s3-transfer-manager", "sts")
_S3A_EXCLUDES = (
    "software.amazon.awssdk:bundle",
    *(
        f"io.netty:netty-{name}"
        for name in (
            "buffer",
            "codec",
            "codec-http",
            "codec-http2",
            "common",
            "handler",
            "resolver",
            "transport",
            "transport-classes-epoll",
            "transport-native-unix-common",
        )
    ),
    "org.apache.httpcomponents:httpclient",
    "org.apache.httpcomponents:httpcore",
    "commons-codec:commons-codec",
    "commons-logging:commons-logging",
    "org.slf4j:slf4j-api",
)


def hadoop_version() -> str:
    """The Hadoop release pyspark ships (its ``hadoop-client-api-<version>.jar``)."""
    for jar in (_spark_home() / "jars").glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise FileNotFoundError(f"no hadoop-client-api-*.jar in {_spark_home() / 'jars'}")


def s3a_packages() -> str:
    """The Maven coordinates of Hadoop's ``s3a://`` filesystem for this pyspark: hadoop-aws of its
    Hadoop and the AWS SDK modules it needs (``s3a_options`` leaves the SDK's 686 MB bundle out).
    Not in :func:`spark_packages`: only a session whose lake is on an object store needs them."""
    hadoop = hadoop_version()
    sdk = _AWS_SDK_FOR_HADOOP.get(hadoop)
    if sdk is None:
        raise ValueError(
            f"pyspark's Hadoop {hadoop}: no known AWS SDK version for its hadoop-aws "
            f"(known: {', '.join(sorted(_AWS_SDK_FOR_HADOOP))}); add it to _AWS_SDK_FOR_HADOOP"
        )
    modules = ",".join(f"software.amazon.awssdk:{name}:{sdk}" for name in _S3A_SDK_MODULES)
    return f"org.apache.hadoop:hadoop-aws:{hadoop},{modules}"


def s3a_options() -> dict[str, str]:
    """:func:`delta_options` plus ``s3a://``: the packages of both (:func:`s3a_packages`) and the
    exclusions that keep the SDK's bundle and second copies of pyspark's own jars out. The
    filesystem's own settings (endpoint, keys) come from whoever knows the store, e.g.
    ``pycanal.testing.s3.PrivateS3.spark_options``."""
    return {
        **delta_options(),
        "spark.jars.packages": f"{spark_packages()},{s3a_packages()}",
        "spark.jars.excludes": ",".join(_S3A_EXCLUDES),
    }


_AWS_SETTINGS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL",
                 "AWS_ALLOW_HTTP")  # fmt: skip


def lake_options(lake: LakePath) -> dict[str, str]:
    """The session settings a pipeline into ``lake`` needs: none on a local disk; on S3
    :func:`s3a_options` and Hadoop's ``fs.s3a.*`` from the settings obstore and delta-rs use (the
    lake's options, else the AWS environment): an ``AWS_ENDPOINT_URL`` means path-style requests
    (a private store has no bucket host names) and plain HTTP where it says ``http://``; keys
    where they are given (else s3a's own credential chain); the same AWS settings in the executors'
    environment. Spark redacts the secrets in its UI and logs (``spark.redaction.regex``)."""
    if lake.is_local:
        return {}
    given = {k.upper(): v for k, v in lake.storage_options.items()}

    def setting(name: str) -> str | None:
        return given.get(name) or os.environ.get(name) or None

    s3a = "spark.hadoop.fs.s3a."
    out = dict(s3a_options())
    endpoint = setting("AWS_ENDPOINT_URL")
    if endpoint:
        out[f"{s3a}endpoint"] = endpoint
        out[f"{s3a}path.style.access"] = "true"
        out[f"{s3a}connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    region = setting("AWS_REGION") or setting("AWS_DEFAULT_REGION")
    if region:
        out[f"{s3a}endpoint.region"] = region
    key, secret, token = (
        setting(n) for n in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    )
    if key and secret:
        out[f"{s3a}access.key"], out[f"{s3a}secret.key"] = key, secret
        provider = "SimpleAWSCredentialsProvider"
        if token:
            out[f"{s3a}session.token"], provider = token, "TemporaryAWSCredentialsProvider"
        out[f"{s3a}aws.credentials.provider"] = f"org.apache.hadoop.fs.s3a.{provider}"
    # The executors' Python (a stage's files) reads the lake with the same settings as the driver.
    for name in _AWS_SETTINGS:
        if value := setting(name):
            out[f"spark.executorEnv.{name}"] = value
    return out


# ---------------------------------------------------------------------- the class archive
def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(java).resolve() if java and Path(java).exists() else None


def _spark_home() -> Path:
    """pyspark's directory, found without importing pyspark (the command line checks its options
    with this before it starts anything)."""
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")
    return Path(spec.origin).parent


def cache_dir() -> Path:
    """``$PYCANAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/pycanal``, else ``~/.cache/pycanal``."""
    if os.environ.get("PYCANAL_CACHE_DIR"):
        return Path(os.environ["PYCANAL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pycanal"


def class_archive(directory: str | Path | None = None) -> Path | None:
    """Where the driver JVM's class archive of this Java and pyspark lives (whether made or not,
    ``pycanal.spark.jvm`` makes it); None without Java. Named after the jars' directory and their
    sizes and times too: the JVM maps an archive only for the class path it was made with (a
    second checkout's .venv, a .venv made again at the same path)."""
    java = _java()
    if java is None:
        return None
    release = java.parent.parent / "release"
    home = _spark_home()
    jars = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in (home / "jars").glob("*.jar"))
    key = hashlib.sha256(
        repr((str(java), release.read_bytes() if release.exists() else b"", str(home), jars)).encode()
    ).hexdigest()[:16]
    return Path(directory or cache_dir()) / f"spark-classes-{key}.jsa"


def archive_options(archive: str | Path | None = "auto") -> str:
    """The JVM flags that map ``archive`` ("auto": this machine's, where made; None: none). A
    path named explicitly must be an archive file."""
    if archive is None:
        return ""
    if archive == "auto":
        path = class_archive()
        return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""
    if not Path(archive).is_file():
        raise ValueError(f"class archive {archive}: no such file (python -m pycanal.spark.jvm makes one)")
    return f"-XX:SharedArchiveFile={archive}"


# ---------------------------------------------------------------------- the session
# Spark's master URLs (SparkContext's forms; Spark 4 has no Mesos).
_MASTER = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://[^/\s]+:\d+(,[^/\s]+:\d+)*|yarn|k8s://\S+"
)


def check_master(master: str | None) -> None:
    """A master URL Spark takes (None or '': spark-submit's). Spark finds some wrong ones only as
    it starts, behind pyspark's traceback: ``local[0]``, a port out of range, ``yarn`` without the
    cluster's configuration, Mesos (gone in Spark 4). ValueError says what is wrong."""
    if not master:
        return
    if not _MASTER.fullmatch(master):
        raise ValueError(
            "expected a Spark master URL (local[*], local[N], spark://HOST:PORT, yarn, k8s://..., "
            "or '' under spark-submit)"
        )
    if re.match(r"local\[0+[],]", master):
        raise ValueError("local[N] runs N threads: N must be at least 1")
    if master.startswith("spark://") and not all(
        0 < int(one.rpartition(":")[2]) < 65536 for one in master.removeprefix("spark://").split(",")
    ):
        raise ValueError("a port from 1 to 65535 for each master")
    if master == "yarn" and not {"HADOOP_CONF_DIR", "YARN_CONF_DIR"} & os.environ.keys():
        raise ValueError(
            "needs HADOOP_CONF_DIR or YARN_CONF_DIR in the environment (the cluster's configuration)"
        )
    driver_address(master)  # a master this host has no route to


def driver_address(master: str | None) -> str | None:
    """The address the driver binds and gives its executors (``SPARK_LOCAL_IP``, where the
    environment sets none): loopback for ``local[N]``; for ``spark://HOST:PORT``, this host's
    address on the route to the (first) master, the one its workers reach back -- Spark's own
    choice is the host name's address, 127.0.1.1 where /etc/hosts maps it so (Debian's), which no
    other host reaches. None (Spark's choice) for yarn, k8s and under spark-submit. ValueError for
    a master with no route from here."""
    if not master or master.startswith(("yarn", "k8s://")):
        return None
    if not master.startswith("spark://"):
        return "127.0.0.1"
    host, _, port = master.removeprefix("spark://").split(",")[0].rpartition(":")
    try:  # a datagram socket's connect only picks the route and the source address: nothing is sent
        family, _, _, _, where = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(where)
            return str(probe.getsockname()[0])
    except OSError as exc:
        raise ValueError(
            f"no route from this host to the master {host}:{port} ({exc.strerror or exc})"
        ) from None


def check_java_options(flags: str) -> None:
    """Driver JVM flags as Spark's launcher takes them: it refuses unbalanced quotes and ``-Xmx``
    (the heap is ``spark.driver.memory``), and the JVM takes a word that is not a flag for the
    class to run; pyspark reports either as a traceback without the reason. ValueError says what
    is wrong."""
    try:
        words = shlex.split(flags)
    except ValueError as exc:
        raise ValueError(f"{str(exc).lower()} (the flags are split as a shell splits words)") from None
    for word in words:
        if not word.startswith("-"):
            raise ValueError(f"{word!r} is not a JVM flag (the JVM would take it for the class to run)")
        if word.startswith("-Xmx"):
            raise ValueError(
                f"Spark refuses {word} among the driver's flags (its heap is spark.driver.memory)"
            )


def spark_session(
    local_dir: str | Path,
    app: str = "pycanal",
    master: str | None = "local[*]",
    java_options: str = DRIVER_JAVA_OPTIONS,
    class_archive: str | Path | None = "auto",
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A SparkSession with the settings measured on this kind of machine
    (/work/shared/research/spark.md) and pycanal's sources registered. ``master``: Spark's master
    URL (``local[*]``, ``spark://host:7077``, ...); None leaves it to ``spark-submit``.
    ``java_options``: the driver JVM's flags (where this call starts the JVM; under
    ``spark-submit``, its ``--driver-java-options``), with ``class_archive`` mapped
    (``archive_options``: "auto" is this machine's archive where it was made; None: none).
    Delta Lake for Spark is in the session (:func:`delta_options`). A wrong ``master`` or
    ``java_options`` is a ValueError before the JVM starts (:func:`check_master`,
    :func:`check_java_options`). ``conf``: more session settings, applied last (e.g.
    :func:`s3a_options` and an object store's ``spark.hadoop.fs.s3a.*``)."""
    check_master(master)
    check_java_options(java_options)
    if class_archive is not None and "SharedArchiveFile" not in java_options:
        java_options = f"{java_options} {archive_options(class_archive)}".strip()
    address = driver_address(master)
    chosen = address is not None and "SPARK_LOCAL_IP" not in os.environ
    if chosen:  # for the JVM this call starts; a session made later in this process chooses anew
        os.environ["SPARK_LOCAL_IP"] = str(address)
    os.environ["PYSPARK_PYTHON"] = spark_python()  # this venv (pyarrow, pycanal), pyspark not from its zip
    # and the driver's planners (the data sources' lookup: 1.0 s of CPU a process from the zip)
    os.environ["PYSPARK_DRIVER_PYTHON"] = spark_python()
    from pyspark.sql import SparkSession

    from . import register

    Path(local_dir).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    try:
        spark = (
            builder.appName(app)
            .config("spark.driver.memory", "2g")
            .config("spark.driver.extraJavaOptions", java_options)
            .config("spark.local.dir", str(local_dir))
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.python.daemon.module", "pycanal.spark.daemon")  # workers fork with imports done
            .config(map=delta_options())
            .config(map=local_options(master))
            .config(map=dict(conf or {}))
            .getOrCreate()
        )
    finally:
        if chosen:
            del os.environ["SPARK_LOCAL_IP"]
    spark.sparkContext.setLogLevel("ERROR")
    python_jars_only(spark.sparkContext)
    register(spark)  # after: a data source takes the Python path the context has when registered
    return spark


def python_jars_only(sc: Any) -> list[str]:
    """Take the ``spark.jars.packages`` jars that hold no Python off the Python path of the
    driver and of every Python process Spark starts (its workers, data source planners, the
    streaming runner); the jars dropped.

    Spark puts every jar of ``--packages`` on that path (one may carry a Python package, as
    Delta's does). Each Python process then reads the directory of each of them (40 with Delta
    and the Kafka source, the Hadoop client's 30 MB among them) the first time an import or an
    ``importlib.metadata`` lookup walks the path: connectorx's import (its ``__version__``) took
    0.74 s of CPU in a Spark worker against 0.07 s outside, and py-spy had imports at a quarter
    of the snapshot bench's worker samples. The JVM's classpath is not changed."""
    from pyspark import SparkFiles

    root = SparkFiles.getRootDirectory()
    includes = sc._python_includes  # what each task's command tells its worker to put on sys.path
    dropped = [n for n in includes if n.lower().endswith(".jar") and not _holds_python(os.path.join(root, n))]
    if dropped:
        gone = {os.path.join(root, n) for n in dropped}
        includes[:] = [n for n in includes if n not in dropped]
        sys.path[:] = [p for p in sys.path if p not in gone]
    return dropped


def _holds_python(jar: str) -> bool:
    """Whether the jar has a Python module (True where it cannot be read: left as Spark put it)."""
    try:
        with zipfile.ZipFile(jar) as z:
            return any(name.endswith(".py") for name in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return True


if __name__ == "__main__":  # scripts/setup.sh: Delta Lake and the Kafka source into Ivy's cache, once
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pycanal-delta-") as tmp:
        spark_session(tmp, "pycanal-setup", class_archive=None).stop()
    print(f"pycanal: {spark_packages().replace(',', ' and ')} in Spark's Ivy cache")
