"""The reports reader: strict validation with messages naming file and field; freshness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impl.gc.errors import ReportError
from impl.gc.reports import read_cluster_view
from impl.store.local import LocalStore
from model.cluster import GcEpoch
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


def test_empty_table_collects_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 5, [])
    assert view_epoch(store) == GcEpoch(None, None)


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


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "_cluster/partitions.json: not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"partitions": []}', "missing field 'revision'"),
        ('{"revision": 1, "partitions": [], "x": 1}', "unknown field 'x'"),
        ('{"revision": true, "partitions": []}', "field 'revision' must be an integer"),
        ('{"revision": -1, "partitions": []}', "field 'revision' must be an integer >= 0"),
        ('{"revision": 1, "partitions": ["t"]}', r"partitions\[0\] must be 'topic/N'"),
        ('{"revision": 1, "partitions": ["t/0", "t/0"]}', "listed twice"),
        # Issue 12 item 1: a partition number in Arabic-Indic digits is not 'topic/N'.
        ('{"revision": 1, "partitions": ["t/\u0665"]}', r"partitions\[0\] must be 'topic/N'"),
    ],
)
def test_bad_partitions_file(tmp_path: Path, doc: str, message: str) -> None:
    store = LocalStore(tmp_path)
    store.put("_cluster/partitions.json", doc.encode())
    with pytest.raises(ReportError, match=message):
        view_epoch(store)


GOOD_REPLICA = {"partition": "t/0", "term": 1, "inactive_epoch": 3}


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
            r"replicas\[0\]: field 'inactive_epoch' must be an integer >= -1 or null",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [GOOD_REPLICA, GOOD_REPLICA]},
            r"replicas\[1\]: partition 't/0' is reported twice",
        ),
        (
            {"node": "n1", "written_at": NOW, "replicas": [{"partition": "t/0", "term": 1}]},
            r"replicas\[0\]: missing field 'inactive_epoch'",
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
