"""Hypothesis RuleBasedStateMachine over the simulator: every fault is a rule, and the
simulator checks every Raft invariant after every step. Derandomized with modest example
counts for CI; EPOCHGC_DEEP=1 explores more."""

from __future__ import annotations

import contextlib
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from epochgc.impl.raft.node import ProposalRefused
from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import Faults
from tests.raft.test_sim import converge

DEEP = os.environ.get("EPOCHGC_DEEP") == "1"
NODES = st.integers(min_value=1, max_value=3)


class RaftSimMachine(RuleBasedStateMachine):
    sim: Simulator

    @initialize(seed=st.integers(min_value=0, max_value=2**32), interval=st.sampled_from([0, 7]))
    def start(self, seed: int, interval: int) -> None:
        self.sim = Simulator(3, seed=seed, snapshot_interval=interval)
        self.counter = 0

    @rule(count=st.integers(min_value=1, max_value=4), fenced=st.booleans())
    def propose(self, count: int, fenced: bool) -> None:
        lead = self.sim.leader()
        if lead is None:
            return
        term = self.sim.host(lead).term(1) if fenced else None
        for _ in range(count):
            self.counter += 1
            try:
                self.sim.propose(lead, b"p%d" % self.counter, expected_term=term)
            except ProposalRefused:
                return

    @rule(steps=st.integers(min_value=1, max_value=200))
    def run(self, steps: int) -> None:
        self.sim.run(steps)

    @rule(node=NODES, mid_write=st.booleans())
    def crash(self, node: int, mid_write: bool) -> None:
        self.sim.crash(node, mid_write=mid_write)

    @rule(node=NODES)
    def restart(self, node: int) -> None:
        self.sim.restart(node)

    @rule(a=NODES, b=NODES)
    def cut(self, a: int, b: int) -> None:
        self.sim.cut(a, b)

    @rule()
    def heal(self) -> None:
        self.sim.heal()

    @rule(
        drop=st.sampled_from([0.0, 0.1, 0.3]),
        dup=st.sampled_from([0.0, 0.2]),
        reorder=st.sampled_from([0.0, 0.3]),
    )
    def set_faults(self, drop: float, dup: float, reorder: float) -> None:
        self.sim.faults = Faults(drop=drop, duplicate=dup, reorder=reorder)

    @precondition(lambda self: self.sim.leader() is not None)
    @rule(to=NODES)
    def transfer(self, to: int) -> None:
        lead = self.sim.leader()
        assert lead is not None
        with contextlib.suppress(ProposalRefused):
            self.sim.transfer_leadership(lead, to)

    @invariant()
    def safe(self) -> None:
        self.sim.check()

    def teardown(self) -> None:
        if hasattr(self, "sim"):
            converge(self.sim)


TestRaftSim = RaftSimMachine.TestCase
TestRaftSim.settings = settings(
    max_examples=400 if DEEP else 25,
    stateful_step_count=60 if DEEP else 30,
    derandomize=not DEEP,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
