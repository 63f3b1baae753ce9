"""Planted bug: a snapshot partition that no replica reported is skipped instead of blocking
the GC round (F4; spec R17)."""

from dataclasses import replace

from epochgc.model import cluster, port

_real = cluster.gc_epoch


def gc_epoch(revision, partitions, reports, variant):  # type: ignore[no-untyped-def]
    return _real(revision, partitions, reports, replace(variant, skip_missing=True))


cluster.gc_epoch = gc_epoch
port.main()
