"""Issue 38 item 3: the single-object conditional writes the GC lease and reset stand on,
on a local directory, moto and SeaweedFS; what each S3 server enforces; and the refusal of
a server that does not (the fault proxy strips the conditions, as such a server ignores
them). S3's answers are the API reference's: PutObject If-None-Match / If-Match 412 (409
on a concurrent conflict), DeleteObject If-Match 412 / 404."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.store.base import NoConditionalWrites, Outcome, StoreError
from epochgc.impl.store.s3 import PROBE_KEY, S3Store
from epochgc.impl.store.url import StoreSpec
from tests.store.backends import Opener
from tests.store.s3proxy import Call, Fault, S3Proxy, s3_proxy

pytestmark = pytest.mark.s3


def test_create_replace_delete_compare_the_version(open_store: Opener) -> None:
    store = open_store()
    v1 = store.create_if_absent("d/k", b"one")
    assert v1 and store.create_if_absent("d/k", b"two") is None
    got = store.get_versioned("d/k", 100)
    assert got is not None and got.data == b"one" and got.version == v1
    info = store.head("d/k")
    assert info is not None and info.version == v1  # S3: head() gives the ETag now
    assert store.replace_if_match("d/k", b"three", "wrong") is None
    v3 = store.replace_if_match("d/k", b"three", v1)
    assert v3 and v3 != v1 and store.get("d/k") == b"three"
    assert store.replace_if_match("d/k", b"four", v1) is None  # v1 is gone
    assert store.delete_if_match("d/k", v1) is Outcome.CHANGED and store.get("d/k") == b"three"
    assert store.delete_if_match("d/k", v3) is Outcome.DELETED and store.head("d/k") is None
    # A local store looks itself: absent. S3's 404 (or SeaweedFS's 412, then a HEAD) cannot
    # tell "was not there" from a copy of this request, sent before by an intermediary,
    # removing it: gone, "removed by this request or another" (review rev38z9 finding 3).
    absent = Outcome.GONE if isinstance(store, S3Store) else Outcome.ABSENT
    assert store.delete_if_match("d/k", v3) is absent
    assert store.replace_if_match("d/k", b"five", v3) is None and store.head("d/k") is None
    assert store.get_versioned("d/k", 100) is None
    with pytest.raises(StoreError, match="version is unknown"):
        store.replace_if_match("d/k", b"x", "")  # never a write by name
    with pytest.raises(StoreError, match="version is unknown"):
        store.delete_if_match("d/k", "")


def test_each_s3_server_enforces_conditional_writes(s3_endpoint: str, s3_bucket: str) -> None:
    """moto 5.2.5 and SeaweedFS 4.48 both refuse a create over an object, and a replace and
    a delete with the wrong ETag (412); the probe leaves nothing behind."""
    store = S3Store(s3_bucket, "gc", endpoint_url=s3_endpoint)
    store.require_conditional_writes()
    assert [o.key for o in store.list_all(PROBE_KEY)] == []


@pytest.fixture
def faulty(s3_endpoint: str) -> Iterator[tuple[S3Proxy, list[Fault | None]]]:
    """A proxy whose next faults are taken from a list (one per lease write), then none."""
    plan: list[Fault | None] = []

    def faults(call: Call) -> Fault | None:
        if call.key.endswith(LEASE_KEY) and call.kind == "put" and plan:
            return plan.pop(0)
        return None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        yield p, plan


def test_a_server_that_ignores_the_conditions_is_refused(
    s3_endpoint: str, s3_bucket: str
) -> None:
    with s3_proxy(s3_endpoint, faults=lambda c: Fault.IGNORE_CONDITIONS) as p:
        store = S3Store(s3_bucket, "gc", endpoint_url=p.endpoint)
        with pytest.raises(NoConditionalWrites, match=r"If-None-Match: \*, PutObject If-Match, "
                           "DeleteObject If-Match"):
            store.require_conditional_writes()
        with pytest.raises(GcError, match="does not enforce conditional writes"):
            Lease(StoreSpec("s3", s3_bucket, "gc", p.endpoint), "round-A").acquire()
        assert p.faulted[Fault.IGNORE_CONDITIONS] >= 3
    assert S3Store(s3_bucket, "gc", endpoint_url=s3_endpoint).head(LEASE_KEY) is None


@pytest.mark.parametrize("fault", [Fault.APPLIED_THEN_500, Fault.APPLIED_THEN_RESET])
def test_a_lease_write_applied_but_answered_with_an_error_is_still_ours(
    faulty: tuple[S3Proxy, list[Fault | None]], s3_endpoint: str, s3_bucket: str,
    fault: Fault,
) -> None:
    """The create and then the takeover are applied and answered 500 (or no answer);
    botocore retries the conditional PUT, which the server refuses (412: it is there now):
    the lease reads back its own token and holds it, rather than refusing itself."""
    proxy, plan = faulty
    spec = StoreSpec("s3", s3_bucket, "gc", proxy.endpoint)
    plan.append(fault)
    a = Lease(spec, "round-A", duration_s=60, clock=lambda: 1000.0)
    a.acquire()
    plan.append(fault)
    b = Lease(spec, "round-B")  # takes A's (expired) lease over
    b.acquire()
    assert proxy.faulted[fault] == 2
    direct = S3Store(s3_bucket, "gc", endpoint_url=s3_endpoint)
    doc = json.loads(direct.get(LEASE_KEY))
    assert doc["round"] == "round-B" and doc["token"] == b.token
    info = direct.head(LEASE_KEY)
    assert info is not None and info.version == b.version
    plan.append(fault)
    assert b._renew() is None  # the renewal too: applied, answered 500, still held
    assert b.version == direct.head(LEASE_KEY).version  # type: ignore[union-attr]


def test_a_409_conflict_is_read_again_and_retried(
    faulty: tuple[S3Proxy, list[Fault | None]], s3_bucket: str
) -> None:
    proxy, plan = faulty
    plan.extend([Fault.CONFLICT, Fault.CONFLICT])
    lease = Lease(StoreSpec("s3", s3_bucket, "gc", proxy.endpoint), "round-A")
    lease.acquire()
    assert proxy.faulted[Fault.CONFLICT] == 2 and lease.version
