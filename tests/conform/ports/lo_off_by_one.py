"""Planted bug: the fence's lower end is exclusive (`epoch > lo`), so an epoch equal to the
window's lower end is refused while the window is wider than one epoch (spec R11)."""

from epochgc.model import port, replay
from epochgc.model.fence import FenceResult

_real = replay.fence


def fence(seen, applied, term, epoch, variant):  # type: ignore[no-untyped-def]
    r = _real(seen, applied, term, epoch, variant)
    if r.admitted and r.window is not None and r.window[0] == epoch < r.window[1]:
        return FenceResult(False, r.window, r.seen)
    return r


replay.fence = fence
port.main()
