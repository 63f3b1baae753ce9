"""A path option refuses an empty value, and a directory where a file is wanted (or a
file where a directory is), naming the option and what to give (impl/pathopt.py).

newuser14 (beside R5's `--by ''`): `''` was taken as the current directory. Old code:
`cluster start --data-dir ''` started a cluster in the directory the command ran from,
`gc-package --out ''` wrote its package there, `gc --manifest ''` was refused as "<cwd>
already exists", `gc --list ''` as "is a directory". Each is refused now, 64, and nothing
is written where the command ran.

newuser15 S7: `gc --metrics-file ''` said "give one ('.' for the current directory)" (a
directory, for a file) and `--metrics-file .` click's "File '.' is a directory.", another
style; `--list .` a third. One wording for every path option of every command now: the
walk below finds them all, so an option added without a line here fails the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main

A_DIR = "a directory ('.' for the current one)"
A_FILE = "a file's path"

# (command, option) -> what its refusals tell the user to give
GIVE: dict[tuple[str, str], str] = {
    ("barrier", "--data-dir"): A_DIR,
    ("chaos", "--out"): A_DIR,
    ("cluster kill", "--data-dir"): A_DIR,
    ("cluster start", "--data-dir"): A_DIR,
    ("cluster start", "--trace"): A_FILE,
    ("cluster status", "--data-dir"): A_DIR,
    ("cluster stop", "--data-dir"): A_DIR,
    ("conform", "--out"): A_FILE,
    ("consume", "--data-dir"): A_DIR,
    ("gc", "--list"): "a new file's path or '-'",
    ("gc", "--manifest-dir"): "a new directory's path",
    ("gc", "--metrics-file"): A_FILE,
    ("gc-admin advance-epoch", "--data-dir"): A_DIR,
    ("gc-package", "--out"): A_DIR,
    ("produce", "--data-dir"): A_DIR,
    ("topic create", "--data-dir"): A_DIR,
    ("topic delete", "--data-dir"): A_DIR,
}


def _path_options(cmd: click.Command, path: tuple[str, ...] = ()
                  ) -> Iterator[tuple[tuple[str, ...], click.Parameter]]:
    ctx = click.Context(cmd)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            yield from _path_options(sub, (*path, name))
        return
    for p in cmd.params:
        if isinstance(p.type, click.Path):
            yield path, p


OPTIONS = list(_path_options(main))


def test_every_path_option_is_listed() -> None:
    assert {(" ".join(c), p.opts[0]) for c, p in OPTIONS} == set(GIVE)


def _refusal(tmp_path: Path, command: tuple[str, ...], param: click.Parameter,
             value: str) -> str:
    r = CliRunner().invoke(main, [*command, param.opts[0], value])
    assert r.exit_code == 64, r.output
    names = " / ".join(f"'{o}'" for o in param.opts)
    lines = [x for x in r.output.splitlines() if "error:" in x]
    assert len(lines) == 1, r.output
    assert lines[0].startswith(f"epochgc {' '.join(command)}: error: Invalid value for "
                               f"{names}: "), r.output
    return lines[0].split(f"{names}: ", 1)[1]


@pytest.mark.parametrize(("command", "param"), OPTIONS,
                         ids=[f"{' '.join(c)} {p.opts[0]}" for c, p in OPTIONS])
def test_an_empty_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  command: tuple[str, ...], param: click.Parameter) -> None:
    monkeypatch.chdir(tmp_path)
    give = GIVE[(" ".join(command), param.opts[0])]
    assert _refusal(tmp_path, command, param, "") == f"the path is empty; give {give}"
    assert list(tmp_path.iterdir()) == []  # nothing made where it ran


ONE_KIND = [(c, p) for c, p in OPTIONS
            if isinstance(p.type, click.Path) and not (p.type.file_okay and p.type.dir_okay)]


@pytest.mark.parametrize(("command", "param"), ONE_KIND,
                         ids=[f"{' '.join(c)} {p.opts[0]}" for c, p in ONE_KIND])
def test_the_wrong_kind_of_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           command: tuple[str, ...],
                                           param: click.Parameter) -> None:
    """A directory given where a file is wanted (`--metrics-file .`), a file where a
    directory is (`--data-dir FILE`): the same wording as an empty path."""
    monkeypatch.chdir(tmp_path)
    give = GIVE[(" ".join(command), param.opts[0])]
    assert isinstance(param.type, click.Path)
    if param.type.dir_okay:
        (tmp_path / "f").write_text("")
        value, kind = "f", "file"
    else:
        value, kind = ".", "directory"
    assert _refusal(tmp_path, command, param, value) == f"'{value}' is a {kind}; give {give}"
