"""newuser8 I7: how bad input and bad arguments are worded and coded, one form for the same
thing in every command (the exit-code table: 64 a bad argument, 65 bad input data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.partition.fence import StaleEpoch


def _run(*args: str, stdin: bytes | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args), input=stdin)
    return r.exit_code, r.output


def test_a_refusal_with_no_window_yet_names_no_python_none() -> None:
    """Old code: "stale_cluster_epoch: epoch 0 below window None (fence: ...)"."""
    text = str(StaleEpoch(0, None, "fence: below the partition's creation revision 1"))
    assert "None" not in text and "no window yet" in text, text
    assert str(StaleEpoch(5, (9, 12), "apply")).endswith("below window (9, 12) (apply)")


@pytest.mark.parametrize("epoch", ["-5", str(10**23)])
def test_produce_epoch_out_of_range_is_a_bad_argument(epoch: str, tmp_path: Path) -> None:
    """Old code: exit 1 ("refusing to produce with epoch -5"), after the cluster's check."""
    code, out = _run("produce", "--data-dir", str(tmp_path), "--partition", "t/0",
                     "--epoch", epoch)
    assert code == 64 and "--epoch: refusing to produce with epoch" in out, (code, out)


@pytest.mark.parametrize("command", ["replay", "check-trace"])
def test_a_directory_is_input_that_cannot_be_read(command: str, tmp_path: Path) -> None:
    """Old code: check-trace 64 (click's "is a directory"), replay 65 with another line."""
    code, out = _run(command, str(tmp_path))
    assert code == 65, (code, out)
    assert f"{tmp_path}: cannot read: Is a directory" in out, out


# A file that opens and cannot be read: a process's own memory at address 0 is not mapped,
# so read(2) fails EIO (proc(5), /proc/pid/mem). Mode 000 would not do: root reads it.
UNREADABLE = "/proc/self/mem"


@pytest.mark.parametrize("command", ["replay", "check-trace"])
@pytest.mark.parametrize("case", ["directory", "missing file", "unreadable file"])
def test_every_refusal_names_its_command_first(command: str, case: str,
                                               tmp_path: Path) -> None:
    """i41y (newuser9 pass 2, I7): one form, "epochgc COMMAND: error: SOURCE: cannot read:
    WHY" (every command's error line, newuser13 Q9), 65. Old code: check-trace said "adir:
    cannot read: Is a directory" (no command)."""
    path, why = {"directory": (str(tmp_path), "Is a directory"),
                 "missing file": (str(tmp_path / "missing.jsonl"),
                                  "No such file or directory"),
                 "unreadable file": (UNREADABLE, "Input/output error")}[case]
    code, out = _run(command, path)
    assert code == 65, (code, out)
    assert out.strip() == f"epochgc {command}: error: {path}: cannot read: {why}", out


@pytest.mark.parametrize("command", ["replay", "check-trace"])
def test_bad_input_names_its_command_first(command: str, tmp_path: Path) -> None:
    """The same prefix on a line that is not what the command reads. Old code: check-trace
    said "malformed trace: FILE:1: ..." where replay says "epochgc replay: FILE:1: ..."."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": 1}\n')
    code, out = _run(command, str(bad))
    assert code == 65, (code, out)
    assert out.startswith(f"epochgc {command}: error: {bad}:1: "), out


@pytest.mark.parametrize("command", ["replay", "check-trace"])
def test_not_utf8_is_worded_alike(command: str, tmp_path: Path) -> None:
    """Old code: replay said "cannot read: 'utf-8' codec can't decode byte 0xff in position
    0: invalid start byte" where check-trace said "not UTF-8 (byte 0xff at column 1)"."""
    bad = tmp_path / "nonutf.jsonl"
    bad.write_bytes(b'\n{"op":"st\xc3\xa9\xff"}\n')  # line 1 blank
    code, out = _run(command, str(bad))
    assert code == 65, (code, out)
    assert f"{bad}:2: not UTF-8 (byte 0xff at column 12)" in out, out


@pytest.mark.parametrize("command", ["replay", "check-trace"])
def test_not_utf8_on_stdin_is_named_by_its_line(command: str) -> None:
    """A stream is checked a line at a time as it comes (a file before any step): the same
    words, naming `<stdin>`."""
    code, out = _run(command, "-", stdin=b'\n{"op":"st\xc3\xa9\xff"}\n')
    assert code == 65, (code, out)
    assert "<stdin>:2: not UTF-8 (byte 0xff at column 12)" in out, out


def test_check_trace_reads_stdin_as_replay_does() -> None:
    """Old code: "-: cannot read: [Errno 2] No such file or directory: '-'" (65)."""
    code, out = _run("check-trace", "-", stdin=b'{"op":"x"}\n')
    assert code == 65 and "<stdin>:1: missing field 'kind'" in out, (code, out)


@pytest.mark.parametrize("content", [b"", b"\n\n"])
@pytest.mark.parametrize("from_stdin", [False, True])
def test_an_empty_trace_is_refused_not_passed(content: bytes, from_stdin: bool,
                                               tmp_path: Path) -> None:
    """newuser12 P3. Old code: "trace conforms to the model: 0 records ...", exit 0 (a check
    that passed on nothing: an empty file, a truncated copy, `-` with nothing piped)."""
    trace = tmp_path / "empty.ndjson"
    trace.write_bytes(content)
    if from_stdin:
        code, out = _run("check-trace", "-", stdin=content)
        where = "<stdin>"
    else:
        code, out = _run("check-trace", str(trace))
        where = str(trace)
    assert code == 65, (code, out)
    assert (f"epochgc check-trace: error: {where}: the trace holds no record: nothing was checked"
            in out), out
    assert "conforms" not in out, out


def test_a_record_without_a_kind_names_no_python_none(tmp_path: Path) -> None:
    """Old code: "unknown record kind None"."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"op":"x"}\n')
    code, out = _run("check-trace", str(trace))
    assert code == 65 and f"{trace}:1: missing field 'kind'" in out, (code, out)
    assert "None" not in out, out
