"""Open findings of the conformance harness: pinned as strict xfails (the failure they show
now), so that a fix, or a change that makes the program stop failing, flips them. Kept out of
test_regressions.py, which the mutation campaign runs against every mutant.

None open. Of the deep run's findings of s5, two were the harness's: an apply-time
rejection after a phantom slide (the explanation; pinned in test_implchecks.py) and an apply
made just before a crash that the shadow never replayed (pinned in test_committed_log.py and
test_regressions.py); one was the cluster's: a new controller leader publishing a stale
partition table (pinned in tests/impl/test_lifecycle_sim.py). Of s8's, seed 170 was the
harness's: apply_rejects_held_write explained the last admitted write, not the one it held
(another write in flight reached the fence first; pinned in test_implchecks.py)."""
