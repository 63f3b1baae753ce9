"""Issue 12 item 6: the deletion record and a manifest of what was really deleted, written
after the M re-read; error exits print JSON with "error" and export metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from epochgc.impl.cli import main
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, RefuseKeys, all_keys, local_spec, write_health, write_partitions
from tests.gc.test_job import GRACE, clock, make_store


def records(root: Path) -> list[dict[str, Any]]:
    store = LocalStore(root)
    return [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]


def manifest_keys(path: Path) -> set[str]:
    return set(pq.read_table(path).column("key").to_pylist())


@pytest.mark.spark
def test_manifest_lists_the_keys_really_deleted(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "store"
    eligible, _ = make_store(root)
    refused = {k for k in eligible if "/500/" in k}
    manifest = tmp_path / "deleted.parquet"
    opts = GcOptions(grace_s=GRACE, manifest=str(manifest))
    s = run_gc(spark, RefuseKeys(local_spec(root), "/500/"), opts, clock=clock)
    assert s.errors == len(refused) and s.deleted == len(eligible - refused)
    assert manifest_keys(manifest) == eligible - refused  # not the eligible set
    [rec] = records(root)
    assert rec["outcome"] == "incomplete" and rec["exit_code"] == 1
    assert rec["M"] == 100 and rec["snapshot_revision"] == 10**6
    assert rec["manifest"] == str(manifest) and s.record is not None
    assert rec["counts"]["deleted"] == len(eligible - refused)
    assert sorted(r["node"] for r in rec["reports_used"]) == ["n1", "n2"]
    assert all(r["age_s"] == 10 for r in rec["reports_used"])


@pytest.mark.spark
def test_no_manifest_when_the_round_refuses_after_the_reread(spark: Any, tmp_path: Path) -> None:
    # The found defect: the manifest was the eligible set before the re-read, written even
    # though the round then refused to delete.
    root = tmp_path / "store"
    make_store(root)
    store = LocalStore(root)
    before = all_keys(store)
    calls = iter(range(100))

    def moving_clock() -> float:
        if next(calls) == 1:  # the re-check sees a lower M
            write_health(store, "n1", NOW - 5, [("t/0", 90), ("t/1", 108)])
            write_health(store, "n2", NOW - 5, [("t/0", 90), ("t/1", None)])
        return NOW

    for dry in (True, False):
        manifest = tmp_path / f"m-{dry}.csv"
        opts = GcOptions(grace_s=GRACE, dry_run=dry, manifest=str(manifest))
        s = run_gc(spark, local_spec(root), opts, clock=moving_clock)
        assert s.exit_code == 1 and "backwards" in (s.refused or "")
        assert not manifest.exists() and s.manifest is None
        calls = iter(range(100))
        write_health(store, "n1", NOW - 10, [("t/0", 100), ("t/1", 105)])
        write_health(store, "n2", NOW - 10, [("t/0", 97), ("t/1", None)])
    assert all_keys(store) == before
    # A dry run writes no record (issue 29): only the real round's.
    assert [r["outcome"] for r in records(root)] == ["refused"]
    assert all(r["manifest"] is None for r in records(root))


def test_a_blocked_round_leaves_a_record(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_partitions(store, 10, ["t/0", "t/1"])
    write_health(store, "n1", NOW - 10, [("t/0", 5)])
    s = run_gc(
        lambda: pytest.fail("no Spark for a blocked round"),
        local_spec(tmp_path),
        GcOptions(),
        clock=clock,
    )
    assert s.exit_code == 2
    [rec] = records(tmp_path)
    assert rec["outcome"] == "blocked" and "t/1" in rec["blocked"] and rec["M"] is None


def test_invalid_report_exit_prints_json_and_exports_metrics(tmp_path: Path) -> None:
    """An invalid report blocks the round (issue 41: was `error`, exit 1, with
    `epochgc_gc_round_safety_blocked` 0); the JSON, metrics and record say so."""
    store = LocalStore(tmp_path / "s", create=True)
    write_partitions(store, 10, ["t/0"])
    store.put("_cluster/health/n1.json", b'{"node": "n1", "written_at": NaN, "replicas": []}')
    metrics = tmp_path / "gc.prom"
    metrics.write_text("epochgc_gc_round_exit_code 0.0\n")  # the last success
    r = CliRunner().invoke(
        main,
        [
            "gc",
            "--now",
            str(NOW),
            "--i-know-now-is-ahead",
            "-q",
            "--store",
            str(tmp_path / "s"),
            "--json",
            "--metrics-file",
            str(metrics),
        ],
    )
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["outcome"] == "blocked" and "'written_at'" in doc["blocked"]
    assert doc["record"] is not None and doc["record"].startswith(ROUNDS_PREFIX)
    samples = {
        s.name: s.value
        for f in text_string_to_metric_families(metrics.read_text())
        for s in f.samples
        if not s.labels
    }
    assert samples["epochgc_gc_round_exit_code"] == 2
    assert samples["epochgc_gc_round_safety_blocked"] == 1
    [rec] = records(tmp_path / "s")
    assert rec["outcome"] == "blocked" and "NaN" not in json.dumps(rec)


@pytest.mark.parametrize(("blocked", "store"), [("pyspark", "DIR"), ("boto3", "s3://bucket/p")])
def test_missing_optional_dependency_names_the_extra(
    tmp_path: Path, blocked: str, store: str
) -> None:
    # As after `pip install epochgc` alone: the module cannot be imported.
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from impl.cli import main\n"
        "main(['gc', '-q', '--store', sys.argv[1], '--json'])\n"
    )
    target = str(tmp_path) if store == "DIR" else store
    r = subprocess.run(
        [sys.executable, "-c", code, target], capture_output=True, text=True, timeout=120
    )
    extra = "spark" if blocked == "pyspark" else "s3"
    # Issue 41: refused before the round, as a usage error is: 69 (was 1, gc's
    # "incomplete"), one line naming the extra, no round: under --json, the failure object
    # (gc-admin's shape), not a round's summary.
    assert r.returncode == 69, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr == (f"epochgc gc: error: {blocked} is not installed (this command "
                        "needs it): "
                        f"pip install 'epochgc[{extra}]' (or 'epochgc[gc]', everything "
                        "`epochgc gc` uses)\n")
    doc = json.loads(r.stdout)
    assert (doc["command"], doc["outcome"], doc["exit_code"]) == ("gc", "error", 69), doc
    assert f"epochgc[{extra}]" in doc["error"], doc
