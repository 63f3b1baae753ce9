"""Review rev38z12 (issue 38, final merged code): each finding a strict xfail, seen failing.

Finding 1: an integer past a float's range (JSON allows any number of digits; Python's json
reads it as an int) raises OverflowError out of the validating parsers, which catch
ValueError/TypeError only: `math.isfinite(10**400)` and `float(10**400)` raise OverflowError
(an ArithmeticError, not a ValueError). The fuzz's WEIRD values hold 2**70 (fits a float)
and 1e400 (read as inf), never such an int."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import recover
from epochgc.impl.gc.journal import journal_prefix
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recordread import read_round_record
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.store.local import LocalStore
from tests.gc.test_journal_fuzz import BASE, DEAD, END, KEYS

HUGE = "1" + "0" * 400  # a JSON number: json.loads reads it as int 10**400


def _dead_round(tmp_path: Path, docs: dict[str, Any], raw: dict[str, bytes]) -> LocalStore:
    store = LocalStore(tmp_path / "s", create=True)
    for k in KEYS:
        store.put(k, b"x")
    prefix = journal_prefix(DEAD)
    for name, doc in docs.items():
        store.put(prefix + name, raw.get(name, json.dumps(doc).encode()))
    return store


def _recover(store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recover, "POLL_S", 10_000.0)
    done = recover_dead_rounds(store, "rev38z12", lambda: set(), sleep=lambda s: None)
    assert [r.round_id for r in done] == [DEAD]
    read_round_record(store, round_key(DEAD))


def _with(name: str, field: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    docs = copy.deepcopy(BASE)
    docs[name][field] = 12345.0  # placeholder, replaced in the bytes by the huge integer
    return docs, {name: json.dumps(docs[name]).replace("12345.0", HUGE).encode()}


@pytest.mark.xfail(strict=True, raises=OverflowError,
                   reason="rev38z12 finding 1: an outcome's unanswered_ago_s of 10**400 "
                          "raises OverflowError out of _parse_done/read_journal")
def test_an_outcome_with_a_huge_integer_ago_is_read_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, raw = _with("p0000-s0-a0-t1/00000001.done.json", "unanswered_ago_s")
    _recover(_dead_round(tmp_path, docs, raw), monkeypatch)


@pytest.mark.xfail(strict=True, raises=OverflowError,
                   reason="rev38z12 finding 1: a carried outcome's unanswered_ago_s of "
                          "10**400 raises OverflowError out of _carried (catches ValueError, "
                          "TypeError)")
def test_a_carried_outcome_with_a_huge_integer_ago_is_read_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = copy.deepcopy(BASE)
    name = "p0000-s0-a0-t1/00000001.intent.json"
    docs[name]["done"]["00000000"] = {**docs[name]["done"]["00000000"],
                                      "unanswered_ago_s": 12345.0}
    raw = {name: json.dumps(docs[name]).replace("12345.0", HUGE).encode()}
    del docs["p0000-s0-a0-t1/00000000.done.json"]  # the outcome only carried (its own lost)
    _recover(_dead_round(tmp_path, docs, raw), monkeypatch)


@pytest.mark.xfail(strict=True, raises=OverflowError,
                   reason="rev38z12 finding 1: START's stop_within_s of 10**400 raises "
                          "OverflowError out of recover._stop_within (float(given))")
def test_a_start_with_a_huge_integer_bound_is_read_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, raw = _with("START.json", "stop_within_s")
    _recover(_dead_round(tmp_path, docs, raw), monkeypatch)


@pytest.mark.xfail(strict=True, raises=OverflowError,
                   reason="rev38z12 finding 1: an END whose started_at is 10**400 raises "
                          "OverflowError out of parse_end/shape_problem")
def test_an_end_with_a_huge_integer_is_read_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = copy.deepcopy(BASE)
    docs["END.json"] = {**copy.deepcopy(END), "started_at": 12345.0}
    raw = {"END.json": json.dumps(docs["END.json"]).replace("12345.0", HUGE).encode()}
    _recover(_dead_round(tmp_path, docs, raw), monkeypatch)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="rev38z12 finding 2: gc-admin show raises OverflowError (no "
                          "output, exit 1) on a lease whose expires_at is 10**400: "
                          "admin.read_lease calls it live (int > float compares exactly), "
                          "show._since computes now - t; the round's _expires reads it as "
                          "expired and takes it over")
def test_show_says_a_lease_with_a_huge_integer_expiry_without_raising(tmp_path: Path) -> None:
    import time

    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from tests.gc.helpers import simple_cluster

    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100, now=time.time())
    doc = {"round": "r", "host": "h", "pid": 1, "token": "t", "renewed_at": 1.0,
           "expires_at": 12345.0}
    store.put("_cluster/gc/lease.json", json.dumps(doc).replace("12345.0", HUGE).encode())
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(root)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "lease:" in r.output
