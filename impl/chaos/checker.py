"""The end-of-run checks, independent of the cluster's code paths where they can be:

- `raft_divergences`: every node's Raft log of every group is read from its data directory
  after the nodes stopped; at each index that two replicas both hold as committed (index <=
  their own persisted commit) the entries must be identical (term, type and bytes).
- `trace_divergences`: the nodes' shared NDJSON trace replayed against the model
  (`epochgc check-trace`'s `check`).
- `lost` is `impl.cluster.payload.compare` of the acknowledgements against the read-back
  bytes, recomputed from each acknowledgement (not the cluster's own bookkeeping).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.storage import StorageCorruption


@dataclass(frozen=True)
class Divergence:
    group: int
    index: int
    nodes: tuple[int, ...]
    detail: str

    def __str__(self) -> str:
        return f"group {self.group} index {self.index} nodes {self.nodes}: {self.detail}"


def raft_divergences(node_dirs: dict[int, Path]) -> list[Divergence]:
    """Compare the committed prefixes of every group's replicas (see the module docstring).
    A replica whose log cannot be loaded is a divergence too (it lost committed state)."""
    # group -> index -> {(term, type, data): [nodes]}
    seen: dict[int, dict[int, dict[tuple[int, int, bytes], list[int]]]] = defaultdict(
        lambda: defaultdict(dict))
    out: list[Divergence] = []
    for nid, d in sorted(node_dirs.items()):
        if not d.is_dir():
            continue
        for name in sorted(os.listdir(d)):
            if not (name.startswith("g") and name[1:].isdigit()):
                continue
            gid = int(name[1:])
            try:
                st = DiskStorage(str(d / name))
                init = st.load()
                st.abandon()
            except StorageCorruption as exc:
                out.append(Divergence(gid, -1, (nid,), f"log unreadable: {exc}"))
                continue
            commit = init.hard_state.commit
            for ent in init.entries:
                if ent.index > commit:
                    break
                seen[gid][ent.index].setdefault((ent.term, ent.type, ent.data), []).append(nid)
    for gid in sorted(seen):
        for index in sorted(seen[gid]):
            variants = seen[gid][index]
            if len(variants) > 1:
                desc = "; ".join(f"nodes {v} term {k[0]} {len(k[2])} bytes"
                                 for k, v in variants.items())
                nodes = tuple(sorted(n for v in variants.values() for n in v))
                out.append(Divergence(gid, index, nodes, f"committed entries differ: {desc}"))
    return out


def trace_divergence(trace: Path) -> str | None:
    """None when the trace conforms to the model, else the checker's report."""
    from epochgc.impl.checktrace import Malformed, check

    try:
        return check(str(trace)).divergence
    except (Malformed, OSError) as e:
        return f"trace unreadable: {e}"
