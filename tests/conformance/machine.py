"""The Hypothesis state machine: rules are operations and faults on `Harness`, invariants are
its checks. Profiles (`ci`, `deep`, `mutants`) are selected with EPOCHGC_CONFORMANCE_PROFILE.
"""

from __future__ import annotations

import atexit
import os
import time
from typing import Any

from hypothesis import HealthCheck, Phase, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.conformance import shapes
from tests.conformance.barrier import run_barrier
from tests.conformance.harness import ALL_PARTITIONS, NODES, STATS, Harness
from tests.conformance.liveness import check_liveness
from tests.conformance.rulechoice import SwarmRuleStrategy, simplest_program
from tests.conformance.shapes import TOPICS

_HC = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
settings.register_profile(
    # 200 (was 500: 163 s of a CI that must stay under 30 min): the size that kills every
    # seeded bug of tests/conformance/mutants.py; `tox -e deep` runs 3,000 x 200.
    "conformance-ci", max_examples=200, stateful_step_count=50, deadline=None,
    derandomize=True, suppress_health_check=_HC, print_blob=True,
)
settings.register_profile(
    "conformance-deep", max_examples=3000, stateful_step_count=200, deadline=None,
    derandomize=False, suppress_health_check=_HC, print_blob=True,
)
settings.register_profile(
    # Sized so that every seeded bug of tests/conformance/mutants.py is killed (60 x 40 let
    # a follower accepting a mismatched previous term through); killed runs stop early.
    "conformance-mutants", max_examples=200, stateful_step_count=50, deadline=None,
    derandomize=True, suppress_health_check=_HC, database=None,
    phases=[Phase.explicit, Phase.generate],  # a kill needs a failure, not a shrunk one
)
PROFILE = os.environ.get("EPOCHGC_CONFORMANCE_PROFILE", "ci")
# Spark rounds per test session (the Spark rule is rare; its start-up is seconds).
SPARK_BUDGET = {"ci": 3, "deep": 40, "mutants": 0}.get(PROFILE, 3)
if os.environ.get("EPOCHGC_CONFORMANCE_SPARK") == "0":
    SPARK_BUDGET = 0

# The share of programs on the disk log (EPOCHGC_CONFORMANCE_DISK overrides; in sixths).
DISK_SHARE = {"ci": 2, "deep": 3, "mutants": 0}.get(PROFILE, 2) / 6
if "EPOCHGC_CONFORMANCE_DISK" in os.environ:
    DISK_SHARE = float(os.environ["EPOCHGC_CONFORMANCE_DISK"])

_spark_started = False


def shared_spark() -> Any:
    """The process's one local SparkSession (`tests/spark_shared.py`: tests/gc uses the same
    one), started on first use and again if it was stopped."""
    global _spark_started
    from tests import spark_shared

    t = time.monotonic()
    live = spark_shared.is_live(spark_shared._session)
    spark = spark_shared.live_session()
    if not live:
        STATS["spark.startup_ms"] += int((time.monotonic() - t) * 1000)
    if not _spark_started:
        _spark_started = True
        atexit.register(_stop_spark)
    return spark


def _stop_spark() -> None:
    from tests import spark_shared

    spark_shared.stop()


nodes = st.sampled_from(NODES)
partitions = st.sampled_from(ALL_PARTITIONS)
part_sets = st.lists(partitions, min_size=1, max_size=3, unique=True)


class ConformanceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h: Harness | None = None
        self._rules_strategy = SwarmRuleStrategy(self)  # the same swarm, fewer draws

    # DISK_SHARE of the programs run every broker group on the real disk log (DiskStorage,
    # power-loss crashes): the acknowledged-record read-back then covers recovery.
    @initialize(seed=st.integers(0, 2**16), disk=st.integers(0, 5))
    def boot(self, seed: int, disk: int) -> None:
        assume(not simplest_program())  # the same no-op program every run: not a program
        STATS["examples"] += 1
        self.h = Harness(seed, spark=shared_spark if SPARK_BUDGET else None,
                         disk=disk < DISK_SHARE * 6)

    @property
    def H(self) -> Harness:
        assert self.h is not None
        return self.h

    def teardown(self) -> None:
        if self.h is not None:
            try:
                if self.h.disk:
                    # Every crash of a disk program ends in a recovery from its disk.
                    for nid in NODES:
                        self.h.restart(nid)
                self.h.settle()
                self.h.check_step()
                check_liveness(self.h)  # issue 31: once the faults stop, all finishes
                self.h.check_step()
                self.h.check_readback()
            finally:
                self.h.close()

    def _count(self, name: str) -> None:
        STATS[f"rule.{name}"] += 1

    def _quorum_ok(self) -> bool:
        return len(self.H.c.brokers) == len(NODES) and not self.H.c.sim.cuts

    # ---- produce ---------------------------------------------------------------------------

    @rule(parts=part_sets, n=st.integers(1, 3), via=nodes, wait=st.booleans())
    def produce(self, parts: list[str], n: int, via: int, wait: bool) -> None:
        self._count("produce")
        self.H.produce(parts, n, via, None, wait)

    @rule(parts=part_sets, back=st.integers(0, 4), wait=st.booleans())
    def produce_at_epoch(self, parts: list[str], back: int, wait: bool) -> None:
        self._count("produce_at_epoch")
        self.H.produce_below(parts, back, wait)

    @rule(p=partitions, ahead=st.booleans())
    def replicate_fails_after_fence(self, p: str, ahead: bool) -> None:
        self._count("replicate_fails_after_fence")
        self.H.phantom(p, ahead)

    @rule(p=partitions, back=st.integers(0, 4))
    def slow_write_overtaken(self, p: str, back: int) -> None:
        self._count("slow_write_overtaken")
        self.H.slow_write_overtaken(p, back)

    @rule(steps=st.sampled_from([20, 100, 400]))
    def run(self, steps: int) -> None:
        self._count("run")
        self.H.run(steps)

    # ---- controller ------------------------------------------------------------------------

    @rule(times=st.integers(1, 3))
    def mint(self, times: int) -> None:
        self._count("mint")
        for _ in range(times):
            self.H.mint()

    @precondition(lambda self: self.h is not None
                  and len(self.h.created()) < len(ALL_PARTITIONS))
    @rule()
    def create_partition(self) -> None:
        self._count("create_partition")
        self.H.create_partition()

    @rule(nid=nodes, back=st.integers(0, 3))
    def lag_cache(self, nid: int, back: int) -> None:
        self._count("lag_cache")
        self.H.lag_cache(nid, back)

    @rule(nid=nodes)
    def refresh_cache(self, nid: int) -> None:
        self._count("refresh_cache")
        self.H.refresh_cache(nid)

    # ---- faults ----------------------------------------------------------------------------

    @precondition(lambda self: self.h is not None and self._quorum_ok())
    @rule(nid=nodes)
    def crash(self, nid: int) -> None:
        self._count("crash")
        self.H.crash(nid)

    @precondition(lambda self: self.h is not None and self.h.disk and self._quorum_ok())
    @rule(nid=nodes, mid_write=st.booleans())
    def power_loss_and_recover(self, nid: int, mid_write: bool) -> None:
        """Disk programs: a power loss (between a write and its fsync, or not) and at once
        the recovery from disk, so every disk program exercises recovery often."""
        self._count("power_loss_and_recover")
        self.H.crash(nid, mid_write)
        self.H.restart(nid)

    @rule(nid=nodes)
    def restart(self, nid: int) -> None:
        self._count("restart")
        self.H.restart(nid)

    @precondition(lambda self: self.h is not None and self._quorum_ok())
    @rule(a=nodes, b=nodes)
    def cut(self, a: int, b: int) -> None:
        self._count("cut")
        self.H.cut(a, b)

    @precondition(lambda self: self.h is not None and self._quorum_ok())
    @rule(nid=nodes)
    def isolate(self, nid: int) -> None:
        self._count("isolate")
        self.H.isolate(nid)

    @rule()
    def heal(self) -> None:
        self._count("heal")
        self.H.heal()

    @rule(drop=st.sampled_from([0.0, 0.05, 0.2]), dup=st.sampled_from([0.0, 0.1, 0.3]),
          reorder=st.sampled_from([0.0, 0.2, 0.5]), delay=st.integers(0, 20))
    def network_faults(self, drop: float, dup: float, reorder: float, delay: int) -> None:
        self._count("network_faults")
        self.H.net_faults(drop, dup, reorder, delay)

    @rule()
    def calm_network(self) -> None:
        self._count("calm_network")
        self.H.calm()

    @rule(p=partitions, to=nodes)
    def transfer_leadership(self, p: str, to: int) -> None:
        self._count("transfer_leadership")
        self.H.transfer(p, to)

    @rule(prefix=st.sampled_from(["level_zero/", "level_one/", "_cluster/"]))
    def store_put_fails(self, prefix: str) -> None:
        self._count("store_put_fails")
        self.H.store_fault(prefix)

    # ---- services --------------------------------------------------------------------------

    @rule(p=partitions)
    def reconcile(self, p: str) -> None:
        self._count("reconcile")
        self.H.reconcile(p)

    @rule(p=partitions)
    def housekeep(self, p: str) -> None:
        self._count("housekeep")
        self.H.housekeep(p)

    # issue 30: the epoch barrier (tests/conformance/barrier.py)
    @rule(rounds=st.booleans())
    def epoch_barrier(self, rounds: bool) -> None:
        self._count("epoch_barrier")
        run_barrier(self.H, rounds)

    @rule(which=st.lists(nodes, min_size=1, max_size=3, unique=True), stale=st.booleans())
    def publish_health(self, which: list[int], stale: bool) -> None:
        self._count("publish_health")
        self.H.publish_health(which, stale)

    @rule()
    def publish_partitions(self) -> None:
        self._count("publish_partitions")
        self.H.publish_partitions()

    @rule()
    def let_time_pass(self) -> None:
        """One second of logical time (elections, cache expiry, in-flight work)."""
        self._count("let_time_pass")
        self.H.c.run_for(1.0)

    @rule(times=st.integers(1, 3), publish_table=st.booleans())
    def service_round(self, times: int, publish_table: bool) -> None:
        self._count("service_round")
        for _ in range(times):
            self.H.service_round(publish_table)

    @rule(grace=st.sampled_from([0.0, 0.0, 30.0]), lower=st.booleans())
    def gc(self, grace: float, lower: bool) -> None:
        """The PySpark job's task functions in process; `lower`: reports republished lower
        after the driver's M and before the tasks' re-read."""
        self._count("gc")
        self.H.gc(grace, lower)

    @rule()
    def gc_reports_lowered(self) -> None:
        """A service pass (reconcile, housekeep, publish) so there is garbage, then a GC
        round whose reports are republished lower after its M, before its re-read."""
        self._count("gc_reports_lowered")
        self.H.service_round(collect=False)
        self.H.gc(0.0, True)

    @rule()
    def gc_partition_created_mid_round(self) -> None:
        """A service pass so there is garbage, then a GC round during which a partition is
        created (after its M, before its re-read; no report yet): the round is blocked."""
        self._count("gc_partition_created_mid_round")
        self.H.service_round(collect=False)
        self.H.gc(0.0, create_between=True)

    @rule()
    def sim_gc(self) -> None:
        self._count("sim_gc")
        self.H.sim_gc()

    @rule()
    def young_and_old_at_m(self) -> None:
        self._count("young_and_old_at_m")
        self.H.young_and_old_at_m()

    @rule(p=partitions, nid=nodes)
    def restart_mid_window(self, p: str, nid: int) -> None:
        self._count("restart_mid_window")
        self.H.restart_mid_window(p, nid)

    @rule(p=partitions)
    def apply_rejects_held_write(self, p: str) -> None:
        self._count("apply_rejects_held_write")
        self.H.apply_rejects_held_write(p)

    @precondition(lambda self: self.h is not None
                  and len(self.h.created()) < len(ALL_PARTITIONS))
    @rule()
    def create_and_produce(self) -> None:
        self._count("create_and_produce")
        self.H.create_and_produce()

    @rule(p=partitions)
    def reelected_between_fence_and_propose(self, p: str) -> None:
        self._count("reelected_between_fence_and_propose")
        self.H.reelected_between_fence_and_propose(p)

    @rule(go=st.integers(0, 3))
    def spark_gc(self, go: int) -> None:
        # Rare: one draw in four, and at most SPARK_BUDGET rounds per test session (a budget,
        # not a precondition: a precondition on global state makes Hypothesis's replay flaky).
        if go != 0 or STATS["gc.spark_rounds"] >= SPARK_BUDGET:
            return
        self._count("spark_gc")
        self.H.service_round(collect=False)  # so the Spark job has something to collect
        self.H.spark_gc()
        if STATS["gc.spark_rounds"] >= SPARK_BUDGET:
            _stop_spark()  # the budget is spent: the JVM's idle threads need not run on

    @rule(nid=nodes, p=st.none() | partitions)
    def compact(self, nid: int, p: str | None) -> None:
        self._count("compact")
        self.H.compact(nid, p)

    @rule()
    def settle(self) -> None:
        self._count("settle")
        self.H.settle()

    # ---- partition deletion and re-creation (issue 13) -------------------------------------

    @rule(p=partitions)
    def delete_partition(self, p: str) -> None:
        self._count("delete_partition")
        self.H.delete_partition(p)

    @rule(p=partitions, other=partitions)
    def delete_while_writing(self, p: str, other: str) -> None:
        self._count("delete_while_writing")
        self.H.delete_while_writing(p, other)

    @rule(p=partitions)
    def delete_on_stale_reports(self, p: str) -> None:
        self._count("delete_on_stale_reports")
        self.H.delete_on_stale_reports(p)

    @rule(p=partitions, to=nodes)
    def delete_across_leader_change(self, p: str, to: int) -> None:
        self._count("delete_across_leader_change")
        self.H.delete_across_leader_change(p, to)

    @rule(p=partitions)
    def recreate_with_old_write(self, p: str) -> None:
        self._count("recreate_with_old_write")
        self.H.recreate_with_old_write(p)

    # ---- issue 31's shapes (tests/conformance/shapes.py) ------------------------------------

    @rule(topic=st.sampled_from(TOPICS), n=st.integers(1, 4))
    def create_topic(self, topic: str, n: int) -> None:
        self._count("create_topic")
        shapes.create_topic(self.H, topic, n)

    @rule(topic=st.sampled_from(TOPICS))
    def delete_topic(self, topic: str) -> None:
        self._count("delete_topic")
        shapes.delete_topic(self.H, topic)

    @rule(p=partitions)
    def duplicate_create(self, p: str) -> None:
        self._count("duplicate_create")
        shapes.duplicate_create(self.H, p)

    @rule(p=partitions)
    def retry_across_recreate(self, p: str) -> None:
        self._count("retry_across_recreate")
        shapes.retry_across_recreate(self.H, p)

    @rule(p=partitions, reelect=st.booleans())
    def held_write_with_queue(self, p: str, reelect: bool) -> None:
        self._count("held_write_with_queue")
        shapes.held_write_with_queue(self.H, p, reelect)

    @precondition(lambda self: self.h is not None and self._quorum_ok())
    @rule(to=nodes, crash=st.booleans())
    def publish_across_controller_handover(self, to: int, crash: bool) -> None:
        self._count("publish_across_controller_handover")
        shapes.publish_across_controller_handover(self.H, to, crash)

    @rule()
    def gc_reread_fails(self) -> None:
        """A service pass so there is garbage, then a GC round whose tasks' re-read of the
        reports fails: nothing may be deleted."""
        self._count("gc_reread_fails")
        self.H.service_round(collect=False)
        self.H.gc(0.0, fail_reread=True)

    # ---- checks ----------------------------------------------------------------------------

    @invariant()
    def conforms(self) -> None:
        if self.h is not None:
            self.h.check_step()


def profile_settings() -> settings:
    return settings.get_profile(f"conformance-{PROFILE}")
