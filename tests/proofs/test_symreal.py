"""Symbolic reals (proofs/symreal.py): Python's integer conversions modelled exactly, and
R24 proved on real-valued ages, so a rule that rounds an age fails its contract."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import z3

from epochgc.model import keys
from epochgc.proofs import contracts_sym, symsolver
from epochgc.proofs.symreal import SymReal

VALUES = [Fraction(n, 4) for n in range(-13, 14)] + [Fraction(7199, 2), Fraction(-5, 2)]


@pytest.mark.parametrize("x", VALUES, ids=str)
def test_conversions_match_python(x: Fraction) -> None:
    r = SymReal(z3.RealVal(x))
    for got, want in ((round(r), round(x)), (math.floor(r), math.floor(x)),
                      (math.ceil(r), math.ceil(x)), (math.trunc(r), math.trunc(x))):
        assert z3.simplify(got.expr).as_long() == want  # type: ignore[attr-defined]


def test_the_gap5_age_example() -> None:
    assert keys.deletable(5, 3599.5, 9, 3600) is False
    assert keys.deletable(5, 3600.0, 9, 3600) is True


def test_deletable_contract_holds_and_a_rounded_age_breaks_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    symsolver.tune_z3()
    assert contracts_sym.check(keys.deletable).status == "proved"

    def rounded(epoch: int, age: float, m: int | None, grace: float) -> bool:
        """post: not __return__ or age >= grace"""
        return keys.epoch_collectible(epoch, m) and round(age) >= grace

    rounded.__module__ = keys.__name__
    o = contracts_sym.check(rounded)
    assert o.status == "failed" and "age >= grace" in o.detail
    args = o.trace["args"]
    assert round(args["age"]) >= args["grace"] > args["age"]  # a real, rounded up
