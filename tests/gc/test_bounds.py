"""Issue 29 item 3 in the reports reader: a document nested too deep or too large is refused
naming the file (before any recursive reader sees it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import epochgc.impl.gc.reports as reports
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import PARTITIONS_KEY, read_cluster_view
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster


def test_a_snapshot_nested_100000_deep_is_refused_naming_the_file(tmp_path: Path) -> None:
    # The found defect: `Error: RecursionError`, exit 1, no JSON, no file named.
    store = LocalStore(tmp_path, create=True)
    simple_cluster(store, 100)
    store.put(PARTITIONS_KEY, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ReportError, match=r"partitions\.json: nested deeper than 32 levels"):
        read_cluster_view(store, NOW, 300.0)


def test_brackets_inside_strings_do_not_count() -> None:
    deep_text = b'{"note": "' + b"[{" * 100 + b'\\\"]", "a": [[1]]}'
    reports.check_nesting(deep_text, "x")  # no error: 3 levels
    with pytest.raises(ReportError, match="x: nested deeper"):
        reports.check_nesting(b'{"a": "\\\\"' + b"[" * 40 + b"]" * 40 + b"}", "x")


def test_a_document_over_the_size_limit_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path, create=True)
    simple_cluster(store, 100)
    size = len(store.get("_cluster/health/n1.json"))
    monkeypatch.setattr(reports, "MAX_DOCUMENT_BYTES", size - 1)
    with pytest.raises(ReportError, match=rf"n1\.json: larger than {size - 1} bytes"):
        read_cluster_view(store, NOW, 300.0)
