"""i41y item 5: a round record under `_cluster/gc/rounds/` replaced by a directory, a FIFO or
a symbolic link (a local store). The local store never lists such an entry as an object
(it refuses links and special files, never opening them), so `gc-admin show` said "last
round: none recorded" and `gc-admin expire` passed it by in silence, exit 0. Now both name
it and why, as they name a record whose bytes are damaged (issue 41 F9): `show` with its
usual exit code (what a round would do now: a damaged record does not change it), `expire`
keeping it (never removed unread) and exiting 1. A FIFO is never opened: no hang."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import damage_record_key, run_gc_admin, simple_cluster

KEY = f"{ROUNDS_PREFIX}20261130T000000.000Z-0000000a.json"
WHY = {"directory": "a directory where only objects are kept: malformed, never listed",
       "fifo": "not a regular file",
       "symlink": "a symbolic link, never followed"}
HANG_S = 120  # bounds a hang on the FIFO (the old code never opened it either)


def _damaged(tmp_path: Path, kind: str) -> Path:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    damage_record_key(root / KEY, kind, tmp_path / "elsewhere.json", "{}")
    return root


def _admin(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gc_admin(*args, timeout=HANG_S)


@pytest.mark.parametrize("kind", list(WHY))
def test_show_names_a_record_that_is_no_object(kind: str, tmp_path: Path) -> None:
    """Old code: "last round: none recorded" (and `"last_round": null` with --json)."""
    root = _damaged(tmp_path, kind)
    clean = tmp_path / "clean"
    simple_cluster(LocalStore(clean, create=True), 100)
    usual = _admin("show", "--store", str(clean)).returncode  # the reports decide it
    p = _admin("show", "--store", str(root))
    assert p.returncode == usual, p.stderr
    assert f"last round: cannot read the round record {KEY}: {WHY[kind]}" in p.stdout, p.stdout
    p = _admin("show", "--store", str(root), "--json")
    assert p.returncode == usual, p.stderr
    assert json.loads(p.stdout)["last_round"] == {
        "error": f"cannot read the round record {KEY}: {WHY[kind]}"}


@pytest.mark.parametrize("kind", list(WHY))
def test_expire_names_it_and_keeps_it(kind: str, tmp_path: Path) -> None:
    """Old code: "removed 0 round(s) ..." and nothing about the record, exit 0."""
    root = _damaged(tmp_path, kind)
    for apply in ([], ["--apply"]):
        p = _admin("expire", "--store", str(root), "--older-than", "0s", *apply)
        assert p.returncode == 1, (p.stdout, p.stderr)
        assert f"  {KEY}: {WHY[kind]}" in p.stdout.splitlines(), p.stdout
        assert os.path.lexists(root / KEY)  # never removed unread
    p = _admin("expire", "--store", str(root), "--older-than", "0s", "--json")
    assert p.returncode == 1
    assert json.loads(p.stdout)["unreadable"] == [{"key": KEY, "why": WHY[kind]}]


def test_the_rounds_journal_and_markers_stay_with_a_damaged_record(tmp_path: Path) -> None:
    """Kept whole, as a round whose record's bytes cannot be read: its journal (here
    without START, so not an unfinished round) is not removed as a round's without a
    record. Old code: "gc-admin: expire: removed 1 round(s) older than 0s (1 object(s), 2
    bytes)": the journal went, exit 0."""
    root = _damaged(tmp_path, "fifo")
    journal = f"_cluster/gc/journal/{KEY[len(ROUNDS_PREFIX):-len('.json')]}/batch-0001"
    LocalStore(root).put(journal, b"{}")
    os.utime(root / journal, (0, 0))  # old enough to expire by age
    p = _admin("expire", "--store", str(root), "--older-than", "0s", "--apply")
    assert LocalStore(root).head(journal) is not None, p.stdout
    assert p.returncode == 1, p.stdout
