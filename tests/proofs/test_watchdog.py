"""The hang guard of every solver check (proofs.symsolver.Watchdog, one thread per process
instead of Z3's timer per check): a check past its deadline is stopped and answers
unknown (never a proof); an early unknown is asked again. The limit a proof relies on is
the resource budget (tests/proofs/test_rlimit.py)."""

from __future__ import annotations

import threading
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
