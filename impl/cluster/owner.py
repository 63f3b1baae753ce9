"""A store belongs to one cluster: `_cluster/cluster-id.json` names it (newuser18 U1).

Two clusters on one store write the same `_cluster/partitions.json` and
`_cluster/health/n<id>.json`; GC then computed M from the other cluster's reports and
deleted an acknowledged, unreconciled object of this one (50 records lost). So the first
`cluster start` on a store writes this cluster's id there, by a conditional create
(`ObjectStore.create_if_absent`: a hard link on a local store, S3 `PutObject` with
`If-None-Match: *`), so of two starts racing on a new store exactly one wins; the same id
is kept in DATA_DIR/cluster.json, and every later start compares the two before anything
starts. Redpanda guards the same way: a cluster's objects carry its cluster UUID
(src/v/cloud_storage/remote_label.h, "Label that can be used to uniquely identify objects
written by a cluster"; cluster metadata under `cluster_metadata/<cluster_uuid>/`,
src/v/cluster/cloud_metadata/key_utils.h), so several clusters can share one bucket.

The key sorts before `_cluster/gc/` and `_cluster/health/`: the reports reader lists from
`_cluster/h` to `_cluster/partitions.json` only (impl/gc/reports.py `_list_watched`), and
GC lists `level_zero/` only, so neither ever sees it."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from dataclasses import asdict, dataclass

from epochgc.impl.store.base import ConditionalConflict, NotAnObject, ObjectStore

OWNER_KEY = "_cluster/cluster-id.json"
# What `new_cluster_id` makes, and all cluster.json's `cluster_id` may hold.
ID_PATTERN = re.compile(r"[0-9a-f]{32}")
_MAX_BYTES = 4096
# Retries of a create answered 409 ConditionalRequestConflict (a concurrent request on the
# key completed first: S3's advice is to read again; the read then finds the winner).
_CONFLICT_TRIES = 5


class DamagedOwner(ValueError):
    """The store's cluster-id object is not one `claim` writes: bad input data (65)."""


@dataclass(frozen=True)
class Owner:
    """The cluster a store belongs to: its id, and where its start ran (for messages)."""

    cluster_id: str
    data_dir: str  # absolute, as the owning cluster's first start named it
    host: str
    created_at: float

    def where(self) -> str:
        here = socket.gethostname()
        return self.data_dir if self.host == here else f"{self.data_dir} on host {self.host}"


def new_cluster_id() -> str:
    """A new random id (RFC 4122 version 4, 32 hex digits): unique without coordination."""
    return uuid.uuid4().hex


def owner_for(cluster_id: str, data_dir: str) -> Owner:
    return Owner(cluster_id, data_dir, socket.gethostname(), time.time())


def encode(owner: Owner) -> bytes:
    return (json.dumps(asdict(owner), indent=1, sort_keys=True) + "\n").encode()


def decode(raw: bytes) -> Owner:
    """`raw` as an Owner, else DamagedOwner saying what is wrong (not where)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise DamagedOwner(f"not a JSON document ({e})") from None
    if not isinstance(doc, dict):
        raise DamagedOwner(f"not a JSON object (a {type(doc).__name__})")
    cid, data_dir, host, at = (doc.get(k) for k in ("cluster_id", "data_dir", "host",
                                                    "created_at"))
    if not isinstance(cid, str) or not ID_PATTERN.fullmatch(cid):
        raise DamagedOwner(f"field 'cluster_id' is not 32 hexadecimal digits: {cid!r:.60}")
    if not isinstance(data_dir, str) or not isinstance(host, str):
        raise DamagedOwner("field 'data_dir' or 'host' is not a string")
    if not isinstance(at, int | float) or isinstance(at, bool):
        raise DamagedOwner(f"field 'created_at' is not a number: {at!r:.60}")
    return Owner(cid, data_dir, host, float(at))


def read_owner(store: ObjectStore) -> Owner | None:
    """The store's owner, None if it names none. StoreError if it cannot be read,
    DamagedOwner if what is there is not an owner document."""
    try:
        # One read, and an entry that is not an object (a local link or directory) said as
        # such: `head` reports one as absent, and a claim would then fail on the name.
        got = store.get_versioned(OWNER_KEY, _MAX_BYTES + 1)
    except NotAnObject as e:
        raise DamagedOwner(f"not an object: {e}") from None
    if got is None:
        return None
    if len(got.data) > _MAX_BYTES:
        raise DamagedOwner(f"over {_MAX_BYTES} bytes (an owner document is far smaller)")
    return decode(got.data)


def claim(store: ObjectStore, mine: Owner) -> Owner | None:
    """Make `mine` the store's owner if it has none, in one conditional create: None if
    this call made it, else the owner found (another start won the race, or a crashed
    start of this same cluster made it: the caller compares the ids). StoreError,
    NoConditionalWrites (a store that cannot create only if absent) pass through."""
    for _ in range(_CONFLICT_TRIES):
        try:
            if store.create_if_absent(OWNER_KEY, encode(mine)) is not None:
                return None
        except ConditionalConflict:
            pass  # a concurrent create completed first: read what it wrote
        found = read_owner(store)
        if found is not None:
            return found
    raise ConditionalConflict(f"cannot create {OWNER_KEY!r}: {_CONFLICT_TRIES} conditional "
                              "creates answered a conflict and no owner is there")
