"""Liveness of GC after deletion (issue 13), for any number of partitions, objects, writes.

- `reference` (R19 changed): from any state satisfying I1-I8 where every partition was
  deleted and a snapshot was published after it (nothing created since), a GC round may
  take M = the snapshot revision (the Python model computes exactly that: R19), and then
  every stored object passes gc_delete's guard: one round collects every stored object.
  Proved (unbounded, one query) over the quantified state of `spec.py`.
- `empty-is-nothing` (the old R19): the set STRANDED (no partition exists or is in the
  snapshot, no round's M, some object stored) is closed under every action except
  create_partition, gc_delete is never enabled in it, and stored objects stay stored: so
  in every run from such a state in which nobody creates a partition (production: the last
  topic was deleted), no round ever collects anything. Proved per action (unbounded);
  `tests/model/test_lifecycle.py` walks a concrete run into STRANDED.
"""

from __future__ import annotations

import time
from typing import Any

import z3

from epochgc.model.system import STORED
from epochgc.proofs.obligations import Outcome
from epochgc.proofs.param import spec
from epochgc.proofs.param.logic import St, Z3Logic
from epochgc.proofs.param.prove import SEED, _solver, _z, assume_invariants, row
from epochgc.proofs.symsolver import RLIMIT, check

L_ = Any


def all_deleted(L: L_, s: St) -> Any:
    """Every partition deleted and a snapshot published after that (revision unchanged)."""
    return L.And(L.forall(("P",), lambda p: L.And(L.Not(s.created(p)), L.Not(s.in_snap(p)))),
                 s.snapshot_revision() == s.revision())


def stranded(L: L_, s: St) -> Any:
    return L.And(L.forall(("P",), lambda p: L.And(L.Not(s.created(p)), L.Not(s.in_snap(p)))),
                 L.Not(s.gc_set()))


def _kept(L: L_, a: St, b: St) -> Any:
    return L.forall(("O",), lambda o: L.Implies(a.ostatus(o) == STORED,
                                                b.ostatus(o) == STORED))


def gc_compute_old(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """gc_compute under empty-is-nothing: an empty snapshot gives no M."""
    go, m = prm["go"], prm["M"]
    guard = L.Implies(go, L.And(spec.gc_guard(L, s, m),
                                L.exists(("P",), lambda p: s.in_snap(p))))
    return guard, spec.gc_compute(L, s, prm)[1]


def _query(name: str, kind: str, solver: z3.Solver, goal: Any, want: Any) -> Outcome:
    """`want` z3.unsat: the claim is proved; anything else fails (unknown included)."""
    t0 = time.perf_counter()
    solver.add(_z(goal))
    r = check(solver)[0]
    dt = time.perf_counter() - t0
    if r == want:
        return row(name, kind, "proved", dt, paths=1)
    why = solver.reason_unknown() if r == z3.unknown else f"solver said {r}"
    return row(name, kind, "unknown" if r == z3.unknown else "failed", dt, why)


def prove_reference(seed: int = SEED, rlimit: int = RLIMIT) -> list[Outcome]:
    L = Z3Logic()
    s = L.state("")
    solver = _solver(seed, rlimit)
    for f in assume_invariants(L, s):
        solver.add(f)
    solver.add(_z(all_deleted(L, s)))
    # ... and the clock has passed every stored object's grace (tick is always enabled)
    solver.add(_z(L.forall(("O",), lambda o: L.Implies(
        s.ostatus(o) == STORED, s.clock() - s.owritten(o) >= s.grace()))))
    m = s.snapshot_revision()
    _, post = spec.gc_compute(L, s, {"go": True, "M": m})
    collect_all = L.forall(("O",), lambda o: L.Implies(
        post.ostatus(o) == STORED,
        spec.gc_delete(L, post, {"o": o})[0]))
    goal = L.Not(L.And(spec.gc_guard(L, s, m), collect_all))
    return [_query("liveness: every partition deleted, every object past the grace period =>"
                   " one GC round collects every stored object (any size)", "liveness", solver,
                   goal, z3.unsat)]


def prove_empty_is_nothing(seed: int = SEED, rlimit: int = RLIMIT) -> list[Outcome]:
    """STRANDED is closed under every action but create_partition; gc_delete is disabled."""
    L0 = Z3Logic()
    s0 = L0.state("")
    solver0 = _solver(seed, rlimit)
    for f in assume_invariants(L0, s0):
        solver0.add(f)
    solver0.add(_z(stranded(L0, s0)))
    t0 = time.perf_counter()
    solver0.add(_z(L0.exists(("O",), lambda o: s0.ostatus(o) == STORED)))
    r = check(solver0)[0]
    # Not vacuous: STRANDED with a stored object satisfies the invariants.
    out = [row("empty-is-nothing: a state with every partition gone and an object stored "
               "satisfies I1-I8 (any size)", "liveness",
               "found" if r == z3.sat else ("unknown" if r == z3.unknown else "failed"),
               time.perf_counter() - t0, paths=1)]
    acts = dict(spec.ACTIONS)
    acts["gc_compute"] = (*spec.ACTIONS["gc_compute"][:2], gc_compute_old)
    for action, (params, choices, fn) in acts.items():
        if action == "create_partition":
            continue
        L = Z3Logic()
        pre = L.state("")
        prm = {n: L.const(f"{action}.{n}", k) for n, k in (*params, *choices)}
        guard, post = fn(L, pre, prm)
        solver = _solver(seed, rlimit)
        for f in assume_invariants(L, pre):
            solver.add(f)
        solver.add(_z(stranded(L, pre)))
        solver.add(_z(guard))
        if action == "gc_delete":
            goal: Any = True  # enabled at all?
            name = "empty-is-nothing: no GC round deletes anything once every partition is gone"
        else:
            goal = L.Not(L.And(stranded(L, post), _kept(L, pre, post)))
            name = f"empty-is-nothing: stranded objects stay stranded across {action}"
        out.append(_query(name + " (any size)", "liveness", solver, goal, z3.unsat))
    return out


def task_liveness(seed: int = SEED, rlimit: int = RLIMIT) -> list[Outcome]:
    return prove_reference(seed, rlimit) + prove_empty_is_nothing(seed, rlimit)
