"""Issue 27 item 7: a data directory remembers the cluster and node it belongs to; a start
with another node id (a directory copied from another node, or the wrong --data-dir) or
another cluster is refused with a message naming both."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from epochgc.impl.raft.diskformat import SNAP_FORMAT
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.identity import (
    IDENTITY_FILE,
    LEGACY_CLUSTER_ID,
    IdentityMismatch,
    IdentityMissing,
    IdentityUnnamed,
    IdentityUnreadable,
    NodeIdentity,
    check_identity,
    ensure_identity,
)
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.server import RaftServer
from epochgc.impl.raft.transport import TransportConfig


def test_first_start_writes_the_identity_and_later_starts_check_it(tmp_path: Path) -> None:
    d = tmp_path / "data" / "n1"
    first = ensure_identity(str(d), "prod", 1)
    assert (d / IDENTITY_FILE).exists()
    assert ensure_identity(str(d), "prod", 1) == first
    with pytest.raises(
        IdentityMismatch, match=r"belongs to node 1 of cluster 'prod'.*not to node 2"
    ):
        ensure_identity(str(d), "prod", 2)
    with pytest.raises(IdentityMismatch, match="cluster 'test'"):
        ensure_identity(str(d), "test", 1)
    other = ensure_identity(str(tmp_path / "n1-again"), "prod", 1)
    assert other.incarnation != first.incarnation


def test_a_damaged_identity_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / IDENTITY_FILE).write_bytes(b"\xff garbage")
    with pytest.raises(IdentityUnreadable, match=IDENTITY_FILE):
        ensure_identity(str(tmp_path), "prod", 1)


def test_a_server_on_another_nodes_data_directory_refuses_to_start(tmp_path: Path) -> None:
    # Old code: node 2 started on node 1's directory and voted with node 1's term and vote.
    def server(nid: int) -> RaftServer:
        peers = {i: ("127.0.0.1", 1) for i in (1, 2, 3) if i != nid}
        return RaftServer(TransportConfig(nid, "c", 1, peers), str(tmp_path / "n1"), Config())

    server(1)
    with pytest.raises(IdentityMismatch, match="not to node 2"):
        server(2)


def test_an_older_versions_identity_is_adopted_only_when_allowed(tmp_path: Path) -> None:
    # newuser21 X1: every broker before this version wrote cluster=epochgc (no cluster id).
    # Such a file of this node may take the cluster's id (its incarnation kept); without
    # `adopt` it is another cluster's, and a legacy file of another node is never adopted.
    d = tmp_path / "n1"
    old = ensure_identity(str(d), LEGACY_CLUSTER_ID, 1)
    with pytest.raises(IdentityMismatch, match=r"cluster 'epochgc'.*cluster 'c1'"):
        ensure_identity(str(d), "c1", 1)
    with pytest.raises(IdentityMismatch, match="not to node 2"):
        ensure_identity(str(d), "c1", 2, adopt={LEGACY_CLUSTER_ID})
    assert check_identity(str(d), "c1", 1, {LEGACY_CLUSTER_ID}) == old  # nothing written
    assert NodeIdentity.decode("x", (d / IDENTITY_FILE).read_bytes()) == old
    now = ensure_identity(str(d), "c1", 1, adopt={LEGACY_CLUSTER_ID})
    assert now == NodeIdentity("c1", 1, old.incarnation)
    assert NodeIdentity.decode("x", (d / IDENTITY_FILE).read_bytes()) == now
    # Adopted once: from now on another cluster's start is refused, 'epochgc' included.
    with pytest.raises(IdentityMismatch, match="cluster 'c1'"):
        ensure_identity(str(d), "c2", 1, adopt={LEGACY_CLUSTER_ID})


def test_checking_a_first_start_writes_nothing(tmp_path: Path) -> None:
    # `cluster start` checks every node's directory before starting any (read-only).
    d = tmp_path / "absent" / "n1"
    assert check_identity(str(d), "c", 1) is None
    assert not (tmp_path / "absent").exists()


FORMAT3 = Path(__file__).parent / "fixtures" / "format3" / "g3"


def test_a_format3_directory_is_adopted_only_where_allowed(tmp_path: Path) -> None:
    # review41c C7: a directory from before identity files names no cluster. Adopted by
    # default (an upgrading node), refused with `adopt_unnamed=False` (a cluster that cannot
    # hold one), writing nothing.
    d = tmp_path / "n1"
    shutil.copytree(FORMAT3, d / "g3")
    with pytest.raises(IdentityUnnamed, match=rf"{IDENTITY_FILE} is missing, and .*g3/"
                       r".* before node identity files.* cluster 'c1'"):
        ensure_identity(str(d), "c1", 1, adopt_unnamed=False)
    assert not (d / IDENTITY_FILE).exists()
    assert check_identity(str(d), "c1", 1) is None
    assert ensure_identity(str(d), "c1", 1).cluster_id == "c1"
    # An empty directory, or group directories without data, is a first start either way.
    assert check_identity(str(tmp_path / "empty"), "c1", 1, adopt_unnamed=False) is None
    (tmp_path / "e" / "g7").mkdir(parents=True)
    assert check_identity(str(tmp_path / "e"), "c1", 1, adopt_unnamed=False) is None


def test_a_format4_group_without_the_file_is_refused(tmp_path: Path) -> None:
    # Format 4 wrote the identity file before any group, as format 5 does: with the file
    # gone, a format-4 snapshot is evidence too (old code compared its header byte with the
    # segment format 5, and took such a directory as format 3, adopted silently).
    d = tmp_path / "n1"
    shutil.copytree(FORMAT3, d / "g3")
    DiskStorage(str(d / "g3")).load()  # the upgrade rewrites it: format-4 snapshot, format-5 log
    assert (d / "g3" / "snapshot").read_bytes()[4] == SNAP_FORMAT
    for seg in (d / "g3").glob("*.seg"):
        seg.unlink()  # only the snapshot is left
    with pytest.raises(IdentityMissing, match=r"g3/snapshot") as e:
        check_identity(str(d), "c1", 1)
    # newuser22 Y5: the refusal said "format-5 data written by this version" for this
    # format-4 snapshot (and a previous version's format-4 segment), where
    # docs/operations.md says "format 4 or later": both say what the evidence shows.
    assert "on-disk format 4 or later" in str(e.value), e.value
    assert "format-5" not in str(e.value) and "this version" not in str(e.value), e.value
