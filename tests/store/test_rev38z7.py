"""Review rev38z7: the deletion path as merged on main f690a6e (issue 38), against its
contract: every GC record true under kills, damaged journals and S3's ambiguous answers.

Each finding was a strict xfail, seen failing on the code as merged; both pass since
their fix. The S3 cases run against moto in server mode on loopback, through a front
(`tests/store/forward.py`)."""

from __future__ import annotations

import pytest

from epochgc.impl.store.s3 import S3Store
from tests.store.s3server import new_bucket
from tests.store.test_rev38z5 import (
    _CodeServer,
    deleted_through_is_recorded_true,
)


@pytest.mark.s3
@pytest.mark.parametrize(("code", "message"), [
    # S3's list of error codes (API_Error.html): SlowDown "Reduce your request rate." (503);
    # AccessDenied "Access Denied" (403). Both are in `keycodes.REFUSED`.
    pytest.param("SlowDown", "Please reduce your request rate.", id="SlowDown"),
    pytest.param("AccessDenied", "Access Denied", id="AccessDenied"),
])
def test_a_per_key_refusal_after_an_intermediarys_retry_is_not_recorded_not_deleted(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, code: str, message: str
) -> None:
    """Finding 1. Review rev38z5 finding 4 put an intermediary that sends a DeleteObjects
    again on its own in the model (nginx `proxy_next_upstream ... non_idempotent`: "enabling
    this option explicitly allows retrying such requests",
    http://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_next_upstream; an Envoy
    route's `retry_policy`), and s27d made the second copy's NoSuchKey `gone_unattributed`.
    The same second copy may be refused per key instead: a backend throttling after the
    first copy answers SlowDown, a credential that expired meanwhile AccessDenied. S3 gives
    each key "the result of that delete" (API_DeleteObjects.html), the result of the copy
    answered, which says nothing of the first copy. `S3Store._delete` takes a REFUSED code
    as "not applied": no HEAD, no wait, a plain error, "listed again next round", while
    the key already left the store by the round's own request: a deletion in no record.
    Here the front carries the first copy out (moto) and answers it with `code` per key,
    which is what the client sees of a retried copy."""
    deleted_through_is_recorded_true(moto_endpoint, monkeypatch,
                                     _CodeServer(moto_endpoint, code, message),
                                     f"its retried copy answered {code}")


LEGACY = "20270115T060000.000Z-legacy7z"


@pytest.mark.s3
def test_a_round_whose_start_names_no_bound_is_waited_for_its_tasks_whole_chain(
    moto_endpoint: str
) -> None:
    """Finding 2 (on 70497ea's fix of review rev38z6 finding 2). A START without
    `stop_within_s` (a round started before 7364caf, or a damaged START that still parses)
    is now waited for `max(_stop_within(start), applied_s)` = `APPLIED_WITHIN_S` (70 s)
    after its STOP. But such a round's tasks "HEAD STOP before each batch"
    (`recover._stop_within`'s docstring), and a HEAD that found none just before STOP was
    written is followed by the batch's intent PUT, and only then by its DeleteObjects: the
    PUT may take a connect and a read timeout (`CONNECT_TIMEOUT_S + READ_TIMEOUT_S`, the
    project's own bound of an attempt, `bounds.py` item 2), and the server may apply the
    DeleteObjects `APPLIED_WITHIN_S` after it was sent (`bounds.py` item 3). So the last
    request lands up to 140 s after STOP, on the project's own model (S3 is strongly
    consistent for read-after-write, so the HEAD sent before STOP did not see it:
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html#ConsistencyModel).
    Here the server applies the held DeleteObjects once the recovery has waited 130 s (or
    after its read-back): a wait of 70 s reads the journal back first, and the record says
    "still present" for a key the round's own request deleted."""
    import json

    from epochgc.impl.gc.journal import START, journal_prefix, write_marker
    from epochgc.impl.gc.recover import recover_dead_rounds
    from epochgc.model.keys import format_key

    store = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    try:
        prefix = journal_prefix(LEGACY)
        write_marker(store, prefix, START, {"round": LEGACY, "M": 100,
                                            "snapshot_revision": 7, "options": {}})
        key = format_key(1, 5, "k0")
        store.put(key, b"x")
        store.put(f"{prefix}p0000-s0-a0-t1/00000000.intent.json", json.dumps(
            {"keys": [key], "sizes": [1], "ages": [1.0]}).encode())
        slept: list[float] = []
        held = [key]
        lands_at = 130.0  # s after STOP: a 60 s intent PUT, then 70 s to be applied

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            if held and sum(slept) >= lands_at:
                store.delete_batch(held)
                held.clear()

        done = recover_dead_rounds(store, "reset", lambda: set(), sleep=sleep)
        if held:  # the wait ended first: the request is applied after the read-back
            store.delete_batch(held)
        assert [r.round_id for r in done] == [LEGACY]
        assert store.head(key) is None
        counts = json.loads(store.get(f"_cluster/gc/rounds/{LEGACY}.json"))["counts"]
        assert counts["errors"] == 0, (
            f"the key left the store by the dead round's own request {lands_at:.0f} s after "
            f"its STOP, yet the record says {counts} (waited {sum(slept):.0f} s)")
    finally:
        store.close()
