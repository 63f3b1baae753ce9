"""The node identity file of a data directory: which cluster and node the directory belongs to.

Raft's safety rests on every node remembering its term and vote. A data directory copied from
another node, or a node started on the wrong directory, would vote with someone else's memory
(two votes in one term: two leaders). `ensure_identity` writes `node-identity` at the first
start (cluster id, node id, a random incarnation) and refuses every later start whose cluster
or node id differs, naming the file and both identities.

What this cannot catch: a node restored in place from an old backup of its *own* directory
(same cluster, same node, older term and vote). Raft cannot prevent that double vote; the
operator rule is "a lost node is rebuilt from a peer, never restored in place" (see
docs/operations.md and impl/raft/README.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass

from epochgc.impl.raft.atomicfile import atomic_write
from epochgc.impl.raft.diskformat import FORMAT, MAGIC
from epochgc.impl.raft.fileio import EntryKind, FileIO, OsFileIO, make_dirs_durable

IDENTITY_FILE = "node-identity"
_HEADER = "epochgc node identity v1"
# The cluster id every broker before this version wrote, whatever its cluster (newuser21 X1:
# impl/cluster/node_main.py passed this constant, never DATA_DIR/cluster.json's random id).
# Such a file says nothing about the cluster, so a start may adopt it (`adopt`).
LEGACY_CLUSTER_ID = "epochgc"


class IdentityMismatch(Exception):
    """The data directory belongs to another cluster or node: refuse to start."""

    def __init__(self, path: str, found: NodeIdentity, cluster_id: str, node_id: int) -> None:
        super().__init__(
            f"{path}: this data directory belongs to node {found.node_id} of cluster "
            f"{found.cluster_id!r} (incarnation {found.incarnation}), not to node {node_id} of "
            f"cluster {cluster_id!r}: refusing to start (a directory copied from another node "
            "or cluster would vote with that node's term and vote, and serve its log). Give "
            "this node its own empty data directory and let it catch up from its peers."
        )
        self.path = path


class IdentityUnreadable(Exception):
    """The identity file exists but cannot be parsed: refuse to start."""


class IdentityMissing(Exception):
    """The identity file is gone from a directory this version already wrote (format-4 group
    data): it was deleted, or the directory copied without it. Refuse rather than adopt."""

    def __init__(self, path: str, evidence: str) -> None:
        super().__init__(
            f"{path} is missing, but {evidence} holds on-disk format-{FORMAT} data written by "
            "this version, which writes the identity file before any group: the file was "
            "deleted, or the directory was copied from another node without it. Refusing to "
            "adopt a new identity (it could vote with another node's term and vote). Restore "
            "the file, or give this node its own empty data directory and let it catch up "
            "from its peers."
        )
        self.path = path


@dataclass(frozen=True)
class NodeIdentity:
    cluster_id: str
    node_id: int
    incarnation: str  # random hex, new for every freshly created data directory

    def encode(self) -> bytes:
        return (
            f"{_HEADER}\ncluster={self.cluster_id}\nnode={self.node_id}\n"
            f"incarnation={self.incarnation}\n"
        ).encode()

    @staticmethod
    def decode(path: str, raw: bytes) -> NodeIdentity:
        try:
            lines = raw.decode().splitlines()
            if not lines or lines[0] != _HEADER:
                raise ValueError(f"first line is not {_HEADER!r}")
            kv = dict(line.split("=", 1) for line in lines[1:] if line)
            return NodeIdentity(kv["cluster"], int(kv["node"]), kv["incarnation"])
        except (UnicodeDecodeError, ValueError, KeyError) as e:
            raise IdentityUnreadable(f"{path}: unreadable node identity file: {e}") from e


def check_identity(
    data_dir: str, cluster_id: str, node_id: int, adopt: Collection[str] = (),
    fs: FileIO | None = None,
) -> NodeIdentity | None:
    """What `ensure_identity` would find, writing nothing: the identity of `data_dir`, or
    None if a start would write a new one (no file, no format-4 group data). Raises as
    `ensure_identity` does. A file naming a cluster in `adopt` (LEGACY_CLUSTER_ID: an older
    version's, which named no cluster) and this node is returned as found: the start
    rewrites it with `cluster_id`."""
    fs = fs or OsFileIO()
    path = os.path.join(data_dir, IDENTITY_FILE)
    if fs.exists(path):
        found = NodeIdentity.decode(path, fs.read(path))
        if found.node_id != node_id or (
                found.cluster_id != cluster_id and found.cluster_id not in adopt):
            raise IdentityMismatch(path, found, cluster_id, node_id)
        return found
    evidence = _format4_evidence(fs, data_dir) if fs.exists(data_dir) else None
    if evidence is not None:
        raise IdentityMissing(path, evidence)
    return None


def ensure_identity(
    data_dir: str, cluster_id: str, node_id: int, fs: FileIO | None = None,
    adopt: Collection[str] = (),
) -> NodeIdentity:
    """Return the identity of `data_dir`, writing it (durably) at the first start; raise
    IdentityMismatch if the directory belongs to another cluster or node, IdentityUnreadable
    if the file is damaged, IdentityMissing if the file is gone from a directory whose groups
    hold format-4 data. A directory of an older version (format 3) without the file adopts
    the identity it is started with; a file of this node naming a cluster in `adopt` is
    rewritten with `cluster_id` (its incarnation kept)."""
    fs = fs or OsFileIO()
    make_dirs_durable(fs, data_dir)
    path = os.path.join(data_dir, IDENTITY_FILE)
    found = check_identity(data_dir, cluster_id, node_id, adopt, fs)
    if found is not None and found.cluster_id == cluster_id:
        return found
    ident = NodeIdentity(cluster_id, node_id,
                         found.incarnation if found is not None else os.urandom(8).hex())
    atomic_write(path, ident.encode(), fs)
    return ident


_GROUP = re.compile(r"g\d+")


def _format4_evidence(fs: FileIO, data_dir: str) -> str | None:
    """A file of a group directory under `data_dir` in on-disk format 4 (a snapshot file or
    a segment with the format-4 magic), or None. Only regular files are read."""
    for g in sorted(fs.listdir(data_dir)):
        gdir = os.path.join(data_dir, g)
        if not _GROUP.fullmatch(g) or fs.entry_kind(gdir) is not EntryKind.DIRECTORY:
            continue
        for n in sorted(fs.listdir(gdir)):
            p = os.path.join(gdir, n)
            ours = n == "snapshot" or n.endswith(".seg")
            if not ours or fs.entry_kind(p) is not EntryKind.REGULAR:
                continue
            raw = fs.read(p)
            if (n == "snapshot" and raw[4:5] == bytes([FORMAT])) or raw[: len(MAGIC)] == MAGIC:
                return p
    return None
