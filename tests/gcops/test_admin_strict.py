"""fix30: what the issue 30 review tests of the admin state and the lease do not pin: a pause
reason too long for the reader is cut (and says so) rather than lost, whatever its
characters; documents a strict reader refuses read as paused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.admin import (
    _MAX_BYTES,
    ADMIN_KEY,
    MAX_REASON_BYTES,
    read_admin_state,
    write_admin_state,
)
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster


@pytest.mark.parametrize("char", ["é", "\x01", "\U0001f600", "\udc80"])
def test_any_long_reason_is_cut_and_reads_back(tmp_path: Path, char: str) -> None:
    store = LocalStore(tmp_path, create=True)
    written = write_admin_state(store, True, "incident 7: " + char * 5000, NOW)
    assert len(store.get(ADMIN_KEY)) <= _MAX_BYTES
    assert len(json.dumps(written.reason, ensure_ascii=False).encode()) <= MAX_REASON_BYTES
    state = read_admin_state(store)
    assert state == written, state
    assert state.reason.startswith("incident 7: ") and state.reason.endswith(" [cut]")


@pytest.mark.parametrize("doc", [
    b'{"paused": false, "at": NaN}',
    b'{"paused": false, "at": 1e400}',
    b'{"paused": false, "x": {"a": 1, "a": 2}}',
])
def test_strictly_refused_documents_read_as_paused(tmp_path: Path, doc: bytes) -> None:
    store = LocalStore(tmp_path, create=True)
    store.put(ADMIN_KEY, doc)
    state = read_admin_state(store)
    assert state.paused and "malformed" in state.reason and ADMIN_KEY in state.reason, state


def _cluster(tmp_path: Path) -> Path:
    store = LocalStore(tmp_path / "store", create=True)
    simple_cluster(store, 100)
    return store.root


def _admin(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["gc-admin", *args])
    return r.exit_code, r.output


def test_a_link_at_the_lease_is_refused_then_removed_by_force_never_followed(
    tmp_path: Path,
) -> None:
    root = _cluster(tmp_path)
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (root / LEASE_KEY).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, root / LEASE_KEY)
    code, out = _admin("show", "--store", str(root))
    # show exits 2: the fixture's reports are dated ahead of this host's clock
    assert code == 2 and f"lease: {LEASE_KEY} is not a regular object" in out, out
    code, out = _admin("reset", "--store", str(root))
    assert code == 1 and LEASE_KEY in out and "symbolic link" in out and "--force" in out, out
    assert os.path.islink(root / LEASE_KEY)
    code, out = _admin("reset", "--store", str(root), "--force")
    assert code == 0 and f"removed {LEASE_KEY}" in out, out
    assert not os.path.lexists(root / LEASE_KEY) and target.read_text() == "{}"
    Lease(lambda: LocalStore(root), "round-C").acquire()  # rounds run again


def test_a_directory_at_the_lease_is_refused_even_with_force(tmp_path: Path) -> None:
    root = _cluster(tmp_path)
    (root / LEASE_KEY).mkdir(parents=True)
    (root / LEASE_KEY / "x").write_text("keep")
    # Issue 41 F8: show's advice agrees with what reset --force does to a directory.
    code, out = _admin("show", "--store", str(root))
    assert f"lease: {LEASE_KEY} is not a regular object" in out, out
    assert "a directory there is never removed: remove it by hand" in out, out
    code, out = _admin("reset", "--store", str(root))
    assert code == 1 and "remove it by hand" in out, out
    code, out = _admin("reset", "--store", str(root), "--force")
    assert code == 1 and f"cannot remove {LEASE_KEY}" in out, out
    # in show's words, not Python's errno text (newuser23 F5)
    assert "is not a regular file, and a directory is never removed" in out, out
    assert "Errno" not in out, out
    assert (root / LEASE_KEY / "x").read_text() == "keep"


def test_an_unreadable_lease_is_removed_with_force(tmp_path: Path) -> None:
    root = _cluster(tmp_path)
    LocalStore(root).put(LEASE_KEY, b'{"round": "r", "expires_at": NaN}')
    code, out = _admin("reset", "--store", str(root))
    assert code == 1 and "cannot be read" in out and "NaN" in out, out
    code, out = _admin("reset", "--store", str(root), "--force")
    assert code == 0 and f"removed {LEASE_KEY}" in out, out
    assert LocalStore(root).head(LEASE_KEY) is None


@pytest.mark.parametrize("record", [
    b'{"outcome": "ok", "M": NaN}',
    b'{"outcome": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b"\xff\xfe{",  # issue 41 F9: json.loads read it as UTF-16 ("'utf-16-le' codec ...")
    b'{"a":',
])
def test_show_reads_a_hostile_round_record_strictly(tmp_path: Path, record: bytes) -> None:
    root = _cluster(tmp_path)
    LocalStore(root).put(ROUNDS_PREFIX + "20260101T000000Z-x.json", record)
    code, out = _admin("show", "--store", str(root), "--json")
    # show exits 2: the fixture's reports are dated ahead of this host's clock
    assert code == 2, out
    last = json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))["last_round"]
    # Issue 41 F9: the damaged record is named (it said "cannot read the round records:
    # Expecting value: line 1 column 6 (char 5)", and decoded 0xff 0xfe as UTF-16).
    key = ROUNDS_PREFIX + "20260101T000000Z-x.json"
    assert f"cannot read the round record {key}: " in last["error"], last
    assert "utf-16" not in last["error"], last
    code, out = _admin("show", "--store", str(root))
    assert f"last round: cannot read the round record {key}: " in out, out
