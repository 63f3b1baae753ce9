"""A real number whose value is a Z3 term, for the model's functions that take ages in
seconds (`model.keys.deletable`: an object's age and the grace period are any
non-negative reals; the GC job passes float seconds). Comparisons give `SymBool`s (they
fork inside an Explorer run); `+`, `-` stay real; Python's conversions to an integer are
modelled exactly (`round`: half to even, `math.floor`, `math.ceil`, `math.trunc`; `int()`
is refused: CPython insists on a real int back),
so a rule that rounds an age is checked as written, not refused. Kept beside `proofs.sym`,
which is integers only."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import z3

from epochgc.proofs.symvalues import SymBool, SymInt


def _term(o: object) -> z3.ArithRef | None:
    if isinstance(o, SymReal):
        return o.expr
    if type(o) is SymInt:
        return z3.ToReal(o.expr)
    if isinstance(o, bool):
        return None
    if isinstance(o, int | Fraction):
        return z3.RealVal(Fraction(o))
    if isinstance(o, float):
        return z3.RealVal(Fraction(o))
    return None


class SymReal:
    __slots__ = ("expr",)

    def __init__(self, expr: z3.ArithRef) -> None:
        self.expr = expr

    def _cmp(self, o: object, op: Any) -> Any:
        e = _term(o)
        return NotImplemented if e is None else SymBool(op(self.expr, e))

    def __lt__(self, o: object) -> Any:
        return self._cmp(o, lambda a, b: a < b)

    def __le__(self, o: object) -> Any:
        return self._cmp(o, lambda a, b: a <= b)

    def __gt__(self, o: object) -> Any:
        return self._cmp(o, lambda a, b: a > b)

    def __ge__(self, o: object) -> Any:
        return self._cmp(o, lambda a, b: a >= b)

    def __eq__(self, o: object) -> Any:
        return self._cmp(o, lambda a, b: a == b)

    def __ne__(self, o: object) -> Any:
        return self._cmp(o, lambda a, b: a != b)

    def _arith(self, o: object, op: Any) -> Any:
        e = _term(o)
        return NotImplemented if e is None else SymReal(op(self.expr, e))

    def __add__(self, o: object) -> Any:
        return self._arith(o, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, o: object) -> Any:
        return self._arith(o, lambda a, b: a - b)

    def __rsub__(self, o: object) -> Any:
        return self._arith(o, lambda a, b: b - a)

    def __neg__(self) -> SymReal:
        return SymReal(-self.expr)

    def __floor__(self) -> SymInt:
        return SymInt(z3.ToInt(self.expr))

    def __ceil__(self) -> SymInt:
        return SymInt(-z3.ToInt(-self.expr))

    def __trunc__(self) -> SymInt:
        x = self.expr
        return SymInt(z3.If(x >= 0, z3.ToInt(x), -z3.ToInt(-x)))

    def __int__(self) -> int:
        raise TypeError("int() of a symbolic real is not modelled (CPython needs an int "
                        "back): use math.trunc")

    def __round__(self, ndigits: object = None) -> SymInt:
        if ndigits is not None:
            raise TypeError("round() of a symbolic real with ndigits is not modelled")
        f = z3.ToInt(self.expr)
        frac = self.expr - z3.ToReal(f)
        half = z3.RealVal(Fraction(1, 2))
        return SymInt(z3.If(frac < half, f, z3.If(frac > half, f + 1,
                                                    z3.If(f % 2 == 0, f, f + 1))))

    def __bool__(self) -> bool:
        raise TypeError("the truth of a symbolic real is not modelled")

    def __hash__(self) -> int:
        raise TypeError("a symbolic real is not hashable")

    def __repr__(self) -> str:
        return f"SymReal({self.expr})"


def fresh_real(name: str) -> SymReal:
    return SymReal(z3.Real(name))


def concrete(value: Any, model: z3.ModelRef) -> Any:
    """`value` with each SymReal replaced by its exact value (a Fraction) in `model`."""
    if isinstance(value, SymReal):
        v = model.eval(value.expr, model_completion=True)
        return Fraction(v.numerator_as_long(), v.denominator_as_long())
    if isinstance(value, dict):
        return {k: concrete(x, model) for k, x in value.items()}
    return value
