"""One source of truth, checked: the quantified transition formulas (`spec.py`) against
the Python model (`model/system.py`) on small concrete universes.

For a universe (partitions, replicas, objects and which partitions each object feeds), a
seeded random walk of the Python model visits states; at each one, for every action:

- every Python step (every parameter in a finite domain) must satisfy the formula:
  its abstract successor is among those the formula allows (soundness of the encoding);
- every successor the formula allows (every parameter and existential choice in the
  domain) must be produced by some Python step, from some concretization of the state
  the abstraction forgets (the leader's seen window: the fence is havocked in the formula).

Integers range over [-2, largest value in the state + 2], which covers every bound the
guards test from both sides; element parameters over the whole universe. Both sides are
compared as sets of abstract states; a disagreement prints both sides.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from epochgc.model.actions import ACTIONS, step
from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow
from epochgc.model.invariants import INVARIANTS
from epochgc.model.system import ACCEPTED, FENCED, ORPHANED, STORED, UNKNOWN, System, initial
from epochgc.model.variants import REFERENCE
from epochgc.proofs.param import spec
from epochgc.proofs.param.logic import (
    BOOL,
    INT,
    SIG,
    FiniteLogic,
    Structure,
    finite_state,
    materialize,
)


class NotAbstractable(ValueError):
    pass


def abstract(s: System) -> Structure:
    """The abstraction function: what the formulas see of a Python state. Unset optional
    fields are 0 (canonical), so equal abstract states compare equal."""
    n_r = len(s.partitions[0].replicas) if s.partitions else 0
    out: Structure = {
        "revision": s.revision, "cluster_epoch": s.cluster_epoch,
        "snapshot_revision": s.snapshot_revision,
        "gc_set": s.gc_m is not None, "gc_m": 0 if s.gc_m is None else s.gc_m,
        "clock": s.clock, "grace": s.grace, "cache_floor": s.cache_floor,
    }
    per_p: dict[str, dict[tuple[int, ...], Any]] = {n: {} for n, (a, _) in SIG.items()
                                                    if a and a[0] == "P"}
    for p, part in enumerate(s.partitions):
        st = part.state
        vals = (st.max_applied_epoch, st.previous_applied_epoch, st.min_epoch_lower_bound,
                st.window_offset)
        if any(v is None for v in vals) and not all(v is None for v in vals):
            raise NotAbstractable(f"p{p}: window fields not set together: {st}")
        k = (p,)
        per_p["created"][k], per_p["crev"][k] = part.created, part.creation_revision
        per_p["wset"][k] = vals[0] is not None
        for name, v in zip(("max", "prev", "floor", "woff"), vals, strict=True):
            per_p[name][k] = 0 if v is None else v
        per_p["lrlo"][k], per_p["log_end"][k] = st.last_reconciled_log_offset, part.log_end
        # The barrier's fields: negative is none (-1 in the model's states)
        bset, gset = st.barrier_epoch >= 0, st.gc_safe_epoch >= 0
        per_p["bset"][k], per_p["gset"][k] = bset, gset
        per_p["bepoch"][k] = st.barrier_epoch if bset else 0
        per_p["boff"][k] = st.barrier_offset if bset else 0
        per_p["gsafe"][k] = st.gc_safe_epoch if gset else 0
        per_p["in_snap"][k] = part.in_snapshot
        if len(part.replicas) != n_r:
            raise NotAbstractable("partitions with different replica counts")
        for r, rep in enumerate(part.replicas):
            per_p["iset"][(p, r)] = rep.inactive is not None
            per_p["inact"][(p, r)] = 0 if rep.inactive is None else rep.inactive
            per_p["rset"][(p, r)] = rep.reported is not None
            per_p["rep"][(p, r)] = 0 if rep.reported is None else rep.reported
            per_p["rnull"][(p, r)] = rep.reported_null
    out.update(per_p)
    out.update(object_write_fields(s))
    return out


def object_write_fields(s: System) -> dict[str, Any]:
    """The objects' and writes' fields in the spec's vocabulary, as the model holds them
    (concrete here, Z3 terms in `symcorr`): one definition for both abstractions."""
    return {
        "ostatus": {(o,): ob.status for o, ob in enumerate(s.objects)},
        "oepoch": {(o,): ob.epoch for o, ob in enumerate(s.objects)},
        "owritten": {(o,): ob.written_at for o, ob in enumerate(s.objects)},
        "wstatus": {(w,): wr.status for w, wr in enumerate(s.writes)},
        "woffset": {(w,): wr.offset for w, wr in enumerate(s.writes)},
        "durable": {(w,): wr.durable for w, wr in enumerate(s.writes)},
        "wrepl": {(w,): wr.replicated for w, wr in enumerate(s.writes)},
        "wobj": {(w,): wr.obj for w, wr in enumerate(s.writes)},
        "wpart": {(w,): wr.partition for w, wr in enumerate(s.writes)},
    }


def key(struct: Structure) -> tuple[Any, ...]:
    """Hashable; both sides build their dicts in element order (itertools.product)."""
    return tuple((n, tuple(struct[n].values()) if SIG[n][0] else struct[n]) for n in SIG)


def sizes_of(s: System) -> dict[str, int]:
    return {"W": len(s.writes), "O": len(s.objects), "P": len(s.partitions),
            "R": len(s.partitions[0].replicas)}


def int_domain(struct: Structure) -> range:
    vals = [0]
    for v in struct.values():
        for x in (v.values() if isinstance(v, dict) else (v,)):
            if isinstance(x, int) and not isinstance(x, bool):
                vals.append(x)
    return range(-2, max(vals) + 3)


# -- the Python side -----------------------------------------------------------------------


def _seen_variants(s: System, p: int, dom: range) -> Iterator[System]:
    """Concretizations of what the abstraction forgets that matter: the leader's seen
    window of partition p. None admits exactly what the applied window accepts (or above
    it); a window above every epoch of the domain in the current term rejects them all;
    every other seen window decides between these (the fence's postcondition)."""
    part = s.partitions[p]
    top = dom[-1] + 1
    for seen in (None, SeenWindow(part.term, top, top)):
        reps = list(part.replicas)
        reps[part.leader] = replace(reps[part.leader], seen=seen)
        parts = list(s.partitions)
        parts[p] = replace(part, replicas=tuple(reps))
        yield replace(s, partitions=tuple(parts))


def python_steps(s: System, action: str, dom: range) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """abstract successor key -> (params, concrete successor) of one Python step."""
    sz = sizes_of(s)
    kinds = ACTIONS[action][1]
    ranges: list[list[Any]] = []
    for _, kind in kinds:
        if kind in ("partition", "replica", "object", "write"):
            ranges.append(list(range(sz[{"partition": "P", "replica": "R", "object": "O",
                                          "write": "W"}[kind]])))
        elif kind in ("epoch", "offset"):
            ranges.append(list(dom))
        elif kind == "foreign":
            ranges.append([(), (None,), *((x,) for x in dom)])
        else:
            raise AssertionError(kind)
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    fence_sensitive = action in ("fence_write", "other_write", "phantom_fence")
    for values in itertools.product(*ranges):
        params = {n: v for (n, _), v in zip(kinds, values, strict=True)}
        bases: Iterator[System] | list[System] = [s]
        if fence_sensitive:
            p = params["p"] if "p" in params else s.writes[params["w"]].partition
            bases = _seen_variants(s, p, dom)
        for base in bases:
            try:
                post = step(base, REFERENCE, action, **params)
            except ModelError:
                continue
            out.setdefault(key(abstract(post)), (params, post))
    return out


# -- the formula side ----------------------------------------------------------------------


def formula_steps(struct: Structure, sizes: dict[str, int], action: str, dom: range,
                  actions: dict[str, Any] | None = None) -> dict[tuple[Any, ...], dict[str, Any]]:
    params, choices, fn = (actions or spec.ACTIONS)[action]
    L = FiniteLogic(sizes)
    pre = finite_state(struct)
    ranges = []
    for _, kind in (*params, *choices):
        if kind == INT:
            ranges.append(list(dom))
        elif kind == BOOL:
            ranges.append([False, True])
        else:
            ranges.append(list(range(sizes[kind])))
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    names = [n for n, _ in (*params, *choices)]
    for values in itertools.product(*ranges):
        prm = dict(zip(names, values, strict=True))
        guard, post = fn(L, pre, prm)
        if guard:
            out.setdefault(key(materialize(post, sizes, struct)), prm)
    return out


# -- the check -------------------------------------------------------------------------------


@dataclass
class Disagreement:
    universe: str
    action: str
    side: str  # "python step the formula forbids" | "formula step python never takes"
    pre: System
    params: dict[str, Any]
    post: Any

    def __str__(self) -> str:
        post = self.post
        return (f"{self.side}: {self.action}({self.params}) on {self.universe}\n"
                f"  pre (Python):  {self.pre}\n  post:          {post}")


def _diff(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    da, db = dict(a), dict(b)
    return ", ".join(f"{k}: {da[k]} -> {db[k]}" for k in da if da[k] != db.get(k)) or "nothing"


# Actions that changed the abstract state in some checked Python step (this process):
# the correspondence rows report it, so a walk that never reaches an action shows.
EXERCISED: set[str] = set()


def check_state(s: System, universe: str, actions: dict[str, Any] | None = None,
                only: list[str] | None = None) -> tuple[list[Disagreement], int, list[System]]:
    """Compare both sides at one state; returns disagreements, steps compared, successors."""
    struct = abstract(s)
    sizes = sizes_of(s)
    dom = int_domain(struct)
    pre_key = key(struct)
    bad: list[Disagreement] = []
    n = 0
    succ: list[System] = []
    for action in only or list(spec.ACTIONS):
        py = python_steps(s, action, dom)
        fo = formula_steps(struct, sizes, action, dom, actions)
        n += len(py) + len(fo)
        succ += [post for _, post in py.values()]
        if any(k != pre_key for k in py):
            EXERCISED.add(action)
        for k, (params, _) in py.items():
            if k not in fo:
                bad.append(Disagreement(universe, action, "python step the formula forbids",
                                        s, params, "changed " + _diff(pre_key, k)))
        for k, prm in fo.items():
            if k not in py:
                bad.append(Disagreement(universe, action, "formula step python never takes",
                                        s, prm, "changed " + _diff(pre_key, k)))
    return bad, n, succ


def _perturb(s: System, rng: random.Random) -> System:
    """One field of a state changed a little (states the walk may never reach): the
    invariants are compared on these too, so a conjunct written differently shows."""
    i = rng.randrange(6)
    d = rng.choice((-1, 1))
    if i == 0:
        f = rng.choice(("revision", "cluster_epoch", "snapshot_revision", "gc_m"))
        cur = getattr(s, f)
        kw: dict[str, Any] = {f: (0 if cur is None else None)
                              if f == "gc_m" and rng.random() < 0.3 else (cur or 0) + d}
        return replace(s, **kw)
    if i == 1 and s.writes:
        w = rng.randrange(len(s.writes))
        wr = s.writes[w]
        f = rng.choice(("status", "offset", "durable"))
        val: Any = (not wr.durable) if f == "durable" else getattr(wr, f) + d
        writes = list(s.writes)
        writes[w] = replace(wr, **{f: val})
        return replace(s, writes=tuple(writes))
    if i == 2:
        o = rng.randrange(len(s.objects))
        f = rng.choice(("status", "epoch"))
        objs = list(s.objects)
        objs[o] = replace(objs[o], **{f: getattr(objs[o], f) + d})
        return replace(s, objects=tuple(objs))
    p = rng.randrange(len(s.partitions))
    part = s.partitions[p]
    if i == 3:
        f = rng.choice(("created", "in_snapshot", "creation_revision", "log_end"))
        val = (not getattr(part, f)) if f in ("created", "in_snapshot") else (
            getattr(part, f) + d)
        part = replace(part, **{f: val})
    elif i == 4:
        st = part.state
        f = rng.choice(("max_applied_epoch", "previous_applied_epoch",
                        "min_epoch_lower_bound", "window_offset", "last_reconciled_log_offset"))
        cur = getattr(st, f)
        kw2: dict[str, Any] = {f: cur if cur is None else cur + d}
        part = replace(part, state=replace(st, **kw2))
    else:
        r = rng.randrange(len(part.replicas))
        rep = part.replicas[r]
        f = rng.choice(("inactive", "reported"))
        cur = getattr(rep, f)
        val = None if cur is not None and rng.random() < 0.3 else (cur or 0) + d
        reps = list(part.replicas)
        reps[r] = replace(rep, **{f: val})
        part = replace(part, replicas=tuple(reps))
    parts = list(s.partitions)
    parts[p] = part
    return replace(s, partitions=tuple(parts))


def check_invariants(s: System, universe: str, rng: random.Random, n: int = 20
                     ) -> list[Disagreement]:
    """Python's invariants and the quantified ones agree on `s` and on `n` perturbations
    of it (the seen windows and terms, which the formulas leave out, are not touched)."""
    bad = []
    for t in [s, *(_perturb(s, rng) for _ in range(n))]:
        try:
            struct = abstract(t)
        except NotAbstractable:
            continue
        L = FiniteLogic(sizes_of(t))
        st = finite_state(struct)
        for name, conjs in spec.INVARIANTS.items():
            py = INVARIANTS[name](t, REFERENCE) is True
            fo = all(L.forall(sorts, lambda *xs, b=body, L=L, st=st: b(L, st, *xs)) if sorts
                     else body(L, st) for _, sorts, body in conjs)
            if py != fo:
                bad.append(Disagreement(universe, f"invariant {name}",
                                        f"python says {py}, the formula says {fo}", t, {},
                                        "(a state, not a step)"))
    return bad


def universes(max_p: int = 3, max_writes: int = 3, replicas: tuple[int, ...] = (1, 2)
              ) -> list[tuple[str, System]]:
    """Every shape up to partition renaming: 1..max_p partitions, objects each feeding a
    set of 1-3 partitions, at most max_writes placeholder slots in all."""
    out = []
    for n_p in range(1, max_p + 1):
        subsets = [c for k in range(1, n_p + 1) for c in itertools.combinations(range(n_p), k)]
        seen: set[tuple[Any, ...]] = set()
        for n_o in range(1, max_writes + 1):
            for feeds in itertools.combinations_with_replacement(subsets, n_o):
                if sum(map(len, feeds)) > max_writes:
                    continue
                canon = min(tuple(sorted(tuple(sorted(perm[p] for p in f)) for f in feeds))
                            for perm in itertools.permutations(range(n_p)))
                if canon in seen:
                    continue
                seen.add(canon)
                writes = [(o, p) for o, f in enumerate(canon) for p in f]
                for n_r in replicas:
                    name = f"{n_p}p{n_r}r:" + "|".join("".join(map(str, f)) for f in canon)
                    out.append((name, initial(n_p, n_r, writes, n_o)))
    return out


# The walk favours the produce path so that the sampled states have writes in every
# status (the check at a state still tries every action).
WALK_WEIGHTS = {"create_partition": 3, "mint": 2, "upload": 4, "fence_write": 4,
                "land_write": 4, "fail_replicate": 2, "copy_to_l1": 2, "reconcile": 2,
                "give_up": 2, "sync_replica": 2, "report": 2, "gc_compute": 2}


def _random_step(s: System, rng: random.Random) -> System:
    """One Python step with random parameters (the walk; cheap, unlike the check)."""
    sz = sizes_of(s)
    dom = int_domain(abstract(s))
    names = list(ACTIONS)
    weights = [WALK_WEIGHTS.get(a, 1) for a in names]
    for _ in range(200):
        action = rng.choices(names, weights)[0]
        params: dict[str, Any] = {}
        for n, kind in ACTIONS[action][1]:
            if kind in ("epoch", "offset"):
                params[n] = rng.choice(dom)
            elif kind == "foreign":
                params[n] = rng.choice([(), (None,), (rng.choice(dom),)])
            else:
                params[n] = rng.randrange(sz[{"partition": "P", "replica": "R",
                                              "object": "O", "write": "W"}[kind]])
        try:
            t = step(s, REFERENCE, action, **params)
        except ModelError:
            continue
        if t != s:
            return t
    return s


# States where the rarer actions take effect; a walk checks one of these besides its last
# state (a different feature first for each universe), so the sample covers them.
FEATURES: dict[str, Callable[[System], bool]] = {
    "a partition not created yet": lambda s: not all(p.created for p in s.partitions),
    "a write of unknown outcome": lambda s: any(w.status == UNKNOWN for w in s.writes),
    "a fenced write": lambda s: any(w.status == FENCED for w in s.writes),
    "a round's M covers a stored object": lambda s: s.gc_m is not None and any(
        o.status == STORED and o.epoch <= s.gc_m for o in s.objects),
    "an accepted placeholder not in L1": lambda s: any(
        w.status == ACCEPTED and not w.durable for w in s.writes),
    "a published report": lambda s: any(r.reported is not None for p in s.partitions
                                        for r in p.replicas),
    "an orphaned write (its partition deleted)": lambda s: any(
        w.status == ORPHANED for w in s.writes),
}


def walk(name: str, s0: System, steps: int, checks: int, seed: int,
         actions: dict[str, Any] | None = None) -> tuple[list[Disagreement], int, int]:
    """A seeded random walk of `steps` Python steps. Both sides are compared in full at
    `checks` states spread evenly along it (ending at its last), plus the last state of the
    walk that has one of FEATURES (tried in an order that differs per universe). Returns
    disagreements, states checked, steps compared."""
    rng = random.Random(f"{seed}:{name}")
    # checks = 0: only the featured state (or the last one when no state has a feature)
    at = {round((i + 1) * steps / checks) for i in range(checks)}  # the last state included
    trail = [s0]
    for _ in range(steps):
        trail.append(_random_step(trail[-1], rng))
    feats = list(FEATURES.values())
    k = sum(map(ord, name)) % len(feats)
    for f in feats[k:] + feats[:k]:
        hits = [i for i, t in enumerate(trail) if f(t)]
        if hits:
            at.add(hits[-1])
            break
    at = at or {steps}
    bad: list[Disagreement] = []
    compared = states = 0
    for i in sorted(at):
        b, n, _ = check_state(trail[i], name, actions)
        b += check_invariants(trail[i], name, rng)
        bad += b
        compared += n
        states += 1
        if bad:
            break
    return bad, states, compared


# Hand-written traces to states where the rarest actions take effect, or where a stamp or
# an LRLO guard written wrongly would show (a random walk seldom gets there): checked in
# full besides the walks. Universe 2p2r:01|0.
_SYNC = [(a, {"p": p, "r": r}) for p in (0, 1) for r in (0, 1) for a in ("sync_replica", "report")]
DIRECTED: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "gc_delete": [
        ("create_partition", {"p": 0}), ("create_partition", {"p": 1}), ("mint", {}),
        ("publish_snapshot", {}), ("upload", {"o": 0, "cache": 3}),
        ("fence_write", {"w": 0}), ("fence_write", {"w": 1}), ("land_write", {"w": 0}),
        ("land_write", {"w": 1}), ("copy_to_l1", {"w": 0}), ("copy_to_l1", {"w": 1}),
        ("mint", {}), ("mint", {}),
        *(("housekeep", {"p": p, "cache": c, "lrlo": c - 3}) for c in (4, 5) for p in (0, 1)),
        *_SYNC, ("publish_snapshot", {}), ("gc_compute", {"foreign": ()}),
    ],
    "upload": [  # o0 feeds p0 and p1; the last one it feeds is the older partition
        ("create_partition", {"p": 1}), ("mint", {}), ("create_partition", {"p": 0}),
    ],
    "reconcile": [  # w2 accepted at offset 0 of p0, not yet in L1
        ("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 1, "cache": 2}),
        ("fence_write", {"w": 2}), ("land_write", {"w": 2}),
    ],
    "delete_partition": [  # o0 feeds p0 (accepted) and p1 (fenced); o1's w2 fenced on p0
        ("create_partition", {"p": 0}), ("create_partition", {"p": 1}), ("mint", {}),
        ("upload", {"o": 0, "cache": 3}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
        ("fence_write", {"w": 1}), ("upload", {"o": 1, "cache": 3}), ("fence_write", {"w": 2}),
        *_SYNC, ("publish_snapshot", {}),
    ],
    "re-creation": [  # as above, then p0 deleted and re-created: w0, w2 are orphaned
        ("create_partition", {"p": 0}), ("create_partition", {"p": 1}), ("mint", {}),
        ("upload", {"o": 0, "cache": 3}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
        ("fence_write", {"w": 1}), ("upload", {"o": 1, "cache": 3}), ("fence_write", {"w": 2}),
        *_SYNC, ("publish_snapshot", {}), ("delete_partition", {"p": 0}),
        ("create_partition", {"p": 0}), ("sync_replica", {"p": 0, "r": 0}),
    ],
    "give_up": [
        ("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 1, "cache": 2}),
        ("fence_write", {"w": 2}), ("fail_replicate", {"w": 2}), ("mint", {}),
        ("other_write", {"p": 0, "epoch": 3}), ("other_write", {"p": 0, "epoch": 3}),
        ("mint", {}), ("other_write", {"p": 0, "epoch": 4}),
    ],
}


def directed_states() -> list[tuple[str, System]]:
    out = []
    for target, ops in DIRECTED.items():
        s = initial(2, 2, [(0, 0), (0, 1), (1, 0)], 2)
        for action, params in ops:
            s = step(s, REFERENCE, action, **params)
        out.append((f"2p2r:01|0 (directed to {target})", s))
    return out
