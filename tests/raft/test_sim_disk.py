"""The simulator on the real DiskStorage: seeded programs of proposals, crashes (losing what
was not fsynced), restarts (a new host recovering from the disk), compactions at the applied
index while the log runs further, snapshot installs, link cuts (both ways and one way), late
replays of old messages and several inputs batched before one Ready. Every Raft invariant
runs after every event; every restart must recover what the node had made durable.
`kill_program`: the same programs with processes dying at any file-system call (not only
between write and sync) and ENOSPC on snapshot writes (KILL_PROGRAMS of them; 1,000 with
EPOCHGC_DEEP=1, `tox -e crashstates`).

Profiles: the default runs DISK_PROGRAMS programs (CI); EPOCHGC_DEEP=1 (or `tox -e simdisk`)
many more and longer. A campaign with counts:

    python -m tests.raft.test_sim_disk --steps 100000 [--first-seed N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.invariants import InvariantViolation
from epochgc.impl.raft.messages import Entry, HardState, Snapshot
from epochgc.impl.raft.node import Config, ProposalRefused
from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import Faults, RestartRefused
from tests.raft.test_sim import converge, random_config

DEEP = os.environ.get("EPOCHGC_DEEP") == "1"
DISK_PROGRAMS = 3000 if DEEP else 300
DISK_ROUNDS = 120 if DEEP else 40


GROUP_COMMIT: list[bool | str] = [False, "syncfs", "parallel"]


def disk_setup(seed: int) -> tuple[Config, Faults, dict[str, int]]:
    r = random.Random(seed ^ 0xD15C)
    cfg = random_config(r)
    faults = Faults(
        drop=r.choice([0.0, 0.05, 0.2]),
        duplicate=r.choice([0.0, 0.1]),
        reorder=r.choice([0.0, 0.2, 0.5]),
        max_latency=r.choice([3, 15, 40]),
        crash_mid_write=r.choice([0.3, 0.7]),
        replay=r.choice([0.0, 0.02, 0.1]),
        batch=r.choice([0.0, 0.3, 0.8]),
    )
    # Small segments: rolls and whole-segment deletions on nearly every compaction.
    disk = {
        "segment_bytes": r.choice([64, 200, 1024]),
        "snapshot_interval": r.choice([0, 3, 8]),
        "group_commit": r.choice([0, 0, 1, 2]),  # off, syncfs, parallel fsyncs
    }
    return cfg, faults, disk


Op = tuple[object, ...]  # ("propose", count) | ("crash", node, mid_write) | ... (see run_op)


def disk_ops(seed: int, n: int, rounds: int) -> list[Op]:
    """The program of a seed: operations drawn from their own rng (so a shrunk program is an
    explicit list that replays without its seed's other draws), each followed by a run."""
    r = random.Random(seed ^ 0x0975)
    ids = list(range(1, n + 1))
    ops: list[Op] = []
    for _ in range(rounds):
        op = r.random()
        if op < 0.35:
            ops.append(("propose", r.randint(1, 6), r.random() < 0.5))
        elif op < 0.47:
            ops.append(("crash", r.choice(ids), None))
        elif op < 0.59:
            ops.append(("restart", r.choice(ids)))
        elif op < 0.71:
            ops.append(("compact", r.choice(ids)))
        elif op < 0.76:
            ops.append(("cut", r.choice(ids), r.choice(ids)))
        elif op < 0.81:
            ops.append(("cut_one_way", r.choice(ids), r.choice(ids)))
        elif op < 0.86:
            ops.append(("heal",))
        elif op < 0.90:
            ops.append(("replay", r.randint(1, 5)))
        elif op < 0.93:
            ops.append(("transfer", r.choice(ids)))
        ops.append(("run", r.randint(1, 60)))
    return ops


def _i(x: object) -> int:
    assert isinstance(x, int)
    return x


def run_op(s: Simulator, op: Op, tag: int) -> None:
    kind, args = op[0], op[1:]
    lead = s.leader()
    if kind == "propose" and lead:
        count, fenced = args
        for j in range(_i(count)):
            if not s.nodes[lead].up:
                break  # its process died at a file-system call (kill_program)
            term = s.host(lead).term(1) if fenced else None
            with contextlib.suppress(ProposalRefused):
                s.propose(lead, b"%d-%d" % (tag, j), expected_term=term)
    elif kind == "crash":
        s.crash(_i(args[0]), None if args[1] is None else bool(args[1]))
    elif kind == "restart":
        s.restart(_i(args[0]))
    elif kind == "compact":
        if s.nodes[_i(args[0])].up:
            s.compact(_i(args[0]))
    elif kind == "cut":
        s.cut(_i(args[0]), _i(args[1]))
    elif kind == "cut_one_way":
        s.cut_one_way(_i(args[0]), _i(args[1]))
    elif kind == "heal":
        s.heal()
    elif kind == "replay":
        s.replay_old(_i(args[0]))
    elif kind == "transfer" and lead:
        with contextlib.suppress(ProposalRefused):
            s.transfer_leadership(lead, _i(args[0]))
    elif kind == "run":
        s.run(_i(args[0]))


def disk_program(
    seed: int, rounds: int = DISK_ROUNDS, ops: list[Op] | None = None,
    converge_at_end: bool = True, check_durability: bool = True,
) -> Simulator:
    """One seeded program on DiskStorage (`ops`: an explicit one, e.g. a shrunk failure);
    raises InvariantViolation (or RestartRefused) on a safety or durability failure. The
    caller closes the simulator."""
    cfg, faults, disk = disk_setup(seed)
    n = 3 if seed % 3 else 5
    s = Simulator(
        n, seed=seed, config=cfg, faults=faults, disk=True,
        segment_bytes=disk["segment_bytes"], snapshot_interval=disk["snapshot_interval"],
        check_durability=check_durability, group_commit=GROUP_COMMIT[disk["group_commit"]],
    )
    try:
        for k, op in enumerate(ops if ops is not None else disk_ops(seed, n, rounds)):
            run_op(s, op, k)
        if converge_at_end:
            converge(s)
            # Everyone crashes (between a write and its fsync where one is under way) and
            # restarts: every acknowledged entry must come back from the disks alone.
            for i in s.ids:
                s.crash(i)
            converge(s)
    except BaseException:
        s.close()
        raise
    return s


@pytest.mark.parametrize("chunk", range(10))
def test_disk_fuzz_keeps_every_invariant(chunk: int) -> None:
    per = DISK_PROGRAMS // 10
    totals: Counter[str] = Counter()
    for seed in range(chunk * per, (chunk + 1) * per):
        s = disk_program(seed)
        totals.update(s.stats)
        totals["acked"] += len(s.checker.history(1).acked) if s.checker else 0
        s.close()
    # The programs exercised what they claim to (a check on the generator, not on Raft).
    assert totals["crashes"] and totals["restarts"] and totals["compactions"]
    assert totals["acked"] > per


# ---- what the fuzz found, pinned ----------------------------------------------------------

# Shrunk programs (`--shrink SEED`). On the pre-issue-10 disk log: 8 lost synced entries on a
# restart (a node compacted behind its log end; recovery returned the snapshot and no entries),
# 4 refused to restart ("gap: entry 26 after 19"). On the first fixed disk log (9741177): 33
# refused to restart (the storage-level test below; fixed in 62d31a3).
FOUND: dict[int, list[Op]] = {
    8: [("crash", 1, None), ("run", 52), ("run", 15), ("run", 26), ("run", 41), ("run", 47),
        ("propose", 5, True), ("run", 21), ("run", 21), ("propose", 5, False)],
    4: [("run", 34), ("run", 36), ("crash", 2, None), ("run", 44), ("propose", 5, True),
        ("run", 36), ("compact", 1), ("restart", 2), ("run", 38), ("compact", 1)],
    33: [("run", 60), ("run", 53), ("replay", 5), ("run", 46), ("propose", 6, True),
         ("run", 25), ("cut", 3, 4), ("run", 16), ("crash", 4, None)],
}


@pytest.mark.parametrize("seed", sorted(FOUND))
def test_found_programs_run_clean(seed: int) -> None:
    disk_program(seed, ops=FOUND[seed]).close()


def test_found_restart_after_overwrite_and_compaction(tmp_path: Path) -> None:
    """Found by the disk fuzz (seed 33, shrunk, node 4): entries 1-7 of term 1 are synced, a
    new leader (term 3) overwrites from index 3, the node compacts at 3. The records replay as
    1-7 (term 1) then 3-4 (term 3); 1-3 are at or below the snapshot and skipped, and 4 of
    term 1 is then checked against the snapshot's term 3 and refused, though the record
    after it replaces it. A plain restart must recover snapshot 3 + entry 4 of term 3."""
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 1, 0), None, [Entry(i, 1) for i in range(1, 8)])
    s.sync()
    s.write(HardState(3, 0, 0), None, [Entry(3, 3), Entry(4, 3)])
    s.sync()
    s.write(HardState(3, 0, 3), None, [], compacted=Snapshot(3, 3, b"state at 3"))
    s.sync()
    s.close()
    init = DiskStorage(str(tmp_path)).load()
    assert (init.snapshot.index, init.snapshot.term) == (3, 3)
    assert [(e.index, e.term) for e in init.entries] == [(4, 3)]


# ---- a process dies at any file-system call (issue 27) -------------------------------------

KILL_PROGRAMS = 1000 if DEEP else 60


def kill_faults(seed: int) -> tuple[Faults, dict[str, int]]:
    """disk_setup's faults and disk, plus a death at any file-system call (a power loss or a
    plain kill) and ENOSPC on snapshot writes, from their own draws."""
    _, faults, disk = disk_setup(seed)
    r = random.Random(seed ^ 0x4B111)
    faults.kill_at_call = r.choice([0.002, 0.01, 0.03])
    faults.enospc_snapshot = r.choice([0.0, 0.3, 1.0])
    # (no parallel group commit: its fsyncs draw from the rng on pool threads)
    disk["group_commit"] = r.choice([0, 1])
    disk["snapshot_interval"] = r.choice([3, 8])
    return faults, disk


def kill_program(seed: int, rounds: int = DISK_ROUNDS, ops: list[Op] | None = None,
                 check_durability: bool = True) -> Simulator:
    """disk_program with processes dying at any file-system call and ENOSPC on snapshot
    writes; at the end the faults stop and everyone converges, crashes and converges again.
    Raises InvariantViolation (or RestartRefused) on a safety or durability failure."""
    cfg = disk_setup(seed)[0]
    faults, disk = kill_faults(seed)
    n = 3 if seed % 3 else 5
    s = Simulator(
        n, seed=seed, config=cfg, faults=faults, disk=True,
        segment_bytes=disk["segment_bytes"], snapshot_interval=disk["snapshot_interval"],
        group_commit=GROUP_COMMIT[disk["group_commit"]], check_durability=check_durability,
    )
    try:
        for k, op in enumerate(ops if ops is not None else disk_ops(seed, n, rounds)):
            run_op(s, op, k)
        s.faults = Faults()
        converge(s)
        for i in s.ids:
            s.crash(i)
        converge(s)
    except BaseException:
        s.close()
        raise
    return s


def test_disk_kill_at_any_call_keeps_every_invariant() -> None:
    """On the format-3 disk log, seed 1: 'durability: node 1 group 1 after restart 3: term/vote
    0/0 recovered, but 1/3 had been synced'; after the s12-disk merge, seed 17: 'entry 2 (term
    4) had been synced, but the recovered log is snapshot 0/0 + entries 1..1' (a restart after
    a kill took the page cache's unsynced segment as stable without making it durable)."""
    totals: Counter[str] = Counter()
    for seed in range(KILL_PROGRAMS):
        s = kill_program(seed)
        totals.update(s.stats)
        s.close()
    print(f"{KILL_PROGRAMS} programs:", {k: v for k, v in sorted(totals.items())
                                         if k in ("kills", "restarts", "snapshot_installs",
                                                  "enospc_injected") or k.startswith("died")})
    assert totals["kills"] and totals["snapshot_installs"] and totals["enospc_injected"]


EIO_PROGRAMS = 300 if DEEP else 40


def eio_program(seed: int, rounds: int = DISK_ROUNDS) -> Simulator:
    """disk_program with barriers failing their write-back (EIO) under CrashFS's page-cache
    model (issue 37): the bytes stay in the files (the cache) and never reach the device; the
    node stops and, half the time without a power loss, is restarted later WITHOUT a reboot,
    reading the same files; more writes, crashes and power losses follow. Every restart must
    recover what the node acknowledged (the durability check), and Raft's invariants hold."""
    cfg, faults, disk = disk_setup(seed)
    r = random.Random(seed ^ 0xE10)
    faults.eio_fsync = r.choice([0.005, 0.02, 0.05])
    n = 3
    s = Simulator(
        n, seed=seed, config=cfg, faults=faults, disk=True,
        segment_bytes=disk["segment_bytes"], snapshot_interval=disk["snapshot_interval"],
        group_commit=GROUP_COMMIT[r.choice([0, 1])],  # (parallel draws on pool threads)
    )
    try:
        for k, op in enumerate(disk_ops(seed, n, rounds)):
            run_op(s, op, k)
        s.faults = Faults()
        for i in s.ids:
            s.restart(i)
        converge(s)
        for i in s.ids:
            s.crash(i)
        converge(s)
    except BaseException:
        s.close()
        raise
    return s


def test_disk_eio_then_restart_without_reboot_keeps_every_invariant() -> None:
    """Found on the old code (recovery read through the page cache; seeded back as
    tests/raft/crashexplore.py's F1_READ_THROUGH_CACHE): see
    test_eio_programs_find_a_recovery_that_reads_the_cache."""
    totals: Counter[str] = Counter()
    for seed in range(EIO_PROGRAMS):
        s = eio_program(seed)
        totals.update(s.stats)
        s.close()
    print(f"{EIO_PROGRAMS} programs:", {k: v for k, v in sorted(totals.items())
                                        if k in ("kills", "restarts", "eio_injected")
                                        or k.startswith("died")})
    assert totals["eio_injected"] and totals["died: storage failed"]


def test_eio_programs_find_a_recovery_that_reads_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same programs against the disk log with issue 37's item 1 seeded back (load()
    reads the page cache): a durability or Raft invariant fails."""
    from epochgc.impl.raft import sim as simmod
    from epochgc.impl.raft import simdisk
    from tests.raft import crashexplore as cx

    # The simulator opens storage in simdisk; sim reads the class too (remove_group).
    mutant = cx.mutant_storage(cx.F1_READ_THROUGH_CACHE)
    monkeypatch.setattr(simdisk, "DiskStorage", mutant)
    monkeypatch.setattr(simmod, "DiskStorage", mutant)
    found = []
    for seed in range(EIO_PROGRAMS):
        try:
            eio_program(seed).close()
        except InvariantViolation as e:
            found.append(f"seed {seed}: {e}")
            break
    assert found, "the seeded bug survived every program"
    print(found[0])


def test_found_kill_interrupted_install_applies_nothing_uncommitted() -> None:
    """Found by kill_program (seed 31, 120 rounds, end-to-end checks only) on the format-3 disk
    log: 'state machine safety: node 1 group 1 applied term 6 at index 13, another node
    applied term 11' (the install's STATE record, durable before the snapshot file, committed
    the follower's own uncommitted entries). Runs clean since the s12-disk fix."""
    kill_program(31, rounds=120, check_durability=False).close()


# ---- the campaign ------------------------------------------------------------------------


@dataclass
class Campaign:
    check_durability: bool = True
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[int, str, str]] = field(default_factory=list)  # seed, kind, message

    def run(self, seed: int, rounds: int) -> None:
        s = None
        try:
            s = disk_program(seed, rounds, check_durability=self.check_durability)
        except RestartRefused as e:
            self._fail(seed, "refused_restart", e)
        except InvariantViolation as e:
            self._fail(seed, _classify(str(e)), e)
        except Exception as e:  # the core or the host refusing an operation: count it too
            self._fail(seed, "other_error", e)
        self.counts["programs"] += 1
        if s is not None:
            self._add(s)
            s.close()

    def _fail(self, seed: int, kind: str, e: BaseException) -> None:
        self.counts[kind] += 1
        self.failures.append((seed, kind, f"{type(e).__name__}: {e}"))
        # The simulator that failed is gone; count its steps from the exception's traceback.
        sim = _sim_from(e)
        if sim is not None:
            self._add(sim)
            sim.close()

    def _add(self, s: Simulator) -> None:
        self.counts["steps"] += s.steps
        for k in ("crashes", "restarts", "compactions", "snapshot_installs",
                  "replayed_messages", "batched_readies"):
            self.counts[k] += s.stats[k]
        if s.checker is not None:
            self.counts["acknowledged"] += sum(len(h.acked) for h in s.checker.groups.values())


def _classify(msg: str) -> str:
    if "acknowledged" in msg or "durability" in msg:
        return "lost_acknowledged_or_durable"
    if any(k in msg for k in ("state machine safety", "log matching", "leader completeness",
                              "election safety", "commit index went back")):
        return "divergence"
    return "other_violation"


def _sim_from(e: BaseException) -> Simulator | None:
    tb = e.__traceback__
    found = None
    while tb is not None:
        s = tb.tb_frame.f_locals.get("s")
        if isinstance(s, Simulator):
            found = s
        tb = tb.tb_next
    return found


def failure_of(seed: int, ops: list[Op]) -> str | None:
    """The failure kind of an explicit program (None if it runs clean)."""
    try:
        disk_program(seed, ops=ops).close()
    except RestartRefused:
        return "refused_restart"
    except InvariantViolation as e:
        return _classify(str(e))
    except Exception as e:
        return f"other_error:{type(e).__name__}"
    return None


def shrink(seed: int, rounds: int) -> list[Op]:
    """Delta debugging over the seed's program: drop chunks of operations while it still
    fails the same way; the result replays with `disk_program(seed, ops=...)`."""
    n = 3 if seed % 3 else 5
    ops = disk_ops(seed, n, rounds)
    kind = failure_of(seed, ops)
    if kind is None:
        raise SystemExit(f"seed {seed} does not fail")
    chunk = len(ops) // 2
    while chunk >= 1:
        i = 0
        while i < len(ops):
            cand = ops[:i] + ops[i + chunk:]
            if failure_of(seed, cand) == kind:
                ops = cand
            else:
                i += chunk
        chunk //= 2
    return ops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000, help="simulator steps to run at least")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=DISK_ROUNDS * 2)
    ap.add_argument("--json", help="write the counts and failures here")
    ap.add_argument("--shrink", type=int, metavar="SEED",
                    help="print a failing seed's shrunk program")
    ap.add_argument("--end-to-end-only", action="store_true",
                    help="no durability check at restart: only Raft/state-machine/ack checks")
    args = ap.parse_args(argv)
    if args.shrink is not None:
        ops = shrink(args.shrink, args.rounds)
        print(f"seed {args.shrink}: {failure_of(args.shrink, ops)}\nops = {ops!r}")
        return 0
    c = Campaign(check_durability=not args.end_to_end_only)
    seed = args.first_seed
    t0 = time.monotonic()
    while c.counts["steps"] < args.steps:
        c.run(seed, args.rounds)
        seed += 1
    out = {
        "seeds": [args.first_seed, seed - 1],
        "seconds": round(time.monotonic() - t0, 1),
        "counts": dict(sorted(c.counts.items())),
        "failures": c.failures[:50],
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
