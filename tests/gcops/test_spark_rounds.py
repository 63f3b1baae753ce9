"""real rounds (Spark) against a pause written while the round starts, and the
safety-blocked metric of a round its tasks' re-read blocked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.admin import write_admin_state
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import MAX_WATCH_INTERVAL_S, GcOptions
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, all_keys, put_local, simple_cluster
from tests.gcops.executor_clock import ExecutorClock

pytestmark = pytest.mark.spark

GRACE = 12 * HOUR


def _store(tmp_path: Path) -> tuple[Path, set[str]]:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100, now=NOW)
    keys = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 100)}
    for k in keys:
        put_local(root, k, 2 * GRACE)
    return root, keys


def test_pause_written_while_the_round_starts_stops_it_before_it_deletes(
    tmp_path: Path, spark: Any
) -> None:
    root, keys = _store(tmp_path)

    def session() -> Any:  # `run_gc` calls it after its pause check, before the lease
        write_admin_state(LocalStore(root), True, "incident 42", NOW)
        return spark

    s = run_gc(session, StoreSpec("file", str(root)),
               GcOptions(grace_s=GRACE, watch_interval_s=MAX_WATCH_INTERVAL_S), clock=lambda: NOW)
    gone = keys - all_keys(LocalStore(root))
    assert not gone, (f"paused before the first delete, the round deleted {len(gone)} key(s): "
                      f"outcome {s.outcome}, exit {s.exit_code}, interrupted {s.interrupted}")


def _gauge(reg: Any, name: str) -> float:
    value = reg.get_sample_value(name)
    assert value is not None, name
    return float(value)


def test_a_round_blocked_at_the_re_read_counts_as_safety_blocked(
    tmp_path: Path, spark: Any
) -> None:
    root, keys = _store(tmp_path)
    s = run_gc(spark, StoreSpec("file", str(root)), GcOptions(grace_s=GRACE),
               clock=ExecutorClock())
    assert s.blocked is not None and s.exit_code == 2 and s.deleted == 0, (s.outcome, s.blocked)
    assert keys <= all_keys(LocalStore(root))
    from epochgc.impl.gc.metrics import build_registry  # not in the Spark workers

    reg = build_registry(s)
    assert _gauge(reg, "epochgc_gc_round_blocked") == 1
    assert _gauge(reg, "epochgc_gc_round_safety_blocked") == 1, (
        f"blocked: {s.blocked!r}; safety_blocked={s.safety_blocked}")
