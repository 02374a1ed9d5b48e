"""What the private servers (MariaDB, ZooKeeper, Canal, the Spark cluster) share: a free loopback port,
a child process that dies with its parent, a stop that also works on a paused process, and
:class:`PrivateServer`, the life cycle of one server in a temporary directory, written once:

* :meth:`~PrivateServer.start` makes the directory and runs the subclass's ``_start``, which writes its
  files and launches the process on a free port (:meth:`~PrivateServer._launch_on_free_port`, retried
  when another process takes the port first) and waits until it serves (:meth:`~PrivateServer._wait`:
  a deadline, and the server's own log lines in the error). On any failure the process is stopped and
  the directory removed.
* :meth:`~PrivateServer.stop` stops the process and removes the directory unless ``keep``; idempotent.
* A weakref finalizer does the same at interpreter exit for a server that was never stopped.
"""

from __future__ import annotations

import abc
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

_PORT_ATTEMPTS = 8
_ERROR_LINE = re.compile(r"\b(ERROR|FATAL|SEVERE)\b|Exception:")


def free_port() -> int:
    """A loopback port that was free a moment ago (callers retry if the server cannot bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(path: Path, start: int = 0) -> str:
    """The file from byte ``start`` (from its beginning if it is shorter now: truncated), or ""."""
    try:
        with open(path, "rb") as f:
            if start and f.seek(0, os.SEEK_END) >= start:
                f.seek(start)
            else:
                f.seek(0)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, or "" if it cannot be read (for start-up error messages)."""
    return "\n".join(_read(path).splitlines()[-lines:])


def find_java() -> str:
    """The ``java`` binary (ZooKeeper, Canal): ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise FileNotFoundError("java not found on PATH; install a JRE (openjdk-17-jre-headless)")
    return found


def _die_with_parent(signum: int) -> Callable[[], None]:
    """A ``preexec_fn``: the kernel sends ``signum`` to the child when the thread that started it
    exits (Linux's PR_SET_PDEATHSIG)."""

    def preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signum)
        except Exception:
            pass

    return preexec


def spawn(
    command: Sequence[str],
    output: Path,
    *,
    death_signal: int | None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    append: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``command`` with no stdin and its output in ``output``. With ``death_signal`` (on Linux) the
    kernel sends it that signal when the thread that started it exits, so a killed test run leaves no
    server behind."""
    linux = sys.platform.startswith("linux")
    preexec = _die_with_parent(death_signal) if death_signal is not None and linux else None
    with open(output, "ab" if append else "wb") as out:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
        )


def terminate(procs: Iterable[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM each running process (after SIGCONT: a paused one cannot handle it), then SIGKILL
    whichever still runs ``grace`` seconds later."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
    for proc in running:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _emergency_cleanup(proc: subprocess.Popen[bytes] | None, root: Path, keep: bool) -> None:
    """Run at interpreter exit (or garbage collection) for a server that was never stopped, and for
    one that failed to start."""
    if proc is not None:
        terminate([proc], 15)
    if not keep:
        shutil.rmtree(root, ignore_errors=True)


class PortTaken(Exception):
    """The server could not bind its port (another process took it after :func:`free_port`)."""


class PrivateServer(abc.ABC):
    """One server process in a temporary directory of its own (see the module docstring).

    A subclass names itself (``name``, ``dir_prefix``, ``start_error``), says which files hold its log
    lines (``_log_files``) and writes ``_start``; it may change how it stops (``_shut_down``).

    Parameters:
        keep: keep the temporary directory after :meth:`stop` (for post-mortems).
        startup_timeout: seconds from the launch until the server must serve.
        base_dir: where to create the temporary directory (default: the system temp dir).
        die_with_parent: on Linux, the kernel sends the server ``death_signal`` when the thread that
            started it exits. Pass False when starting the server from a short-lived thread.
    """

    host = "127.0.0.1"
    name: ClassVar[str]
    """The server in messages."""
    dir_prefix: ClassVar[str]
    """The temporary directory's name starts ``pycanal-<dir_prefix>-``."""
    start_error: ClassVar[type[RuntimeError]]
    death_signal: ClassVar[int] = signal.SIGKILL
    """What the server gets when the test process dies: a throw-away server needs no clean shutdown."""
    stop_grace: ClassVar[float] = 15.0
    """Seconds between SIGTERM and SIGKILL in :meth:`stop`."""
    bind_error: ClassVar[re.Pattern[str]] = re.compile(r"Address already in use|BindException")
    """What the server logs when its port is taken."""

    def __init__(
        self,
        *,
        keep: bool,
        startup_timeout: float,
        base_dir: str | os.PathLike[str] | None,
        die_with_parent: bool,
    ) -> None:
        self.keep = keep
        self.startup_timeout = startup_timeout
        self._base_dir = base_dir
        self.die_with_parent = die_with_parent
        self.port = 0
        self.root_dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0
        self._deadline = 0.0
        self._finalizer: weakref.finalize | None = None
        self._stopped = False
        self._log_marks: dict[Path, int] = {}

    def __enter__(self) -> Self:
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> Self:
        """Make the temporary directory, start the server and wait until it serves."""
        if self.process is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        t0 = time.monotonic()
        self.root_dir = Path(tempfile.mkdtemp(prefix=f"pycanal-{self.dir_prefix}-", dir=self._temp_parent()))
        self._finalizer = weakref.finalize(self, _emergency_cleanup, None, self.root_dir, self.keep)
        try:
            self._start()
        except BaseException:
            self._finalizer()  # stops the process, removes the directory unless keep
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop the server and remove the temporary directory unless ``keep``. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._shut_down()
        if self._finalizer is not None:
            self._finalizer.detach()
        if not self.keep and self.root_dir is not None:
            shutil.rmtree(self.root_dir, ignore_errors=True)

    def logs(self, lines: int = 40) -> str:
        """The tails of the server's logs, for error messages."""
        parts = []
        for path in self._log_files():
            text = tail(path, lines)
            if text.strip():
                parts.append(f"--- {path}\n{text}")
        return "\n".join(parts) or f"({self.name} wrote no log)"

    # ------------------------------------------------------------------ for subclasses
    @abc.abstractmethod
    def _start(self) -> None:
        """Write the server's files into ``root_dir``, launch it and wait until it serves."""

    @abc.abstractmethod
    def _log_files(self) -> list[Path]:
        """The files :meth:`logs` shows."""

    def _temp_parent(self) -> Path:
        return Path(self._base_dir) if self._base_dir is not None else Path(tempfile.gettempdir())

    def _shut_down(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_grace`` seconds."""
        if self.process is not None:
            terminate([self.process], self.stop_grace)

    def _restart(
        self, kill: bool, relaunch: Callable[[], None], stop: Callable[[], None] | None = None
    ) -> None:
        """A subclass's ``restart``: stop the running server (SIGKILL with ``kill``, as a crash;
        else ``stop``, default :meth:`_shut_down`) and ``relaunch`` it on the same port and
        directory; ``start_error`` when the port was taken meanwhile."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        if kill:
            proc.kill()
            proc.wait(10)
        else:
            (stop or self._shut_down)()
        try:
            relaunch()
        except PortTaken:
            raise self.start_error(f"{self.name} could not bind port {self.port} again on restart") from None

    def _launch(
        self,
        command: Sequence[str],
        output: Path,
        *,
        cwd: Path | None = None,
        append: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start the server process (``env``: its whole environment, default ours), its output in
        ``output``; its start-up deadline counts from now."""
        self._log_marks = {path: path.stat().st_size for path in self._log_files() if path.exists()}
        self.process = spawn(
            command,
            output,
            cwd=cwd,
            env=env,
            append=append,
            death_signal=self.death_signal if self.die_with_parent else None,
        )
        assert self._finalizer is not None and self.root_dir is not None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _emergency_cleanup, self.process, self.root_dir, self.keep)
        self._deadline = time.monotonic() + self.startup_timeout

    def _launch_on_free_port(self, launch: Callable[[], None]) -> None:
        """``launch()`` (which launches and waits) on free ports until the server could bind one."""
        for _ in range(_PORT_ATTEMPTS):
            self.port = free_port()
            try:
                launch()
                return
            except PortTaken:
                if self.process is not None:
                    terminate([self.process], self.stop_grace)
                self.process = None
        raise self.start_error(
            f"{self.name} could not bind a free port after {_PORT_ATTEMPTS} attempts\n{self.logs()}"
        )

    def _wait(self, missing: Callable[[], str | None], interval: float = 0.05) -> None:
        """Poll until ``missing()`` — what the server has yet to do ("did not start"), or None — is None.

        Raises :exc:`PortTaken` when the process exited because its port was taken, and ``start_error``
        with the logs' tails when it exited otherwise or the start-up deadline passed."""
        assert self.process is not None
        while True:
            returncode = self.process.poll()
            if returncode is not None:
                raise self._exit_error(returncode)
            lacking = missing()
            if lacking is None:
                return
            if time.monotonic() > self._deadline:
                raise self.start_error(
                    f"{self.name} {lacking} within {self.startup_timeout:g}s\n{self.logs()}"
                )
            time.sleep(interval)

    def _exit_error(self, returncode: int) -> Exception:
        """Why the process ended during start-up. All this launch wrote is searched, not a tail: a
        broker that cannot bind logs its shutdown after the bind error, more lines than a tail
        shows; and not what earlier launches appended (a restart after a port clash)."""
        marks = self._log_marks
        whole = "\n".join(_read(path, marks.get(path, 0)) for path in self._log_files())
        if self.bind_error.search(whole):
            return PortTaken()
        first = next((line for line in whole.splitlines() if _ERROR_LINE.search(line)), None)
        cause = f"first error: {first}\n" if first else ""
        return self.start_error(
            f"{self.name} exited with code {returncode} during start-up:\n{cause}{self.logs()}"
        )

    @property
    def _state(self) -> str:
        return "running" if self.running else ("stopped" if self._stopped else "not started")
