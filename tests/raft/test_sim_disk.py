"""The simulator on the real DiskStorage: seeded programs of proposals, crashes (losing what
was not fsynced), restarts (a new host recovering from the disk), compactions at the applied
index while the log runs further, snapshot installs, link cuts (both ways and one way), late
replays of old messages and several inputs batched before one Ready. Every Raft invariant
runs after every event; every restart must recover what the node had made durable.

Profiles: the default runs DISK_PROGRAMS programs (CI); EPOCHGC_DEEP=1 (or `tox -e simdisk`)
many more and longer. A campaign with counts:

    python -m tests.raft.test_sim_disk --steps 100000 [--first-seed N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from impl.raft.invariants import InvariantViolation
from impl.raft.node import Config, ProposalRefused
from impl.raft.sim import Faults, RestartRefused, Simulator
from tests.raft.test_sim import converge

DEEP = os.environ.get("EPOCHGC_DEEP") == "1"
DISK_PROGRAMS = 3000 if DEEP else 300
DISK_ROUNDS = 120 if DEEP else 40


def disk_setup(seed: int) -> tuple[Config, Faults, dict[str, int]]:
    r = random.Random(seed ^ 0xD15C)
    cfg = Config(
        election_tick=r.choice([3, 5, 10]),
        heartbeat_tick=1,
        pre_vote=r.random() < 0.7,
        check_quorum=r.random() < 0.7,
        max_inflight=r.choice([1, 4, 64]),
        max_msg_bytes=r.choice([1, 64, 1 << 20]),
    )
    faults = Faults(
        drop=r.choice([0.0, 0.05, 0.2]),
        duplicate=r.choice([0.0, 0.1]),
        reorder=r.choice([0.0, 0.2, 0.5]),
        max_latency=r.choice([3, 15, 40]),
        crash_mid_write=r.choice([0.3, 0.7]),
        replay=r.choice([0.0, 0.02, 0.1]),
        batch=r.choice([0.0, 0.3, 0.8]),
    )
    # Small segments: rolls and whole-segment deletions on nearly every compaction.
    disk = {
        "segment_bytes": r.choice([64, 200, 1024]),
        "snapshot_interval": r.choice([0, 3, 8]),
    }
    return cfg, faults, disk


def disk_program(seed: int, rounds: int = DISK_ROUNDS, converge_at_end: bool = True) -> Simulator:
    """One seeded program on DiskStorage; raises InvariantViolation (or RestartRefused) on a
    safety or durability failure. The caller closes the simulator."""
    cfg, faults, disk = disk_setup(seed)
    s = Simulator(
        3 if seed % 3 else 5, seed=seed, config=cfg, faults=faults, disk=True,
        segment_bytes=disk["segment_bytes"], snapshot_interval=disk["snapshot_interval"],
    )
    try:
        r = s.rng
        for k in range(rounds):
            op = r.random()
            lead = s.leader()
            if op < 0.35 and lead:
                for j in range(r.randint(1, 6)):
                    term = s.host(lead).term(1) if r.random() < 0.5 else None
                    with contextlib.suppress(ProposalRefused):
                        s.propose(lead, b"%d-%d-%d" % (seed, k, j), expected_term=term)
            elif op < 0.47:
                s.crash(r.choice(s.ids))
            elif op < 0.59:
                s.restart(r.choice(s.ids))
            elif op < 0.71:
                live = s.live()
                if live:
                    s.compact(r.choice(live))
            elif op < 0.76:
                s.cut(r.choice(s.ids), r.choice(s.ids))
            elif op < 0.81:
                s.cut_one_way(r.choice(s.ids), r.choice(s.ids))
            elif op < 0.86:
                s.heal()
            elif op < 0.90:
                s.replay_old(r.randint(1, 5))
            elif op < 0.93 and lead:
                with contextlib.suppress(ProposalRefused):
                    s.transfer_leadership(lead, r.choice(s.ids))
            s.run(r.randint(1, 60))
        if converge_at_end:
            converge(s)
            # One more crash of everyone and a restart: every acknowledged entry must come back
            # from the disks alone.
            for i in s.ids:
                s.crash(i, mid_write=False)
            converge(s)
    except BaseException:
        s.close()
        raise
    return s


# Strict: the old disk log loses synced entries and refuses restarts (issue 10); this turns
# into a failure (XPASS) the moment the fixed disk log lands, so the marker cannot linger.
@pytest.mark.xfail(reason="issue 10: disk-log recovery bugs (fix pending)", strict=True)
@pytest.mark.parametrize("chunk", range(10))
def test_disk_fuzz_keeps_every_invariant(chunk: int) -> None:
    per = DISK_PROGRAMS // 10
    totals: Counter[str] = Counter()
    for seed in range(chunk * per, (chunk + 1) * per):
        s = disk_program(seed)
        totals.update(s.stats)
        totals["acked"] += len(s.checker.history(1).acked) if s.checker else 0
        s.close()
    # The programs exercised what they claim to (a check on the generator, not on Raft).
    assert totals["crashes"] and totals["restarts"] and totals["compactions"]
    assert totals["acked"] > per


# ---- the campaign ------------------------------------------------------------------------


@dataclass
class Campaign:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[int, str, str]] = field(default_factory=list)  # seed, kind, message

    def run(self, seed: int, rounds: int) -> None:
        s = None
        try:
            s = disk_program(seed, rounds)
        except RestartRefused as e:
            self._fail(seed, "refused_restart", e)
        except InvariantViolation as e:
            self._fail(seed, _classify(str(e)), e)
        except Exception as e:  # the core or the host refusing an operation: count it too
            self._fail(seed, "other_error", e)
        self.counts["programs"] += 1
        if s is not None:
            self._add(s)
            s.close()

    def _fail(self, seed: int, kind: str, e: BaseException) -> None:
        self.counts[kind] += 1
        self.failures.append((seed, kind, f"{type(e).__name__}: {e}"))
        # The simulator that failed is gone; count its steps from the exception's traceback.
        sim = _sim_from(e)
        if sim is not None:
            self._add(sim)
            sim.close()

    def _add(self, s: Simulator) -> None:
        self.counts["steps"] += s.steps
        for k in ("crashes", "restarts", "compactions", "snapshot_installs",
                  "replayed_messages", "batched_readies"):
            self.counts[k] += s.stats[k]
        if s.checker is not None:
            self.counts["acknowledged"] += sum(len(h.acked) for h in s.checker.groups.values())


def _classify(msg: str) -> str:
    if "acknowledged" in msg or "durability" in msg:
        return "lost_acknowledged_or_durable"
    if any(k in msg for k in ("state machine safety", "log matching", "leader completeness",
                              "election safety", "commit index went back")):
        return "divergence"
    return "other_violation"


def _sim_from(e: BaseException) -> Simulator | None:
    tb = e.__traceback__
    found = None
    while tb is not None:
        s = tb.tb_frame.f_locals.get("s")
        if isinstance(s, Simulator):
            found = s
        tb = tb.tb_next
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000, help="simulator steps to run at least")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=DISK_ROUNDS * 2)
    ap.add_argument("--json", help="write the counts and failures here")
    args = ap.parse_args(argv)
    c = Campaign()
    seed = args.first_seed
    t0 = time.monotonic()
    while c.counts["steps"] < args.steps:
        c.run(seed, args.rounds)
        seed += 1
    out = {
        "seeds": [args.first_seed, seed - 1],
        "seconds": round(time.monotonic() - t0, 1),
        "counts": dict(sorted(c.counts.items())),
        "failures": c.failures[:50],
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
