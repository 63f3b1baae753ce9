"""The PEP 316 contracts (`pre:`/`post:`/`raises:` docstring lines) proved on every path
by the symbolic executor: the model's own Python runs on unbounded Z3 integers, every
branch forks, and a postcondition that can be false on a feasible path is a
counterexample, re-run on the concrete function before it is reported.

This is what finds a broken contract quickly; CrossHair (a bounded search, `checked`)
missed a broken `well_formed` postcondition of `apply_reconciled` at 1 s per condition and
a broken revision cap of `gc_epoch` even at 20 s. Covered: functions whose parameters are
ints, optional ints, bools, floats (symbolic reals, `proofs.symreal`), `PartitionState`,
`SeenWindow | None` and a `Variant` (every named variant, each its own run).
"""

from __future__ import annotations

import inspect
import sys
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from epochgc.model.fence import SeenWindow
from epochgc.model.partition import PartitionState
from epochgc.model.variants import REFERENCE, VARIANTS, Variant
from epochgc.proofs import symreal
from epochgc.proofs.obligations import Outcome
from epochgc.proofs.sym import Explorer, Prune, SolverUnknown
from epochgc.proofs.symsolver import RLIMIT
from epochgc.proofs.symvalues import concretize

TARGETS = (
    "epochgc.model.partition.apply_placeholder",
    "epochgc.model.partition.apply_advance_epoch",
    "epochgc.model.partition.apply_reconciled",
    "epochgc.model.partition.inactive_epoch",
    "epochgc.model.fence.fence",
    "epochgc.proofs.contracts.capped",
    "epochgc.proofs.contracts.reconciled",
    "epochgc.proofs.contracts.placeholder",
    "epochgc.proofs.contracts.watermark",
    "epochgc.model.keys.deletable",
)


def contract(
    fn: Callable[..., Any],
) -> tuple[list[str], list[str], tuple[type[BaseException], ...]]:
    pres: list[str] = []
    posts: list[str] = []
    raises: list[type[BaseException]] = []
    env = sys.modules[fn.__module__].__dict__
    for line in (fn.__doc__ or "").splitlines():
        line = line.strip()
        if line.startswith("pre:"):
            pres.append(line[4:].strip())
        elif line.startswith("post:"):
            posts.append(line[5:].strip())
        elif line.startswith("raises:"):
            raises += [env[n.strip()] for n in line[7:].split(",")]
    return pres, posts, tuple(raises)


# Functions whose contracts are about the barrier's apply-time refusal (R37): only their
# `PartitionState` inputs get symbolic barrier fields (the others' paths would double).
_BARRIER_READERS = frozenset({"apply_placeholder"})


def _arg(ex: Explorer, name: str, hint: Any, barrier: bool = False) -> Any:
    if hint is int:
        return ex.fresh_int(name)
    if hint == (int | None) or hint == typing.Optional[int]:  # noqa: UP045
        return ex.fresh_opt_int(name)
    if hint is bool:
        return ex.fresh_bool(name)
    if hint is float:  # seconds: any real (a whole number of seconds is one of them)
        from epochgc.proofs.symreal import fresh_real

        return fresh_real(ex._fresh_name(name))
    if hint is PartitionState:
        def opt(f: str) -> Any:
            return ex.fresh_opt_int(f"{name}.{f}")
        st = PartitionState(opt("max"), opt("prev"), opt("floor"), opt("woff"),
                            ex.fresh_int(f"{name}.lro"), ex.fresh_int(f"{name}.lrlo"),
                            ex.fresh_int(f"{name}.start"))
        if barrier:  # a barrier refusal is a path of its own (R37)
            st = replace(st, barrier_epoch=ex.fresh_int(f"{name}.bepoch"),
                         barrier_offset=ex.fresh_int(f"{name}.boff"),
                         gc_safe_epoch=ex.fresh_int(f"{name}.gsafe"))
        return st
    if hint == (SeenWindow | None) or hint == typing.Optional[SeenWindow]:  # noqa: UP045
        import z3

        if not ex.decide(z3.Bool(f"{name}.present")):
            return None
        return SeenWindow(ex.fresh_int(f"{name}.term"), ex.fresh_int(f"{name}.prev"),
                          ex.fresh_int(f"{name}.max"))
    raise TypeError(f"no symbolic input for {name}: {hint!r}")


# The leader's fence layer's switches: only `model.fence` (and the rules it calls) read them.
_FENCE_SWITCHES = {"fence_rule": REFERENCE.fence_rule, "followers_slide": False,
                   "fence_lo_from_applied": True, "term_scoped_seen": True,
                   "collapse_first_slide": False}


def _distinct(variants: Iterable[Variant], fn: Callable[..., Any]) -> list[Variant]:
    """One variant per behaviour of `fn`: release-at-enqueue only changes which
    interleavings `model.ordered` allows, never a function's answer, and a function outside
    the fence reads none of the fence's switches."""
    out: dict[Variant, Variant] = {}
    fence_layer = fn.__module__ in ("epochgc.model.fence", "epochgc.model.prodrules")
    for v in variants:
        key = replace(v, name="", release_at_enqueue=False,
                      **({} if fence_layer else _FENCE_SWITCHES))  # type: ignore[arg-type]
        out.setdefault(key, v)
    return list(out.values())


def check(fn: Callable[..., Any], rlimit: int = RLIMIT) -> Outcome:
    target = f"{fn.__module__}.{fn.__qualname__}"
    name = f"contracts of {target} (all paths)"
    t0 = time.perf_counter()
    pres, posts, raises = contract(fn)
    hints = typing.get_type_hints(fn, globalns=sys.modules[fn.__module__].__dict__)
    params = [p for p in inspect.signature(fn).parameters if p != "variant"]
    has_variant = "variant" in inspect.signature(fn).parameters
    env0 = dict(sys.modules[fn.__module__].__dict__)
    paths = 0
    for v in (_distinct(VARIANTS.values(), fn) if has_variant else [None]):
        ex = Explorer(rlimit=rlimit)

        def run(ex: Explorer, v: Variant | None = v) -> Any:
            args = {p: _arg(ex, p, hints[p], fn.__name__ in _BARRIER_READERS) for p in params}
            if v is not None:
                args["variant"] = v
            env = {**env0, **args}
            for pre in pres:
                if not eval(pre, env):
                    raise Prune()
            try:
                env["__return__"] = fn(**args)
            except raises:
                return args, []
            return args, [post for post in posts if not eval(post, env)]

        try:
            for path in ex.paths(run):
                if path.kind != "ok":
                    continue
                paths += 1
                args, broken = path.value
                if broken:
                    model = ex.model_for(path.pc)
                    c_args = (symreal.concrete(concretize(args, model), model)
                              if model is not None else args)
                    shown = ", ".join(f"{k}={val!r}" for k, val in c_args.items())
                    # re-run on the concrete function: the report is never an artefact
                    c_env = {**env0, **c_args}
                    c_env["__return__"] = fn(**c_args)
                    assert eval(broken[0], c_env) is False, f"engine bug: {shown}"
                    return Outcome(name, "contract", "failed", time.perf_counter() - t0,
                                   f"post: {broken[0]} is false for {target}({shown})",
                                   {"args": c_args}, paths=paths)
        except SolverUnknown as e:
            return Outcome(name, "contract", "unknown", time.perf_counter() - t0, str(e),
                           paths=paths)
    return Outcome(name, "contract", "proved", time.perf_counter() - t0,
                   f"{len(posts)} postconditions on every path", paths=paths)


def check_target(target: str, rlimit: int = RLIMIT) -> Outcome:
    module, _, attr = target.rpartition(".")
    __import__(module)
    return check(getattr(sys.modules[module], attr), rlimit)
