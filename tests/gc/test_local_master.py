"""`stage.listing_tasks` on master URLs Spark itself may or may not accept (issue 29: a local
master gets 2 listing tasks per core, at most the default 20). A URL that is not a local
master Spark runs in this process gets the cluster default: the count only sets how the
1000 prefixes are split, never what is deleted."""

from __future__ import annotations

import os

import pytest

from epochgc.impl.gc.scan import split_prefixes
from epochgc.impl.gc.stage import listing_tasks
from epochgc.model.keys import PREFIXES

_CORES = os.cpu_count() or 1


@pytest.mark.parametrize(("master", "tasks"), [
    ("local[*,3]", min(20, 2 * _CORES)),  # Spark's local[N|*, maxFailures]
    ("local[* , 3]", min(20, 2 * _CORES)),
    ("local[7,0]", 14),
    # Not a local master Spark parses (it refuses these, or runs them elsewhere): default.
    ("LOCAL[2]", 20), ("local [2]", 20), ("local[2]x", 20), ("local[0]", 20),
    ("local[-1]", 20), ("local[2,]", 20), ("local[]", 20), ("", 20), (None, 20),
    ("local-cluster[2,1,1024]", 20), ("spark://local[2]:7077", 20),
])
def test_master_urls(master: str | None, tasks: int) -> None:
    assert listing_tasks(PREFIXES, master) == tasks


@pytest.mark.parametrize("master", ["local", "local[1]", "local[3]", "local[*]", "yarn"])
def test_every_split_covers_each_prefix_once(master: str) -> None:
    groups = split_prefixes(PREFIXES, listing_tasks(PREFIXES, master))
    assert sorted(p for g in groups for p in g) == list(range(PREFIXES))
    assert all(groups)


def test_few_prefixes_never_get_more_tasks_than_the_default() -> None:
    assert listing_tasks(1, "local[8]") == 1
    assert listing_tasks(120, "local[8]") == 3
    assert listing_tasks(120, "local[1]") == 2
