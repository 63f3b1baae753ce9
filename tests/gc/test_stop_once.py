"""A dead round's STOP is written once and its tasks' bound counts from that first STOP
(issue 41, newuser4 F1): every `gc-admin show` rewrote it, so the 240 s bound restarted on
each look and a monitor running `show` more often than every 4 minutes kept a dead round
from ever being recorded. On the local store and both S3 servers."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.journal import START, STOP, journal_prefix, write_marker
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recover import recover_dead_rounds, stop_dead_rounds
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from tests.store.backends import Opener, backend, open_store

__all__ = ["backend", "open_store"]

DEAD = "20270115T060000.000Z-deadr0nd"


def _start(store: ObjectStore, round_id: str = DEAD, **extra: Any) -> str:
    prefix = journal_prefix(round_id)
    write_marker(store, prefix, START, {"round": round_id, "M": 100, "snapshot_revision": 7,
                                        "options": {}, "stop_within_s": 240.0, **extra})
    return prefix


def test_two_shows_eight_seconds_apart_give_the_same_record_after(open_store: Opener) -> None:
    """Two `show`s 8 s apart (an injected clock): the same "recorded after" time, and the
    STOP the first one wrote is the one the store still has (not rewritten)."""
    store = open_store()
    prefix = _start(store)
    _, first = stop_dead_rounds(store, "show 1", lambda: set(), clock=lambda: 1_000_000.0)
    info = store.head(prefix + STOP)
    _, second = stop_dead_rounds(store, "show 2", lambda: set(), clock=lambda: 1_000_008.0)
    assert [s.round_id for s in first] == [s.round_id for s in second] == [DEAD]
    assert first[0].record_after == second[0].record_after, (
        f"two shows 8 s apart: recorded after {first[0].record_after} and then "
        f"{second[0].record_after}: the second show restarted the dead round's bound")
    again = store.head(prefix + STOP)
    assert info is not None and again is not None and again.version == info.version, (
        "the second show wrote the dead round's STOP again")
    assert b"show 1" in store.get(prefix + STOP)


def test_show_says_when_the_first_stop_was_written_plus_the_bound(tmp_path: Path) -> None:
    """The time `show` gives is the first STOP's (the store's clock) plus the bound."""
    store = LocalStore(tmp_path / "s", create=True)
    prefix = _start(store)
    write_marker(store, prefix, STOP, {"reason": "killed", "by": "an earlier look"})
    written = float(int(os.stat(tmp_path / "s" / prefix / STOP).st_mtime)) - 100.0
    os.utime(tmp_path / "s" / prefix / STOP, (written, written))
    _, stopping = stop_dead_rounds(store, "show", lambda: set(),
                                   clock=lambda: written + 7.0)  # not the host's clock
    assert [s.record_after for s in stopping] == [written + 0.01 + 240.0]


def test_a_reset_after_a_stop_written_longer_ago_than_the_bound_does_not_wait(
    tmp_path: Path,
) -> None:
    """A STOP written (by an earlier show) longer ago than the round's bound: the recovery
    reads the journal back at once, and `show` records it too."""
    for look in ("reset", "show"):
        root = tmp_path / look
        store = LocalStore(root, create=True)
        prefix = _start(store)
        write_marker(store, prefix, STOP, {"reason": "killed", "by": "an earlier look"})
        long_ago = os.stat(root / prefix / STOP).st_mtime - 241.0
        os.utime(root / prefix / STOP, (long_ago, long_ago))
        slept: list[float] = []
        if look == "reset":
            done = recover_dead_rounds(store, "reset", lambda: set(), sleep=slept.append)
        else:
            done, stopping = stop_dead_rounds(store, "show", lambda: set())
            assert stopping == []
        assert slept == [], (f"{look}: the dead round's STOP was written 241 s ago (its "
                             f"bound 240 s) and the recovery waited {slept} s more")
        assert [r.round_id for r in done] == [DEAD]
        assert store.head(round_key(DEAD)) is not None


def test_a_stop_written_a_while_ago_waits_only_what_is_left(tmp_path: Path) -> None:
    """100 s into the bound: 140 s left (boundary: neither the whole bound nor none)."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    prefix = _start(store)
    write_marker(store, prefix, STOP, {"reason": "killed", "by": "an earlier look"})
    earlier = os.stat(root / prefix / STOP).st_mtime - 100.0
    os.utime(root / prefix / STOP, (earlier, earlier))
    waited: list[float] = []
    recover_dead_rounds(store, "reset", lambda: set(), sleep=waited.append)
    assert sum(waited) in (140.0, 141.0), waited  # rounded up to the whole second


def test_a_host_clock_ahead_of_the_servers_does_not_shorten_the_wait(
    open_store: Opener, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The STOP's age is the server's `Date` less its `Last-Modified` (S3), not this host's
    clock less `Last-Modified`: a host an hour ahead still waits the whole bound for a STOP
    written just now. (Seeded: `time.time()` in place of the answer's `Date` waits 0.)"""
    if backend != "seaweedfs":
        # a local store's mtime is stamped by this host's clock; moto runs in this process
        # (its `Date` from the patched `time.time`, its `Last-Modified` from `datetime`)
        pytest.skip("needs a server with its own clock")
    store = open_store()
    _start(store)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600.0)
    waited: list[float] = []
    recover_dead_rounds(store, "reset", lambda: set(), sleep=waited.append)
    assert sum(waited) >= 235.0, waited  # the bound less the requests' own seconds
