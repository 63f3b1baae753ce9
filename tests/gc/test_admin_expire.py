"""Issue 41 item 8: records and journals never expired (2.2 MB after 20k deletes, growing
every round). `gc-admin expire`: a dry run first (nothing removed), then `--apply`; the last
rounds, the highest sequence marker and an unfinished round's journal are never removed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.expire import expire_rounds
from epochgc.impl.gc.journal import END, JOURNAL_PREFIX, START
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.sequence import (
    ROUND_SEQ_PREFIX,
    SEQ_PREFIX,
    claim,
    latest,
    round_seq_key,
)
from epochgc.impl.store.base import DeleteResult, ObjectInfo
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import simple_cluster

DAY = 86400.0


def _invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


# A round record's fields as `show` checks them (`recordread.shape_problem`): expire reads
# a record the same way (newuser21 X4), so a bare `{"outcome": "done"}` is "not a round
# record" to both.
RECORD = (b'{"outcome": "done", "exit_code": 0, "started_at": "2026-11-30T19:00:00+00:00", '
          b'"counts": {"deleted": 0}}')
PAUSED = RECORD.replace(b'"done", "exit_code": 0', b'"paused", "exit_code": 3')


def _round(root: Path, round_id: str, age_days: float, finished: bool = True) -> None:
    """A round as a real one leaves it: journal (START, one batch, END), record, marker;
    every object dated `age_days` ago (the store's own time is what expire reads)."""
    store = LocalStore(root)
    base = f"{JOURNAL_PREFIX}{round_id}/"
    keys = [base + START, base + "p0000-s0-a0-t1/00000000.intent.json",
            base + "p0000-s0-a0-t1/00000000.done.json"]
    for k in keys:
        store.put(k, b"{}")
    if finished:
        claim(store, round_id, f"{ROUNDS_PREFIX}{round_id}.json")
        store.put(base + END, b"{}")
        store.put(f"{ROUNDS_PREFIX}{round_id}.json", RECORD)
        keys += [base + END, f"{ROUNDS_PREFIX}{round_id}.json"]
    t = time.time() - age_days * DAY
    for k in keys:
        os.utime(root / k, (t, t))


def _objects(root: Path) -> set[str]:
    return {o.key for o in LocalStore(root).list_all("_cluster/gc/")}


def test_expire_dry_run_then_apply(tmp_path: Path) -> None:
    """Old code: `No such command 'expire'` (exit 2): nothing ever removed them."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    for i in range(5):
        _round(root, f"old{i}", 40 - i)  # 40..36 days old
    _round(root, "dead", 50, finished=False)  # START, no END, no record: never expired
    _round(root, "new", 1)
    before = _objects(root)
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "2")
    assert code == 0, out
    assert "dry run, nothing removed" in out and "would remove 4 round(s)" in out, out
    assert _objects(root) == before  # a dry run removes (and writes) nothing
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "2",
                        "--apply", "--json")
    assert code == 0, out
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["rounds"] == ["old0", "old1", "old2", "old3"] and doc["unfinished"] == ["dead"]
    left = _objects(root)
    # The 2 newest (by sequence) kept whole, the dead round's journal untouched.
    assert {k for k in left if k.startswith(ROUNDS_PREFIX)} == {
        f"{ROUNDS_PREFIX}old4.json", f"{ROUNDS_PREFIX}new.json"}
    assert {k.split("/")[3] for k in left if k.startswith(JOURNAL_PREFIX)} == {
        "old4", "new", "dead"}
    got = latest(LocalStore(root))
    assert got is not None and got.round_id == "new" and got.seq == 6
    assert len([k for k in left if k.startswith(SEQ_PREFIX)]) == 2
    # each round's fixed number goes with its marker (review rev38o finding 2)
    assert {k for k in left if k.startswith(ROUND_SEQ_PREFIX)} == {
        round_seq_key("old4"), round_seq_key("new")}


def test_expire_keeps_the_highest_marker_and_numbering_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    _round(root, "a", 40)
    _round(root, "b", 39)
    # keep-last 1 keeps b; a goes. Then b ages past and a newer round numbers after it.
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                        "--apply")
    assert code == 0 and "removed 1 round(s)" in out, out
    assert claim(LocalStore(root), "c", f"{ROUNDS_PREFIX}c.json") == 3


def test_expire_removes_nothing_younger_than_the_retention(tmp_path: Path) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    for i in range(3):
        _round(root, f"r{i}", 29)  # the default retention is 30 days
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                        "--apply")
    assert code == 0 and "removed 0 round(s)" in out, out
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                        "--older-than", "28d", "--apply")
    assert code == 0 and "removed 2 round(s)" in out, out


def test_expire_keeps_the_journal_of_a_round_killed_between_end_and_record(
        tmp_path: Path) -> None:
    """A driver killed after END and before its record (kill point `end-written`) leaves
    its deletions in its journal alone: recovery (`recover.py`) copies its record from END.
    Old code: expire took the journal for a finished round's and removed it (its age is its
    newest entry's), and that round's deletions were in no record, ever."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    _round(root, "killed", 50, finished=False)
    base = f"{JOURNAL_PREFIX}killed/"
    claim(store, "killed", f"{ROUNDS_PREFIX}killed.json")
    store.put(base + END, json.dumps({"round_id": "killed", "outcome": "done",
                                      "deleted": 1}).encode())
    t = time.time() - 50 * DAY
    os.utime(root / (base + END), (t, t))
    for i in range(3):
        _round(root, f"new{i}", 1 + i)
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "1h",
                        "--keep-last", "1", "--apply", "--json")
    assert code == 0, out
    doc = json.loads(out.strip().splitlines()[-1])
    assert "killed" not in doc["rounds"] and "killed" in doc["unfinished"], doc
    assert {base + START, base + END} <= _objects(root)


# The last: valid JSON, not a round record's fields (newuser21 X4: `show` called it
# damaged, expire removed it with its journal by age, exit 0).
DAMAGED = [b"\xff\xfe{", b'{"a":', b"[]", b'{"outcome": NaN}',
           b'{"outcome": {"x": 1}, "deleted": "many"}']


@pytest.mark.parametrize("raw", DAMAGED, ids=["utf16-bom", "cut", "array", "nan",
                                              "wrong-shape"])
def test_expire_names_and_keeps_a_record_it_cannot_read(tmp_path: Path, raw: bytes) -> None:
    """Issue 41 (newuser2 F9): expire never read a record, so a damaged one was removed
    with its round's journal (the only account of that round's deletions) like any other,
    or kept without a word as one of the last rounds. It must be named (path and why),
    kept with its journal and marker, and the command exit 1 ("failed: a check ...",
    impl/exitcodes.py): nothing removed that was not read."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    _round(root, "bad", 40)  # old enough to expire, not among the last ones
    _round(root, "gone", 39.5)
    _round(root, "old", 39)
    _round(root, "last", 38)
    for name in ("bad", "last"):  # the last round's record damaged too: kept and named
        path = root / f"{ROUNDS_PREFIX}{name}.json"
        t = path.stat().st_mtime
        path.write_bytes(raw)
        os.utime(path, (t, t))
    bad_objects = {k for k in _objects(root) if "/bad" in k}
    for apply in ([], ["--apply"]):
        code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                            *apply)
        assert code == 1, out
        for name in ("bad", "last"):
            assert f"{ROUNDS_PREFIX}{name}.json: " in out, out
        assert "cannot read" in out and "kept" in out, out
        assert bad_objects <= _objects(root)  # the damaged round kept whole
    assert not {k for k in _objects(root) if "/gone" in k}  # the readable old round went
    # newuser22 Y8: the damaged newest is kept but not counted, so `--keep-last 1` keeps the
    # last readable round too (old code: removed it)
    assert f"{ROUNDS_PREFIX}old.json" in _objects(root)
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                        "--json")
    assert code == 1, out
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["rounds"] == [], doc
    assert [u["key"] for u in doc["unreadable"]] == [
        f"{ROUNDS_PREFIX}bad.json", f"{ROUNDS_PREFIX}last.json"], doc
    assert all(u["why"] for u in doc["unreadable"]), doc


@pytest.mark.parametrize("older_than", ["99999999999999999999d", "36501d"])
def test_expire_refuses_a_retention_longer_than_any_record(tmp_path: Path,
                                                           older_than: str) -> None:
    """newuser3 N11: `--older-than 99999999999999999999d` was accepted ("older than
    8.64e+24s"). The bound is 100 years (36500d): beyond it, a typo, 64."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", older_than)
    assert code == 64 and "--older-than must be between 0s and 36500d" in out, out
    assert _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "36500d")[0] == 0


class _Killed(BaseException):
    """The expire's process killed before a request (nothing after it is sent)."""


class _KilledAt(LocalStore):
    """The real store; the `kill_at`-th removal request (from 0) is never sent: the expire
    dies there."""

    def __init__(self, root: Path, kill_at: int) -> None:
        super().__init__(root)
        self.kill_at = kill_at
        self.sent = 0

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        if self.sent == self.kill_at:
            raise _Killed(keys)
        self.sent += 1
        return super().delete_batch(keys)


def _expire_store(root: Path) -> None:
    """Five rounds 40 days old and one a day old, an unfinished one, every object (markers
    included) dated as its round."""
    simple_cluster(LocalStore(root, create=True), 100)
    for i in range(5):
        _round(root, f"old{i}", 40 - i)
    _round(root, "dead", 50, finished=False)
    _round(root, "new", 1)
    t = time.time() - 40 * DAY
    store = LocalStore(root)
    for o in [*store.list_all(SEQ_PREFIX), *store.list_all(ROUND_SEQ_PREFIX)]:
        if json.loads(store.get(o.key))["round"] != "new":
            os.utime(root / o.key, (t, t))


def test_an_expire_killed_before_any_of_its_requests_is_finished_by_the_next(
    tmp_path: Path
) -> None:
    """newuser5 G6: an `expire --apply` interrupted between a round's record and its
    sequence markers left `seq/<n>` and `seq-round/<id>` naming a round with no record and
    no journal; later expires never removed them (they looked at rounds by their records
    and journals). Every point: the expire killed before its k-th removal request, then a
    whole expire, ends where one whole expire does."""
    pristine = tmp_path / "pristine"
    _expire_store(pristine)
    whole = tmp_path / "whole"
    shutil.copytree(pristine, whole)
    counting = _KilledAt(whole, -1)
    plan = expire_rounds(counting, time.time(), 30 * DAY, keep_last=2, apply=True)
    assert plan.rounds == ["old0", "old1", "old2", "old3"], plan
    expected = _objects(whole)
    left: dict[int, set[str]] = {}
    for k in range(counting.sent):
        root = tmp_path / f"k{k}"
        shutil.copytree(pristine, root)
        with pytest.raises(_Killed):
            expire_rounds(_KilledAt(root, k), time.time(), 30 * DAY, keep_last=2, apply=True)
        expire_rounds(LocalStore(root), time.time(), 30 * DAY, keep_last=2, apply=True)
        if _objects(root) != expected:
            left[k] = _objects(root) - expected
    assert not left, (f"of {counting.sent} kill points, after the kill and a whole expire "
                      f"these were left (kill point: objects): {left}")


def test_orphaned_markers_are_removed_only_past_the_retention_and_with_no_round(
    tmp_path: Path
) -> None:
    """The orphans' own rules: younger than the retention kept; a record that appears
    before their removal (a refusal's claim is just before its record's PUT) keeps them;
    the highest marker never goes."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    for name in ("gone", "young", "comes", "top"):
        claim(store, name, f"{ROUNDS_PREFIX}{name}.json")
    t = time.time() - 40 * DAY
    for o in [*store.list_all(SEQ_PREFIX), *store.list_all(ROUND_SEQ_PREFIX)]:
        if "young" not in o.key and not o.key.endswith("2"):
            os.utime(root / o.key, (t, t))

    class _RecordMeanwhile(LocalStore):
        def head(self, key: str) -> ObjectInfo | None:
            if key == f"{ROUNDS_PREFIX}comes.json":  # its PUT lands after the listing
                self.put(key, PAUSED)
            return super().head(key)

    plan = expire_rounds(_RecordMeanwhile(root), time.time(), 30 * DAY, apply=True)
    assert plan.orphans == ["comes", "gone"], plan
    left = _objects(root)
    assert round_seq_key("gone") not in left and "_cluster/gc/seq/00000000000000000001" \
        not in left, left
    for name in ("young", "comes", "top"):
        assert round_seq_key(name) in left, (name, left)
    assert "_cluster/gc/seq/00000000000000000004" in left


def test_a_long_expire_list_is_cut_as_every_list_is() -> None:
    """i41y item 7: expire's lists are cut by `impl/shortlist.py` (the count with thousands
    separators, as every other cut). Old code: "  ... and 1214 more"."""
    from epochgc.impl.gc.expire import ExpirePlan, Unreadable

    plan = ExpirePlan(False, 0.0, 10, rounds=[f"r{i:04d}" for i in range(1234)],
                      orphans=[f"o{i}" for i in range(21)],
                      unreadable=[Unreadable(f"k{i}", "why") for i in range(20)])
    lines = plan.lines()
    assert lines[1:22] == [f"  r{i:04d}" for i in range(20)] + ["  ... and 1,214 more"]
    assert "  o19" in lines and "  ... and 1 more" in lines and "  o20" not in lines
    assert lines[-20:] == [f"  k{i}: why" for i in range(20)]  # 20: none cut


@contextlib.contextmanager
def _immutable(*paths: Path) -> Iterator[None]:
    """`paths` (recursively) made immutable (chattr +i: no entry created or removed in a
    directory, even by root, as the tests run here): a store the command cannot write, for
    real (newuser21 X8 ran it as `nobody`). Skipped where the file system or the process
    cannot (no chattr, no CAP_LINUX_IMMUTABLE); undone on the way out."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("no chattr")
    done: list[Path] = []
    try:
        for p in paths:
            if subprocess.run([chattr, "-R", "+i", str(p)], capture_output=True).returncode:
                pytest.skip("chattr +i is not permitted here")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run([chattr, "-R", "-i", str(p)], check=True)


def test_expire_on_a_store_it_cannot_write_removes_nothing_and_says_so(
        tmp_path: Path) -> None:
    """newuser21 X8: `expire --apply` on a store it could not write: "failed: cannot remove
    .../STOP: Permission denied", true (nothing was removed) but not said, and found at the
    first removal. Now checked first (one small object written and removed, as `cluster
    start` checks its store): refused, exit 1, "nothing was removed"."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    for name, age in (("a", 40), ("b", 39), ("c", 1)):
        _round(root, name, age)
    before = _objects(root)
    with _immutable(root / "_cluster"):
        code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                            "--apply")
    assert code == 1, out
    assert out.rstrip().splitlines()[-1].startswith(
        "epochgc gc-admin expire: error: cannot write to the store, nothing was removed: "), out
    assert _objects(root) == before


def test_expire_failing_mid_way_says_how_far_it_got(tmp_path: Path) -> None:
    """The other half of X8: a removal that fails after others (here round `b`'s journal
    cannot be changed; `a` went first) says what was removed, not only the failure."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    for name, age in (("a", 40), ("b", 39), ("c", 1)):
        _round(root, name, age)
    before = _objects(root)
    with _immutable(root / JOURNAL_PREFIX / "b"):
        code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                            "--apply")
    assert code == 1, out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("epochgc gc-admin expire: error: failed: cannot remove "), last
    gone = len(before - _objects(root))  # round a's record, journal and markers
    assert last.endswith(f"; 1 of 2 round(s) removed whole, {gone} object(s) in all; a round "
                         "cut short mid-way is finished by the next `gc-admin expire "
                         "--apply`"), last
    assert not {k for k in _objects(root) if "/a" in k}


def test_expire_on_a_store_that_refuses_deletes_removes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """review41c C5: the write probe ignored its delete's answer (S3 DeleteObjects says a
    refused key in its 200 answer), so a store that takes writes and refuses deletes passed
    it and the refusal came at the first removal. Now refused first: nothing removed."""
    from tests.impl.test_preflight import _refuse_deletes

    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    for name, age in (("a", 40), ("b", 39), ("c", 1)):
        _round(root, name, age)
    before = _objects(root)
    monkeypatch.setattr(LocalStore, "delete_batch", _refuse_deletes)
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--keep-last", "1",
                        "--apply")
    assert code == 1, out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("epochgc gc-admin expire: error: cannot write to the store, "
                           "nothing was removed: "), out
    assert "did not delete it: AccessDenied" in last, out
    assert _objects(root) == before
