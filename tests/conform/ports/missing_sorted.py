"""Planted bug: gc_epoch reports the missing partitions sorted by name instead of in
snapshot order (spec/VECTORS.md, Results: `missing` is in snapshot order)."""

from model import cluster, port

_real = cluster.partition_epochs


def partition_epochs(partitions, reports):  # type: ignore[no-untyped-def]
    best = _real(partitions, reports)
    return {p: best[p] for p in sorted(best)}


cluster.partition_epochs = partition_epochs
port.main()
