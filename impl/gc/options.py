"""GcOptions: what one GC round is asked to do, checked before anything is read or listed."""

from __future__ import annotations

import os
from dataclasses import dataclass

from epochgc.impl.gc.bounds import LOOK_FRESH_S, NEXT_HEAD_WITHIN_S
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.manifest import has_scheme
from epochgc.impl.store.base import MAX_DELETE_BATCH, MAX_PAGE_SIZE
from epochgc.model.keys import PREFIXES

DEFAULT_GRACE_S = 12 * 3600.0
MIN_GRACE_S = 3600.0
DEFAULT_MAX_REPORT_AGE_S = 300.0
# The longest --max-report-age taken: a year. Nodes report every second (`broker.py`'s
# health interval); an age limit of years only turns the staleness check off (newuser13 Q5:
# `99999999999d` was taken, where `gc-admin show` refuses 0s), so past it is a typo. A
# year still leaves room for a store's reports dated far from this host's clock.
MAX_REPORT_AGE_S = 365 * 86400.0
# The in-round watch's longest wait between looks: the gate lets tasks go on only within
# `LOOK_FRESH_S` (90 s) of a look's HEAD of the round's STOP marker (`bounds.py`); a look
# ends with a HEAD if the next look's would come more than `NEXT_HEAD_WITHIN_S` (60 s) after
# the last clear one (review rev38o finding 6), which no wait longer than that can keep; a
# longer interval stopped every round `watch-late` at its first ask 90 s after a look
# (review rev38n finding 3).
MAX_WATCH_INTERVAL_S = NEXT_HEAD_WITHIN_S


@dataclass(frozen=True)
class GcOptions:
    grace_s: float = DEFAULT_GRACE_S
    allow_short_grace: bool = False  # below MIN_GRACE_S only when set (--i-know-...)
    max_report_age_s: float = DEFAULT_MAX_REPORT_AGE_S
    dry_run: bool = False
    manifest: str | None = None  # a directory Spark writes (Parquet, or CSV if *.csv)
    skip_malformed: bool = False
    allow_versioned: bool = False  # run on a versioned bucket (deletes add delete markers)
    page_size: int = MAX_PAGE_SIZE
    delete_batch_size: int = MAX_DELETE_BATCH
    # Delete requests in flight per task; default 4 on S3 (a delete is a round trip) and 1
    # on a local directory, where the deletes run in the task's own thread: threads there
    # only contend for the interpreter lock (issue 29: a task body with 4 delete threads
    # made about 10 futex calls per key and ran at 0.6x of the same body with none).
    delete_concurrency: int | None = None
    # List requests in flight per task in a real round; default 4 on S3 (a list is a round
    # trip) and 1 on a local directory (threads only contend for the GIL there: the local
    # bench ran at half speed with 4).
    list_concurrency: int | None = None
    tasks: int | None = None  # Spark tasks for the listing; default listing_tasks()
    # Issue 29: stop the round (as SIGTERM would: batches in flight finish, END says
    # `interrupted`, exit 1) once it has run this long.
    deadline_s: float | None = None
    # A dry run's list of the keys it would delete, one a line: a file path, or "-" for
    # the `say` channel's caller to print (`GcSummary.would_delete`); dry runs only.
    list_keys: str | None = None
    # Issue 30: how often a real round's driver re-reads the pause state and the safety
    # monitor while it deletes (`watch.py`).
    watch_interval_s: float = 2.0

    def validate(self) -> None:
        if self.grace_s < 0:
            raise GcError(f"grace must be >= 0, got {self.grace_s:g}s")
        if self.grace_s < MIN_GRACE_S and not self.allow_short_grace:
            raise GcError(
                f"grace {self.grace_s:g}s is below the 1h safety minimum; objects that young "
                "may still be in flight (pass --i-know-grace-is-short to force)"
            )
        if not 0 < self.max_report_age_s <= MAX_REPORT_AGE_S:
            # NaN passed `<= 0` and made every report fresh (issue 30 review).
            raise GcError(f"max report age must be > 0 and at most 365d, got "
                          f"{self.max_report_age_s!r}")
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise GcError(f"page size must be in 1..{MAX_PAGE_SIZE}, got {self.page_size}")
        if not 1 <= self.delete_batch_size <= MAX_DELETE_BATCH:
            raise GcError(f"delete batch must be in 1..{MAX_DELETE_BATCH}")
        if self.delete_concurrency is not None and self.delete_concurrency < 1:
            raise GcError("delete concurrency must be >= 1")
        if self.list_concurrency is not None and self.list_concurrency < 1:
            raise GcError("list concurrency must be >= 1")
        if not 0 < self.watch_interval_s <= MAX_WATCH_INTERVAL_S:
            # inf made the watch thread die on Event.wait's OverflowError (issue 30 review);
            # above the bound the gate closed between two looks (review rev38n finding 3).
            raise GcError(f"watch_interval_s must be in (0, {MAX_WATCH_INTERVAL_S:g}] s (the "
                          f"gate lets tasks go on only within {LOOK_FRESH_S:g} s of a look at "
                          f"the round's STOP marker), got {self.watch_interval_s!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise GcError(f"deadline must be > 0, got {self.deadline_s:g}s")
        if self.list_keys is not None and not self.dry_run:
            raise GcError("--list only applies to --dry-run (a real round has --manifest)")
        if self.list_keys not in (None, "-") and os.path.lexists(str(self.list_keys)):
            raise GcError(f"--list file {self.list_keys} already exists; refusing to overwrite")
        if self.tasks is not None and not 1 <= self.tasks <= PREFIXES:
            raise GcError(f"tasks must be in 1..{PREFIXES}, got {self.tasks}")
        # A plain path fails fast here; every target is checked on its own file system
        # once Spark is up (`manifest.check_manifest_absent`).
        if (
            self.manifest is not None
            and not has_scheme(self.manifest)
            and os.path.exists(self.manifest)
        ):
            raise GcError(f"manifest path {self.manifest} already exists; refusing to overwrite")

