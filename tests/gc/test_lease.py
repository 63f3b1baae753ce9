"""Issue 29 item 8: a lease on the store, so two rounds cannot run at once (they both
claimed the same keys); it expires, and the refusal names its holder."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import all_keys, local_spec
from tests.gc.test_job import GRACE, clock, make_store


def test_a_round_is_refused_while_another_holds_the_lease(tmp_path: Path) -> None:
    root = tmp_path / "store"
    make_store(root)
    before = all_keys(LocalStore(root))
    other = Lease(local_spec(root), "20270115T080000.000Z-otherrnd")
    other.acquire()
    with pytest.raises(GcError, match=r"lease .*round 20270115T080000.000Z-otherrnd on host"):
        run_gc(lambda: pytest.fail("no Spark"), local_spec(root), GcOptions(grace_s=GRACE),
               clock=clock)
    assert all_keys(LocalStore(root)) == before
    other.release()  # marked expired: the next round takes it over
    assert json.loads(LocalStore(root).get(LEASE_KEY))["expires_at"] == 0


def test_an_expired_lease_is_taken_over_and_only_once(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    dead = Lease(local_spec(tmp_path), "dead", duration_s=60, clock=lambda: 1000.0)
    dead.acquire()  # expired long ago by the real clock
    winners: list[str] = []
    barrier = threading.Barrier(4)

    def take(i: int) -> None:
        barrier.wait()
        try:
            Lease(local_spec(tmp_path), f"r{i}").acquire()
            winners.append(f"r{i}")
        except GcError:
            pass

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert json.loads(store.get(LEASE_KEY))["round"] == winners[0]


def test_put_if_absent_has_one_winner(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert store.put_if_absent("a/k", b"1") and not store.put_if_absent("a/k", b"2")
    assert store.get("a/k") == b"1" and [o.key for o in store.list_all("")] == ["a/k"]


def test_a_directory_at_the_lease_is_named_not_a_descriptor_number(tmp_path: Path) -> None:
    """Issue 41 item 12. Old code: `IsADirectoryError: [Errno 21] Is a directory: 13`
    raised out of the store read (`gc` printed `error: IsADirectoryError: ...: 4`)."""
    store = LocalStore(tmp_path, create=True)
    (tmp_path / LEASE_KEY).mkdir(parents=True)
    with pytest.raises(GcError) as err:
        Lease(lambda: LocalStore(tmp_path), "r1").acquire()
    assert str(err.value).startswith(
        f"{LEASE_KEY} is there but is not a regular object"), err.value
    assert f"'{LEASE_KEY}' in {store.describe()} is not a regular file" in str(err.value)


def test_a_round_whose_lease_was_removed_after_its_last_look_says_so(tmp_path: Path) -> None:
    """newuser5 G3: `gc-admin reset --force --even-if-running` removed a running round's
    lease; the round recorded `done`, exit 0. Removed after the watch's last look (here:
    while Spark started, and the round had nothing to run), the round's record still says
    `lease-lost` (exit 1): it looks once more before its record."""
    from epochgc.impl.gc.admin import reset_gc_state
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = tmp_path / "store"
    make_store(root)

    def reset_while_spark_starts() -> None:
        assert reset_gc_state(LocalStore(root), clock(), force=True,
                              even_if_running=True) == [LEASE_KEY]
        return None  # no session: the round runs no stage

    said: list[str] = []
    s = run_gc(reset_while_spark_starts, local_spec(root), GcOptions(grace_s=GRACE),
               clock=clock, say=said.append)
    assert (s.interrupted, s.exit_code) == ("lease-lost", 1), (s.interrupted, s.exit_code)
    [rec] = [json.loads(LocalStore(root).get(o.key))
             for o in LocalStore(root).list_all(ROUNDS_PREFIX)]
    assert rec["interrupted"] == "lease-lost", rec
    assert any("was removed while the round ran" in line for line in said), said
    assert LocalStore(root).head(LEASE_KEY) is None  # the release never recreates it


@pytest.mark.spark
def test_a_round_that_finished_before_its_lease_was_found_removed_says_its_listing_is_whole(
        spark: Any, tmp_path: Path) -> None:
    """newuser8 I1: a round whose every task had finished (listed, deleted, read back) when
    it found its lease removed recorded `listing_complete: false` and said "the rest are
    listed again next round": there is no rest. It still ends `lease-lost`, exit 1."""
    from epochgc.impl.gc.admin import reset_gc_state
    from epochgc.impl.gc.record import ROUNDS_PREFIX

    root = tmp_path / "store"
    eligible, kept = make_store(root)

    def say(line: str) -> None:
        if line.startswith("gc: listed ") and " deleted (journal " in line:
            # The stage is over, its counts whole: the lease goes now.
            reset_gc_state(LocalStore(root), clock(), force=True, even_if_running=True)

    s = run_gc(spark, local_spec(root), GcOptions(grace_s=GRACE), clock=clock, say=say)
    assert (s.interrupted, s.exit_code) == ("lease-lost", 1), (s.interrupted, s.exit_code)
    assert s.listing_complete and s.deleted == len(eligible), s
    assert {k for k in all_keys(LocalStore(root)) if not k.startswith("_cluster/")} == kept
    [rec] = [json.loads(LocalStore(root).get(o.key))
             for o in LocalStore(root).list_all(ROUNDS_PREFIX)]
    assert rec["interrupted"] == "lease-lost" and rec["listing_complete"] is True, rec
    [line] = s.lines()
    assert "the rest" not in line and "lease-lost" in line, line
