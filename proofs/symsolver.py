"""Z3 for the proof runs: the tuning each process applies, the resource budget every solver
check runs under, and the watchdog that stops a hung check."""

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


# The limit a proof relies on is Z3's resource limit (`rlimit`), not the clock: the same
# query spends the same resources on a quiet or a loaded machine. The solver parameter
# "rlimit" is read at each check (src/api/api_solver.cpp, `Z3_solver_check*`:
# `scoped_rlimit _rlimit(mk_c(c)->m().limit(), rlimit)`), and `reslimit::push(delta)`
# (src/util/rlimit.cpp) sets the limit to `delta + m_count`: a budget PER CHECK, counted
# from where the context's counter stands, not a total over the context's life. The
# statistic "rlimit count" is that counter itself (src/util/statistics.cpp,
# `get_rlimit_statistics`: `l.count()`), cumulative over the context, so one check's
# cost is the difference of the counter around it (`check`). Cited from Z3Prover/z3 at
# aaf2464 (the stored snapshot of the 5.x line; the pip package here is z3-solver 5.4.1).
#
# Calibration (`python -m epochgc.proofs`, every obligation, PYTHONHASHSEED=0, seed 0,
# z3-solver 5.4.1; the run prints the largest count one check spent): four runs gave
# 1,724,106 to 2,047,155 (a worker's context is shared by the tasks it runs, so a count
# moves a few percent with what ran before it). The budget is 20 times the largest seen, rounded up:
# a proof has a wide margin and a runaway query is still cut off.
LARGEST_SEEN = 2_047_155
RLIMIT = 50_000_000  # >= 20 * LARGEST_SEEN
# A hang guard only (the watchdog's deadline): no proof relies on it, and a check stopped
# by it is unknown, a failure.
HANG_MS = 600_000


class Watchdog:
    """The hang guard of every solver check: one thread per process interrupts the
    check running past its deadline. Z3's own `timeout` starts a timer for every check,
    which cost about 8% of the induction CPU (checks of about 1 ms, tens of thousands of
    them). A check stopped by the watchdog answers unknown (a failure, never a proof), as
    with Z3's timeout; an unknown that came before the deadline is asked again, once.

    The interrupt is the solver's (`Z3_solver_interrupt`), not the context's: it fires the
    running check's event handler only, whose cancel is undone when that check ends
    (src/api/api_solver.cpp `Z3_solver_ref::set_cancel`, `_solver_check`'s `cancel_eh`;
    src/util/cancel_eh.h). The context's `Z3_interrupt` also calls `m().limit().cancel()`
    (src/api/api_context.cpp `context::interrupt`), which nothing undoes until the next
    check's `scoped_rlimit`: one that lands between a check's end and the deadline's reset
    makes the next `push` fail "push canceled" (CI, tests/proofs/test_watchdog.py).
    Cited from Z3Prover/z3 at aaf2464."""

    POLL_S = 0.02  # a check may run this much past its deadline before it is stopped

    def __init__(self) -> None:
        self._deadline: float | None = None
        # The checked solver's (context, Z3_solver) pointers while _deadline is set: raw
        # pointers, never the Python solver, whose last reference dropped on this thread
        # would free it here (`Solver.__del__`: Z3_solver_dec_ref) while the main thread
        # runs Z3 on the same context, which is not thread-safe (segfaults, 5 runs in 6).
        self._target: tuple[Any, Any] | None = None
        self._lock = threading.Lock()  # one (deadline, target) pair seen whole
        self._pid = 0
        self.fired = 0  # interrupts sent (tests wait on these instead of on the clock)
        self.looks = 0  # deadlines looked at

    def _start(self) -> None:
        self._pid = os.getpid()  # a forked worker has no thread: start its own
        threading.Thread(target=self._run, name="z3-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            with self._lock:  # the solver lives while _target is set: check() holds it
                self.looks += 1
                d = self._deadline
                if d is None or time.perf_counter() <= d:
                    continue
                if self._target is not None:
                    z3.Z3_solver_interrupt(*self._target)
                self.fired += 1

    def check(self, solver: Any, timeout_ms: int, extra: tuple[z3.BoolRef, ...]
              ) -> tuple[Any, float]:
        """(result, seconds) of `solver.check(*extra)` within `timeout_ms`."""
        if self._pid != os.getpid():
            self._start()
        for _ in range(2):
            t0 = time.perf_counter()
            inner = getattr(solver, "solver", None)  # a z3.Solver's Z3_solver
            with self._lock:
                self._deadline = t0 + timeout_ms / 1000
                self._target = None if inner is None else (solver.ctx.ref(), inner)
            try:
                r = solver.check(*extra)
            finally:
                with self._lock:
                    self._deadline, self._target = None, None
            dt = time.perf_counter() - t0
            # (A check that spent its resource budget is asked again too: Z3 names both
            # "canceled", and the second run spends the budget again: still unknown.)
            if r != z3.unknown or dt >= timeout_ms / 1000:
                break
        return r, dt


WATCHDOG = Watchdog()


class Meter:
    """The budgets' use in this process since `reset` (the runner resets it per task and
    reports it with the task's rows): the largest resource count one check spent, and
    the most paths one bounded search (proofs.bmc) explored."""

    def __init__(self) -> None:
        self.largest = 0
        self.search_paths = 0

    def reset(self) -> None:
        self.largest = 0
        self.search_paths = 0


METER = Meter()


def _rlimit_count(solver: Any) -> int:
    """The context's "rlimit count" statistic, read through the C API (a Python
    `Statistics` object would be built key by key; the key is near the end)."""
    ctx = solver.ctx.ref()
    st = z3.Z3_solver_get_statistics(ctx, solver.solver)
    z3.Z3_stats_inc_ref(ctx, st)
    try:
        for k in range(z3.Z3_stats_size(ctx, st) - 1, -1, -1):
            if z3.Z3_stats_get_key(ctx, st, k) == "rlimit count":
                if z3.Z3_stats_is_uint(ctx, st, k):
                    return int(z3.Z3_stats_get_uint_value(ctx, st, k))
                return int(z3.Z3_stats_get_double_value(ctx, st, k))
    finally:
        z3.Z3_stats_dec_ref(ctx, st)
    raise LookupError("Z3's statistics have no \"rlimit count\"")


def solver(seed: int, rlimit: int) -> z3.Solver:
    """A solver whose every check runs under the resource budget `rlimit`."""
    s = z3.Solver(ctx=_CTX)
    s.set("random_seed", seed)
    s.set("rlimit", rlimit)
    return s


def check(s: Any, *extra: z3.BoolRef) -> tuple[Any, float]:
    """(result, seconds) of `s.check(*extra)` under the solver's resource budget (set by
    `solver` or `s.set("rlimit", n)`), with the watchdog's hang guard; its resource count
    goes to METER. Unknown (budget spent or hang) is for the caller to report: a failure."""
    before = _rlimit_count(s)
    r, dt = WATCHDOG.check(s, HANG_MS, extra)
    METER.largest = max(METER.largest, _rlimit_count(s) - before)
    return r, dt
