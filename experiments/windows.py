"""Experiment 1, why windows: the same workload under the `strict`, `collapse` and
`reference` variants on the implementation's deterministic simulation (SimCluster).

Workload (see `experiments.harness`): 2 partitions on 3 brokers, 3 producers per partition
with a mean think time of 0.1 s; a cluster epoch is minted every T seconds; an L0 upload
takes uniform [0, 2D] seconds between stamping the object with the stamping leader's cached
epoch and fencing its placeholder; brokers 2 and 3 see the cluster epoch as of L seconds
ago (broker 1 is fresh); every 3 s the leadership of every partition moves
1 -> 2 -> 1 -> 3 -> 1 ... (fresh <-> stale cache). Reconciler, housekeeper, health reports
and GC rounds (grace 0) run throughout.

Per run: rejected-write rate (stale rejections, at the fence or at apply time, per
placeholder sent), write stall after each leadership change (time from the new leader
taking over until the first acknowledged write on that partition; a change with no ack
before the next change counts the whole interval), retries per acknowledged record, and
the safety checks (every acked record reads back at its acked offset; no GC round deleted
an object referenced by a committed unreconciled placeholder on any replica; M(p) below
every unreconciled placeholder's epoch).
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass

from epochgc.experiments.harness import Workload, WorkloadConfig, run_workload
from epochgc.model.variants import variant

VARIANTS = ("strict", "collapse", "reference")


@dataclass(frozen=True)
class Grid:
    epoch_intervals: tuple[float, ...]  # T
    upload_delays: tuple[float, ...]  # D
    cache_lags: tuple[float, ...]  # L
    seeds: tuple[int, ...]
    duration: float
    leader_change_every: float = 3.0


QUICK = Grid((1.0, 4.0), (0.05, 0.5), (0.0, 2.0), seeds=(1,), duration=24.0)
FULL = Grid((1.0, 2.0, 4.0), (0.05, 0.25, 1.0), (0.0, 1.5, 5.0), seeds=(1,), duration=36.0)
TINY = Grid((1.0,), (0.3,), (2.0,), seeds=(3,), duration=10.0, leader_change_every=2.5)


@dataclass(frozen=True)
class Cell:
    variant: str
    T: float
    D: float
    L: float
    seed: int
    duration: float
    leader_change_every: float


@dataclass
class Result:
    variant: str
    T: float
    D: float
    L: float
    seed: int
    requests: int
    acked: int
    failed: int  # requests not acknowledged after the producer's attempts
    placeholders: int
    stale: int
    retries: int
    rejected_rate: float
    retries_per_ack: float
    stalls: list[float]
    stall_mean: float
    stall_max: float
    changes: int
    gc_rounds: int
    gc_deleted: int
    violations: list[str]
    wall_s: float


def cells(grid: Grid, variants: tuple[str, ...] = VARIANTS) -> list[Cell]:
    return [Cell(v, t, d, lag, s, grid.duration, grid.leader_change_every)
            for t, d, lag, s, v in itertools.product(grid.epoch_intervals, grid.upload_delays,
                                                      grid.cache_lags, grid.seeds, variants)]


def stalls(w: Workload) -> list[float]:
    """Per leadership change: seconds from the new leader taking over until the first write
    stamped after the change (by the new leader's cache) that was then acknowledged is
    stamped, i.e. the run of writes the new leader stamps and then has rejected. In-flight
    writes stamped by the old leader are not counted as the partition being writable. A
    change with no such write before the next change counts the whole interval."""
    out: list[float] = []
    by_p: dict[str, list[tuple[str, float, int, int]]] = {}
    for ch in w.changes:
        by_p.setdefault(ch[0], []).append(ch)
    for p, chs in by_p.items():
        chs.sort(key=lambda c: c[1])
        stamps = sorted(w.objects[o.ack.key].stamped for o in w.outcomes
                        if o.partition == p and o.ack is not None)
        for i, (_, t, _, _) in enumerate(chs):
            horizon = chs[i + 1][1] if i + 1 < len(chs) else w.end
            first = next((s for s in stamps if s >= t), None)
            out.append(min(first, horizon) - t if first is not None else horizon - t)
    return out


def run_cell(cell: Cell) -> Result:
    import time

    t0 = time.perf_counter()
    cfg = WorkloadConfig(
        seed=cell.seed, variant=variant(cell.variant), epoch_interval=cell.T,
        upload_delay=cell.D, cache_lag=cell.L, duration=cell.duration,
        leader_change_every=cell.leader_change_every,
    )
    w = run_workload(cfg)
    # Only requests started after the warm-up count; shared_objects is off, so one outcome
    # is one request.
    outs = [o for o in w.outcomes if o.started >= w.t0 + cfg.warmup]
    acked = [o for o in outs if o.ack is not None]
    placeholders = sum(o.retries + 1 for o in outs)
    stale = sum(o.stale for o in outs)
    retries = sum(o.retries for o in outs)
    st = stalls(w)
    return Result(
        variant=cell.variant, T=cell.T, D=cell.D, L=cell.L, seed=cell.seed,
        requests=len(outs), acked=len(acked), failed=len(outs) - len(acked),
        placeholders=placeholders, stale=stale, retries=retries,
        rejected_rate=stale / placeholders if placeholders else 0.0,
        retries_per_ack=retries / len(acked) if acked else float("inf"),
        stalls=st, stall_mean=statistics.fmean(st) if st else 0.0,
        stall_max=max(st) if st else 0.0, changes=len(w.changes),
        gc_rounds=sum(1 for g in w.gc_rounds if g.M is not None),
        gc_deleted=sum(len(g.deleted) for g in w.gc_rounds),
        violations=list(w.violations), wall_s=time.perf_counter() - t0,
    )


def result_dict(r: Result) -> dict[str, object]:
    return asdict(r)


# ---- report ---------------------------------------------------------------------------------


def table(results: list[Result]) -> str:
    head = ("| T (s) | D (s) | L (s) | variant | rejected writes "
            "| stall after change, mean / max (s) | retries per acked record "
            "| failed requests | acked | safety violations |")
    lines = [head, "|" + "---|" * 10]
    key = {v: i for i, v in enumerate(VARIANTS)}
    for r in sorted(results, key=lambda r: (r.T, r.D, r.L, key.get(r.variant, 9), r.seed)):
        lines.append(
            f"| {r.T:g} | {r.D:g} | {r.L:g} | {r.variant} | {100 * r.rejected_rate:.1f}% "
            f"| {r.stall_mean:.2f} / {r.stall_max:.2f} | {r.retries_per_ack:.3f} "
            f"| {r.failed} | {r.acked} | {len(r.violations)} |")
    return "\n".join(lines)


def summary(results: list[Result]) -> str:
    lines = ["| variant | runs | rejected writes (all runs) | mean stall (s) | max stall (s) "
             "| retries per acked record | failed requests | safety violations |",
             "|---|---|---|---|---|---|---|---|"]
    for v in VARIANTS:
        rs = [r for r in results if r.variant == v]
        if not rs:
            continue
        ph = sum(r.placeholders for r in rs)
        st = [s for r in rs for s in r.stalls]
        ack = sum(r.acked for r in rs)
        lines.append(
            f"| {v} | {len(rs)} | {100 * sum(r.stale for r in rs) / max(ph, 1):.1f}% "
            f"| {statistics.fmean(st) if st else 0:.2f} | {max(st) if st else 0:.2f} "
            f"| {sum(r.retries for r in rs) / max(ack, 1):.3f} | {sum(r.failed for r in rs)} "
            f"| {sum(len(r.violations) for r in rs)} |")
    return "\n".join(lines)


def plot(results: list[Result], out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Ts = sorted({r.T for r in results})
    Ds = sorted({r.D for r in results})
    Ls = sorted({r.L for r in results})
    colors = {"strict": "tab:red", "collapse": "tab:orange", "reference": "tab:green"}
    styles = ["-", "--", ":"]
    files: list[str] = []

    def avg(rs: list[Result], f: str) -> float:
        return statistics.fmean(getattr(r, f) for r in rs) if rs else float("nan")

    specs = [
        ("rejected_rate", "rejected-write rate (%)", 100.0, "D", Ds, "L", Ls,
         "windows_rejected.png", "Rejected writes vs in-flight upload delay D"),
        ("stall_mean", "mean write stall after a leadership change (s)", 1.0, "L", Ls, "D", Ds,
         "windows_stall.png", "Write stall after leadership change vs epoch-cache lag L"),
        ("retries_per_ack", "retries per acknowledged record", 1.0, "L", Ls, "D", Ds,
         "windows_retries.png", "Retries per acknowledged record vs epoch-cache lag L"),
    ]
    for field, ylabel, scale, xname, xs, lname, ls, fname, title in specs:
        fig, axes = plt.subplots(1, len(Ts), figsize=(4.2 * len(Ts), 3.6), sharey=True,
                                 squeeze=False)
        for ax, t in zip(axes[0], Ts, strict=True):
            for v in VARIANTS:
                for li, lv in enumerate(ls):
                    ys = [scale * avg([r for r in results if r.variant == v and t == r.T
                                       and getattr(r, xname) == x and getattr(r, lname) == lv],
                                      field) for x in xs]
                    ax.plot(xs, ys, styles[li % 3], marker="o", color=colors[v],
                            label=f"{v}, {lname}={lv:g}s")
            ax.set_title(f"epoch interval T = {t:g} s")
            ax.set_xlabel(f"{xname} (s)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel(ylabel)
        axes[0][-1].legend(fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
        path = f"{out_dir}/{fname}"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(fname)
    return files
