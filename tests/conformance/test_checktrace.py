"""`epochgc check-trace`: a trace written by impl/trace.py from a simulated run conforms; a
doctored decision is the first divergence (exit 1); malformed input is exit 65 with FILE:LINE."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.trace import TraceWriter
from tests.conformance.harness import Harness


def write_trace(path: Path) -> None:
    h = Harness(seed=5)
    try:
        for _ in range(3):
            h.produce(["t/0", "t/1"], 2, 1, None)
            h.service_round()
        leader = h.c.leader("t/0")
        h.c.fail_next_replicate("t/0", leader)
        h.produce(["t/0"], 1, leader, h.cluster_epoch())
        h.produce(["t/0"], 1, leader, 1)  # below the window: rejected at the fence
        h.check_step()
        writers = {n: TraceWriter(path, n) for n in (1, 2, 3)}
        # Interleave as the processes would: fences and applies in the order they happened.
        for nid, name, d, applied in h.c.fence_inputs:
            writers[nid].fence(name, d, applied)
        for rec in h.c.apply_log:
            writers[rec.node].apply(rec.partition, rec.event)
        for w in writers.values():
            w.close()
    finally:
        h.close()


def run(path: Path) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["check-trace", str(path)])
    return r.exit_code, r.output


def test_conforming_trace(tmp_path: Path) -> None:
    t = tmp_path / "trace.ndjson"
    write_trace(t)
    code, out = run(t)
    assert code == 0, out
    assert "conforms" in out


def test_doctored_fence_decision_is_the_first_divergence(tmp_path: Path) -> None:
    t = tmp_path / "trace.ndjson"
    write_trace(t)
    lines = t.read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if '"admitted":false' in ln)
    lines[i] = lines[i].replace('"admitted":false', '"admitted":true')
    t.write_text("\n".join(lines) + "\n")
    code, out = run(t)
    assert code == 1, out
    assert f"trace.ndjson:{i + 1}:" in out and "model" in out


def test_doctored_apply_state_diverges(tmp_path: Path) -> None:
    t = tmp_path / "trace.ndjson"
    write_trace(t)
    lines = t.read_text().splitlines()
    i = max(i for i, ln in enumerate(lines) if '"kind":"apply"' in ln)
    doc = json.loads(lines[i])
    doc["state"]["last_reconciled_offset"] += 1
    lines[i] = json.dumps(doc)
    t.write_text("\n".join(lines) + "\n")
    code, out = run(t)
    assert code == 1, out
    assert f":{i + 1}:" in out


def test_malformed_line_is_exit_2_with_file_and_line(tmp_path: Path) -> None:
    t = tmp_path / "trace.ndjson"
    write_trace(t)
    with t.open("a") as f:
        f.write('{"v": 1, "kind": "apply"\n')
    n = len(t.read_text().splitlines())
    code, out = run(t)
    assert code == 65
    assert f"trace.ndjson:{n}:" in out


def test_a_line_that_is_not_utf8_is_exit_65_with_file_and_line(tmp_path: Path) -> None:
    """newuser8 I2. Old code: "Error: UnicodeDecodeError: 'utf-8' codec can't decode byte
    0xff in position 0: invalid start byte", exit 1 (replay said 65)."""
    t = tmp_path / "trace.ndjson"
    write_trace(t)
    n = len(t.read_text().splitlines())
    with t.open("ab") as f:
        f.write(b'\xff\xfe\n')
    code, out = run(t)
    assert code == 65, out
    assert out.strip() == (f"epochgc check-trace: error: {t}:{n + 1}: not UTF-8 (byte 0xff at "
                           "column 1)")
    assert "UnicodeDecodeError" not in out


# ---- issue 42: each of the checker's comparisons fails on a trace doctored for it --------------


@pytest.fixture(scope="module")
def conforming(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """One conforming trace's lines (written once: a harness run), doctored per test."""
    t = tmp_path_factory.mktemp("trace") / "trace.ndjson"
    write_trace(t)
    return t.read_text().splitlines()


def _doctored(tmp_path: Path, lines: list[str]) -> tuple[int, str]:
    t = tmp_path / "trace.ndjson"
    t.write_text("\n".join(lines) + "\n")
    return run(t)


def _docs(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in lines]


def test_two_nodes_applying_different_commands_at_one_index_diverge(
        tmp_path: Path, conforming: list[str]) -> None:
    docs = _docs(conforming)
    first: dict[tuple[str, int], int] = {}
    for i, d in enumerate(docs):
        if d["kind"] != "apply" or d["command"]["type"] != "placeholder":
            continue
        k = (d["partition"], d["index"])
        if k in first and docs[first[k]]["node"] != d["node"]:
            break
        first.setdefault(k, i)
    else:
        raise AssertionError("no index applied by two nodes")
    d["command"]["key"] += "-doctored"  # the same state after it: only the command differs
    lines = [*conforming]
    lines[i] = json.dumps(d)
    code, out = _doctored(tmp_path, lines)
    assert code == 1 and "state-machine safety" in out, out


def test_a_flipped_apply_decision_diverges(tmp_path: Path, conforming: list[str]) -> None:
    docs = _docs(conforming)
    i = next(i for i, d in enumerate(docs) if d["kind"] == "apply" and d["accepted"] is True)
    docs[i]["accepted"] = False  # the state after it left as it was
    code, out = _doctored(tmp_path, [json.dumps(d) for d in docs])
    assert code == 1 and f":{i + 1}:" in out and "node accepted=False" in out, out


def test_a_fence_on_an_applied_state_the_log_never_reaches_diverges(
        tmp_path: Path, conforming: list[str]) -> None:
    docs = _docs(conforming)
    i = next(i for i, d in enumerate(docs) if d["kind"] == "fence")
    docs[i]["applied"]["last_reconciled_offset"] += 1000  # no effect on the decision
    code, out = _doctored(tmp_path, [json.dumps(d) for d in docs])
    assert code == 1 and "never reaches" in out, out


def test_a_fence_window_the_model_does_not_give_diverges(
        tmp_path: Path, conforming: list[str]) -> None:
    docs = _docs(conforming)
    i = next(i for i, d in enumerate(docs) if d["kind"] == "fence" and d["window"])
    docs[i]["window"][1] += 1  # admitted as before: only the reported window differs
    code, out = _doctored(tmp_path, [json.dumps(d) for d in docs])
    assert code == 1 and f":{i + 1}:" in out and "model =" in out, out


def test_an_index_applied_twice_in_one_run_diverges(
        tmp_path: Path, conforming: list[str]) -> None:
    docs = _docs(conforming)
    i = next(i for i, d in enumerate(docs) if d["kind"] == "apply")
    # the same record again right after it: the same state, only the index repeats
    code, out = _doctored(tmp_path, [*conforming[: i + 1], conforming[i], *conforming[i + 1:]])
    assert code == 1 and f":{i + 2}:" in out and "in one run" in out, out


# ---- issue 41, newuser16 S2, S3, S9 ------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "99999999999999999999"])
def test_context_out_of_range_is_a_usage_error_naming_the_option(
        tmp_path: Path, conforming: list[str], value: str) -> None:
    """S2. Old code: -1 "error: maxlen must be non-negative" exit 1 (a deque's words); 10^20
    an OverflowError traceback."""
    t = tmp_path / "trace.ndjson"
    t.write_text("\n".join(conforming) + "\n")
    r = CliRunner().invoke(main, ["check-trace", "--context", value, str(t)])
    assert r.exit_code == 64, r.output
    assert r.output.rstrip().endswith(
        f"epochgc check-trace: error: Invalid value for '--context': {value} is not in the "
        "range 0<=x<=1000000."), r.output


def test_a_line_longer_than_the_bound_is_refused_at_the_bound(tmp_path: Path) -> None:
    """S3, a regular file: one line of MAX_LINE + 1 bytes is refused as replay refuses it,
    naming the file and the line (old code: read it whole, then "Expecting value")."""
    from epochgc.model.replay import MAX_LINE

    t = tmp_path / "one-line.ndjson"
    t.write_bytes(b"1" * (MAX_LINE + 1))
    code, out = run(t)
    assert code == 65, out
    assert out.strip() == (f"epochgc check-trace: error: {t}:1: line longer than {MAX_LINE} "
                           "bytes")


def test_an_endless_line_is_refused_not_gathered() -> None:
    """S3, the tester's command: `check-trace /dev/zero` grew without bound (7.7 GB in 12 s)
    and, under a memory limit, ended in a MemoryError traceback, exit 1. Under a 1 GiB
    address-space limit (the old code's fate in a container) it must exit 65 at the bound."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", "from epochgc.impl.cli import main; main()", "check-trace",
         "/dev/zero"], cwd=root, capture_output=True, text=True, timeout=120,
        preexec_fn=limit, check=False)
    assert proc.returncode == 65, proc.stderr[-2000:]
    assert proc.stderr.strip() == ("epochgc check-trace: error: /dev/zero:1: line longer "
                                   "than 1048576 bytes"), proc.stderr[-2000:]


def test_a_divergence_says_how_many_records_were_checked(
        tmp_path: Path, conforming: list[str]) -> None:
    """S9: the trace twice over diverges early in the copy (an index applied again in one
    run); old code said "checked: 2N records" though the check stopped at that record."""
    n = len(conforming)
    code, out = _doctored(tmp_path, [*conforming, *conforming])
    assert code == 1, out
    found = re.search(r"trace\.ndjson:(\d+): ", out)
    assert found is not None, out
    at = int(found.group(1))  # every line is a record: the records checked, this one included
    assert n < at < 2 * n, out
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"checked: {at:,} of {2 * n:,} records ("), last
    assert "stopped at the first divergence" in last, last


def test_a_torn_record_with_another_nodes_record_glued_after_it_is_named(tmp_path: Path) -> None:
    """review41a R6: a node's trace write failed part-way and another node appended before
    the torn bytes could be cut (impl/trace.py leaves them). The line is refused (a record is
    cut in two), and the error says that, which bytes, and whose whole record follows; old
    code said only the JSON decoder's "Extra data" or "Expecting ..."."""
    t = tmp_path / "trace.ndjson"
    write_trace(t)
    lines = t.read_text().splitlines()
    after = json.loads(lines[5])
    lines[4:6] = [lines[4][:57] + lines[5]]  # 57 bytes of record 5, then record 6 whole
    t.write_text("\n".join(lines) + "\n")
    code, out = run(t)
    assert code == 65, out
    assert (f"{t}:5: a torn record: its first 57 bytes are what a node's failed trace write "
            f"left (`cluster status`: 'a torn record is left at byte ...'), and node "
            f"{after['node']}'s record {after['seq']} was appended after them on this line"
            ) in out, out


def test_a_line_that_is_not_json_is_said_as_replay_says_it(tmp_path: Path) -> None:
    """newuser23 F5: `check-trace /etc/passwd` said Python's decoder words, "Expecting
    value: line 1 column 1 (char 0)", where `replay` says "malformed JSON: ... at column"."""
    t = tmp_path / "passwd"
    t.write_text("root:x:0:0:root:/root:/bin/bash\n")
    code, out = run(t)
    assert code == 65, out
    assert f"{t}:1: malformed JSON: Expecting value at column 1" in out, out
    assert "(char" not in out, out
