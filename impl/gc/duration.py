"""Durations on the command line: `12h`, `30m`, `600s`, `1d`, or a bare number of seconds."""

from __future__ import annotations

import re

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds in `text`; ValueError with the accepted forms otherwise."""
    m = _DURATION.fullmatch(text.strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not a duration (use e.g. 12h, 30m, 600s)")
    return float(m.group(1)) * _UNIT[m.group(2)]


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
