"""Errors that end a GC round with one clear message (and nothing deleted)."""

from __future__ import annotations

from typing import Any


class GcError(Exception):
    """A round that cannot go on; the message names what and where.

    `deleting` is True when it happened during the delete phase (some keys may be gone)."""

    def __init__(self, message: str, *, deleting: bool = False) -> None:
        super().__init__(message)
        self.deleting = deleting
        # The round's partial summary (`error` set), when the round had started: the CLI
        # prints it as JSON and exports its metrics, so a failure is visible as one.
        self.summary: Any = None


class ReportError(GcError):
    """A report file that is missing, unreadable or not in the published format."""


class NotAStore(GcError):
    """The store location holds no `_cluster/partitions.json`: a mistyped path. The round
    writes nothing there, not even its record."""


class StoreUnreadable(GcError):
    """The store's first read (`_cluster/partitions.json`) failed: not known to be a store,
    so, as for `NotAStore`, the round writes nothing there, not even its record (newuser9
    K4: an endpoint answering 500 to everything got ~90 s more of retries numbering and
    writing a record it could not write)."""
