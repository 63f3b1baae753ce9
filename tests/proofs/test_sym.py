"""The symbolic executor: paths are enumerated, infeasible ones pruned, and results are
the model's own behaviour."""

from __future__ import annotations

import pytest
import z3

from epochgc.model.errors import ModelError
from epochgc.model.partition import PartitionState, apply_placeholder
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symvalues import SymBool, SymInt, concretize


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


# -- issue 11 item 5: every operation on a symbolic value is modelled or refused -----------


def _x() -> SymInt:
    return SymInt(z3.Int("x"))


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda x: True + x, id="bool+x"),
        pytest.param(lambda x: x + True, id="x+bool"),
        pytest.param(lambda x: False - x, id="bool-x"),
        pytest.param(lambda x: x < True, id="x<bool"),
        pytest.param(lambda x: True < x, id="bool<x"),  # noqa: SIM300
        pytest.param(lambda x: x == True, id="x==bool"),  # noqa: E712
        pytest.param(lambda x: x < 1.5, id="x<float"),
        pytest.param(lambda x: 1.5 <= x, id="float<=x"),  # noqa: SIM300
        pytest.param(lambda x: x == 2.0, id="x==float"),
        pytest.param(lambda x: x + 1.5, id="x+float"),
        pytest.param(lambda x: ~x, id="invert"),
        pytest.param(lambda x: round(x, 2), id="round-ndigits"),
        pytest.param(lambda x: x.real, id="real"),
        pytest.param(lambda x: x.bit_length(), id="bit_length"),
        pytest.param(lambda x: [10, 20][x], id="list-index"),
        pytest.param(lambda x: range(x), id="range"),
        pytest.param(lambda x: hash(x), id="hash"),
        pytest.param(lambda x: {x: 1}, id="dict-key"),
        pytest.param(lambda x: int(x), id="int"),
        pytest.param(lambda x: float(x), id="float"),
        pytest.param(lambda x: f"{x:018d}", id="format-spec"),
        pytest.param(lambda x: x * 2, id="mul"),
        pytest.param(lambda x: x & 1, id="bitand"),
        pytest.param(lambda x: bool(x), id="bool-outside-fork"),
        pytest.param(lambda x: x.to_bytes(8, "big"), id="to_bytes"),
    ],
)
def test_symbolic_int_refuses_what_it_cannot_model(op) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((TypeError, AttributeError)):
        r = op(_x())
        # a result that is still symbolic is a model, not a leak
        assert not isinstance(r, SymInt | SymBool), r


def test_symbolic_int_models_what_it_can() -> None:
    x = _x()
    assert isinstance(+x, SymInt) and z3.simplify((+x).expr == x.expr).eq(z3.BoolVal(True))
    assert isinstance(round(x), SymInt)
    assert isinstance(0 + x, SymInt) and isinstance(sum([x, x]), SymInt)
    assert isinstance(x, int) and not isinstance(x, bool)  # the model's input checks pass
    assert (x == None) is False and (x != None) is True  # noqa: E711 (never None)
    assert (x == "x") is False
    assert f"{x}" == "<x>"


def test_symbolic_bool_refuses_and_models() -> None:
    b = SymBool(z3.Bool("b"))
    c = SymBool(z3.Bool("b"))
    eq = b == c
    assert isinstance(eq, SymBool)  # not an identity test
    assert z3.simplify(eq.expr).eq(z3.BoolVal(True))
    ne = b != c
    assert isinstance(ne, SymBool) and z3.simplify(ne.expr).eq(z3.BoolVal(False))
    for leak in (lambda: hash(b), lambda: b + 1, lambda: True + b, lambda: [1, 2][b],
                 lambda: int(b), lambda: bool(b), lambda: b & 3, lambda: b < True):
        with pytest.raises(TypeError):
            leak()


def test_dataclass_inequality_on_symbolic_states_forks() -> None:
    from epochgc.model.system import Write

    def f(ex: Explorer) -> bool:
        a = Write(0, 0, 1, 2, ex.fresh_bool("d"))  # type: ignore[arg-type]
        b = Write(0, 0, 1, 2, ex.fresh_bool("d"))  # type: ignore[arg-type]
        return a != b

    _, paths = _paths(f)
    # the two fresh bools are named alike per run but are distinct variables: both answers
    assert {p.value for p in paths if p.kind == "ok"} == {True, False}

    def g(ex: Explorer) -> bool:
        d = ex.fresh_bool("d")
        return Write(0, 0, 1, 2, d) != Write(0, 0, 1, 2, d & d)  # type: ignore[arg-type]

    _, paths = _paths(g)
    assert {p.value for p in paths if p.kind == "ok"} == {False}


def test_comparing_a_term_with_itself_does_not_fork() -> None:
    """`max(x, x)` (replicas reporting one value) asks `x > x`: reflexivity answers it
    without a decision, even with no solver to prune the impossible side; a different term
    still forks."""
    def f(ex: Explorer) -> tuple[bool, ...]:
        x, y = ex.fresh_int("x"), ex.fresh_int("y")
        same = (bool(x < x), bool(x > x), bool(x <= x), bool(x >= x), bool(x == x),
                bool(x != x), bool(~(x == x)))
        assert max(x, x) is x
        return (*same, bool(x < y))

    ex = Explorer(prune=False)
    leaves = [p.value for p in ex.paths(f)]
    assert [v[:7] for v in leaves] == [(False, False, True, True, True, False, False)] * 2
    assert sorted(v[7] for v in leaves) == [False, True]
