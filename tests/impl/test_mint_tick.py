"""The controller's mint tick creates the configured initial partitions once, never again
after an operator deleted one (issue 31: identity across a partition's lifecycle)."""

from __future__ import annotations

from epochgc.impl.sim.cluster import SimCluster


def test_a_deleted_initial_partition_stays_deleted_across_mint_ticks() -> None:
    c = SimCluster(seed=3, partitions=("t/0", "t/1"), services=True)
    try:
        c.bootstrap()
        c.run_for(4.0)  # at least one mint tick after the initial creates
        ctl = c.most_advanced_controller()
        assert ctl is not None and {"t/0", "t/1"} <= set(ctl.partitions)
        c.delete_partition("t/0")
        epoch = ctl.epoch
        c.run_for(10.0)  # three more mint ticks
        ctl = c.most_advanced_controller()
        assert ctl is not None and ctl.epoch > epoch, "no mint tick ran"
        assert "t/0" not in ctl.partitions, ctl.partitions["t/0"]
    finally:
        c.close()
