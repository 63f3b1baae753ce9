"""newuser11 M12: `epochgc barrier` on 1,032 partitions was silent 11 s, and a Ctrl-C said
only "interrupted by SIGINT", not whether the barrier had started. Now a line every 10 s
while it waits (candidate, partitions that applied it) and an interrupted line that says
what was done. The clock is injected here (no sleeps); the signal on a real cluster is in
test_frozen_node.py."""

from __future__ import annotations

from epochgc.impl.cluster.barrier_cli import LINE_EVERY_S, BarrierProgress


def _rows(applied: int, missing: int) -> dict[str, dict[str, object]]:
    rows = {f"t/{i}": {"state": "pending"} for i in range(applied)}
    rows.update({f"u/{i}": {"state": "missing"} for i in range(missing)})
    return rows


def test_a_line_every_10_s_once_the_barrier_started() -> None:
    p = BarrierProgress(began=100.0)
    assert p.line(100.0 + 2 * LINE_EVERY_S) is None  # not started: nothing to say yet
    # newuser14 R8: nothing asked is said too (was None: "interrupted by SIGINT" only)
    assert p.interrupted() == ("the barrier was not started (nothing was asked of the "
                               "controller)")
    p.asked = True
    assert "asked of the controller, not answered: it may have started" in str(
        p.interrupted())
    p.candidate = 7
    p.seen(_rows(989, 43))
    assert p.line(109.9) is None
    assert p.line(110.0) == ("epochgc barrier: candidate 7: 989 of 1,032 partition(s) "
                             "applied it (10 s)")
    assert p.line(119.0) is None and p.line(120.0) is not None
    assert p.interrupted() == (
        "the barrier had started (candidate 7: every broker drops its cached epoch as it "
        "applies it); 989 of 1,032 partition(s) had applied it, the others do on their "
        "leaders' own barrier rounds (`epochgc cluster status` shows them)")
