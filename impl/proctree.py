"""This process's descendants, read from Linux's /proc (proc(5): `/proc/PID/stat` field 4 is
the parent's pid, `/proc/PID/environ` the environment the process was started with).

Used to stop the Spark JVM a command started when it is interrupted while the JVM is still
starting: PySpark keeps the JVM's `Popen` inside `launch_gateway` until the JVM has
answered, so there is no handle to it before then. Elsewhere (not Linux) the lists are
empty and the JVM ends by itself once it sees its stdin closed (PySpark's own scheme).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter), or None if the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the
    # last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0]


def descendants(root: int) -> list[int]:
    """Every live process below `root` (children, their children...), zombies excluded."""
    parents: dict[int, int] = {}
    for entry in PROC.glob("[0-9]*"):
        st = _stat(int(entry.name))
        if st is not None and st[1] != "Z":
            parents[int(entry.name)] = st[0]
    found: list[int] = []
    frontier = [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        frontier += kids
    return found


def has_env(pid: int, name: str) -> bool:
    """Whether process `pid` was started with environment variable `name` set."""
    try:
        env = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return any(v.startswith(name.encode() + b"=") for v in env.split(b"\0"))


def env_value(pid: int, name: str) -> str | None:
    """The value of environment variable `name` process `pid` was started with, or None."""
    try:
        env = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    key = name.encode() + b"="
    for v in env.split(b"\0"):
        if v.startswith(key):
            return v[len(key):].decode(errors="replace")
    return None


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] != "Z"


def stop(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM each (a JVM runs its shutdown hooks: Spark removes its temp directories),
    SIGKILL what is still alive after `grace_s`; reaps those that are our children."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        if not any(alive(p) for p in pids):
            return
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
