"""A node's data directory names its cluster (newuser21 X1): `node-identity` carries the
random id of DATA_DIR/cluster.json (the id the store's `_cluster/cluster-id.json` holds
too), so a node directory copied from another cluster is refused by `cluster start`, naming
the file and both identities, with no node started. Old code wrote `cluster=epochgc` in every
cluster's directories: cluster B's node given cluster A's directory started ("cluster
ready"), won B's election with A's longer log, and B's acknowledged records were unreadable
for good.

A directory naming no cluster (an older version's `cluster=epochgc`, or format 3 from before
identity files) is adopted only by a cluster whose file an older version wrote and that is
not yet marked `nodes_name_cluster` (review41c C1, C7): a cluster this version created, or
one whose nodes have all started on it since, refuses it, and the broker adopts one only
when `cluster start` says so (--adopt-legacy-identity).

In CI: the cases that start no cluster (a few seconds in all). The cases on real running
clusters (two clusters for X1, an upgrade's restart) cost about 10 s and run with
EPOCHGC_IDENTITY_CLUSTERS=1 (tox -e identity; review41c C8)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.cluster.errors import DamagedClusterFile
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.cluster.meta import NAMED
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.identity import (
    IDENTITY_FILE,
    LEGACY_CLUSTER_ID,
    NodeIdentity,
    ensure_identity,
)
from epochgc.impl.raft.messages import Entry, HardState
from tests.impl.cli_cluster import BOUND_S, ENV, epochgc, stop

FORMAT3 = Path(__file__).parents[1] / "raft" / "fixtures" / "format3" / "g3"
running_clusters = pytest.mark.skipif(
    os.environ.get("EPOCHGC_IDENTITY_CLUSTERS") != "1",
    reason="real running clusters, ~10 s: EPOCHGC_IDENTITY_CLUSTERS=1 (tox -e identity)")


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


def _foreign_old(node_dir: Path, kind: str) -> str:
    """Make `node_dir` a node 1 directory an older version wrote for some other cluster,
    holding Raft data: `kind` "epochgc" (its node-identity says cluster=epochgc, a format-5
    log) or "format3" (no identity file: a real format-3 group, tests/raft/fixtures, as a
    group this cluster does not open: old code started on it). Returns the file the refusal
    names."""
    if kind == "format3":
        shutil.copytree(FORMAT3, node_dir / "g7")
        return str(node_dir / IDENTITY_FILE)
    ensure_identity(str(node_dir), LEGACY_CLUSTER_ID, 1)
    s = DiskStorage(str(node_dir / "g1"))
    s.load()
    s.write(HardState(3, 1, 1), None, [Entry(1, 3, 1, b"another cluster's record")])
    s.close()
    return str(node_dir / IDENTITY_FILE)


def _sha(p: Path) -> str:
    return hashlib.sha1(p.read_bytes()).hexdigest()


@running_clusters
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


@running_clusters
def test_an_upgraded_cluster_adopts_old_format_until_marked_then_refuses(
        clusters: tuple[Path, Path]) -> None:
    """review41c C1's upgrade path: B's file as an older version wrote it (no mark) and its
    node's identity `cluster=epochgc`: the restart adopts it (a warning), then marks the
    file; from then on a foreign old-format directory is refused."""
    _, b = clusters
    store = str(b.parent / "Bs")
    path = b / "n1" / IDENTITY_FILE
    mine = _identity(b / "n1")
    meta = json.loads((b / "cluster.json").read_text())
    assert meta[NAMED] is True  # created by this version
    del meta[NAMED]
    (b / "cluster.json").write_text(json.dumps(meta))
    # What every version before this one wrote, whatever the cluster.
    path.write_bytes(NodeIdentity(LEGACY_CLUSTER_ID, 1, mine.incarnation).encode())
    r = epochgc("cluster", "start", "--data-dir", str(b), "--store", store)
    assert r.returncode == 0, r.stderr
    assert "written by an older version" in r.stderr and _cid(b) in r.stderr
    assert "now names this cluster" in r.stderr
    assert _identity(b / "n1") == NodeIdentity(_cid(b), 1, mine.incarnation)
    assert json.loads((b / "cluster.json").read_text())[NAMED] is True
    r = epochgc("consume", "--data-dir", str(b), "--partition", "t/0", "--verify")
    assert r.returncode == 0, r.stderr
    assert '"records": 3' in r.stdout or "3 record" in r.stdout, r.stdout
    stop(b)
    own = b / "n1.own"
    (b / "n1").rename(own)
    try:
        named = _foreign_old(b / "n1", "epochgc")
        r = epochgc("cluster", "start", "--data-dir", str(b), "--store", store)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert named in r.stderr and "no node was started" in r.stderr
        assert LocalCluster(b).running() == []
    finally:
        stop(b)
        shutil.rmtree(b / "n1")
        own.rename(b / "n1")


@pytest.mark.parametrize("kind", ["epochgc", "format3"])
def test_a_cluster_of_this_version_refuses_an_old_format_directory(
        tmp_path: Path, kind: str) -> None:
    """review41c C1 (its probe: A created by this version, another cluster's node directory
    in the old format put in A's n1; old code: rc 0, a warning, A's t/0 became the other's
    log) and C7 (format 3). The cluster's file is the one `cluster start` writes for a new
    cluster (LocalCluster.init), its node never started: that start is not what is tested."""
    a = tmp_path / "A"
    store = str(tmp_path / "SA")
    lc = LocalCluster(a)
    lc.init(1, store, ["t/0"], 3.0)
    assert lc.meta[NAMED] is True and not lc.legacy_allowed
    named = _foreign_old(lc.node_dir(1), kind)
    before = _sha(lc.meta_path)
    try:
        r = epochgc("cluster", "start", "--data-dir", str(a), "--store", store)
        assert r.returncode == 1, (r.stdout, r.stderr)
        line = r.stderr.strip()
        assert line.count("\n") == 0, line
        assert named in line and "no node was started" in line
        assert (f"cluster '{LEGACY_CLUSTER_ID}'" if kind == "epochgc"
                else "before node identity files") in line
        if kind == "epochgc":  # why the old format is not this cluster's
            assert f"({lc.meta_path}) says {NAMED}: every node of it names its id" in line
        assert "node 1: pid" not in r.stdout
        assert _sha(lc.meta_path) == before
        assert not (lc.node_dir(1) / IDENTITY_FILE).exists() or \
            _identity(lc.node_dir(1)).cluster_id == LEGACY_CLUSTER_ID  # left as it was
    finally:
        if LocalCluster(a).running():  # old code started it
            stop(a)


@pytest.mark.parametrize("kind", ["epochgc", "format3"])
def test_a_new_cluster_refuses_an_older_versions_directory(tmp_path: Path, kind: str) -> None:
    # A cluster new at this start has no directory of its own yet: one naming no cluster
    # came from elsewhere (adopted only where DATA_DIR/cluster.json was there before, and
    # not marked).
    d = tmp_path / "c"
    named = _foreign_old(d / "n1", kind)
    r = epochgc("cluster", "start", "--data-dir", str(d), "--store", str(tmp_path / "s"),
                "--nodes", "1")
    if r.returncode == 0:  # old code started it (format 3): leave nothing running
        stop(d)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert named in r.stderr and "no node was started" in r.stderr
    if kind == "epochgc":
        assert "cluster 'epochgc'" in r.stderr
    assert not (d / "cluster.json").exists()  # refused before the start's first write
    assert not (tmp_path / "s").exists()


def test_an_unreadable_identity_file_is_refused_in_sentences(tmp_path: Path) -> None:
    """newuser22 Y6: "...: 'utf-8' codec can't decode byte 0xff in position 8: invalid
    start byte See docs/operations.md, ...": Python's codec words, and two sentences run
    together."""
    d = tmp_path / "c"
    (d / "n1").mkdir(parents=True)
    (d / "n1" / "node-identity").write_bytes(b"garbage\x00\xff\n")
    r = epochgc("cluster", "start", "--data-dir", str(d), "--store", str(tmp_path / "s"),
                "--nodes", "1")
    if r.returncode == 0:
        stop(d)
    assert r.returncode == 1, (r.stdout, r.stderr)
    line = r.stderr.splitlines()[-1]
    assert "unreadable node identity file: not UTF-8 text (byte 0xff at offset 8). See " \
        "docs/operations.md" in line, line
    assert "codec" not in line, line


@pytest.mark.parametrize("kind", ["other", "epochgc"])
def test_the_node_refuses_another_clusters_directory_by_itself(tmp_path: Path,
                                                                kind: str) -> None:
    # Without `cluster start`'s check (a directory swapped after it looked): the broker
    # compares its --cluster-id with node-identity and exits, one line naming the file.
    # An old-format one too: the broker adopts it only when told (review41c C1), and
    # LocalCluster tells it only for a cluster an older version made.
    lc = LocalCluster(tmp_path / "c")
    lc.init(1, str(tmp_path / "s"), ["t/0"], 1.0)
    other = "0" * 32 if kind == "other" else LEGACY_CLUSTER_ID
    ensure_identity(str(lc.node_dir(1)), other, 1)
    with pytest.raises(RuntimeError, match=r"node 1 failed to start: .?refusing to start: "
                       rf".*n1/{IDENTITY_FILE}: .* cluster '{other}' .* cluster "
                       rf"'{lc.cluster_id()}'"):
        lc.start(1)
    assert lc.running() == []


def test_the_mark_is_set_once_every_node_names_the_cluster(tmp_path: Path) -> None:
    """An older version's cluster file (no mark) allows old-format directories until every
    node's identity names the cluster's id; `cluster start` then marks it (mark_named)."""
    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(tmp_path / "s"), ["t/0"], 1.0)
    del lc.meta[NAMED]
    lc.save()
    lc = LocalCluster(tmp_path / "c")
    assert lc.legacy_allowed
    cid = lc.cluster_id()
    ensure_identity(str(lc.node_dir(1)), cid, 1)
    ensure_identity(str(lc.node_dir(2)), LEGACY_CLUSTER_ID, 2)
    assert not lc.mark_named()  # node 2 not yet rewritten, node 3 never started
    ensure_identity(str(lc.node_dir(2)), cid, 2, adopt={LEGACY_CLUSTER_ID})
    assert not lc.mark_named()
    ensure_identity(str(lc.node_dir(3)), cid, 3)
    assert lc.mark_named() and not lc.legacy_allowed
    assert LocalCluster(tmp_path / "c").meta[NAMED] is True  # saved
    assert not lc.mark_named()  # once


def test_a_mark_that_is_not_a_boolean_is_a_damaged_file(tmp_path: Path) -> None:
    # Read as truthy it would refuse the cluster's own old-format directories, as falsy
    # adopt a foreign one: neither is guessed (65, DamagedClusterFile, one line).
    lc = LocalCluster(tmp_path / "c")
    lc.init(1, str(tmp_path / "s"), ["t/0"], 1.0)
    lc.meta[NAMED] = "yes"
    lc.save()
    with pytest.raises(DamagedClusterFile, match=rf"field '{NAMED}' is not true or false"):
        LocalCluster(tmp_path / "c")
