"""Where a local store may not be, relative to a cluster's data directory (newuser18 U1).

A local store is a directory tree every node writes objects into, and a data directory
holds the nodes' Raft logs (DATA_DIR/n<id>/) and the cluster's file: one inside the other
mixes the two. `--store c5 --data-dir c5` and `--store c6/n1 --data-dir c6` (the store in
node 1's Raft directory) were accepted; so were a data directory inside another cluster's
store and a store inside another cluster's data directory. Paths are compared resolved
(symbolic links followed, `..` removed), so another spelling of the same directory is
the same directory."""

from __future__ import annotations

import os
from pathlib import Path

from epochgc.impl.cluster.owner import OWNER_KEY

# What marks a directory as a cluster's data directory, and as a store (the store's files
# a cluster writes first: its owner document, its partition table).
DATA_DIR_MARK = "cluster.json"
STORE_MARKS = (OWNER_KEY, "_cluster/partitions.json")


def _inside(a: str, b: str) -> bool:
    """Whether resolved path `a` is `b` or below it."""
    return a == b or a.startswith(b.rstrip("/") + "/")


def _self_and_parents(p: str) -> list[Path]:
    path = Path(p)
    return [path, *path.parents]


_OWN_STORE = "give the cluster a store of its own, beside its data directory"
_OWN_DIR = "give the cluster a data directory outside every store"


def placement_problem(data_dir: str, store_dir: str) -> str | None:
    """Why a cluster under `data_dir` may not use the local store `store_dir`, and the
    way on, in one line (None: it may). Neither needs to exist yet."""
    d, s = os.path.realpath(data_dir), os.path.realpath(store_dir)
    if d == s:
        return f"--store {store_dir} is the data directory itself ({d}); {_OWN_STORE}"
    if _inside(s, d):
        return f"--store {store_dir} is inside the data directory {d}; {_OWN_STORE}"
    if _inside(d, s):
        return f"--store {store_dir} contains the data directory {d}; {_OWN_STORE}"
    for p in _self_and_parents(s):
        if os.path.isfile(p / DATA_DIR_MARK):  # any OSError (EACCES) counts as absent
            return (f"--store {store_dir} is inside {p}, another cluster's data directory "
                    f"(it holds {DATA_DIR_MARK}); {_OWN_STORE}")
    for p in _self_and_parents(d):
        for mark in STORE_MARKS:
            if os.path.isfile(p / mark):
                return (f"--data-dir {d} is inside {p}, a cluster's store (it holds {mark}); "
                        f"{_OWN_DIR}")
    return None
