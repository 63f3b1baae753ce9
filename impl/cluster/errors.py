"""Errors of the local cluster manager that say something about the arguments given."""

from __future__ import annotations


class NoCluster(RuntimeError):
    """The data directory given holds no cluster: a bad argument (exit 64, issue 41 item
    11: it was `Error: RuntimeError: no cluster under ...`, exit 1), not a failure."""


class ClusterDown(ConnectionError):
    """No node of the cluster answered, every one unreachable (a stopped cluster): said in
    plain words with the way on (newuser7 H8: `ConnectionError: no broker answered epoch:
    {'status': 'unreachable', ...}`)."""


class DamagedClusterFile(ValueError):
    """DATA_DIR/cluster.json exists but is not the file `cluster start` writes: bad input
    data (exit 65), said in one line naming the file (newuser10 L7)."""

    def __init__(self, path: object, what: str) -> None:
        super().__init__(f"{path}: {what} (a damaged cluster file: restore it, or move the "
                         "data directory aside and start a new cluster; nothing was done)")
        self.path, self.what = path, what
