"""newuser14 R1 (issue 41): one SIGINT after the safety monitor had stopped a round ended the
command with exit 1 ("SIGINT again: stopped at once"), and s27a then kept the monitor's code
on purpose ("the exit code stays the unhealthy stop's"). The rule now: an operator's or a
scheduler's signal ends the command by that signal (impl/entry.py: a script running it must
stop), whatever stopped the round first; the round's record keeps the stop's reason
(`interrupted: unhealthy`) and says the signal and the exit code (130). Only the first
signal, and only before the exit code is decided (the record about to be made): a later
signal changes nothing, and says so. The real handlers, real signals to this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from epochgc.impl.gc.record import record_document
from epochgc.impl.gc.recordread import shape_problem
from epochgc.impl.gc.show import _last_round_lines
from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers
from epochgc.impl.gc.summary import GcSummary
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


class _Said:
    """`announce`'s lines, waited for (a bound for a hang, not a timing assumption)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._heard = threading.Condition()

    def __call__(self, line: str) -> None:
        with self._heard:
            self.lines.append(line)
            self._heard.notify_all()

    def wait_for(self, text: str) -> None:
        with self._heard:
            assert self._heard.wait_for(
                lambda: any(text in ln for ln in self.lines), 60), self.lines

    def signal(self, sig: signal.Signals) -> str:
        """Send `sig` to this process; the line that says it."""
        n = sum("SIG" in ln for ln in self.lines)
        os.kill(os.getpid(), sig)
        with self._heard:
            assert self._heard.wait_for(
                lambda: sum("SIG" in ln for ln in self.lines) > n, 60), self.lines
        return [ln for ln in self.lines if "SIG" in ln][-1]


def test_the_first_signal_after_the_monitors_stop_decides_the_exit_code() -> None:
    """s27a's code: "...; the exit code stays the unhealthy stop's, not 130", exit 2."""
    stop, said = RoundStop(), _Said()
    restore = install_signal_handlers(stop)
    try:
        announce(stop, said)
        stop.request("unhealthy")  # the safety monitor's stop
        with stop.finishing():  # writing its END and record, releasing its lease
            first = said.signal(signal.SIGINT)
            summary = GcSummary(M=100, interrupted="unhealthy", safety_blocked=True,
                                listing_complete=False)
            summary.signal_after_stop = stop.decide()  # as run_gc, before the record
            later = said.signal(signal.SIGTERM)
    finally:
        restore()
    assert first == ("gc: SIGINT: already stopping (unhealthy): writing the round's record "
                     "and releasing its lease; the record keeps the unhealthy stop, and the "
                     "command then ends by SIGINT (exit code 130)"), said.lines
    assert later.endswith("; the exit code stays SIGINT's, 130, not 143"), said.lines
    assert (summary.signal, summary.exit_code) == ("SIGINT", 130)
    rec = record_document(summary, {})
    assert (rec["outcome"], rec["interrupted"], rec["signal"], rec["exit_code"]) == (
        "interrupted", "unhealthy", "SIGINT", 130), rec
    assert shape_problem(rec) is None  # gc-admin show reads it, and says the signal
    assert "  outcome: interrupted, exit code 130 (SIGINT after the unhealthy stop)" in \
        _last_round_lines(dict(rec, key="k"), 0.0), rec


def test_the_first_signal_that_ends_a_stopped_round_at_once_decides_it_too() -> None:
    """newuser14 R1 exactly: the monitor's stop on a silent store, the round still waiting;
    one SIGINT ends it at once. Its error stays what it says; the code was 1 (an incomplete
    round the monitor stopped, newuser12 P15), now 130; and it is said when it comes (the
    tester: no line until the last one, 16 s later)."""
    from epochgc.impl.gc.stop import STOPPED_AT_ONCE, SignalAgain

    stop, said = RoundStop(), _Said()
    restore = install_signal_handlers(stop)
    caught: list[SignalAgain] = []
    try:
        announce(stop, said)
        stop.request("unhealthy")
        try:
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(60)  # the handler raises here (a bound for a hang)
        except SignalAgain as e:
            caught.append(e)
        summary = GcSummary(M=100, interrupted="unhealthy", error=str(caught[0]),
                            listing_complete=False)
        summary.signal_after_stop = stop.decide()
    finally:
        restore()
        said.wait_for("SIGINT")
    assert str(caught[0]) == f"SIGINT after the round's stop (unhealthy): {STOPPED_AT_ONCE}"
    assert [ln for ln in said.lines if "SIGINT" in ln] == [
        "gc: SIGINT: the round was already stopping (unhealthy); stopping it at once; the "
        "record keeps the unhealthy stop, and the command then ends by SIGINT (exit code "
        "130)"], said.lines
    assert (summary.outcome, summary.signal, summary.exit_code) == ("interrupted", "SIGINT",
                                                                     130)


def test_a_signal_once_the_exit_code_is_decided_changes_nothing() -> None:
    """Its record is being written with the stop's code: the signal is said, the code
    stays (the record and the exit agree)."""
    stop, said = RoundStop(), _Said()
    restore = install_signal_handlers(stop)
    try:
        announce(stop, said)
        stop.request("unhealthy")
        with stop.finishing():
            summary = GcSummary(M=100, interrupted="unhealthy", safety_blocked=True)
            summary.signal_after_stop = stop.decide()
            line = said.signal(signal.SIGINT)
    finally:
        restore()
    assert line.endswith("; the exit code stays the unhealthy stop's, not 130"), said.lines
    assert (summary.signal, summary.exit_code) == (None, 2)


def test_a_round_a_signal_decided_ends_the_process_by_it() -> None:
    """The command's end (gc's `_exit` under the entry point's `run`): killed by SIGINT, as
    a shell script running it needs (tests/impl/test_signal_ends_script.py)."""
    code = ("from epochgc.impl import entry\n"
            "from epochgc.impl.gc.cli import _exit\n"
            "from epochgc.impl.gc.summary import GcSummary\n"
            "entry.run(lambda: _exit(GcSummary(M=1, interrupted='unhealthy', "
            "signal_after_stop='SIGINT')))\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == by_signal(signal.SIGINT), r.stderr
