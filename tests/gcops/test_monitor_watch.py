"""the safety monitor and the in-round watch fail closed."""

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


def test_reports_from_the_future_are_not_healthy(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store", create=True)
    write_partitions(store, 10**6, ["t/0"])
    # written_at and the file's mtime both an hour ahead of the clock the round uses
    write_health(store, "n1", NOW + HOUR, [("t/0", 100)])
    write_health(store, "n2", NOW + HOUR, [("t/0", 90)])
    verdict = check_health(store, NOW, MAX_AGE)
    assert not verdict.healthy, (
        f"{verdict.as_dict()}: reports 3600 s in the future judged healthy")


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


def test_nan_max_report_age_is_never_healthy(tmp_path: Path) -> None:
    store = _dead_node_store(tmp_path)
    verdict = check_health(store, NOW, float("nan"))
    assert not verdict.healthy, verdict.as_dict()


def test_nan_clock_is_never_healthy(tmp_path: Path) -> None:
    store = _dead_node_store(tmp_path)
    verdict = check_health(store, float("nan"), MAX_AGE)
    assert not verdict.healthy, verdict.as_dict()


def test_gc_options_refuse_nan_max_report_age() -> None:
    from epochgc.impl.gc.errors import GcError
    from epochgc.impl.gc.options import GcOptions

    with pytest.raises(GcError):
        GcOptions(max_report_age_s=float("nan")).validate()


@pytest.mark.parametrize("max_age", ["nan", "inf"])
def test_show_refuses_non_finite_max_report_age(tmp_path: Path, max_age: str) -> None:
    from click.testing import CliRunner

    from epochgc.impl.cli import main

    store = _dead_node_store(tmp_path)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(store.root), "--json",
                                  "--max-report-age", max_age])
    assert r.exit_code != 0 or json.loads(r.output)["health"]["state"] != "healthy", r.output


def test_gc_options_refuse_a_watch_interval_the_watch_cannot_wait() -> None:
    from epochgc.impl.gc.errors import GcError
    from epochgc.impl.gc.options import GcOptions

    with pytest.raises(GcError):
        GcOptions(watch_interval_s=float("inf")).validate()


def test_a_look_that_raises_stops_the_round_as_unknown_health(tmp_path: Path) -> None:
    """Whatever a look raises, the watch stops the round (fail closed) and says why; it
    used to die in its thread and leave the round unwatched."""
    seen = []

    def broken() -> LocalStore:
        raise RecursionError("maximum recursion depth exceeded")

    stop = RoundStop()
    watch = RoundWatch(broken, stop, lambda: NOW, MAX_AGE, 3600.0, seen.append)
    watch.start()
    watch.close()
    assert stop.reason == "unhealthy"
    assert seen and "RecursionError" in seen[0].why(), seen
