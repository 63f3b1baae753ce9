"""Errors of the local cluster manager that say something about the arguments given."""

from __future__ import annotations


class NoCluster(RuntimeError):
    """The data directory given holds no cluster: a bad argument (exit 64, issue 41 item
    11: it was `Error: RuntimeError: no cluster under ...`, exit 1), not a failure."""


class ClusterDown(ConnectionError):
    """No node of the cluster answered, every one unreachable (a stopped cluster): said in
    plain words with the way on (newuser7 H8: `ConnectionError: no broker answered epoch:
    {'status': 'unreachable', ...}`)."""
