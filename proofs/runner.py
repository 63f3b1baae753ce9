"""`python -m epochgc.proofs` (what `tox -e prove` runs): every proof obligation, in parallel.

Kinds: `invariant` and `transition` (init and induction queries, and "no trace" bounded
checks of the bug shapes under `reference`, each showing its final deletion enabled),
`vacuity` (init and the assumed invariants are satisfiable, each action is enabled under
them, each transition invariant's antecedent holds for some step), `witness` (each action
reachable; liveness witnesses), `counterexample` (each known-bad variant breaks safety),
`correspondence` (model/system.py = proofs/param/spec.py over every state of a shape),
`crosshair` (PEP 316 contracts, a bounded search: `checked`), `verdict` (a production
fence rule's recorded verdict, `proofs/variants_prod.py`), `crash` (a task raised).
Rows have a scope: `one-partition` (the symbolic template, the model's own Python), `any`
(the quantified proof, proofs/param), `shape` (the correspondence proof), `two-partition`
(bounded traces), `keys` (the key grammar), `prod-ordered` (`model/ordered.py`, one
partition's fence layer in Raft's order, searched breadth-first). A `failed` or
`unknown` row makes the run exit 1; the report (`--report`) is replaced atomically on
every run, failing ones included.

Default output: per scope and variant, one line per invariant with a mark per action,
then the other rows grouped, then every failure with its counterexample; `-v` prints every
row. `--only PATTERN` (a regular expression over row names) runs only the matching work.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from epochgc.model.actions import ACTIONS
from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS
from epochgc.model.system import System
from epochgc.model.variants import PROD_SAFE, REFERENCE, SAFE_VARIANTS, Variant, variant
from epochgc.proofs import (
    bmc,
    contracts_sym,
    crosshair_check,
    explain,
    keygrammar,
    modeledges,
    obligations,
    reach,
    scenarios,
    symsolver,
    vectors,
)
from epochgc.proofs.obligations import Outcome

# Set in every worker by `_configure` (--seed, --rlimit).
_CFG: dict[str, int] = {"seed": 0, "rlimit": symsolver.RLIMIT}


def _configure(seed: int, rlimit: int) -> None:
    _CFG.update(seed=seed, rlimit=rlimit)
    symsolver.tune_z3()


# -- tasks (module level so worker processes can run them) ----------------------------------


def _labelled(variant_name: str, out: list[Outcome]) -> list[Outcome]:
    """Rows of a variant other than `reference` carry its name."""
    if variant_name != "reference":
        for o in out:
            o.name = f"[{variant_name}] {o.name}"
    return out


def task_induction(variant_name: str, action: str) -> list[Outcome]:
    v = variant(variant_name)
    return _labelled(variant_name, obligations.induction(
        scenarios.INDUCTION_TEMPLATE, v, [action], rlimit=_CFG["rlimit"],
        seed=_CFG["seed"]))


def task_induction_shared(action: str, variant_names: tuple[str, ...]) -> list[Outcome]:
    """Every variant's induction rows for one action, from one exploration with the
    switches on which they differ symbolic (obligations.induction_variants); and, for an
    action outside `PROD_ACTIONS`, per production rule in `PROD_SAFE` a row that the
    exploration read none of the switches in which the rule differs from reference (so
    the code that ran is the rule's code, and reference's rows are its rows)."""
    reads: set[str] = set()
    runs = obligations.induction_variants(
        scenarios.INDUCTION_TEMPLATE, action, [variant(n) for n in variant_names],
        rlimit=_CFG["rlimit"], seed=_CFG["seed"], reads=reads)
    out = [o for v, rows in runs for o in _labelled(v.name, rows)]
    if action not in PROD_ACTIONS and "reference" in variant_names:
        for name in (*PROD_SAFE, *(f"{n}-enqueue" for n in PROD_SAFE)):
            differ = _differ(variant(name), REFERENCE)
            bad = sorted(set(differ) & reads)
            out.append(Outcome(
                f"[{name}] {action} reads none of {', '.join(differ)}: reference's "
                f"induction rows for {action} are its rows", "invariant",
                "failed" if bad else "proved", 0.0,
                f"read: {', '.join(bad)} (add {action} to PROD_ACTIONS)" if bad else
                f"switches read: {', '.join(sorted(reads)) or 'none'}", paths=1))
    return out


# The actions whose code reads a production rule's switches (the fence, the follower
# slide at apply): `task_induction_prod` runs their induction under each rule; every
# other action is shown not to read them (`task_induction_shared`).
PROD_ACTIONS = ("fence_write", "land_write", "other_write", "late_land", "phantom_fence",
                "housekeep")


def _differ(a: Variant, b: Variant) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(a) if f.name != "name"
                  and getattr(a, f.name) != getattr(b, f.name))


def task_induction_prod(variant_name: str) -> list[Outcome]:
    """`PROD_ACTIONS`' induction rows on model/system.py under a production rule that keeps
    our apply-time rejection (so "never deletes in-use data" is proved on its own code,
    `_land`'s follower slide included), explored with a variant that records which
    switches the code reads; and per `-enqueue` twin a row that the exploration never read
    `release_at_enqueue`, the only switch in which the twin differs (so its rows are
    these: the code that ran is the twin's code)."""
    v = variant(variant_name)
    rec = obligations._recording(v)
    rows = _labelled(variant_name, obligations.induction(
        scenarios.INDUCTION_TEMPLATE, rec, list(PROD_ACTIONS), rlimit=_CFG["rlimit"],
        seed=_CFG["seed"]))
    reads: set[str] = object.__getattribute__(rec, "_reads")
    twin = f"{variant_name}-enqueue"
    differ = _differ(v, variant(twin))
    bad = sorted(set(differ) & reads)
    rows.append(Outcome(
        f"[{twin}] model/system.py reads none of {', '.join(differ)} in "
        f"{', '.join(PROD_ACTIONS)}: "
        f"its induction rows are [{variant_name}]'s", "invariant",
        "failed" if bad or not differ else "proved", 0.0,
        f"read: {', '.join(bad)}" if bad else f"switches read: {', '.join(sorted(reads))}",
        paths=1))
    return rows


def task_init(variant_name: str) -> list[Outcome]:
    v = variant(variant_name)
    return _labelled(variant_name, obligations.init_obligations(scenarios.INDUCTION_TEMPLATE, v))


def task_witness(index: int) -> list[Outcome]:
    action = scenarios.TOUR[index][0]
    t0 = time.perf_counter()
    try:
        tr = bmc.search(scenarios.TRACE_TEMPLATE, REFERENCE, scenarios.TOUR[: index + 1],
                        scenarios.changed, rlimit=_CFG["rlimit"])
    except bmc.SearchBudgetExhausted as e:
        return [Outcome(f"{action} is reachable", "witness", "unknown",
                        time.perf_counter() - t0, str(e))]
    status = "found" if tr is not None else "failed"
    detail = "" if tr is not None else "action can never take effect: invariants may be vacuous"
    return [Outcome(f"{action} is reachable", "witness", status, time.perf_counter() - t0, detail)]


def task_bug(index: int) -> list[Outcome]:
    b = scenarios.BUGS[index]
    out = []
    for vname, kind in ((b.variant, "counterexample"), ("reference", "invariant")):
        v = variant(vname)
        t0 = time.perf_counter()
        name = (f"{b.name} [{vname}] breaks {b.invariant}" if kind == "counterexample"
                else f"{b.name} shape cannot break {b.invariant} in reference"
                + ("" if b.reference_deletes else " (it never deletes there)"))
        try:
            tr = bmc.search(scenarios.TRACE_TEMPLATE, v, b.schedule, b.goal(v),
                            rlimit=_CFG["rlimit"])
        except bmc.SearchBudgetExhausted as e:
            out.append(Outcome(name, kind, "unknown", time.perf_counter() - t0, str(e)))
            continue
        dt = time.perf_counter() - t0
        if kind == "counterexample":
            if tr is None:
                out.append(Outcome(name, kind, "failed", dt, "expected counterexample not found"))
            else:
                title = f"{b.name}: {b.title}"
                lines = vectors.trace_to_vector(tr, v, title)
                out.append(Outcome(name, kind, "found", dt, bmc.table(tr),
                                   {"file": f"{b.name.lower()}-{b.variant}.jsonl",
                                    "jsonl": vectors.dump(lines, b.variant, title)}))
        elif tr is not None:
            out.append(Outcome(name, kind, "failed", dt, bmc.table(tr)))
        else:
            out.append(_with_deletion(name, b, t0))
    return out


def _with_deletion(name: str, b: scenarios.BugScenario, t0: float) -> Outcome:
    """A "cannot break safety in reference" row is vacuous unless the schedule's final
    gc_delete can delete an object in reference: look for such a trace (the row fails
    when there is none). A shape that rules every deletion out in reference says so in its
    name, and that is checked instead: no trace's final step changes anything."""
    try:
        tr = bmc.search(scenarios.TRACE_TEMPLATE, REFERENCE, b.schedule, scenarios.changed,
                        rlimit=_CFG["rlimit"])
    except bmc.SearchBudgetExhausted as e:
        return Outcome(name, "invariant", "unknown", time.perf_counter() - t0, str(e))
    dt = time.perf_counter() - t0
    if b.reference_deletes:
        if tr is None:
            return Outcome(name, "invariant", "failed", dt, "vacuous: the final gc_delete is "
                           "never enabled in reference along this shape")
        return Outcome(name, "invariant", "proved", dt,
                       "the final gc_delete deletes an object in this trace:\n" + bmc.table(tr))
    if tr is not None:
        return Outcome(name, "invariant", "failed", dt, "reference deletes here after all:\n"
                       + bmc.table(tr))
    return Outcome(name, "invariant", "proved", dt, b.why_no_deletion)


def task_liveness(index: int) -> list[Outcome]:
    sc = scenarios.LIVENESS[index]
    v = variant(sc.variant)
    name = f"{sc.name} [{sc.variant}] rejects what reference admits"
    t0 = time.perf_counter()

    try:
        tr = bmc.search(scenarios.TRACE_TEMPLATE, v, sc.schedule, sc.goal(v),
                        rlimit=_CFG["rlimit"], pair=REFERENCE, pair_goal=sc.reference_goal)
    except bmc.SearchBudgetExhausted as e:
        return [Outcome(name, "witness", "unknown", time.perf_counter() - t0, str(e))]
    dt = time.perf_counter() - t0
    if tr is None or not sc.reference_admits([st.params for st in tr.steps]):
        return [Outcome(name, "witness", "failed", dt, "no spurious rejection found")]
    return [Outcome(name, "witness", "found", dt, bmc.table(tr))]


def task_crosshair(modules: tuple[str, ...]) -> list[Outcome]:
    """Every CrossHair target in one CrossHair process (its start-up and imports once)."""
    return crosshair_check.check_many(modules)


def task_contracts(target: str) -> list[Outcome]:
    return [contracts_sym.check_target(target, _CFG["rlimit"])]


Task = tuple[Callable[..., list[Outcome]], tuple[Any, ...], str]


def guarded(fn: Callable[..., list[Outcome]], label: str, *args: Any) -> list[Outcome]:
    """`fn(*args)` in a worker; an exception becomes a failed row of kind `crash` naming
    the task (the run fails; a crash is not a proof row, so it kills no mutant) instead of
    ending the pool (an exception that does not pickle back broke it: issue 28)."""
    import traceback

    t0 = time.perf_counter()
    symsolver.METER.reset()
    try:
        out = fn(*args)
    except Exception as e:
        out = [Outcome(f"{label}: the task crashed: {type(e).__name__}: {e}", "crash",
                       "failed", time.perf_counter() - t0, traceback.format_exc())]
    for o in out:
        o.query_rlimit = max(o.query_rlimit, symsolver.METER.largest)
        o.search_paths = max(o.search_paths, symsolver.METER.search_paths)
    return out


def _param_tasks() -> list[Task]:
    """The quantified proof's jobs (proofs/param), when that package provides them."""
    try:
        from epochgc.proofs.param import prove as param_prove
    except ImportError as e:
        if e.name and e.name.startswith("epochgc.proofs.param"):
            return []
        raise
    jobs = getattr(param_prove, "jobs", None)
    if jobs is None:
        return []
    out: list[Task] = []
    for fn, a in jobs(seed=_CFG["seed"], rlimit=_CFG["rlimit"]):
        out.append((fn, tuple(a), f"any {fn.__name__} {' '.join(map(str, a))}"))
    return out


def _prod_tasks() -> list[Task]:
    """Production's fence rules (issue 30, `proofs/variants_prod.py`): each variant's
    verdict on production's property and on the five-step shape; ours for any fence rule."""
    from epochgc.proofs import variants_prod

    out: list[Task] = [(variants_prod.task_prod, (n,), f"[{n}] production's property "
                        "apply check never fires five-step F1 shape verdict")
                       for n in variants_prod.SEARCHED]
    out.append((variants_prod.task_ours_any_fence, (_CFG["seed"], _CFG["rlimit"]),
                f"[{variants_prod.ANY_FENCE}] fence_write safety any size"))
    out += [(variants_prod.task_separating, (i,), f"[{sp.a} vs {sp.b}] {sp.name} verdict")
            for i, sp in enumerate(variants_prod.SEPARATING)]
    out += [(variants_prod.task_rule_vector, (n,), f"[{n}] its vector verdict")
            for n in variants_prod.RULES]
    # Ours under each production rule: model/system.py's own induction (issue 39, gap 1).
    out += [(task_induction_prod, (n,), f"[{n}] induction {' '.join(PROD_ACTIONS)}")
            for n in PROD_SAFE]
    out += [(variants_prod.task_prod_correspondence, (n, _CFG["seed"], _CFG["rlimit"]),
             f"[{n}] python = formula correspondence every state")
            for n in PROD_SAFE]
    return out


def _tasks(quick: bool) -> list[Task]:
    """(function, args, label): the label names what the task's rows are about, so that
    `--only` can pick tasks before running them. Longest first, so the pool stays busy."""
    names = " ".join((*INVARIANTS, *TRANSITION_INVARIANTS))
    tasks: list[Task] = [(task_crosshair, (crosshair_check.MODULES,), "crosshair " + " ".join(
        f"contracts of {m}" for m in crosshair_check.MODULES))]
    tasks += _param_tasks()
    tasks += [(task_contracts, (t,), f"contracts of {t} (all paths)")
              for t in contracts_sym.TARGETS]
    tasks.append((keygrammar.task_keys, (), "key grammar invariant"))
    tasks.append((modeledges.task_model_edges, (), "gc_epoch apply_reconciled invariant"))
    variants = ("reference",) if quick else SAFE_VARIANTS
    tasks += [(task_init, (vname,), f"[{vname}] init {names}") for vname in variants]
    tags = " ".join(f"[{vname}]" for vname in variants)
    tasks += [(task_induction_shared, (a, tuple(variants)), f"{tags} {a} Inv satisfiable {names}")
              for a in ACTIONS]
    tasks += [(task_bug, (i,), f"{b.name} {b.variant} breaks {b.invariant} counterexample")
              for i, b in enumerate(scenarios.BUGS)]
    tasks += [(task_liveness, (i,), f"{sc.name} {sc.variant} rejects liveness")
              for i, sc in enumerate(scenarios.LIVENESS)]
    tasks += _prod_tasks()
    first: dict[str, int] = {}
    for i, (a, _) in enumerate(scenarios.TOUR):
        first.setdefault(a, i)
    tasks += [(task_witness, (i,), f"{scenarios.TOUR[i][0]} is reachable witness")
              for i in sorted(first.values())]
    return tasks


def _last_costs(report: str) -> dict[str, float]:
    """Seconds per action's induction rows in the last report (empty when there is none):
    only an ordering hint, so a stale or missing report costs time, never correctness."""
    try:
        rows = json.loads(Path(report).read_text())["obligations"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    costs: dict[str, float] = {}
    for a in ACTIONS:
        tail = (f" preserved by {a}", f" and {a} enabled")
        costs[a] = sum(float(r.get("seconds") or 0) for r in rows
                       if isinstance(r, dict) and str(r.get("name", "")).endswith(tail))
    return costs


# CPU seconds per task, measured on the 2-core machine (/tmp timing of every task in a
# 2-worker pool, 2026-11-26, under load, after the one-partition induction's lazy
# replicas, branch s14-prove). Only an ordering hint, used where the last report says
# nothing (a fresh clone has none): a stale or missing entry costs time, never
# correctness. The correspondence shapes are now most of the run, so they go first
# (largest first, as `proofs.param.tasks.exhaustive_jobs` lists them); the induction
# tasks, each under half a second now, fill the end.
HINT_S: dict[str, float] = {
    "task_crosshair": 8.3,  # wall: its subprocess waits on CrossHair's budgets
    "task_exhaustive_shape": 2.0,  # per shape (0.4-4.4 s), listed largest first
    "task_bug 0": 1.4,
    "task_contracts epochgc.model.fence.fence": 1.2,
    "task_model_edges": 0.7,
    "task_liveness 0": 0.6,
    "task_bug 1": 0.5,
    "task_induction_shared housekeep": 0.5,
    "task_induction_shared gc_compute": 0.5,
    "task_induction_shared other_write": 0.4,
    "task_bug 2": 0.3,
    "task_prod prod-january-enqueue": 0.3,
    "task_prod prod-july-enqueue": 0.3,
    "task_prod reference-enqueue": 0.3,
    "task_contracts epochgc.model.partition.apply_advance_epoch": 0.25,
    "task_prod proposal-august-enqueue": 0.23,
    "task_contracts epochgc.model.partition.apply_placeholder": 0.23,
    "task_induction_shared fence_write": 0.22,
    "task_induction_shared reconcile": 0.22,
    "task_contracts epochgc.model.partition.inactive_epoch": 0.21,
    "task_induction_shared phantom_fence": 0.2,
    "task_induction_shared barrier": 0.2,
    "task_induction_shared late_land": 0.19,
    "task_induction_shared land_write": 0.15,
    "task_induction_shared sync_replica": 0.15,
    "task_induction_shared change_leader": 0.14,
    "task_induction_shared report": 0.13,
    "task_induction_shared delete_partition": 0.13,
}


def hint_key(t: Task) -> str:
    if not t[1] or isinstance(t[1][0], tuple):
        return t[0].__name__
    return f"{t[0].__name__} {t[1][0]}"


def hint_of(t: Task) -> float:
    """The task's hint, or its function's (one for all of that function's tasks), or 0."""
    return HINT_S.get(hint_key(t), HINT_S.get(t[0].__name__, 0.0))


def _longest_first(tasks: list[Task], costs: dict[str, float]) -> list[Task]:
    """CrossHair first (its subprocesses wait on wall-clock budgets), then the exhaustive
    checks of single functions (`EARLY`: under a second in all, and the only rows that
    kill the key grammar, gc_epoch and apply_reconciled mutants, so a `--fail-fast` run
    of `proofs.mutants` stops there instead of after the whole run), then every other
    task longest first: the induction tasks by their cost in the last report when there is
    one, everything else (and induction in a fresh clone) by `HINT_S`. With two workers,
    a long task started last would otherwise set the wall time alone."""
    def key(t: Task) -> tuple[int, float]:
        hint = hint_of(t)
        if t[0] is task_crosshair:
            return (0, -hint)
        if t[0].__name__ in EARLY:
            return (1, -hint)
        if t[0] is task_induction_shared and costs:
            return (2, -costs.get(t[1][0], 0.0))
        return (2, -hint)
    return sorted(tasks, key=key)  # stable: ties keep their listed order


# Short exhaustive checks that run right after CrossHair (`_longest_first`).
EARLY = frozenset({"task_keys", "task_model_edges"})


# -- presentation -----------------------------------------------------------------------------

_ROW = re.compile(r"^(?:\[(?P<variant>[^\]]+)\] )?(?P<ob>\S+) preserved by (?P<action>\S+)")
_BAD = ("failed", "unknown")
FAIL_FAST_KINDS = ("invariant", "transition", "vacuity", "correspondence", "verdict")


def _marks() -> dict[str, str]:
    utf = (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") == "utf8"
    return ({"proved": "✓", "found": "✓", "checked": "~", "failed": "✗", "unknown": "?",
             "": "·"} if utf else
            {"proved": "+", "found": "+", "checked": "~", "failed": "X", "unknown": "?",
             "": "."})


def _action_of(o: Outcome, actions: list[str]) -> str | None:
    m = _ROW.match(o.name)
    if m:
        return m.group("action")
    for a in sorted(actions, key=len, reverse=True):
        if re.search(rf"\b{re.escape(a)}\b", o.name):
            return a
    return None


def _variant_of(o: Outcome) -> str:
    m = re.match(r"^\[([^\]]+)\] ", o.name)
    return m.group(1) if m else "reference"


def grid(results: list[Outcome]) -> list[str]:
    """Per (scope, variant): one line per invariant, one mark per action."""
    actions = list(ACTIONS)
    mk = _marks()
    lines: list[str] = []
    legend = "  ".join(f"{chr(97 + i)}={a}" for i, a in enumerate(actions))
    blocks: dict[tuple[str, str], dict[str, dict[str, Outcome]]] = {}
    for o in results:
        if o.kind not in ("invariant", "transition", "vacuity"):
            continue
        a = _action_of(o, actions)
        if a is None:
            continue
        m = _ROW.match(o.name)
        ob = (("antecedents" if "antecedents" in o.name else "vacuity")
              if o.kind == "vacuity" else (m.group("ob") if m else None))
        if ob is None:
            continue
        blocks.setdefault((o.scope, _variant_of(o)), {}).setdefault(ob, {})[a] = o
    if not blocks:
        return lines
    lines.append(f"actions: {legend}")
    order = ["vacuity", "antecedents", *INVARIANTS, *TRANSITION_INVARIANTS]
    for (scope, vname), rows in sorted(blocks.items()):
        lines.append("\n" + f"{scope} [{vname}]".ljust(27) + "".join(
            chr(97 + i) for i in range(len(actions))))
        for ob in sorted(rows, key=lambda n: (order.index(n) if n in order else 99, n)):
            cells = rows[ob]
            marks = "".join(mk[cells[a].status] if a in cells else mk[""] for a in actions)
            n_ok = sum(c.status in ("proved", "found") for c in cells.values())
            paths = sum(c.paths or 0 for c in cells.values())
            lines.append(f"  {ob:<24} {marks}  {n_ok}/{len(cells)}"
                         + (f", {paths} paths" if scope == "one-partition" else ""))
    return lines


def summary(results: list[Outcome]) -> list[str]:
    """The rows outside the grid, grouped by kind."""
    lines = []
    rest = [o for o in results if o.kind not in ("invariant", "transition", "vacuity")
            or not (_ROW.match(o.name) or o.kind == "vacuity")]
    by_kind: dict[str, list[Outcome]] = {}
    for o in rest:
        by_kind.setdefault(o.kind, []).append(o)
    for kind, rows in by_kind.items():
        counts: dict[str, int] = {}
        for o in rows:
            counts[o.status] = counts.get(o.status, 0) + 1
        what = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))
        lines.append(f"{kind:<15} {len(rows):3} rows: {what}")
        if kind == "liveness":
            lines += _liveness_lines(rows)
    return lines


def _liveness_lines(rows: list[Outcome]) -> list[str]:
    """The liveness witness and the `empty-is-nothing` counterexample by name (issue 13 asks
    to see them, not only a count); the per-action closure rows are folded into one line."""
    per_action = [o for o in rows if " across " in o.name]
    lines = [f"  {o.status:8} {o.name}" for o in rows if " across " not in o.name]
    if per_action:
        st = {o.status for o in per_action}
        lines.append(f"  {'/'.join(sorted(st)):8} {per_action[0].name.split(' across ')[0]}"
                     f" across each of {len(per_action)} actions")
    return lines


def _row_line(o: Outcome) -> str:
    paths = "" if o.paths is None else f" [{o.paths} paths]"
    return f"{o.status:8} {o.seconds:7.2f}s  {o.kind:14} {o.scope:13} {o.name}{paths}"


def failure_text(o: Outcome) -> str:
    """The text printed under a failed row. A one-partition row's trace holds Python
    states (`explain.describe` diffs them); an any-size row's trace holds a finite model
    in the spec's vocabulary (field -> value per element, `proofs.param.prove.explain`),
    already described in its detail (the violated conjunct, the changed fields)."""
    text = o.detail
    tr = o.trace
    if not (isinstance(tr, dict) and "pre" in tr):
        return text
    if isinstance(tr["pre"], System) and isinstance(tr.get("post"), System):
        if _ROW.match(o.name):
            text += "\n" + explain.describe(o.name, tr, variant(_variant_of(o)))
    elif isinstance(tr["pre"], System):
        text += f"\npre-state: {tr['pre']}\nparams: {tr.get('params')}"
    elif "changed:" not in text and "post" in tr:  # a finite model not yet described
        pre, post = tr["pre"], tr["post"]
        diff = [f"  {k}: {pre[k]} -> {post[k]}" for k in pre if pre[k] != post.get(k)]
        text += "\nchanged:\n" + ("\n".join(diff) or "  nothing")
    return text


def _reachable_counterexamples(bad: list[Outcome], out: Path, limit: int = 6) -> None:
    """For each failed induction row (at most `limit` distinct variant and invariant), look
    for a trace from the initial state that breaks the same invariant (proofs.reach, a
    bounded search) and, when one is found, write it as a vector; the row's detail says
    which file, or that none was found within the bound."""
    done: dict[tuple[str, str], str] = {}
    for o in bad:
        m = _ROW.match(o.name)
        if m is None or not (isinstance(o.trace, dict) and isinstance(o.trace.get("post"),
                                                                       System)):
            continue  # an any-size row's finite model is not a Python state
        vname, inv = _variant_of(o), m.group("ob")
        key = (vname, inv)
        if key not in done:
            if len(done) >= limit:
                continue
            v = variant(vname)
            tr = reach.search(scenarios.TRACE_TEMPLATE, v, inv)
            if tr is None:
                done[key] = (f"not reachable within {reach.WALKS} seeded random walks of at "
                             f"most {reach.DEPTH} steps (a bounded search: nothing proved)")
            else:
                out.mkdir(parents=True, exist_ok=True)
                f = out / f"cti-{vname}-{inv}.jsonl"
                title = f"a reachable trace that breaks {inv} ({len(tr.steps)} steps)"
                f.write_text(reach.vector_text(tr, v, title))
                done[key] = (f"reachable: a {len(tr.steps)}-step trace from the initial state "
                             f"breaks {inv}; written as a vector to {f}\n"
                             + bmc.table(tr))
        o.detail = (o.detail + "\n" if o.detail else "") + done[key]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m epochgc.proofs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--report", default="build/prove-report.json")
    ap.add_argument("--write-vectors", metavar="DIR",
                    help="write the counterexample vectors here (spec/vectors/generated)")
    ap.add_argument("--quick", action="store_true",
                    help="induction for `reference` only (strict and collapse skipped)")
    ap.add_argument("--tables", action="store_true", help="print every trace table")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every row")
    ap.add_argument("--only", metavar="PATTERN",
                    help="only rows whose name matches this regular expression")
    ap.add_argument("--seed", type=int, default=0, help="solver random seed (default 0)")
    ap.add_argument("--fail-fast", action="store_true",
                    help="stop at the first failed safety, transition or vacuity row "
                    "(what proofs.mutants needs to know)")
    ap.add_argument("--rlimit", type=int, default=symsolver.RLIMIT, metavar="N",
                    help="Z3's resource budget per solver check (default "
                    f"{symsolver.RLIMIT}, see proofs/symsolver.py); running out is a "
                    "failure, and the run prints the largest count one check spent")
    ap.add_argument("--run-id", default="",
                    help="written into the report (default: a fresh random id), so a caller "
                    "can tell its own run's report from an older one")
    args = ap.parse_args(argv)
    run_id = args.run_id or uuid.uuid4().hex
    costs = _last_costs(args.report)
    # From here on the report on disk is never a previous run's: a crash or a kill leaves
    # this "running" one (not green), a finished run replaces it atomically.
    write_report(args.report, {"run_id": run_id, "status": "running", "obligations": []})
    results: list[Outcome] = []
    try:
        return _run(args, run_id, costs, results)
    except BaseException as e:
        write_report(args.report, _report(run_id, f"crashed: {type(e).__name__}: {e}",
                                          results, 0.0))
        raise


def write_report(path: str, data: dict[str, Any]) -> None:
    """Replace the report atomically (a temp file in its directory, then rename): a reader
    sees the old report or the new one, never a torn file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _report(run_id: str, status: str, results: list[Outcome], total: float
            ) -> dict[str, Any]:
    """`status`: "passed" (every row proved, found or checked), "failed" (some row failed
    or unknown), "running", or "crashed: ..." (the run ended without its rows)."""
    return {
        "run_id": run_id,
        "status": status,
        "total_seconds": round(total, 3),
        "obligations": [
            {"name": o.name, "kind": o.kind, "status": o.status, "seconds": o.seconds,
             "scope": o.scope, "paths": o.paths}
            for o in results
        ],
        "slowest_query_seconds": round(max((o.slowest_query_s for o in results),
                                           default=0.0), 3),
        "largest_query_rlimit": max((o.query_rlimit for o in results), default=0),
        "largest_search_paths": max((o.search_paths for o in results), default=0),
    }


def _run(args: argparse.Namespace, run_id: str, costs: dict[str, float],
         results: list[Outcome]) -> int:
    """Run the tasks, fill `results` (the caller writes what is there on a crash), write
    the report, print the tables and failures; the exit code."""
    only = re.compile(args.only, re.IGNORECASE) if args.only else None
    rlimit = args.rlimit
    if rlimit < 1:
        raise SystemExit(f"--rlimit {rlimit}: a budget must be at least 1 (Z3 reads 0 "
                         "as no limit)")
    _configure(args.seed, rlimit)

    t0 = time.perf_counter()
    tasks = _longest_first(_tasks(args.quick), costs)
    if only is not None:
        tasks = [t for t in tasks if only.search(t[2])]
    per_task: list[list[Outcome]] = [[] for _ in tasks]
    pool = ProcessPoolExecutor(max_workers=max(1, args.jobs), initializer=_configure,
                               initargs=(args.seed, rlimit))
    stopped = False
    try:
        futures = {pool.submit(guarded, fn, label, *a): i
                   for i, (fn, a, label) in enumerate(tasks)}
        for f in as_completed(futures):
            rows = f.result()
            if only is not None:
                rows = [o for o in rows if only.search(o.name)
                        or (only.search(tasks[futures[f]][2]) and o.kind == "vacuity")]
            per_task[futures[f]] = rows
            for o in rows:
                if args.verbose:
                    print(_row_line(o), flush=True)
            if args.fail_fast and any(o.status in _BAD and o.kind in FAIL_FAST_KINDS
                                      for o in rows):
                stopped = True
                break
    finally:
        if stopped:
            # Workers still busy on other tasks are ended: their rows are not needed.
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
        pool.shutdown(wait=not stopped, cancel_futures=True)
    if stopped:
        print("stopped at the first failed safety row (--fail-fast)")
    results[:] = [o for rows in per_task for o in rows]
    total = time.perf_counter() - t0
    bad = [o for o in results if o.status in _BAD]
    status = "failed" if bad or stopped else ("passed" if results else "failed: no rows")
    write_report(args.report, _report(run_id, status, results, total))

    if not args.verbose:
        for line in grid(results):
            print(line)
        print()
        for line in summary(results):
            print(line)
    found = [o for o in results if o.kind == "counterexample" and o.status == "found"]
    if args.verbose or args.tables:
        for o in found:
            print(f"\n== {o.name}\n{o.detail}")
    if args.tables:
        for o in results:
            if o.kind in ("witness", "verdict") and o.status == "found":
                print(f"\n== {o.name}\n{o.detail}")
    if args.write_vectors:
        out = Path(args.write_vectors)
        out.mkdir(parents=True, exist_ok=True)
        for o in found:
            (out / o.trace["file"]).write_text(o.trace["jsonl"])
        print(f"\nwrote {len(found)} vectors to {out}")

    _reachable_counterexamples(bad, Path(args.write_vectors or "build/counterexamples"))
    for o in bad:
        print(f"\n!! {o.status}: {o.name} ({o.kind}, {o.scope})")
        text = failure_text(o)
        if text:
            print("    " + text.replace("\n", "\n    "))
    slowest = max(results, key=lambda o: o.seconds, default=None)
    slowest_q = max((o.slowest_query_s for o in results), default=0.0)
    largest_r = max((o.query_rlimit for o in results), default=0)
    largest_p = max((o.search_paths for o in results), default=0)
    if not results:
        print("no obligation matches --only" if only else "no obligations")
        return 1
    assert slowest is not None
    print(f"\n{len(results)} obligations, {len(bad)} failed or unknown, "
          f"{total:.1f}s total, slowest {slowest.seconds:.2f}s ({slowest.name}), "
          f"slowest solver query {slowest_q:.2f}s, largest solver query {largest_r} of "
          f"the {args.rlimit} rlimit budget, largest bounded search {largest_p} of "
          f"{bmc.MAX_PATHS} paths; report: {args.report}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
