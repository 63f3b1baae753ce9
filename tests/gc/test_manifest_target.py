"""Issue 29 item 5: the manifest target is probed writable and kept out of the store's data
prefix before anything is listed; a manifest that fails after deletes says how many keys
were deleted and where the journal is, with the Java cause in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.cli import _after
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import PlantOnDelete, all_keys, local_spec
from tests.gc.test_job import GRACE, clock, make_store


@pytest.mark.spark
def test_a_manifest_whose_parent_is_a_file_is_refused_before_any_delete(
    spark: Any, tmp_path: Path
) -> None:
    # The found defect: the "already exists" check passed, 3 keys were deleted, the
    # manifest was lost and the CLI said "nothing was deleted".
    root = tmp_path / "store"
    make_store(root)
    before = all_keys(LocalStore(root))
    (tmp_path / "plain").write_text("a file")
    opts = GcOptions(grace_s=GRACE, manifest=str(tmp_path / "plain" / "m.csv"))
    with pytest.raises(GcError, match=r"manifest .*plain/m\.csv") as err:
        run_gc(spark, local_spec(root), opts, clock=clock)
    assert "\n" not in str(err.value)
    assert all_keys(LocalStore(root)) == before
    assert err.value.summary.deleted == 0 and err.value.summary.listed == 0


def test_a_manifest_inside_the_data_prefix_is_refused_before_anything(tmp_path: Path) -> None:
    # The found defect: accepted; its files under level_zero/data/005/ then made every
    # later round exit 1.
    root = tmp_path / "store"
    make_store(root)
    before = all_keys(LocalStore(root))
    for target in (root / "level_zero" / "data" / "005" / "m.csv",
                   f"file://{root}/level_zero/x.parquet"):
        opts = GcOptions(grace_s=GRACE, manifest=str(target))
        with pytest.raises(GcError, match="inside the store's data prefix"):
            run_gc(lambda: pytest.fail("no Spark"), local_spec(root), opts, clock=clock)
    assert all_keys(LocalStore(root)) == before


@pytest.mark.spark
def test_a_manifest_failing_after_deletes_says_what_was_deleted(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    eligible, _ = make_store(root)
    manifest = tmp_path / "m.csv"
    opts = GcOptions(grace_s=GRACE, manifest=str(manifest))
    with pytest.raises(GcError, match="manifest phase failed") as err:
        run_gc(spark, PlantOnDelete(local_spec(root), str(manifest)), opts, clock=clock)
    s = err.value.summary
    assert s.deleted == len(eligible) and not (eligible & all_keys(LocalStore(root)))
    text = str(err.value)
    assert "\n" not in text and "already exists" in text.lower(), text
    assert "An error occurred while calling" not in text
    assert f"{len(eligible)} key(s) were deleted (journal {s.journal})" in _after(s)
    assert s.outcome == "error" and s.exit_code == 1


@pytest.mark.spark
def test_a_relative_manifest_is_recorded_absolute(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 item 9: the record and --json named `m.csv` relative to wherever the
    operator stood; now the absolute directory, which holds Spark's part files."""
    import json

    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from tests.gc.helpers import AHEAD, NOW
    from tests.gc.test_cli import small_store

    small_store(tmp_path / "s")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    r = CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "-q", "--dry-run", "--json",
                                  "--store", str(tmp_path / "s"), "--manifest-dir", "m.csv"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["manifest"] == str(work / "m.csv")
    assert (work / "m.csv").is_dir() and list((work / "m.csv").glob("part-*"))


def test_a_failed_round_with_delete_errors_never_says_no_key_was_deleted() -> None:
    """A delete answered ambiguously (applied, then 500 or a reset) whose HEAD failed too is
    an error "whether it was deleted is unknown" (`S3Store._resolve`); a round that then
    fails printed "no key was deleted", which is not known (issue 38 item 2's rule)."""
    from epochgc.impl.gc.summary import GcSummary

    # Since review rev38q finding 1 such keys are counted apart (`unknown`), not as errors
    # (which are now keys known to be still there).
    s = GcSummary(dry_run=False, error="cannot list level_zero/: InternalError",
                  journal="_cluster/gc/journal/r/", unknown=2)
    text = _after(s)
    assert "no key was deleted" not in text, text
    assert text.startswith("at least 0 key(s) were deleted"), text
    assert "2 key(s) whose deletion is unknown" in text and "_cluster/gc/journal/r/" in text
    s.unknown = 0
    assert _after(s) == "no key was deleted (journal _cluster/gc/journal/r/)"


@pytest.mark.parametrize(("where", "message"), [
    ("/proc/m.csv", "--manifest /proc/m.csv: directory /proc: cannot create a file in it"),
    ("plain/m.csv", "plain/m.csv: directory {tmp}/plain is not a directory"),
    ("plain", "plain already exists; refusing to overwrite"),  # passed before: a guard
])
def test_a_local_manifest_that_cannot_be_made_is_refused_before_spark(
    tmp_path: Path, where: str, message: str
) -> None:
    """Issue 41 F12: `gc --manifest /proc/m.csv` was refused by the JVM's probe after Spark
    started, exit 1 ("cannot be written: FileNotFoundException ..."), and left a round
    record with outcome `error`; --metrics-file and --list are refused at once with 64."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.gc.record import ROUNDS_PREFIX
    from tests.gc.helpers import AHEAD, NOW
    from tests.gc.test_cli import small_store

    small_store(tmp_path / "s")
    (tmp_path / "plain").write_text("a file")
    target = where if where.startswith("/") else str(tmp_path / where)
    r = CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "-q", "--store",
                                  str(tmp_path / "s"), "--manifest", target])
    assert r.exit_code == 64, r.output
    assert message.format(tmp=tmp_path) in r.output, r.output
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))


@pytest.mark.parametrize("option", ["--list", "--metrics-file", "--manifest"])
def test_an_output_inside_the_data_prefix_is_refused_64_before_the_round(
        tmp_path: Path, option: str) -> None:
    """newuser9 K5. Old code: a dry run's `--list` and `--metrics-file` were written into
    `STORE/level_zero/data/000/`, and every later real round ended incomplete (2 malformed
    keys, exit 1) until they were removed by hand; `--manifest` there was refused by the
    round itself, after its lease: exit 1 and an `error` record, where the fault table
    says 64 and no record."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.gc.record import ROUNDS_PREFIX
    from tests.gc.helpers import AHEAD, NOW
    from tests.gc.test_cli import small_store

    store = tmp_path / "s"
    small_store(store)
    before = all_keys(LocalStore(store))
    target = store / "level_zero" / "data" / "000" / "out.txt"
    dry = ["--dry-run"] if option != "--manifest" else []
    r = CliRunner().invoke(main, ["gc", "--now", str(NOW), *AHEAD, "-q", "--store",
                                  str(store), *dry, option, str(target)])
    assert r.exit_code == 64, r.output
    assert (f"{option} {target} is inside the store's data prefix (level_zero/); refusing: "
            "later rounds would list its files") in r.output, r.output
    assert not target.exists()
    assert all_keys(LocalStore(store)) == before
    assert not list(LocalStore(store).list_all(ROUNDS_PREFIX))
    assert not (store / "_cluster" / "gc" / "lease.json").exists()


def test_cluster_start_refuses_a_trace_inside_the_data_prefix(tmp_path: Path) -> None:
    """newuser9 K5, the same for `cluster start --trace` (its nodes append to it)."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main

    store = tmp_path / "store"
    (store / "level_zero").mkdir(parents=True)
    trace = store / "level_zero" / "trace.ndjson"
    try:
        r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(tmp_path / "c"),
                                      "--store", str(store), "--trace", str(trace)])
    finally:
        if (tmp_path / "c" / "cluster.json").exists():  # started (the old code): stopped
            CliRunner().invoke(main, ["cluster", "stop", "--data-dir", str(tmp_path / "c")])
    assert r.exit_code == 64, r.output
    assert "--trace" in r.output and "inside the store's data prefix" in r.output, r.output
    assert not trace.exists()
