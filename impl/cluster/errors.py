"""Errors of the local cluster manager that say something about the arguments given."""

from __future__ import annotations


class NoCluster(RuntimeError):
    """The data directory given holds no cluster: a bad argument (exit 64, issue 41 item
    11: it was `Error: RuntimeError: no cluster under ...`, exit 1), not a failure."""
