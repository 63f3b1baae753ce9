"""Review rev38y of i38y (issue 38: attribution of keys after ambiguous S3 answers). Each
finding was a strict xfail; fixed by i38z, each test now pins its fix."""

from __future__ import annotations

import random

import pytest

from epochgc.impl.store.retry import Backoff, Retrier
from epochgc.impl.store.s3 import S3Store
from tests.store.s3proxy import Call, Fault, s3_proxy

pytestmark = pytest.mark.s3


def test_a_request_applied_then_refused_by_botocores_retry_is_looked_up(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """The first send is applied and answered 500 (S3: InternalError "might not have
    processed", ErrorBestPractices.html); botocore retries it (a 500 is a transient error
    to its standard/adaptive retry modes, https://docs.aws.amazon.com/sdkref/latest/guide/
    feature-retry-behavior.html) and the retry is refused with a 4xx (here the proxy's
    409). The request as a whole may have been applied (its first send was): its keys
    must be asked about, as `_applied_maybe` does for a final 5xx, not reported "not
    deleted" while they have left the store."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    keys = ["k0", "k1"]
    for k in keys:
        direct.put(k, b"x")

    def faults(c: Call) -> Fault | None:
        if c.kind != "delete":
            return None
        return Fault.APPLIED_THEN_500 if c.attempt == 0 else Fault.CONFLICT

    with s3_proxy(s3_endpoint, faults=faults) as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=2,
                        key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                          random.Random(1), lambda s: None))
        r = store.delete_batch(keys)
    left = {k for k in keys if direct.head(k) is None}
    assert left == set(keys)  # the first send deleted both
    assert (r.deleted, r.gone_unattributed, r.errors) == (0, set(keys), {}), (
        f"both keys left the store (the first, applied send), yet: deleted {r.deleted}, "
        f"gone unattributed {sorted(r.gone_unattributed)}, errors {r.errors}")


def test_a_driver_delete_applied_then_not_retried_at_the_stop_is_looked_up(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """i41s: once the round is stopping, the driver's stores send no retry (`DriverBound.
    before_send` raises StoppedNotSent at attempt 2). The first send was applied (500
    InternalError: "might not have processed", ErrorBestPractices.html): the key left the
    store. `_applied_maybe` counts the sibling SendDeadlinePassed as ambiguous ("an
    earlier attempt of the same call may have been sent (and applied)"), not this one, so
    the key is an error "not deleted", never looked up."""
    from epochgc.impl.store.driverbound import DriverBound, installed

    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")

    def faults(c: Call) -> Fault | None:
        return Fault.APPLIED_THEN_500 if c.kind == "delete" and c.attempt == 0 else None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        with installed(DriverBound(5.0, lambda: True)):
            store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=3,
                            key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                              random.Random(1), lambda s: None))
        try:
            r = store.delete_batch(["k"])
        finally:
            store.close()
    assert direct.head("k") is None  # the first send deleted it
    assert (r.deleted, r.gone_unattributed, r.errors) == (0, {"k"}, {}), (
        f"k left the store (the first, applied send), yet: deleted {r.deleted}, gone "
        f"unattributed {sorted(r.gone_unattributed)}, errors {r.errors}")


def test_a_key_absent_before_a_request_retried_after_slowdown_is_not_deleted(
    s3_endpoint: str, s3_bucket: str, s3_server_name: str
) -> None:
    """The key is gone before the batch (another writer). The first send is answered 503
    SlowDown without reaching the server (S3: "reduce your request rate"; s3.py's own
    rule: "a 4xx (...) or SlowDown was not applied"); botocore retries (RetryAttempts 1,
    botocore endpoint.py: "num retries") and the retry's answer is NoSuchKey (SeaweedFS
    answers it to an ETag'd delete of an absent key; moto answers "Deleted", so only
    SeaweedFS shows the case). No send the client saw can have removed the key, so it is
    not deleted. Nor is it `gone` (already_gone) since review rev38z5 finding 4: an
    intermediary may have sent the round's request twice, the first copy deleting the key;
    no answer tells that from another writer's delete, so it is gone unattributed, and the
    record's words for those say an S3 "not there" (`text.GONE_WHERE`)."""
    if s3_server_name != "seaweedfs":
        pytest.skip("moto answers Deleted for an absent key: no NoSuchKey to attribute")
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")
    version = direct.head("k").version  # type: ignore[union-attr]
    direct.delete_batch(["k"])  # the other writer, before the round's batch

    def faults(c: Call) -> Fault | None:
        return Fault.SLOW_DOWN if c.kind == "delete" and c.attempt == 0 else None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=2,
                        key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                          random.Random(1), lambda s: None))
        r = store.delete_if_unchanged([("k", version)])
    got = (r.deleted, r.gone, r.gone_unattributed, r.errors)
    assert got == (0, set(), {"k"}, {}), got


def test_a_412_for_an_absent_key_in_a_batch_is_not_counted_changed(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """Another writer removed the key before the round's batch. A server that evaluates the
    ETag as an If-Match answers 412 for a key with no current object (RFC 9110 13.1.1: the
    condition is false "if the field value is a list of entity tags and none of them match
    the entity tag of the selected representation" -- there is none; SeaweedFS answers a
    conditional DeleteObject so, as s3.py's `delete_if_match` says, and asks HEAD). The
    412 is injected for the absent key (as i38y's own test of the retried case does).
    DeleteResult's contract: `changed` keys "are still there"; this one is not, and the
    journal would say the key was rewritten since it was listed."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")
    version = direct.head("k").version  # type: ignore[union-attr]
    direct.delete_batch(["k"])  # the other writer

    with s3_proxy(s3_endpoint, fail=lambda k, a: "PreconditionFailed") as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=2,
                        key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                          random.Random(1), lambda s: None))
        r = store.delete_if_unchanged([("k", version)])
    assert direct.head("k") is None
    got = (r.deleted, r.gone, r.changed, r.errors)
    assert "k" not in r.changed, (
        f"k is absent, yet counted changed (rewritten, still there): {got}")
