"""The command line's checks of its options: each bad value is one ``CliError`` line naming the
option and the value, raised before anything starts (a server, a JVM, a directory)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pycanal.storage import LakePath

__all__ = [
    "CliError",
    "address",
    "choice",
    "count",
    "fraction",
    "given_file",
    "lake_dir",
    "new_lake",
    "regex",
    "shown",
]


class CliError(Exception):
    """One line for the user (``pycanal: error: <message>``) and the exit code: 2 for a bad
    option, 1 for a failure while running."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[type[CliError], tuple[str, int]]:
        return CliError, (str(self), self.code)  # raised in a worker process too (its code kept)


_SECRET = re.compile(r"password|passwd|secret", re.I)


def shown(option: str, value: object) -> str:
    """``--option 'value'``, with the value of a password option masked."""
    return f"{option} {'***' if _SECRET.search(option) else repr(value)}"


def address(option: str, text: str, default_port: int | None = None) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``) -> (host, port); without a port, ``default_port`` or an error."""
    host, sep, port = text.rpartition(":")
    if not sep or "]" in port:
        host, port = text, ""
    host = host.strip("[]")
    if not port and default_port is not None and host:
        return host, default_port
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"{shown(option, text)}: expected HOST:PORT (a port from 1 to 65535)")
    return host, int(port)


def count(option: str, value: int | None, minimum: int = 1) -> None:
    """A whole number of at least ``minimum`` (None: not given)."""
    if value is not None and value < minimum:
        raise CliError(f"{shown(option, value)}: must be at least {minimum}")


def fraction(option: str, value: float, *, zero: bool = False) -> None:
    """A share: above 0 (or 0 with ``zero``) and at most 1."""
    if not (0 <= value <= 1 if zero else 0 < value <= 1):
        raise CliError(f"{shown(option, value)}: must be {'from' if zero else 'above'} 0 to 1")


def choice(option: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise CliError(f"{shown(option, value)}: must be one of {', '.join(allowed)}")


def regex(option: str, text: str | None) -> None:
    """A Canal table filter: comma-separated regexes on ``schema.table``."""
    if not text:
        return
    from pycanal.parse.filter import TableFilter

    try:
        TableFilter(text)
    except ValueError as exc:
        raise CliError(f"{shown(option, text)}: {exc}") from None


def given_file(what: str, path: Path) -> None:
    """An existing, readable regular file."""
    if not path.exists():
        raise CliError(f"{what} {str(path)!r}: no such file")
    if not path.is_file():
        raise CliError(f"{what} {str(path)!r}: not a file")
    if not os.access(path, os.R_OK):
        raise CliError(f"{what} {str(path)!r}: not readable")


def kafka_settings(option: str, items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items of a Kafka client (a ``kafka.`` prefix dropped, as canal.properties
    writes them); the value is never shown: it may be a password."""
    settings: dict[str, str] = {}
    for i, item in enumerate(items, 1):
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("kafka.")
        if not sep or not key:
            raise CliError(f"{option} #{i}: expected KEY=VALUE")
        settings[key] = value.strip()
    return settings


def lake_uri(option: str, text: str) -> LakePath:
    from pycanal.storage import lake_path

    try:
        return lake_path(text)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}") from None


def lake_dir(option: str, text: str) -> LakePath:
    """The lake of a pipeline that ran (it holds ``_pycanal``): a path (resolved) or ``s3://`` URI."""
    from pycanal.storage import StorageError

    lake = lake_uri(option, text)
    try:
        if not (lake / "_pycanal").exists():
            what = "no such directory" if not lake.exists() else "not a pipeline's lake (no _pycanal/ in it)"
            raise CliError(f"{shown(option, text)}: {what}")
    except StorageError as exc:
        raise CliError(f"{option}: {exc}") from None
    return lake


def new_lake(option: str, text: str) -> LakePath:
    """The lake, written to once (on S3 also created twice under one key, which a store must
    refuse: that is what keeps two writers' commits apart); the last check of a command, so
    that a bad option elsewhere leaves nothing behind."""
    lake = lake_uri(option, text)
    if lake.is_local:
        return _new_local_lake(option, text, lake.local)
    from pycanal.storage import StorageError

    probe = lake / f"_pycanal/probe-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        refused = probe.put_if_absent(b"") and not probe.put_if_absent(b"")
        probe.unlink()
    except StorageError as exc:
        raise CliError(f"{option}: {exc}") from None
    if not refused:
        raise CliError(
            f"{option} {lake.uri}: the store replaced an object that a create-only write (If-None-Match: *) "
            "should have refused; pycanal commits need that guarantee (S3 since 2024-08, MinIO, S3Proxy)"
        )
    return lake


def _new_local_lake(option: str, text: str, lake: Path) -> LakePath:
    """The lake directory, made (with its parents) and written to once. What it made is removed
    again when the lake cannot be written (``os.access`` says yes to root everywhere: only a write
    tells)."""
    from pycanal.storage import lake_path

    top = lake
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    made = not top.exists()
    try:
        lake.mkdir(parents=True, exist_ok=True)
        probe = lake / f".pycanal-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        if made:
            import shutil

            shutil.rmtree(top, ignore_errors=True)
        raise CliError(f"{shown(option, text)}: {exc.strerror or exc}") from None
    return lake_path(lake)
