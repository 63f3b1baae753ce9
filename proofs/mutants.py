"""Seeded model bugs the proofs must kill (`tox -e prove-mutants`).

    python -m epochgc.proofs.mutants [NAME ...] [--keep] [--list]

Each mutant is a small text patch to `model/` or to `proofs/param/spec.py` (spec
mutants), applied to a COPY of the tree (model/ and proofs/) in a temp directory;
`python -m epochgc.proofs --quick` then runs on the copy (CrossHair skipped: it checks contracts,
not the system's invariants). A mutant is killed only when a safety, transition, vacuity,
or correspondence row fails (`invariant`, `transition`, `vacuity` or `correspondence`
kind, any scope: the correspondence rows are proofs over every state of their shapes since
issue 28; `contract`: the symbolic contracts, issue 39): a failing reachability witness
alone does not count, but an `unknown` row does (each query's limit is Z3's resource
budget, `epochgc.proofs --rlimit`, not the clock, so load cannot turn a slow query into a
false kill; a mutant that makes a query run out of it counts). Each run stops at its
first killing row (`--fail-fast`). The unmutated copy must pass first; mutants run in
parallel (`-j N`, the shared driver `proofs.mutate`). Last line: `prove mutants killed: K/N`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

from epochgc.proofs.mutate import (
    Mutant,
    Outcome,
    PatchRefused,
    RunResult,
    Verdict,
    campaign,
    patch,
    run_command,
)

__all__ = ["MUTANTS", "ROOT", "Mutant", "PatchRefused", "killing_rows", "main", "patch"]

ROOT = Path(__file__).resolve().parents[1]
# "verdict": a production variant's recorded verdict (proofs/variants_prod.py) changed.
# "contract": a PEP 316 contract proved on every path by the symbolic executor
# (proofs/contracts_sym.py; issue 39: R24 on real ages, R8's admission side, a barrier
# refusal is never a crash).
KILLING_KINDS = ("invariant", "transition", "vacuity", "correspondence", "verdict",
                 "contract")


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "upload-stamp-cache",
        "the upload stamp keeps only the last partition's creation revision (max(cache, ..)"
        " instead of max(epoch, ..)): an object feeding two partitions is stamped too low",
        "model/actions.py",
        "epoch = max(epoch, part.creation_revision)",
        "epoch = max(cache, part.creation_revision)",
    ),
    Mutant(
        "housekeep-lrlo-past-placeholder",
        "the housekeeper moves LRLO past a placeholder whose data is not in L1 (R28)",
        "model/actions.py",
        '    _require(_in_l1_up_to(s, p, lrlo), "housekeep", '
        '"never past an unreconciled placeholder")\n',
        "",
    ),
    Mutant(
        "reconcile-before-l1",
        "reconcile records an LRLO past a placeholder not yet durable in L1 (R27)",
        "model/actions.py",
        '    _require(_in_l1_up_to(s, p, lrlo), "reconcile", '
        '"LRLO passes only placeholders in L1")\n',
        "",
    ),
    Mutant(
        "floor-to-max-applied",
        "reconciling past the window offset raises the floor to max_applied, not previous",
        "model/partition.py",
        "out = replace(out, min_epoch_lower_bound=state.previous_applied_epoch)",
        "out = replace(out, min_epoch_lower_bound=state.max_applied_epoch)",
    ),
    Mutant(
        "watermark-is-floor",
        "M(p) = floor instead of floor - 1",
        "model/partition.py",
        "    m = state.min_epoch_lower_bound - 1\n",
        "    m = state.min_epoch_lower_bound\n",
    ),
    Mutant(
        "cap-off-by-one",
        "M is capped at the snapshot revision + 1",
        "model/cluster.py",
        "m = min(m, snapshot_revision)",
        "m = min(m, snapshot_revision + 1)",
    ),
    Mutant(
        "accepts-down-to-floor",
        "the apply-time check accepts every epoch down to the floor, not previous_applied",
        "model/partition.py",
        "    return epoch >= state.previous_applied_epoch\n",
        "    assert state.min_epoch_lower_bound is not None\n"
        "    return epoch >= state.min_epoch_lower_bound\n",
    ),
    Mutant(
        "lrlo-reaches-log-end",
        "reconcile lets LRLO reach the log end (A4 off by one)",
        "model/actions.py",
        '_require(lrlo < part.log_end, "reconcile", "LRLO never passes the log end")',
        '_require(lrlo <= part.log_end, "reconcile", "LRLO never passes the log end")',
    ),
    Mutant(
        "unknown-lands-unchecked",
        "a replicate of unknown outcome that later commits skips the apply-time window check",
        "model/actions.py",
        "    accepted, offset, s2 = _land(s, v, wr.partition, write_epoch(s, wr))\n"
        "    new = replace(wr, status=ACCEPTED if accepted else REJECTED, offset=offset)\n",
        "    vv = replace(v, apply_time_check=False) if wr.status == UNKNOWN else v\n"
        "    accepted, offset, s2 = _land(s, vv, wr.partition, write_epoch(s, wr))\n"
        "    new = replace(wr, status=ACCEPTED if accepted else REJECTED, offset=offset)\n",
    ),
    Mutant(
        "offset-check-refuses-next",
        "the log offset check also refuses the offset right after the window offset",
        "model/partition.py",
        "if state.window_offset is not None and offset <= state.window_offset:",
        "if state.window_offset is not None and offset <= state.window_offset + 1:",
    ),
    Mutant(
        "recreate-keeps-old-revision",
        "re-creating a deleted partition keeps its old creation revision (R35)",
        "model/actions.py",
        "new = replace(part, created=True, creation_revision=rev)",
        "new = replace(part, created=True, creation_revision=rev if part.creation_revision"
        " == 0 else part.creation_revision)",
    ),
    Mutant(
        "deleted-reports-still-count",
        "deleting a partition keeps its replicas' M(p) and reports (R32, R33)",
        "model/actions.py",
        "leader=0, replicas=tuple(Replica() for _ in part.replicas))",
        "leader=0, replicas=part.replicas)",
    ),
    Mutant(
        "delete-orphans-shared-object",
        "deleting a partition also orphans the live partitions' writes of the objects it"
        " shared, so nothing protects those objects any more (R33)",
        "model/actions.py",
        "if w.partition == p and w.status != IDLE else w for w in s.writes)",
        "if (w.partition == p or any(x.obj == w.obj and x.partition == p for x in s.writes))"
        " and w.status != IDLE else w for w in s.writes)",
    ),
    # Issue 28: bugs a sampled correspondence let through (each needs a state of a shape
    # no sampled state had, or compares successor sets, not parameters).
    Mutant(
        "gc-min-over-replicas",
        "R16 takes the min over a partition's replicas instead of the max (only a state with"
        " two replicas reporting different values shows it)",
        "model/cluster.py",
        "best[r.partition] = r.inactive_epoch if old is None else max(old, r.inactive_epoch)",
        "best[r.partition] = r.inactive_epoch if old is None else min(old, r.inactive_epoch)",
    ),
    Mutant(
        "give-up-below-max",
        "a write of unknown outcome is told failed once its epoch is below max_applied,"
        " while the window (from previous_applied) still accepts it",
        "model/actions.py",
        '    _require(neg(accepts(st, write_epoch(s, wr), v)), "give_up", "the write may still'
        ' land")\n',
        "    _require(st.max_applied_epoch is not None and write_epoch(s, wr) <"
        ' st.max_applied_epoch, "give_up", "the write may still land")\n',
    ),
    Mutant(
        "gc-epoch-skips-unlisted",
        "F4 as production had it: a partition absent from every report (none of its"
        " replicas has one in the store) is skipped instead of blocking the round",
        "model/cluster.py",
        "    best: dict[str, int | None] = {p: None for p in partitions}\n",
        "    best: dict[str, int | None] = {r.partition: None for r in reports"
        " if r.partition in partitions}\n",
        extra=(("model/cluster.py", "missing = [p for p in partitions if best[p] is None]",
                "missing = [p for p in best if best[p] is None]"),),
    ),
    Mutant(
        "gc-eligible-and-to-or",
        "R24 with `or`: an object is eligible when its epoch is <= M OR it is older than the"
        " grace period (gc_eligible and gc_delete decide with model.keys.deletable)",
        "model/keys.py",
        "    return epoch_collectible(epoch, m) and age >= grace\n",
        "    return epoch_collectible(epoch, m) or age >= grace\n",
    ),
    Mutant(
        "gc-eligible-grace-dropped",
        "R24 without the grace period: an object younger than the grace is eligible",
        "model/keys.py",
        "    return epoch_collectible(epoch, m) and age >= grace\n",
        "    return epoch_collectible(epoch, m)\n",
    ),
    Mutant(
        "key-unpadded",
        "keys written without zero padding: listing order is no longer epoch order (R21)",
        "model/keys.py",
        'key = prefix_path(prefix) + f"{epoch:018d}/{name}"',
        'key = prefix_path(prefix) + f"{epoch:d}/{name}"',
    ),
    # An independent reviewer's survivors (issue 28, thirteenth session): each passed every
    # row until keygrammar's and modeledges' checks were widened.
    Mutant(
        "key-epoch-unpadded-parse",
        "the parser takes an unpadded epoch, which sorts after every 18-digit key (R21, R22)",
        "model/keys.py",
        'r"level_zero/data/([0-9]{3})/([0-9]{18})/',
        'r"level_zero/data/([0-9]{3})/([0-9]{1,18})/',
    ),
    Mutant(
        "eligible-args-swapped",
        "gc_eligible passes age and grace swapped: young objects eligible (R24)",
        "model/keys.py",
        "    return Eligibility(deletable(parsed.epoch, age_s, m, grace_s), None)",
        "    return Eligibility(deletable(parsed.epoch, grace_s, m, age_s), None)",
    ),
    Mutant(
        "validate-refuses-minus-one",
        "the report validation refuses -1 (a legal 'nothing below 0'): the job's rounds block",
        "model/cluster.py",
        'require_opt_int(where, "inactive_epoch", r.inactive_epoch, minimum=-1)',
        'require_opt_int(where, "inactive_epoch", r.inactive_epoch, minimum=0)',
    ),
    Mutant(
        "lro-moves-back",
        "apply_reconciled lets LRO move back: reads of reconciled records go to deleted L0",
        "model/partition.py",
        "        new_lro = max(new_lro, lro)",
        "        new_lro = lro",
    ),
    Mutant(
        "apply-accepts-earlier-incarnation",
        "A2 not enforced: the apply takes a placeholder below the partition's creation"
        " revision (one of an earlier incarnation) into an empty window",
        "model/actions.py",
        "    if epoch < part.creation_revision:\n",
        "    if False:\n",
    ),
    Mutant(
        "spec-late-land-restricted",
        "spec.py: late_land lands only acceptable epochs (a formula restricting its"
        " parameters; another parameter gives the same successor set)",
        "proofs/param/spec.py",
        "    guard = L.And(e >= 0, e <= s.cluster_epoch(), s.created(p0), apply_ok(L, s, p0, e))",
        "    guard = L.And(e >= 0, e <= s.cluster_epoch(), s.created(p0), apply_ok(L, s, p0, e),"
        " accepts(L, s, p0, e))",
    ),
    Mutant(
        "spec-t4-without-in-snap",
        "spec.py: T4's second conjunct drops `b.in_snap(q)` (near vacuous, T4 was never"
        " compared with the model)",
        "proofs/param/spec.py",
        "lambda L, a, b, q: L.And(fresh_defined(L, a), fresh_defined(L, b),\n"
        "                                          b.in_snap(q)),",
        "lambda L, a, b, q: L.And(fresh_defined(L, a), fresh_defined(L, b)),",
    ),
    Mutant(
        "spec-t4-defined-without-in-snap",
        "spec.py: T4's antecedent 'M is defined' drops `in_snap(p) =>` (every partition must"
        " have a window: T4 near vacuous)",
        "proofs/param/spec.py",
        "return L.forall((\"P\",), lambda p: L.Implies(s.in_snap(p), mset(L, s, p)))",
        "return L.forall((\"P\",), lambda p: mset(L, s, p))",
    ),
    Mutant(
        "spec-init-unsatisfiable",
        "spec.py: init is unsatisfiable (every `init => I` row then holds vacuously)",
        "proofs/param/spec.py",
        "s.revision() == 0, s.cluster_epoch() == 0, s.snapshot_revision() == 0,",
        "s.revision() == 0, s.revision() == 1, s.cluster_epoch() == 0,"
        " s.snapshot_revision() == 0,",
    ),
    Mutant(
        "write-to-deleted-accepted",
        "another producer's placeholder is applied on a deleted partition (R34)",
        "model/actions.py",
        '    _require(part.created, "other_write", "partition does not exist")\n',
        "",
    ),
    # Production's fence rules (issue 30): each seeded bug flips a recorded verdict row of
    # proofs/variants_prod.py. (A January rule with an inclusive max edge is an equivalent
    # mutant there: the edge only decides which lock a fence at the seen max takes, and
    # with the decision and its enqueue one step (O1) no admission or queue order changes,
    # so every verdict stays; tests/proofs/test_variants_prod.py shows it.)
    Mutant(
        "august-raise-inverted",
        "August raises the seen lower edge when no bump is pending instead of while one is:"
        " the five-step F1 shape's 11 is admitted and lands below the window",
        "model/prodrules.py",
        "    if w is None or w[1] < hi:  # a bump is pending: raise the lower edge",
        "    if w is not None and w[1] >= hi:",
    ),
    Mutant(
        "july-evidence-collapsed-clause-dropped",
        "July as coded drops `_previous_applied_epoch.value_or(end) < end` (#31110): an"
        " applied max at the seen max counts as evidence even with the window collapsed",
        "model/prodrules.py",
        "    return m == hi and (hi if p is None else p) < hi",
        "    return m == hi",
    ),
    # Issue 39's seeded bugs (gaps 1-7), each passing `tox -e prove` before that issue.
    Mutant(
        "gap1-follower-slide-land-unchecked",
        "gap 1: `_land` turns the apply-time check off on the branch only the"
        " followers-slide variants take (prod-january): unsafe there",
        "model/actions.py",
        "    res = apply_placeholder(part.state, epoch, part.log_end, v)\n"
        "    new = replace(part, state=res.state, log_end=part.log_end + 1)\n",
        "    res = apply_placeholder(part.state, epoch, part.log_end,\n"
        "                            replace(v, apply_time_check=False)"
        " if v.followers_slide else v)\n"
        "    new = replace(part, state=res.state, log_end=part.log_end + 1)\n",
    ),
    Mutant(
        "gap2-july-is-january",
        "gap 2: July made equal to January (its own evidence, nothing else)",
        "model/prodrules.py",
        "    if v.fence_rule is FenceRule.JANUARY:\n",
        "    if v.fence_rule in (FenceRule.JANUARY, FenceRule.JULY):\n",
    ),
    Mutant(
        "gap2-august-raise-shared",
        "gap 2: August raises its lower edge without the exclusive lock",
        "model/prodrules.py",
        "        new = SeenWindow(term, epoch, hi)\n"
        "        return FenceResult(True, (epoch, hi), new, exclusive=True)\n",
        "        new = SeenWindow(term, epoch, hi)\n"
        "        return FenceResult(True, (epoch, hi), new)\n",
    ),
    Mutant(
        "gap2-august-counts-older-term",
        "gap 2: August counts an older term's seen window",
        "model/prodrules.py",
        "    if seen is None or seen.term != term:\n        w = _applied(applied)\n",
        "    if seen is None:\n        w = _applied(applied)\n",
    ),
    Mutant(
        "gap2-july-nothing-applied-is-evidence",
        "gap 2: July with nothing applied counts as evidence (our old reading of #31110)",
        "model/prodrules.py",
        "    if m is None:\n        return False\n",
        "    if m is None:\n        return True\n",
    ),
    Mutant(
        "gap3-barrier-refusal-crashes",
        "gap 3: under assert-at-apply a barrier refusal (R37) crashes the replica",
        "model/partition.py",
        "        return Applied(state, False)\n    if state.max_applied_epoch is None",
        "        return Applied(state, False, crashed=variant.assert_at_apply)\n"
        "    if state.max_applied_epoch is None",
    ),
    Mutant(
        "gap4-round-reads-two-replicas",
        "gap 4: a GC round reads only replicas r0 and r1 (with 3: [r0: 3, r2: 7] gives 3)",
        "model/actions.py",
        "        for r, rep in enumerate(part.replicas):\n"
        "            value = inactive_epoch(part.state, v) if fresh else rep.reported\n",
        "        for r, rep in enumerate(part.replicas[:2]):\n"
        "            value = inactive_epoch(part.state, v) if fresh else rep.reported\n",
    ),
    Mutant(
        "gap5-age-rounded",
        "gap 5: `round(age) >= grace`: deletable(5, 3599.5, 9, 3600) is True",
        "model/keys.py",
        "    return epoch_collectible(epoch, m) and age >= grace\n",
        "    return epoch_collectible(epoch, m) and round(age) >= grace\n",
    ),
    Mutant(
        "gap6-empty-is-nothing-ignored",
        "gap 6: the Python GC epoch ignores `empty-is-nothing` (F7's formula unchanged)",
        "model/cluster.py",
        "    if not partitions and not variant.empty_is_nothing:\n",
        "    if not partitions:\n",
    ),
    Mutant(
        "gap7-fence-counts-older-term",
        "gap 7: the reference fence counts an older term's seen window (a spurious"
        " rejection, R8's admission side)",
        "model/fence.py",
        "    valid = seen is not None and (seen.term == term or not variant.term_scoped_seen)\n"
        "    s_prev",
        "    valid = seen is not None\n    s_prev",
    ),
    Mutant(
        "assert-at-apply-rejects",
        "assert-at-apply rejects a placeholder outside the window as a no-op instead of"
        " crashing the replica: the crash-loop verdict turns into our rejection",
        "model/partition.py",
        "        return Applied(state, False, crashed=variant.assert_at_apply)",
        "        return Applied(state, False)",
    ),
    # The epoch barrier (R36-R38).
    Mutant(
        "barrier-promote-without-reconciler",
        "advance_gc_epoch promotes its candidate at once, without waiting for LRLO to reach"
        " the command (placeholders before it may be unreconciled)",
        "model/partition.py",
        "        return replace(state, barrier_epoch=epoch, barrier_offset=offset)\n",
        "        return replace(state, barrier_epoch=epoch, barrier_offset=offset,"
        " gc_safe_epoch=epoch)\n",
    ),
    Mutant(
        "barrier-promote-before-offset",
        "the pending epoch is promoted when LRLO is one entry short of the command",
        "model/partition.py",
        "    if state.barrier_offset <= new_lrlo:",
        "    if state.barrier_offset <= new_lrlo + 1:",
    ),
    Mutant(
        "barrier-no-apply-check",
        "production's barrier (B1): a placeholder at or below the candidate is accepted"
        " after the command",
        "model/partition.py",
        "    return cast(bool, any_of((state.barrier_epoch < 0, epoch > state.barrier_epoch)))\n",
        "    return True\n",
    ),
)


def run_proofs(root: Path, timeout: float, jobs: int, fail_fast: bool = True,
               rlimit: int | None = None) -> RunResult:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONHASHSEED="0")
    report = root / "build" / "prove-report.json"
    run_id = uuid.uuid4().hex
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "epochgc.proofs", "--quick", "--jobs", str(jobs),
           "--only", "^(?!crosshair)", "--report", str(report), "--run-id", run_id]
    if rlimit is not None:
        cmd += ["--rlimit", str(rlimit)]
    if fail_fast:
        cmd.append("--fail-fast")
    code, out, secs = run_command(cmd, root, env, timeout)
    return RunResult(code, out, secs, own_rows(report, run_id))


def own_rows(report: Path, run_id: str) -> list[dict[str, object]]:
    """The rows of the run `run_id` started: [] when the report is missing, unreadable,
    another run's (its `run_id` differs), or not finished (`running`, `crashed: ...`),
    so such a run is an error, never a kill or a pass read from an older file."""
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("run_id") != run_id:
        return []
    if data.get("status") not in ("passed", "failed"):
        return []
    rows = data.get("obligations")
    return rows if isinstance(rows, list) else []


def killing_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [r for r in rows if r["status"] in ("failed", "unknown")
            and r["kind"] in KILLING_KINDS]


def classify(r: RunResult) -> Verdict:
    rows: list[dict[str, object]] = r.detail if isinstance(r.detail, list) else []
    kills = killing_rows(rows)
    corr = "; correspondence check failed too" if any(
        x["kind"] == "correspondence" and x["status"] in ("failed", "unknown") for x in rows
    ) else ""
    if r.code == -1:
        return Verdict("error", "", "timeout")
    if kills:
        return Verdict("killed", f"{kills[0]['name']} ({kills[0]['scope']})", corr.lstrip("; "))
    if r.code != 0:
        bad = [str(x["name"]) for x in rows if x["status"] in ("failed", "unknown")]
        if bad:
            return Verdict("survived", "", "only non-safety rows failed: "
                           + ", ".join(bad[:3]) + corr)
        return Verdict("error", "", (r.out.strip().splitlines() or ["?"])[-1][:200])
    return Verdict("survived", "", "every row passes")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("names", nargs="*", help="run only these mutants")
    ap.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    ap.add_argument("-j", type=int, default=2, help="mutants run in parallel")
    ap.add_argument("--jobs", type=int, default=0,
                    help="proof jobs per run (default: cores / -j, at least 1)")
    ap.add_argument("--rlimit", type=int, default=None, metavar="N",
                    help="Z3's resource budget per solver query, as `epochgc.proofs "
                         "--rlimit` (default: its default; an `unknown` row counts as a kill)")
    ap.add_argument("--keep", action="store_true", help="keep the temp copies")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    if args.list:
        for m in chosen:
            print(f"{m.name:34} {m.what}")
        return 0
    jobs = args.jobs or max(1, (os.cpu_count() or 1) // max(1, args.j))

    def run(root: Path, m: Mutant | None) -> RunResult:
        return run_proofs(root, args.timeout, jobs, fail_fast=m is not None,
                          rlimit=args.rlimit)

    def show(o: Outcome) -> None:
        v = o.verdict
        print(f"{o.mutant.name:34} {v.outcome:8} {o.secs:5.0f}s  {v.by} {v.why}".rstrip(),
              flush=True)

    baseline, outcomes = campaign(chosen, src=ROOT, dirs=("epochgc", "model", "proofs"), run=run,
                                  classify=classify, jobs=args.j, keep=args.keep,
                                  prefix="epochgc-prove-mutants-", on_result=show)
    if baseline.code != 0:
        print(baseline.out[-4000:])
        print(f"the unmutated copy fails (exit {baseline.code}); fix that first")
        print(f"prove mutants killed: 0/{len(chosen)}")
        return 2
    rows = baseline.detail if isinstance(baseline.detail, list) else []
    print(f"baseline: unmutated copy proves ({len(rows)} rows, {baseline.secs:.0f}s)")
    print()
    print(f"{'mutant':34} {'verdict':8} {'time':>6}  reason")
    killed = 0
    for o in outcomes:
        v = o.verdict
        killed += v.outcome == "killed"
        print(f"{o.mutant.name:34} {v.outcome:8} {o.secs:5.0f}s  {v.by} {v.why}".rstrip())
    print(f"prove mutants killed: {killed}/{len(chosen)}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
