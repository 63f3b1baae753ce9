"""The replay engine and `epochgc replay` (spec/VECTORS.md)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.model.replay import (
    MAX_LINE,
    Replayer,
    ReplayError,
    json_equal,
    mismatched,
    replay_lines,
    run,
    variant_from_filename,
)
from epochgc.model.replay_cli import replay as replay_cmd


def _steps(*steps: dict[str, Any]) -> list[str]:
    return [json.dumps(s) for s in steps]


def _cli(tmp_path: Path, lines: list[str], *args: str, name: str = "v.jsonl") -> Any:
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return CliRunner().invoke(replay_cmd, [*args, str(f)])


# -- every op ------------------------------------------------------------------------------


def test_partition_ops() -> None:
    r = Replayer()
    assert r.step({"op": "fence", "term": 1, "epoch": 5}, 1) == {
        "step": 1, "op": "fence", "admitted": True, "window": [5, 5]}
    assert r.step({"op": "apply_placeholder", "epoch": 5, "offset": 0}, 2)["accepted"] is True
    out = r.step({"op": "apply_advance_epoch", "epoch": 8, "offset": 1}, 3)
    assert out["applied_window"] == [5, 8]
    out = r.step({"op": "apply_reconciled", "lrlo": 1, "lro": 4}, 4)
    assert out == {"step": 4, "op": "apply_reconciled", "min_epoch_lower_bound": 5,
                   "inactive_epoch": 4}
    assert r.step({"op": "state"}, 5) == {
        "step": 5, "op": "state", "max_applied_epoch": 8, "previous_applied_epoch": 5,
        "min_epoch_lower_bound": 5, "window_offset": 1, "last_reconciled_log_offset": 1,
        "last_reconciled_offset": 4, "inactive_epoch": 4}


def test_seen_windows_are_per_node_and_restart_forgets() -> None:
    r = Replayer()
    r.step({"op": "fence", "term": 1, "epoch": 5, "node": "a"}, 1)
    r.step({"op": "fence", "term": 1, "epoch": 9, "node": "b"}, 2)
    assert r.seen["a"] is not None and r.seen["b"] is not None
    assert r.step({"op": "restart", "node": "a"}, 3) == {"step": 3, "op": "restart"}
    assert r.seen["a"] is None and r.seen["b"] is not None
    r.step({"op": "restart"}, 4)
    assert r.seen == {"a": None, "b": None}


def test_cluster_ops() -> None:
    r = Replayer()
    out = r.step({"op": "gc_epoch", "snapshot_revision": 9, "partitions": ["a", "b"],
                  "reports": [{"partition": "a", "replica": "r0", "inactive_epoch": 3}]}, 1)
    assert out["M"] is None and "b" in out["blocked"] and out["missing"] == ["b"]
    out = r.step({"op": "gc_eligible", "key": "level_zero/data/001/000000000000000003/x",
                  "age_s": 5, "M": 3, "grace_s": 5}, 2)
    assert out == {"step": 2, "op": "gc_eligible", "eligible": True, "error": None, "epoch": 3}
    out = r.step({"op": "gc_eligible", "key": "junk", "age_s": 5, "M": 3, "grace_s": 5}, 3)
    assert out["eligible"] is False and out["error"] and out["epoch"] is None


def test_variant_is_used() -> None:
    steps = _steps({"op": "apply_placeholder", "epoch": 5, "offset": 0},
                   {"op": "apply_placeholder", "epoch": 7, "offset": 1}, {"op": "state"})
    assert replay_lines(steps)[-1]["inactive_epoch"] == 4
    assert replay_lines(steps, "watermark-from-max")[-1]["inactive_epoch"] == 6


# -- expect --------------------------------------------------------------------------------


def test_expect_lists_only_what_it_checks() -> None:
    out = replay_lines(_steps({"op": "fence", "term": 1, "epoch": 5,
                               "expect": {"admitted": True, "window": [5, 6]}}))
    assert out[0]["mismatch"] == {"window": {"expected": [5, 6], "actual": [5, 5]}}
    assert mismatched(out) == [1]


def test_json_equality_is_not_python_equality() -> None:
    assert not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal(1, 1.0) and json_equal([1, None], [1, None])
    assert not json_equal(None, [])


def test_mismatch_exits_1_after_printing_every_step(tmp_path: Path) -> None:
    res = _cli(tmp_path, _steps(
        {"op": "fence", "term": 1, "epoch": 5, "expect": {"admitted": False}},
        {"op": "state", "expect": {"max_applied_epoch": None}}))
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and "mismatch" in json.loads(lines[0])
    assert "1 of 2 steps" in res.stderr and "steps 1" in res.stderr


def test_all_expectations_hold_exits_0(tmp_path: Path) -> None:
    step = {"op": "state", "expect": {"window_offset": None}}
    res = _cli(tmp_path, ["# comment", "", *_steps(step)])
    assert res.exit_code == 0 and res.stderr == ""
    assert json.loads(res.stdout) == {
        "step": 1, "op": "state", "max_applied_epoch": None, "previous_applied_epoch": None,
        "min_epoch_lower_bound": None, "window_offset": None, "last_reconciled_log_offset": -1,
        "last_reconciled_offset": -1, "inactive_epoch": None}


def test_stdin(tmp_path: Path) -> None:
    res = CliRunner().invoke(replay_cmd, ["-"], input='{"op":"state"}\n')
    assert res.exit_code == 0 and json.loads(res.stdout)["step"] == 1


# Every line end VECTORS.md allows ("\n, \r\n or a lone \r"), then a bad step (line 5) so
# that the line numbers are compared too.
LINE_ENDS = b'{"op":"state"}\r{"op":"state"}\r\n{"op":"state"}\n\r{"op":"gc_epoch"}\r'


def test_stdin_ends_lines_as_a_file_does(tmp_path: Path) -> None:
    """i41y: `epochgc replay -` did not end a line at a lone \r (Python opens stdin with
    newline="\n" on POSIX): "<stdin>:1: step 1: json: malformed JSON: Extra data at column
    16" where the same bytes in a file replay. Through a real stdin (a pipe), as a user
    runs it."""
    path = tmp_path / "ends.jsonl"
    path.write_bytes(LINE_ENDS)
    argv = [sys.executable, "-m", "epochgc", "replay"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    from_file = subprocess.run([*argv, str(path)], capture_output=True, timeout=120, env=env)
    from_stdin = subprocess.run([*argv, "-"], input=LINE_ENDS, capture_output=True,
                                timeout=120, env=env)
    assert from_file.returncode == 65 and len(from_file.stdout.splitlines()) == 3, from_file
    assert f"{path}:5: step 4: ".encode() in from_file.stderr, from_file.stderr
    assert (from_stdin.returncode, from_stdin.stdout) == (65, from_file.stdout), from_stdin
    assert from_stdin.stderr == from_file.stderr.replace(str(path).encode(), b"<stdin>")


# -- variant selection ---------------------------------------------------------------------

_F5 = _steps({"op": "apply_placeholder", "epoch": 5, "offset": 0},
             {"op": "apply_placeholder", "epoch": 7, "offset": 1},
             {"op": "state", "expect": {"inactive_epoch": 6}})


def test_header_selects_variant_and_option_overrides(tmp_path: Path) -> None:
    lines = ["# variant: watermark-from-max", *_F5]
    assert _cli(tmp_path, lines).exit_code == 0
    assert _cli(tmp_path, lines, "--variant", "reference").exit_code == 1


def test_file_name_selects_variant_without_header(tmp_path: Path) -> None:
    assert variant_from_filename("x/f5-watermark-from-max.jsonl") == "watermark-from-max"
    assert variant_from_filename("fence-only.jsonl") == "fence-only"
    assert variant_from_filename("other.jsonl") is None
    assert _cli(tmp_path, _F5, name="f5-watermark-from-max.jsonl").exit_code == 0
    assert _cli(tmp_path, _F5, name="f5.jsonl").exit_code == 1


# -- bad input: exit 65 (EX_DATAERR), one line naming line, step and field ----------------


@pytest.mark.parametrize(
    ("line", "needles"),
    [
        ('{"op":"fence","term":1', ["step 1", "json", "malformed JSON"]),
        ("[1, 2]", ["step 1", "op", "JSON object"]),
        ('{"term":1}', ["step 1", "op: missing"]),
        ('{"op":"fnce","term":1,"epoch":1}', ["step 1", "op", "unknown op", "fnce"]),
        ('{"op":"fence","epoch":1}', ["step 1", "term: missing"]),
        ('{"op":"fence","term":1,"epoch":1,"epch":2}', ["step 1", "epch", "unknown field"]),
        ('{"op":"fence","term":1,"epoch":true}', ["step 1", "epoch", "integer"]),
        ('{"op":"fence","term":1,"epoch":1.0}', ["step 1", "epoch", "integer"]),
        ('{"op":"fence","term":-1,"epoch":1}', ["step 1", "term", ">= 0"]),
        ('{"op":"fence","term":1,"epoch":1,"node":""}', ["step 1", "node"]),
        ('{"op":"apply_placeholder","epoch":-3,"offset":0}', ["step 1", "epoch", ">= 0"]),
        ('{"op":"apply_reconciled","lrlo":-2}', ["step 1", "lrlo"]),
        ('{"op":"apply_reconciled","lrlo":1,"lro":"x"}', ["step 1", "lro"]),
        ('{"op":"state","note":5}', ["step 1", "note"]),
        ('{"op":"state","expect":{"max_epoch":1}}', ["step 1", "expect.max_epoch"]),
        ('{"op":"state","expect":[1]}', ["step 1", "expect"]),
        ('{"op":"state","expect":null}', ["step 1", "expect", "object"]),
        ('{"op":"state","op":"state"}', ["step 1", "op", "twice"]),
        ('{"op":"gc_eligible","key":"k","age_s":NaN,"M":1,"grace_s":0}', ["step 1", "NaN"]),
        ('{"op":"gc_eligible","key":"k","age_s":-1,"M":1,"grace_s":0}', ["step 1", "age_s"]),
        ('{"op":"gc_eligible","key":7,"age_s":1,"M":1,"grace_s":0}', ["step 1", "key"]),
        ('{"op":"gc_eligible","key":"k","age_s":1,"M":false,"grace_s":0}', ["step 1", "M"]),
        ('{"op":"gc_epoch","snapshot_revision":1,"partitions":"a","reports":[]}',
         ["step 1", "partitions"]),
        ('{"op":"gc_epoch","snapshot_revision":1,"partitions":["a","a"],"reports":[]}',
         ["step 1", "partitions", "twice"]),
        ('{"op":"gc_epoch","snapshot_revision":1,"partitions":["a"],'
         '"reports":[{"partition":"a","replica":"r","inactive_epoch":-5}]}',
         ["step 1", "reports[0].inactive_epoch"]),
        ('{"op":"gc_epoch","snapshot_revision":1,"partitions":["a"],'
         '"reports":[{"partition":"a","replica":"r"}]}',
         ["step 1", "reports[0].inactive_epoch: missing"]),
        ('{"op":"gc_epoch","snapshot_revision":1,"partitions":["a"],"reports":['
         '{"partition":"a","replica":"r","inactive_epoch":1},'
         '{"partition":"a","replica":"r","inactive_epoch":2}]}', ["step 1", "reports[1].replica"]),
    ],
)
def test_bad_step_exits_2_naming_step_and_field(
    tmp_path: Path, line: str, needles: list[str]
) -> None:
    res = _cli(tmp_path, ["# variant: reference", "", line])
    assert res.exit_code == 65, res.stdout
    err = res.stderr.strip()
    assert "\n" not in err and "v.jsonl:3:" in err  # comment and blank lines are counted
    for n in needles:
        assert n in err


@pytest.mark.parametrize(("line", "reason"), [
    ('{"bad json', "json: malformed JSON: Unterminated string starting at column 2"),
    ('{"op":"state\x01"}', "json: malformed JSON: Invalid control character at column 13"),
    ('{"op":"state"} x', "json: malformed JSON: Extra data at column 16"),
])
def test_malformed_json_says_each_word_once(tmp_path: Path, line: str, reason: str) -> None:
    """newuser15 S7: `{"bad json` said "Unterminated string starting at at column 2":
    Python's own message for it (and for a control character) ends in "at", to which the
    column was appended. VECTORS.md fixes only the line's shape (FILE:LINE: step N:
    FIELD: reason), and the Node port's reason is its own (tests/ports compares the place)."""
    res = _cli(tmp_path, [line])
    assert res.exit_code == 65, res.stdout
    assert res.stderr.strip().endswith(f"v.jsonl:1: step 1: {reason}"), res.stderr


def test_offsets_must_increase(tmp_path: Path) -> None:
    res = _cli(tmp_path, _steps({"op": "apply_placeholder", "epoch": 5, "offset": 3},
                                {"op": "apply_placeholder", "epoch": 4, "offset": 3}))
    assert res.exit_code == 65 and ":2: step 2: offset: log offsets must increase" in res.stderr
    assert len(res.stdout.splitlines()) == 1  # the good step before it was printed
    # after LRLO: the reconciler never passes the log end, so a later entry is above it
    res = _cli(tmp_path, _steps({"op": "apply_reconciled", "lrlo": 5},
                                {"op": "apply_placeholder", "epoch": 4, "offset": 5}))
    assert res.exit_code == 65 and "step 2: offset" in res.stderr


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (["# variant: nope", '{"op":"state"}'], ":1: variant: unknown variant 'nope'"),
        (['{"op":"state"}', "# variant: strict"], ":2: variant: the variant header must come"),
        (["# variant: strict", "# variant: strict"], ":2: variant: the variant header is given"),
        (["# variant: strict # F6", '{"op":"state"}'], "unknown variant 'strict # F6'"),
    ],
)
def test_bad_header(tmp_path: Path, lines: list[str], needle: str) -> None:
    res = _cli(tmp_path, lines)
    assert res.exit_code == 65 and needle in res.stderr


def test_unknown_variant_option_and_missing_file(tmp_path: Path) -> None:
    # newuser21 X2: a bad option value is a usage error (64, as `conform --variant` says
    # it), naming the option; it was 65 ("the file given is ... malformed") and "variant:".
    # Through the `epochgc` group, as a user runs it (its usage errors exit 64).
    from epochgc.impl.cli import main

    f = tmp_path / "v.jsonl"
    f.write_text('{"op":"state"}\n', encoding="utf-8")
    for where in ([str(f)], ["--vector", "fence-window-reference"]):
        res = CliRunner().invoke(main, ["replay", "--variant", "nope", *where])
        assert res.exit_code == 64, (res.exit_code, res.output)
        assert "--variant: unknown variant 'nope'" in res.stderr, res.stderr
    res = CliRunner().invoke(replay_cmd, [str(tmp_path / "absent.jsonl")])
    assert res.exit_code == 65 and "absent.jsonl: cannot read" in res.stderr


def test_library_without_click() -> None:
    out: list[str] = []
    err: list[str] = []
    code = run("-", None, out.append, err.append, stdin=io.StringIO('{"op":"state"}\n'))
    assert code == 0 and len(out) == 1 and not err
    with pytest.raises(ReplayError) as e:
        replay_lines(["", '{"op":"fence","term":1}'], source="mem")
    assert str(e.value) == "mem:2: step 1: epoch: missing"
    assert (e.value.line, e.value.step, e.value.field) == (2, 1, "epoch")



def test_partition_lifecycle_ops_refuse_bad_order() -> None:
    """delete_partition twice, or create_partition on a partition that exists, is bad
    input naming the step and the field (spec/VECTORS.md)."""
    from epochgc.model.replay import Replayer, ReplayError

    r = Replayer()
    with pytest.raises(ReplayError, match="create_partition follows delete_partition"):
        r.step({"op": "create_partition"}, 1)
    r.step({"op": "delete_partition"}, 2)
    with pytest.raises(ReplayError, match="already deleted") as e:
        r.step({"op": "delete_partition"}, 3)
    assert e.value.step == 3 and e.value.field == "op"
    assert r.step({"op": "fence", "term": 1, "epoch": 5}, 4)["admitted"] is False
    r.step({"op": "create_partition"}, 5)
    assert r.step({"op": "fence", "term": 1, "epoch": 5}, 6)["admitted"] is True


def test_a_file_with_no_steps_is_bad_input_not_a_pass(tmp_path: Path) -> None:
    # An outside tester: an empty file, or comments only, replayed with exit 0 and no
    # output: an empty capture passed as a replay that agreed.
    for lines in ([], ["# variant: reference", "", "# nothing else"]):
        r = _cli(tmp_path, lines)
        assert r.exit_code == 65, (r.exit_code, r.output)
        assert "no steps" in r.output


# -- output and input bounds (issue 41, a second outside tester) ---------------------------

ROOT = Path(__file__).resolve().parents[2]


def _epochgc_replay(path: str, stdout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochgc", "replay", path], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_a_closed_output_pipe_ends_quietly_and_does_not_blame_the_input() -> None:
    """`epochgc replay FILE | head -1` exited 65 `FILE: cannot read: [Errno 32] Broken
    pipe`: a pipefail script blamed a good vector file. The reader is gone before the first
    write here (its end closed at once), so every run meets the closed pipe."""
    f = ROOT / "spec" / "vectors" / "fence-window-reference.jsonl"
    read, write = os.pipe()
    os.close(read)
    try:
        r = _epochgc_replay(str(f), write)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (1, "")


def test_a_line_longer_than_the_bound_is_bad_input_read_in_bounded_memory(
        tmp_path: Path) -> None:
    """`epochgc replay /dev/zero` gathered one endless line (13 GB in 45 s). A line longer
    than MAX_LINE is refused, naming the file and the line, after MAX_LINE + 1 characters."""
    r = _epochgc_replay("/dev/zero", subprocess.PIPE)
    assert r.returncode == 65, r.stderr
    assert r.stderr == (f"epochgc replay: error: /dev/zero:1: line longer than {MAX_LINE} "
                        "characters\n")
    f = tmp_path / "long.jsonl"
    step = '{"op":"state","note":"%s"}'
    f.write_text(step % "" + "\n" + step % ("x" * MAX_LINE) + "\n", encoding="utf-8")
    res = CliRunner().invoke(replay_cmd, [str(f)])
    assert res.exit_code == 65 and f"long.jsonl:2: line longer than {MAX_LINE}" in res.stderr
    assert len(res.stdout.splitlines()) == 1  # the step before it was run and printed
    # The longest line allowed (its newline included) is a step like any other.
    f.write_text(step % ("x" * (MAX_LINE - len(step % "") - 1)) + "\n", encoding="utf-8")
    assert CliRunner().invoke(replay_cmd, [str(f)]).exit_code == 0


def test_a_shipped_vector_by_name() -> None:
    """newuser9 K10: the tour needed `python -c` to find a shipped vector's path."""
    r = CliRunner().invoke(replay_cmd, ["--vector", "fence-window-reference"])
    assert r.exit_code == 0, r.output
    assert len(r.output.splitlines()) > 10, r.output
    names = CliRunner().invoke(replay_cmd, ["--vector", "list"])
    assert names.exit_code == 0 and "fence-window-reference" in names.output.split()
    bad = CliRunner().invoke(replay_cmd, ["--vector", "../../README"])
    assert bad.exit_code == 2 and "not a shipped vector" in bad.output, bad.output
    both = CliRunner().invoke(replay_cmd, ["--vector", "fence-window-reference", "x.jsonl"])
    assert both.exit_code == 2 and "one of them" in both.output, both.output
