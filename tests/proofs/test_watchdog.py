"""The hang guard of every solver check (proofs.symsolver.Watchdog, one thread per process
instead of Z3's timer per check): a check past its deadline is stopped and answers
unknown (never a proof); an early unknown is asked again. The limit a proof relies on is
the resource budget (tests/proofs/test_rlimit.py)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import z3

from epochgc.proofs.sym import Explorer, SolverUnknown
from epochgc.proofs.symsolver import WATCHDOG
from epochgc.proofs.symterms import _CTX
from epochgc.proofs.symvalues import SymInt

SAFETY_NET_S = 120.0  # a bound for a hang, not a timing: the net's firing is what fails


@contextmanager
def _safety_net() -> Iterator[None]:
    """Interrupts the context after SAFETY_NET_S if the watchdog did not: a watchdog that
    never interrupts then fails these tests (the net fired) instead of hanging them. Which
    one stopped the check is told by the net's own flag, not by the time it took (an
    elapsed-time bound depends on the machine's load)."""
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        _CTX.interrupt()

    t = threading.Timer(SAFETY_NET_S, interrupt)
    t.daemon = True
    t.start()
    try:
        yield
    finally:
        t.cancel()
    assert not fired.is_set(), f"the watchdog did not stop the check: the {SAFETY_NET_S}s net did"


def _hard(x: z3.ArithRef, y: z3.ArithRef, z: z3.ArithRef) -> z3.BoolRef:
    # Non-linear: Z3 searches far longer than any limit here.
    return z3.And(x * x * x + y * y * y == z * z * z + 33, x > 10**6, y > 10**6)


def test_a_check_past_its_deadline_is_stopped_and_unknown() -> None:
    x, y, z = z3.Ints("x y z")
    s = z3.Solver()
    s.add(_hard(x, y, z))
    with _safety_net():
        r, dt = WATCHDOG.check(s, 200, ())
    assert r == z3.unknown
    assert dt >= 0.2  # not before its deadline (a late stop fails the safety net's check)


def test_the_explorer_reports_a_stopped_check_as_unknown() -> None:
    def f(ex: Explorer) -> Any:
        x, y, z = (ex.fresh_int(n) for n in "xyz")
        ex.assume(SymInt(x.expr) > 10**6)
        return bool(_hard_sym(x, y, z))

    # Its resource budget runs out (deterministic: no deadline is involved).
    with _safety_net(), pytest.raises(SolverUnknown):
        list(Explorer(rlimit=100_000).paths(f))


def _hard_sym(x: SymInt, y: SymInt, z: SymInt) -> Any:
    from epochgc.proofs.symvalues import SymBool
    return SymBool(_hard(x.expr, y.expr, z.expr))


class _Flaky:
    """A solver whose first answer is an early unknown (an interrupt meant for an earlier
    check), then sat."""

    def __init__(self) -> None:
        self.calls = 0

    def check(self, *_: Any) -> Any:
        self.calls += 1
        return z3.unknown if self.calls == 1 else z3.sat


def test_an_unknown_before_the_deadline_is_asked_again_once() -> None:
    s = _Flaky()
    r, _ = WATCHDOG.check(s, 2000, ())
    assert (r, s.calls) == (z3.sat, 2)


class _Unknown:
    def __init__(self) -> None:
        self.calls = 0

    def check(self, *_: Any) -> Any:
        self.calls += 1
        return z3.unknown


def test_a_lasting_unknown_stays_unknown() -> None:
    s = _Unknown()
    r, _ = WATCHDOG.check(s, 2000, ())
    assert (r, s.calls) == (z3.unknown, 2)


class _ReturnsAfterTheWatchdogFired:
    """A Z3 solver whose check returns only once the watchdog has fired after the Z3 check
    itself ended: the window between a check's end and the deadline's reset (microseconds,
    wider under load), held open so the watchdog's interrupt lands when no check runs."""

    def __init__(self) -> None:
        self.inner = z3.Solver(ctx=_CTX)
        self.solver, self.ctx = self.inner.solver, self.inner.ctx

    def check(self, *extra: Any) -> Any:
        r = self.inner.check(*extra)
        n, pause = WATCHDOG.fired, threading.Event()
        for _ in range(int(SAFETY_NET_S / WATCHDOG.POLL_S)):  # a hang bound, not a timing
            if WATCHDOG.fired > n:
                return r
            pause.wait(WATCHDOG.POLL_S)
        raise AssertionError("the watchdog never fired past the deadline")


def test_an_interrupt_after_the_check_ended_does_not_cancel_the_next_push() -> None:
    # CI failed "push canceled" in the next test: the context's interrupt (Z3_interrupt)
    # left a cancel that only the next check would clear.
    s = _ReturnsAfterTheWatchdogFired()
    with _safety_net():
        r, _ = WATCHDOG.check(s, 0, ())
    assert r == z3.sat
    fresh = z3.Solver(ctx=_CTX)
    fresh.push()  # raised z3.Z3Exception("push canceled")
    fresh.add(z3.Int("a") == 1)
    assert fresh.check() == z3.sat


class _HeldUntilLooked:
    """A solver whose check returns once the watchdog has looked at its deadline twice."""

    def __init__(self) -> None:
        inner = z3.Solver(ctx=_CTX)
        self.solver, self.ctx = inner.solver, inner.ctx
        self.inner = inner

    def check(self, *extra: Any) -> Any:
        r = self.inner.check(*extra)
        n, pause = WATCHDOG.looks, threading.Event()
        for _ in range(int(SAFETY_NET_S / WATCHDOG.POLL_S)):  # a hang bound, not a timing
            if WATCHDOG.looks >= n + 2:
                return r
            pause.wait(WATCHDOG.POLL_S)
        raise AssertionError("the watchdog never looked")


def test_the_watchdog_thread_never_holds_the_solver_it_watches() -> None:
    # It held the Python solver in a local between looks: the last reference dropped
    # there freed the solver on the watchdog's thread (Z3_solver_dec_ref) while the main
    # thread ran Z3 on the same context: segfaults in tests/proofs (5 runs in 6).
    s = _HeldUntilLooked()
    WATCHDOG.check(s, 600_000, ())
    ref = weakref.ref(s)
    del s
    assert ref() is None
