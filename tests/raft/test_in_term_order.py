"""In-term queue order is log order: the property the fence's release at enqueue relies on
(`impl/partition/fence.py`, the contract on `GroupRaft.propose`).

A proposal that `propose` accepted in term T is in the leader's log at once, at an index above
every earlier accepted proposal of T; in every log, on every node, at the end of a faulty run
(drops, duplicates, reordering, batching, crashes, cuts, leadership transfers, group commit),
an accepted proposal of T whose entry survives has every earlier accepted proposal of T before
it. A refused proposal (wrong expected term, not leader) appends nothing, now or later.
EPOCHGC_DEEP=1 runs 300 seeds (as tests/raft/test_sim.py does).
"""

from __future__ import annotations

import contextlib
import os
import random

import pytest

from epochgc.impl.raft.node import Config, ProposalRefused
from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import Faults

GROUP = 1
SEEDS = range(300) if os.environ.get("EPOCHGC_DEEP") == "1" else range(12)


def _setup(seed: int) -> tuple[Config, Faults, bool]:
    r = random.Random(seed ^ 0x0D0E)
    cfg = Config(election_tick=r.choice([3, 5, 10]), heartbeat_tick=1,
                 pre_vote=r.random() < 0.7, check_quorum=r.random() < 0.7,
                 max_inflight=r.choice([1, 4, 64]), max_msg_bytes=r.choice([1, 64, 1 << 20]))
    faults = Faults(drop=r.choice([0.0, 0.1]), duplicate=r.choice([0.0, 0.1]),
                    reorder=r.choice([0.0, 0.3]), max_latency=r.choice([3, 15]),
                    batch=r.choice([0.0, 0.5]), crash_mid_write=0.5)
    return cfg, faults, r.random() < 0.5


def _run(seed: int) -> tuple[Simulator, dict[int, list[tuple[bytes, int]]]]:
    """Proposals at whichever node leads, in bursts, between faults; returns the simulator
    (healed and converged) and, per term, the accepted proposals in call order with their
    index. Refused proposals are checked to have appended nothing."""
    cfg, faults, group_commit = _setup(seed)
    s = Simulator(3, seed=seed, config=cfg, faults=faults, group_commit=group_commit)
    r = random.Random(seed)
    accepted: dict[int, list[tuple[bytes, int]]] = {}
    s.run_until(lambda: s.leader(GROUP) is not None, 20_000)
    for k in range(120):
        op = r.random()
        lead = s.leader(GROUP)
        if op < 0.6 and lead is not None:
            host = s.host(lead)
            for j in range(r.randint(1, 6)):
                data = b"%d-%d-%d" % (seed, k, j)
                # Now and then an expected term that is already gone (must append nothing).
                term = host.term(GROUP) - (1 if r.random() < 0.1 else 0)
                last = host.groups[GROUP].node.log.last_index()
                try:
                    p = s.propose(lead, data, GROUP, expected_term=term)
                except ProposalRefused:
                    assert host.groups[GROUP].node.log.last_index() == last, (
                        f"seed {seed}: a refused proposal appended an entry")
                    continue
                log = host.groups[GROUP].node.log
                assert p.term == term and p.index == last + 1 == log.last_index(), (
                    f"seed {seed}: proposal not appended at once at the log's end: "
                    f"({p.index}, {p.term}) after last {last}")
                accepted.setdefault(p.term, []).append((data, p.index))
                if r.random() < 0.3:
                    s.run(r.randint(1, 3))  # Ready batches and appends between proposals
        elif op < 0.72:  # a crash (the leader's, often: a new term) and a restart
            nid = lead if lead is not None and r.random() < 0.5 else r.choice(s.ids)
            s.crash(nid)
            s.run(r.randint(0, 30))
            s.restart(nid)
        elif op < 0.82:
            s.cut(r.choice(s.ids), r.choice(s.ids))
        elif op < 0.86:
            s.heal()
        elif op < 0.9 and lead is not None:
            with contextlib.suppress(ProposalRefused):
                s.transfer_leadership(lead, r.choice(s.ids), GROUP)
        s.run(r.randint(1, 40))
    s.heal()
    for nid in s.ids:
        s.restart(nid)  # a no-op for a live node
    s.faults = Faults()
    s.run_until(lambda: s.leader(GROUP) is not None, 20_000)
    s.run(3_000)
    return s, accepted


@pytest.mark.parametrize("seed", SEEDS)
def test_accepted_proposals_of_a_term_keep_their_call_order_in_every_log(seed: int) -> None:
    s, accepted = _run(seed)
    assert sum(map(len, accepted.values())) > 20 and len(accepted) > 1, (
        f"the run proposed little: {[(t, len(v)) for t, v in accepted.items()]}")
    for term, props in accepted.items():
        indexes = [i for _, i in props]
        assert indexes == sorted(set(indexes)), (
            f"seed {seed}: term {term}'s proposals got indexes out of call order: {indexes}")
    for nid in s.live():
        log = s.host(nid).groups[GROUP].node.log
        for term, props in accepted.items():
            present = [log.term(i) == term and log.slice(i, i + 1)[0].data == d
                       for d, i in props if i >= log.first_index]
            # Survivors form a prefix of the term's proposals: none after a lost one.
            assert present == sorted(present, reverse=True), (
                f"seed {seed}: node {nid}'s log holds a term-{term} proposal whose earlier "
                f"proposal of the same term is missing: {present}")
