"""Hostile reports (issue 12): non-finite and huge numbers, duplicate and conflicting
reports, reports from the future, lying clocks and truncated documents. The reader either
refuses with a ReportError naming the file, or computes exactly the model's M over the
reports that are valid, fresh by the older of `written_at` and the file's mtime, and of the
snapshot's incarnation of their partition (`created`, R35)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import HEALTH_PREFIX, read_cluster_view
from epochgc.impl.store.local import LocalStore
from epochgc.model.cluster import Report, gc_epoch
from tests.gc.helpers import NOW, write_partitions

MAX_AGE = 300.0
PARTS = ["t/0", "t/1"]
# (JSON literal, valid?) pairs: the literal is written into the document as is.
WRITTEN = st.sampled_from(
    [(repr(NOW - a), True) for a in (0, 10, 299, 301, 5000)]
    + [(repr(NOW + 10**6), True)]  # from the future: the store's mtime still ages it
    + [(x, False) for x in ("NaN", "Infinity", "-Infinity", "1e400", "-1", '"now"', "true")]
    + [("9" * 50, False)]
)
EPOCH = st.sampled_from(
    [("null", True), ("-1", True)]
    + [(str(e), True) for e in range(0, 13, 3)]
    + [(x, False) for x in ("1e400", "NaN", "1000000000000000000", '"5"', "1.5", "true")]
)
# The snapshot's incarnations are created at 0: a 4 is a report of another incarnation (R35).
# Weighted to valid values: a wrong incarnation only shows in a document read to the end.
CREATED = st.sampled_from([("0", True), ("4", True)]) | st.sampled_from(
    [(x, False) for x in ("-1", "NaN", "1e400", "1000000000000000000", '"0"', "0.0", "null")]
)
replica = st.tuples(st.sampled_from(PARTS), EPOCH, CREATED)
node_doc = st.fixed_dictionaries(
    {
        "written": WRITTEN,
        "stored_age": st.sampled_from([0.0, 10.0, 400.0]),
        "replicas": st.lists(replica, max_size=3),
        "truncate": st.none() | st.integers(1, 60),
    }
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(nodes=st.lists(node_doc, max_size=3), revision=st.integers(0, 15))
def test_hostile_reports_refused_or_exactly_the_model(
    nodes: list[dict[str, object]], revision: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp))
        write_partitions(store, revision, PARTS)
        invalid: set[str] = set()
        fresh: list[Report] = []
        for i, n in enumerate(nodes):
            key = f"{HEALTH_PREFIX}n{i}.json"
            written, ok = n["written"]  # type: ignore[misc]
            reps = n["replicas"]
            assert isinstance(reps, list)
            body = ", ".join(
                f'{{"partition": "{p}", "term": 1, "inactive_epoch": {lit}, "created": {c}}}'
                for p, (lit, _), (c, _) in reps
            )
            text = f'{{"node": "n{i}", "written_at": {written}, "replicas": [{body}]}}'
            valid = (
                ok
                and all(v and cv for _, (_, v), (_, cv) in reps)
                and len({p for p, _, _ in reps}) == len(reps)
            )
            cut = n["truncate"]
            if isinstance(cut, int) and cut < len(text):
                text, valid = text[:cut], False
            store.put(key, text.encode())
            stored = NOW - float(n["stored_age"])  # type: ignore[arg-type]
            os.utime(Path(tmp) / key, (stored, stored))
            if not valid:
                invalid.add(key)
            elif max(NOW - float(written), NOW - stored) <= MAX_AGE:
                fresh += [
                    Report(p, f"n{i}", json.loads(lit)) for p, (lit, _), (c, _) in reps if c == "0"
                ]
        try:
            view = read_cluster_view(store, NOW, MAX_AGE)
        except ReportError as e:
            assert invalid, e
            assert any(str(e).startswith(k) for k in invalid), e
            return
        assert not invalid
        assert view.gc_epoch() == gc_epoch(revision, PARTS, fresh)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    nodes=st.lists(
        st.dictionaries(
            st.sampled_from(PARTS),
            st.tuples(st.integers(-1, 12) | st.none(), st.sampled_from([2, 7])),
        ),
        max_size=4,
    ),
    revision=st.integers(7, 15),
)
def test_reports_of_another_incarnation_never_count(
    nodes: list[dict[str, tuple[int | None, int]]], revision: int
) -> None:
    """Valid, fresh documents mixing two incarnations of t/0 (created 2, deleted, re-created
    at 7): M is exactly the model's over the snapshot's incarnation (R35)."""
    created = {"t/0": 7, "t/1": 2}
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp))
        write_partitions(store, revision, PARTS, created)
        counted: list[Report] = []
        for i, values in enumerate(nodes):
            doc = {
                "node": f"n{i}",
                "written_at": NOW,
                "replicas": [
                    {"partition": p, "term": 1, "inactive_epoch": e, "created": c}
                    for p, (e, c) in values.items()
                ],
            }
            store.put(f"{HEALTH_PREFIX}n{i}.json", json.dumps(doc).encode())
            os.utime(Path(tmp) / f"{HEALTH_PREFIX}n{i}.json", (NOW, NOW))
            counted += [Report(p, f"n{i}", e) for p, (e, c) in values.items() if c == created[p]]
        view = read_cluster_view(store, NOW, MAX_AGE)
        assert view.gc_epoch() == gc_epoch(revision, PARTS, counted)
