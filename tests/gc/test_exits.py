"""Issue 29 item 2: any exception ends in a record whose outcome and exit code match the
process's, and the CLI writes --json and the metrics on that path too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.gc import cli
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, BrokenRead, local_spec, simple_cluster


def _records(root: Path) -> list[dict[str, object]]:
    store = LocalStore(root)
    return [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]


def test_an_unexpected_exception_is_recorded_as_an_error(tmp_path: Path) -> None:
    # The found defect: an exception other than GcError / StoreError left a record with
    # exit code 0 (outcome `nothing-collectible`).
    simple_cluster(LocalStore(tmp_path, create=True), 100)
    with pytest.raises(ZeroDivisionError) as err:
        run_gc(lambda: pytest.fail("no Spark"), BrokenRead(local_spec(tmp_path)), GcOptions(),
               clock=lambda: NOW)
    [rec] = _records(tmp_path)
    assert rec["outcome"] == "error" and rec["exit_code"] == 1
    assert rec["error"] == "ZeroDivisionError: injected bug in a read"
    assert err.value.summary.exit_code == 1  # type: ignore[attr-defined]


def test_the_cli_exits_1_with_json_and_metrics_on_any_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simple_cluster(LocalStore(tmp_path / "s", create=True), 100)
    monkeypatch.setattr(cli, "parse_store_url", lambda *_: BrokenRead(local_spec(tmp_path / "s")))
    metrics = tmp_path / "gc.prom"
    r = CliRunner().invoke(cli.gc, ["--store", str(tmp_path / "s"), "--json", "-q",
                                    "--metrics-file", str(metrics)])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["outcome"] == "error" and "ZeroDivisionError" in doc["error"]
    assert "epochgc_gc_round_exit_code 1.0" in metrics.read_text()
    assert [rec["outcome"] for rec in _records(tmp_path / "s")] == ["error"]
