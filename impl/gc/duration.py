"""Durations on the command line: `12h`, `30m`, `600s`, `1d`, or a bare number of seconds."""

from __future__ import annotations

import math
import re
from typing import Any

import click

# ASCII digits only: `\d` also matches "٥", which float() reads as 5.
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)", re.ASCII)
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds in `text`; ValueError with the accepted forms otherwise."""
    m = _DURATION.fullmatch(text.strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not a duration (use e.g. 12h, 30m, 600s)")
    seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not math.isfinite(seconds):  # 400 nines are infinity: a report age that never expires
        raise ValueError(f"{text!r} is not a duration (too large)")
    return seconds


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


class _Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in new click
    """`5m`, `12h`, `600s`, `1d` or plain seconds: every command's duration option; with
    `most_s`, at most that long."""

    name = "duration"

    def __init__(self, most_s: float | None = None) -> None:
        self.most_s = most_s

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, int | float):
            return float(value)
        try:
            seconds = parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)
        if self.most_s is not None and not seconds <= self.most_s:
            self.fail(f"{value!r} is longer than {format_duration(self.most_s)}", param, ctx)
        return seconds


DURATION = _Duration()
# A time to wait or to run for: beyond 100 years it is a typo, and a timer that long
# overflows the platform's time_t (threading.Timer: OverflowError, newuser5 G1).
SPAN = _Duration(most_s=36500 * 86400.0)


def at_most(most_s: float) -> click.ParamType:  # type: ignore[type-arg]  # as _Duration
    """A duration option that refuses anything longer than `most_s` (a usage error)."""
    return _Duration(most_s=most_s)
