"""The GC safety monitor (issue 30): a round runs only while the cluster is known healthy.

Production pauses its GC workers while cluster health is unknown or bad, and its reviewers
asked it to fail closed. Here "health" is defined on what the cluster publishes in the
store, nothing else:

- UNKNOWN (blocked): the reports cannot be read or parsed, or no node has ever reported
  (`_cluster/health/` is empty).
- BAD (blocked): a node that has reported before has a report older than the limit (a
  broker that is down, partitioned from the store or wedged), or a partition of the
  snapshot has no fresh report of its incarnation (the model blocks on it too, F4).
- UNKNOWN too: a report dated more than `MAX_CLOCK_SKEW_S` ahead of this host's clock
  (writer and store both ahead: this host's clock is behind, and a node that died would
  stay "fresh" for the age limit plus the skew), and a clock reading or age limit that is
  not a finite number (NaN compares false with everything: every report read as fresh).
- HEALTHY otherwise.

The snapshot's age is not part of health: an old snapshot only lowers M (M is at most its
revision, and a partition created after it has a higher creation revision, R18), so it is
safe by the model, and tests and operators run rounds on an injected clock.

Failing closed: anything the monitor cannot establish is UNKNOWN, and only HEALTHY lets a
round delete. A node that has left the cluster for good keeps blocking until an operator
removes its report (`_cluster/health/<node>.json`), on purpose: the monitor cannot tell a
decommissioned broker from a dead one.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import ClusterView, SeenDocs, read_cluster_view
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.model.cluster import partition_epochs

# How far ahead of this host's clock a report may be dated (ordinary NTP skew between the
# brokers, the store and the GC host); beyond it, the reports' ages cannot be trusted.
MAX_CLOCK_SKEW_S = 60.0


class Health(enum.Enum):
    HEALTHY = "healthy"
    UNKNOWN = "unknown"
    BAD = "bad"


@dataclass(frozen=True)
class HealthVerdict:
    """The monitor's answer: the state and, unless healthy, every reason found."""

    state: Health
    reasons: tuple[str, ...] = ()

    @property
    def healthy(self) -> bool:
        return self.state is Health.HEALTHY

    def why(self) -> str:
        """One line for a round record's `blocked`."""
        return f"safety monitor: cluster health {self.state.value}: " + "; ".join(self.reasons)

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state.value, "reasons": list(self.reasons)}

    @staticmethod
    def unknown(reason: str) -> HealthVerdict:
        return HealthVerdict(Health.UNKNOWN, (reason,))


def stale_reason(nodes: Iterable[str]) -> str:
    """Why nodes count as absent, in the words of `gc-admin show` and of the round's own
    line when it is blocked (newuser12 P7: the round said only "no inactive epoch reported
    for: ...", and the operator had to run `show` to learn the nodes had stopped)."""
    return ("node(s) " + ", ".join(sorted(nodes))
            + " stopped reporting (their reports are older than the age limit)")


def assess(view: ClusterView) -> HealthVerdict:
    """The verdict on one read of the reports. Pure: the same view gives the same verdict."""
    unknown: list[str] = []
    bad: list[str] = []
    if not view.fresh and not view.stale_nodes:
        unknown.append("no node has published a health report")
    for h in view.fresh:
        if not math.isfinite(h.age_s):
            unknown.append(f"node {h.node}'s report has no finite age ({h.age_s!r})")
        elif h.age_s < -MAX_CLOCK_SKEW_S:
            unknown.append(f"node {h.node}'s report is dated {-h.age_s:.0f} s ahead of this "
                           f"host's clock (more than {MAX_CLOCK_SKEW_S:g} s of clock skew)")
    if view.stale_nodes:
        bad.append(stale_reason(view.stale_nodes))
    best = partition_epochs(list(view.partitions), view.counted())
    missing = [p for p in view.partitions if best[p] is None]
    if missing:
        bad.append(f"{len(missing)} partition(s) without a fresh report: "
                   + ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else ""))
    if unknown:
        return HealthVerdict(Health.UNKNOWN, tuple(unknown + bad))
    if bad:
        return HealthVerdict(Health.BAD, tuple(bad))
    return HealthVerdict(Health.HEALTHY)


def check_health(store: ObjectStore, now: float, max_report_age_s: float,
                 seen: SeenDocs | None = None) -> HealthVerdict:
    """Read the reports and judge them; a read that fails is UNKNOWN, never an exception
    (fail closed: no health information blocks the round). A clock reading or age limit
    that is not a finite number (or a limit <= 0) is UNKNOWN: nothing can be judged fresh.
    `seen`: the in-round watch's documents from its previous look (`reports.SeenDocs`)."""
    if not (math.isfinite(now) and math.isfinite(max_report_age_s) and max_report_age_s > 0):
        return HealthVerdict(Health.UNKNOWN, (
            f"cannot judge the reports' ages: clock {now!r}, age limit {max_report_age_s!r}",))
    try:
        view = read_cluster_view(store, now, max_report_age_s, seen=seen)
    except (ReportError, StoreError) as e:
        return HealthVerdict(Health.UNKNOWN, (f"the reports cannot be read: {e}",))
    return assess(view)
