"""a round a pause stopped mid-way says who paused it and why (as a refused one
does), in its --json and its deletion record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    AHEAD,
    HOUR,
    NOW,
    put_local,
    round_held_at_first_batch,
    simple_cluster,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_a_round_stopped_by_a_pause_records_who_and_why(tmp_path: Path) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    for p in range(0, 1000, 50):
        put_local(root, format_key(p, 50, f"k{p}"), age=12 * HOUR + 60)
    pause = tmp_path / "pause"
    args = ["--now", str(NOW), *AHEAD, "--tasks", "1", "--delete-batch-size", "2",
            "--delete-concurrency", "1", "--json", "-q"]

    def pause_gc(_proc: object) -> None:
        r = CliRunner().invoke(main, ["gc-admin", "pause", "--store", str(root),
                                      "--reason", "incident 42"])
        assert r.exit_code == 0, r.output

    _, out, err = round_held_at_first_batch(root, pause, args, pause_gc)
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["interrupted"] == "paused", (doc, err[-2000:])
    record = json.loads(LocalStore(root).get(doc["record"]))
    assert "incident 42" in json.dumps(doc) and "incident 42" in json.dumps(record), (
        f"paused={doc['paused']!r}, record paused={record.get('paused')!r}")
