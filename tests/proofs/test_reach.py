"""epochgc.proofs.reach: a counterexample to induction that is reachable is found as a short trace
from the initial state and written as a vector; on the correct model the bounded search
finds no trace (it proves nothing, and the runner says so)."""

from __future__ import annotations

import json

import pytest

from epochgc.model import actions, invariants
from epochgc.model.variants import REFERENCE
from epochgc.proofs import reach, scenarios


def test_no_trace_breaks_l1_on_the_model() -> None:
    assert reach.search(scenarios.TRACE_TEMPLATE, REFERENCE, "l1", walks=60) is None


def test_seeded_bug_gives_a_short_reachable_trace_and_a_vector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The housekeeper moving LRLO past a placeholder not in L1 (the R28 mutant).
    monkeypatch.setattr(actions, "_in_l1_up_to", lambda *_: True)
    tr = reach.search(scenarios.TRACE_TEMPLATE, REFERENCE, "l1")
    assert tr is not None
    assert len(tr.steps) <= 8  # shrunk: only the steps the violation needs
    assert invariants.INVARIANTS["l1"](tr.steps[-1].state, REFERENCE) is False
    assert all(invariants.INVARIANTS["l1"](st.state, REFERENCE) is not False
               for st in tr.steps[:-1])
    lines = [json.loads(ln) for ln in reach.vector_text(tr, REFERENCE, "cti").splitlines()
             if not ln.startswith("#")]
    assert lines[0]["op"] == "state" and lines[-1]["op"] == "state"
    assert any(ln["op"] == "apply_reconciled" for ln in lines)
