"""A node's data directory names its cluster (newuser21 X1): `node-identity` carries the
random id of DATA_DIR/cluster.json (the id the store's `_cluster/cluster-id.json` holds
too), so a node directory copied from another cluster is refused by `cluster start`, naming
the file and both identities, with no node started. Old code wrote `cluster=epochgc` in every
cluster's directories: cluster B's node given cluster A's directory started ("cluster
ready"), won B's election with A's longer log, and B's acknowledged records were unreadable
for good. A directory written so by an older version restarts in its own cluster and takes
that cluster's id (said in a warning).

Two real one-node clusters (broker processes on their disk logs, local stores), started
once for the module (tests/impl/cli_cluster.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.raft.identity import (
    IDENTITY_FILE,
    LEGACY_CLUSTER_ID,
    NodeIdentity,
    ensure_identity,
)
from tests.impl.cli_cluster import BOUND_S, ENV, epochgc, stop


def _start(d: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir", str(d),
         "--store", str(store), "--nodes", "1", "--partitions", "t/0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Clusters A and B (started side by side: one start's wait, not two), B holding 3
    acknowledged records of t/0; both stopped when yielded."""
    tmp = tmp_path_factory.mktemp("twoclusters")
    a, b = tmp / "A", tmp / "B"
    procs = [_start(a, tmp / "As"), _start(b, tmp / "Bs")]
    try:
        for p in procs:
            _, err = p.communicate(timeout=BOUND_S)
            assert p.returncode == 0, err
        r = epochgc("produce", "--data-dir", str(b), "--partition", "t/0", "--count", "3")
        assert r.returncode == 0, r.stderr
    finally:
        stop(a)
        stop(b)
    yield a, b
    stop(b)


def _cid(d: Path) -> str:
    return str(json.loads((d / "cluster.json").read_text())["cluster_id"])


def _identity(node_dir: Path) -> NodeIdentity:
    path = node_dir / IDENTITY_FILE
    return NodeIdentity.decode(str(path), path.read_bytes())


def test_a_node_directory_of_another_cluster_is_refused(clusters: tuple[Path, Path]) -> None:
    a, b = clusters
    assert _identity(a / "n1").cluster_id == _cid(a) != _cid(b)  # old code: both 'epochgc'
    own = b / "n1.own"
    (b / "n1").rename(own)
    shutil.copytree(a / "n1", b / "n1", symlinks=True)  # the operator's mistake
    try:
        r = epochgc("cluster", "start", "--data-dir", str(b), "--store", str(b.parent / "Bs"))
        # FAILED (1): a check refused the start, as for another node's directory.
        assert r.returncode == 1, (r.stdout, r.stderr)
        line = r.stderr.strip()
        assert line.count("\n") == 0, line
        assert str(b / "n1" / IDENTITY_FILE) in line
        assert f"node 1 of cluster '{_cid(a)}'" in line and f"cluster '{_cid(b)}'" in line
        assert "no node was started" in line
        assert "node 1: pid" not in r.stdout
        assert LocalCluster(b).running() == []  # nothing left running, nothing acknowledged
        assert _identity(b / "n1").cluster_id == _cid(a)  # the copy is left as it was
    finally:
        shutil.rmtree(b / "n1")
        own.rename(b / "n1")


def test_an_old_format_identity_restarts_and_takes_its_clusters_id(
        clusters: tuple[Path, Path]) -> None:
    _, b = clusters
    path = b / "n1" / IDENTITY_FILE
    mine = _identity(b / "n1")
    # What every version before this one wrote, whatever the cluster.
    path.write_bytes(NodeIdentity(LEGACY_CLUSTER_ID, 1, mine.incarnation).encode())
    r = epochgc("cluster", "start", "--data-dir", str(b), "--store", str(b.parent / "Bs"))
    assert r.returncode == 0, r.stderr
    assert "written by an older version" in r.stderr and _cid(b) in r.stderr
    assert _identity(b / "n1") == NodeIdentity(_cid(b), 1, mine.incarnation)
    r = epochgc("consume", "--data-dir", str(b), "--partition", "t/0", "--verify")
    assert r.returncode == 0, r.stderr
    assert '"records": 3' in r.stdout or "3 record" in r.stdout, r.stdout


def test_a_new_cluster_refuses_an_older_versions_directory(tmp_path: Path) -> None:
    # A cluster new at this start has no directory of its own yet: one naming no cluster
    # came from elsewhere (adopted only where DATA_DIR/cluster.json was there before).
    d = tmp_path / "c"
    ensure_identity(str(d / "n1"), LEGACY_CLUSTER_ID, 1)
    r = epochgc("cluster", "start", "--data-dir", str(d), "--store", str(tmp_path / "s"),
                "--nodes", "1")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert str(d / "n1" / IDENTITY_FILE) in r.stderr and "cluster 'epochgc'" in r.stderr
    assert "no node was started" in r.stderr
    assert not (d / "cluster.json").exists()  # refused before the start's first write
    assert not (tmp_path / "s").exists()


def test_the_node_refuses_another_clusters_directory_by_itself(tmp_path: Path) -> None:
    # Without `cluster start`'s check (a directory swapped after it looked): the broker
    # compares its --cluster-id with node-identity and exits, one line naming the file.
    lc = LocalCluster(tmp_path / "c")
    lc.init(1, str(tmp_path / "s"), ["t/0"], 1.0)
    other = "0" * 32
    ensure_identity(str(lc.node_dir(1)), other, 1)
    with pytest.raises(RuntimeError, match=r"node 1 failed to start: .?refusing to start: "
                       rf".*n1/{IDENTITY_FILE}: .* cluster '{other}' .* cluster "
                       rf"'{lc.cluster_id()}'"):
        lc.start(1)
    assert lc.running() == []
