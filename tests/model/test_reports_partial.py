"""Reports as a partial map (issue 28 item 5): a replica's report in the store is absent,
null or a value; the round reads only the reports in the store, so a partition none of
whose replicas has one is unlisted, and must still block the round (F4)."""

from __future__ import annotations

from epochgc.model.actions import reports_of, round_epoch, step
from epochgc.model.system import System, initial
from epochgc.model.variants import REFERENCE


def _cluster() -> System:
    s = initial(1, 2, [(0, 0)], 1)
    for a, kw in (("create_partition", {"p": 0}), ("mint", {}), ("publish_snapshot", {}),
                  ("other_write", {"p": 0, "epoch": 2}), ("sync_replica", {"p": 0, "r": 0})):
        s = step(s, REFERENCE, a, **kw)
    return s


def test_absent_null_and_value() -> None:
    s = _cluster()
    assert reports_of(s) == []  # nobody reported: p0 is unlisted
    assert round_epoch(s, REFERENCE).blocked is not None  # ... and blocks the round
    s = step(s, REFERENCE, "report", p=0, r=1)  # r1 has no M(p) yet: a null report
    assert [(r.replica, r.inactive_epoch) for r in reports_of(s)] == [("r1", None)]
    assert s.partitions[0].replicas[1].reported_null
    assert round_epoch(s, REFERENCE).blocked is not None
    s = step(s, REFERENCE, "report", p=0, r=0)  # a value
    assert round_epoch(s, REFERENCE).M == 1  # min(snapshot revision 2, M(p) = floor 2 - 1)
    s = step(s, REFERENCE, "expire_report", p=0, r=0)  # too old: absent again
    assert [r.replica for r in reports_of(s)] == ["r1"]
    assert round_epoch(s, REFERENCE).blocked is not None
