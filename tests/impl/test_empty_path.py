"""An empty path option is a usage error naming the option (impl/pathopt.py).

newuser14 (beside R5's `--by ''`): `''` was taken as the current directory. Old code:
`cluster start --data-dir ''` started a cluster in the directory the command ran from,
`gc-package --out ''` wrote its package there, `gc --manifest ''` was refused as "<cwd>
already exists", `gc --list ''` as "is a directory". Each is refused now, 64, and nothing
is written where the command ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main

EMPTY = ("the path is empty; give one ('.' for the current directory)")


@pytest.mark.parametrize(("argv", "option"), [
    (("cluster", "start", "--data-dir", "", "--store", "st"), "'--data-dir'"),
    (("cluster", "stop", "--data-dir", ""), "'--data-dir'"),
    (("produce", "--data-dir", "", "--partition", "t/0"), "'--data-dir'"),
    (("cluster", "start", "--data-dir", "d", "--trace", ""), "'--trace'"),
    (("gc-package", "--out", ""), "'--out'"),
    (("gc", "--store", "st", "--manifest", ""), "'--manifest-dir' / '--manifest'"),
    (("gc", "--store", "st", "--metrics-file", ""), "'--metrics-file'"),
    (("gc-admin", "advance-epoch", "--data-dir", "", "--partition", "t/0"), "'--data-dir'"),
    (("chaos", "--out", ""), "'--out'"),
])
def test_an_empty_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  argv: tuple[str, ...], option: str) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, list(argv))
    assert r.exit_code == 64, r.output
    assert f"Invalid value for {option}: {EMPTY}" in r.output, r.output
    assert list(tmp_path.iterdir()) == []  # nothing made where it ran


def test_an_empty_list_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--list` takes `-` (stdout) too, so it is no click path: the same words, its own
    check (`preflight.writable_file`)."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["gc", "--store", "st", "--dry-run", "--list", ""])
    assert r.exit_code == 64 and "--list: the path is empty; give one" in r.output, r.output
