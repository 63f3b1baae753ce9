"""Whether a dead round's tasks are gone too, as the driver's own host can tell (issue 41,
newuser4 F3: `gc-admin reset` waited the whole 240 s stop bound after `kill -9` of a round
whose every process had already exited).

With a local master every process that sends a delete for the round is below the driver:
its JVM (the executors are its threads), the JVM's Python daemon and workers. The driver
puts a mark in its environment before it launches its JVM (`mark`), and every process
below it inherits it: fork and exec keep the environment, and so does Spark's launch of
its Python workers (Java's `ProcessBuilder.environment()`: "The initial value is a copy of
the environment of the current process", https://docs.oracle.com/en/java/javase/17/docs/
api/java.base/java/lang/ProcessBuilder.html). A round writes the mark in its START only
when its master is local and its JVM carries the mark (`start_fields`). A recovery on
the same host (same boot, same pid namespace) then knows its tasks are gone when its
driver is gone (`journal.Driver.gone`) and no process of the driver's user carries the
mark (`/proc/PID/environ`, the environment a process started with, proc(5)). Anything it
cannot read, another host, a cluster master: not known, the recovery waits the bound.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from epochgc.impl.gc.journal import Driver
from epochgc.impl.gc.lease import holder_running
from epochgc.impl.proctree import env_value

TREE_ENV = "EPOCHGC_DRIVER_TREE"
PROC = Path("/proc")


def _token(driver: Driver) -> str | None:
    if driver.boot_id is None or driver.start_ticks is None:
        return None
    return f"{driver.boot_id}:{driver.pid}:{driver.start_ticks}"


def mark() -> None:
    """Put this process's mark in its environment: every process it starts from now on
    (its Spark JVM, and below it the Python workers) carries it."""
    token = _token(Driver.this_process())
    if token is not None:
        os.environ[TREE_ENV] = token


def start_fields(master: str, jvm_pid: int | None) -> dict[str, Any]:
    """What a round's START says about where its tasks run: `driver_tree` only when they
    all run below this process on this host (a local master, and the JVM `jvm_pid` this
    process launched carries its mark); else nothing (a recovery waits the bound)."""
    me = Driver.this_process()
    token = _token(me)
    if (token is None or not master.startswith("local") or jvm_pid is None
            or env_value(jvm_pid, TREE_ENV) != token):
        return {}
    return {"driver_tree": {"driver": asdict(me), "uid": os.getuid(), "mark": token}}


def of_session(spark: Any) -> dict[str, Any]:
    """`start_fields` for a running SparkSession (its master, the JVM PySpark launched for
    this process: none under spark-submit)."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    pid = getattr(proc, "pid", None)
    return start_fields(spark.sparkContext.master or "", pid if isinstance(pid, int) else None)


def tasks_gone(start: dict[str, Any]) -> bool:
    """True only when known: the START says every task ran below its driver on a host
    that is this one, the driver is gone, and no process of its user carries its mark."""
    tree = start.get("driver_tree")
    if not isinstance(tree, dict):
        return False
    driver, uid, token = tree.get("driver"), tree.get("uid"), tree.get("mark")
    # The mark is ASCII (`_token`): one that is not (a lone surrogate read from a damaged
    # START) would raise from `encode` below (review rev38z10 finding 1's class).
    if not (isinstance(driver, dict) and isinstance(token, str) and token.isascii()
            and isinstance(uid, int) and not isinstance(uid, bool)):
        return False
    if holder_running({"driver": driver}) is not False:
        return False  # running, or another host or container: cannot tell
    ticks = driver.get("start_ticks")
    # ASCII digits only: `isdigit` also takes "²", which `int` refuses (review rev38z10).
    if not (isinstance(ticks, str) and ticks.isascii() and ticks.isdigit()):
        return False
    return not _marked(token, uid, int(ticks))


def _marked(token: str, uid: int, since: int) -> bool:
    """Whether a process of user `uid` started at or after tick `since` (the driver's
    start: a process below it cannot be older) carries `token`; True also when such a
    process cannot be read (it may)."""
    want = f"{TREE_ENV}={token}".encode()
    for entry in PROC.glob("[0-9]*"):
        try:
            if entry.stat().st_uid != uid:
                continue  # a process below the driver runs as its user
            stat = (entry / "stat").read_text()
            # proc(5): field 22 is the start time in ticks since boot; the command name
            # (field 2) may hold spaces and parentheses, so fields count from the last ')'
            fields = stat.rpartition(")")[2].split()
            if len(fields) <= 19 or int(fields[19]) < since:
                continue
            env = (entry / "environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile; ESRCH: a kernel thread or an exiting process
        except (OSError, ValueError):
            return True  # cannot tell
        if want in env.split(b"\0"):
            return True
    return False
