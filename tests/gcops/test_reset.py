"""`gc-admin reset` removes the GC lease only, never a live one without --force,
and says the truth about what it found."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.admin import ResetRefused, reset_gc_state
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.store.base import DeleteResult, Outcome
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import simple_cluster


def _store(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "store", create=True)
    simple_cluster(store, 100)
    return store


class _RoundStartsDuringReset(LocalStore):
    """The real local store; a new round takes the (expired) lease over just before
    reset's delete reaches the store: the interleaving of two processes, made
    deterministic."""

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        if LEASE_KEY in keys:
            Lease(lambda: LocalStore(self.root), "round-B").acquire()
        return super().delete_batch(keys)

    # fix30: the same interleaving before a conditional delete (the fixed reset's request;
    # LocalStore.delete_if_unchanged does not go through delete_batch).
    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        if any(k == LEASE_KEY for k, _ in items):
            Lease(lambda: LocalStore(self.root), "round-B").acquire()
        return super().delete_if_unchanged(items)

    # Issue 38: reset's delete is now a single-object conditional delete.
    def delete_if_match(self, key: str, version: str) -> Outcome:
        if key == LEASE_KEY:
            Lease(lambda: LocalStore(self.root), "round-B").acquire()
        return super().delete_if_match(key, version)


def test_reset_never_removes_a_lease_taken_since_it_looked(tmp_path: Path) -> None:
    root = _store(tmp_path).root
    # A round that released its lease (expired): reset may remove it.
    LocalStore(root).put(LEASE_KEY, json.dumps(
        {"round": "round-A", "host": "h", "pid": 1, "renewed_at": 0, "expires_at": 0}).encode())
    store = _RoundStartsDuringReset(root)
    try:  # fix30: refusing (it did not remove what it looked at) is the right answer too
        removed: object = reset_gc_state(store, time.time(), force=False)
    except ResetRefused as e:
        removed = f"nothing (refused: {e})"
        assert LEASE_KEY in str(e) and "changed since it was read" in str(e), e
    held = LocalStore(root).head(LEASE_KEY)
    assert held is not None, (
        f"reset (no --force) removed {removed}: round-B's live lease, taken after reset read "
        "the expired one")


def _symlinked_lease(tmp_path: Path) -> Path:
    root = _store(tmp_path).root
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (root / LEASE_KEY).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, root / LEASE_KEY)
    return root


def test_reset_force_clears_what_blocks_rounds(tmp_path: Path) -> None:
    root = _symlinked_lease(tmp_path)
    with pytest.raises(GcError):  # every round is refused by what sits at the lease path
        Lease(lambda: LocalStore(root), "round-B").acquire()
    r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root), "--force"])
    # Either the escape hatch clears it, or it refuses naming the link: never "nothing".
    assert not (r.exit_code == 0 and "nothing to remove" in r.output), (
        f"exit {r.exit_code}: {r.output.strip()} (while rounds are refused by {LEASE_KEY})")


def test_show_names_a_link_at_the_lease(tmp_path: Path) -> None:
    root = _symlinked_lease(tmp_path)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(root), "--json"])
    # show exits 2: the fixture's reports are dated ahead of this host's clock
    assert r.exit_code == 2, r.output
    lease = json.loads(r.output)["lease"]
    assert lease != {"holder": None, "live": False}, f"lease shown as absent: {lease}"


def test_reset_nested_lease_is_a_clear_refusal(tmp_path: Path) -> None:
    root = _store(tmp_path).root
    LocalStore(root).put(LEASE_KEY, b'{"round": ' + b"[" * 1900 + b"]" * 1900 + b"}")
    r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root)])
    assert r.exit_code == 1 and LEASE_KEY in r.output, r.output


def test_reset_refusal_of_unreadable_lease_says_unreadable(tmp_path: Path) -> None:
    root = _store(tmp_path).root
    LocalStore(root).put(LEASE_KEY, b"\x00garbage")
    r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root)])
    assert r.exit_code == 1, r.output
    assert "holds a live lease" not in r.output, r.output.strip()


def _strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not JSON (RFC 8259): {name}")

    return json.loads(text, parse_constant=refuse)


def test_show_json_is_json_whatever_the_lease_holds(tmp_path: Path) -> None:
    root = _store(tmp_path).root
    LocalStore(root).put(LEASE_KEY, b'{"round": "r", "host": "h", "pid": 1, '
                                    b'"renewed_at": NaN, "expires_at": NaN}')
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(root), "--json"])
    # show exits 2: the fixture's reports are dated ahead of this host's clock
    assert r.exit_code == 2, r.output
    _strict_json(r.output)
