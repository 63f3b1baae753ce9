"""A dead round (its journal has a START, no END) whose record's key under
`_cluster/gc/rounds/` holds a directory, a FIFO or a symbolic link (a local store; i41y's
leftover). The recovery took such a round for unrecorded: it wrote its STOP, waited its
tasks' bound (240 s with the default lease), read the journal back, claimed a round number,
then found the key taken and recorded nothing, in silence, on every look (`gc`,
`gc-admin show`, `gc-admin reset`, exit 0). Now the round is left as it is (no STOP, no
wait, nothing written over or through the entry) and named with why; `reset`, whose job
it is to record it, exits 1 (the exit-code table's "failed"). S3 keys are flat: such an
entry cannot exist there (a record with damaged bytes is an object, and recovery leaves any
record that exists alone, as before)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from epochgc.impl.gc.job import _recover
from epochgc.impl.gc.journal import START, STOP, journal_prefix, write_marker
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recordread import DamagedRecord
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import damage_record_key, run_gc_admin, simple_cluster

DEAD = "20270115T060000.000Z-deadr0nd"
KEY = round_key(DEAD)
WHY = {"directory": "a directory where only objects are kept: malformed, never listed",
       "fifo": "not a regular file",
       "symlink": "a symbolic link, never followed"}
HANG_S = 120  # bounds a hang (a FIFO opened, a 240 s wait): the test fails, never hangs


def _dead_round(tmp_path: Path, kind: str, bound: float | None) -> tuple[Path, LocalStore]:
    """A store with a dead round whose record's key holds `kind`; its START gives the
    tasks' stop bound `bound` (None: a START from before the bound, no wait)."""
    root = tmp_path / "store"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    start = {"round": DEAD, "M": 100, "snapshot_revision": 7, "options": {}}
    if bound is not None:
        start["stop_within_s"] = bound
    write_marker(store, journal_prefix(DEAD), START, start)
    damage_record_key(root / KEY, kind, tmp_path / "elsewhere.json", '{"not": "a record"}')
    return root, store


def _untouched(tmp_path: Path, root: Path, kind: str) -> None:
    path = root / KEY
    assert {"directory": path.is_dir, "fifo": path.is_fifo, "symlink": path.is_symlink}[kind]()
    if kind == "directory":
        assert not list(path.iterdir())
    if kind == "symlink":
        assert (tmp_path / "elsewhere.json").read_text() == '{"not": "a record"}'
    assert not os.path.lexists(root / journal_prefix(DEAD) / STOP)


@pytest.mark.parametrize("kind", list(WHY))
def test_the_recovery_leaves_it_and_names_it(kind: str, tmp_path: Path) -> None:
    """Old code: STOP written, the 240 s bound waited (slept [2.0, 2.0, ...]), nothing
    recorded and nothing said."""
    root, store = _dead_round(tmp_path, kind, 240.0)
    slept: list[float] = []
    told: list[DamagedRecord] = []
    done = recover_dead_rounds(store, "test", lambda: set(), sleep=slept.append,
                               damaged=told.append)
    assert done == [] and slept == [], slept
    assert [(e.key, e.why) for e in told] == [(KEY, WHY[kind])]
    _untouched(tmp_path, root, kind)


@pytest.mark.parametrize("kind", list(WHY))
def test_the_next_round_says_it_and_goes_on(kind: str, tmp_path: Path) -> None:
    """`gc`'s look at dead rounds (`job._recover`): a warning naming the record; its own
    round goes on (its deletes are safe either way)."""
    root, _ = _dead_round(tmp_path, kind, None)
    notes: list[str] = []
    done = _recover(lambda: LocalStore(root), "20270115T070000.000Z-thisrnd0", notes.append,
                    RoundStop())
    assert done == []
    assert notes == [f"gc: warning: dead round {DEAD} not recorded: cannot read the round "
                     f"record {KEY}: {WHY[kind]}; nothing is written over it (move it away, "
                     "and the next round or `gc-admin reset` records the round)"], notes
    _untouched(tmp_path, root, kind)


def _admin(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gc_admin(*args, timeout=HANG_S)


def test_reset_and_show_name_it_reset_fails(tmp_path: Path) -> None:
    """Old code: `reset` "nothing to remove", exit 0; `show` said nothing of the round.
    One kind (the commands' part is the same for each; the kinds are covered above)."""
    kind = "symlink"
    root, _ = _dead_round(tmp_path, kind, None)
    said = (f"dead round {DEAD} not recorded: cannot read the round record {KEY}: "
            f"{WHY[kind]}; nothing is written over it")
    p = _admin("reset", "--store", str(root))
    assert p.returncode == 1 and f"gc-admin: {said}" in p.stderr, (p.returncode, p.stderr)
    p = _admin("reset", "--store", str(root), "--json")
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["unrecordable"] == [
        {"round": DEAD, "key": KEY, "why": WHY[kind]}]
    clean = tmp_path / "clean"
    simple_cluster(LocalStore(clean, create=True), 100)
    usual = _admin("show", "--store", str(clean)).returncode  # the reports decide it
    p = _admin("show", "--store", str(root))
    assert p.returncode == usual and said in p.stdout, (p.returncode, p.stdout, p.stderr)
    p = _admin("show", "--store", str(root), "--json")
    assert json.loads(p.stdout)["unrecordable"] == [
        {"round": DEAD, "key": KEY, "why": WHY[kind]}]
    _untouched(tmp_path, root, kind)
