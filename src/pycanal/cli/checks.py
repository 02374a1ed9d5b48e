"""The command line's checks of its options: each bad value is one ``CliError`` line naming the
option and the value, raised before anything starts (a server, a JVM, a directory)."""

from __future__ import annotations

import os
import re
from pathlib import Path

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


def lake_dir(option: str, path: Path) -> Path:
    """The lake of a pipeline that ran (it holds ``_pycanal``), resolved."""
    lake = path.resolve()
    if not (lake / "_pycanal").is_dir():
        what = "no such directory" if not lake.exists() else "not a pipeline's lake (no _pycanal/ in it)"
        raise CliError(f"{shown(option, str(path))}: {what}")
    return lake


def new_lake(option: str, path: Path) -> Path:
    """The lake directory, made (with its parents) and written to once; the last check of a
    command, so that a bad option elsewhere leaves nothing behind. What it made is removed again
    when the lake cannot be written (``os.access`` says yes to root everywhere: only a write
    tells)."""
    lake = path.resolve()
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
        raise CliError(f"{shown(option, str(path))}: {exc.strerror or exc}") from None
    return lake
