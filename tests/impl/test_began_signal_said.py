"""newuser15 S3 (issue 41): a signal after a command's own code began and before it said
what it had done (0.15-0.55 s after start: `gc`, `gc-admin show`, `gc-admin pause`) ended
with a bare "epochgc gc-admin: interrupted by SIGINT". What a command did has a true default
from the moment its code begins ("nothing was written yet", impl/signals.py `doing`), so
no interrupted line is bare; and it names the command as its error lines do
("gc-admin pause", "cluster stop"), not "gc-admin".

Each command signals itself at the `began` point (impl/cli.py `_mark_begun`), the start of
that window. CI runs a slice (one of each kind of group); `EPOCHGC_SIGNALS=full` (tox -e
signals) every command of `epochgc --help` and every subcommand of its groups."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.cli import SUBCOMMANDS
from epochgc.impl.signals import BEGAN_POINT, HOOK_ENV
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("EPOCHGC_SIGNALS") == "full"

# Each command with arguments that parse (its code begins; the signal ends it there).
STORE = ["--store", "{tmp}/store"]
DATA = ["--data-dir", "{tmp}/cluster"]
ARGV: dict[str, list[str]] = {
    "replay": ["{tmp}/trace.jsonl"],
    "gc": STORE,
    "gc-package": ["--out", "{tmp}/pkg"],
    "gc-admin advance-epoch": [*DATA, "--partition", "t/0"],
    "gc-admin expire": [*STORE, "--older-than", "1d"],
    "gc-admin pause": [*STORE, "--reason", "s28a"],
    "gc-admin reset": STORE,
    "gc-admin resume": STORE,
    "gc-admin show": STORE,
    "gc-admin start": STORE,
    "cluster kill": [*DATA, "1"],
    "cluster start": [*DATA, *STORE],
    "cluster status": DATA,
    "cluster stop": DATA,
    "produce": [*DATA, "--partition", "t/0"],
    "consume": [*DATA, "--partition", "t/0"],
    "topic create": [*DATA, "--partitions", "1", "t"],
    "topic delete": [*DATA, "t"],
    "demo": [],
    "check-trace": ["{tmp}/trace.jsonl"],
    "conform": ["true"],
    "chaos": [],
    "barrier": DATA,
}
SLICE = ("gc", "gc-admin pause", "cluster stop")


def test_every_command_is_walked() -> None:
    groups = {"gc-admin", "cluster", "topic"}
    assert {c.split()[0] for c in ARGV} == set(SUBCOMMANDS)
    assert set(SLICE) <= set(ARGV)
    assert {c for c in ARGV if " " not in c} == set(SUBCOMMANDS) - groups


@pytest.mark.parametrize("command", [c for c in ARGV if FULL or c in SLICE])
def test_a_signal_as_the_command_begins_says_what_was_done(command: str,
                                                           tmp_path: Path) -> None:
    (tmp_path / "trace.jsonl").write_text("")
    argv = [a.format(tmp=tmp_path) for a in ARGV[command]]
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: f"{BEGAN_POINT}:SIGINT"})
    r = subprocess.run([sys.executable, "-m", "epochgc", *command.split(), *argv],
                       env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert f"test hook: SIGINT at {BEGAN_POINT}" in r.stderr, r.stderr
    assert r.returncode == by_signal(signal.SIGINT), r.stderr
    # Old code: "epochgc gc-admin: interrupted by SIGINT" (bare, and not the full name)
    assert r.stderr.splitlines()[-1] == (f"epochgc {command}: interrupted by SIGINT: "
                                         "nothing was written yet"), r.stderr
