"""Systematic crash states of the disk log (issue 27): the persistence models themselves, then
every crash point and every crash state of each workload, recovered and checked against
ground truth (tests/raft/crashexplore.py). `tox -e crashstates` runs the larger workloads."""

from __future__ import annotations

import os

import pytest

from epochgc.impl.raft.crashstates import (
    SECTOR,
    Fault,
    FaultKind,
    FsOp,
    Model,
    OpKind,
    RecordingFS,
    crash_images,
    crash_points,
)
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import FileIO
from epochgc.impl.raft.messages import Entry, HardState
from tests.raft import crashcounts
from tests.raft import crashexplore as cx

DEEP = os.environ.get("EPOCHGC_CRASHSTATES_DEEP") == "1"


# ---- the recording file system and the models ---------------------------------------------------


def _files(model: Model, ops: list[FsOp]) -> list[dict[str, bytes]]:
    return [img.files() for img in crash_images(ops, model, ["/d"])]


def test_recording_fs_records_logical_operations() -> None:
    fs = RecordingFS("/d")
    _: FileIO = fs  # the whole protocol (mypy checks this line)
    fs.makedirs("/d/a/b")
    fd = fs.open_append("/d/a/b/f", create=True)
    assert fs.write(fd, b"xy") == 2
    fs.fsync(fd)
    fs.close(fd)
    fs.replace("/d/a/b/f", "/d/a/b/g")
    fs.fsync_dir("/d/a/b")
    fs.truncate("/d/a/b/g", 1)
    fs.unlink("/d/a/b/g")
    fs.syncfs(fs.open_fs("/d"))
    kinds = [op.kind for op in fs.trace]
    assert kinds == [OpKind.MKDIR, OpKind.MKDIR, OpKind.CREATE, OpKind.WRITE, OpKind.FSYNC,
                     OpKind.RENAME, OpKind.FSYNC_DIR, OpKind.TRUNCATE, OpKind.FSYNC,
                     OpKind.UNLINK, OpKind.SYNCFS]
    assert fs.listdir("/d/a/b") == [] and fs.exists("/d/a")


def test_recording_fs_injects_enospc_after_a_partial_write() -> None:
    fs = RecordingFS("/d", [Fault("write", 1, FaultKind.ENOSPC, partial=3)])
    fd = fs.open_append("/d/f", create=True)
    fs.write(fd, b"first")
    with pytest.raises(OSError, match="No space"):
        fs.write(fd, b"second")
    assert fs.read("/d/f") == b"firstsec"


def test_strict_tears_unsynced_sectors_in_any_order_ordered_keeps_appends_in_order() -> None:
    fs = RecordingFS("/d")
    fd = fs.open_append("/d/f", create=True)
    fs.fsync(fd)
    fs.fsync_dir("/d")
    data = b"a" * SECTOR + b"b" * SECTOR
    fs.write(fd, data)
    strict = {f["/d/f"] for f in _files(Model.STRICT, fs.trace)}
    # the later sector without the earlier one: out of order, as page-cache writeback may do
    assert bytes(SECTOR) + b"b" * SECTOR in strict
    assert b"" in strict and data in strict
    ordered = {f["/d/f"] for f in _files(Model.EXT4_ORDERED, fs.trace)}
    assert ordered == {b"", data}


def test_strict_undoes_directory_operations_until_the_parent_is_fsynced() -> None:
    fs = RecordingFS("/d")
    fs.makedirs("/d/g")
    fd = fs.open_append("/d/g/f", create=True)
    fs.write(fd, b"x")
    fs.fsync(fd)
    fs.fsync_dir("/d/g")
    # /d/g's own entry in /d was never fsynced: the directory, and f with it, may vanish
    assert any("/d/g/f" not in f for f in _files(Model.STRICT, fs.trace))
    # ext4: any fsync commits the journal, the mkdir included
    assert all(f.get("/d/g/f") == b"x" for f in _files(Model.EXT4_ORDERED, fs.trace))
    fs.fsync_dir("/d")
    assert all(f.get("/d/g/f") == b"x" for f in _files(Model.STRICT, fs.trace))


def test_rename_ordered_after_its_data_in_ext4_not_in_strict() -> None:
    fs = RecordingFS("/d")
    fd = fs.open_trunc("/d/t.tmp")
    fs.write(fd, b"new")  # no fsync before the rename: the seeded-bug shape
    fs.close(fd)
    fs.replace("/d/t.tmp", "/d/t")
    fs.fsync_dir("/d")
    assert {f.get("/d/t") for f in _files(Model.EXT4_ORDERED, fs.trace)} == {b"new"}
    assert b"" in {f.get("/d/t") for f in _files(Model.STRICT, fs.trace)}


def test_operations_on_one_name_persist_in_order() -> None:
    fs = RecordingFS("/d")
    fs.fsync_dir("/d")
    fs.open_append("/d/a", create=True)
    fs.replace("/d/a", "/d/b")
    names = [frozenset(f) for f in _files(Model.STRICT, fs.trace)]
    # never b without the create of a having persisted first (it would have no inode)
    assert set(names) == {frozenset(), frozenset({"/d/a"}), frozenset({"/d/b"})}


def test_a_rename_across_directories_needs_both_fsynced_in_strict() -> None:
    """Issue 42 survivor 3: a segment moved into quarantine/ with only the destination
    directory fsynced. POSIX persists a directory operation only once its directory is
    fsynced (fsync(2): "does not necessarily ensure that the entry in the directory
    containing the file has also reached disk"); a rename changes two directories, so the
    strict model must still offer the state in which it is undone (the file at its old
    name, the new name absent), and drops it only once both are fsynced."""
    fs = RecordingFS("/d")
    fs.makedirs("/d/q")
    fd = fs.open_append("/d/seg", create=True)
    fs.write(fd, b"x")
    fs.fsync(fd)
    fs.close(fd)
    fs.syncfs(fs.open_fs("/d"))
    fs.replace("/d/seg", "/d/q/seg")
    fs.fsync_dir("/d/q")  # the destination only
    names = {frozenset(f) for f in _files(Model.STRICT, fs.trace)}
    assert names == {frozenset({"/d/seg"}), frozenset({"/d/q/seg"})}, names
    # ext4 (data=ordered): any fsync commits the journal, the rename included
    assert {frozenset(f) for f in _files(Model.EXT4_ORDERED, fs.trace)} == {
        frozenset({"/d/q/seg"})}
    fs.fsync_dir("/d")  # and the source: now the rename is durable
    assert {frozenset(f) for f in _files(Model.STRICT, fs.trace)} == {frozenset({"/d/q/seg"})}


def test_crash_points_cut_inside_writes() -> None:
    fs = RecordingFS("/d")
    fd = fs.open_append("/d/f", create=True)
    fs.write(fd, bytes(1200))
    points = list(crash_points(fs.trace))
    partial = sorted(p.partial for p in points if p.partial is not None)
    assert partial == [1, 12, 512, 600, 1024, 1199]
    assert len([p for p in points if p.partial is None]) == len(fs.trace) + 1


# ---- the disk log under every crash state -------------------------------------------------------



def _explore(names: list[str], models: tuple[Model, ...] = tuple(Model), faults: bool = True,
             storage: type[DiskStorage] = DiskStorage, in_recovery: bool = False) -> cx.Result:
    wls = [w for w in cx.WORKLOADS if w.name in names]
    res = cx.explore_all(wls, faults, models, storage=storage, in_recovery=in_recovery)
    print(cx.report(res))
    return res


def _kinds(res: cx.Result, *kinds: cx.Kind) -> list[str]:
    return [str(f) for f in res.findings.values() if not kinds or f.kind in kinds]


def test_item1_interrupted_install_never_commits_uncommitted_entries() -> None:
    """Found on the old code: '[ext4-ordered] install g1 UNCOMMITTED: commit 6 covers entry 3
    (term 1) but the cluster committed term 2 there (hs 2/0/6, snapshot 0/0, log to 6)',
    crash after op 14 (the install's STATE record fsynced, the snapshot file not yet)."""
    res = _explore(["install", "install_with_entries"])
    assert not _kinds(res, cx.Kind.UNCOMMITTED)


def test_item2_install_with_entries_restarts_in_every_ordered_state() -> None:
    """Found on the old code: '[ext4-ordered] install_with_entries g1 REFUSED: commit index
    10 is past the last entry 8' (snapshot file landed, its segment not)."""
    res = _explore(["install_with_entries"], (Model.EXT4_ORDERED,))
    assert not _kinds(res, cx.Kind.REFUSED)


def test_item5_out_of_order_sectors_recover() -> None:
    """Found on the format-3 code: '[strict] appends g1 REFUSED: ... 0000000000000001.seg at
    byte offset 282: record header checksum mismatch' (a later sector of the unsynced batch
    persisted, an earlier one did not). After the s12-disk merge still: '[strict] compaction
    g1 REFUSED: 0000000000000001.seg at byte offset 0: bad segment header', crash inside the
    first batch's write, the segment's first sector (magic, START, first entries) zeros and
    its second written (fixed in disklog.py: such a last segment is a torn creation)."""
    res = _explore(["appends", "compaction"], (Model.STRICT,), faults=False)
    assert not _kinds(res, cx.Kind.REFUSED)


def test_item6_group_directories_survive_in_their_parent() -> None:
    """Found on the old code: '[strict] appends g1 LOST_ACKED: entry 1 of term 1
    acknowledged, recovered nothing' with the image '/, /data/, /data/n1/' (g1's own entry
    never fsynced in n1)."""
    res = _explore(["appends", "groups"], (Model.STRICT,), faults=False)
    assert not _kinds(res, cx.Kind.LOST_ACKED, cx.Kind.TERM_BACK)


def test_recovery_makes_what_it_recovered_durable() -> None:
    """Found on the old code: '[ext4-ordered] restart g1 LOST_ACKED: entry 3 of term 1
    acknowledged, recovered nothing (hs 1/1/2, snapshot 0/0, log to 2)': a process killed
    after an unsynced batch, the next one recovers it from the page cache and Raft takes it
    as stable (acknowledges it to a leader), then the power goes. Fixed in disklog.py:
    load() fsyncs the last segment, the directory and its parent before returning."""
    res = _explore(["restart"], (Model.EXT4_ORDERED,), faults=False)
    assert not _kinds(res, cx.Kind.LOST_ACKED)


def test_every_workload_every_crash_state_recovers_the_ground_truth() -> None:
    """Every workload, with ENOSPC or EIO at each write and EIO at each fsync, every crash point,
    both models, and every crash inside each recovery: nothing found."""
    res = crashcounts.named()
    print(cx.report(res))
    assert not _kinds(res), "\n".join(_kinds(res))
    # Exactly as many crash points and states as pinned (issue 42): an explorer that sees
    # less fails here, not silently (`python -m tests.raft.crashcounts --write` re-pins).
    assert not crashcounts.differences("named", res), crashcounts.differences("named", res)


def test_a_workload_writes_only_what_a_follower_can() -> None:
    r = cx.Recorder()
    g = r.group(1)
    with pytest.raises(ValueError, match="commit 3 past the log's last index 1"):
        g.write(HardState(1, 0, 3), None, [Entry(1, 1)])
    g.write(HardState(1, 2, 0), None, [])
    with pytest.raises(ValueError, match="workload bug: hard state"):
        g.write(HardState(1, 3, 0), None, [])  # a second vote in term 1


@pytest.mark.parametrize("mutant", cx.MUTANTS, ids=lambda m: m.name.replace(" ", "-"))
def test_a_seeded_bug_is_found(mutant: cx.Mutant) -> None:
    """Bugs no check was written for, seeded into a copy of disklog.py: the explorer finds each
    (which check and crash state: tests/raft/crashexplore.py's report, printed)."""
    res = _explore([w.name for w in cx.WORKLOADS], faults=False,
                   storage=cx.mutant_storage(mutant))
    assert _kinds(res), f"seeded bug not found: {mutant.name}"


@pytest.mark.parametrize("mutant", cx.REMOVAL_MUTANTS, ids=lambda m: m.name.replace(" ", "-"))
def test_a_seeded_bug_in_group_removal_is_found(
    mutant: cx.Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workloads remove a group with the server's own removal code, so a bug seeded into
    a copy of impl/raft/removal.py is found (before, the explorer ran a copy of the calls)."""
    monkeypatch.setattr(cx, "REMOVAL", cx.mutant_removal(mutant))
    res = _explore([w.name for w in cx.WORKLOADS if w.name == "groups"], faults=False)
    assert _kinds(res), f"seeded bug not found: {mutant.name}"


def test_generated_workloads_recover_the_ground_truth() -> None:
    """Every sequence of 2 generated steps (appends, big batches, new terms, compactions,
    installs with and without entries, kills and restarts), and every single step (a
    truncation on conflict too) with ENOSPC/EIO at every call, the node restarted without a
    reboot after it; `tox -e crashstates` runs every sequence of 3 with faults."""
    res = crashcounts.generated()
    print(cx.report(res))
    assert not _kinds(res), "\n".join(_kinds(res))
    assert not crashcounts.differences("generated", res), crashcounts.differences(
        "generated", res)


BEFORE_ISSUE_27 = "a88a5d1"  # the disk log (format 3) the issue was filed against


def test_the_explorer_finds_issue_27_on_the_code_before_it() -> None:
    """The explorer run against disklog.py as it was when issue 27 was filed finds items 1, 2,
    5 and 6 (and the recovered-not-durable defect), each as the check it should fail."""
    try:
        old = cx.storage_at(BEFORE_ISSUE_27)
    except Exception as e:  # a shallow clone without that commit
        pytest.skip(f"disklog.py at {BEFORE_ISSUE_27} unavailable: {e}")
    res = _explore(["appends", "install", "install_with_entries", "restart"], faults=False,
                   storage=old)
    found = {(f.workload, f.model, f.kind): f.detail for f in res.findings.values()}
    # 1: the install's STATE record commits the old log's uncommitted entries
    assert "the cluster committed term 2 there" in found[
        ("install", Model.EXT4_ORDERED, cx.Kind.UNCOMMITTED)]
    # 2: install + entries in one Ready refused after a crash inside the model
    assert "commit index 10 is past the last entry 8" in found[
        ("install_with_entries", Model.EXT4_ORDERED, cx.Kind.REFUSED)]
    # 5: a later sector of the unsynced tail persisted, an earlier one not: refused
    assert "checksum mismatch" in found[("appends", Model.STRICT, cx.Kind.REFUSED)]
    # 6: the group's directory never fsynced in its parent: everything gone
    assert "recovered nothing" in found[("appends", Model.STRICT, cx.Kind.LOST_ACKED)]
    # recovery took the page cache's unsynced tail as stable
    assert ("restart", Model.EXT4_ORDERED, cx.Kind.LOST_ACKED) in found


# ---- issue 37: Linux's write-back error semantics, restarts after a fault ----------------------


def test_issue37_after_a_fault_the_restarted_node_keeps_every_acknowledgement() -> None:
    """A failed fsync's pages stay cached and never reach the disk; the node restarts
    without a reboot (and again if recovery's own fsync fails); another tenant's write-back
    error must fail the node's syncfs barrier: with ENOSPC/EIO at every call, every crash
    state of the page-cache model (and of ext4-ordered up to the failed write-back)."""
    res = cx.explore_all(cx.AFTER_FAULT_WORKLOADS, True, (Model.PAGECACHE, Model.EXT4_ORDERED),
                         in_recovery=False)
    print(cx.report(res))
    assert not _kinds(res), "\n".join(_kinds(res))


def test_issue37_a_long_generated_sequence_with_a_fault_at_every_fsync() -> None:
    """Six steps (a truncation on conflict and a restart among them) with EIO at each
    fsync-like call, the node restarted without a reboot after it, resynchronised by a new
    leader, then the remaining steps: every crash state of the page-cache model. `tox -e
    crashstates` runs many such sequences with every fault kind and every model."""
    (wl,) = cx.long_workloads(1, 6, seed=3701)
    res = cx.Result()
    for faults in cx.fault_runs(wl, "fsync", FaultKind.EIO):
        res.merge(cx.explore(wl, (Model.PAGECACHE,), faults, label=f"{wl.name}+fsync-EIO",
                             in_recovery=False))
    print(cx.report(res))
    states = sum(n for (_, what), n in res.counts.items() if what.startswith("states"))
    assert states > 1000
    assert not _kinds(res), "\n".join(_kinds(res))


def test_issue37_defects_seeded_back_are_found_by_the_new_models_only() -> None:
    """Each of issue 37's defects seeded into a copy of the fixed code: the page-cache model
    finds the restart after a failed fsync (F1) and the syncfs barrier on a descriptor per
    call (F2, two tenants), the byte-damage explorer the zero trailer (F3) and the missing
    length marker (F4); strict and ext4-ordered, and the crash states without damage, find
    none of them."""
    after_eio, tenants = (next(w for w in cx.AFTER_FAULT_WORKLOADS if w.name == n)
                          for n in ("restart_after_eio", "tenants"))
    old_models = (Model.STRICT, Model.EXT4_ORDERED)
    f1 = cx.mutant_storage(cx.F1_READ_THROUGH_CACHE)
    assert not cx.explore(after_eio, old_models, storage=f1, in_recovery=False).findings
    found = cx.explore(after_eio, (Model.PAGECACHE,), storage=f1, in_recovery=False).findings
    assert {k for _, _, k in found} == {cx.Kind.LOST_ACKED}, found
    f2 = cx.mutant_group_commit(cx.F2_DESCRIPTOR_PER_BARRIER)
    assert not cx.explore(tenants, old_models, gc_factory=f2, in_recovery=False).findings
    found = cx.explore(tenants, (Model.PAGECACHE,), gc_factory=f2, in_recovery=False).findings
    assert cx.Kind.LOST_ACKED in {k for _, _, k in found}, found
    for m in (cx.F3_ZERO_TRAILER, cx.F4_NO_MARKER):
        st = cx.mutant_storage(m)
        assert cx.damage_findings(st), m.name
        assert not cx.explore(after_eio, tuple(Model), storage=st, in_recovery=False).findings
    assert not cx.damage_findings()


def test_the_explorer_in_processes_counts_and_finds_what_one_process_does() -> None:
    # `-j N` (tox -e crashstates) must not change what is explored: the same counts per
    # workload and the same first finding of each kind, merged in workload order. Seeded:
    # a storage that forgets the directory fsync, so there are findings to compare.
    from tests.raft.crashexplore import MUTANTS, WORKLOADS, explore_all, mutant_storage, report

    seeded = mutant_storage(next(m for m in MUTANTS if m.name == "sync skips the directory fsync"))
    wls = WORKLOADS[:2]
    for storage in (DiskStorage, seeded):
        one = explore_all(wls, False, storage=storage, in_recovery=False)
        two = explore_all(wls, False, storage=storage, in_recovery=False, jobs=2)
        assert report(one) == report(two) and sum(one.counts.values()) > 0
        assert bool(one.findings) == (storage is seeded)


def test_a_name_that_is_no_workload_is_refused_not_zero_states(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--workload nope` explored nothing and said "0 states; findings: 0", exit 0.
    from tests.raft.crashexplore import main

    for argv in (["--workload", "nope"], ["-j", "0"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and "error:" in capsys.readouterr().err
