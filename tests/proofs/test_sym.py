"""The symbolic executor: paths are enumerated, infeasible ones pruned, and results are
the model's own behaviour."""

from __future__ import annotations

import pytest
import z3

from model.errors import ModelError
from model.partition import PartitionState, apply_placeholder
from proofs.sym import Explorer, SymInt, concretize


def _paths(fn):  # type: ignore[no-untyped-def]
    ex = Explorer()
    return ex, list(ex.paths(fn, errors=(ModelError,)))


def test_branches_fork_and_prune() -> None:
    def f(ex: Explorer) -> str:
        x = ex.fresh_int("x")
        if x > 3:
            return "big" if x > 2 else "impossible"
        return "small"

    _, paths = _paths(f)
    assert sorted(p.value for p in paths if p.kind == "ok") == ["big", "small"]


def test_model_paths_cover_accept_reject_and_errors() -> None:
    def f(ex: Explorer) -> bool:
        m = ex.fresh_int("max")
        s = PartitionState(m, m - 2, m - 2, 5)
        ex.assume(m >= 2)
        return apply_placeholder(s, ex.fresh_int("e"), 6).accepted

    ex, paths = _paths(f)
    kinds = {p.kind for p in paths}
    assert kinds == {"ok", "error"}
    assert {p.value for p in paths if p.kind == "ok"} == {True, False}
    # every reported path is feasible
    for p in paths:
        assert ex.model_for(p.pc) is not None


def test_concretize_replays_a_path() -> None:
    def f(ex: Explorer) -> tuple[PartitionState, SymInt, bool]:
        m = ex.fresh_int("max")
        ex.assume(m >= 0)
        s = PartitionState(m, m, m, 0)
        e = ex.fresh_int("e")
        return s, e, apply_placeholder(s, e, 1).accepted

    ex, paths = _paths(f)
    rejected = [p for p in paths if p.kind == "ok" and p.value[2] is False]
    assert rejected
    model = ex.model_for(rejected[0].pc)
    assert model is not None
    s, e = concretize(rejected[0].value[:2], model)
    assert apply_placeholder(s, e, 1).accepted is False


def test_symbolic_value_cannot_leak_as_concrete() -> None:
    x = SymInt(z3.Int("x"))
    # (list indexing and range() read an int subclass's value directly; symstate keeps
    # every index concrete for that reason)
    for leak in (lambda: x * 2, lambda: x // 2, lambda: x % 2, lambda: int(x), lambda: abs(x)):
        with pytest.raises(TypeError):
            leak()
