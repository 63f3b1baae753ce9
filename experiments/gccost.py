"""Experiment 2, what GC costs: L0 garbage retained over time against the ideal of deleting
every object the moment its last referencing partition has reconciled it.

Run on the implementation's deterministic simulation (SimCluster, not the model's transition
system): 3 partitions on 3 brokers, 3 producers writing one record to every partition per
request (so one L0 object is referenced by 3 partitions), upload delay 0.05 s, no leadership
changes, no cache lag. A cluster epoch is minted every T seconds; each partition leader's
reconciler runs every R seconds (the reconciler lag); housekeeper every 1 s, health reports
and the partition table every 0.5 s, a GC round (grace 0) every 1 s.

Ground truth comes from the timestamped apply log, not from M: an object becomes garbage at
the latest of (its produce attempt settled; for every partition that accepted its
placeholder, the first moment a replica's LRO and LRLO both cover that placeholder). An
object no partition accepted (a rejected or failed attempt, an orphan) becomes garbage when
its attempt settles. Retained garbage at time t = objects in the store at t that were
garbage before t; the ideal retains none, so its stored bytes are the live bytes only.
An object deleted before it became garbage is a safety violation.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field

from epochgc.experiments.harness import Workload, WorkloadConfig, run_workload
from epochgc.impl.partition.commands import Placeholder
from epochgc.model.variants import variant

PARTS = ("t/0", "t/1", "t/2")


@dataclass(frozen=True)
class Grid:
    epoch_intervals: tuple[float, ...]  # T
    reconcile_intervals: tuple[float, ...]  # R
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    duration: float


QUICK = Grid((1.0, 4.0), (0.5, 4.0), ("reference", "strict"), (1,), duration=30.0)
FULL = Grid((0.5, 1.0, 2.0, 4.0), (0.25, 1.0, 4.0), ("reference", "strict"), (1,), 45.0)
TINY = Grid((1.0,), (1.0,), ("reference",), (5,), duration=12.0)


@dataclass(frozen=True)
class Cell:
    variant: str
    T: float
    R: float
    seed: int
    duration: float


@dataclass
class Result:
    variant: str
    T: float
    R: float
    seed: int
    objects: int
    deleted: int
    orphans: int
    retention_mean: float  # seconds from becoming garbage to deletion (deleted objects)
    retention_p95: float
    garbage_objects_mean: float  # time-averaged retained garbage
    garbage_bytes_mean: float
    live_bytes_mean: float  # the ideal's stored bytes
    stored_bytes_mean: float  # the actual stored bytes
    overhead: float  # stored / ideal stored
    never_collected: int  # garbage before the last 10 s but still stored at the end
    series: list[tuple[float, int, int, int, int]] = field(default_factory=list)
    # (t, actual objects, actual bytes, ideal objects, ideal bytes)
    violations: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def cells(grid: Grid) -> list[Cell]:
    return [Cell(v, t, r, s, grid.duration) for t, r, s, v in
            itertools.product(grid.epoch_intervals, grid.reconcile_intervals, grid.seeds,
                              grid.variants)]


def garbage_since(w: Workload) -> dict[str, float | None]:
    """Per object, when it became garbage (None: still referenced at the end)."""
    times = w.cluster.apply_log.times  # type: ignore[attr-defined]
    refs: dict[str, list[tuple[str, int, int]]] = {}
    seen: set[tuple[str, int]] = set()
    per_node: dict[tuple[int, str], list[tuple[float, int, int]]] = {}
    for t, rec in zip(times, w.cluster.apply_log, strict=True):
        ev = rec.event
        st = ev.state
        per_node.setdefault((rec.node, rec.partition), []).append(
            (t, st.last_reconciled_offset, st.last_reconciled_log_offset))
        accepted = ev.result is not None and ev.result.accepted
        pk = (rec.partition, ev.index)
        if isinstance(ev.command, Placeholder) and accepted and pk not in seen:
            assert ev.result is not None
            seen.add(pk)
            last = ev.result.base + ev.command.count - 1
            refs.setdefault(ev.command.key, []).append((rec.partition, ev.index, last))
    # Earliest time some replica's (LRO, LRLO) covered each (partition, index, last).
    covered: dict[tuple[str, int], float] = {}
    by_p: dict[str, list[tuple[int, int]]] = {}
    for lst in refs.values():
        for p, idx, last in lst:
            by_p.setdefault(p, []).append((idx, last))
    for (_, p), evs in per_node.items():
        todo = sorted(by_p.get(p, []))
        i = 0
        for t, lro, lrlo in evs:
            while i < len(todo) and todo[i][0] <= lrlo and todo[i][1] <= lro:
                k = (p, todo[i][0])
                covered[k] = min(covered.get(k, t), t)
                i += 1
    out: dict[str, float | None] = {}
    for key, o in w.objects.items():
        if o.stored is None:
            continue
        t_g: float | None = o.settled
        for p, idx, _ in refs.get(key, []):
            c = covered.get((p, idx))
            t_g = None if (c is None or t_g is None) else max(t_g, c)
        out[key] = t_g
    return out


def _garbage_by(gs: dict[str, float | None], key: str, t: float) -> bool:
    g = gs.get(key)
    return g is not None and g <= t


def run_cell(cell: Cell) -> Result:
    import time

    t0 = time.perf_counter()
    cfg = WorkloadConfig(
        seed=cell.seed, variant=variant(cell.variant), partitions=PARTS,
        epoch_interval=cell.T, upload_delay=0.05, cache_lag=0.0, shared_objects=True,
        producers_per_partition=3, think_time=0.15, leader_change_every=None,
        reconcile_interval=cell.R, housekeep_interval=1.0, health_interval=0.5,
        publish_interval=0.5, gc_interval=1.0, duration=cell.duration, sample_interval=0.25,
    )
    w = run_workload(cfg)
    gs = garbage_since(w)
    deleted_at: dict[str, float] = {}
    for g in w.gc_rounds:
        for k in g.deleted:
            deleted_at.setdefault(k, g.t)
    violations = list(w.violations)
    for k, t in deleted_at.items():
        g_t = gs.get(k)
        if g_t is None or t < g_t:
            violations.append(f"{k} deleted at {t:.2f} before it became garbage ({g_t})")
    sizes = {k: o.size for k, o in w.objects.items()}
    series: list[tuple[float, int, int, int, int]] = []
    g_objs: list[int] = []
    g_bytes: list[int] = []
    live_b: list[int] = []
    stored_b: list[int] = []
    for t, live in w.samples:
        ideal = {k for k, o in w.objects.items() if o.stored is not None and o.stored <= t
                 and not _garbage_by(gs, k, t)}
        missing = ideal - live
        if missing:
            violations.append(f"t={t:.2f}: {len(missing)} live objects missing from the store")
        garbage = [k for k in live if _garbage_by(gs, k, t)]
        ab = sum(sizes.get(k, 0) for k in live)
        ib = sum(sizes[k] for k in ideal)
        series.append((t - w.t0, len(live), ab, len(ideal), ib))
        if t >= w.t0 + cfg.warmup:
            g_objs.append(len(garbage))
            g_bytes.append(sum(sizes.get(k, 0) for k in garbage))
            live_b.append(ib)
            stored_b.append(ab)
    ret = sorted(deleted_at[k] - gs[k] for k in deleted_at if gs.get(k) is not None)  # type: ignore[operator]
    final_live = w.samples[-1][1] if w.samples else set()
    never = sum(1 for k in final_live if _garbage_by(gs, k, w.samples[-1][0] - 10.0))
    mean = statistics.fmean
    return Result(
        variant=cell.variant, T=cell.T, R=cell.R, seed=cell.seed,
        objects=len(gs), deleted=len(deleted_at),
        orphans=sum(1 for k, o in w.objects.items() if o.stored is not None and not o.acked),
        retention_mean=mean(ret) if ret else float("nan"),
        retention_p95=ret[int(0.95 * (len(ret) - 1))] if ret else float("nan"),
        garbage_objects_mean=mean(g_objs) if g_objs else 0.0,
        garbage_bytes_mean=mean(g_bytes) if g_bytes else 0.0,
        live_bytes_mean=mean(live_b) if live_b else 0.0,
        stored_bytes_mean=mean(stored_b) if stored_b else 0.0,
        overhead=(mean(stored_b) / mean(live_b)) if live_b and mean(live_b) else float("nan"),
        never_collected=never, series=series, violations=violations,
        wall_s=time.perf_counter() - t0,
    )


# ---- report ---------------------------------------------------------------------------------


def table(results: list[Result]) -> str:
    lines = ["| T (s) | R (s) | variant | objects | deleted | orphans | retention after garbage, "
             "mean / p95 (s) | retained garbage, mean objects / KiB | ideal stored KiB "
             "| actual stored KiB | actual / ideal | safety violations |",
             "|" + "---|" * 12]
    for r in sorted(results, key=lambda r: (r.T, r.R, r.variant != "reference", r.seed)):
        lines.append(
            f"| {r.T:g} | {r.R:g} | {r.variant} | {r.objects} | {r.deleted} | {r.orphans} "
            f"| {r.retention_mean:.2f} / {r.retention_p95:.2f} "
            f"| {r.garbage_objects_mean:.1f} / {r.garbage_bytes_mean / 1024:.1f} "
            f"| {r.live_bytes_mean / 1024:.1f} | {r.stored_bytes_mean / 1024:.1f} "
            f"| {r.overhead:.2f}x | {len(r.violations)} |")
    return "\n".join(lines)


def plot(results: list[Result], out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files: list[str] = []
    ref = [r for r in results if r.variant == "reference"]
    # 1. Time series: actual vs ideal stored bytes, for the smallest and largest T (R smallest).
    Rmin = min(r.R for r in ref)
    picks = sorted({r.T for r in ref})
    picks = [picks[0], picks[-1]] if len(picks) > 1 else picks
    fig, axes = plt.subplots(1, len(picks), figsize=(5.5 * len(picks), 3.6), squeeze=False)
    for ax, t in zip(axes[0], picks, strict=True):
        r = next(x for x in ref if t == x.T and Rmin == x.R)
        xs = [s[0] for s in r.series]
        ax.plot(xs, [s[2] / 1024 for s in r.series], label="actual stored (KiB)",
                color="tab:blue")
        ax.plot(xs, [s[4] / 1024 for s in r.series], label="ideal: live only (KiB)",
                color="tab:green")
        ax.fill_between(xs, [s[4] / 1024 for s in r.series], [s[2] / 1024 for s in r.series],
                        color="tab:blue", alpha=0.15, label="retained garbage")
        ax.set_title(f"reference, T = {t:g} s, R = {Rmin:g} s")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("L0 bytes in the store (KiB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out_dir}/gc_timeseries.png", dpi=110)
    plt.close(fig)
    files.append("gc_timeseries.png")
    # 2. Mean retention delay vs T, one line per (variant, R).
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    Rs = sorted({r.R for r in results})
    styles = {"reference": "-", "strict": "--"}
    for v in sorted({r.variant for r in results}):
        for i, rr in enumerate(Rs):
            pts = sorted((r.T, r.retention_mean, r.garbage_bytes_mean / 1024) for r in results
                         if r.variant == v and rr == r.R)
            color = plt.cm.viridis(i / max(1, len(Rs) - 1))
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], styles.get(v, ":"),
                         marker="o", color=color, label=f"{v}, R={rr:g}s")
            axes[1].plot([p[0] for p in pts], [p[2] for p in pts], styles.get(v, ":"),
                         marker="o", color=color, label=f"{v}, R={rr:g}s")
    axes[0].set_ylabel("mean seconds from garbage to deleted")
    axes[1].set_ylabel("mean retained garbage (KiB)")
    for ax in axes:
        ax.set_xlabel("epoch interval T (s)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("What GC costs: retention beyond the ideal (ideal = 0)")
    fig.tight_layout()
    fig.savefig(f"{out_dir}/gc_retention.png", dpi=110)
    plt.close(fig)
    files.append("gc_retention.png")
    return files
