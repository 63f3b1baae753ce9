"""Run as a process of its own (`python -m tests.gc.py4j_race_probe`): start a local Spark
session as `epochgc gc` does, then stop it with `stop_spark()` as a finished round does,
with a py4j call made to race the JVM's exit at the moment the stop tells the JVM to exit
(its stdin closed). Used by tests/gc/test_py4j_stop_race.py.

The race, made deterministic (issue 41, newuser5 G4): a Python reference to a Java object
is dropped, so py4j's finalizer thread sends the object's release (`m d`) on its own
connection; the JVM is stopped (SIGSTOP) first so that the request stays unread, and once
the thread waits for the answer the JVM is killed: its socket, closed with the request
unread, answers with a reset, as when the request lands while the JVM exits. Where the
stop has already ended py4j's calls, the release is never sent and nothing is waited for.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

LIMIT_S = float(os.environ.get("PROBE_LIMIT_S", "600"))  # a hang bound, not a timing one


def _frames(thread: threading.Thread) -> list[FrameType]:
    frame = sys._current_frames().get(thread.ident or -1)
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def _sending(thread: threading.Thread) -> bool:
    """The thread is inside py4j's `send_command` (sent, or about to)."""
    return any(f.f_code.co_name == "send_command" for f in _frames(thread))


def _waiting_for_answer(thread: threading.Thread) -> bool:
    """The thread has sent its command and reads the answer (a socket read under
    `send_command`)."""
    frames = _frames(thread)
    return bool(frames) and _sending(thread) and frames[0].f_code.co_name == "readinto"


def _idle(thread: threading.Thread, queue: Any) -> bool:
    """The finalizer thread has nothing queued and sleeps between polls."""
    frames = _frames(thread)
    return (not queue and bool(frames) and frames[0].f_code.co_name == "run"
            and "sleep" in _line(frames[0]))


def _line(frame: FrameType) -> str:
    import linecache

    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def _until(what: str, cond: Any) -> None:
    limit = time.monotonic() + LIMIT_S
    while not cond():
        if time.monotonic() > limit:
            sys.exit(f"probe: never {what}")
        time.sleep(0.01)  # polls for a state; the order of events does not depend on it


def main() -> None:
    logging.basicConfig()  # as the command's users saw it: "ERROR:root:..."
    from py4j.clientserver import FinalizerWorker
    from pyspark import SparkContext

    from epochgc.impl.gc.session import spark_session, stop_spark

    sc: Any = spark_session("local[1]", "epochgc-py4j-race-probe").sparkContext
    gateway: Any = SparkContext._gateway
    client = gateway._gateway_client
    queue = client.finalizer_deque
    [worker] = [t for t in threading.enumerate()
                if isinstance(t, FinalizerWorker) and t.deque is queue]
    # The finalizer thread gets its own connection, as it does in a round (every Java
    # object a round drops is released through it).
    first = sc._jvm.java.lang.Object()
    del first
    gc.collect()
    _until("saw the first release sent", lambda: _idle(worker, queue))
    held = [sc._jvm.java.lang.Object()]
    jvm = gateway.proc.pid
    stdin = gateway.proc.stdin

    class RaceAtExit:
        """The JVM's stdin; its `close` (the JVM is told to exit) first makes the race."""

        def close(self) -> None:
            print("probe: the JVM is told to exit", file=sys.stderr, flush=True)
            os.kill(jvm, signal.SIGSTOP)
            held.clear()
            gc.collect()  # the release is queued for the finalizer thread
            live = worker.is_alive() and client.is_connected
            if live:
                _until("sent the release", lambda: _waiting_for_answer(worker))
            os.kill(jvm, signal.SIGKILL)
            if live:
                _until("had the release's answer", lambda: not _sending(worker))
            stdin.close()

    gateway.proc.stdin = RaceAtExit()
    print("probe: stopping", file=sys.stderr, flush=True)
    stop_spark()
    print("probe: stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
