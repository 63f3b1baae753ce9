"""A round's stop helpers (impl/gc/stop.py: the waker, `announce`'s, `arm`'s) end with the
round. CI (stop 48): one still writing its line to stderr as the interpreter shut down
aborted the process ("could not acquire lock for <stderr> at interpreter shutdown, possibly
due to daemon threads", exit -6); and each round run in one process left three threads
waiting for good."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers

ROOT = Path(__file__).resolve().parents[2]


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("epochgc-stop")]


def _round_stop(said: list[str]) -> Callable[[], None]:
    """A round's stop as the CLI sets it up (handlers, announce, an armed marker); returns
    the handlers' restore."""
    stop = RoundStop()
    restore = install_signal_handlers(stop)
    announce(stop, said.append)
    stop.arm(lambda: said.append("marker"), said.append)
    return restore


def test_restoring_the_handlers_ends_every_helper_thread() -> None:
    before = set(_helpers())
    said: list[str] = []
    _round_stop(said)()
    assert set(_helpers()) - before == set(), _helpers()
    assert said == [], said  # never woken by a request: nothing said, no marker written


def test_a_stop_requested_then_closed_says_it_and_acts_before_close_returns() -> None:
    before = set(_helpers())
    said: list[str] = []
    restore = _round_stop(said)
    os.kill(os.getpid(), signal.SIGTERM)  # the handler writes to the waker's pipe
    restore()
    assert said == ["gc: SIGTERM: stopping: no key deleted yet; ending the round...",
                    "marker"], said
    assert set(_helpers()) - before == set(), _helpers()


def test_a_signal_said_as_the_process_exits_never_aborts_it() -> None:
    """The CI failure's shape, made certain: the stop is said by a helper whose stream
    write is slowed, and the main thread returns at once after `restore()`."""
    code = textwrap.dedent('''
        import os, signal, sys, time
        from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers
        def slow(line):
            time.sleep(0.2)
            print(line, file=sys.stderr, flush=True)
        stop = RoundStop()
        restore = install_signal_handlers(stop)
        announce(stop, slow)
        os.kill(os.getpid(), signal.SIGINT)
        restore()
        print("out", file=sys.stderr, flush=True)
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "gc: SIGINT: stopping: no key deleted yet; ending the round...", "out"], r.stderr
