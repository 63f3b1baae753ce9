"""When a port's answer agrees with the model's (spec/VECTORS.md, "Comparison")."""

from __future__ import annotations

from typing import Any

from epochgc.model.replay import json_equal

# Informative wording: only whether it is null is part of the format.
_WORDING = frozenset({"blocked", "error"})


def agrees(port: dict[str, Any], model: dict[str, Any]) -> bool:
    if not model:  # an accepted reset: no "op" either (a step's late answer has one)
        return "error" not in port and "op" not in port
    if "error" in model and set(model) == {"error"}:
        return "error" in port and port["error"] not in (None, "")
    if "error" in port and "op" not in port:
        return False  # refused what the model runs
    answer = {k: v for k, v in port.items() if k != "step"}
    if answer.keys() != model.keys():
        return False
    for k, v in model.items():
        if k in _WORDING:
            if (v is None) != (answer[k] is None):
                return False
        elif not json_equal(v, answer[k]):
            return False
    return True
