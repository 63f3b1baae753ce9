"""newuser23 F3: `gc` with stderr a pipe nobody reads, two Ctrl-C: the command ended 5 s
after the first whatever the second's time (9.4 s in a real round). `RoundStop.close`
waited its whole bound for the helper thread blocked writing the stop's line; the second
signal pointed stderr at /dev/null, which does not wake a write already in the kernel. A
signal after the first now abandons the wait (`RoundStop.abandon`, from its handler).

Deterministic: the helper is blocked for good (an event never set), the bound is far
longer than the test's; the signal is sent to the main thread once it waits in the join
(proc(5) /proc/self/task/TID/syscall: futex(2), 202 on x86-64). Old code: `close` returned
only at its bound.
"""

from __future__ import annotations

import os
import platform
import signal
import threading
import time
from pathlib import Path
from types import FrameType

import pytest

from epochgc.impl.gc.stop import RoundStop

BOUND_S = 60.0  # close's bound here: a hang, not a slow machine


@pytest.mark.skipif(platform.machine() != "x86_64" or not os.path.exists("/proc/self/task"),
                    reason="proc(5) syscall numbers of x86-64 needed")
def test_a_later_signal_ends_close_at_once() -> None:
    stop = RoundStop()
    never = threading.Event()
    stop._start(never.wait, "blocked-helper")  # as announce's, stuck in a write
    main_tid = threading.get_native_id()
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()

    def in_join() -> bool:
        try:
            return Path(f"/proc/self/task/{main_tid}/syscall").read_text().split()[0] == "202"
        except (OSError, IndexError):
            return False

    def send() -> None:
        deadline = time.monotonic() + BOUND_S
        while not in_join() and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGUSR1)

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.abandon()

    before = signal.signal(signal.SIGUSR1, handler)
    try:
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        t0 = time.monotonic()
        stop.close(timeout=BOUND_S)
        waited = time.monotonic() - t0
        sender.join()
    finally:
        signal.signal(signal.SIGUSR1, before)
        never.set()
    assert waited < BOUND_S, f"close waited its whole bound ({waited:.1f} s)"
