"""The parameterized proof's jobs for the runner (`proofs/runner.py` runs them in its
process pool; each returns rows in its `Outcome` shape with `scope="any"`)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS, holds, inv_safety
from epochgc.model.logic import neg
from epochgc.model.system import System, initial
from epochgc.model.variants import REFERENCE
from epochgc.proofs import bmc
from epochgc.proofs.obligations import Outcome
from epochgc.proofs.param import correspond, liveness, prove, spec, symcorr
from epochgc.proofs.symsolver import RLIMIT

# Correspondence sampling: every universe of `correspond.universes()` (1-3 partitions,
# 1-2 replicas, objects feeding 1-3 partitions, at most 3 writes: 40 shapes), a seeded
# random walk of WALK steps each, both sides compared in full at CHECKS states along it
# plus one state with a feature where a rarer action takes effect (default: that one only).
PROFILES = {"default": (25, 0), "deep": (60, 8)}
CHUNKS = 4
# Actions whose abstract effect is nothing (they move only the forgotten fence state).
STUTTERS = {"change_leader", "restart", "phantom_fence"}

# The 2-partition shape of issue 11 item 1: object o0 feeds p1 (created late, after the
# snapshot) and p0; a GC round whose M is capped by the snapshot deletes it while p1's
# placeholder is still in flight. A bounded search: the solver picks every number.
# o1 (feeding p0 only, its write rejected at the fence) is what reference may delete: the
# final deletion is enabled in reference (issue 28: it never was, so the row was vacuous).
TWO_PARTITIONS = initial(2, 1, [(0, 1), (0, 0), (1, 0)], 2)
TWO_PARTITION_STAMP: list[tuple[str, dict[str, Any]]] = [
    ("create_partition", {"p": 0}), ("mint", {}), ("mint", {}),
    ("other_write", {"p": 0}), ("upload", {"o": 1}), ("fence_write", {"w": 2}),
    ("reconcile", {"p": 0}),
    ("sync_replica", {"p": 0, "r": 0}), ("report", {"p": 0, "r": 0}),
    ("publish_snapshot", {}), ("create_partition", {"p": 1}),
    ("upload", {"o": 0}), ("gc_compute", {"foreign": ()}), ("gc_delete", {}),
]
SCOPE_2P = "two-partition"  # bounded traces on a 2-partition template


# Issue 13: o0 feeds p0 and p1; p0 is deleted while p1's placeholder is in flight, then
# re-created. Every invariant must still hold at the end (bounded: the solver picks the
# numbers), so a deletion that orphaned p1's write would show as a broken I6.
TWO_PARTITIONS_SHARED = initial(2, 1, [(0, 0), (0, 1)], 1)
DELETE_SHARED: list[tuple[str, dict[str, Any]]] = [
    ("create_partition", {"p": 0}), ("create_partition", {"p": 1}), ("mint", {}),
    ("upload", {"o": 0}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
    ("fence_write", {"w": 1}), ("delete_partition", {"p": 0}), ("publish_snapshot", {}),
    ("create_partition", {"p": 0}), ("gc_compute", {"foreign": ()}),
]


def task_delete_shared() -> list[Outcome]:
    name = "2-partition deletion shape keeps I1-I8 in reference (bounded)"
    t0 = time.perf_counter()
    try:
        tr = bmc.search(TWO_PARTITIONS_SHARED, REFERENCE, DELETE_SHARED,
                        lambda st: neg(holds(st[-1], REFERENCE)))
    except bmc.SearchBudgetExhausted as e:
        return [prove.row(name, "invariant", "unknown", time.perf_counter() - t0, str(e))]
    dt = time.perf_counter() - t0
    if tr is None:
        return [Outcome(name, "invariant", "checked", dt, "no trace along the shape",
                        scope=SCOPE_2P)]
    return [Outcome(name, "invariant", "failed", dt, bmc.table(tr), scope=SCOPE_2P)]


# The epoch barrier raises M (R36-R38), not vacuously: o0's placeholder lands and is
# reconciled into L1, so p0's floor is its epoch e and M(p0) = e - 1 without a barrier;
# the barrier's candidate (>= e), promoted once LRLO reaches its command, covers o0,
# and the final gc_delete deletes it (a bounded search, the solver picks every number).
BARRIER_TEMPLATE = initial(1, 1, [(0, 0)], 1)
BARRIER_RAISES: list[tuple[str, dict[str, Any]]] = [
    ("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 0}),
    ("fence_write", {"w": 0}), ("land_write", {"w": 0}), ("copy_to_l1", {"w": 0}),
    ("reconcile", {"p": 0}), ("mint", {}), ("invalidate_caches", {}),
    ("barrier", {"p": 0}), ("reconcile", {"p": 0}),
    ("sync_replica", {"p": 0, "r": 0}), ("report", {"p": 0, "r": 0}),
    ("publish_snapshot", {}), ("gc_compute", {"foreign": ()}), ("gc_delete", {"o": 0}),
]


def _barrier_deleted(states: Any) -> Any:
    """The last step deleted o0, which the floor alone (floor - 1 < its epoch) kept."""
    last = states[-1]
    st = last.partitions[0].state
    floor_m = -1 if st.min_epoch_lower_bound is None else st.min_epoch_lower_bound - 1
    return (states[-2] != last) & (last.objects[0].epoch > floor_m)


def task_barrier_raises() -> list[Outcome]:
    """Witness: a barrier raises M(p) past floor - 1 and a deletion follows (reference);
    the safety check on the same shape (no trace breaks I1) makes it a proof row too."""
    name = "barrier raises M(p0) past floor - 1 and a deletion follows (bounded witness)"
    t0 = time.perf_counter()
    try:
        bad = bmc.search(BARRIER_TEMPLATE, REFERENCE, BARRIER_RAISES,
                         lambda st: neg(inv_safety(st[-1], REFERENCE)))
        wit = None if bad is not None else bmc.search(
            BARRIER_TEMPLATE, REFERENCE, BARRIER_RAISES, _barrier_deleted)
    except bmc.SearchBudgetExhausted as e:
        return [Outcome(name, "witness", "unknown", time.perf_counter() - t0, str(e),
                        scope=SCOPE_2P)]
    dt = time.perf_counter() - t0
    if bad is not None:
        return [Outcome(name, "invariant", "failed", dt, bmc.table(bad), scope=SCOPE_2P)]
    if wit is None:
        return [Outcome(name, "witness", "failed", dt, "vacuous: no trace along the shape "
                        "deletes an object above floor - 1", scope=SCOPE_2P)]
    return [Outcome(name, "witness", "found", dt, "no trace along the shape breaks safety; "
                    "the barrier's promoted epoch lets the final gc_delete delete o0 "
                    "(epoch above floor - 1) in:\n" + bmc.table(wit), scope=SCOPE_2P)]


def task_init(seed: int = prove.SEED, rlimit: int = RLIMIT) -> list[Outcome]:
    return prove.prove_init(seed, rlimit)


def task_action(action: str, seed: int = prove.SEED,
                rlimit: int = RLIMIT) -> list[Outcome]:
    return prove.prove_action(action, seed, rlimit)


def _profile() -> tuple[int, int]:
    return PROFILES[os.environ.get("EPOCHGC_PARAM_PROFILE", "default")]


def task_correspondence(chunk: int, chunks: int = CHUNKS, seed: int = prove.SEED,
                        actions: dict[str, Any] | None = None) -> list[Outcome]:
    walk_steps, checks = _profile()
    us = correspond.universes()[chunk::chunks]
    t0 = time.perf_counter()
    states = compared = 0
    correspond.EXERCISED.clear()
    for name, s0 in us:
        bad, n_states, n = correspond.walk(name, s0, walk_steps, checks, seed, actions)
        states += n_states
        compared += n
        if not bad and name == us[-1][0] and chunk == 0:
            for dname, ds in correspond.directed_states():
                b, n, _ = correspond.check_state(ds, dname, actions)
                bad += b + correspond.check_invariants(ds, dname, random.Random(seed))
                states += 1
                compared += n
        if bad:
            detail = "\n".join(str(b) for b in bad[:4])
            return [prove.row(f"model/system.py = quantified formulas, universes {chunk}/"
                              f"{chunks} (sampled)", "correspondence", "failed",
                              time.perf_counter() - t0, detail, paths=states, query_s=0.0)]
    names = ", ".join(n for n, _ in us)
    if chunk == 0:
        names += f" and {len(correspond.DIRECTED)} directed states"
    idle = sorted(set(spec.ACTIONS) - correspond.EXERCISED - STUTTERS)
    return [prove.row(
        f"model/system.py = quantified formulas, universes {chunk}/{chunks} (sampled)",
        "correspondence", "checked", time.perf_counter() - t0,
        f"{len(us)} universes ({names}); {states} states, {compared} steps compared; "
        f"walks of {walk_steps}, {checks} evenly spaced + 1 featured state each, seed {seed}; "
        + (f"actions never taking effect at a checked state: {', '.join(idle)}" if idle
           else "every action took effect at some checked state"), paths=states, query_s=0.0)]


def task_two_partitions() -> list[Outcome]:
    """No trace along the shape breaks safety, and (so that this is not vacuous) one
    trace's final gc_delete deletes an object."""
    name = "2-partition stamp shape cannot break safety in reference (bounded)"
    t0 = time.perf_counter()
    try:
        tr = bmc.search(TWO_PARTITIONS, REFERENCE, TWO_PARTITION_STAMP,
                        lambda st: neg(inv_safety(st[-1], REFERENCE)))
        wit = None if tr is not None else bmc.search(
            TWO_PARTITIONS, REFERENCE, TWO_PARTITION_STAMP, lambda st: st[-1] != st[-2])
    except bmc.SearchBudgetExhausted as e:
        return [Outcome(name, "invariant", "unknown", time.perf_counter() - t0, str(e),
                        scope=SCOPE_2P)]
    dt = time.perf_counter() - t0
    if tr is not None:
        return [Outcome(name, "invariant", "failed", dt, bmc.table(tr), scope=SCOPE_2P)]
    if wit is None:
        return [Outcome(name, "invariant", "failed", dt, "vacuous: the final gc_delete is "
                        "never enabled along the shape", scope=SCOPE_2P)]
    return [Outcome(name, "invariant", "checked", dt, "no trace along the shape breaks it; "
                    "the final gc_delete deletes an object in:\n" + bmc.table(wit),
                    scope=SCOPE_2P)]


def jobs(seed: int = prove.SEED, rlimit: int = RLIMIT
         ) -> list[tuple[Callable[..., list[Outcome]], tuple[Any, ...]]]:
    """Every job of the parameterized proof: (module-level function, args)."""
    # The sampled correspondence (`task_correspondence`, random walks over the 40 universes
    # of `correspond.universes`) is no job any more: the deep profile proves the
    # correspondence on every state of all 40 (exhaustive_shapes), which it sampled.
    out: list[tuple[Callable[..., list[Outcome]], tuple[Any, ...]]] = []
    out.append((task_init, (seed, rlimit)))
    out += [(task_action, (a, seed, rlimit)) for a in spec.ACTIONS]
    out.append((task_two_partitions, ()))
    out.append((task_delete_shared, ()))
    out.append((task_barrier_raises, ()))
    out.append((liveness.task_liveness, (seed, rlimit)))
    out += [(task_gc_old, (shape, seed, rlimit)) for shape in OLD_R19_SHAPES]
    out += exhaustive_jobs(seed, rlimit)
    return out


# -- the correspondence as a proof over every state of bounded shapes (symcorr) -------------

# Shapes (`symcorr.shapes`: partitions p, replicas r, then which partitions each object
# feeds): every shape up to 3 partitions, 2 replicas, 3 writes and 2 objects (28 shapes;
# deep: the 40 universes, 3 objects too), in `tox -e prove` itself since the explorer
# merges min/max, merge points and lazy copies (one task per shape beside the others).
# Groups of checks (one row each per check), all run by one task per shape.
GROUPS: dict[str, tuple[str, ...]] = {
    "fence": symcorr.FENCE_ACTIONS,
    "gc": ("gc_compute",),
    "actions": tuple(a for a in spec.ACTIONS if a not in symcorr.HAVOC),
    "predicates": ("init", "fresh M", *INVARIANTS, *TRANSITION_INVARIANTS),
}
# Read no write or object (by their code): proved once per (partitions, replicas), on the
# shape with the most writes.
PR_ONLY = ("gc_compute", "reports", "fresh M", "mono_fresh_M")


def exhaustive_shapes() -> list[tuple[str, System]]:
    """Default: the 28 shapes with at most 2 objects; deep (tox -e prove-exhaustive): all
    40 universes of `correspond.universes` (the 12 more have 3 objects of one write each),
    the ones the sampled correspondence walked."""
    deep = os.environ.get("EPOCHGC_PARAM_PROFILE", "default") == "deep"
    # and one partition with 3 replicas (Redpanda's default replication factor; issue 39):
    # a round that reads only two replicas' reports differs from the formula there.
    return symcorr.shapes(max_objects=3 if deep else 2) + symcorr.shapes(1, 1, 2, (3,))


def _pr_representative(shapes: list[tuple[str, System]]) -> set[str]:
    best: dict[str, tuple[int, str]] = {}
    for n, s in shapes:
        k = n.split(":")[0]
        if k not in best or len(s.writes) > best[k][0]:
            best[k] = (len(s.writes), n)
    return {n for _, n in best.values()}


def task_exhaustive(group: str, shape: str, seed: int = prove.SEED,
                    rlimit: int = RLIMIT) -> list[Outcome]:
    """One row per check of `group` on `shape`: proved (every state of the shape), or
    failed with a model in the spec's vocabulary; `unknown` fails."""
    shapes = exhaustive_shapes()
    template = dict(shapes)[shape]
    reps = _pr_representative(shapes)
    out = []
    for what in GROUPS[group]:
        if what in PR_ONLY and shape not in reps:
            continue
        t0 = time.perf_counter()
        if what == "init":
            results = [symcorr.check_init(shape, template, rlimit)]
            label = f"python = formula: init on {shape} (spec.init holds of initial() only)"
        elif what == "fresh M":
            results = [symcorr.check_fresh_m(shape, template, rlimit, seed)]
            label = f"python = formula: fresh M on every state of {shape}"
        elif what in INVARIANTS:
            results = [symcorr.check_invariant(what, shape, template, rlimit, seed)]
            label = f"python = formula: invariant {what} on every state of {shape}"
        elif what in TRANSITION_INVARIANTS:
            results = [symcorr.check_transition(what, shape, template, rlimit, seed)]
            label = (f"python = formula: transition invariant {what} on every pair of "
                     f"states of {shape}")
        else:
            modes = ("py", "fo") if what in symcorr.HAVOC else ("both",)
            results = [symcorr.check_action(what, shape, template, rlimit, seed, m)
                       for m in modes]
            label = (f"python = formula: {what} on every state of {shape} under I1-I9, "
                     f"same parameters, both directions")
        dt = time.perf_counter() - t0
        bad = next((r for r in results if r.failure), None)
        paths = sum(r.paths for r in results)
        slow = max(r.slowest_s for r in results)
        if bad is None:
            o = prove.row(label, "correspondence", "proved", dt,
                          f"{paths} paths, {sum(r.queries for r in results)} queries",
                          paths=paths, query_s=slow)
        else:
            o = prove.row(label, "correspondence", "unknown" if bad.unknown else "failed",
                          dt, f"{bad.what} on {shape}:\n{bad.failure}", paths=paths,
                          query_s=slow)
        o.scope = "shape"
        out.append(o)
    return out


def task_exhaustive_shape(shape: str, seed: int = prove.SEED,
                          rlimit: int = RLIMIT) -> list[Outcome]:
    """Every group's rows on `shape`, in one task: the shape's assumed invariants are
    expanded, and held by a solver, once for all of its actions (symcorr._shared)."""
    return [o for g in GROUPS for o in task_exhaustive(g, shape, seed, rlimit)]


def exhaustive_jobs(seed: int, rlimit: int
                    ) -> list[tuple[Callable[..., list[Outcome]], tuple[Any, ...]]]:
    """One task per shape, the largest first (the runner keeps this order among tasks of
    the same cost hint, so the small ones fill the end)."""
    shapes = sorted(exhaustive_shapes(), key=lambda ns: -_size(ns[1]))
    return [(task_exhaustive_shape, (n, seed, rlimit)) for n, _ in shapes]


def _size(s: System) -> int:
    return len(s.partitions) * len(s.partitions[0].replicas) * (1 + len(s.writes))


# F7's formula (`liveness.gc_compute_old`, the old R19) proved equal to model/system.py's
# gc_compute under `empty-is-nothing` on every state of these shapes (issue 39, gap 6):
# the liveness rows about that variant are about its Python, not a formula beside it.
OLD_R19_SHAPES = ("1p1r:0", "2p1r:0|1")


def task_gc_old(shape: str, seed: int = prove.SEED,
                rlimit: int = RLIMIT) -> list[Outcome]:
    from epochgc.model.variants import variant

    template = dict(symcorr.shapes(max_p=2, max_writes=2, replicas=(1,)))[shape]
    t0 = time.perf_counter()
    # Python -> formula only, with no partition outside the shape: F7's claim is about a
    # universe whose every partition is gone, and its formula is one-directional (any
    # lower M is allowed), so every Python step is one it allows is what F7 needs.
    rs = [symcorr.check_action("gc_compute", shape, template, rlimit, seed, "py",
                               variant=variant("empty-is-nothing"),
                               formula=liveness.gc_compute_old, foreign=False)]
    r = rs[0]
    label = (f"[empty-is-nothing] python => formula: every gc_compute step is one F7's "
             f"gc_compute_old allows, on every state of {shape} under I1-I9 (no foreign "
             f"partition)")
    status = "unknown" if r.unknown else "failed" if r.failure else "proved"
    o = prove.row(label, "correspondence", status, time.perf_counter() - t0,
                  r.failure or f"{sum(x.paths for x in rs)} paths, "
                  f"{sum(x.queries for x in rs)} queries", paths=sum(x.paths for x in rs),
                  query_s=r.slowest_s)
    o.scope = "shape"
    return [o]
