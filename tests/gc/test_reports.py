"""The reports reader: strict validation with messages naming file and field; freshness."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import read_cluster_view
from epochgc.impl.store.local import LocalStore
from epochgc.model.cluster import GcEpoch
from tests.gc.helpers import NOW, simple_cluster, write_health, write_partitions


def view_epoch(store: LocalStore, max_age: float = 300) -> GcEpoch:
    return read_cluster_view(store, NOW, max_age).gc_epoch()


def test_m_is_min_over_partitions_of_max_over_replicas(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    simple_cluster(store, 40)
    assert view_epoch(store) == GcEpoch(40, None)


def test_capped_at_snapshot_revision(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    simple_cluster(store, 40, revision=25)
    assert view_epoch(store) == GcEpoch(25, None)


def test_empty_table_gives_its_revision(tmp_path: Path) -> None:
    """R19 (changed, issue 13): an empty snapshot at revision 5 gives M = 5."""
    store = LocalStore(tmp_path)
    write_partitions(store, 5, [])
    assert view_epoch(store) == GcEpoch(5, None)


def test_stale_reports_count_as_absent(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 100, ["t/0"])
    write_health(store, "n1", NOW - 301, [("t/0", 50)])
    view = read_cluster_view(store, NOW, 300)
    assert view.stale_nodes == ("n1",)
    assert "t/0" in (view.gc_epoch().blocked or "")
    write_health(store, "n2", NOW - 299, [("t/0", 20)])
    assert view_epoch(store) == GcEpoch(20, None)  # the stale, higher value is not used


def test_missing_partitions_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"cannot read _cluster/partitions\.json"):
        view_epoch(LocalStore(tmp_path))


CREATED_T0 = r"^_cluster/partitions\.json: field 'created\['t/0'\]' must be an integer in 0\.\."


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "_cluster/partitions.json: not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"partitions": [], "created": {}}', "missing field 'revision'"),
        ('{"revision": 1, "partitions": [], "created": {}, "x": 1}', "unknown field 'x'"),
        (
            '{"revision": true, "partitions": [], "created": {}}',
            "field 'revision' must be an integer",
        ),
        (
            '{"revision": -1, "partitions": [], "created": {}}',
            "field 'revision' must be an integer in 0",
        ),
        (
            '{"revision": 1, "partitions": ["t"], "created": {}}',
            r"partitions\[0\] must be 'topic/N'",
        ),
        ('{"revision": 1, "partitions": ["t/0", "t/0"], "created": {}}', "listed twice"),
        # Issue 12 item 1: a partition number in Arabic-Indic digits is not 'topic/N'.
        (
            '{"revision": 1, "partitions": ["t/\u0665"], "created": {}}',
            r"partitions\[0\] must be 'topic/N'",
        ),
        # R35: each partition's creation revision (its incarnation) is required and checked.
        ('{"revision": 1, "partitions": ["t/0"]}', "missing field 'created' .*republish"),
        ('{"revision": 1, "partitions": [], "created": []}', "'created' must be an object"),
        ('{"revision": 1, "partitions": ["t/0"], "created": {}}', "no entry for partition 't/0'"),
        ('{"revision": 1, "partitions": [], "created": {"t/0": 1}}', "names 't/0', which is not"),
        ('{"revision": 1, "partitions": ["t/0"], "created": {"t/0": -1}}', CREATED_T0),
        ('{"revision": 1, "partitions": ["t/0"], "created": {"t/0": 2}}', CREATED_T0 + r"1 \(the"),
        ('{"revision": 1, "partitions": ["t/0"], "created": {"t/0": "1"}}', CREATED_T0),
        ('{"revision": 1, "partitions": ["t/0"], "created": {"t/0": 1.0}}', CREATED_T0),
        ('{"revision": 1, "partitions": ["t/0"], "created": {"t/0": true}}', CREATED_T0),
        ('{"revision": 1, "partitions": ["t/0"], "created": {"t/0": null}}', CREATED_T0),
    ],
)
def test_bad_partitions_file(tmp_path: Path, doc: str, message: str) -> None:
    store = LocalStore(tmp_path)
    store.put("_cluster/partitions.json", doc.encode())
    with pytest.raises(ReportError, match=message):
        view_epoch(store)


GOOD_REPLICA = {"partition": "t/0", "term": 1, "inactive_epoch": 3, "created": 0}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"node": "n1", "written_at": NOW}, "missing field 'replicas'"),
        ({"node": "n2", "written_at": NOW, "replicas": []}, "does not match the file name"),
        ({"node": "n1", "written_at": "now", "replicas": []}, "'written_at' must be unix"),
        ({"node": "n1", "written_at": NOW, "replicas": {}}, "'replicas' must be a list"),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{**GOOD_REPLICA, "term": -2}]},
            r"replicas\[0\]: field 'term'",
        ),
        (
            {
                "node": "n1",
                "written_at": NOW,
                "replicas": [{**GOOD_REPLICA, "inactive_epoch": 1.5}],
            },
            r"replicas\[0\]: field 'inactive_epoch' must be an integer in -1\.\.\d+ or null",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [GOOD_REPLICA, GOOD_REPLICA]},
            r"replicas\[1\]: partition 't/0' is reported twice",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{"partition": "t/0", "term": 1}]},
            r"replicas\[0\]: missing field 'created'",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{**GOOD_REPLICA, "created": None}]},
            r"replicas\[0\]: field 'created' must be an integer in 0\.\.\d+, got None",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{**GOOD_REPLICA, "created": -1}]},
            r"replicas\[0\]: field 'created' must be an integer in 0\.\.",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{**GOOD_REPLICA, "created": 2.0}]},
            r"replicas\[0\]: field 'created' must be an integer",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{**GOOD_REPLICA, "created": "0"}]},
            r"replicas\[0\]: field 'created' must be an integer",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{**GOOD_REPLICA, "created": False}]},
            r"replicas\[0\]: field 'created' must be an integer",
        ),
    ],
)
def test_bad_health_file(tmp_path: Path, doc: object, message: str) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 10, ["t/0"])
    store.put("_cluster/health/n1.json", json.dumps(doc).encode())
    with pytest.raises(ReportError, match="_cluster/health/n1.json: .*" + message):
        view_epoch(store)


def test_minus_one_is_a_real_inactive_epoch(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 10, ["t/0"])
    write_health(store, "n1", NOW, [("t/0", -1)])
    assert view_epoch(store) == GcEpoch(-1, None)


def test_non_report_files_are_ignored(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    simple_cluster(store, 7)
    store.put("_cluster/health/README.txt", b"not a report")
    store.put("_cluster/health/old/n9.json", b"{}")
    assert view_epoch(store) == GcEpoch(7, None)


# --- issue 12 item 3: non-finite and huge numbers; freshness a node's clock cannot fool ---

HEALTH = '{"node": "n1", "written_at": %s, "replicas": [%s]}'
REPLICA = '{"partition": "t/0", "term": %s, "inactive_epoch": %s, "created": 0}'
REPLICA_C = '{"partition": "t/0", "term": 1, "inactive_epoch": 3, "created": %s}'
SNAP_C = '{"revision": 10, "partitions": ["t/0"], "created": {"t/0": %s}}'


@pytest.mark.parametrize(
    ("key", "doc", "field"),
    [
        ("_cluster/health/n1.json", HEALTH % ("NaN", ""), "written_at"),
        ("_cluster/health/n1.json", HEALTH % ("Infinity", ""), "written_at"),
        ("_cluster/health/n1.json", HEALTH % ("-Infinity", ""), "written_at"),
        ("_cluster/health/n1.json", HEALTH % ("1e400", ""), "written_at"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA % (1, "NaN")), "inactive_epoch"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA % ("1e999", 3)), "term"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA % (1, "9" * 5000)), "inactive_epoch"),
        ("_cluster/health/n1.json", HEALTH % ("9" * 5000, ""), "written_at"),
        ("_cluster/partitions.json", '{"revision": NaN, "partitions": []}', "revision"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA_C % "NaN"), "created"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA_C % "Infinity"), "created"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA_C % "1e400"), "created"),
        ("_cluster/health/n1.json", HEALTH % (NOW, REPLICA_C % ("9" * 5000)), "created"),
        ("_cluster/partitions.json", SNAP_C % "NaN", r"created\.t/0"),
        ("_cluster/partitions.json", SNAP_C % "-Infinity", r"created\.t/0"),
        ("_cluster/partitions.json", SNAP_C % "1e400", r"created\.t/0"),
        ("_cluster/partitions.json", SNAP_C % ("9" * 5000), r"created\.t/0"),
        (
            "_cluster/partitions.json",
            '{"revision": %s, "partitions": []}' % ("9" * 5000),
            "revision",
        ),
    ],
)
def test_non_finite_or_huge_numbers_are_refused_naming_file_and_field(
    tmp_path: Path, key: str, doc: str, field: str
) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 10, ["t/0"])
    store.put(key, doc.encode())
    with pytest.raises(
        ReportError, match=f"^{re.escape(key)}: field '(replicas\\[0\\]\\.)?{field}'"
    ):
        read_cluster_view(store, NOW, 300)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ('{"revision": 1000000000000000000, "partitions": [], "created": {}}', "revision"),
        (HEALTH % (NOW, REPLICA_C % 10**18), "created"),
        (SNAP_C % 10**18, r"created\['t/0'\]"),
        (HEALTH % (NOW, REPLICA % (1, 10**18)), "inactive_epoch"),
        (HEALTH % (NOW, REPLICA % (2**63, 1)), "term"),
        (HEALTH % (1e300, ""), "written_at"),
    ],
)
def test_numbers_beyond_the_key_space_are_refused(tmp_path: Path, doc: str, field: str) -> None:
    # Epochs and revisions share one number line with the 18-digit key epochs (< 10**18).
    store = LocalStore(tmp_path)
    write_partitions(store, 10, ["t/0"])
    key = "_cluster/partitions.json" if "revision" in doc else "_cluster/health/n1.json"
    store.put(key, doc.encode())
    with pytest.raises(ReportError, match=f"'{field}'"):
        read_cluster_view(store, NOW, 300)


def test_age_is_the_older_of_written_at_and_the_stores_timestamp(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 100, ["t/0"])
    # The node's clock says "just now" (or the future), the store says an hour ago.
    for written in (NOW - 1, NOW + 10**6, 10**11):
        write_health(store, "n1", written, [("t/0", 50)])
        os.utime(tmp_path / "_cluster/health/n1.json", (NOW - 3600, NOW - 3600))
        view = read_cluster_view(store, NOW, 300)
        assert view.stale_nodes == ("n1",) and "t/0" in (view.gc_epoch().blocked or "")
    # Both agree it is fresh: used.
    write_health(store, "n1", NOW - 5, [("t/0", 50)])
    assert read_cluster_view(store, NOW, 300).gc_epoch() == GcEpoch(50, None)
    # The store says fresh, the node's clock says old: the older one wins.
    write_health(store, "n1", NOW - 301, [("t/0", 50)])
    os.utime(tmp_path / "_cluster/health/n1.json", (NOW, NOW))
    assert read_cluster_view(store, NOW, 300).stale_nodes == ("n1",)


@pytest.mark.parametrize("target", ["inside", "outside", "dangling"])
def test_a_linked_report_is_refused_by_name(tmp_path: Path, target: str) -> None:
    root = tmp_path / "store"
    store = LocalStore(root, create=True)
    simple_cluster(store, 7)
    elsewhere = tmp_path / "n3.json"
    write_health(LocalStore(tmp_path), "n3", NOW, [("t/0", 99), ("t/1", 99)])
    link = root / "_cluster/health/n3.json"
    link.symlink_to(
        {
            "inside": root / "_cluster/health/n1.json",
            "outside": tmp_path / "_cluster/health/n3.json",
            "dangling": elsewhere,
        }[target]
    )
    with pytest.raises(ReportError, match=r"^_cluster/health/n3\.json: a symbolic link"):
        read_cluster_view(store, NOW, 300)
    link.unlink()
    (root / "_cluster/partitions.json").rename(root / "p.json")
    (root / "_cluster/partitions.json").symlink_to(root / "p.json")
    with pytest.raises(ReportError, match=r"partitions\.json.*symbolic link, never followed"):
        read_cluster_view(store, NOW, 300)


# --- issue 13 / R35: a report names its partition's incarnation ---------------------------


def test_report_of_another_incarnation_never_counts(tmp_path: Path) -> None:
    """t/0 deleted and re-created at revision 7: a fresh report of the old incarnation
    (created 2, a value of 50) is ignored, so the new one is missing and the round blocks."""
    store = LocalStore(tmp_path)
    write_partitions(store, 10, ["t/0", "t/1"], {"t/0": 7, "t/1": 3})
    write_health(store, "n1", NOW - 5, [("t/0", 50)], created=2)
    write_health(store, "n2", NOW - 5, [("t/1", 40)], created=3)
    view = read_cluster_view(store, NOW, 300)
    assert [r.partition for r in view.counted()] == ["t/1"]
    assert view.gc_epoch() == GcEpoch(None, "no inactive epoch reported for: t/0")
    # a report of an incarnation newer than the snapshot's does not count either
    write_health(store, "n3", NOW - 5, [("t/0", 9)], created=12)
    assert view_epoch(store).blocked == "no inactive epoch reported for: t/0"
    # the new incarnation's own replica reports: only its value counts, not the old 50
    write_health(store, "n4", NOW - 5, [("t/0", 8)], created=7)
    assert view_epoch(store) == GcEpoch(8, None)
    # a partition outside the snapshot: its report passes to the model, which ignores it
    write_health(store, "n5", NOW - 5, [("gone/0", 1)], created=1)
    assert view_epoch(store) == GcEpoch(8, None)
