"""Model functions the transition system does not reach, exhaustively checked over a bounded
domain (each found by an independent reviewer's seeded bug that passed every proof row,
issue 28):

- `gc_epoch` (the validating entry the GC job's report reader calls) equals
  `gc_epoch_of_valid` (the one the system model calls) on every well-formed input of the
  domain, for every variant: a validation that refuses a legal report (-1: "nothing below
  0") would block rounds only in the implementation;
- `apply_reconciled`'s LRO (the offset below which reads go to L1, which the system model
  never passes) and LRLO never move back, whatever the arguments.
"""

from __future__ import annotations

import itertools
import time

from epochgc.model.cluster import GcEpoch, Report, gc_epoch, gc_epoch_of_valid
from epochgc.model.errors import ModelError
from epochgc.model.partition import INITIAL, PartitionState, apply_reconciled
from epochgc.model.variants import VARIANTS
from epochgc.proofs.obligations import Outcome

VALUES = (None, -1, 0, 1, 3)  # a replica's report: nothing, "nothing below 0", values
REVISIONS = (0, 2, 5)


def _report_sets() -> list[tuple[list[str], list[Report]]]:
    """Snapshots of 0-2 partitions, each reported by 0-2 replicas with every value."""
    out: list[tuple[list[str], list[Report]]] = []
    for n in range(3):
        parts = [f"t/{i}" for i in range(n)]
        slots = [(p, r) for p in parts for r in ("a", "b")]
        for present in itertools.product((False, True), repeat=len(slots)):
            chosen = [s for s, keep in zip(slots, present, strict=True) if keep]
            for values in itertools.product(VALUES, repeat=len(chosen)):
                out.append((parts, [Report(p, r, v) for (p, r), v in
                                    zip(chosen, values, strict=True)]))
    return out


def check_gc_epoch() -> list[str]:
    bad: list[str] = []
    cases = _report_sets()
    for variant in VARIANTS.values():
        for revision in REVISIONS:
            for parts, reports in cases:
                want = gc_epoch_of_valid(revision, parts, reports, variant)
                try:
                    got: GcEpoch | str = gc_epoch(revision, parts, reports, variant)
                except ModelError as e:
                    got = f"refused: {e}"
                if got != want:
                    bad.append(f"{variant.name}: gc_epoch({revision}, {parts}, {reports}) = "
                               f"{got}, gc_epoch_of_valid gives {want}")
                    if len(bad) > 5:
                        return bad
    return bad


def check_reconciled() -> list[str]:
    bad: list[str] = []
    offsets = (-1, 0, 1, 4)
    for lrlo0, lro0, lrlo, lro in itertools.product(offsets, offsets, offsets, (None, *offsets)):
        state = PartitionState(**{**INITIAL.__dict__, "last_reconciled_log_offset": lrlo0,
                                  "last_reconciled_offset": lro0})
        try:
            out = apply_reconciled(state, lrlo, lro)
        except ModelError:
            continue
        if out.last_reconciled_log_offset < lrlo0 or out.last_reconciled_offset < lro0:
            bad.append(f"apply_reconciled(LRLO {lrlo0}, LRO {lro0}; {lrlo}, {lro}) moved back: "
                       f"LRLO {out.last_reconciled_log_offset}, LRO {out.last_reconciled_offset}")
    return bad


def task_model_edges() -> list[Outcome]:
    t0 = time.perf_counter()
    bad_m = check_gc_epoch()
    t1 = time.perf_counter()
    bad_r = check_reconciled()
    t2 = time.perf_counter()
    n = len(_report_sets()) * len(REVISIONS) * len(VARIANTS)
    return [
        Outcome(f"gc_epoch (validating) = gc_epoch_of_valid on well-formed input "
                f"(exhaustive: {n} inputs over every variant)", "invariant",
                "failed" if bad_m else "checked", t1 - t0, "\n".join(bad_m[:6]), scope="cluster"),
        Outcome("apply_reconciled never moves LRLO or LRO back (exhaustive: offsets -1..4)",
                "invariant", "failed" if bad_r else "checked", t2 - t1, "\n".join(bad_r[:6]),
                scope="partition"),
    ]
