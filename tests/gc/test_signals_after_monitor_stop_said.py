"""newuser13 Q6 (issue 41), the signals after the safety monitor's stop: the tester's
SIGINT, SIGINT, SIGTERM while the round wrote its END were said "again" (the first), not at
all (the second SIGINT) and "again"; the exit code stayed the monitor's (1) where the
table has 130/143 for a signal (now the first signal's: newuser14 R1). Here the real
handlers and real signals to this process."""

from __future__ import annotations

import os
import signal
import threading

from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers


def _lines_for(signals: list[signal.Signals]) -> list[str]:
    stop = RoundStop()
    said: list[str] = []
    lock = threading.Lock()
    heard = threading.Condition(lock)

    def say(line: str) -> None:
        with heard:
            said.append(line)
            heard.notify_all()

    restore = install_signal_handlers(stop)
    try:
        announce(stop, say)
        stop.request("unhealthy")  # the safety monitor's stop
        with stop.finishing():  # writing its END and record, releasing its lease
            for n, s in enumerate(signals, 1):
                os.kill(os.getpid(), s)
                with heard:  # each said before the next is sent (a bound for a hang)
                    assert heard.wait_for(
                        lambda n=n: sum("SIG" in ln for ln in said) >= n, 60), said
    finally:
        restore()
    return [ln for ln in said if "SIG" in ln]


def test_each_signal_after_the_monitors_stop_is_said_with_the_exit_code_it_leaves() -> None:
    lines = _lines_for([signal.SIGINT, signal.SIGINT, signal.SIGTERM])
    assert len(lines) == 3, lines  # the tester: the second SIGINT was not said
    first, second, third = lines
    assert first.startswith("gc: SIGINT: already stopping (unhealthy): writing the round's "
                            "record and releasing its lease"), lines
    assert second.startswith("gc: SIGINT again: already stopping"), lines
    assert third.startswith("gc: SIGTERM: already stopping (unhealthy)") or \
        third.startswith("gc: SIGTERM again: already stopping"), lines
    # The first signal decides the exit code, and the lines say so (newuser13 Q6: "after
    # three signals the exit code is 1, not 130/143"; newuser14 R1: the operator's signal
    # ends the command by it, tests/gc/test_signal_after_stop_ends_by_it.py).
    assert first.endswith("the command then ends by SIGINT (exit code 130)"), lines
    assert third.endswith("the exit code stays SIGINT's, 130, not 143"), lines


def test_the_first_signal_after_the_monitors_stop_is_not_called_again() -> None:
    """While the stopped round still waits (its batches in flight, its read-back), the first
    signal ends it at once, as a second signal does; its error, the record's and the last
    line's, said "SIGINT again: stopped at once" of the first signal."""
    from epochgc.impl.gc.stop import STOPPED_AT_ONCE, SignalAgain

    stop = RoundStop()
    restore = install_signal_handlers(stop)
    caught: list[SignalAgain] = []
    try:
        stop.request("unhealthy")
        try:
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(60)  # the handler raises here (a bound for a hang)
        except SignalAgain as e:
            caught.append(e)
    finally:
        restore()
    assert [str(e) for e in caught] == [
        f"SIGINT after the round's stop (unhealthy): {STOPPED_AT_ONCE}"], caught
