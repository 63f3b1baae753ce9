"""Review rev38z6 (issue 38): the deletion path as merged on main 4c19f61. Each case is a
finding, seen failing before its fix (/work/notes/review38z6.md)."""

from __future__ import annotations

import json

import pytest

from epochgc.impl.gc.journal import read_journal
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.store.s3server import new_bucket

JOURNAL = "_cluster/gc/journal/rev38z6/"
ATTEMPT = "p0000-s0-a0-t1"


def _torn_intent(store: S3Store, seq: int, keys: list[str]) -> None:
    """An intent whose document was cut after its keys (damaged: `journal.salvage_keys`
    still reads every key), and no outcome: its attempt was killed mid-request."""
    doc = json.dumps({"keys": keys, "sizes": [1] * len(keys), "ages": [1.0] * len(keys)})
    raw = doc.encode()
    store.put(f"{JOURNAL}{ATTEMPT}/{seq:08d}.intent.json", raw[: raw.index(b'"sizes"')])


@pytest.mark.s3
def test_a_torn_intents_key_still_there_after_a_cut_wait_is_counted_unknown(
    moto_endpoint: str
) -> None:
    bucket = new_bucket(moto_endpoint)
    store = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    try:
        keys = [format_key(1, 5, f"k{i}") for i in range(3)]
        for k in keys:
            store.put(k, b"x")
        _torn_intent(store, 0, keys)
        # The same batch, whole: the control (its key is counted unknown, as it should).
        whole = [format_key(2, 5, "w0")]
        store.put(whole[0], b"x")
        store.put(f"{JOURNAL}{ATTEMPT}/00000001.intent.json", json.dumps(
            {"keys": whole, "sizes": [1], "ages": [1.0]}).encode())
        asked: list[int] = []

        def cut(n: int, ago: float) -> bool:
            asked.append(n)
            return False  # the wait was ended (a signal): requests may still land

        totals = read_journal(store, JOURNAL, before_asking=cut)
        assert asked == [2], asked  # both batches are open: the torn one was waited for
        assert set(totals.unknown) >= set(whole), totals.unknown  # the control holds
        # The killed attempt's DeleteObjects, at the server before the read-back, is
        # carried out after it (the S3 model the wait rests on: `bounds.py` point 3).
        store.delete_batch(keys)
        counted = (set(totals.deleted) | set(totals.gone_unattributed) | totals.already_gone
                   | set(totals.unknown))
        assert set(keys) <= counted, (
            f"keys the round's own request deleted after the read-back are in no count "
            f"that allows it: unknown {sorted(totals.unknown)}, errors "
            f"{sorted(totals.errors)}, unreadable {totals.unreadable}")
    finally:
        store.close()


LEGACY = "20270115T060000.000Z-legacy00"


@pytest.mark.s3
def test_a_round_whose_start_names_no_bound_is_waited_for_on_s3(moto_endpoint: str) -> None:
    from epochgc.impl.gc.bounds import APPLIED_WITHIN_S
    from epochgc.impl.gc.journal import START, journal_prefix, write_marker
    from epochgc.impl.gc.recover import recover_dead_rounds

    store = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    try:
        prefix = journal_prefix(LEGACY)
        write_marker(store, prefix, START, {"round": LEGACY, "M": 100,
                                            "snapshot_revision": 7, "options": {}})
        key = format_key(1, 5, "k0")
        store.put(key, b"x")
        # The task's intent, durable; its DeleteObjects at the server; the task killed.
        store.put(f"{prefix}p0000-s0-a0-t1/00000000.intent.json", json.dumps(
            {"keys": [key], "sizes": [1], "ages": [1.0]}).encode())
        slept: list[float] = []
        held = [key]

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            if held:  # the server applies the request during the recovery's wait
                store.delete_batch(held)
                held.clear()

        done = recover_dead_rounds(store, "reset", lambda: set(), sleep=sleep)
        if held:  # no wait: the request is applied after the read-back
            store.delete_batch(held)
        assert [r.round_id for r in done] == [LEGACY]
        assert store.head(key) is None
        rec = json.loads(store.get(f"_cluster/gc/rounds/{LEGACY}.json"))
        counts = rec["counts"]
        assert counts["errors"] == 0 and sum(slept) >= APPLIED_WITHIN_S, (
            f"the key left the store by the dead round's own request, yet the record says "
            f"{counts} (waited {sum(slept)} s)")
    finally:
        store.close()
