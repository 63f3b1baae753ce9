"""What a command tells a person while it works: one line per event on stderr (unless
`--quiet`) and, when stderr is a terminal, progress bars drawn by tqdm (a count, its rate
and an ETA where the total is known). No bars under `--quiet` or without a terminal: a
scheduler's log gets the lines only."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


def _has_width(stream: TextIO) -> bool:
    """Whether the terminal says how wide it is: a pty that reports 0 columns (`script`
    without `stty cols`, some `docker exec -t` and CI terminals) drew no bar at all, and
    then no line either (newuser8 I9). TIOCGWINSZ via os.get_terminal_size."""
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError, AttributeError):
        return False


class Reporter:
    """A command's `say`: `say(line)`; `bar(...)` when bars are on."""

    def __init__(self, quiet: bool, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        # No bars where the terminal has no width: the lines a log gets instead.
        self.bars = not quiet and self.stream.isatty() and _has_width(self.stream)

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        if self.bars:
            from tqdm import tqdm

            tqdm.write(msg, file=self.stream)  # above a bar in progress, not through it
        else:
            # Never raises on the stream's encoding (a key that is not UTF-8, issue 38).
            from epochgc.impl.gc.text import echo_safe

            echo_safe(msg, err=True)

    def bar(self, label: str, unit: str, total: int | None = None) -> Any:
        """A tqdm bar on this reporter's stream (caller closes it)."""
        from tqdm import tqdm

        return tqdm(desc=label, total=total, unit=unit, file=self.stream, leave=True,
                    dynamic_ncols=True, disable=not self.bars)
