"""Planted bug: the seen window is not scoped to a term: a new leader trusts a window seen in
an older term (F2; spec R9)."""

from dataclasses import replace

from epochgc.model import port, replay

_real = replay.fence


def fence(seen, applied, term, epoch, variant):  # type: ignore[no-untyped-def]
    return _real(seen, applied, term, epoch, replace(variant, term_scoped_seen=False))


replay.fence = fence
port.main()
