"""hostile GC admin states (`_cluster/gc/admin.json`) must read as paused (fail
closed), never as running, and a pause must read back as written."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.admin import ADMIN_KEY, read_admin_state
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import PAUSED, RoundWatch
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster


def _store(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "store", create=True)
    simple_cluster(store, 100, now=NOW)
    return store


def _paused_doc() -> bytes:
    return json.dumps({"paused": True, "reason": "incident 42", "by": "op", "at": NOW}).encode()


def test_symlinked_admin_state_is_paused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    real = tmp_path / "shared-admin.json"
    real.write_bytes(_paused_doc())  # the link even points at a pause
    path = store.root / ADMIN_KEY
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(real, path)
    state = read_admin_state(store)
    assert state.paused, f"symlinked {ADMIN_KEY} read as running: {state}"


def test_fifo_admin_state_is_paused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = store.root / ADMIN_KEY
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    state = read_admin_state(store)
    assert state.paused, f"FIFO at {ADMIN_KEY} read as running: {state}"


def test_directory_admin_state_is_paused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store.root / ADMIN_KEY).mkdir(parents=True)
    state = read_admin_state(store)
    assert state.paused, f"directory at {ADMIN_KEY} read as running: {state}"


def test_show_symlinked_admin_state(tmp_path: Path) -> None:
    store = _store(tmp_path)
    real = tmp_path / "shared-admin.json"
    real.write_bytes(_paused_doc())
    path = store.root / ADMIN_KEY
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(real, path)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(store.root), "--json"])
    assert r.exit_code == 3, r.output  # paused (fail closed)
    assert json.loads(r.output)["paused"] is True, r.output


_NESTED = b'{"paused": false, "reason": ' + b"[" * 1900 + b"]" * 1900 + b"}"


def test_nested_admin_state_is_paused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert len(_NESTED) <= 4096  # within the reader's size limit
    store.put(ADMIN_KEY, _NESTED)
    state = read_admin_state(store)
    assert state.paused and ADMIN_KEY in state.reason, state


def test_watch_survives_nested_admin_state(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.put(ADMIN_KEY, _NESTED)
    stop = RoundStop()
    watch = RoundWatch(lambda: LocalStore(store.root), stop, lambda: NOW, 300.0, 3600.0,
                       lambda _v: None)
    assert watch.poll_once() == PAUSED


def test_admin_state_paused_given_twice_is_paused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # json keeps the last value; a reader that keeps the first (jq's --stream, many
    # parsers in other languages) sees a pause. Ambiguous: fail closed.
    store.put(ADMIN_KEY, b'{"paused": true, "reason": "incident", "paused": false}')
    state = read_admin_state(store)
    assert state.paused, f"ambiguous {ADMIN_KEY} read as running: {state}"


def test_long_pause_reason_reads_back(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # The longest reason gc-admin takes (500 characters, issue 41), all but the prefix
    # non-ASCII (6 bytes each as JSON written with ensure_ascii=True).
    reason = "incident 42: " + "é" * 487
    r = CliRunner().invoke(main, ["gc-admin", "pause", "--store", str(store.root),
                                  "--reason", reason])
    assert r.exit_code == 0, r.output
    state = read_admin_state(store)
    assert state.paused
    assert state.reason == reason, f"pause reason read back as: {state.reason[:200]!r}"
