"""Issue 29 item 9: a dry run writes nothing anywhere (no record, no lease, no journal) and
can list the keys it would delete; a directory that is not a store is refused before
anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from tests.gc.helpers import AHEAD, NOW, local_spec
from tests.gc.test_job import GRACE, clock, make_store


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            st = os.lstat(Path(dirpath) / n)
            out[str(Path(dirpath, n).relative_to(root))] = (st.st_mode, st.st_size)
    return out


@pytest.mark.spark
def test_a_dry_run_writes_nothing_and_lists_what_it_would_delete(
    spark: Any, tmp_path: Path
) -> None:
    # The found defect: a dry run wrote a round record into the store and listed no keys.
    root = tmp_path / "store"
    eligible, _ = make_store(root)
    before = _tree(root)
    listing = tmp_path / "would-delete.txt"
    s = run_gc(spark, local_spec(root), GcOptions(grace_s=GRACE, dry_run=True,
                                                  list_keys=str(listing)), clock=clock)
    assert s.exit_code == 0 and s.outcome == "dry-run" and s.record is None
    assert s.listing_complete  # a finished listing (issue 41 F6: false only when stopped)
    assert _tree(root) == before
    assert listing.read_text().splitlines() == sorted(eligible)
    # On stdout, before the JSON summary.
    from epochgc.impl.cli import main

    r = CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "-q", "--store", str(root),
                                  "--dry-run", "--list", "-", "--json"])
    assert r.exit_code == 0, r.output
    *keys, summary = r.stdout.strip().splitlines()
    assert keys == sorted(eligible) and json.loads(summary)["outcome"] == "dry-run"
    assert _tree(root) == before


@pytest.mark.parametrize("dry", [True, False])
def test_a_directory_that_is_not_a_store_is_refused_before_anything_is_written(
    tmp_path: Path, dry: bool
) -> None:
    (tmp_path / "docs").mkdir()  # a mistyped path: some other directory
    before = _tree(tmp_path)
    with pytest.raises(GcError, match=r"is not an epochgc store \(no _cluster/partitions\.json\)"):
        run_gc(lambda: pytest.fail("no Spark"), local_spec(tmp_path),
               GcOptions(grace_s=GRACE, dry_run=dry), clock=clock)
    assert _tree(tmp_path) == before


def test_list_is_for_dry_runs_and_never_overwrites(tmp_path: Path) -> None:
    with pytest.raises(GcError, match="only applies to --dry-run"):
        GcOptions(list_keys="-").validate()
    (tmp_path / "x").write_text("")
    with pytest.raises(GcError, match="already exists"):
        GcOptions(dry_run=True, list_keys=str(tmp_path / "x")).validate()


@pytest.mark.spark
def test_a_dry_run_on_a_paused_store_says_it_is_paused(spark: Any, tmp_path: Path) -> None:
    """newuser41: `gc --dry-run` on a paused store exited 0 and never mentioned the pause.
    It still runs (it deletes nothing) and exits 0 (impl/gc/README.md's table: 3 is a round
    refused or stopped by a pause), and says on stderr, even with -q and --json, that GC is
    paused, by whom and why, and that a real round would be refused."""
    from epochgc.impl.cli import main

    root = tmp_path / "store"
    eligible, _ = make_store(root)
    r = CliRunner().invoke(main, ["gc-admin", "pause", "--store", str(root), "--by", "ops",
                                  "--reason", "disk swap"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "-q", "--store", str(root),
                                  "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["eligible"] == len(eligible)
    assert ("gc: dry run on a paused store: GC is paused on this store by ops: disk swap"
            in r.stderr), r.stderr
    assert "a real round would be refused (exit 3)" in r.stderr, r.stderr


@pytest.mark.spark
def test_one_key_listed_is_said_in_the_singular(spark: Any, tmp_path: Path) -> None:
    """newuser3 N11 (the tour's step 4): `gc: listed 1 keys, 0 eligible`."""
    from epochgc.impl.store.local import LocalStore
    from epochgc.model.keys import format_key
    from tests.gc.helpers import put_local, simple_cluster

    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    put_local(root, format_key(7, 150, "too-new"), age=GRACE + 60)  # above M: listed, kept
    said: list[str] = []
    s = run_gc(spark, local_spec(root), GcOptions(grace_s=GRACE, dry_run=True),
               clock=clock, say=said.append)
    assert (s.listed, s.eligible) == (1, 0), s
    assert "gc: listed 1 key, 0 eligible" in said, said
