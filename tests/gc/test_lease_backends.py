"""Issue 38 item 3: the GC lease is enforced by the store itself, on a local directory,
moto and SeaweedFS alike. On S3 `head()` gave no ETag, so the takeover of an expired lease
and `gc-admin reset` deleted by name: 4 rounds taking over one expired lease on moto had
1-3 winners per trial, and reset removed a lease taken over since it read it. Renewal and
release read the holder, then wrote unconditionally: a renewal could write over another
round's lease, a late release free it. Each interleaving is made deterministic by a store
that lets round B act at the exact moment before round A's write reaches the store."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

from epochgc.impl.gc.admin import ResetRefused, reset_gc_state
from epochgc.impl.gc.bounds import LOOK_FRESH_S
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.journal import STOP, journal_prefix
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import LEASE_LOST, RoundWatch, go_on
from epochgc.impl.store.base import DeleteResult, ObjectStore, Outcome
from tests.gc.helpers import _Delegating, simple_cluster
from tests.store.backends import Opener

pytestmark = pytest.mark.s3

_EXPIRED = json.dumps({"round": "dead", "host": "h", "pid": 1, "renewed_at": 0,
                       "expires_at": 1000.0}).encode()


def _holder(open_store: Opener) -> str:
    store = open_store()
    try:
        return str(json.loads(store.get(LEASE_KEY))["round"])
    finally:
        store.close()


class _BeforeLeaseWrite(_Delegating):
    """The real store; `meanwhile()` runs once, just before this store's first write or
    delete of the lease (whatever request the code under test uses for it)."""

    def __init__(self, inner: ObjectStore, meanwhile: Callable[[], None]) -> None:
        super().__init__(inner)
        self.meanwhile: Callable[[], None] | None = meanwhile

    def _hook(self, key: str) -> None:
        if key == LEASE_KEY and self.meanwhile is not None:
            run, self.meanwhile = self.meanwhile, None
            run()

    def put(self, key: str, data: bytes) -> None:
        self._hook(key)
        super().put(key, data)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        self._hook(key)
        return super().replace_if_match(key, data, version)

    def delete_if_match(self, key: str, version: str) -> Outcome:
        self._hook(key)
        return super().delete_if_match(key, version)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        for k in keys:
            self._hook(k)
        return super().delete_batch(keys)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        for k, _ in items:
            self._hook(k)
        return self.inner.delete_if_unchanged(items)


def test_four_rounds_taking_over_an_expired_lease_have_one_winner(open_store: Opener) -> None:
    """The found race: every round after the first on an S3 store takes this path (a
    finished round leaves its lease, expired)."""
    winners_per_trial = []
    for trial in range(4):
        open_store().put(LEASE_KEY, _EXPIRED)
        winners: list[str] = []
        barrier = threading.Barrier(4)

        def take(i: int, trial: int = trial, winners: list[str] = winners,
                 barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                Lease(open_store, f"t{trial}-r{i}").acquire()
                winners.append(f"t{trial}-r{i}")
            except GcError as e:  # refused because another round holds it, nothing else
                assert "another GC round holds" in str(e), e

        threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners_per_trial.append(len(winners))
        if len(winners) == 1:
            assert _holder(open_store) == winners[0]
    assert winners_per_trial == [1] * 4, f"winners per trial: {winners_per_trial}"


def test_a_live_lease_refuses_and_an_absent_one_is_created(open_store: Opener) -> None:
    a = Lease(open_store, "round-A")
    a.acquire()
    with pytest.raises(GcError, match=r"lease .*round round-A on host"):
        Lease(open_store, "round-B").acquire()
    a.release()  # marked expired: the next round takes it over
    Lease(open_store, "round-C").acquire()
    assert _holder(open_store) == "round-C"


def test_a_renewal_after_a_clock_step_writes_the_monotonic_expiry(open_store: Opener) -> None:
    """Review rev38z10 finding 6 (s28e): after the holder's wall clock stepped forward, a
    renewal wrote the stepped clock's expiry; the driver killed then (no release) left a
    lease every round read as live for the step's length (11 days for 10^6 s), until
    `gc-admin reset --force`. Now the renewal's times are the last unstepped write's plus
    the time passed on the monotonic clock: a reader on a true clock reads the lease live
    until the duration after it, and once that has passed the next round takes it over,
    no reset needed. (A step back: tests/gc/test_rev38m.py, the renewal keeps the lease
    live to a true reader.)"""
    offset = [0.0]
    held = Lease(open_store, "round-stepping", duration_s=60,
                 clock=lambda: time.time() + offset[0])
    held.acquire()
    offset[0] = 10**6
    assert held._renew() is None and held.stepped is not None
    # killed here: no release. A reader on a true clock:
    doc = json.loads(open_store().get(LEASE_KEY))
    now = time.time()
    assert now < doc["expires_at"] <= now + 60, (doc, now)
    assert abs(doc["renewed_at"] - now) < 5, (doc, now)
    with pytest.raises(GcError, match="round round-stepping "):
        Lease(open_store, "round-next").acquire()  # live: refused
    # past its duration on a true clock: taken over, no reset
    Lease(open_store, "round-next", clock=lambda: time.time() + 61).acquire()
    assert _holder(open_store) == "round-next"


def test_reset_never_removes_a_lease_taken_over_since_it_read_it(open_store: Opener) -> None:
    open_store().put(LEASE_KEY, _EXPIRED)  # a finished round's: reset may remove it
    store = _BeforeLeaseWrite(open_store(), lambda: Lease(open_store, "round-B").acquire())
    try:
        removed: object = reset_gc_state(store, time.time(), force=False)
    except ResetRefused as e:
        assert "changed since it was read" in str(e), e
        removed = "nothing"
    assert store.meanwhile is None  # round B did take the lease over in between
    assert open_store().head(LEASE_KEY) is not None, (
        f"reset removed {removed}: round B's live lease, taken after reset read the "
        "expired one")
    assert _holder(open_store) == "round-B"


def _a_then_b(open_store: Opener) -> tuple[Lease, list[bool]]:
    """Round A holds the lease but has stalled past its expiry (its clock says it wrote it
    at t=1000); its next lease write goes through a store where round B takes the
    (expired) lease over just before A's request arrives."""
    took: list[bool] = []

    def b_takes_over() -> None:
        Lease(open_store, "round-B").acquire()
        took.append(True)

    a = Lease(lambda: _BeforeLeaseWrite(open_store(), b_takes_over), "round-A",
              duration_s=60, clock=lambda: 1000.0)
    a.acquire()  # its own creation went through before the hook: the hook is per store
    return a, took


def test_a_renewal_never_writes_over_another_rounds_lease(open_store: Opener) -> None:
    a, took = _a_then_b(open_store)
    why = a._renew()
    assert took == [True]
    assert _holder(open_store) == "round-B", "round A's renewal wrote over round B's lease"
    assert why is not None and "round round-B" in why, why


def test_a_late_release_never_frees_another_rounds_lease(open_store: Opener) -> None:
    a, took = _a_then_b(open_store)
    a.release()
    assert took == [True]
    store = open_store()
    doc = json.loads(store.get(LEASE_KEY))
    assert doc["round"] == "round-B" and doc["expires_at"] > time.time(), (
        f"round A's late release freed round B's lease: {doc}")


class _KeptOpen(_Delegating):
    """The real store, never closed by its users (the test closes nothing it shares)."""

    def close(self) -> None:
        pass


@pytest.mark.parametrize("how", ["reset", "reset-then-taken"])
def test_a_running_rounds_watch_stops_it_at_its_next_look_once_its_lease_is_gone(
    open_store: Opener, how: str
) -> None:
    """newuser5 G3: `gc-admin reset --force --even-if-running` removed a running round's
    lease; the round deleted on for 14 s without it (a second round could have started
    beside it), then recorded `done`, exit 0. Only a renewal (every 200 s) looked at the
    lease in the store, and the watch HEADs STOP every 30 s. Now the round's watch looks at
    the lease at each look (every 2 s): gone, or another round's, stops the round
    (`lease-lost`, exit 1) and its gate says "no" from then on."""
    kept = _KeptOpen(open_store())  # one S3 client for the test: each new one costs ~1 s
    open_store = lambda: kept  # noqa: E731
    simple_cluster(kept, 100, now=time.time())  # healthy: a look passes on its own
    lease = Lease(open_store, "round-A")
    lease.acquire()
    stop = RoundStop()
    watch = RoundWatch(open_store, stop, time.time, 3600.0, 2.0, lambda _v: None,
                       stop_key=journal_prefix("round-A") + STOP, firm=lease.firm,
                       lease_look=lease.look)
    is_open = go_on(stop, lease.firm, watch, LOOK_FRESH_S)
    assert watch.poll_once() is None and is_open(), "the round's own lease stopped it"
    lease._renew()  # a renewal between two looks is still this round's lease
    assert watch.poll_once() is None and is_open(), "its own renewal stopped the round"
    removed = reset_gc_state(open_store(), time.time(), force=True, even_if_running=True)
    assert removed == [LEASE_KEY]
    if how == "reset-then-taken":
        Lease(open_store, "round-B").acquire()
    why = watch.poll_once()  # the next look (its STOP HEAD is not due for 30 s)
    assert why == LEASE_LOST, (
        f"the look after `reset --force --even-if-running` ({how}) said {why!r}: the round "
        f"goes on deleting without its lease (gate open: {is_open()})")
    assert not is_open(), "the gate still says go after the lease was lost"
    said = "removed" if how == "reset" else "round round-B"
    assert lease.lost is not None and said in lease.lost, lease.lost
    lease.release()  # never touches round B's lease
    if how == "reset-then-taken":
        assert _holder(open_store) == "round-B"
    else:
        assert open_store().head(LEASE_KEY) is None
