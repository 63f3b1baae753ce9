"""Experiment 3, the epoch barrier (issue 30, SPEC R36-R38): how much sooner garbage is
collected with the barrier than without, on the implementation's deterministic simulation
(SimCluster, `experiments.harness`).

    python -m epochgc.experiments.barrier [--quick] [--out docs/]

Three settings, each run twice with the same seed: without the barrier, and with the
controller leader's automatic barrier (it runs when the minimum M(p) of its replicas has not
moved for `barrier_after` = 2 s). 3 brokers, one producer per written partition (mean think
time 0.1 s, uploads take uniform [0, 0.2] s), health reports and partition table every
0.5 s, a GC round (grace 0) every second.

- idle: 4 partitions, only t/0 is written; the housekeeper treats a partition as idle only
  after 15 s still (until then a partition nobody wrote to has no M(p) and blocks GC).
- stuck-reconciler: 2 written partitions, epochs every second, but the reconciler runs only
  every 10 s (it is stuck in between).
- slow-epochs: 2 written partitions, a new cluster epoch only every 8 s (production: 10
  minutes), reconciler every 0.5 s.

Per run: for every acknowledged object, its collection delay (from its stamp to the GC round
that deletes it once nothing references it), the share deleted by the end, the mean and 90th
percentile of the delay over the deleted ones, and the independent safety checks of the
harness (no GC round deleted an object a committed unreconciled placeholder references; M(p)
below every unreconciled placeholder's epoch; every acknowledged record reads back).
Objects still stored at the end count in the share, not in the delays.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from epochgc.experiments.harness import Workload, WorkloadConfig
from epochgc.model.variants import REFERENCE

SETTINGS = ("idle", "stuck-reconciler", "slow-epochs")
BARRIER_AFTER = 2.0


@dataclass(frozen=True)
class Cell:
    setting: str
    barrier: bool
    seed: int
    duration: float


@dataclass
class Result:
    setting: str
    barrier: bool
    seed: int
    duration: float
    objects: int  # acknowledged objects
    deleted: int  # of those, deleted by the end
    delay_mean: float | None  # seconds from stamp to deletion, over the deleted ones
    delay_p90: float | None
    first_deletion: float | None  # seconds after the start of the first GC deletion
    barrier_epochs: int  # distinct barrier candidates applied (0 without the barrier)
    violations: list[str]

    @property
    def share_deleted(self) -> float:
        return self.deleted / self.objects if self.objects else 0.0


def config(cell: Cell) -> WorkloadConfig:
    base = WorkloadConfig(
        seed=cell.seed, variant=REFERENCE, duration=cell.duration, warmup=0.0,
        producers_per_partition=1, leader_change_every=None, cache_lag=0.0,
        upload_delay=0.1, barrier_after=BARRIER_AFTER if cell.barrier else None,
    )
    if cell.setting == "idle":
        parts = ("t/0", "t/1", "t/2", "t/3")
        return _with(base, partitions=parts, idle_partitions=parts[1:], idle_after=15.0)
    if cell.setting == "stuck-reconciler":
        return _with(base, reconcile_interval=10.0)
    if cell.setting == "slow-epochs":
        return _with(base, epoch_interval=8.0)
    raise ValueError(f"unknown setting {cell.setting!r} (known: {', '.join(SETTINGS)})")


def _with(cfg: WorkloadConfig, **kw: object) -> WorkloadConfig:
    from dataclasses import replace

    return replace(cfg, **kw)  # type: ignore[arg-type]


def _deletion_times(w: Workload) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in w.gc_rounds:
        for k in r.deleted:
            out.setdefault(k, r.t)
    return out


def _barrier_epochs(w: Workload) -> int:
    seen = set()
    for b in w.cluster.brokers.values():
        for rep in b.replicas.values():
            if rep.sm.state.barrier_epoch >= 0:
                seen.add(rep.sm.state.barrier_epoch)
        seen.update(s.candidate for s in b.barrier_steps)
    return len(seen)


def run_cell(cell: Cell) -> Result:
    """One run; deterministic for a given cell."""
    w = Workload(config(cell))
    try:
        w.run()
        gone = _deletion_times(w)
        acked = [o for o in w.objects.values() if o.acked]
        delays = sorted(gone[o.key] - o.stamped for o in acked if o.key in gone)
        firsts = [r.t for r in w.gc_rounds if r.deleted]
        return Result(
            cell.setting, cell.barrier, cell.seed, cell.duration, len(acked), len(delays),
            statistics.fmean(delays) if delays else None,
            delays[int(0.9 * (len(delays) - 1))] if delays else None,
            (min(firsts) - w.t0) if firsts else None, _barrier_epochs(w),
            list(w.violations))
    finally:
        w.close()


def cells(duration: float, seeds: tuple[int, ...] = (1,)) -> list[Cell]:
    return [Cell(s, b, seed, duration) for s in SETTINGS for b in (False, True)
            for seed in seeds]


def table(results: list[Result]) -> list[str]:
    """A markdown table: per setting, without and with the barrier, and the ratio."""
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    out = ["| setting | barrier | objects | deleted by the end | mean delay (s) | "
           "p90 delay (s) | first deletion (s) | barrier epochs | violations |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        out.append(f"| {r.setting} | {'on' if r.barrier else 'off'} | {r.objects} | "
                   f"{r.share_deleted:.0%} | {f(r.delay_mean)} | {f(r.delay_p90)} | "
                   f"{f(r.first_deletion)} | {r.barrier_epochs} | {len(r.violations)} |")
    return out


def plot(results: list[Result], path: Path) -> None:
    """Mean and p90 collection delay per setting, without and with the barrier."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    xs = list(range(len(SETTINGS)))
    for ax, what, title in ((axes[0], "delay_mean", "mean collection delay (s)"),
                            (axes[1], "share", "objects deleted by the end")):
        for off, on in ((-0.2, False), (0.2, True)):
            vals = []
            for s in SETTINGS:
                r = next(x for x in results if x.setting == s and x.barrier == on)
                v = r.share_deleted * 100 if what == "share" else (r.delay_mean or 0.0)
                vals.append(v)
            ax.bar([x + off for x in xs], vals, width=0.4,
                   label="with barrier" if on else "without")
        ax.set_xticks(xs, SETTINGS)
        ax.set_title(title + (" (%)" if what == "share" else ""))
        ax.legend()
    fig.suptitle("epoch barrier: garbage collection delay (SimCluster, seed 1)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 s runs instead of 40 s")
    ap.add_argument("--out", default="docs", help="where barrier_delay.png and .json go")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for c in cells(20.0 if args.quick else 40.0):
        results.append(run_cell(c))
        print(f"  [barrier] {c.setting} barrier={c.barrier} done", file=sys.stderr, flush=True)
    plot(results, out / "barrier_delay.png")
    (out / "barrier_delay.json").write_text(json.dumps([asdict(r) for r in results], indent=1)
                                            + "\n")
    print("\n".join(table(results)))
    bad = [v for r in results for v in r.violations]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
