"""Turn a solver-found system trace into a conformance vector (spec/VECTORS.md) that
`epochgc replay` reproduces on one partition: fences, applies, reconciles, restarts,
then the GC round's M and the eligibility of the object it wrongly deletes."""

from __future__ import annotations

import json
from typing import Any

from epochgc.model.actions import housekeep_epoch, round_epoch
from epochgc.model.fence import fence as model_fence
from epochgc.model.invariants import live
from epochgc.model.keys import format_key
from epochgc.model.partition import accepts, inactive_epoch
from epochgc.model.system import Partition, System, write_epoch
from epochgc.model.variants import Variant
from epochgc.proofs.bmc import Trace


def _state_expect(s: System, v: Variant) -> dict[str, Any]:
    st = s.partitions[0].state
    return {
        "max_applied_epoch": st.max_applied_epoch,
        "previous_applied_epoch": st.previous_applied_epoch,
        "min_epoch_lower_bound": st.min_epoch_lower_bound,
        "window_offset": st.window_offset,
        "last_reconciled_log_offset": st.last_reconciled_log_offset,
        "inactive_epoch": inactive_epoch(st, v),
    }


def object_key(s: System, o: int) -> str:
    return format_key(0, s.objects[o].epoch, f"o{o}")


def _fence(pb: Partition, epoch: int, v: Variant, note: str) -> dict[str, Any]:
    r = model_fence(pb.replicas[pb.leader].seen, pb.state, pb.term, epoch, v)
    window = None if r.window is None else list(r.window)
    return {"op": "fence", "term": pb.term, "epoch": epoch, "node": f"r{pb.leader}",
            "note": note, "expect": {"admitted": r.admitted, "window": window}}


def _apply(pb: Partition, epoch: int, v: Variant, note: str) -> dict[str, Any]:
    return {"op": "apply_placeholder", "epoch": epoch, "offset": pb.log_end, "note": note,
            "expect": {"accepted": accepts(pb.state, epoch, v)}}


def trace_to_vector(trace: Trace, v: Variant, title: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"op": "state", "note": title,
                                    "expect": _state_expect(trace.initial, v)}]
    before = trace.initial
    for st in trace.steps:
        after = st.state
        pb = before.partitions[0]
        a, p = st.action, st.params
        note = f"{a}({', '.join(f'{k}={val}' for k, val in p.items())})"
        if a == "other_write":
            lines += [_fence(pb, p["epoch"], v, note), _apply(pb, p["epoch"], v, note)]
        elif a == "late_land":
            lines.append(_apply(pb, p["epoch"], v, note))
        elif a == "phantom_fence":
            lines.append(_fence(pb, p["epoch"], v, note + ": its replicate then fails"))
        elif a == "fence_write":
            lines.append(_fence(pb, write_epoch(after, after.writes[p["w"]]), v, note))
        elif a == "land_write":
            lines.append(_apply(pb, write_epoch(after, after.writes[p["w"]]), v, note))
        elif a == "housekeep":
            epoch = housekeep_epoch(pb, p["cache"])
            lines.append({"op": "apply_advance_epoch", "epoch": epoch, "offset": pb.log_end,
                          "note": note})
            if p["lrlo"] >= 0:
                lines.append({"op": "apply_reconciled", "lrlo": p["lrlo"], "note": note})
        elif a == "reconcile":
            lines.append({"op": "apply_reconciled", "lrlo": p["lrlo"], "note": note})
        elif a == "barrier":  # R36: the epoch barrier's command on p0's log
            st_after = after.partitions[0].state
            lines.append({"op": "apply_advance_gc_epoch", "epoch": p["epoch"],
                          "offset": pb.log_end, "note": note,
                          "expect": {"barrier_epoch": st_after.barrier_epoch}})
        elif a == "restart":
            lines.append({"op": "restart", "node": f"r{p['r']}", "note": note})
        elif a == "gc_compute":
            g = round_epoch(before, v, tuple(p.get("foreign", ())))
            parts = ["p0"] if pb.in_snapshot else []
            reports = [{"partition": "p0", "replica": f"r{i}", "inactive_epoch": r.reported}
                       for i, r in enumerate(pb.replicas)]
            for i, value in enumerate(p.get("foreign", ())):
                parts.append(f"x{i}")
                reports.append({"partition": f"x{i}", "replica": "r0", "inactive_epoch": value})
            lines.append({"op": "gc_epoch", "snapshot_revision": before.snapshot_revision,
                          "partitions": parts, "reports": reports, "note": note,
                          "expect": {"M": g.M, "blocked": g.blocked}})
        elif a == "gc_delete":
            o = p["o"]
            users = [f"w{i}" for i, w in enumerate(before.writes)
                     if w.obj == o and live(before, w, v) is True]
            why = f"deletes o{o} (epoch {after.objects[o].epoch})" + (
                f" although {', '.join(users)} still refers to it" if users else "")
            lines.append({"op": "gc_eligible", "key": object_key(after, o), "age_s": 0,
                          "M": before.gc_m, "grace_s": 0, "note": why,
                          "expect": {"eligible": True, "error": None}})
        else:
            # mint, create_partition, publish_snapshot, upload, fail_replicate, give_up,
            # copy_to_l1, change_leader, sync_replica, report, invalidate_caches: nothing a
            # single partition's log sees.
            pass
        before = after
    lines.append({"op": "state", "note": "final state", "expect": _state_expect(before, v)})
    return lines


def dump(lines: list[dict[str, Any]], variant_name: str, header: str) -> str:
    out = [f"# variant: {variant_name}", f"# {header}",
           "# generated by `python -m epochgc.proofs --write-vectors spec/vectors/generated`"]
    out += [json.dumps(line, sort_keys=False) for line in lines]
    return "\n".join(out) + "\n"
