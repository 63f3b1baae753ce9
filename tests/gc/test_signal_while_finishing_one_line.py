"""newuser14 R6 (issue 41): one Ctrl-C while a round that was not stopped writes its record
was said as two lines, "gc: SIGINT: stopping: writing the round's record and releasing its
lease..." (the stop's announcement, for a round that then ends done) and "gc: SIGINT after
the round ended: its record stands, exit code 0" (the command's). It stops nothing there:
the announcement says nothing of it, and the command's one line says it ("SIGINT while the
round's record was written: the round had ended, its record stands, exit code 0"). A round
already stopping still hears a later signal said (test_signal_after_stop_ends_by_it.py).
The real handlers, a real signal to this process."""

from __future__ import annotations

import os
import signal

from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers


def test_a_signal_while_an_unstopped_round_finishes_is_not_announced() -> None:
    stop, said = RoundStop(), []
    restore = install_signal_handlers(stop)
    try:
        announce(stop, said.append)
        with stop.finishing():  # its END, record and lease release
            os.kill(os.getpid(), signal.SIGINT)  # handled in this (the main) thread
            assert stop.wait(60)  # the waker woke `announce` (a bound for a hang)
    finally:
        restore()  # closes the stop: waits for `announce`'s thread to end
    assert said == [], said  # old code: ["gc: SIGINT: stopping: writing the round's record..."]
    assert stop.reason == "SIGINT" and stop.finishing_clean


def test_a_signal_while_a_stopped_round_finishes_is_still_said() -> None:
    stop, said = RoundStop(), []
    restore = install_signal_handlers(stop)
    try:
        announce(stop, said.append)
        stop.request("deadline")
        with stop.finishing():
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.wait(60)
    finally:
        restore()
    assert not stop.finishing_clean
    assert any(line.startswith("gc: SIGINT: already stopping (deadline)") for line in said), said
