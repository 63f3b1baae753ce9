"""Planted bug: advance_reconciled_offset stores the LRLO it is given instead of the max of
old and new, so LRLO can move backwards (spec R5)."""

from dataclasses import replace

from epochgc.model import port, replay

_real = replay.apply_reconciled


def apply_reconciled(state, lrlo, lro=None):  # type: ignore[no-untyped-def]
    return replace(_real(state, lrlo, lro), last_reconciled_log_offset=lrlo)


replay.apply_reconciled = apply_reconciled
port.main()
