"""Issue 38 (growing groups): the order in which waiting delete requests take a free slot
(`delete._Slots`): in arrival order while the listing goes on, and once it is over the
request of the group with the most batches left first, so that the task's groups end
together rather than its last one sending alone while a slot idles."""

from __future__ import annotations

import threading
import time

import pytest

from epochgc.impl.gc.delete import _Slots

_LIMIT_S = 60.0  # a bound for a hung thread, not a timing assumption


def _order(ending: bool, lefts: list[int]) -> list[int]:
    """One slot, held; requests with `lefts` batches left wait for it, in that order of
    arrival; then the slot is let go: the order they took it in."""
    slots, taken, lock = _Slots(1), list[int](), threading.Lock()
    hold = slots.take(99)
    hold.__enter__()

    def one(left: int) -> None:
        with slots.take(left), lock:
            taken.append(left)

    threads = []
    for n, left in enumerate(lefts):
        t = threading.Thread(target=one, args=(left,))
        t.start()
        threads.append(t)
        deadline = time.monotonic() + _LIMIT_S
        while len(slots._waiting) < n + 1:  # this one waits before the next arrives
            assert time.monotonic() < deadline
            time.sleep(0.001)
    if ending:
        slots.ending()
    hold.__exit__(None, None, None)
    for t in threads:
        t.join(_LIMIT_S)
    return taken


@pytest.mark.parametrize(("ending", "expected"), [(False, [1, 8, 3, 8]),
                                                  (True, [8, 8, 3, 1])])
def test_a_free_slot_goes_in_arrival_order_until_the_listing_ends(
    ending: bool, expected: list[int]
) -> None:
    assert _order(ending, [1, 8, 3, 8]) == expected
