"""`FiniteFloat`: the one click type for every float option of every command.

click's `FloatRange` checks its bounds by comparison, and every comparison with NaN is
false (IEEE 754-2019, 5.11: NaN is unordered with everything), so `--seconds nan` passed
`5 <= x <= 3600`, and an option with only a lower bound took `inf` too (newuser7 H6).
The exit-code walk (tests/impl/test_exitcodes.py) checks that every float option of every
command refuses them, so an option added later cannot miss it.
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloat(click.FloatRange):
    """A finite float within the range, else a usage error (64) naming the option."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)
