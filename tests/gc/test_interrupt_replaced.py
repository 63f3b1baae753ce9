"""Issue 41 (s28k): a second Ctrl-C mid-round under load ended as "epochgc gc: error: delete
phase failed: Answer from Java side is empty; ..." and not as "SIGINT again: stopped at
once". The handler's `SignalAgain` was raised inside py4j's read of the JVM's answer
(`collectAndServe`, the whole stage); py4j's `except KeyboardInterrupt` shut the socket
down through the pool's idle connections and re-raised, and PySpark's
`SCCallSiteSync.__exit__` then made one more py4j call (`setCallSite(None)`), whose
`Py4JNetworkError("Answer from Java side is empty")` replaced the interrupt: Python keeps
it only as that error's `__context__`. Seen in a real local Spark session,
looped (`tests/gc/interrupt_probe.py`, 1 try in 20 on the old code): the chain was
`GcError: delete phase failed: Answer from Java side is empty` <- `Py4JNetworkError:
Answer from Java side is empty` <- `SignalAgain`.

The job's error wrappers (`_spark_errors`, `_spark_ended`) now give back the interrupt
found under such an error. Exceptions here are chained by Python itself (a `raise` inside
an `except` block), as they were in py4j."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from py4j.protocol import Py4JNetworkError

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.sparkerrors import _spark_errors, interrupt_under
from epochgc.impl.gc.stage import _spark_ended
from epochgc.impl.gc.stop import SignalAgain

ROOT = Path(__file__).resolve().parents[2]


def _replaced_on_its_way_out() -> None:
    """As py4j/PySpark did: the interrupt raised in a call, another call's error raised
    while it unwinds (`SCCallSiteSync.__exit__`)."""
    try:
        raise SignalAgain("SIGINT")
    finally:
        raise Py4JNetworkError("Answer from Java side is empty")


WRAPPERS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "spark_errors": lambda: _spark_errors("delete"),
    # No SparkContext runs in this process: `context_stopped` says stopped, the path that
    # made the old code call it "Spark was stopped"; the interrupt wins even so.
    "spark_ended": lambda: _spark_ended(object()),
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_an_interrupt_replaced_by_a_py4j_error_is_the_interrupt(wrapper: str) -> None:
    """Old code: GcError("delete phase failed: Answer from Java side is empty") (or the
    Py4JNetworkError itself through `_spark_ended`), the second signal lost."""
    with pytest.raises(SignalAgain, match="SIGINT again: stopped at once"), \
            WRAPPERS[wrapper]():
        _replaced_on_its_way_out()


def test_a_py4j_error_with_no_interrupt_under_it_is_still_a_failed_phase() -> None:
    with pytest.raises(GcError, match="delete phase failed: Answer from Java side is empty"), \
            _spark_errors("delete"):
        raise Py4JNetworkError("Answer from Java side is empty")


def test_interrupt_under_walks_cause_and_context_and_stops_on_a_cycle() -> None:
    ki = KeyboardInterrupt()
    outer = RuntimeError("outer")
    mid = ValueError("mid")
    outer.__cause__ = mid
    mid.__context__ = ki
    assert interrupt_under(outer) is ki
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a
    assert interrupt_under(a) is None


@pytest.mark.spark
@pytest.mark.skipif(os.environ.get("EPOCHGC_SIGNALS") != "full",
                    reason="EPOCHGC_SIGNALS=full: one more Spark start-up and 40 jobs (~30 s)")
def test_a_real_job_interrupted_in_py4j_gives_back_the_interrupt_every_time() -> None:
    """The looped reproduction: 40 real jobs, each interrupted while the driver waits in
    py4j (`interrupt_probe.py`). Old code: `probe: replaced 1 of 20` (try 13: `GcError:
    delete phase failed: Answer from Java side is empty <- Py4JNetworkError <-
    SignalAgain`)."""
    p = subprocess.run([sys.executable, "-m", "tests.gc.interrupt_probe", "40"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "probe: replaced 0 of 40" in p.stdout.splitlines(), (p.stdout + p.stderr)[-3000:]
    assert p.returncode == 0, p.stderr[-3000:]
