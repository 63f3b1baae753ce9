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


def _fields(pid: int) -> list[str] | None:
    """The fields of `/proc/PID/stat` after comm (state, ppid, pgrp, session, ...), or None
    if the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the
    # last ')'.
    return text[text.rindex(")") + 2:].split()


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter), or None if the process is gone."""
    fields = _fields(pid)
    return None if fields is None else (int(fields[1]), fields[0])


def started(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (proc(5): `/proc/PID/stat`
    field 22, starttime), or None if it is gone: with the pid, it names one process, not
    a later one given the same pid."""
    fields = _fields(pid)
    return None if fields is None else int(fields[19])


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


def group_members(pgid: int) -> list[int]:
    """Every live process of process group `pgid` (proc(5): `/proc/PID/stat` field 5 is
    the process group), zombies excluded; empty where there is no /proc."""
    found = []
    for entry in PROC.glob("[0-9]*"):
        fields = _fields(int(entry.name))
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def command_lines() -> dict[int, list[bytes]]:
    """Every live process's arguments (proc(5): `/proc/PID/cmdline`, NUL-separated; empty
    for a zombie, and for a process gone since: both left out); empty where there is no
    /proc."""
    found: dict[int, list[bytes]] = {}
    for entry in PROC.glob("[0-9]*"):
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            found[int(entry.name)] = raw.rstrip(b"\0").split(b"\0")
    return found


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] != "Z"


def stop(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM each (a JVM runs its shutdown hooks: Spark removes its temp directories),
    SIGKILL what is still alive after `grace_s`. Waits for them to exit (a zombie counts as
    exited), never reaps: a child of ours is reaped by the `Popen` that started it.

    Issue 41 (F2a, a demo hung for good on Ctrl-C during Spark's start-up): this used to
    `waitpid` the pids that are our children. The JVM's launcher is one, and its `Popen`
    is inside PySpark's `launch_gateway`, which waits `while not proc.poll() and not
    os.path.isfile(conn_info_file)` (pyspark/java_gateway.py, 4.3.0). A child's status can
    be collected once (waitpid(2)); after it was taken here, `Popen.poll` gets ECHILD and
    sets returncode 0 (CPython Lib/subprocess.py `_internal_poll`: "This child is dead, we
    can't get the status"), `not 0` is true, and launch_gateway waited forever for a file a
    dead JVM never writes. So did everything that waited for that start-up."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
