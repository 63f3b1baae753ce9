"""A run as people and ports read it: a step table with both answers side by side, and the
failing program as a vector file (spec/VECTORS.md) a port's authors can add to their suite."""

from __future__ import annotations

import json
from typing import Any

from epochgc.impl.conform.driver import Run
from epochgc.impl.conform.steps import Step, line


def _compact(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _answer(obj: dict[str, Any]) -> str:
    # The op is already in the step column.
    return _compact({k: v for k, v in obj.items() if k not in ("op", "step")})


def _shown(step: Step) -> str:
    # Notes are for readers of vector files; in the table they only widen the column.
    if isinstance(step, dict):
        return _compact({k: v for k, v in step.items() if k != "note"})
    return step


# Characters of a line that is not an answer shown in the table's port column.
_SHOWN = 60


def _not_an_answer(raw: bytes) -> str:
    shown = repr(raw[:_SHOWN])
    return f"(not an answer: {shown}{'...' if len(raw) > _SHOWN else ''})"


def table(run: Run, answered: bytes | None = None) -> str:
    """Step 0 is the reset; the disagreement (the last row) is marked `!=`. `answered`: what
    the port printed for the last step that was not an answer (newuser8 I7: "(no answer)"
    for a port that answered garbage)."""
    rows = [("", "#", "step", "port", "model")]
    last = len(run.outcomes) - 1
    for i, o in enumerate(run.outcomes):
        if o.port is not None:
            port = _answer(o.port)
        elif i == last and answered is not None:
            port = _not_an_answer(answered)
        else:
            port = "(no answer)"
        rows.append(("" if o.agrees else "!=", str(i), _shown(o.step), port, _answer(o.model)))
    widths = [max(len(r[c]) for r in rows) for c in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    )


def _expect(model: dict[str, Any]) -> dict[str, Any]:
    # Wording (blocked, error) is informative: assert only that it is null.
    return {k: v for k, v in model.items()
            if k != "op" and not (k in ("blocked", "error") and v is not None)}


def vector(run: Run, port_argv: list[str]) -> str:
    """The program up to its disagreement as a vector file under the run's variant. Steps
    the model refused before it are left out (a refused step changes nothing)."""
    out = [f"# variant: {run.variant}",
           f"# epochgc conform: shortest failing program for the port `{' '.join(port_argv)}`"]
    last = len(run.outcomes) - 1
    for i, o in enumerate(run.outcomes[1:], start=1):
        refused = "error" in o.model and "op" not in o.model
        if refused and i != last:
            continue
        if i == last:
            answered = "nothing" if o.port is None else _compact(o.port)
            out.append(f"# the port answered: {answered}")
        if refused:
            out.append("# the model refuses the next step as bad input: "
                       "`epochgc replay` exits 65 on it")
            out.append(line(o.step))
        else:
            assert isinstance(o.step, dict)
            out.append(_compact({**o.step, "expect": _expect(o.model)}))
    return "\n".join(out) + "\n"


def summary_run(run: Run) -> dict[str, Any]:
    return {"source": run.source, "variant": run.variant,
            "steps": [o.step for o in run.outcomes[1:]],
            # null: no answer
            "port": [o.port for o in run.outcomes], "model": [o.model for o in run.outcomes],
            "failing_step": len(run.outcomes) - 1,
            # what the same program run again gave (the verdict stays the first run's)
            "second_run": run.second}
