"""Review rev38o finding 3: a round recovered as `killed` while its driver was alive. The
driver then writes its own END over the recovery's and its record; if the record is not
written (its PUT fails, or the driver is killed right after END), the next look (the next
round, `gc-admin show`, `gc-admin reset`) makes the record from the driver's END, found by
the `OWN_END` marker the driver leaves before it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.job import _write_record
from epochgc.impl.gc.journal import END, journal_prefix
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recover import OWN_END, recover_dead_rounds, stop_dead_rounds
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.local import LocalStore
from tests.gc.test_rev38o import _dead

RID = "20270115T060000.000Z-l1ver0nd"


class _Killed(BaseException):
    """kill -9 of the driver: nothing after it runs (not an error the driver handles)."""


class _KilledAfter(LocalStore):
    """The driver's store: the driver dies right after the write of `key` is applied."""

    key = ""
    puts: list[str]

    def put(self, key: str, data: bytes) -> None:
        super().put(key, data)
        self.puts.append(key)
        if key == self.key:
            raise _Killed

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        got = super().create_if_absent(key, data)
        if got is not None:
            self.puts.append(key)
            if key == self.key:
                raise _Killed
        return got


def _recovered_then_driver_killed_after_its_end(root: Path) -> tuple[str, list[str]]:
    LocalStore(root, create=True)
    _dead(root, RID)
    prefix = journal_prefix(RID)
    [r] = recover_dead_rounds(LocalStore(root), "gc-admin reset", lambda: set(),
                              sleep=lambda _s: None)
    assert r.outcome == "driver-gone"
    s = GcSummary(M=100, revision=7, round_id=RID, journal=prefix,
                  interrupted="stop-marker", deleted=3)
    drv = _KilledAfter(root)
    drv.key, drv.puts = prefix + END, []
    with pytest.raises(_Killed):
        _write_record(lambda: drv, s, GcOptions())
    return prefix, drv.puts


def _doc(root: Path, key: str) -> dict[str, Any]:
    doc = json.loads(LocalStore(root).get(key))
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("look", ["next-round", "show"])
def test_a_driver_killed_after_its_end_over_a_recovered_one_gets_its_record_from_it(
    tmp_path: Path, look: str,
) -> None:
    """kill -9 between the driver's END and its record: the marker was written before END
    (seeded bug, the marker written after END: `AssertionError: the record says
    'killed' ...`), so the next look replaces the recovered record with END."""
    root = tmp_path / "s"
    prefix, puts = _recovered_then_driver_killed_after_its_end(root)
    assert puts == [prefix + OWN_END, prefix + END], puts
    store = LocalStore(root)
    if look == "show":
        done, stopping = stop_dead_rounds(store, "gc-admin show", lambda: set())
        assert stopping == []
    else:
        done = recover_dead_rounds(store, "round b", lambda: set(), sleep=lambda _s: None)
    rec = _doc(root, round_key(RID))
    assert rec["outcome"] == "interrupted" and rec.get("recovered_by") is None, (
        f"the record says {rec['outcome']!r} (recovered by {rec.get('recovered_by')!r}); "
        f"the driver's END says {_doc(root, prefix + END)['outcome']!r}")
    assert [(d.round_id, d.outcome, d.from_end) for d in done] == [(RID, "interrupted", True)]
    assert store.head(prefix + OWN_END) is None
    # once: a later look finds nothing more to do
    assert recover_dead_rounds(store, "round c", lambda: set(), sleep=lambda _s: None) == []


def test_a_round_not_recovered_writes_no_marker(tmp_path: Path) -> None:
    """The boundary: a driver whose END is the first writes END only (created if absent:
    the same one request), then its record."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    prefix = journal_prefix(RID)
    s = GcSummary(M=100, revision=7, round_id=RID, journal=prefix, deleted=3)
    drv = _KilledAfter(root)
    drv.puts = []
    _write_record(lambda: drv, s, GcOptions())
    assert s.record_error is None and store.head(prefix + OWN_END) is None
    assert [k for k in drv.puts if k.startswith(prefix)] == [prefix + END], drv.puts
    assert _doc(root, round_key(RID))["outcome"] == "done"


def test_a_marker_left_beside_the_drivers_own_record_is_removed_and_nothing_replaced(
    tmp_path: Path,
) -> None:
    """The driver wrote its record but could not remove the marker: the next look leaves
    the record (it is the driver's) and removes the marker."""
    root = tmp_path / "s"
    prefix, _ = _recovered_then_driver_killed_after_its_end(root)
    store = LocalStore(root)
    s = GcSummary(M=100, revision=7, round_id=RID, journal=prefix,
                  interrupted="stop-marker", deleted=3)
    from epochgc.impl.gc.record import write_record

    write_record(store, s, {"by": "driver"})
    before = store.get(round_key(RID))
    assert recover_dead_rounds(store, "round b", lambda: set(), sleep=lambda _s: None) == []
    assert store.get(round_key(RID)) == before and store.head(prefix + OWN_END) is None
