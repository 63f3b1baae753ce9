"""Session summary of the conformance harness: steps, rules and faults that ran, printed at
the end of the run and written to build/harness-summary.json."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.harness import Harness

_T0 = time.monotonic()
_ROOT = Path(__file__).resolve().parents[2]


def _summary() -> dict[str, Any] | None:
    from tests.conformance.coverage import events
    from tests.conformance.harness import STATS
    from tests.conformance.machine import PROFILE

    if not STATS.get("examples"):
        return None  # no state-machine run in this session
    return {
        "profile": PROFILE,
        "seconds": round(time.monotonic() - _T0, 1),
        "examples": STATS.get("examples", 0),
        "steps": STATS.get("steps", 0),
        "faults": {k[6:]: v for k, v in sorted(STATS.items()) if k.startswith("fault.")},
        "rules": {k[5:]: v for k, v in sorted(STATS.items()) if k.startswith("rule.")},
        "events": events(STATS),
        "other": {k: v for k, v in sorted(STATS.items())
                  if not k.startswith(("fault.", "rule.")) and k not in ("steps", "examples")},
    }


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: hand its harness counts to the controller, which alone
    prints the summary (`pytest_testnodedown` adds them up)."""
    from tests.conformance.harness import STATS

    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["harness_stats"] = dict(STATS)


def pytest_testnodedown(node: Any, error: object) -> None:
    """On the controller: a worker's harness counts added to this process's (the
    summary's), so `-n 2` prints what one process would."""
    from tests.conformance.harness import STATS

    STATS.update(getattr(node, "workeroutput", {}).get("harness_stats", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    s = _summary()
    if s is None:
        return
    out = _ROOT / "build" / "harness-summary.json"
    try:
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(s, indent=1) + "\n")
    except OSError:
        pass
    tr = terminalreporter
    tr.section("conformance harness")
    tr.write_line(f"profile {s['profile']}: {s['examples']} programs, {s['steps']} steps")
    tr.write_line("faults: " + ", ".join(f"{k}={v}" for k, v in s["faults"].items()))
    tr.write_line("rules: " + ", ".join(f"{k}={v}" for k, v in s["rules"].items()))
    tr.write_line("other: " + ", ".join(f"{k}={v}" for k, v in s["other"].items()))
    from tests.conformance.coverage import rule_names, table
    from tests.conformance.harness import STATS

    lines, warnings = table(STATS, rule_names())
    for line in lines:
        tr.write_line(line)
    if warnings:
        tr.write_line(f"WARNING: {warnings} rules or events never happened")
    tr.write_line(f"summary written to {out}")


@pytest.fixture
def h() -> Iterator[Harness]:
    """A fresh harness on seed 11 (the unit tests' fixed cluster), closed afterwards."""
    harness = Harness(seed=11)
    yield harness
    harness.close()
