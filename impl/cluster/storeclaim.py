"""`cluster start`'s side of "a store belongs to one cluster" (impl/cluster/owner.py): read
the store's owner before the start writes anything and refuse another cluster's store;
name this cluster as the owner of a store that names none, by a conditional create.

The rule for a start (new or restart), by what DATA_DIR/cluster.json and the store hold:
- the store names this cluster's id: the start goes on;
- the store names another id: refused (64), naming the store and the data directory that
  owns it, nothing started, nothing written;
- the store names none but holds a cluster's data (`held_data`: its partition table, a
  health report, an L0 or L1 object) and DATA_DIR has no cluster.json yet: refused (64).
  Such a store is a cluster's made before stores named their cluster (every live cluster
  at the upgrade), and a new cluster that took it would write over that cluster's reports
  and its GC delete that cluster's acknowledged data (review41a R1: newuser18 U1 again).
  Only an existing data directory adopts it (below); `chaos --store` is refused the same;
- the store names none: this cluster's id is written into cluster.json (a new cluster's
  file, or a cluster made before stores named their cluster: an existing data directory
  keeps working and adopts its store), then into the store by a create that succeeds only
  if no owner is there; a start that loses that race is refused as above, and a new
  cluster's file it had written is removed. A create whose outcome is unknown (an error, a
  signal) leaves the file: the same start again finds its own id in the store, or none."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.cluster.owner import (
    OWNER_KEY,
    DamagedOwner,
    Owner,
    claim,
    owner_for,
    read_owner,
)
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.manifest import DATA_PREFIX
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY
from epochgc.impl.preflight import Refused, bounded_store
from epochgc.impl.signals import checkpoint
from epochgc.impl.store.base import NoConditionalWrites, ObjectStore, StoreError
from epochgc.impl.store.url import StoreSpec

NOTHING = "nothing was started"
# What only a cluster writes to its store (its nodes: the partition table, health reports,
# L0 objects under DATA_PREFIX, reconciled L1 objects: impl/broker/reconciler.py). Not
# `_cluster/preflight/` or `_cluster/gc/` probes, which a refused start or a gc may leave.
CLUSTER_DATA = (PARTITIONS_KEY, HEALTH_PREFIX, DATA_PREFIX, "level_one/")
_WAY_OUT = ("restart the cluster it belongs to from its own data directory (that start "
            "names it the store's owner), or give this one a store of its own; "
            "docs/operations.md \"One store, one cluster\"")


def owner_store(spec: StoreSpec,
                say: Callable[[str], None]) -> contextlib.AbstractContextManager[ObjectStore]:
    """The store, its requests bounded and said as the start's store preflight's are
    (`preflight.store_writable`: an S3 endpoint that never answers is said, not silent)."""
    return bounded_store(spec, say, f"the store's cluster id ({OWNER_KEY!r})")


def store_owner(store: ObjectStore, spec: StoreSpec, lc: LocalCluster) -> Owner | None:
    """The store's owner (None: it names none); refused if it is another cluster."""
    where = spec.describe()
    try:
        found = read_owner(store)
    except DamagedOwner as e:
        raise Refused(f"store {where}: {OWNER_KEY} is damaged ({e}); it names the cluster the "
                      "store belongs to: restore it, or remove it only if no other cluster "
                      f"uses this store ({NOTHING})", ExitCode.DATAERR) from None
    except StoreError as e:
        raise Refused(f"store {where}: cannot read {OWNER_KEY}: {e} ({NOTHING})",
                      ExitCode.FAILED) from None
    if found is not None and found.cluster_id != lc.meta.get("cluster_id"):
        raise Refused(another_cluster(spec, found, lc), ExitCode.USAGE)
    return found


def held_data(store: ObjectStore) -> str | None:
    """The first key of a cluster's data the store holds (None: none). One listing of at
    most one key per prefix; an entry a local store will not list as an object (a link)
    counts: something is there."""
    for prefix in CLUSTER_DATA:
        page = store.list_page(prefix, limit=1)
        if page.objects:
            return page.objects[0].key
        if page.refused:
            return page.refused[0][0]
    return None


def refuse_held_data(store: ObjectStore, spec: StoreSpec, who: str) -> None:
    """Refused (64) if the store, which names no cluster, holds a cluster's data: a cluster
    made before stores named their cluster, which `who` (a new cluster) must not take."""
    try:
        found = held_data(store)
    except StoreError as e:
        raise Refused(f"store {spec.describe()}: cannot list it for a cluster's data: {e} "
                      f"({NOTHING})", ExitCode.FAILED) from None
    if found is not None:
        raise Refused(f"refused: store {spec.describe()} names no cluster but holds a "
                      f"cluster's data ({found!r}): a cluster made before stores named their "
                      f"cluster; {who} is a new cluster and would take it over: {_WAY_OUT} "
                      f"({NOTHING})", ExitCode.USAGE)


def claim_store(store: ObjectStore, spec: StoreSpec, lc: LocalCluster, new: bool) -> None:
    """Name this cluster (cluster.json's id, saved already) as the store's owner; refused
    if another start won the race (`new`: this start wrote cluster.json: removed)."""
    mine = owner_for(str(lc.meta["cluster_id"]), str(lc.dir))
    try:
        store.require_conditional_writes()
    except NoConditionalWrites as e:
        if new:  # nothing was sent: a refused start leaves no cluster behind
            lc.meta_path.unlink(missing_ok=True)
        raise Refused(f"store {spec.describe()} does not enforce conditional writes ({e}): "
                      "the store names the cluster it belongs to by a create-only-if-absent, "
                      f"which it would not make exclusive ({NOTHING})", ExitCode.FAILED) from None
    # From the create on, its outcome may be unknown (an error, a signal: the request may
    # have been applied): cluster.json keeps the id, so the same start again finds its own
    # id in the store, or a store naming none and claims it. Removed only on a lost race.
    found = _claim(store, spec, mine)
    if found is None or found.cluster_id == mine.cluster_id:
        return
    if new:  # another start's id is there: this start's own file goes
        lc.meta_path.unlink(missing_ok=True)
    raise Refused(another_cluster(spec, found, lc), ExitCode.USAGE)


def _claim(store: ObjectStore, spec: StoreSpec, mine: Owner) -> Owner | None:
    """`claim`, its failures as one-line refusals."""
    where = spec.describe()
    try:
        checkpoint("claim")  # the race test's point: both starts have found no owner
        return claim(store, mine)
    except DamagedOwner as e:
        raise Refused(f"store {where}: {OWNER_KEY} is damaged ({e}) ({NOTHING})",
                      ExitCode.DATAERR) from None
    except StoreError as e:
        raise Refused(f"store {where}: cannot write {OWNER_KEY}: {e} ({NOTHING})",
                      ExitCode.FAILED) from None


def claim_for_new_cluster(spec: StoreSpec, label: str, say: Callable[[str], None]) -> None:
    """For a command that runs a new cluster of its own on a store given to it (`epochgc
    chaos --store`): a store that names a cluster already (a live cluster's, or an earlier
    run's) is refused (64), else this run's new cluster is named its owner. `label` says
    where the run keeps its data (the owner document's data directory)."""
    from epochgc.impl.cluster.owner import new_cluster_id

    where = spec.describe()
    mine = owner_for(new_cluster_id(), label)
    with owner_store(spec, say) as store:
        try:
            found = read_owner(store)
            if found is None:
                refuse_held_data(store, spec, "this run")
                store.require_conditional_writes()
                found = claim(store, mine)
        except DamagedOwner as e:
            raise Refused(f"store {where} holds {OWNER_KEY}, damaged ({e}): it is a cluster's "
                          f"store; give this run a store of its own ({NOTHING})",
                          ExitCode.USAGE) from None
        except NoConditionalWrites as e:
            raise Refused(f"store {where} does not enforce conditional writes ({e}) "
                          f"({NOTHING})", ExitCode.FAILED) from None
        except StoreError as e:
            raise Refused(f"store {where}: cannot read or write {OWNER_KEY}: {e} ({NOTHING})",
                          ExitCode.FAILED) from None
    # Its own id found: the create was applied and its answer lost, and a retry answered
    # "exists" (review41a R2; `claim_store` compares the same way).
    if found is not None and found.cluster_id != mine.cluster_id:
        raise Refused(f"refused: the store belongs to another cluster: {where} is cluster "
                      f"{found.cluster_id}'s (data directory {found.where()}); this command "
                      f"runs a new cluster: give it a store of its own ({NOTHING})",
                      ExitCode.USAGE)


def another_cluster(spec: StoreSpec, owner: Owner, lc: LocalCluster) -> str:
    """One line: the store, the cluster that owns it, this data directory, the way on."""
    old = ("; this cluster's file names no cluster id (it was made before stores named "
           "their cluster) and the store was taken by another since"
           if lc.meta and "cluster_id" not in lc.meta else "")
    if owner.where() == str(lc.dir):  # made on this host, in this data directory
        # newuser20 W5: "... (data directory D), not the one under D" read as a
        # contradiction: D was removed or replaced, and the cluster in it now is new.
        return (f"refused: the store belongs to another cluster: {spec.describe()} is "
                f"cluster {owner.cluster_id}'s, made in this data directory ({lc.dir}), "
                f"which no longer holds it (removed or replaced since); give this cluster "
                f"a store of its own: docs/operations.md, 'One store, one cluster' ({NOTHING})")
    return (f"refused: the store belongs to another cluster: {spec.describe()} is cluster "
            f"{owner.cluster_id}'s (data directory {owner.where()}), not the one under "
            f"{lc.dir}{old}; give this cluster a store of its own (one store, one cluster: "
            f"docs/operations.md) ({NOTHING})")
