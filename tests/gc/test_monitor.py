"""The GC safety monitor and the pause state (issue 30): no round deletes while the cluster
is not known healthy or GC is paused, failing closed. No Spark: the driver's gate and the
model-engine round run without it; `test_admin_cli.py` runs the real job."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.impl.gc.admin import ADMIN_KEY, read_admin_state, write_admin_state
from epochgc.impl.gc.monitor import Health, assess, check_health
from epochgc.impl.gc.reports import HEALTH_PREFIX, read_cluster_view
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster, write_health, write_partitions

MAX_AGE = 300.0


def _verdict(store: LocalStore):  # type: ignore[no-untyped-def]
    return assess(read_cluster_view(store, NOW, MAX_AGE))


def test_every_node_fresh_and_every_partition_reported_is_healthy(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    v = _verdict(store)
    assert v.state is Health.HEALTHY and v.healthy and v.reasons == ()


def test_a_node_that_stopped_reporting_is_bad_though_m_exists(tmp_path: Path) -> None:
    """Old code: n2's stale report counted as absent and n1 alone gave M (the round ran)."""
    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    write_health(store, "n2", NOW - 2 * MAX_AGE, [("t/0", 40)])
    view = read_cluster_view(store, NOW, MAX_AGE)
    assert view.gc_epoch().M == 50  # the model alone would collect
    v = assess(view)
    assert v.state is Health.BAD and not v.healthy
    assert "n2 stopped reporting" in v.why()


def test_no_report_at_all_is_unknown(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 10, [])
    v = _verdict(store)
    assert v.state is Health.UNKNOWN and "no node has published" in v.why()


def test_unreadable_reports_are_unknown_never_an_exception(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    store.put(f"{HEALTH_PREFIX}n3.json", b"{not json")
    v = check_health(store, NOW, MAX_AGE)
    assert v.state is Health.UNKNOWN and "cannot be read" in v.why()


def test_a_partition_without_a_fresh_report_is_bad(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 10**6, ["t/0", "t/1"])
    write_health(store, "n1", NOW - 10, [("t/0", 5)])
    v = _verdict(store)
    assert v.state is Health.BAD and "t/1" in v.why()


def test_pause_state_absent_is_running_and_unreadable_is_paused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert not read_admin_state(store).paused
    write_admin_state(store, True, "maintenance", NOW)
    state = read_admin_state(store)
    assert state.paused and "maintenance" in state.why()
    write_admin_state(store, False, "", NOW)
    assert not read_admin_state(store).paused
    for bad in (b"{", b'{"paused": "no"}', b"[]", b" " * 5000):
        store.put(ADMIN_KEY, bad)
        assert read_admin_state(store).paused, bad  # fail closed


@pytest.mark.parametrize("paused", [False, True])
def test_the_model_engine_round_obeys_pause_and_monitor(tmp_path: Path, paused: bool) -> None:
    """The demo's and chaos's non-Spark engine goes through the same gate."""
    from epochgc.impl.cluster.demo_gc import gated_model_round
    from tests.gc.helpers import put_local

    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    key = "level_zero/data/001/000000000000000010/a"
    put_local(tmp_path, key, age=10.0)
    if paused:
        write_admin_state(store, True, "test", NOW)
    write_health(store, "n2", NOW - 2 * MAX_AGE, [("t/0", 40)])  # n2 stopped reporting
    r = gated_model_round(store, NOW, 0.0, MAX_AGE)
    assert r.M is None and r.deleted == []
    assert r.blocked is not None
    assert ("paused" in r.blocked) if paused else ("n2 stopped reporting" in r.blocked)
    assert store.head(key) is not None


def test_the_gc_metrics_production_names_are_exported() -> None:
    """Issue 30: safety-blocked rounds, paused, the outcome, the minimum partition GC
    epoch, the max deleted epoch and backpressure (none existed before)."""
    from epochgc.impl.gc.metrics import build_registry
    from epochgc.impl.gc.summary import GcSummary

    s = GcSummary(blocked="safety monitor: cluster health bad: n2", safety_blocked=True,
                  min_partition_epoch=40, max_deleted_epoch=None, backpressure_s=1.5)
    reg = build_registry(s)

    def value(name: str, **labels: str) -> float | None:
        return reg.get_sample_value(name, labels)

    assert value("epochgc_gc_round_safety_blocked") == 1
    assert value("epochgc_gc_round_paused") == 0
    assert value("epochgc_gc_round_outcome", outcome="blocked") == 1
    assert value("epochgc_gc_round_outcome", outcome="done") == 0
    assert value("epochgc_gc_min_partition_epoch") == 40
    assert value("epochgc_gc_backpressure_seconds") == 1.5
    paused = build_registry(GcSummary(paused="GC is paused", max_deleted_epoch=7))
    assert paused.get_sample_value("epochgc_gc_round_paused") == 1
    assert paused.get_sample_value("epochgc_gc_max_deleted_epoch") == 7
    assert paused.get_sample_value("epochgc_gc_round_outcome", {"outcome": "paused"}) == 1


def test_the_exit_code_gauge_agrees_with_the_record(tmp_path: Path) -> None:
    """newuser15 (s28b): spark-submit SIGKILLed mid-round exits 137, which its driver, left
    running, cannot see; the record says exit code null (s27a) but the metrics file's
    `epochgc_gc_round_exit_code` said 1, the driver's own. The gauge is the record's exit
    code, NaN where the record says none (as the other gauges say "unknown")."""
    import math

    from prometheus_client.parser import text_string_to_metric_families

    from epochgc.impl.gc.metrics import export_metrics
    from epochgc.impl.gc.record import record_document
    from epochgc.impl.gc.summary import SPARK_STOPPED, GcSummary

    def gauge(s: GcSummary) -> float:
        path = tmp_path / "m.prom"
        export_metrics(s, str(path))
        [value] = [x.value for f in text_string_to_metric_families(path.read_text())
                   for x in f.samples if x.name == "epochgc_gc_round_exit_code"]
        return value

    killed = GcSummary(interrupted=SPARK_STOPPED, exit_unseen=True)
    assert record_document(killed, {})["exit_code"] is None
    assert math.isnan(gauge(killed))
    stopped = GcSummary(interrupted="SIGTERM")  # a signal this process ends by: 143
    assert gauge(stopped) == record_document(stopped, {})["exit_code"] == 143
    assert gauge(GcSummary(error="boom")) == 1


def test_min_partition_epoch_is_the_lowest_m_p(tmp_path: Path) -> None:
    from epochgc.impl.gc.job import min_partition_epoch

    store = LocalStore(tmp_path)
    simple_cluster(store, 50)  # t/0: max(50, 47) = 50; t/1: 55
    assert min_partition_epoch(read_cluster_view(store, NOW, MAX_AGE)) == 50
    write_partitions(store, 10**6, ["t/0", "t/1", "t/2"])  # t/2 unreported
    assert min_partition_epoch(read_cluster_view(store, NOW, MAX_AGE)) is None


def _no_spark() -> None:
    raise AssertionError("a blocked or paused round must not start Spark")


def test_run_gc_is_blocked_by_the_monitor_before_spark(tmp_path: Path) -> None:
    """The real job's driver: n2 stopped reporting, the model alone gives M=50 (old code
    ran the round); now blocked, exit 2, the verdict in the record."""
    from epochgc.impl.gc.job import run_gc
    from epochgc.impl.gc.options import GcOptions
    from epochgc.impl.gc.record import ROUNDS_PREFIX
    from epochgc.impl.store.url import StoreSpec

    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    write_health(store, "n2", NOW - 2 * MAX_AGE, [("t/0", 40)])
    s = run_gc(_no_spark, StoreSpec("file", str(tmp_path)),  # type: ignore[arg-type]
               GcOptions(max_report_age_s=MAX_AGE), clock=lambda: NOW)
    assert s.exit_code == 2 and s.M is None and s.safety_blocked
    assert (s.blocked or "").startswith("safety monitor: cluster health bad")
    [rec] = [o.key for o in store.list_all(ROUNDS_PREFIX)]
    doc = __import__("json").loads(store.get(rec))
    assert doc["health"]["state"] == "bad" and doc["safety_blocked"] is True


def test_the_watch_stops_a_round_on_pause_or_bad_health(tmp_path: Path) -> None:
    from epochgc.impl.gc.stop import RoundStop
    from epochgc.impl.gc.watch import PAUSED, UNHEALTHY, RoundWatch

    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    seen: list[object] = []
    watch = RoundWatch(lambda: LocalStore(tmp_path), RoundStop(), lambda: NOW, MAX_AGE, 1.0,
                       seen.append)
    assert watch.poll_once() is None and seen == []
    write_health(store, "n2", NOW - 2 * MAX_AGE, [("t/0", 40)])
    assert watch.poll_once() == UNHEALTHY and len(seen) == 1
    write_admin_state(store, True, "x", NOW)
    assert watch.poll_once() == PAUSED


def test_the_watch_says_its_stop_once(tmp_path: Path) -> None:
    """newuser15 S7 (q6dl): on a store gone silent the watch's look failed ("the watch
    could not look ...; stopping"), and 9 s later a HEAD of STOP sent before that failed
    too: "the watch could not HEAD ...; stopping" again, the round long stopping. The
    first verdict, which stopped the round, is said and recorded; a later one is not."""
    from epochgc.impl.gc.monitor import HealthVerdict
    from epochgc.impl.gc.stop import RoundStop
    from epochgc.impl.gc.watch import UNHEALTHY, RoundWatch
    from epochgc.impl.store.base import ObjectInfo, StoreError
    from tests.gc.helpers import _Delegating

    class Silent(_Delegating):
        def head(self, key: str) -> ObjectInfo | None:
            raise StoreError(f"head {key!r}: no answer within 10 s (3 attempts)")

    def silent() -> Silent:
        return Silent(LocalStore(tmp_path))

    verdicts: list[HealthVerdict] = []
    stop = RoundStop()
    watch = RoundWatch(silent, stop, lambda: NOW, MAX_AGE, 60.0, verdicts.append,
                       stop_key="_cluster/gc/journal/r/STOP")
    assert watch._look()  # the look's HEAD fails: health unknown, the round stops
    assert stop.reason == UNHEALTHY and len(verdicts) == 1
    watch._head_apart(silent(), 0.0)  # the STOP thread's HEAD, in flight, fails after
    assert len(verdicts) == 1, [v.why() for v in verdicts]  # old code: two
