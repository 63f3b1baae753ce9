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
from epochgc.impl.raft.diskformat import FORMAT, FORMAT4, MAGIC, SNAP_FORMAT
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
        self.found = found


class IdentityUnreadable(Exception):
    """The identity file exists but cannot be parsed: refuse to start."""


class IdentityMissing(Exception):
    """The identity file is gone from a directory this version already wrote (format-4 group
    data): it was deleted, or the directory copied without it. Refuse rather than adopt."""

    def __init__(self, path: str, evidence: str) -> None:
        super().__init__(
            # The evidence is format 4 or 5 (`_group_data`): the format number docs/
            # operations.md gives, not this version's alone (newuser22 Y5).
            f"{path} is missing, but {evidence} holds data in on-disk format {FORMAT4} or "
            "later, written by a version that writes the identity file before any group: "
            "the file was "
            "deleted, or the directory was copied from another node without it. Refusing to "
            "adopt a new identity (it could vote with another node's term and vote). Restore "
            "the file, or give this node its own empty data directory and let it catch up "
            "from its peers."
        )
        self.path = path


class IdentityUnnamed(IdentityMissing):
    """No identity file, but Raft group data a version from before identity files wrote
    (format 3): the directory names no cluster. Refused where the cluster cannot hold such a
    directory (review41c C7: `adopt_unnamed` False)."""

    def __init__(self, path: str, evidence: str, cluster_id: str) -> None:
        Exception.__init__(
            self,
            f"{path} is missing, and {evidence} holds Raft data of a version from before "
            f"node identity files: the directory names no cluster, and cluster {cluster_id!r} "
            "has none such (created by this version, or every node's identity rewritten "
            "since), so it came from another cluster or a backup. Refusing to start on it "
            "(it would vote with another node's term and vote, and serve its log). Give "
            "this node its own empty data directory and let it catch up from its peers."
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
        except UnicodeDecodeError as e:  # said in a sentence, not Python's codec words
            raise IdentityUnreadable(
                f"{path}: unreadable node identity file: not UTF-8 text (byte "
                f"0x{raw[e.start]:02x} at offset {e.start}).") from e
        except KeyError as e:
            raise IdentityUnreadable(
                f"{path}: unreadable node identity file: no {e.args[0]}= line.") from e
        except ValueError as e:
            raise IdentityUnreadable(f"{path}: unreadable node identity file: {e}.") from e


def check_identity(
    data_dir: str, cluster_id: str, node_id: int, adopt: Collection[str] = (),
    fs: FileIO | None = None, adopt_unnamed: bool = True,
) -> NodeIdentity | None:
    """What `ensure_identity` would find, writing nothing: the identity of `data_dir`, or
    None if a start would write a new one (no file, no format-4 group data). Raises as
    `ensure_identity` does. A file naming a cluster in `adopt` (LEGACY_CLUSTER_ID: an older
    version's, which named no cluster) and this node is returned as found: the start
    rewrites it with `cluster_id`. `adopt_unnamed` False: a directory with group data of a
    version before identity files and no file raises IdentityUnnamed (not adopted)."""
    fs = fs or OsFileIO()
    path = os.path.join(data_dir, IDENTITY_FILE)
    if fs.exists(path):
        found = NodeIdentity.decode(path, fs.read(path))
        if found.node_id != node_id or (
                found.cluster_id != cluster_id and found.cluster_id not in adopt):
            raise IdentityMismatch(path, found, cluster_id, node_id)
        return found
    first, named = _group_data(fs, data_dir) if fs.exists(data_dir) else (None, None)
    if named is not None:
        raise IdentityMissing(path, named)
    if first is not None and not adopt_unnamed:
        raise IdentityUnnamed(path, first, cluster_id)
    return None


def ensure_identity(
    data_dir: str, cluster_id: str, node_id: int, fs: FileIO | None = None,
    adopt: Collection[str] = (), adopt_unnamed: bool = True,
) -> NodeIdentity:
    """Return the identity of `data_dir`, writing it (durably) at the first start; raise
    IdentityMismatch if the directory belongs to another cluster or node, IdentityUnreadable
    if the file is damaged, IdentityMissing if the file is gone from a directory whose groups
    hold format-4 data. A directory of an older version (format 3) without the file adopts
    the identity it is started with; a file of this node naming a cluster in `adopt` is
    rewritten with `cluster_id` (its incarnation kept); `adopt_unnamed` False refuses the
    format-3 directory (IdentityUnnamed)."""
    fs = fs or OsFileIO()
    make_dirs_durable(fs, data_dir)
    path = os.path.join(data_dir, IDENTITY_FILE)
    found = check_identity(data_dir, cluster_id, node_id, adopt, fs, adopt_unnamed)
    if found is not None and found.cluster_id == cluster_id:
        return found
    ident = NodeIdentity(cluster_id, node_id,
                         found.incarnation if found is not None else os.urandom(8).hex())
    atomic_write(path, ident.encode(), fs)
    return ident


_GROUP = re.compile(r"g\d+")


def _group_data(fs: FileIO, data_dir: str) -> tuple[str | None, str | None]:
    """(the first group file under `data_dir`, the first one in an on-disk format of a
    version that writes the identity file first): a snapshot file or segment of a `gN`
    group directory, regular files only. Formats 4 and 5 wrote identity files (segment
    magic byte, snapshot header byte SNAP_FORMAT: impl/raft/diskformat.py, diskrecovery.py);
    format 3 did not."""
    first = None
    for g in sorted(fs.listdir(data_dir)):
        gdir = os.path.join(data_dir, g)
        if not _GROUP.fullmatch(g) or fs.entry_kind(gdir) is not EntryKind.DIRECTORY:
            continue
        for n in sorted(fs.listdir(gdir)):
            p = os.path.join(gdir, n)
            ours = n == "snapshot" or n.endswith(".seg")
            if not ours or fs.entry_kind(p) is not EntryKind.REGULAR:
                continue
            first = first or p
            raw = fs.read(p)
            if n == "snapshot" and raw[4:5] == bytes([SNAP_FORMAT]):
                return first, p
            if n != "snapshot" and raw[:7] == MAGIC[:7] and raw[7:8] in (
                    bytes([FORMAT]), bytes([FORMAT4])):
                return first, p
    return first, None
