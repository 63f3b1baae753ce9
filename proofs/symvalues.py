"""SymBool and SymInt: bool and int stand-ins whose operations build Z3 terms.

The model's code runs on them unchanged: arithmetic and comparisons build terms
(`proofs.symterms`), and asking one for its truth asks the current decider
(`proofs.symctx`: an Explorer forks the path there). What cannot be modelled (a hash, a
product, a concrete attribute) raises rather than reading a made-up value. `concretize`
turns them back into plain values under a Z3 model.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import z3
from z3 import z3core

from epochgc.proofs.symctx import _decider
from epochgc.proofs.symterms import (
    _CMP,
    _FALSE,
    _REFLEXIVE,
    _TRUE,
    _and,
    _arith,
    _cmp2,
    _ints,
    _not,
    _or,
    _same_term,
    int_term,
)


def expr_of(v: object) -> z3.ExprRef:
    if isinstance(v, SymInt | SymBool):
        return v.expr
    if isinstance(v, bool):
        return _TRUE if v else _FALSE
    if isinstance(v, int):
        return int_term(v)
    raise TypeError(f"not a symbolic-compatible value: {v!r}")


def _refuse(what: str, v: object) -> TypeError:
    return TypeError(f"{what} on a symbolic value ({v!r}) cannot be modelled here")


def _bool_expr(o: object, v: object, what: str) -> z3.BoolRef:
    """A bool or symbolic bool operand; anything else (an int, a symbolic int) is refused
    rather than silently mixing sorts."""
    if isinstance(o, SymBool):
        return o.expr
    if isinstance(o, bool):
        return _TRUE if o else _FALSE
    raise _refuse(f"{what} with {type(o).__name__}", v)


class SymBool:
    """A boolean whose value is a Z3 formula. Truth is asked only inside an Explorer run
    (where it forks); `&`, `|`, `~`, `==` and `!=` build formulas; everything else raises."""

    __slots__ = ("expr",)

    def __init__(self, expr: z3.BoolRef) -> None:
        self.expr = expr

    def __bool__(self) -> bool:
        return _decider().decide(self.expr)

    # `&`, `|`, `~` build formulas without forking; model.logic uses them for invariants.
    def __and__(self, o: object) -> SymBool:
        return SymBool(_and(self.expr, _bool_expr(o, self, "&")))

    __rand__ = __and__

    def __or__(self, o: object) -> SymBool:
        return SymBool(_or(self.expr, _bool_expr(o, self, "|")))

    __ror__ = __or__

    def __invert__(self) -> SymBool:
        return SymBool(_not(self.expr))

    # Without these, `==` on two symbolic bools (and so dataclass `==`/`!=` on states
    # holding them) would be an identity test.
    def __eq__(self, o: object) -> Any:
        if o is None or isinstance(o, str):
            return False
        return SymBool(_cmp2(z3core.Z3_mk_eq, self.expr, _bool_expr(o, self, "==")))

    def __ne__(self, o: object) -> Any:
        r = self.__eq__(o)
        return (not r) if isinstance(r, bool) else ~r

    def __hash__(self) -> int:
        raise _refuse("hash()", self)

    def _refused(self, *_: object) -> Any:
        raise _refuse("arithmetic, ordering or conversion", self)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = __pos__ = _refused
    __lt__ = __le__ = __gt__ = __ge__ = __index__ = __int__ = __float__ = _refused
    __xor__ = __rxor__ = __abs__ = __round__ = _refused

    def __repr__(self) -> str:
        return f"SymBool({self.expr})"


# Under mypy a symbolic int is an int (it flows through the model's `int` fields); at run
# time it is NOT an int subclass, so CPython's int fast paths (`True + x`, `x < True`,
# `[10, 20][x]`, `round(x)`, `x.real`) cannot read a placeholder value: every operation
# lands in a method below, which models it or raises.
if TYPE_CHECKING:
    _IntBase = int
else:
    _IntBase = object


class SymInt(_IntBase):
    """An integer whose value is a Z3 term. `isinstance(x, int)` holds (the model's input
    checks accept it, via `__class__`), `isinstance(x, bool)` does not."""

    __slots__ = ("expr",)
    expr: z3.ArithRef

    def __init__(self, expr: z3.ArithRef) -> None:
        self.expr = expr

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(x, int) falls back to this
        return int

    def _operand(self, o: object, what: str) -> z3.ArithRef | None:
        """The Z3 term of an integer operand; None for types that are simply not numbers
        (the caller answers NotImplemented); bools and floats are refused."""
        t = type(o)
        if t is SymInt:  # type() is the real class (`__class__` says int)
            return o.expr  # type: ignore[attr-defined]
        if t is int:
            e = _ints.get(o)  # type: ignore[call-overload]
            return e if e is not None else expr_of(o)
        if isinstance(o, SymInt):
            return o.expr
        if isinstance(o, bool | float | complex | SymBool):
            raise _refuse(f"{what} with {type(o).__name__}", self)
        if isinstance(o, int):
            return z3.IntVal(int(o)) if type(o) is not int else expr_of(o)
        return None

    def _arith(self, o: object, fn: Any, what: str, swap: bool = False) -> Any:
        e = self._operand(o, what)
        if e is None:
            return NotImplemented
        a, b = (e, self.expr) if swap else (self.expr, e)
        return SymInt(_arith(fn, a, b))

    def __add__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_add, "+")

    def __radd__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_add, "+", swap=True)

    def __sub__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_sub, "-")

    def __rsub__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_sub, "-", swap=True)

    def __neg__(self) -> SymInt:
        return SymInt(-self.expr)

    def __pos__(self) -> SymInt:
        return self

    def __round__(self, ndigits: object = None) -> SymInt:
        if ndigits is not None:
            raise _refuse("round() with ndigits", self)
        return self

    def __trunc__(self) -> SymInt:
        return self

    __floor__ = __ceil__ = __trunc__

    def _cmp(self, o: object, op: str) -> Any:
        e = self._operand(o, op)
        if e is None:
            if op == "eq":  # a number is never equal to None, a string, ...
                return False
            return NotImplemented
        if e is self.expr or _same_term(e, self.expr):
            # The same term on both sides (`max(x, x)` over replicas reporting one value):
            # reflexivity decides it, so no path forks on a side that cannot happen.
            return SymBool(_TRUE if op in _REFLEXIVE else _FALSE)
        return SymBool(_cmp2(_CMP[op], self.expr, e))

    def __lt__(self, o: object) -> Any:
        return self._cmp(o, "lt")

    def __le__(self, o: object) -> Any:
        return self._cmp(o, "le")

    def __gt__(self, o: object) -> Any:
        return self._cmp(o, "gt")

    def __ge__(self, o: object) -> Any:
        return self._cmp(o, "ge")

    def __eq__(self, o: object) -> Any:
        return self._cmp(o, "eq")

    def __ne__(self, o: object) -> Any:
        r = self._cmp(o, "eq")
        return (not r) if isinstance(r, bool) else ~r

    def __hash__(self) -> int:
        raise _refuse("hash()", self)

    def __bool__(self) -> bool:
        return _decider().decide(_not(_cmp2(z3core.Z3_mk_eq, self.expr, expr_of(0))))

    def _concrete(self, *_: object) -> Any:
        raise _refuse("an operation that needs a concrete value", self)

    # Non-linear, bitwise and conversion operations: refused.
    __index__ = __int__ = __float__ = __complex__ = __mul__ = __rmul__ = _concrete
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __truediv__ = __rtruediv__ = _concrete
    __pow__ = __rpow__ = __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _concrete
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = _concrete
    __abs__ = __divmod__ = __rdivmod__ = _concrete

    def __getattr__(self, name: str) -> Any:
        # `x.real`, `x.bit_length()`, ...: an int's attributes would need its value.
        # (Dunder probes such as copy's `__deepcopy__` get the plain answer.)
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"a symbolic integer has no concrete .{name}")

    def __format__(self, spec: str) -> str:
        if spec:  # a padded or numeric rendering would print a made-up value
            raise _refuse(f"format spec {spec!r}", self)
        return f"<{self.expr}>"

    def __repr__(self) -> str:
        return f"<{self.expr}>"

    __str__ = __repr__


def concretize(value: Any, model: z3.ModelRef) -> Any:
    """Replace every symbolic value inside (dataclasses, tuples, lists, dicts) by its value
    in `model`, giving plain Python the model code can be re-run on. An optional field
    of a lazy object (`proofs.param.lazy`) is present when its group's condition holds in
    `model`, whatever the group's current decision (a later path may have made another)."""
    if isinstance(value, SymInt):
        return model.eval(value.expr, model_completion=True).as_long()
    if isinstance(value, SymBool):
        return z3.is_true(model.eval(value.expr, model_completion=True))
    groups = getattr(value, "__dict__", {}).get("_groups")
    if groups is not None:
        base = type(value).__mro__[1]
        kw = {}
        for f in dataclasses.fields(base):
            if not f.init:
                continue
            if f.name in groups:
                g, v = groups[f.name]
                present = z3.is_true(model.eval(g.cond, model_completion=True))
                kw[f.name] = concretize(v, model) if present else None
            else:
                kw[f.name] = concretize(object.__getattribute__(value, f.name), model)
        return base(**kw)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{f.name: concretize(getattr(value, f.name), model) for f in dataclasses.fields(value)
               if f.init},
        )
    if isinstance(value, tuple):
        return tuple(concretize(v, model) for v in value)
    if isinstance(value, list):
        return [concretize(v, model) for v in value]
    if isinstance(value, dict):
        return {k: concretize(v, model) for k, v in value.items()}
    return value

