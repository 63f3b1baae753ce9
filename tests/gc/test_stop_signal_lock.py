"""A signal that lands while the main thread holds the stop event's own lock (inside
`Event.wait`'s or `Event.set`'s bytecodes: the recovery's wait is `RoundStop.wait` on the
main thread) must not block its handler (review rev38o, reasoned: `Event.set` in the
handler waited for the lock its own thread held, until a second signal)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import os, signal, sys
from epochgc.impl.gc.stop import RoundStop, install_signal_handlers
stop = RoundStop()
restore = install_signal_handlers(stop)
with stop._event._cond:  # as inside Event.wait's own bytecodes
    os.kill(os.getpid(), signal.SIGTERM)
    x = sum(range(10))  # the handler runs here
    print("handler returned", stop.reason, flush=True)
print("woken", stop.wait(600), flush=True)  # the event is set once the lock is free
restore()
"""


def test_a_signal_while_the_main_thread_holds_the_events_lock_is_handled() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:  # the old handler: blocked for good
        raise AssertionError(f"the SIGTERM handler blocked on the stop event's lock its "
                             f"own thread held; output so far: {e.stdout!r}") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["handler returned SIGTERM", "woken True"], done.stdout
