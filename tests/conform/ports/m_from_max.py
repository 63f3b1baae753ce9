"""Planted bug: M(p) from max_applied_epoch (max - 1) instead of the reconciled floor (F5;
spec R14)."""

from dataclasses import replace

from epochgc.model import port, replay

_real = replay.inactive_epoch


def inactive_epoch(state, variant):  # type: ignore[no-untyped-def]
    return _real(state, replace(variant, watermark_from_max=True))


replay.inactive_epoch = inactive_epoch
port.main()
