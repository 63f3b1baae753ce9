"""Planted bug: the floor rises only once LRLO is past the window offset (`<` for `<=`), so
reconciling exactly up to the window's first placeholder leaves M(p) behind (spec R5)."""

from dataclasses import replace

from epochgc.model import port, replay

_real = replay.apply_reconciled


def apply_reconciled(state, lrlo, lro=None):  # type: ignore[no-untyped-def]
    out = _real(state, lrlo, lro)
    if state.window_offset is not None and out.last_reconciled_log_offset == state.window_offset:
        return replace(out, min_epoch_lower_bound=state.min_epoch_lower_bound)
    return out


replay.apply_reconciled = apply_reconciled
port.main()
