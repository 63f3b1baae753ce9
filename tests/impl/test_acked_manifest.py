"""DATA_DIR/acked.jsonl, produce's record of acknowledged batches (`consume --verify` reads
it), read and appended as the project's other journals are: a torn LAST line (an append cut
short by a crash or a full disk) is tolerated with a warning naming it, a damaged line
anywhere else is refused naming FILE:LINE, exit 65 (newuser10 L8: a torn tail was glued to
the next produce's line, `--verify` then failed with JSON's own text naming neither file nor
line, and a line of the wrong shape was a TypeError traceback). No node is started: the
manifest is read before `consume` dials one."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.cluster.manifest import append_manifest, read_manifest
from epochgc.impl.cluster.payload import AckedRun

RUN = AckedRun("t/0", 0, 5, "cli-abc", 0, 48, 7, "level_zero/k1")
RUN2 = AckedRun("t/1", 20, 5, "cli-def", 0, 48, 8, "level_zero/k2")
LINE = json.dumps(asdict(RUN), sort_keys=True).encode() + b"\n"


@pytest.fixture
def cdir(tmp_path: Path) -> Path:
    """A cluster directory as `cluster start` leaves it, no node running."""
    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(tmp_path / "store"), ["t/0", "t/1"], 1.0, [])
    return lc.dir


def verify(d: Path) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["consume", "--data-dir", str(d), "--partition", "t/0",
                                  "--verify"])
    return r.exit_code, r.output


@pytest.mark.parametrize(("line", "want"), [
    (b'{"partition": "t/0", "ba{"base": 20}', "not valid JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b'{"partition": 5, "base": "x"}', "missing field(s) 'count'"),
    (json.dumps({**asdict(RUN), "base": "x"}).encode(), "field 'base'"),
    (b"[1, 2]", "not a JSON object"),
])
def test_a_damaged_middle_line_is_refused_naming_file_and_line(
        cdir: Path, line: bytes, want: str) -> None:
    (cdir / "acked.jsonl").write_bytes(LINE + line + b"\n" + LINE)
    code, out = verify(cdir)
    assert code == 65, (code, out[-400:])
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert f"{cdir / 'acked.jsonl'}:2: " in out and want in out, out


def test_a_torn_last_line_is_skipped_with_a_warning(cdir: Path) -> None:
    (cdir / "acked.jsonl").write_bytes(LINE + b'{"partition": "t/0", "ba')
    m = read_manifest(cdir)
    assert m.runs == [RUN]
    assert len(m.warnings) == 1 and f"{cdir / 'acked.jsonl'}:2: a torn last line" in \
        m.warnings[0] and "skipped" in m.warnings[0]
    code, out = verify(cdir)  # the warning, then the (stopped) cluster's own answer
    assert code != 65 and "acked.jsonl:2: a torn last line" in out, out


def test_produce_after_a_torn_tail_starts_on_a_new_line(cdir: Path) -> None:
    torn = b'{"partition": "t/0", "ba'
    (cdir / "acked.jsonl").write_bytes(LINE + torn)
    said = append_manifest(cdir, [RUN2])
    raw = (cdir / "acked.jsonl").read_bytes()
    assert raw.startswith(LINE + torn + b"\n")  # the torn line kept as it was, on its own
    m = read_manifest(cdir)
    assert m.runs == [RUN, RUN2]  # the new batch readable, not glued to the torn line
    assert len(m.warnings) == 1 and "acked.jsonl:2: a torn line" in m.warnings[0]
    assert said is not None and "acked.jsonl:2" in said
    code, out = verify(cdir)
    assert code != 65 and "acked.jsonl:2: a torn line" in out, out


def test_a_torn_marker_naming_another_line_is_refused(cdir: Path) -> None:
    """The marker a produce writes after a torn line excuses that line only: a marker with
    no damaged line above it, or one naming another line, is itself damage."""
    (cdir / "acked.jsonl").write_bytes(LINE + b'{"torn_line": 1}\n')
    code, out = verify(cdir)
    assert code == 65 and "acked.jsonl:2: " in out, out
