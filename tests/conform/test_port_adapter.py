"""`model.port.Session` (the model behind the port protocol) against `epochgc replay`: the
same results for every shipped vector, and a refused step changes nothing (the protocol's
promise, and what lets `epochgc conform` leave refused steps out of a written vector)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings

from epochgc.impl.conform.driver import read_vector, vector_files
from epochgc.impl.conform.programs import line, programs
from epochgc.model.port import Session
from epochgc.model.replay import replay_file


def test_every_vector_as_epochgc_replay_prints_it() -> None:
    for path in vector_files():
        variant, steps = read_vector(path)
        s = Session()
        assert s.handle(json.dumps({"op": "reset", "variant": variant})) == {}
        got = [s.handle(line(step)) for step in steps]
        want = [{k: v for k, v in r.items() if k not in ("step", "mismatch")}
                for r in replay_file(path)]
        assert got == want, path


@settings(max_examples=60, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs("reference", 20))
def test_refused_steps_change_nothing(steps: list) -> None:  # type: ignore[type-arg]
    full, kept = Session(), Session()
    for s in (full, kept):
        s.handle('{"op":"reset","variant":"reference"}')
    for step in steps:
        answer = full.handle(line(step))
        if set(answer) == {"error"}:
            continue  # left out of the second run
        assert kept.handle(line(step)) == answer


def test_reset_refusals() -> None:
    s = Session()
    assert "unknown variant" in s.handle('{"op":"reset","variant":"nope"}')["error"]
    assert "error" in s.handle('{"op":"reset","variant":"reference","x":1}')
    assert "error" in s.handle('{"op":"reset"}')
    assert "error" in s.handle('{"op":"reset","variant":7}')
    assert s.handle('{"op":"reset","variant":"strict"}') == {}
    assert s.replayer.variant.name == "strict"
