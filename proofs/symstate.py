"""Symbolic states and action parameters for the proofs, built from a concrete template.

The template fixes the structure (how many partitions, replicas, objects and write slots,
and which object each write belongs to); every number in it becomes an unbounded Z3
integer and every flag a Z3 boolean. Optional values fork into "absent" and "present"
shapes, so each path sees plain `None` or a symbolic int, exactly as the model expects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from epochgc.model.actions import ACTIONS
from epochgc.model.fence import SeenWindow
from epochgc.model.partition import PartitionState
from epochgc.model.system import Obj, Partition, Replica, System, Write
from epochgc.proofs.param.lazy import Group, lazy
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symterms import const_bool, const_int, eq_int
from epochgc.proofs.symvalues import SymInt


def choice(ex: Explorer, name: str, n: int) -> int:
    """A concrete index in range(n), chosen by the explorer (one path per value)."""
    var = const_int(name)
    for i in range(n - 1):
        if ex.decide(eq_int(var, i)):
            return i
    return n - 1


def _seen(ex: Explorer, name: str) -> SeenWindow | None:
    if not ex.decide(const_bool(f"{name}.present")):
        return None
    return SeenWindow(ex.fresh_int(f"{name}.term"), ex.fresh_int(f"{name}.prev"),
                      ex.fresh_int(f"{name}.max"))


def _state(ex: Explorer, name: str) -> PartitionState:
    # Invariant I3 says the four window fields are set together, so one fork covers them.
    set_ = ex.decide(const_bool(f"{name}.set"))

    def opt(f: str) -> SymInt | None:
        return ex.fresh_int(f"{name}.{f}") if set_ else None

    return PartitionState(
        # the barrier's fields are plain numbers (negative: none), no fork
        barrier_epoch=ex.fresh_int(f"{name}.bepoch"),
        barrier_offset=ex.fresh_int(f"{name}.boff"),
        gc_safe_epoch=ex.fresh_int(f"{name}.gsafe"),
        max_applied_epoch=opt("max"),
        previous_applied_epoch=opt("prev"),
        min_epoch_lower_bound=opt("floor"),
        window_offset=opt("woff"),
        last_reconciled_offset=ex.fresh_int(f"{name}.lro"),
        last_reconciled_log_offset=ex.fresh_int(f"{name}.lrlo"),
        start_offset=ex.fresh_int(f"{name}.start"),
    )


def _replica(ex: Explorer, name: str, state_set: bool) -> Replica:
    """Shapes that break invariant I4 (a replica's view above the truth, a report above
    the view) are not built: they would only be pruned, one solver call each."""
    seen = _seen(ex, f"{name}.seen")
    null = ex.fresh_bool(f"{name}.reported_null")  # absent or null when no value
    if not state_set or not ex.decide(const_bool(f"{name}.inactive?")):
        return Replica(seen, reported_null=null)  # type: ignore[arg-type]
    inactive = ex.fresh_int(f"{name}.inactive")
    if not ex.decide(const_bool(f"{name}.reported?")):
        return Replica(seen, inactive, reported_null=null)  # type: ignore[arg-type]
    return Replica(seen, inactive, ex.fresh_int(f"{name}.reported"))


def _lazy_replica(ex: Explorer, name: str) -> Replica:
    """A replica whose three optional fields (seen window, M(p) view, report) are each a
    lazy group (`proofs.param.lazy`): decided by the explorer when the action reads it,
    else a formula in the joined invariants and goals. The shapes I4 excludes (a view
    without M(p), a report without a view) are excluded by the assumed Inv(pre), as
    formulas: no fork, no solver call."""
    seen = SeenWindow(ex.fresh_int(f"{name}.seen.term"), ex.fresh_int(f"{name}.seen.prev"),
                      ex.fresh_int(f"{name}.seen.max"))
    grp: dict[str, tuple[Group, Any]] = {
        "seen": (Group(const_bool(f"{name}.seen.present")), seen),
        "inactive": (Group(const_bool(f"{name}.inactive?")), ex.fresh_int(f"{name}.inactive")),
        "reported": (Group(const_bool(f"{name}.reported?")), ex.fresh_int(f"{name}.reported")),
    }
    null = ex.fresh_bool(f"{name}.reported_null")  # absent or null when no value
    return lazy(Replica, grp, reported_null=null)  # type: ignore[no-any-return]


def undecide(s: System) -> None:
    """Forget the decisions the last path made on `s`'s lazy replicas (a state replayed
    for the next path is the same object: `Explorer.replayed`)."""
    for part in s.partitions:
        for r in part.replicas:
            for g, _ in r.__dict__.get("_groups", {}).values():
                g.decided = None


def decisions(s: System) -> tuple[bool | None, ...]:
    """The current decisions on `s`'s lazy replicas' groups (None: undecided)."""
    return tuple(g.decided for part in s.partitions for r in part.replicas
                 for g, _ in r.__dict__.get("_groups", {}).values())


def symbolic_system(ex: Explorer, template: System, lazy_replicas: bool = False) -> System:
    """Replicas are interchangeable, so the leader is replica 0 (by symmetry every state
    with another leader is a renaming of one of these). `lazy_replicas`: the replicas'
    optional fields fork only where read (`_lazy_replica`; call `undecide` before each
    path that reuses the state)."""
    parts = []
    for p, tp in enumerate(template.partitions):
        state = _state(ex, f"p{p}")
        # M(p) has a value with a window or a promoted barrier epoch (R7, R38)
        set_ = lazy_replicas or state.max_applied_epoch is not None or bool(
            state.gc_safe_epoch >= 0)
        reps = tuple(_lazy_replica(ex, f"p{p}.r{r}") if lazy_replicas
                     else _replica(ex, f"p{p}.r{r}", set_) for r in range(len(tp.replicas)))
        parts.append(
            Partition(
                created=ex.fresh_bool(f"p{p}.created"),  # type: ignore[arg-type]
                creation_revision=ex.fresh_int(f"p{p}.crev"),
                state=state,
                log_end=ex.fresh_int(f"p{p}.log_end"),
                term=ex.fresh_int(f"p{p}.term"),
                leader=0,
                in_snapshot=ex.fresh_bool(f"p{p}.in_snapshot"),  # type: ignore[arg-type]
                replicas=reps,
            )
        )
    objs = tuple(Obj(ex.fresh_int(f"o{o}.status"), ex.fresh_int(f"o{o}.epoch"),
                     ex.fresh_int(f"o{o}.written_at"))
                 for o in range(len(template.objects)))
    writes = tuple(
        Write(w.obj, w.partition, ex.fresh_int(f"w{i}.status"), ex.fresh_int(f"w{i}.offset"),
              ex.fresh_bool(f"w{i}.durable"),  # type: ignore[arg-type]
              ex.fresh_bool(f"w{i}.replicated"))  # type: ignore[arg-type]
        for i, w in enumerate(template.writes)
    )
    return replace(
        template,
        revision=ex.fresh_int("revision"),
        cluster_epoch=ex.fresh_int("cluster_epoch"),
        snapshot_revision=ex.fresh_int("snapshot_revision"),
        partitions=tuple(parts),
        objects=objs,
        writes=writes,
        gc_m=ex.fresh_opt_int("gc_m"),
        clock=ex.fresh_int("clock"),
        grace=ex.fresh_int("grace"),
        cache_floor=ex.fresh_int("cache_floor"),
    )


DOMAIN_MIN = {"epoch": 0, "offset": 0}


def symbolic_params(
    ex: Explorer, s: System, action: str, fixed: dict[str, Any] | None = None, tag: str = "",
    symmetric: bool = False,
) -> dict[str, Any]:
    """Parameters for `action`: indices enumerated, numbers symbolic (unless `fixed`).

    `symmetric`: the template's write slots (each with its own object, all on one
    partition) are interchangeable, so acting on slot 0 covers acting on any slot."""
    fixed = fixed or {}
    out: dict[str, Any] = {}
    for name, kind in ACTIONS[action][1]:
        key = f"{tag}{action}.{name}"
        if name in fixed:
            out[name] = fixed[name]
        elif kind == "partition":
            out[name] = choice(ex, key, len(s.partitions))
        elif kind == "replica":
            out[name] = choice(ex, key, len(s.partitions[0].replicas))
        elif kind == "object":
            out[name] = 0 if symmetric else choice(ex, key, len(s.objects))
        elif kind == "write":
            out[name] = 0 if symmetric else choice(ex, key, len(s.writes))
        elif kind in ("epoch", "offset"):
            # The parameter's domain (epochs and offsets are >= 0): the
            # model refusing a value inside it on an admitted state is a failure.
            x = ex.fresh_int(key)
            ex.assume(x >= DOMAIN_MIN[kind], check=False)
            out[name] = x
        elif kind == "foreign":
            # No foreign partition, or one whose (adversarial) report may be absent.
            out[name] = (ex.fresh_opt_int(key),) if ex.decide(const_bool(f"{key}.any")) else ()
        else:
            raise AssertionError(kind)
    return out
