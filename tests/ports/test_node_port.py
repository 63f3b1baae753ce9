"""The Node.js port (ports/node/) against the model: every shipped vector, hostile inputs,
`epochgc conform` with the default example count, and planted bugs the checks must catch.
Skips, with the reason, where `node` is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.conform.client import request_line
from epochgc.model import replay as model_replay
from epochgc.model.port import Session
from tests.ports.hostile import PROGRAMS, RAW_FILES, VARIANT_PROGRAMS

ROOT = Path(__file__).resolve().parents[2]
PORT = ROOT / "ports" / "node"
VECTORS = sorted((ROOT / "spec" / "vectors").glob("*.jsonl")) + sorted(
    (ROOT / "spec" / "vectors" / "generated").glob("*.jsonl")
)
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not installed: the Node.js port is not tested"
)


def _normalized(line: str) -> dict[str, Any]:
    # `blocked` and `error` wording is informative (VECTORS.md): compare null vs non-null.
    obj: dict[str, Any] = json.loads(line)
    for k in ("blocked", "error"):
        if k in obj:
            obj[k] = obj[k] is not None
    return obj


Result = tuple[int, list[dict[str, Any]], str]


def port_replays(requests: list[tuple[Path, str | None]], port: Path = PORT) -> list[Result]:
    """Replays many files through one Node process (`cli.js batch`)."""
    assert NODE is not None
    stdin = "".join(json.dumps({"path": str(p), "variant": v}) + "\n" for p, v in requests)
    proc = subprocess.run(
        [NODE, str(port / "cli.js"), "batch"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    answers = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(answers) == len(requests), proc.stderr
    return [(a["code"], [_normalized(x) for x in a["out"]], "\n".join(a["err"])) for a in answers]


def model_run(path: Path, variant: str | None = None) -> Result:
    out: list[str] = []
    err: list[str] = []
    code = model_replay.run(str(path), variant, out.append, err.append)
    return code, [_normalized(x) for x in out], "\n".join(err)


def differences(requests: list[tuple[Path, str | None]], port: Path = PORT) -> dict[str, str]:
    """Per request (named FILE or FILE@VARIANT) where the port's replay differs from the model's:
    results, exit code, or for bad input the place (FILE:LINE) the error names."""
    diffs = {}
    for (path, variant), (pc, pout, perr) in zip(
        requests, port_replays(requests, port), strict=True
    ):
        mc, mout, merr = model_run(path, variant)
        name = path.name + (f"@{variant}" if variant else "")
        if pout != mout:
            diffs[name] = f"results differ\nmodel: {mout}\nport:  {pout}\nport stderr: {perr}"
        elif pc != mc:
            diffs[name] = f"exit {pc}, model {mc}\nmodel: {merr}\nport: {perr}"
        elif mc == 65 and perr.split(": ")[1] != merr.split(": ")[1]:
            diffs[name] = f"error place differs\nmodel: {merr}\nport: {perr}"
    return diffs


def _write(directory: Path, name: str, lines: list[str]) -> Path:
    path = directory / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("hostile")
    files = [_write(d, n, lines) for n, lines in sorted({**PROGRAMS, **VARIANT_PROGRAMS}.items())]
    for name, data in sorted(RAW_FILES.items()):
        (d / f"{name}.jsonl").write_bytes(data)
        files.append(d / f"{name}.jsonl")
    return files


VARIANTS = [
    "reference",
    "strict",
    "collapse",
    "fence-only",
    "untermed",
    "watermark-from-max",
    "skip-missing",
    "uncapped",
    "empty-is-nothing",
    # Production's rules (issues 30, 39); the `-enqueue` twins run the same functions.
    "prod-january",
    "prod-february",
    "prod-july",
    "proposal-august",
    "assert-at-apply",
]


def all_requests(hostile: list[Path]) -> list[tuple[Path, str | None]]:
    """Every shipped vector under its own variant and under each of `VARIANTS` (--variant:
    expects may then disagree, exit 1, but the port must print what the model prints), and
    every hostile program."""
    reqs: list[tuple[Path, str | None]] = [(p, None) for p in VECTORS]
    reqs += [(p, v) for p in VECTORS for v in VARIANTS]
    return reqs + [(p, None) for p in hostile]


def test_every_shipped_vector_passes() -> None:
    results = port_replays([(p, None) for p in VECTORS])
    failed = {p.name: err for p, (code, _, err) in zip(VECTORS, results, strict=True) if code != 0}
    assert not failed, failed


def test_port_replay_prints_what_epochgc_replay_prints(hostile_files: list[Path]) -> None:
    diffs = differences(all_requests(hostile_files))
    assert not diffs, "\n\n".join(f"{k}: {v}" for k, v in diffs.items())


def test_a_file_with_no_steps_is_bad_input_in_the_port_too(tmp_path: Path) -> None:
    """VECTORS.md: a file with no steps (empty, or comments only) exits 65 naming the file,
    in the port as in the model. Old port: exit 0 and no output, as the old model did."""
    files = []
    for name in ("empty-file", "only-comments"):
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_bytes(RAW_FILES[name])
    for path, (code, out, err) in zip(files, port_replays([(p, None) for p in files]),
                                      strict=True):
        assert (code, out) == (65, []), (path.name, code, out, err)
        assert err == (f"epochgc replay: error: {path}: no steps (the file is empty or holds only "
                       "comments)"), err


SERVE_LINES = [
    '{"op":"reset","variant":"reference"}',
    '{"op":"reset","variant":"bogus"}',
    '{"op":"reset","variant":"reference","note":"x"}',  # a reset has no other field
    '{"op":"reset"}',
    '{"op":"apply_placeholder","epoch":5,"offset":3}',
    '{"op":"apply_placeholder","epoch":9,"offset":3}',  # offsets must increase: refused
    "not json",
    "[]",
    '\u00a0{"op":"fence","term":1,"epoch":7}',  # not JSON white space: refused (a file strips it)
    ' {"op":"fence","term":1,"epoch":7}\r',  # JSON white space
    '{"op":"state","expect":{"inactive_epoch":4}}',
    '{"op":"reset","variant":"strict"}',  # a new program: fresh state, offsets start again
    '{"op":"apply_placeholder","epoch":5,"offset":0}',
    '{"op":"apply_placeholder","epoch":7,"offset":1}',
    '{"op":"delete_partition"}',
    '{"op":"delete_partition"}',
    '{"op":"state"}',
]


def test_serve_answers_every_line_as_the_model_does() -> None:
    assert NODE is not None
    proc = subprocess.run(
        [NODE, str(PORT / "cli.js"), "serve"],
        input="".join(request_line(seq, text) + "\n" for seq, text in enumerate(SERVE_LINES)),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    framed = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [f["seq"] for f in framed] == list(range(len(SERVE_LINES)))
    port = [f["answer"] for f in framed]
    session = Session()
    model = [session.handle(line) for line in SERVE_LINES]
    assert len(port) == len(SERVE_LINES)
    for line, p, m in zip(SERVE_LINES, port, model, strict=True):
        if "error" in m:  # both refuse, whatever the wording
            assert set(p) == {"error"} and p["error"], (line, p, m)
        else:
            assert _normalized(json.dumps(p)) == _normalized(json.dumps(m)), (line, p, m)
    assert port[16]["max_applied_epoch"] is None and port[13]["applied_window"] == [7, 7]


def _conform(port: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    cmd = [
        sys.executable,
        "-m",
        "epochgc.impl.cli",
        "conform",
        *args,
        "--",
        NODE,
        str(port / "cli.js"),
        "serve",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, check=False)


def test_conform_with_the_default_example_count_passes() -> None:
    p = _conform(PORT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "200 programs" in p.stdout, p.stdout


# Planted bugs: (file, original, planted). Each must make a check fail.
BUGS = {
    "window-lower-end-off-by-one": (
        "epochgc.js",
        "if (e >= lo) return { admitted: true, window: [lo, hi], seen };",
        "if (e > lo) return { admitted: true, window: [lo, hi], seen };",
    ),
    "seen-window-not-scoped-to-term": (
        "epochgc.js",
        "return !termScoped(variant) || seen.term === term ? seen : null;",
        "return seen;",
    ),
    "M-from-max-applied": (
        "epochgc.js",
        "? s.max_applied_epoch : s.min_epoch_lower_bound",
        "? s.max_applied_epoch : s.max_applied_epoch",
    ),
    "missing-partition-skipped": (
        "epochgc.js",
        "if (missing.length > 0 && variant !== 'skip-missing') {",
        "if (false) {",
    ),
    "lrlo-moves-backwards": (
        "epochgc.js",
        "last_reconciled_log_offset: bmax(s.last_reconciled_log_offset, lrlo)",
        "last_reconciled_log_offset: lrlo",
    ),
    "malformed-key-accepted": (
        "epochgc.js",
        "([0-9A-Za-z][0-9A-Za-z_.-]{0,127})$/",
        "(.+)$/",
    ),
    "restart-of-one-node-forgets-all": (
        "replay.js",
        "this.seen.delete(nonEmptyString(step.get('node'), 'node'))",
        "this.seen.clear()",
    ),
    "apply-offset-not-checked-against-lrlo": (
        "replay.js",
        "if (offset <= this.state.last_reconciled_log_offset) {",
        "if (false) {",
    ),
    "lines-trimmed-by-javascript-rules": (
        "cli.js",
        "const line = pyStrip(raw);",
        "const line = raw.trim();",
    ),
    "bom-dropped": ("cli.js", "ignoreBOM: true", "ignoreBOM: false"),
    "only-newline-ends-a-line": ("cli.js", "length).split(/\\r\\n|\\r|\\n/)",
                                 "length).split('\\n')"),
    "duplicate-key-accepted": ("json.js", "if (obj.has(k)) fail(", "if (false) fail("),
    "epochs-as-doubles": (
        "json.js",
        "? BigInt(m[0]) : Number(m[0])",
        "? BigInt(Number(m[0])) : Number(m[0])",
    ),
}


def _plant(tmp_path: Path, bug: str, bugs: dict[str, tuple[str, str, str]] = BUGS) -> Path:
    file, old, new = bugs[bug]
    port = tmp_path / "node"
    shutil.copytree(PORT, port)
    text = (port / file).read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{bug}: the planted line is not in ports/node/{file} once"
    (port / file).write_text(text.replace(old, new), encoding="utf-8")
    return port


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_bug_is_caught(tmp_path: Path, hostile_files: list[Path], bug: str) -> None:
    port = _plant(tmp_path, bug)
    # Cheapest first, the same requests in the end: the vectors under their own variants and
    # the small hostile programs, then the ~3 MiB line-bound files (2-3 s each in the port),
    # then every vector under every variant.
    small = [p for p in hostile_files if p.stat().st_size < 65_536]
    big = [p for p in hostile_files if p not in small]
    diffs = differences([(p, None) for p in VECTORS + small], port)
    diffs = diffs or differences([(p, None) for p in big], port)
    diffs = diffs or differences(all_requests(hostile_files), port)
    assert diffs, f"{bug} survived every vector and hostile program"
    print(f"{bug}: caught by {len(diffs)} replays, e.g. {sorted(diffs)[:3]}")


# A planted bug the shipped vectors miss and only generated programs show: `epochgc conform`
# must find it and shrink it to at most 10 steps. About a minute or more on 2 busy cores,
# so only under EPOCHGC_PORT_PROFILE=deep.
GEN_BUGS = {
    "lro-moves-backwards": (
        "epochgc.js",
        "next.last_reconciled_offset = bmax(s.last_reconciled_offset, lro)",
        "next.last_reconciled_offset = lro",
    ),
}


@pytest.mark.skipif(
    os.environ.get("EPOCHGC_PORT_PROFILE") != "deep", reason="EPOCHGC_PORT_PROFILE=deep runs it"
)
@pytest.mark.parametrize("bug", sorted(GEN_BUGS))
def test_conform_generates_shrinks_and_catches_planted_bug(tmp_path: Path, bug: str) -> None:
    port = _plant(tmp_path, bug, GEN_BUGS)
    vectors = port_replays([(p, None) for p in VECTORS], port)
    assert all(code == 0 for code, _, _ in vectors), f"{bug}: a shipped vector already shows it"
    out = tmp_path / "shrunk.jsonl"
    p = _conform(port, "--out", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    text = out.read_text(encoding="utf-8")
    steps = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    assert 1 <= len(steps) <= 10, text


def test_line_bound_and_a_closed_output_in_the_port_too(tmp_path: Path) -> None:
    """VECTORS.md: a line over 2^20 characters is bad input naming the line, refused after
    that much was read (`/dev/zero`: the old port read the whole input first and grew
    without bound); a closed stdout ends it quietly with exit 1 (the old port: an unhandled
    'error' event, EPIPE, with Node's stack trace). The bound's edges are in `hostile`."""
    assert NODE is not None
    cli = [NODE, str(PORT / "cli.js"), "replay"]
    r = subprocess.run([*cli, "/dev/zero"], capture_output=True, text=True, timeout=120,
                       check=False)
    assert (r.returncode, r.stderr) == (
        65, f"epochgc replay: error: /dev/zero:1: line longer than {1 << 20} characters\n")
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run([*cli, str(VECTORS[0])], stdout=write, stderr=subprocess.PIPE,
                           text=True, timeout=120, check=False)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (1, "")


def test_stdin_ends_lines_as_a_file_does_in_the_port_too(tmp_path: Path) -> None:
    """i41y: VECTORS.md's line ends (\n, \r\n, a lone \r) on stdin as in a file, and the
    same results and error line as `epochgc replay -` (the port already split stdin so;
    it named stdin `-` where the model says `<stdin>`)."""
    from tests.model.test_replay import LINE_ENDS

    assert NODE is not None
    path = tmp_path / "ends.jsonl"
    path.write_bytes(LINE_ENDS)
    cli = [NODE, str(PORT / "cli.js"), "replay"]
    from_file = subprocess.run([*cli, str(path)], capture_output=True, timeout=120,
                               check=False)
    from_stdin = subprocess.run([*cli, "-"], input=LINE_ENDS, capture_output=True,
                                timeout=120, check=False)
    model = subprocess.run([sys.executable, "-m", "epochgc", "replay", "-"], input=LINE_ENDS,
                           capture_output=True, timeout=120, check=False,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (from_file.returncode, len(from_file.stdout.splitlines())) == (65, 3), from_file
    assert (from_stdin.returncode, from_stdin.stdout) == (65, from_file.stdout), from_stdin
    assert [_normalized(x) for x in from_stdin.stdout.decode().splitlines()] == [
        _normalized(x) for x in model.stdout.decode().splitlines()]
    assert from_stdin.stderr.startswith(b"epochgc replay: error: <stdin>:5: step 4: "), from_stdin
    assert model.stderr.startswith(b"epochgc replay: error: <stdin>:5: step 4: "), model
