"""Issue 38: kill -9 at every step of a round, systematically (`tests/gc/kill9.py`): the
driver at START, at each of the first 4 intents, delete requests and `done`s (batches of one
key, two per intent: a kill lands between an intent's two requests too), at END and at the
record; a Spark worker at the same intents, requests and `done`s. After each, the
dead round's record plus the next round's equal what left the store, and nothing outside
eligibility was deleted.

The default suite runs one of the 27 kill points (the driver, mid-round); `tox -e kill9`
(EPOCHGC_KILL9_ALL=1) runs all of them, and two more in a round of twice the keys whose
kill lands inside a task's group of 4 batches (`kill9.LARGE_CASES`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import recover as recover_mod
from tests.gc.kill9 import (
    ALL_CASES,
    LARGE_CASES,
    LARGE_KEYS,
    build,
    check,
    journals_now,
    kill_round,
    largest_intent,
    next_round,
)

# The case (the driver killed mid-round, its executors going on); the rest, the
# worker kills included, under `tox -e kill9` (about 30 s each on a loaded machine).
_DEFAULT = [("driver", "batch-deleted:2")]
CASES = ALL_CASES + LARGE_CASES if os.environ.get("EPOCHGC_KILL9_ALL") else _DEFAULT


@pytest.mark.spark
@pytest.mark.parametrize(("who", "point"), CASES, ids=[f"{w}@{p}" for w, p in CASES])
def test_kill9_leaves_every_record_true(spark: Any, tmp_path: Path, who: str,
                                        point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "store"
    large = (who, point) in LARGE_CASES
    eligible, kept = build(root, LARGE_KEYS if large else 1)
    kill_round(root, tmp_path, who, point)
    if large:  # the kill landed in a task's group of 4 (its intent written before)
        assert largest_intent(root) == 4, largest_intent(root)
    # Every process of the killed round has exited (`kill_round` waits for it): the
    # recovery's wait for its tasks to stop (240 s, `bounds.py`) has nothing to wait for.
    waits: list[float] = []
    monkeypatch.setattr(recover_mod, "SLEEP", waits.append)
    before = journals_now(root)
    # Half the cases recover through the operator's reset, half through the next round.
    next_round(spark, root, via_reset=CASES.index((who, point)) % 2 == 0)
    assert check(root, eligible, kept, before) == []
    # Its tasks ran below its driver on this host (local master) and all are gone: the
    # recovery knows it and waits nothing (newuser4 F3: `reset` waited the whole 240 s).
    assert waits == [], f"the recovery waited {waits} s for a round whose processes had all exited"
