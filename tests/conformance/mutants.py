"""Mutation check: seeded bugs the conformance harness must catch (`tox -e mutants`).

    python -m tests.conformance.mutants [NAME ...] [--keep]

Each mutant is a small text patch to the implementation's source, applied to a COPY of the
tree (impl/, model/, tests/) in a temp directory, so the real code is what is mutated; the
harness (the `mutants` Hypothesis profile, derandomized, no Spark) and the pinned regression
programs then run against the copy. A mutant is killed when a test fails with an assertion
(not an import or syntax error). The unmutated copy must pass first. Last line:
`mutants killed: K/N`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proofs.mutants import Mutant, patch  # one mutant format for the model and the harness

ROOT = Path(__file__).resolve().parents[2]


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "F1-phantom-bump",
        "fence lower end not raised by previous_applied, and no apply-time check",
        "impl/partition/fence.py",
        "r = fence(before, self.sm.state, term, epoch, self.variant)",
        "r = fence(before, self.sm.state, term, epoch,"
        " replace(self.variant, fence_lo_from_applied=False))",
        (
            ("impl/partition/fence.py", "from dataclasses import dataclass",
             "from dataclasses import dataclass, replace"),
            ("impl/partition/statemachine.py",
             "applied = mp.apply_placeholder(s, cmd.epoch, entry.index, self.variant)",
             "applied = mp.apply_placeholder(s, cmd.epoch, entry.index,"
             " replace(self.variant, apply_time_check=False))"),
            ("impl/partition/statemachine.py", "from dataclasses import asdict, dataclass, field",
             "from dataclasses import asdict, dataclass, field, replace"),
        ),
    ),
    Mutant(
        "F3-out-of-order-landing",
        "the shared lock is released right after the fence decision (so a slide can overtake"
        " an in-window write before it proposes) and the window is not checked at apply",
        "impl/partition/statemachine.py",
        "applied = mp.apply_placeholder(s, cmd.epoch, entry.index, self.variant)",
        "applied = mp.apply_placeholder(s, cmd.epoch, entry.index,"
        " replace(self.variant, apply_time_check=False))",
        (("impl/partition/statemachine.py", "from dataclasses import asdict, dataclass, field",
          "from dataclasses import asdict, dataclass, field, replace"),
         ("impl/partition/fence.py", "        term = await self.admit(ph.epoch)\n",
          "        term = await self.admit(ph.epoch)\n        self.lock.release(SHARED)\n"),
         ("impl/partition/fence.py", "        finally:\n            self.lock.release(SHARED)\n",
          "        finally:\n            pass\n")),
    ),
    Mutant(
        "F2-untermed-seen",
        "the seen window is not scoped to a term (and so never forgotten)",
        "impl/partition/fence.py",
        "self.variant = variant\n",
        "self.variant = replace(variant, term_scoped_seen=False)\n",
        (("impl/partition/fence.py", "from dataclasses import dataclass",
          "from dataclasses import dataclass, replace"),),
    ),
    Mutant(
        "F4-skip-missing",
        "a partition absent from the health reports is skipped instead of blocking GC",
        "impl/gc/reports.py",
        "return gc_epoch(self.revision, list(self.partitions), reports)",
        "return gc_epoch(self.revision,"
        " [p for p in self.partitions if any(r.partition == p and r.inactive_epoch is not None"
        " for r in reports)], reports)",
    ),
    Mutant(
        "F4-no-revision-cap",
        "M is not capped at the partition snapshot's revision",
        "impl/gc/reports.py",
        "return gc_epoch(self.revision, list(self.partitions), reports)",
        "return gc_epoch(10**17, list(self.partitions), reports)",
    ),
    Mutant(
        "F5-watermark-from-max",
        "M(p) computed from max_applied_epoch (ignores reconciler progress)",
        "impl/partition/statemachine.py",
        "return mp.inactive_epoch(self.state, self.variant)",
        "return None if self.state.max_applied_epoch is None"
        " else self.state.max_applied_epoch - 1",
    ),
    Mutant(
        "eligibility-off-by-one",
        "GC eligibility compares epoch <= M + 1",
        "impl/cluster/gcround.py",
        "e = gc_eligible(info.key, info.age(now), ge.M, grace_s)",
        "e = gc_eligible(info.key, info.age(now), ge.M + 1, grace_s)",
    ),
    Mutant(
        "seen-not-forgotten",
        "the seen window is not forgotten on loss of leadership (R8)",
        "impl/partition/fence.py",
        "            self.seen = None\n",
        "            pass\n",
    ),
    Mutant(
        "reconciler-lro-before-durable",
        "the reconciler replicates advance_reconciled before the L1 object is durable",
        "impl/broker/reconciler.py",
        "    await io(functools.partial(store.put, key, encode_records(records)))"
        "  # durable first\n"
        "    await fence.replicate_command(\n"
        "        AdvanceReconciled(last, pending[-1].log_index, key, base, last - base + 1)\n"
        "    )\n",
        "    await fence.replicate_command(\n"
        "        AdvanceReconciled(last, pending[-1].log_index, key, base, last - base + 1)\n"
        "    )\n"
        "    await io(functools.partial(store.put, key, encode_records(records)))\n",
    ),
    # --- harness-checks mutants ---
    # Issue 16's checks: each description ends with the check that kills it.
    Mutant(
        "restore-loses-floor",
        "partition snapshot restore sets the floor to previous_applied (loses a floor below"
        " it after unreconciled slides) [check: restore(snapshot()) == state]",
        "impl/partition/statemachine.py",
        'state = mp.PartitionState(**doc["state"])',
        'state = mp.PartitionState(**{**doc["state"], "min_epoch_lower_bound":'
        ' doc["state"]["previous_applied_epoch"]})',
    ),
    Mutant(
        "restore-loses-unreconciled",
        "partition snapshot restore drops the unreconciled placeholders list"
        " [check: restore(snapshot()) == state]",
        "impl/partition/statemachine.py",
        'self.placeholders = [AcceptedPlaceholder(**p) for p in doc["placeholders"]]',
        "self.placeholders = []",
    ),
    Mutant(
        "placeholder-without-fence-term",
        "a placeholder is proposed without its fence's term (no expected-term)"
        " [check: landed term == fence term]",
        "impl/partition/fence.py",
        "fut = self.raft.propose(c.encode(ph), term)",
        "fut = self.raft.propose(c.encode(ph), None)",
    ),
    Mutant(
        "epoch-cache-ahead",
        "the broker's epoch cache reads one ahead of the controller [check: A3]",
        "impl/controller/epochcache.py",
        "            self._value = self._fetch()\n",
        "            self._value = self._fetch() + 1\n",
    ),
    Mutant(
        "stamp-without-creation-floor",
        "the producer stamps the cached epoch without the creation-revision floor"
        " [check: A2]",
        "impl/broker/producer.py",
        "stamp = max(stamp, await self.cluster.creation_revision(p))",
        "await self.cluster.creation_revision(p)",
    ),
    Mutant(
        "housekeep-lrlo-past-placeholder",
        "housekeeping moves LRLO to the last applied index, past unreconciled placeholders"
        " [check: A4]",
        "impl/partition/statemachine.py",
        "return pending[0].log_index - 1 if pending else self.last_index",
        "return self.last_index",
    ),
    Mutant(
        "slide-skips-shared-holders",
        "the shared lock is released right after the fence decision (a slide no longer waits"
        " for in-window writes); the apply-time check is kept"
        " [check: apply-time rejection in the fence's term is a divergence]",
        "impl/partition/fence.py",
        "        finally:\n            self.lock.release(SHARED)\n",
        "        finally:\n            pass\n",
        (("impl/partition/fence.py", "        term = await self.admit(ph.epoch)\n",
          "        term = await self.admit(ph.epoch)\n        self.lock.release(SHARED)\n"),),
    ),
    Mutant(
        "apply-rejection-acked",
        "an apply-time rejection is returned to the producer as an acknowledgement"
        " [check: apply-time rejection in the fence's term is a divergence]",
        "impl/partition/fence.py",
        "        if not res.accepted:\n"
        '            raise StaleEpoch(ph.epoch, res.window, "apply")\n',
        "",
    ),
    Mutant(
        "scan-stops-at-young-epoch-m",
        "the GC listing stops at the first too-young key whose epoch equals M (older epoch-M"
        " keys after it are never collected) [check: in-process GC round, eligible set =="
        " model's]",
        "impl/gc/scan.py",
        "elif epoch_collectible(parse_key(obj.key).epoch, m):",
        "elif parse_key(obj.key).epoch < m:",
    ),
    Mutant(
        "delete-ignores-m-backwards",
        "the re-check before deleting ignores M moving backwards [check: in-process GC round"
        " with reports republished lower, deleted set == model's]",
        "impl/gc/recheck.py",
        "if again.M is None or m > again.M:",
        "if again.M is None:",
    ),
    Mutant(
        "host-completes-overwritten-proposal",
        "the Raft host completes a pending proposal with whatever entry lands at its index"
        " (another term's) [check: tests/raft/test_host_deposed.py]",
        "impl/raft/host.py",
        "                if p.term == e.term:\n",
        "                if True:\n",
    ),
    # --- end harness-checks mutants ---
)


def make_copy(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for d in ("impl", "model", "tests"):
        shutil.copytree(ROOT / d, dest / d, ignore=ignore)
    (dest / "build").mkdir()


def run_tests(root: Path, timeout: float) -> tuple[int, str, float]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(root), EPOCHGC_CONFORMANCE_PROFILE="mutants",
               EPOCHGC_CONFORMANCE_SPARK="0", PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "--rootdir", str(root), "-o", "addopts=",
           "tests/conformance/test_harness.py", "tests/conformance/test_regressions.py"]
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "timeout", time.monotonic() - t
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t


def _reason(out: str) -> str:
    for pat in (r"(Divergence: [^\n]*)", r"(InvariantViolation: [^\n]*)",
                r"(AssertionError[^\n]*)", r"^E\s+(\S[^\n]*)"):
        m = re.search(pat, out, re.M)
        if m:
            return m.group(1)[:240]
    return "(no assertion message)"


def _failed_test(out: str) -> str:
    m = re.search(r"FAILED (\S+)", out)
    return m.group(1) if m else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="run only these mutants")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--keep", action="store_true", help="keep the temp copies")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    base = Path(tempfile.mkdtemp(prefix="epochgc-mutants-"))
    try:
        clean = base / "clean"
        make_copy(clean)
        code, out, secs = run_tests(clean, args.timeout)
        if code != 0:
            print(out[-3000:])
            print(f"the unmutated copy fails (exit {code}); fix that first")
            print(f"mutants killed: 0/{len(chosen)}")
            return 2
        print(f"baseline: unmutated copy passes ({secs:.0f}s)", flush=True)
        killed = 0
        for m in chosen:
            root = base / m.name
            make_copy(root)
            patch(root, m)
            code, out, secs = run_tests(root, args.timeout)
            ok = code == 1 and "FAILED" in out
            killed += ok
            verdict = "KILLED " if ok else ("TIMEOUT" if code == -1 else "SURVIVED")
            by = f" by {_failed_test(out)}: {_reason(out)}" if ok else f" (exit {code})"
            print(f"{verdict} {m.name} [{m.what}] {secs:.0f}s{by}", flush=True)
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        print(f"mutants killed: {killed}/{len(chosen)}")
        return 0 if killed == len(chosen) else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
