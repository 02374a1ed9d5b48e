"""How Canal's server is run: its jars (cached by ``setup.sh``), the launcher that wires it
(``scripts/canal/PycanalCanalMain.java``, compiled on first use) and the JVM's command line."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .._process import find_java

CANAL_VERSION = "1.1.7"
"""The Canal release that runs (scripts/canal/pom.xml): 1.1.8's server is not on Maven Central."""

MAIN_CLASS = "PycanalCanalMain"

JVM_FLAGS = (
    "-Xss1m",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Dfile.encoding=UTF-8",
    "-DappName=otter-canal",
)
"""JVM options of Canal's ``startup.sh`` (1.1.8, Java >= 11) but its heap (``-Xms2g -Xmx3g``; ``heap_mb``
here), GC (``quick_start``), heap dumps and ``-XX:-UseBiasedLocking`` (deprecated in Java 17, gone in 18)."""

_LAUNCHER_SOURCE = Path(__file__).resolve().parents[4] / "scripts" / "canal" / f"{MAIN_CLASS}.java"


class CanalStartError(RuntimeError):
    """Canal could not be started, or did not serve in time."""


def canal_home() -> Path:
    """Where ``setup.sh`` puts Canal's jars (``lib/``): ``$PYCANAL_CANAL_HOME``, else
    ``~/.cache/pycanal/canal-<version>``."""
    override = os.environ.get("PYCANAL_CANAL_HOME")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "pycanal" / f"canal-{CANAL_VERSION}"


def _javac_for(java: str) -> str:
    sibling = Path(os.path.realpath(java)).parent / "javac"
    if sibling.is_file():
        return str(sibling)
    found = shutil.which("javac")
    if not found:
        raise FileNotFoundError("javac not found: install a JDK (openjdk-17-jdk-headless)")
    return found


def _launcher_classes(home: Path, lib: Path, java: str) -> Path:
    """The compiled launcher, made on first use (and again whenever its source changes)."""
    source = _LAUNCHER_SOURCE.read_bytes()
    out = home / f"launcher-{hashlib.sha256(source).hexdigest()[:12]}"
    if (out / f"{MAIN_CLASS}.class").is_file():
        return out
    work = Path(tempfile.mkdtemp(prefix=".launcher-", dir=home))
    try:
        proc = subprocess.run(
            [_javac_for(java), "--release", "8", "-nowarn", "-encoding", "UTF-8", "-cp", f"{lib}/*"]
            + ["-d", str(work), str(_LAUNCHER_SOURCE)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise CanalStartError(f"javac {_LAUNCHER_SOURCE} failed:\n{proc.stdout}{proc.stderr}")
        with contextlib.suppress(OSError):  # a parallel session made it first
            work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def canal_classpath(java: str | None = None) -> list[str]:
    """Canal's runtime classpath after the conf dir: the launcher's classes and the cached jars."""
    home = canal_home()
    lib = home / "lib"
    if not any(lib.glob("canal.server-*.jar")):
        raise FileNotFoundError(
            f"Canal {CANAL_VERSION}'s jars are not in {lib}: run scripts/setup.sh (mvn copies them there) "
            "or point PYCANAL_CANAL_HOME at a directory with lib/"
        )
    if not _LAUNCHER_SOURCE.is_file():
        raise FileNotFoundError(f"{_LAUNCHER_SOURCE} is missing: PrivateCanal runs from a pycanal checkout")
    classes = _launcher_classes(home, lib, java or find_java())
    return [str(classes), f"{lib}/*"]


def java_command(
    java: str,
    classpath: Sequence[str],
    conf_dir: Path,
    *,
    heap_mb: int,
    quick_start: bool,
    timezone: str | None,
    jvm_args: Sequence[str],
) -> list[str]:
    """The JVM running the launcher on the conf dir (see :class:`~pycanal.testing.canal.PrivateCanal`)."""
    cmd = [java, f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", *JVM_FLAGS]
    if quick_start:
        cmd += ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
    else:
        cmd += ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=250", "-XX:+UseGCOverheadLimit"]
        cmd += ["-XX:+ExplicitGCInvokesConcurrent"]
    if timezone:
        cmd.append(f"-Duser.timezone={timezone}")
    return [
        *cmd,
        f"-Dlogback.configurationFile={conf_dir / 'logback.xml'}",
        f"-Dcanal.conf={conf_dir / 'canal.properties'}",
        *jvm_args,
        "-cp",
        os.pathsep.join([str(conf_dir), *classpath]),
        MAIN_CLASS,
    ]
