"""The hostile-store suite (issue 12): for every generated store, the keys a round deletes
are a subset of the model's eligible set over the well-formed keys, nothing outside
`level_zero/data/` changes (a full-tree fingerprint of the root and of every link target
outside it, before and after), and the round reports what it refused.

Many stores go through the real listing and delete code without Spark (the same functions
each Spark task runs, on the real disk); a few go through full rounds on the real local
Spark session; hostile key names that only S3 can hold go through the loopback S3 server.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.scan import ELIGIBLE, REFUSED, ScanStats, scan_prefix
from epochgc.impl.gc.sequence import round_seq_key
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import NOW, all_keys, local_spec, simple_cluster
from tests.gc.hostile import (
    GRACE,
    HOUR,
    M,
    Plan,
    build,
    check_round,
    fingerprint,
    oracle,
    plans,
    planted_refusals,
    unreadable_dirs,
)

SCANNED = range(10)  # shards 1-3 hold keys, 4-7 may be links; the rest are empty


def make(tmp: Path, plan: Plan) -> tuple[Path, Path, dict[str, float]]:
    root, outside = tmp / "store", tmp / "elsewhere"
    root.mkdir(parents=True)
    outside.mkdir(parents=True)
    simple_cluster(LocalStore(root), M)
    return root, outside, build(plan, root, outside, NOW)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(plan=plans, page_size=st.integers(1, 4))
def test_listing_and_deleting_hostile_stores(plan: Plan, page_size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, outside, real = make(Path(tmp), plan)
        before = fingerprint(root, outside)
        store = LocalStore(root)
        stats = ScanStats()
        locked = unreadable_dirs(root)  # empty when run as root
        rows: list[Any] = []
        for p in SCANNED:
            try:
                rows += scan_prefix(store, p, M, NOW, GRACE, page_size, stats)
            except StoreError as e:  # only a directory this user cannot open, named
                assert any(d.rsplit("/", 2)[-2] in str(e) for d in locked), e
        eligible = oracle(real, M, GRACE)
        listed = {r[1] for r in rows if r[0] == ELIGIBLE}
        assert listed <= eligible
        refused = {r[1].split(" (")[0].rstrip("/") for r in rows if r[0] == REFUSED}
        # Every link and special file the listing reaches is refused and reported.
        planted = planted_refusals(root, M)
        if not locked:
            assert planted <= refused, sorted(planted - refused)
        assert refused <= planted_refusals(root), sorted(refused - planted)
        delete_keys(store, [(r[1], r[2], r[3], r[4]) for r in rows if r[0] == ELIGIBLE], 2, 2)
        store.close()
        gone = check_round(before, fingerprint(root, outside), root, eligible)
        assert gone == listed


def found_store(tmp: Path) -> tuple[Path, Path, dict[str, float]]:
    """The two found defects in one store: an Arabic-Indic epoch ending in five, and
    level_zero/data/004 -> /elsewhere holding old victims; plus file links and a link for
    the deletion record's directory."""
    plan = Plan(
        good=[(1, 3, "a", 30 * HOUR), (2, 9, "b", 30 * HOUR)],
        bad=[("arabic epoch", 3, 5)],
        links=[
            ("prefix->outside", 1, 0),
            ("file->outside", 1, 3),
            ("dangling", 2, 1),
            ("cluster->outside", 1, 1),
        ],
    )
    return make(tmp, plan)


@pytest.mark.spark
def test_found_store_full_round(spark: Any, tmp_path: Path) -> None:
    root, outside, real = found_store(tmp_path)
    before = fingerprint(root, outside)
    opts = GcOptions(grace_s=GRACE, skip_malformed=True)
    # `_cluster/gc` is a link out of the store: the round can read neither the GC's admin
    # state there (unreadable counts as paused, issue 30: it fails closed) nor take the
    # lease or journal its deletes, so it deletes nothing (issue 29; it used to delete and
    # only lose its record). Its record cannot be written either: exit 1, not paused's 3
    # (newuser18 U3: a retry there never records).
    paused = run_gc(spark, local_spec(root), opts, clock=lambda: NOW)
    assert (paused.outcome, paused.exit_code, paused.deleted) == ("paused", 1, 0), paused
    assert paused.record is None and paused.record_error is not None
    assert "symbolic link" in (paused.paused or ""), paused.paused
    assert check_round(before, fingerprint(root, outside), root, set()) == set()
    (root / "_cluster/gc").unlink()
    before = fingerprint(root, outside)
    s = run_gc(spark, local_spec(root), opts, clock=lambda: NOW)
    gone = check_round(before, fingerprint(root, outside), root, oracle(real, M, GRACE))
    assert gone == {"level_zero/data/001/000000000000000003/a"}
    assert s.exit_code == 0 and s.malformed == 1 and s.refused_entries == 3
    assert any(k.startswith("level_zero/data/004/ (") for k in s.refused_samples)
    assert s.record is not None and s.deleted == 1
    # Without --skip-malformed the same store deletes the same eligible keys (R21a) but the
    # round fails, naming what it refused.
    root2, outside2, real2 = found_store(tmp_path / "again")
    (root2 / "_cluster/gc").unlink()
    before = fingerprint(root2, outside2)
    s = run_gc(spark, local_spec(root2), GcOptions(grace_s=GRACE), clock=lambda: NOW)
    assert s.exit_code == 1 and "3 refused entr" in (s.failed_check or "")
    gone = check_round(before, fingerprint(root2, outside2), root2, oracle(real2, M, GRACE))
    assert s.deleted == len(gone)


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(plan=plans, skip=st.booleans())
@pytest.mark.spark
def test_full_rounds_on_hostile_stores(spark: Any, plan: Plan, skip: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, outside, real = make(Path(tmp), plan)
        before = fingerprint(root, outside)
        locked = unreadable_dirs(root)  # empty when run as root
        try:
            s = run_gc(
                spark,
                local_spec(root),
                GcOptions(grace_s=GRACE, skip_malformed=skip, tasks=2, delete_batch_size=2),
                clock=lambda: NOW,
            )
        except GcError as e:  # only a directory this user cannot list, named, or
            # `_cluster/gc` a link (the round cannot journal, so it deletes nothing)
            no_journal = (root / "_cluster/gc").is_symlink() and "GC lease" in str(e)
            assert no_journal or any(d.rsplit("/", 2)[-2] in str(e) for d in locked), e
            gone = check_round(before, fingerprint(root, outside), root, oracle(real, M, GRACE))
            assert not (no_journal and gone), gone
            return
        gone = check_round(before, fingerprint(root, outside), root, oracle(real, M, GRACE))
        assert s.deleted == len(gone)
        if not unreadable_dirs(root):
            # Each link and special file the listing must reach is counted as refused.
            planted = planted_refusals(root, M)
            assert len(planted) <= s.refused_entries <= len(planted_refusals(root)), s.lines()
        if s.refused_entries:
            assert s.refused_samples
        if not skip and (s.malformed or s.refused_entries):
            assert s.exit_code == 1 and s.failed_check is not None


# Names only S3 can hold: empty and dot segments, trailing slashes, 900-byte names.
S3_HOSTILE = [
    "level_zero/data/003//000000000000000001/x",
    "level_zero/data/003/000000000000000001//x",
    "level_zero/data/003/../004/000000000000000001/x",
    "level_zero/data/003/./000000000000000001/x",
    "level_zero/data/003/000000000000000001/x/",
    "level_zero/data/003/000000000000000001/",
    "level_zero/data/003/000000000000000001/..",
    "level_zero/data/003/" + "٠" * 17 + "١" + "/x",
    "level_zero/data/٠٠٣/000000000000000001/x",
    "level_zero/data/003/000000000000000001/" + "n" * 900,
    "level_zero/data/003/000000000000000001/é",
]


@pytest.mark.spark
@pytest.mark.s3
def _held_verbatim(client: Any, bucket: str, keys: list[str]) -> list[str]:
    """The keys this server stores under exactly that name (tried under `probe/`)."""
    held = []
    for key in keys:
        try:
            client.put_object(Bucket=bucket, Key="probe/" + key, Body=b"x")
        except client.exceptions.ClientError:
            continue
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="probe/")
        listed = [o["Key"] for p in pages for o in p.get("Contents", [])]
        if listed == ["probe/" + key]:
            held.append(key)
        for k in listed:
            client.delete_object(Bucket=bucket, Key=k)
    return held


def test_hostile_names_on_s3(
    spark: Any, s3_endpoint: str, s3_bucket: str, s3_server_name: str
) -> None:
    spec = StoreSpec("s3", s3_bucket, "hostile", s3_endpoint)
    store = spec()
    now = time.time()
    simple_cluster(store, M, now=now)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    held = _held_verbatim(client, s3_bucket, S3_HOSTILE)
    if s3_server_name == "moto":
        assert held == S3_HOSTILE  # the point of the test: S3 itself holds every one
    else:
        # SeaweedFS stores keys as file paths: it refuses `.`/`..` segments, a trailing
        # `/` under an object and names past its limit, and folds `//` into `/` (the folded
        # name is then a well-formed key, rightly collected). The rest are tested.
        assert len(held) >= 4, held
    good = {format_key(3, 1, "ok"), format_key(3, 2, "ok")}
    for key in [*held, *good, format_key(3, M + 1, "live")]:
        client.put_object(Bucket=s3_bucket, Key="hostile/" + key, Body=b"x")
    client.put_object(Bucket=s3_bucket, Key="outside/" + format_key(3, 1, "x"), Body=b"x")

    def everything() -> dict[str, str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
        return {o["Key"]: o["ETag"] for p in pages for o in p.get("Contents", [])}

    before = everything()
    s = run_gc(
        spark,
        spec,
        GcOptions(grace_s=0, allow_short_grace=True, skip_malformed=True, tasks=2),
        clock=lambda: now + 1,
    )
    after = everything()
    assert {k[len("hostile/") :] for k in set(before) - set(after)} == good
    added = set(after) - set(before)
    records = {k for k in added if k.startswith("hostile/_cluster/gc/rounds/")}
    journal = {k for k in added if k.startswith("hostile/_cluster/gc/journal/")}
    # The round's number in the store's sequence (issue 38 item 6): one marker, and the
    # round's own key that fixes it (review rev38o finding 2).
    numbered = {"hostile/_cluster/gc/seq/" + "0" * 19 + "1",
                "hostile/" + round_seq_key(s.round_id)}
    assert added == records | journal | numbered | {"hostile/_cluster/gc/lease.json"}
    assert len(records) == 1
    assert all(before[k] == after[k] for k in after if k in before)
    # Three of the eleven are not in a prefix the GC lists (a foreign-digit prefix, a `..`
    # path): the others are each counted malformed.
    assert s.deleted == 2 and s.malformed >= len(held) - 3
    record = json.loads(store.get(records.pop()[len("hostile/") :]))
    assert record["outcome"] == "done" and record["counts"]["deleted"] == 2
    assert all_keys(store) >= {"level_zero/data/003/" + "٠" * 17 + "١" + "/x"}
