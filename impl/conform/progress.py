"""`epochgc conform`'s progress: a bar per phase (vector files, generated programs) on
stderr when it is a terminal and --quiet is not given, as the other commands draw theirs
(impl/progress.py): a run of 3,000 programs was 15 s of silence. Off a terminal (and not
--quiet) a line every 10 s instead, as `gc`'s log lines (newuser11 M13: 49 s of silence
between the vectors' line and the generated programs' in a log); the counts themselves
live in the driver's reports, which an interrupted run reads to say how far it got."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

from epochgc.impl.conform.driver import GenReport, VectorReport
from epochgc.impl.progress import Reporter

# Off a terminal, a line this often (at the next file or program done).
LINE_EVERY_S = 10.0


class ConformProgress:
    def __init__(self, quiet: bool, clock: Callable[[], float] = time.monotonic,
                 say: Callable[[str], None] | None = None) -> None:
        # tqdm comes with the conform extra; an older install without it gets no bar.
        self.on = Reporter(quiet).bars and importlib.util.find_spec("tqdm") is not None
        self._reporter = Reporter(quiet)
        self._bar: Any = None
        # The lines: none under --quiet, none with a bar. `say`: where (stderr).
        self._say = None if quiet or self.on else (say or self._reporter)
        self._clock = clock
        self._label, self._unit = "", ""
        self._total: int | None = None
        self._since = 0.0  # the phase's start, then the last line's time
        self._began = 0.0

    def phase(self, label: str, unit: str, total: int | None) -> None:
        """A new bar (the previous one is closed where it stands)."""
        self.close()
        self._label, self._unit, self._total = label, unit, total
        self._began = self._since = self._clock()
        if self.on:
            self._bar = self._reporter.bar(label, unit, total)

    def file_done(self, report: VectorReport) -> None:
        self._update(len(report.passed) + len(report.skipped))

    def program_done(self, report: GenReport) -> None:
        self._update(report.agreed)

    def _update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n - self._bar.n)
        now = self._clock()
        if self._say is not None and now - self._since >= LINE_EVERY_S:
            self._since = now
            of = f" of {self._total:,}" if self._total is not None else ""
            self._say(f"conform: {self._label}: {n:,}{of} {self._unit}(s) agreed so far "
                      f"({now - self._began:.0f} s)")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
