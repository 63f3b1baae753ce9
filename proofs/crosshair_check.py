"""CrossHair checks of the model's PEP 316 contracts (the `pre:`/`post:`/`raises:` lines in
model docstrings), by symbolic execution of the model's own code.

CrossHair searches for a counterexample within a time budget per condition; finding none
is reported as `proved` in the sense of "no counterexample in the budget" (spec P6 says
exactly what that covers), a counterexample or a crash is `failed`.
"""

from __future__ import annotations

import subprocess
import sys
import time

from proofs.obligations import Outcome

# One target per contract-carrying function, so the checks spread over the workers.
MODULES = (
    "model.partition.apply_placeholder",
    "model.partition.apply_advance_epoch",
    "model.partition.apply_reconciled",
    "model.partition.inactive_epoch",
    "model.fence.fence",
    "model.cluster.gc_epoch",
    "model.keys.format_key",
    "model.keys.gc_eligible",
)
PER_CONDITION_S = 1.0


def check(target: str) -> Outcome:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "crosshair", "check", "--analysis_kind=PEP316",
         f"--per_condition_timeout={PER_CONDITION_S}", target],
        capture_output=True, text=True, check=False,
    )
    dt = time.perf_counter() - t0
    name = f"contracts of {target}"
    if proc.returncode == 0 and not proc.stdout.strip():
        return Outcome(name, "crosshair", "proved", dt)
    detail = (proc.stdout + proc.stderr).strip() or f"crosshair exited {proc.returncode}"
    return Outcome(name, "crosshair", "failed", dt, detail)
