"""The per-task pieces without Spark: scanning a prefix, batching deletes, durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.duration import format_duration, parse_duration
from epochgc.impl.gc.scan import ELIGIBLE, MALFORMED, ScanStats, scan_prefix, split_prefixes
from epochgc.impl.store.base import DeleteResult, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import NOW, _Delegating, all_keys, put_local


def test_scan_stops_at_first_key_above_m(tmp_path: Path) -> None:
    for e in (1, 2, 3, 4, 5):
        put_local(tmp_path, format_key(7, e, "a"), age=100)
    put_local(tmp_path, "level_zero/data/007/000000000000000002/bad name", age=100)
    stats = ScanStats()
    rows = list(scan_prefix(LocalStore(tmp_path), 7, 3, NOW, 50, 2, stats))
    assert [(r[0], r[1].rsplit("/", 2)[1]) for r in rows] == [
        (ELIGIBLE, f"{1:018d}"),
        (ELIGIBLE, f"{2:018d}"),
        (MALFORMED, f"{2:018d}"),  # ".../002/bad name"
        (ELIGIBLE, f"{3:018d}"),
    ]
    assert (stats.listed, stats.skipped_too_new, stats.malformed) == (5, 1, 1)
    # pages [1, 2] [2-bad, 3] [4]: the directory backend ends a page at the `until` hint
    assert stats.list_requests == 3 and stats.fetched == 5


def test_scan_skips_young_but_goes_on(tmp_path: Path) -> None:
    put_local(tmp_path, format_key(1, 1, "young"), age=10)
    put_local(tmp_path, format_key(1, 2, "old"), age=100)
    stats = ScanStats()
    rows = list(scan_prefix(LocalStore(tmp_path), 1, 5, NOW, 50, 1000, stats))
    assert [r[1] for r in rows] == [format_key(1, 2, "old")]
    assert stats.skipped_too_young == 1 and stats.eligible == 1


def test_split_prefixes_covers_each_prefix_once() -> None:
    for tasks in (1, 3, 7, 1000, 5000):
        groups = split_prefixes(1000, tasks)
        assert sorted(p for g in groups for p in g) == list(range(1000))
        assert max(map(len, groups)) - min(map(len, groups)) <= 1


class _FlakyStore(_Delegating):
    """Every third batch fails as a whole request; records the peak concurrency."""

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.calls = 0

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        self.calls += 1
        if self.calls % 3 == 0:
            raise StoreError("throttled for good")
        return self.inner.delete_batch(keys)


def test_delete_keys_batches_and_counts_errors(tmp_path: Path) -> None:
    keys = [format_key(p, 1, "k") for p in range(30)]
    for k in keys:
        put_local(tmp_path, k, age=1, data=b"12345")
    store = _FlakyStore(LocalStore(tmp_path))
    failed: list[str] = []
    stats = delete_keys(
        store,
        [(k, 5, 0.0, "") for k in keys],
        batch_size=4,
        concurrency=1,
        on_error=lambda k, _: failed.append(k),
    )
    assert stats.delete_requests == 8 and stats.errors == len(failed) == 4 + 4
    assert stats.deleted == 30 - 8 and stats.bytes_deleted == 5 * 22
    assert all_keys(LocalStore(tmp_path)) == set(failed)


def test_delete_keys_refuses_oversized_batches(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        delete_keys(LocalStore(tmp_path), [], batch_size=1001)


@pytest.mark.parametrize(
    ("text", "seconds"), [("12h", 43200), ("30m", 1800), ("600s", 600), ("90", 90), ("1d", 86400)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    # Issue 12 item 1: "٥h" (an Arabic-Indic five) read as 5h; 400 nines read as infinity.
    ["", "12x", "h", "-5m", "1h30m", "٥h", "１２h", "1.٥h", "inf", "nan", "9" * 400],
)
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (300, 43200, 45)] == ["5m", "12h", "45s"]
