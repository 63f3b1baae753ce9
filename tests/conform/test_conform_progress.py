"""`epochgc conform` while it works (newuser41 item 15): it printed nothing while generated
programs ran (15 s of silence at --examples 3000), and an interrupted run did not say how
many programs had agreed. Progress bars at a terminal (a real pseudo-terminal here, as a
person's), none under --quiet or off a terminal; an interrupt says how far it got. The
command signals itself at the named point `generated` (impl/signals.py): deterministic."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from epochgc.impl.conform.driver import vector_files
from epochgc.impl.signals import HOOK_ENV
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
MODEL = [sys.executable, "-m", "epochgc.model.port"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def conform_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """`epochgc conform ARGS -- MODEL` with stderr on a pseudo-terminal: (code, stdout, what
    the terminal showed)."""
    master, slave = pty.openpty()
    # A terminal has a size (a fresh pseudo-terminal's is 0x0): 24 rows of 100 columns.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "epochgc", "conform", *args, "--", *MODEL],
                            env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, text=True)
    os.close(slave)
    shown: list[bytes] = []

    def read() -> None:  # drained while it runs: a full terminal buffer would block it
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=60)
    os.close(master)
    return proc.returncode, out, b"".join(shown).decode(errors="replace")


def test_a_terminal_shows_the_vectors_and_the_programs_counted() -> None:
    """Old code: nothing on the terminal until the summary lines."""
    code, out, term = conform_on_a_terminal("--examples", "20")
    assert code == 0, out + term
    files = len(vector_files())
    assert "vectors: 100%" in term and f"{files}/{files}" in term, term
    assert "generated: 100%" in term and "20/20" in term, term
    assert out.startswith("vectors: ") and "generated: 20 programs" in out, out


def test_quiet_and_no_terminal_draw_nothing() -> None:
    code, out, term = conform_on_a_terminal("--examples", "20", "--quiet")
    assert code == 0, out + term
    assert term == "", term
    p = subprocess.run([sys.executable, "-m", "epochgc", "conform", "--examples", "20", "--",
                        *MODEL], env=ENV, capture_output=True, text=True, timeout=300,
                       check=False)
    # Off a terminal: no bar; a line only if a phase ran 10 s (a loaded host: newuser11 M13).
    assert p.returncode == 0 and all(
        line.startswith("conform: ") and "agreed so far" in line
        for line in p.stderr.splitlines()), p.stderr


def test_off_a_terminal_a_line_every_10_s_and_none_under_quiet() -> None:
    """newuser11 M13: `conform --examples 3000` in a log: the vectors' line, then 49 s of
    nothing until the generated programs' line. Old code: no line at all off a terminal.
    The clock is injected (no sleeps)."""
    from epochgc.impl.conform.driver import GenReport
    from epochgc.impl.conform.progress import ConformProgress

    now = [100.0]
    lines: list[str] = []
    progress = ConformProgress(False, clock=lambda: now[0], say=lines.append)
    assert not progress.on  # pytest's stderr is no terminal
    progress.phase("generated", "program", 3000)
    report = GenReport()
    for _ in range(30):  # a program every 0.5 s: 15 s
        now[0] += 0.5
        report.agreed += 1
        progress.program_done(report)
    assert lines == ["conform: generated: 20 of 3,000 program(s) agreed so far (10 s)"], lines
    quiet: list[str] = []
    progress = ConformProgress(True, clock=lambda: now[0], say=quiet.append)
    progress.phase("generated", "program", 3000)
    now[0] += 60
    progress.program_done(report)
    assert quiet == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_says_how_many_programs_agreed(sig: signal.Signals) -> None:
    """Old code: `conform interrupted: the port was stopped; no verdict`, no count (and no
    point `generated` to stop at: it ran to the end, exit 0)."""
    env = dict(ENV, **{HOOK_ENV: f"generated:{sig.name}"})
    p = subprocess.run([sys.executable, "-m", "epochgc", "conform", "--examples", "200", "--",
                        *MODEL], env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == by_signal(sig), p.stdout + p.stderr
    files = len(vector_files())
    # One line (newuser8 I7: "conform interrupted: ..." then "epochgc conform: interrupted").
    assert p.stderr.strip().splitlines()[-1] == (
        f"epochgc conform: interrupted by {sig.name}: {files} vector file(s) agreed, 1 of 200 "
        "generated program(s) agreed before the stop; the port was stopped; no verdict"
        ), p.stderr
    assert p.stderr.count("interrupted") == 1, p.stderr
    assert "Traceback" not in p.stderr
