"""`epochgc conform`'s progress: a bar per phase (vector files, generated programs) on
stderr when it is a terminal and --quiet is not given, as the other commands draw theirs
(impl/progress.py): a run of 3,000 programs was 15 s of silence. Off a terminal nothing
(a log gets the summary lines only); the counts themselves live in the driver's reports,
which an interrupted run reads to say how far it got."""

from __future__ import annotations

import importlib.util
from typing import Any

from epochgc.impl.conform.driver import GenReport, VectorReport
from epochgc.impl.progress import Reporter


class ConformProgress:
    def __init__(self, quiet: bool) -> None:
        # tqdm comes with the conform extra; an older install without it gets no bar.
        self.on = Reporter(quiet).bars and importlib.util.find_spec("tqdm") is not None
        self._reporter = Reporter(quiet)
        self._bar: Any = None

    def phase(self, label: str, unit: str, total: int | None) -> None:
        """A new bar (the previous one is closed where it stands)."""
        self.close()
        if self.on:
            self._bar = self._reporter.bar(label, unit, total)

    def file_done(self, report: VectorReport) -> None:
        self._update(len(report.passed) + len(report.skipped))

    def program_done(self, report: GenReport) -> None:
        self._update(report.agreed)

    def _update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
