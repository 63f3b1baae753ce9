"""Driving a `Harness` by hand in a unit test: one operation, then every per-step check."""

from __future__ import annotations

from collections.abc import Callable

from tests.conformance.harness import Harness

__all__ = ["step"]


def step(h: Harness, fn: Callable[..., object], *args: object) -> None:
    """Run `fn(*args)` (an operation of `h`), then `h.check_step()`: a violation raises."""
    fn(*args)
    h.check_step()
