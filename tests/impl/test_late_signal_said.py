"""newuser16 S10 (issue 41): `replay` and `check-trace` signalled once their work was under
way ended with "interrupted by SIGINT" and nothing on how far they got; since s28a, with
"nothing was written yet", which is false for a replay that has written results. The line
now says how far: replay the steps whose results were written, check-trace the records
read and checked. Each command signals itself at its point (impl/signals.py POINTS), so
nothing here depends on timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.signals import HOOK_ENV
from tests.conformance.test_checktrace import write_trace
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, hook: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: hook})
    return subprocess.run([sys.executable, "-m", "epochgc", *argv], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_replay_signalled_after_a_result_says_how_many_were_written(tmp_path: Path) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text("".join(f'{{"op":"fence","term":1,"epoch":{e}}}\n' for e in range(5)))
    r = _run(tmp_path, "result:SIGINT", "replay", str(steps))
    assert r.returncode == by_signal(signal.SIGINT), r.stderr
    assert r.stdout.count("\n") == 1, r.stdout  # the one result written before the signal
    # Old code: "... interrupted by SIGINT: nothing was written yet" (a result was).
    assert r.stderr.splitlines()[-1] == (
        "epochgc replay: interrupted by SIGINT: the results of the first 1 step(s) were "
        "written (and perhaps the next one's); the results of the steps after them, if any, "
        "were not"), \
        r.stderr


@pytest.mark.parametrize(("point", "sig", "said"), [
    ("record", signal.SIGINT, "1 record(s) read, 0 checked"),
    ("checked", signal.SIGTERM, "{n} record(s) read, 1 checked"),
])
def test_check_trace_signalled_mid_way_says_how_far_it_got(
        tmp_path: Path, point: str, sig: signal.Signals, said: str) -> None:
    trace = tmp_path / "trace.ndjson"
    write_trace(trace)
    n = f"{len(trace.read_text().splitlines()):,}"
    r = _run(tmp_path, f"{point}:{sig.name}", "check-trace", str(trace))
    assert r.returncode == by_signal(sig), r.stderr
    # Old code: "... nothing was written yet" (and no hook there: it ran to "conforms").
    assert r.stderr.splitlines()[-1] == (
        f"epochgc check-trace: interrupted by {sig.name}: nothing was written yet; "
        f"{said.format(n=n)} against the model"), r.stderr
