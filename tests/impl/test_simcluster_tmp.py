"""A SimCluster that makes its own store removes it (341 `simcluster-*` directories were
left in /tmp by one CI run: nothing removed them). close() removes it at once; a cluster
nobody closes removes it when its store is collected. A store the caller passed is the
caller's and stays."""

from __future__ import annotations

import gc
from pathlib import Path

from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.local import LocalStore


def _root(c: SimCluster) -> Path:
    store = c.store
    assert isinstance(store, LocalStore)
    return Path(store.root)


def test_close_removes_the_store_it_made() -> None:
    c = SimCluster(seed=1)
    root = _root(c)
    assert root.is_dir()
    c.close()
    assert not root.exists()


def test_an_unclosed_cluster_removes_its_store_when_collected() -> None:
    c = SimCluster(seed=2)
    root = _root(c)
    c.run_for(1.0)
    del c
    gc.collect()
    assert not root.exists()


def test_a_store_the_caller_passed_is_kept(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s", create=True)
    c = SimCluster(seed=3, store=store)
    c.close()
    del c
    gc.collect()
    assert (tmp_path / "s").is_dir()
