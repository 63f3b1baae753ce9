"""`epochgc conform` against the model behind the protocol (must pass), deliberately broken
ports (each must be caught and shrunk to at most 10 steps), and ports that break the
protocol (each reported as such). Budget: about 30 s of the default run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.conform import report
from epochgc.impl.conform.client import PortProcess, ProtocolFailure
from epochgc.impl.conform.compare import agrees
from epochgc.impl.conform.driver import (
    CHUNK,
    Broken,
    _lockstep,
    generate,
    read_vector,
    replay_vectors,
    run_program,
    vector_files,
)
from epochgc.model.replay import run as replay_run
from tests.conform.procs import PGRP, live_where

ROOT = Path(__file__).resolve().parents[2]
MODEL = [sys.executable, "-m", "epochgc.model.port"]
# The CLI's defaults (derandomized: the same programs every run); EPOCHGC_CONFORM_PROFILE=deep
# runs five times as many (minutes, not in the default run).
DEEP = os.environ.get("EPOCHGC_CONFORM_PROFILE") == "deep"
EXAMPLES, MAX_STEPS = (1000, 30) if DEEP else (200, 30)
SEMANTIC_BUGS = ["lo_off_by_one", "untermed", "m_from_max", "skip_missing", "lrlo_backwards",
                 "loose_key", "delete_keeps_seen"]


def broken(name: str) -> list[str]:
    return [sys.executable, "-m", f"tests.conform.ports.{name}"]


def cli(*args: str) -> tuple[int, str]:
    # A generous timeout unless a test sets one: a loaded CI machine is not a hanging port.
    argv = list(args) if "--timeout-per-step" in args else ["--timeout-per-step", "30", *args]
    # Through the `epochgc` group, as a user runs it (its usage errors exit 64).
    result = CliRunner().invoke(main, ["conform", *argv], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # `python -m tests.conform.ports.NAME` resolves from here


def test_model_adapter_passes_vectors_and_programs() -> None:
    code, out = cli("--examples", str(EXAMPLES if DEEP else 40), "--json", "--", *MODEL)
    summary = json.loads(out)
    assert code == 0, out
    assert summary["result"] == "pass"
    assert summary["vectors"]["passed"] == len(vector_files()) and not summary["vectors"]["skipped"]
    assert summary["generated"]["programs"] >= 40 and summary["generated"]["steps"] > 200


@pytest.mark.parametrize("name", SEMANTIC_BUGS)
def test_broken_port_caught_and_shrunk(name: str, tmp_path: Path) -> None:
    with PortProcess(broken(name), timeout=30) as port:
        g = generate(port, "reference", examples=EXAMPLES, seed=None, max_steps=MAX_STEPS)
        assert g.failed is not None, f"{name}: not caught in {g.programs} programs"
        steps = len(g.failed.outcomes) - 1
        assert steps <= 10, report.table(g.failed)
        # The written vector is a real regression test: the model passes it ...
        vec = tmp_path / "shrunk.jsonl"
        vec.write_text(report.vector(g.failed, broken(name)))
        code = replay_run(str(vec), None, out=lambda _: None, err=lambda _: None)
        refused_last = "op" not in g.failed.outcomes[-1].model
        assert code == (2 if refused_last else 0), vec.read_text()
        # ... and the broken port fails it.
        assert replay_vectors(port, "reference", [vec]).failed is not None


def test_seed_repeatable_and_derandomized_default() -> None:
    with PortProcess(MODEL, timeout=30) as port:
        runs = [generate(port, "reference", examples=15, seed=seed, max_steps=10).steps
                for seed in (None, None, 7, 7)]
    assert runs[0] == runs[1] and runs[2] == runs[3]


def test_programs_longer_than_a_chunk_stay_in_step() -> None:
    """Several chunks, then a disagreement in the middle of a chunk: the answers still owed
    are drained, so the program after it is compared line for line again."""
    long = [{"op": "fence", "term": 1, "epoch": e} for e in range(3 * CHUNK + 5)]
    gc = {"op": "gc_epoch", "snapshot_revision": 5, "partitions": ["p0", "p1"],
          "reports": [{"partition": "p0", "replica": "r0", "inactive_epoch": 3}]}
    with PortProcess(broken("skip_missing"), timeout=30) as port:
        assert not run_program(port, "reference", long).failed
        bad = run_program(port, "reference", [{"op": "state"}, gc, *long[: CHUNK + 3]])
        assert bad.failed and len(bad.outcomes) == 3  # reset, state, gc_epoch
        assert not run_program(port, "reference", long).failed


def test_floor_at_the_window_offset_caught_by_the_vectors() -> None:
    """A planted bug the generated programs miss (LRLO exactly at the window offset after a
    slide is rare in them) but the shipped vectors catch: why conform replays them first."""
    code, out = cli("--vectors", "--", *broken("floor_strict"))
    assert code == 1 and "disagreement in" in out


def test_generation_catches_what_the_vectors_miss(tmp_path: Path) -> None:
    """`missing` sorted by name instead of snapshot order: every shipped vector agrees, a
    generated program does not; the shrunk program, written with --out, is a vector the
    model passes and the broken port fails."""
    out_file = tmp_path / "missing.jsonl"
    code, out = cli("--json", "--out", str(out_file), "--", *broken("missing_sorted"))
    summary = json.loads(out)
    assert code == 1 and summary["failure"]["source"] == "generated", out
    assert summary["vectors"]["passed"] == len(vector_files())
    assert summary["failure"]["failing_step"] <= 10
    assert replay_run(str(out_file), None, out=lambda _: None, err=lambda _: None) == 0
    with PortProcess(broken("missing_sorted"), timeout=30) as port:
        assert replay_vectors(port, "reference", [out_file]).failed is not None


def test_disagreement_printed_and_written(tmp_path: Path) -> None:
    out_file = tmp_path / "fail.jsonl"
    code, out = cli("--out", str(out_file), "--", *broken("skip_missing"))
    assert code == 1
    assert "disagreement in" in out and "gc-epoch-reference.jsonl" in out
    assert "\n!=" in out  # the failing row is marked
    assert out_file.read_text().startswith("# variant: reference\n")


def test_json_summary_of_a_disagreement() -> None:
    code, out = cli("--json", "--", *broken("loose_key"))
    summary = json.loads(out)
    assert code == 1 and summary["result"] == "disagree"
    last = summary["failure"]["failing_step"]
    assert summary["failure"]["port"][last] != summary["failure"]["model"][last]


def _declared(path: Path) -> str | None:
    from epochgc.model.replay import _HEADER

    for line in path.read_text(encoding="utf-8").splitlines():
        m = _HEADER.match(line.strip())
        if m:
            return m.group(1).strip()
    return None


def test_variant_the_port_does_not_implement_is_skipped() -> None:
    code, out = cli("--vectors", "--json", "--", *broken("reference_only"))
    summary = json.loads(out)
    assert code == 0, out
    skipped = summary["vectors"]["skipped"]
    # Judged by the declared variant, not the file name (`f1-shape-reference-enqueue.jsonl`
    # is `reference-enqueue`, which a reference-only port does not implement).
    assert skipped and all(_declared(Path(p)) != "reference" for p in skipped)
    # Claiming a variant and refusing it is a disagreement, not a skip.
    code, out = cli("--vectors", "--variant", "strict", "--", *broken("reference_only"))
    assert code == 1 and "fence-strict.jsonl" in out


@pytest.mark.parametrize(("name", "kind", "detail"), [
    ("crash", "exited", "exited with status 3"),
    ("garbage", "garbage", "b'OK'"),
    ("hang", "timeout", "no answer within 0.5 s"),
    ("chatty", "extra-output", "more than one line"),
    # The extra line arrives only after the next line was sent: caught by its sequence
    # number, whatever the timing (a chatty port once passed for a disagreement under load).
    ("chatty_late", "extra-output", "more than one line"),
    # Issue 42 survivor 5: `"seq": true` for line 1 is not the number 1.
    ("bool_seq", "garbage", '{"seq": N, "answer"'),
    # s28f: an answer without a line end was gathered until the step's time ran out (up to
    # an hour with --timeout-per-step 3600), each read rescanning all of it; bounded now
    # as a vector line is (old code: "timeout" after 30 s).
    ("endless", "garbage", "more than 1048576 bytes without a line end"),
])
def test_protocol_breakers_reported(name: str, kind: str, detail: str) -> None:
    # Only the hanging port gets the short timeout: under load, a slow answer from the
    # others must not pass for a hang.
    timeout = "0.5" if kind == "timeout" else "30"
    code, out = cli("--timeout-per-step", timeout, "--json", "--", *broken(name))
    summary = json.loads(out)
    assert code == 76, out  # EX_PROTOCOL
    assert summary["result"] == "broken"
    assert summary["protocol"]["kind"] == kind and detail in summary["protocol"]["detail"]
    last = summary["failure"]["failing_step"]
    assert summary["failure"]["port"][last] is None


def test_protocol_break_during_generation_is_not_shrunk() -> None:
    """Inside Hypothesis too, a broken port ends the run at once (no shrinking against a
    dead process), with the program it broke on."""
    with PortProcess(broken("crash"), timeout=30) as port, pytest.raises(Broken) as e:
        generate(port, "reference", examples=200, seed=None, max_steps=30)
    assert e.value.failure.kind == "exited"
    last = e.value.run.outcomes[-1]
    assert last.port is None and isinstance(last.step, dict) and last.step["op"] == "gc_epoch"


def test_usage_errors() -> None:
    code, out = cli("--variant", "nope", "--", *MODEL)
    assert code == 64 and "unknown variant" in out
    code, out = cli("--", "/nonexistent/port")
    assert code == 69  # a program it needs is absent
    code, _ = cli("--vectors")
    assert code == 64  # no command


def test_compare_wording_and_refusals() -> None:
    model = {"op": "gc_epoch", "M": None, "blocked": "no report for p0", "missing": ["p0"]}
    assert agrees({**model, "blocked": "p0 blocks", "step": 7}, model)
    assert not agrees({**model, "blocked": None}, model)
    assert not agrees({**model, "extra": 1}, model)
    assert agrees({"error": "bad"}, {"error": "x"})
    assert not agrees({"error": ""}, {"error": "x"})
    assert not agrees({"error": "bad"}, model)
    assert not agrees({"op": "state", "inactive_epoch": True}, {"op": "state", "inactive_epoch": 1})


def test_epochgc_conform_subprocess() -> None:
    """The installed command end to end (the CliRunner tests above share a process)."""
    proc = subprocess.run(
        [sys.executable, "-c", "from impl.cli import main; main()", "conform", "--vectors",
         "--", *MODEL], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("vectors: ")


# Lines the shipped vectors take (a reset per file and its steps): a port wrong at a line
# below this is wrong in the vectors phase, above it in the generated phase.
_VECTOR_LINES = sum(1 + len(read_vector(f)[1]) for f in vector_files())
# "At a random step": drawn once from a fixed seed, so a failure names its line and repeats.
_ONCE = random.Random(41_16).sample(range(1, _VECTOR_LINES), 2)
_ONCE_GEN = random.Random(41_16).sample(range(_VECTOR_LINES + 10, _VECTOR_LINES + 300), 2)


@pytest.mark.parametrize(("phase", "line_no"), [("vectors", n) for n in _ONCE]
                         + [("generated", n) for n in _ONCE_GEN])
def test_a_port_wrong_once_fails(phase: str, line_no: int) -> None:
    """newuser16 S1: a wrong answer followed, on a silent re-run of the same program, by
    the right one was counted as agreement: `conform` passed (exit 0) a port wrong once.
    The first wrong answer is the verdict; the second run only adds that the port is not
    deterministic."""
    args = ["--vectors"] if phase == "vectors" else ["--examples", "30"]
    code, out = cli(*args, "--json", "--", *broken("wrong_once"), str(line_no))
    summary = json.loads(out)
    assert code == 1 and summary["result"] == "disagree", out
    failure = summary["failure"]
    assert (failure["source"] == "generated") == (phase == "generated"), failure["source"]
    assert failure["port"][failure["failing_step"]].get("wrong_once") is True, out
    assert "not deterministic" in failure["second_run"], failure["second_run"]


def test_a_port_wrong_once_is_said_so() -> None:
    code, out = cli("--vectors", "--", *broken("wrong_once"), str(_ONCE[0]))
    assert code == 1 and "disagreement in" in out
    assert out.rstrip().endswith("(it is not deterministic); the first wrong answer is the "
                                 "verdict"), out


def test_a_late_second_answer_is_caught_in_lockstep_too() -> None:
    """The lockstep path (the failing program run again) reads the late copy of the restart
    answer as the next line's answer: caught by its sequence number, not read as a
    disagreement (the old framing returned a failed run here: exit 1, not 3)."""
    steps = [{"op": "restart", "node": "n0"}, {"op": "state"}]
    with PortProcess(broken("chatty_late"), timeout=30) as port, pytest.raises(Broken) as e:
        _lockstep(port, "reference", steps, "test")
    assert e.value.failure.kind == "extra-output", e.value.failure
    assert "more than one line for line 1" in e.value.failure.detail


def test_a_second_answer_to_the_last_line_is_caught_at_the_end() -> None:
    """Nothing follows the last line, so its extra answer is caught as the port ends."""
    with PortProcess(broken("chatty"), timeout=30) as port:
        run = run_program(port, "reference", [{"op": "restart", "node": "n0"}])
        assert not run.failed  # every answer so far was the right one
        with pytest.raises(ProtocolFailure) as e:
            port.finish()
    assert e.value.kind == "extra-output"


def test_the_model_port_ends_cleanly() -> None:
    with PortProcess(MODEL, timeout=30) as port:
        assert not run_program(port, "reference", [{"op": "restart", "node": "n0"}]).failed
        port.finish()


def test_no_shipped_vectors_is_refused_not_passed(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """An installation without spec/vectors once checked 0 files and exited 0."""
    import epochgc.impl.conform.driver as driver

    monkeypatch.setattr(driver, "VECTORS_DIR", tmp_path)
    monkeypatch.setattr(driver.vector_files, "__defaults__", (tmp_path,))
    code, out = cli("--vectors", "--", *MODEL)
    assert code == 69 and "no vector files" in out


def test_every_shipped_vector_file_is_replayed() -> None:
    """Issue 42: `--vectors` replays every .jsonl under spec/vectors, its subdirectories
    (the solver-generated ones) included: a driver that read fewer would pass a port on
    less. Counted here independently of the driver (os.walk)."""
    root = ROOT / "spec" / "vectors"
    want = sorted(str(Path(d) / f) for d, _, fs in os.walk(root) for f in fs
                  if f.endswith(".jsonl"))
    assert any(Path(w).parent != root for w in want)  # there are nested ones
    code, out = cli("--vectors", "--json", "--", *MODEL)
    summary = json.loads(out)
    assert code == 0, out
    vec = summary["vectors"]
    assert vec["passed"] + len(vec["skipped"]) == len(want), (vec, len(want))


class _Jumping:
    """A clock that moves on a minute each time it is read: every wait is over at once."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 60.0
        return self.t


def test_a_port_that_never_answers_is_told_which_time_ran_out() -> None:
    """newuser5 G7: `conform --timeout-per-step 2 -- ./stubborn.sh` said "no answer within
    12 s": the first answer also waits 10 s for the port to start, which it did not say."""
    with PortProcess(broken("mute"), timeout=2.0, clock=_Jumping()) as port, \
            pytest.raises(ProtocolFailure) as e:
        port.ask('{"op": "state"}')
    assert e.value.kind == "timeout"
    assert e.value.detail == ("no answer within 12 s to its first line: the per-step "
                              "timeout (2 s) plus 10 s for the port to start"), e.value.detail


@pytest.mark.parametrize("name", ["eager", "eager_split"])
def test_a_port_that_prints_before_its_first_line_is_told_so(name: str) -> None:
    """newuser5 G7: a port that prints `garbage` at once was told it "wrote more than one
    line for a step of the previous program" at step 0 of the first program. `eager_split`
    writes the line in two writes (PYTHONUNBUFFERED=1's `print`): the message quoted the
    first write alone, b'garbage'."""
    with PortProcess(broken(name), timeout=30.0) as port:
        assert port._readable(30.0), "the port printed nothing"
        with pytest.raises(ProtocolFailure) as e:
            port.ask('{"op": "state"}')
    assert e.value.kind == "extra-output"
    assert e.value.detail == "printed before it was sent any line: b'garbage\\n'", e.value.detail


@pytest.mark.parametrize("first", ["exit", "send"])
def test_a_port_that_exits_at_once_is_said_to_have_exited(first: str) -> None:
    """newuser12 P9. Old code: `conform -- sh -c 'exit 3'` said "extra-output: printed
    before it was sent any line: b''" when the port had exited before the first line was
    sent, "exited with status 3" when after. Both orders are made here, not raced for: the
    port's exit is waited for first, or the line is sent while it still runs (it reads the
    line, then exits without an answer)."""
    script = "exit 3" if first == "exit" else "read -r _; exit 3"
    with PortProcess(["sh", "-c", script], timeout=30.0) as port:
        if first == "exit":
            port._proc.wait(timeout=30)
        with pytest.raises(ProtocolFailure) as e:
            port.ask('{"op": "state"}')
    assert (e.value.kind, e.value.detail) == ("exited", "exited with status 3 before answering")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("mode", ["ignore-term", "exits"])
def test_close_stops_the_ports_whole_process_group(
        mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser8 I4: a port run through a wrapper leaves no process behind when conform stops
    it: not a child that outlives the wrapper's SIGTERM, nor one whose wrapper has already
    exited."""
    monkeypatch.setattr("epochgc.impl.conform.client.TERM_GRACE_S", 0.5)
    ready = tmp_path / "child.pid"
    port = PortProcess([*broken("wrapped_hang"), mode, str(ready)], timeout=30)
    try:
        for _ in range(2400):  # the child is set up before the port is stopped, however slow
            if ready.exists():
                break
            time.sleep(0.05)
        child = int(ready.read_text())
        assert child in live_where(PGRP, port._proc.pid)
        if mode == "exits":
            assert port._proc.wait(timeout=60) == 3
    finally:
        port.close()
    left = live_where(PGRP, port._proc.pid)
    for pid in left:  # a failing run leaves nothing either
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"left running (the child was {child})"


@pytest.mark.parametrize("depth", [100_000, 990, 400])
def test_a_deeply_nested_answer_is_garbage(depth: int) -> None:
    """newuser8 I3: an answer nested 100,000 deep gave "Error: RecursionError", exit 1."""
    code, out = cli("--vectors", "--json", "--", *broken("deep"), str(depth))
    assert code == 76, out[-300:]  # EX_PROTOCOL
    assert json.loads(out)["protocol"]["kind"] == "garbage"


def test_a_garbage_answer_is_shown_in_the_table() -> None:
    """newuser8 I7: the table's port column said "(no answer)" for a port that answered,
    with something that is not an answer."""
    code, out = cli("--vectors", "--", *broken("garbage"))
    assert code == 76, out
    assert "(not an answer: b'OK')" in out and "(no answer)" not in out, out


def test_what_a_port_printed_before_any_line_is_shown_in_the_table() -> None:
    """i41y (newuser9 pass 2): a port that printed `garbage` before it was sent a line was
    shown as "(no answer)" (i41u's fix covered garbage in answer to a step). Escaped and
    cut as any line that is not an answer."""
    with PortProcess(broken("garbage_at_start"), timeout=30) as port, \
            pytest.raises(Broken) as e:
        # Its line is there before the first is sent (else it is read as the reset's
        # answer: i41u's case), as a shell's `echo` beats conform's first write.
        assert port._readable(300), "the port printed nothing"
        run_program(port, "reference", [{"op": "state"}])
    assert e.value.failure.kind == "extra-output", e.value.failure
    out = report.table(e.value.run, e.value.failure.answered)
    assert "(no answer)" not in out, out
    shown = repr(b"garbage \x1b[2J" + b"x" * 48)  # its first 60 bytes
    assert f"(not an answer: {shown}...)" in out, out
    assert "\x1b" not in out  # the escape never reaches the terminal raw


@pytest.mark.parametrize("value", ["1e-300", "0.001", "0"])
def test_a_per_step_timeout_no_port_can_meet_is_refused(value: str) -> None:
    """newuser8 (pass 2): `--timeout-per-step 1e-300` was accepted and the port blamed
    ("timeout: no answer within 1e-300 s", 76)."""
    code, out = cli("--timeout-per-step", value, "--vectors", "--", *MODEL)
    assert code == 64 and "0.01<=x<=3600" in out, (code, out)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_the_wait_for_a_port_that_ignores_sigterm_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser8 (pass 3): nothing was printed during the ~6 s conform waits before SIGKILL
    for a port that ignores SIGTERM."""
    monkeypatch.setattr("epochgc.impl.conform.client.TERM_GRACE_S", 1.5)
    monkeypatch.setattr("epochgc.impl.conform.client._QUIET_WAIT_S", 0.2)
    ready = tmp_path / "child.pid"
    said: list[str] = []
    port = PortProcess([*broken("wrapped_hang"), "ignore-term", str(ready)], timeout=30,
                       say=said.append)
    try:
        for _ in range(2400):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists(), "the port's child never started"
    finally:
        port.close()
    assert said == ["waiting up to 1.3 s for the port to stop on SIGTERM; then SIGKILL"], said
    assert live_where(PGRP, port._proc.pid) == []
