"""Issue 38 item 5: a damaged report (cut off inside a string full of escaped quotes) made
the nesting check quadratic (8 KB 0.7 s, 120 KB > 45 s, 1 MB hours), in one C call that
also held off Ctrl-C and `--deadline`. The check is now one pass over the bytes; these
tests count the bytes it examines and the steps it takes instead of timing it."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from epochgc.impl.gc import reports
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import MAX_NESTING, check_nesting


def _cut_report(size: int) -> bytes:
    return b'{"node": "n1", "replicas": [{"partition": "' + b'\\"' * (size // 2)


def test_a_report_cut_off_in_escaped_quotes_is_checked_at_once() -> None:
    """The reproduction: 256 KB of the found shape, in a fresh interpreter. Before the fix
    this ran for minutes (quadratic; 120 KB took > 45 s); one pass takes milliseconds, so
    the 120 s bound only catches a hang, never a slow machine."""
    code = (
        "import sys\n"
        "from epochgc.impl.gc.reports import check_nesting\n"
        "check_nesting(sys.stdin.buffer.read(), 'h.json')\n"
        "print('done')\n"
    )
    try:
        r = subprocess.run([sys.executable, "-c", code], input=_cut_report(256 * 1024),
                           capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("checking a 256 KB report cut off in escaped quotes ran > 120 s")
    assert r.returncode == 0 and b"done" in r.stdout, r.stderr


def _reference_depth(raw: bytes) -> int:
    """The deepest bracket nesting outside strings, byte by byte (the obvious state
    machine), up to where a string is left open."""
    depth = deepest = 0
    in_string = escaped = False
    for b in raw:
        c = chr(b)
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _damaged(rng: random.Random) -> bytes:
    """A report-like document, then damaged: cut anywhere, escapes and quotes spliced in,
    deep nesting inside and outside strings."""
    doc = {
        "node": "n1",
        "written_at": 1.5,
        "replicas": [
            {"partition": f"t/{i}", "term": 3, "inactive_epoch": None, "created": 1,
             "note": "".join(rng.choice('ab"\\[]{}') for _ in range(rng.randrange(20)))}
            for i in range(rng.randrange(1, 6))
        ],
    }
    raw = bytearray(json.dumps(doc).encode())
    for _ in range(rng.randrange(4)):
        at = rng.randrange(len(raw) + 1)
        piece = rng.choice([b'\\"' * rng.randrange(1, 200), b"\\\\" * rng.randrange(1, 50),
                            b"[" * rng.randrange(1, 60), b"{" * rng.randrange(1, 60),
                            b'"', b"\\", b"]" * rng.randrange(1, 60)])
        raw[at:at] = piece
    if rng.random() < 0.7:
        del raw[rng.randrange(len(raw) + 1):]
    return bytes(raw)


def test_damaged_documents_one_pass_and_the_same_answer_as_the_reference() -> None:
    """Fuzz (seeded): truncations, escapes, deep nesting. Each byte is examined exactly
    once and the loop takes at most one step per byte, whatever the damage; the verdict is
    the byte-by-byte reference's."""
    rng = random.Random(38)
    refused = 0
    for _ in range(3000):
        raw = _damaged(rng)
        deep = _reference_depth(raw) > MAX_NESTING
        scan = reports.scan_nesting(raw)
        assert scan.examined == len(raw) or scan.deepest > MAX_NESTING, raw
        assert scan.steps <= len(raw) + 1, raw
        try:
            check_nesting(raw, "h.json")
            assert not deep, raw
        except ReportError as e:
            assert deep and "h.json: nested deeper" in str(e), raw
            refused += 1
    assert refused > 100  # the fuzz reaches the refusal, not only the pass


@pytest.mark.parametrize("size", [1 << 10, 1 << 14, 1 << 18])
def test_work_is_linear_in_size(size: int) -> None:
    """Examined bytes and loop steps per byte are the same at 1 KB and 256 KB, for the
    shapes that were quadratic (escaped quotes in an open string) and the bracket-heavy
    ones (one step per bracket)."""
    for raw in (_cut_report(size), b'"' + b"\\" * size, b"[]" * (size // 2),
                b'["' + b'\\"[' * (size // 3)):
        scan = reports.scan_nesting(raw)
        assert scan.examined == len(raw)
        assert scan.steps <= len(raw) + 1
