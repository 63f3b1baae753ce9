"""newuser7 H7: a signal to `gc` after its "listing 1000 prefixes" line, before Spark
started (the round holding the lease, its recovery of dead rounds found none), printed
"SIGINT while waiting: the unfinished rounds keep their STOP and are recorded by the next
round or `gc-admin reset`" when there was no unfinished round and no wait. The line now
comes only when the recovery's wait was under way, and names the rounds it leaves.

In process, deterministic: the stop is requested from the round's own output, at the line
the tester signalled after (a), and at the recovery's "waiting up to" line (b)."""

from __future__ import annotations

import time
from pathlib import Path

from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import START, journal_prefix, write_marker
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import local_spec, simple_cluster

DEAD = "20270115T060000.000Z-deadr0nd"


def _round(root: Path, at: str) -> tuple[list[str], str | None]:
    stop = RoundStop()
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if at in line:
            stop.request("SIGINT")

    s = run_gc(lambda: None, local_spec(root), GcOptions(), clock=time.time, say=say,
               stop=stop)
    return said, s.interrupted


def test_a_stop_before_spark_with_no_dead_round_says_no_unfinished_round(
        tmp_path: Path) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    said, interrupted = _round(root, "listing 1000 prefixes")
    assert interrupted == "SIGINT", said
    wrong = [line for line in said if "unfinished rounds" in line or "while waiting" in line]
    assert wrong == [], "\n".join(said)


def test_a_stop_during_the_recoverys_wait_names_the_round_it_leaves(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100, now=time.time())
    write_marker(store, journal_prefix(DEAD), START,
                 {"round": DEAD, "M": 100, "snapshot_revision": 7, "options": {},
                  "stop_within_s": 600.0})
    said, interrupted = _round(root, "waiting up to")
    assert interrupted == "SIGINT", said
    assert (f"gc: SIGINT while waiting for round {DEAD}: it keeps its STOP and is recorded "
            "by the next round or `gc-admin reset`") in said, "\n".join(said)
