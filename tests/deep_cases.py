"""Cases the CI suite leaves to a tox environment: CI (the README's test command) must stay
well under 30 minutes on a 2-core machine. Each is a further case of something CI keeps
(the same code on a second S3 server, a second retry mode, a second signal of the same
path); its tox environment sets the variable and runs it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Deep:
    pattern: str  # a regular expression searched in the test's node id
    var: str
    value: str
    env: str  # the tox environment that sets var=value and runs the case


DEEP = (
    # The S3 server behind the store is SeaweedFS: CI runs the same cases on moto.
    Deep(r"^tests/gc/test_(s3_scale|s3_versioned|s3_recheck|rev38o)\.py::.*\[seaweedfs",
         "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # A store gone mid-round, said once per STOP write (newuser12 P15): a Spark round and
    # botocore's retries of each driver request (~4 min); CI keeps the unit pins of its
    # parts (test_s3_driver_bound.py's waiting reads).
    Deep(r"^tests/gc/test_store_gone_midround\.py::", "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # A store gone silent mid-round (newuser13 Q6 without a signal): a Spark round, the
    # monitor's looks and the stage's grace (~2 min); CI keeps test_monitor_stop_bounds.py.
    Deep(r"^tests/gc/test_store_silent_midround\.py::", "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # A task process SIGSTOPped at its connect and continued past its send deadline
    # (review rev38z13 finding 1): a child process importing boto3 and a 1 s window (~4 s);
    # CI keeps the in-process pin (test_connectcheck.py, the clock moved at the connect).
    Deep(r"^tests/store/test_rev38z13\.py::test_a_frozen_task_sends_no_delete",
         "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # A conditional DeleteObject retried into "not there" (review rev38z3 finding 3): CI
    # keeps the applied-then-500 case on moto; SeaweedFS's 412 path and the refused first
    # attempt's contrast cost 2.7-4.8 s each (botocore's backoff before its retry).
    Deep(r"^tests/store/test_rev38z3\.py::test_a_conditional_delete_retried_into_not_there_"
         r"says_gone_only_after_an_unsure_attempt\[(seaweedfs-|moto-slow-down)",
         "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # gc-admin pause and start at once (newuser16 S7): CI keeps the race on a local store
    # and moto, the seed on a local store, and the commands in-process on a local store;
    # the commands as processes behind the proxy cost ~6 s per server.
    Deep(r"^tests/gc/test_admin_race\.py::(.*\[seaweedfs\]"
         r"|test_seed_writes_by_name_lose_the_pause\[moto\]"
         r"|test_gc_admin_pause_and_start_at_once_on_s3\[moto\])$",
         "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # `demo` when Spark cannot run (newuser16 S11), the tester's commands, a whole demo
    # each (10-20 s): CI keeps DemoGc's choice, fallback and refusal (under a second).
    Deep(r"^tests/impl/test_demo_engine\.py::test_demo_", "EPOCHGC_DEMO_ENGINES", "1",
         "demo-engines"),
    # A `--trace` that cannot grow on a real cluster (newuser18 U7, ~12 s): CI keeps the
    # writer at the size limit (a child process) and the simulated cluster's trace on
    # /dev/full (the apply and the fence never fail with it).
    Deep(r"^tests/impl/test_trace_full\.py::test_a_cluster_whose_trace_cannot_grow_",
         "EPOCHGC_TRACE_FULL", "1", "tracefull"),
    # chaos with its store gone mid-run (newuser16 S5), a whole run (~15-40 s): CI keeps
    # the refusals of a bad store before any node starts.
    Deep(r"^tests/chaos/test_chaos_bad_store\.py::test_a_store_gone_mid_run_",
         "EPOCHGC_S3_FAULTS", "deep", "s3faults"),
    # A Spark round crashed part-way converges (issue 29): CI keeps the kill -9 case.
    Deep(r"^tests/gc/test_job\.py::test_interrupted_round_converges$",
         "EPOCHGC_KILL9_ALL", "1", "kill9"),
    # Generated workloads: CI keeps every named workload at every crash state.
    Deep(r"^tests/raft/test_crash_states\.py::test_generated_workloads_recover_the_ground_truth$",
         "EPOCHGC_DEEP", "1", "crashstates"),
    # A Spark round signalled: CI keeps SIGINT and SIGTERM mid-round; SIGHUP takes SIGTERM's
    # path, and the dry run's and the JVM's cases are the full matrix's.
    Deep(r"^tests/impl/test_signal_matrix\.py::(test_an_interrupted_command_stops_cleanly"
         r"\[gc-(work-SIGHUP-group|dry-run-listing-SIGTERM-process)\]"
         r"|test_a_dry_run_cancelled_on_a_signal_shows_no_jvm_output"
         r"|test_a_group_sigterm_reaches_the_command_not_its_jvm)$",
         "EPOCHGC_SIGNALS", "full", "signals"),
    # A real spark-submit round stopped by a signal or a SIGKILL (newuser13 Q11), ~10-30 s
    # each: CI keeps the count of a signal's two copies (JVM and driver), without Spark.
    Deep(r"^tests/gc/test_submit_signals\.py::test_spark_submit_", "EPOCHGC_SIGNALS", "full",
         "signals"),
    # A topic create and delete cut by a real `cluster stop` once sent (newuser17 T2), a
    # cluster stopped and restarted twice (~30 s): CI keeps the connection lost once sent
    # (test_frozen_node.py, on its shared cluster).
    Deep(r"^tests/impl/test_topic_cut_by_stop\.py::", "EPOCHGC_SIGNALS", "full", "signals"),
    # A standalone master without spark-submit: CI keeps spark-submit's.
    Deep(r"^tests/gc/test_standalone\.py::test_master_url_without_spark_submit_ships_the_code$",
         "EPOCHGC_SPARK_STANDALONE", "1", "signals"),
    # The bench harness's concurrent mode: CI keeps the alternating one.
    Deep(r"^tests/benchmarks/test_bench_harness\.py::test_quick_run_against_the_default_baseline"
         r"\[concurrent\]$", "EPOCHGC_BENCH_MODES", "all", "bench"),
)


def mark_deep(items: list[pytest.Item]) -> None:
    """Skip each case of `DEEP` unless its variable is set, naming the tox environment."""
    for item in items:
        for d in DEEP:
            if os.environ.get(d.var) != d.value and re.search(d.pattern, item.nodeid):
                item.add_marker(pytest.mark.skip(
                    reason=f"tox -e {d.env} runs it ({d.var}={d.value}); not in CI, for time"))
