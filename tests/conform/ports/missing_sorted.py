"""Planted bug: when three or more partitions are missing, gc_epoch reports them sorted by
name instead of in snapshot order (spec/VECTORS.md, Results: `missing` is in snapshot order).
The shipped vectors pin the order for two missing partitions only, so only generation finds it."""

from epochgc.model import cluster, port

_real = cluster.partition_epochs


def partition_epochs(partitions, reports):  # type: ignore[no-untyped-def]
    best = _real(partitions, reports)
    if sum(1 for v in best.values() if v is None) < 3:
        return best
    return {p: best[p] for p in sorted(best)}


cluster.partition_epochs = partition_epochs
port.main()
