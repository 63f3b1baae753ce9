"""review30: the safety monitor and the in-round watch fail closed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from epochgc.impl.gc.admin import write_admin_state
from epochgc.impl.gc.monitor import check_health
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import RoundWatch
from epochgc.impl.store.local import LocalStore

from tests.gc.helpers import HOUR, NOW, write_health, write_partitions

MAX_AGE = 300.0


@pytest.mark.xfail(strict=True, reason="review30: reports dated an hour after the GC clock "
                   "(writer and store agree: the GC host's clock is behind) read as healthy, "
                   "age -3600 s: a dead node stays 'fresh' for max age + skew")
def test_reports_from_the_future_are_not_healthy(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store", create=True)
    write_partitions(store, 10**6, ["t/0"])
    # written_at and the file's mtime both an hour ahead of the clock the round uses
    write_health(store, "n1", NOW + HOUR, [("t/0", 100)])
    write_health(store, "n2", NOW + HOUR, [("t/0", 90)])
    verdict = check_health(store, NOW, MAX_AGE)
    assert not verdict.healthy, (
        f"{verdict.as_dict()}: reports 3600 s in the future judged healthy")


@pytest.mark.xfail(strict=True, reason="review30: the watch's first look comes one full "
                   "interval after it starts; a pause written after the round's start check "
                   "(while Spark starts, the lease is taken) is not seen while the tasks begin "
                   "deleting")
def test_watch_looks_when_it_starts(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store", create=True)
    write_partitions(store, 10**6, ["t/0"])
    write_health(store, "n1", NOW - 10, [("t/0", 100)])
    # Paused after the round's own check in `_round`, before the watch starts.
    write_admin_state(store, True, "incident", NOW)
    stop = RoundStop()
    watch = RoundWatch(lambda: LocalStore(store.root), stop, lambda: NOW, MAX_AGE, 3600.0,
                       lambda _v: None)
    watch.start()  # `_streaming_round`: the stage (tasks deleting) starts right after this
    watch.close()  # a small round's stage can end within the interval
    assert stop.requested, "the watch never looked at the pause state"


def _dead_node_store(tmp_path: Path) -> LocalStore:
    """n2 last reported in 1970: the cluster's health is bad at any sane age limit."""
    store = LocalStore(tmp_path / "store", create=True)
    write_partitions(store, 10**6, ["t/0"])
    write_health(store, "n1", NOW - 10, [("t/0", 100)])
    write_health(store, "n2", 1000.0, [("t/0", 97)])
    assert check_health(store, NOW, MAX_AGE).state.value == "bad"
    return store


@pytest.mark.xfail(strict=True, reason="review30: a NaN max report age makes every report "
                   "fresh (age > NaN is false): a node dead since 1970 is judged healthy")
def test_nan_max_report_age_is_never_healthy(tmp_path: Path) -> None:
    store = _dead_node_store(tmp_path)
    verdict = check_health(store, NOW, float("nan"))
    assert not verdict.healthy, verdict.as_dict()


@pytest.mark.xfail(strict=True, reason="review30: a NaN clock reading makes every report age "
                   "NaN, never above the limit: judged healthy")
def test_nan_clock_is_never_healthy(tmp_path: Path) -> None:
    store = _dead_node_store(tmp_path)
    verdict = check_health(store, float("nan"), MAX_AGE)
    assert not verdict.healthy, verdict.as_dict()


@pytest.mark.xfail(strict=True, reason="review30: GcOptions.validate accepts max_report_age_s "
                   "NaN (NaN <= 0 is false): the API's rounds then see every report as fresh")
def test_gc_options_refuse_nan_max_report_age() -> None:
    from epochgc.impl.gc.errors import GcError
    from epochgc.impl.gc.job import GcOptions

    with pytest.raises(GcError):
        GcOptions(max_report_age_s=float("nan")).validate()


@pytest.mark.xfail(strict=True, reason="review30: gc-admin show --max-report-age nan (or inf) "
                   "is accepted (click FloatRange passes NaN; `epochgc gc` refuses both) and "
                   "prints 'health: healthy' for a node dead since 1970")
@pytest.mark.parametrize("max_age", ["nan", "inf"])
def test_show_refuses_non_finite_max_report_age(tmp_path: Path, max_age: str) -> None:
    from click.testing import CliRunner
    from epochgc.impl.cli import main

    store = _dead_node_store(tmp_path)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(store.root), "--json",
                                  "--max-report-age", max_age])
    assert r.exit_code != 0 or json.loads(r.output)["health"]["state"] != "healthy", r.output


@pytest.mark.xfail(strict=True, reason="review30: GcOptions.validate accepts watch_interval_s "
                   "inf/1e300; Event.wait then raises OverflowError in the watch thread, which "
                   "dies: the round runs unwatched")
def test_gc_options_refuse_a_watch_interval_the_watch_cannot_wait() -> None:
    from epochgc.impl.gc.errors import GcError
    from epochgc.impl.gc.job import GcOptions

    with pytest.raises(GcError):
        GcOptions(watch_interval_s=float("inf")).validate()
