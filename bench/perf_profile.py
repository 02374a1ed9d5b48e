"""``perf`` profiles of a server process tree, for code Cython compiled: py-spy sees a compiled
twin's frames as the Python frame that called it, perf sees every C function.

:func:`record` samples the whole machine (999 Hz, DWARF stacks: CPython has no frame pointers);
:func:`report` keeps the samples of the server's processes and, per thread, charges each sample to
the nearest function of a compiled twin on its stack (the CPython and libc functions under it are
that function's work), then lists the flat leaves. Needs ``perf`` (Debian's ``linux-perf``) and
the right to sample the machine (root, or ``kernel.perf_event_paranoid`` <= 0).
"""

from __future__ import annotations

import collections
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["record", "report"]


def record(out: Path) -> Any:
    """``perf record`` of the machine into ``out``; stop it with SIGINT."""
    exe = shutil.which("perf")
    if exe is None:
        raise SystemExit("perf is missing: install Debian's linux-perf to profile with --profiler perf")
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [exe, "record", "-F", "999", "--call-graph", "dwarf,16384", "-a", "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _samples(data: Path) -> list[tuple[int, int, list[tuple[str, str]]]]:
    """(pid, tid, [(function, library), ...] leaf first) of every sample in ``data``."""
    text = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "pid,tid,ip,sym,dso"], capture_output=True, text=True
    ).stdout
    out: list[tuple[int, int, list[tuple[str, str]]]] = []
    for block in text.split("\n\n"):
        lines = block.strip("\n").splitlines()
        if not lines or "/" not in lines[0]:
            continue
        pid, tid = (int(x) for x in lines[0].split()[0].split("/"))
        stack = []
        for line in lines[1:]:
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and " (" in parts[1]:
                sym, lib = parts[1].rsplit(" (", 1)
                stack.append((sym.split("+0x")[0], lib.rstrip(")").rsplit("/", 1)[-1]))
        out.append((pid, tid, stack))
    return out


def report(data: Path, pids: set[int], top: int = 25) -> str:
    """The threads of processes ``pids`` in ``data``: per thread its samples, the share charged to
    each compiled function (nearest on the stack), and the flat leaves."""
    by_tid: dict[tuple[int, int], list[list[tuple[str, str]]]] = collections.defaultdict(list)
    for pid, tid, stack in _samples(data):
        if pid in pids:
            by_tid[pid, tid].append(stack)
    lines = []
    for (pid, tid), stacks in sorted(by_tid.items(), key=lambda kv: -len(kv[1])):
        n = len(stacks)
        lines.append(f"== process {pid} thread {tid}: {n} samples ({n / 999:.2f} s of CPU)")
        owner: collections.Counter[str] = collections.Counter()
        leaf: collections.Counter[str] = collections.Counter()
        for stack in stacks:
            if stack:
                leaf[f"{stack[0][0]} ({stack[0][1]})"] += 1
            twin = next((f for f, lib in stack if lib.startswith("_") and "cpython" in lib), "(no twin)")
            owner[twin.removeprefix("__pyx_")] += 1
        lines.append("-- charged to the nearest compiled function")
        lines += [f"{c * 100 / n:5.1f}% {f}" for f, c in owner.most_common(top)]
        lines.append("-- flat (the leaf)")
        lines += [f"{c * 100 / n:5.1f}% {f}" for f, c in leaf.most_common(top)]
    return "\n".join(lines) + "\n"
