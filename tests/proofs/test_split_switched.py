"""The variant-split checks' shortcut (Explorer._holds_switched: only the path literals
that mention a switch are evaluated with the switches set) must answer as the solver
does: per path, `split_paths` equals "path condition and selector satisfiable" asked of
a fresh solver, and the splits `assume` records as pruned are exactly those whose own
exploration prunes."""

from __future__ import annotations

import itertools

import z3

from epochgc.proofs.sym import Explorer
from epochgc.proofs.symvalues import SymBool

S, T = z3.Bool("variant.s"), z3.Bool("variant.t")
SPLITS = [(z3.And(S if s else z3.Not(S), T if t else z3.Not(T)),
           [(S, z3.BoolVal(s)), (T, z3.BoolVal(t))])
          for s, t in itertools.product((False, True), repeat=2)]


def _toy(s: z3.BoolRef, t: z3.BoolRef):  # type: ignore[no-untyped-def]
    """Decisions and assumptions that mix the switches with the inputs, so that the
    path's model often satisfies the path only with the switches the other way."""
    def f(ex: Explorer) -> int:
        x, y = ex.fresh_int("x"), ex.fresh_int("y")
        out = 0
        if bool(x > 0):
            out += 1
            ex.assume(SymBool(z3.Or(s, x.expr > 5)))
        if bool(SymBool(z3.Or(t, y.expr < x.expr))):
            out += 2
        ex.assume(SymBool(z3.Or(z3.Not(s), t, y.expr > 3)))
        if bool(SymBool(z3.If(t, x.expr, y.expr) > 2)):
            out += 4
        return out
    return f


def _sat(*fs: z3.BoolRef) -> bool:
    solver = z3.Solver()
    solver.add(*fs)
    return bool(solver.check() == z3.sat)


def test_split_paths_agree_with_the_solver() -> None:
    ex = Explorer()
    ex.splits = lambda: SPLITS
    seen = 0
    for p in ex.paths(_toy(S, T)):
        got = ex.split_paths()
        want = [_sat(*p.pc, sel) for sel, _ in SPLITS]
        assert got == want, (p.pc, got, want)
        seen += p.kind == "ok"
    assert seen >= 6  # the toy does branch on both switches and inputs


def test_pruned_splits_are_those_pruned_alone() -> None:
    ex = Explorer()
    ex.splits = lambda: SPLITS
    for _ in ex.paths(_toy(S, T)):
        pass
    joint = {i for i, _ in ex.pruned_for}
    alone = set()
    for i, (_, pairs) in enumerate(SPLITS):
        vals = dict((str(x), v) for x, v in pairs)
        one = Explorer()
        if any(p.kind == "pruned"
               for p in one.paths(_toy(vals["variant.s"], vals["variant.t"]))):
            alone.add(i)
    assert joint == alone
    assert alone and alone != set(range(len(SPLITS)))  # neither none nor all


def test_a_switched_literal_is_evaluated() -> None:
    """x > 0 and (s or x < 0) holds with s true; with s false it does not, although x > 0
    alone (no switch) still does."""
    x = z3.Int("x")
    lits = [x > 0, z3.Or(S, x < 0)]
    solver = z3.Solver()
    solver.add(*lits, x == 1, S)
    assert solver.check() == z3.sat
    ex = Explorer()
    m = solver.model()
    assert not ex._holds_switched(m, lits, [(S, z3.BoolVal(False))])
    assert ex._holds_switched(m, lits, [(S, z3.BoolVal(True))])
    assert ex._holds_switched(m, [x > 0], [(S, z3.BoolVal(False))])  # no switch in it
