"""What `epochgc chaos` shows a person (issue 41 item 10), without a cluster: a store fault
made every producer's every attempt print a line (77 in one fault); fields printed as
Python reprs (`kinds={'kill': 2}`); the plan announced episodes that never ran; results
went to `build/chaos` under whatever directory the command ran in; no verdict line. The
end-to-end run (test_chaos_run.py) checks the same on a real run."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.chaos.cli import chaos, summary, verdict
from epochgc.impl.chaos.history import REPEAT_WINDOW_S, History
from epochgc.impl.chaos.run import ChaosResult, ChaosRun
from epochgc.impl.chaos.schedule import plan
from epochgc.impl.cli import main
from epochgc.impl.cluster.demo_gc import DemoGc
from epochgc.impl.gc.admin import write_admin_state
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import parse_store_url
from tests.gc.helpers import NOW, simple_cluster


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_of_failed_batches_is_one_line_per_window(tmp_path: Path) -> None:
    clock, shown = _Clock(), []
    h = History(tmp_path / "history.txt", shown.append, clock)
    for i in range(77):  # one store fault: 77 failures over 15 s
        clock.t = i * 15 / 77
        h("batch not acknowledged", producer=f"chaos{i % 4}", why="store down")
    h("nemesis SIGKILL", node=1)
    h("nemesis SIGKILL", node=2)  # distinct events are never held back
    h.close()
    text = (tmp_path / "history.txt").read_text()
    assert text.count("batch not acknowledged") == 77  # the file keeps everything
    noisy = [s for s in shown if "batch not acknowledged" in s]
    assert len(noisy) <= 15 / REPEAT_WINDOW_S + 2, noisy
    assert "more not shown" in noisy[-1] or "more since" in noisy[-1]
    assert sum(1 for s in shown if "SIGKILL" in s) == 2


def test_fields_are_not_python_reprs(tmp_path: Path) -> None:
    shown: list[str] = []
    h = History(tmp_path / "h.txt", shown.append)
    h("nemesis plan", episodes=3, kinds={"kill": 2, "pause": 1})
    h("nemesis power loss", nodes=[1, 2])
    h.close()
    assert shown[0].endswith("nemesis plan  episodes=3 kinds=kill:2,pause:1"), shown
    assert shown[1].endswith("nodes=1,2") and "{" not in "".join(shown)


def test_every_planned_episode_ends_within_the_run() -> None:
    for seconds, nodes, seed in ((70, 3, 3), (120, 3, 7), (600, 5, 1), (30, 3, 9)):
        for e in plan(seconds, nodes, seed):
            assert e.at + e.duration <= seconds, (seconds, seed, e)


def test_out_defaults_to_a_temporary_directory_and_a_bad_one_is_refused(
        tmp_path: Path) -> None:
    out = next(p for p in chaos.params if p.name == "out")
    assert out.default is None  # was "build/chaos", under the current directory
    (tmp_path / "file").write_text("x")
    r = CliRunner().invoke(main, ["chaos", "--out", str(tmp_path / "file" / "sub")])
    assert r.exit_code == 64 and "--out" in r.output and len(r.output.splitlines()) == 1


@pytest.mark.parametrize("earlier", ["result.json", "history.txt"])
def test_an_out_holding_an_earlier_run_is_refused_before_anything_starts(
        tmp_path: Path, earlier: str) -> None:
    """newuser25 H1: `chaos --out DIR` replaced an earlier (failed) run's result.json and
    history.txt, exit 0, without a word. Refused (64) before any node or store is touched:
    the store given here is never made, the file is unchanged."""
    (tmp_path / earlier).write_text("the earlier run's\n")
    store = tmp_path / "store"
    r = CliRunner().invoke(main, ["chaos", "--seconds", "10", "--out", str(tmp_path),
                                  "--store", str(store)])
    assert r.exit_code == 64, r.output
    [line] = r.output.splitlines()
    assert f"--out {tmp_path} already holds an earlier run's {earlier}" in line, line
    assert (tmp_path / earlier).read_text() == "the earlier run's\n"
    assert not store.exists() and sorted(p.name for p in tmp_path.iterdir()) == [earlier]


def test_the_verdict_is_one_line() -> None:
    res = ChaosResult(seconds=71.2, acked=120, faults={"kill": 2, "pause": 1})
    line = verdict(res, Path("/tmp/x"))
    assert line == ("chaos: OK: 120 records acknowledged, lost 0, in use deleted 0, 3 faults, "
                    "0 divergences, in 71s; result and history in /tmp/x")
    res.lost = 1
    assert verdict(res, Path("/tmp/x")).startswith("chaos: FAILED: ")


def test_without_json_the_result_is_a_summary_not_json() -> None:
    """Old code: the result JSON (indented) on stdout with or without --json, while every
    other command prints a summary and JSON only under --json (the slow end-to-end run
    checks the command's stdout; result.json keeps the JSON)."""
    res = ChaosResult(seconds=71.2, acked=120, objects_created=40, objects_deleted=12,
                      faults={"kill": 2, "pause": 1}, leader_changes=3, gc_rounds=5,
                      gc_paused_rounds=1)
    text = summary(res)
    assert "{" not in text and "'" not in text, text
    assert text.splitlines() == [
        "workload: acked 120 records in 40 L0 objects (0 batch(es) not acknowledged); lost 0",
        "nemesis: 3 faults (kill 2, pause 1); leader changes 3; unexpected node exits 0",
        "GC: 5 rounds deleted 12 objects, in use deleted 0; 0 blocked by the safety monitor, "
        "1 refused while paused (deleted 0)",
        "checks: trace divergences 0, Raft divergences 0, nodes that survived a disk fault 0",
    ]


def test_a_round_refused_by_the_pause_counts_as_paused(tmp_path: Path) -> None:
    """Issue 41 F7: on S3 a round refused as paused (`blocked=GC is paused ...`) ran in the
    window between the run clearing its pause flag and lifting the pause, and result.json
    said `gc_paused_rounds: 0`. Here the round is a real model round on a real paused
    store, started with the flag clear."""
    store_dir = tmp_path / "store"
    store = LocalStore(store_dir, create=True)
    simple_cluster(store, 100)
    write_admin_state(store, True, "chaos: operator pause", NOW)
    run = ChaosRun(1, 1.0, 0, tmp_path / "out", str(store_dir), None)
    try:
        run.lc.init(1, str(store_dir), run.parts, 1.0)  # a cluster never started: none up
        assert run.gc_paused is False
        gc = DemoGc(parse_store_url(str(store_dir)), store, 0.0, "model")
        asyncio.run(run._gc_round(None, gc, store))  # type: ignore[arg-type]  # no node up
    finally:
        shutil.rmtree(run.tmp, ignore_errors=True)
    assert run.result.gc_rounds == 1 and run.result.gc_paused_rounds == 1, run.result
    assert run.result.gc_paused_deleted == 0 and run.result.ok()
    # ... and a paused round is not one the safety monitor blocked (the model engine
    # counted every blocked round, the pause's too, as safety-blocked)
    assert run.result.gc_safety_blocked_rounds == 0, run.result
    assert "blocked=GC is paused" in (tmp_path / "out" / "history.txt").read_text()
