"""Z3 for the proof runs: the tuning each process applies and the watchdog timing each check."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import z3

from epochgc.proofs.symterms import _CTX

# Z3 settings for the proof runs (`tune_z3`): they change how fast a verdict comes, never
# what it is. The legacy arithmetic solver answers our many small incremental checks
# (linear integer constraints over a few hundred constants) with fewer instructions, and an
# uncompressed model skips a pass over every model the explorer takes (one per path side
# it cannot settle otherwise). Measured on the correspondence of two 3-partition shapes
# (valgrind, instructions): 16.5 G default, 15.6 G without compression, 14.4 G with both.
Z3_TUNING: dict[str, object] = {"smt.arith.solver": 2, "model.compact": False}


def tune_z3() -> None:
    """Apply `Z3_TUNING` to this process's Z3 (global: every solver made afterwards)."""
    for k, v in Z3_TUNING.items():
        z3.set_param(k, v)


class Watchdog:
    """The explorer's time limit per solver check: one thread per process interrupts the
    Z3 context when a check runs past its deadline. Z3's own `timeout` starts a timer for
    every check, which cost about 8% of the induction CPU (checks of about 1 ms, tens of
    thousands of them). A check stopped by the watchdog answers unknown (a failure, never
    a proof), as with Z3's timeout; an unknown that came before the deadline (an interrupt
    meant for an earlier check that finished first) is asked again, once."""

    POLL_S = 0.02  # a check may run this much past its deadline before it is stopped

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._pid = 0

    def _start(self) -> None:
        self._pid = os.getpid()  # a forked worker has no thread: start its own
        threading.Thread(target=self._run, name="z3-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            d = self._deadline
            if d is not None and time.perf_counter() > d:
                _CTX.interrupt()

    def check(self, solver: Any, timeout_ms: int, extra: tuple[z3.BoolRef, ...]
              ) -> tuple[Any, float]:
        """(result, seconds) of `solver.check(*extra)` within `timeout_ms`."""
        if self._pid != os.getpid():
            self._start()
        for _ in range(2):
            t0 = time.perf_counter()
            self._deadline = t0 + timeout_ms / 1000
            try:
                r = solver.check(*extra)
            finally:
                self._deadline = None
            dt = time.perf_counter() - t0
            if r != z3.unknown or dt >= timeout_ms / 1000:
                break
        return r, dt


WATCHDOG = Watchdog()
