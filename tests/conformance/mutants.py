"""Mutation check: seeded bugs the conformance harness must catch (`tox -e mutants`).

    python -m tests.conformance.mutants [NAME ...] [-j N] [--keep] [--list]

Each mutant is a small text patch to the implementation's source, applied to a COPY of the
tree (impl/, model/, tests/, proofs/) in a temp directory by the shared driver
`proofs.mutate`, so the real code is what is mutated; the harness (the `mutants` Hypothesis
profile, derandomized, no Spark), the pinned regression programs, the issue-16 implementation
checks and any test file the mutant's check names then run against the copy. A mutant is
killed only when a test fails with an assertion-family exception (AssertionError, Divergence,
InvariantViolation, recorded per failure by `proofs.pytest_failrecord`); a failure with any
other exception, or a timeout, is an `error`, not a kill. Each mutant names its check (a regex
over "test id: ExcType: message"); a kill by another check is flagged MISMATCH. The unmutated
copy must pass first. Mutants run in parallel (`-j`, default 2). Last line:
`mutants killed: K/N`.

`--suite` (issue 31) counts what CI counts: each mutant's copy runs the CI test suite
(pytest, the `ci` conformance profile, Spark off) instead of the mutants profile, and the
table names the first failing test (`-x`) and its level (harness, conformance, unit), so a
class the harness misses but a unit test catches shows as such. `--tests all` runs the
whole non-Spark suite on every mutant (a long run: a later session's); `--tests relevant`
(the default with --suite) runs the test directories of the mutated component plus the
files the mutant's check names; `--tests a.py,b/` runs exactly those. A failure counts as a
kill when its exception is assertion-family or one of `DETECTIONS` (a check's own verdict
that is not an AssertionError, e.g. the disk fuzzers' StorageCorruption).

`--suite --select coverage` makes the whole suite feasible: each mutant runs only the tests
that execute its edited function (every test when the edit runs at import), from the index
that `python -m tests.conformance.mutants_select collect` takes in one run of the suite under
coverage, fastest and most likely first, stopping at its first kill; an edit no test executes
is `not covered` (a survivor). Method, limits and the measured table: docs/mutants-suite.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from epochgc.proofs.mutate import (
    Mutant,
    Outcome,
    RunResult,
    Verdict,
    campaign,
    format_table,
    run_command,
)
from tests.conformance import mutants_covplugin as covplugin
from tests.conformance import mutants_select as selection
from tests.impl.lockmutants import LOCK_MUTANTS

ROOT = Path(__file__).resolve().parents[2]


# The fence releases a write's shared lock right after its admission, before the write is
# queued into Raft (so before any delay between its fence and its propose): the edits F3 and
# `slide-skips-shared-holders` share. (path, old, new) each.
RELEASE_AT_ADMISSION: tuple[tuple[str, str, str], ...] = (
    ("impl/partition/fence.py", "        term = await self.admit(ph.epoch)\n",
     "        term = await self.admit(ph.epoch)\n        self.lock.release(SHARED)\n"),
    ("impl/partition/fence.py", "        held = True\n", "        held = False\n"),
    ("impl/partition/fence.py",
     "                held = False\n                self.lock.release(SHARED)\n",
     "                held = False\n"),
)

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
            ("impl/partition/statemachine.py", "from dataclasses import dataclass, field, fields",
             "from dataclasses import dataclass, field, fields, replace"),
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
        (("impl/partition/statemachine.py", "from dataclasses import dataclass, field, fields",
          "from dataclasses import dataclass, field, fields, replace"),
         *RELEASE_AT_ADMISSION),
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
        "stamp = max(stamp, crev)",
        "stamp = stamp  # the creation-revision floor dropped",
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
        *RELEASE_AT_ADMISSION[0],
        RELEASE_AT_ADMISSION[1:],
    ),
    Mutant(
        "propose-queue-reorders",
        "[release at enqueue] a proposal queue in front of the Raft log: `propose` returns"
        " at once and each loop turn's proposals reach Raft latest first, so the fence"
        " releases before its placeholder is in the log and a slide queued after it lands"
        " first (breaks GroupRaft.propose's in-term order contract)"
        " [check: a queued write is in the leader's log / every burst write accepted]",
        "impl/broker/raftport.py",
        "    def propose(self, data: bytes, expected_term: int | None) -> asyncio.Future[Any]:\n"
        "        return self.port.propose(self.group, data, expected_term=expected_term)\n",
        "    def propose(self, data: bytes, expected_term: int | None) -> asyncio.Future[Any]:\n"
        "        loop = asyncio.get_running_loop()\n"
        "        out: asyncio.Future[Any] = loop.create_future()\n"
        "        batch = self.__dict__.setdefault('_batch', [])\n"
        "        def settle(inner: Any, f: Any) -> None:\n"
        "            if inner.exception() is not None:\n"
        "                f.set_exception(inner.exception())\n"
        "            else:\n"
        "                f.set_result(inner.result())\n"
        "        def flush() -> None:\n"
        "            todo = list(batch)\n"
        "            batch.clear()\n"
        "            for d, t, f in reversed(todo):\n"
        "                try:\n"
        "                    inner = self.port.propose(self.group, d, expected_term=t)\n"
        "                except Exception as e:\n"
        "                    f.set_exception(e)\n"
        "                    continue\n"
        "                inner.add_done_callback(lambda i, f=f: settle(i, f))\n"
        "        if not batch:\n"
        "            loop.call_soon(flush)\n"
        "        batch.append((data, expected_term, out))\n"
        "        return out\n",
        check=r"tests/impl/test_release_at_enqueue.py::.*release-at-enqueue",
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
        "recheck-blocked-reported-refused",
        "a task whose re-read before deleting finds the round blocked reports it as refused"
        " (M moved back): the job's round exits 1, not 2, and `epochgc demo` fails [check:"
        " in-process GC round with a partition created mid-round, stop == model's]",
        "impl/gc/recheck.py",
        'return Blocked(f"on re-check before deleting: {again.blocked}")',
        'return Refused(f"on re-check before deleting: {again.blocked}")',
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
    # Raft core, disk log, controller, health reports: bugs the harness's Raft invariants,
    # divergence checks and the disk crash tests must catch.
    Mutant(
        "raft-append-ignores-prev-term",
        "a follower accepts an append whose previous entry's term does not match (only the"
        " index is checked)",
        "impl/raft/raftlog.py",
        "        if not self.match_term(prev_index, prev_term):\n            return None\n",
        "        if self.term(prev_index) is None:\n            return None\n",
        # The harness's random programs stopped reaching it once the deletion rules and the
        # held-write early exit changed the schedule (it survived 200 x 50): a directed test.
        check=r"tests/raft/test_node.py::(test_follower_rejects_append_whose_previous_entry"
              r"|test_figure7_leader_brings_every_follower_log_in_line)",
    ),
    Mutant(
        "disklog-sync-skips-segment-fsync",
        "the disk log's sync fsyncs the directory but not the live segment. Two checks"
        " detect it, both real: the simulator's durability invariant (an acknowledged"
        " entry lost at a power loss), and the node's own recovery refusing the disk it"
        " left (`RestartRefused` from the disk log's StorageCorruption: \"hard state of"
        " term 0 is below the term 1 of the log's last entry\", the hard state record lost"
        " with the unsynced bytes while an entry after it was kept; an outage Raft must"
        " never need). Which fires first depends on the program: the pinned"
        " compaction-and-power-loss regression reaches the refused restart first",
        "impl/raft/disklog.py",
        "            if self._unsynced:\n                self.fs.fsync(self._fd)\n",
        "            if False:\n                self.fs.fsync(self._fd)\n",
        check=r"InvariantViolation: durability|RestartRefused: .*StorageCorruption",
    ),
    Mutant(
        "controller-restore-loses-epoch",
        "the controller's snapshot restore takes the epoch from the revision",
        "impl/controller/statemachine.py",
        '        self.epoch = int(doc["epoch"])\n',
        '        self.epoch = int(doc["revision"])\n',
        check=r"controller restore\(snapshot\(\)\) != state|A3",
    ),
    Mutant(
        "health-age-trusts-writer-clock",
        "a health report's age comes from its writer's clock only (a lagging clock keeps a"
        " stale report fresh)",
        "impl/gc/reports.py",
        "return max(now - written_at, now - stored_at)",
        "return now - written_at",
        check=r"tests/gc/test_reports.py",
    ),
    Mutant(
        "health-document-m-plus-one",
        "the health document serializes each replica's M(p) one too high",
        "impl/broker/health.py",
        '"inactive_epoch": r.inactive_epoch,',
        '"inactive_epoch": None if r.inactive_epoch is None else r.inactive_epoch + 1,',
        check=r"Divergence|InvariantViolation",
    ),
    Mutant(
        "reader-ignores-incarnation",
        "the GC reader counts a fresh report of a deleted incarnation for the re-created one"
        " [check: R35, tests/conformance/test_lifecycle.py]",
        "impl/gc/reports.py",
        "if incarnation.get(r.partition, crev) == crev",
        "if True",
        check=r"tests/conformance/test_lifecycle.py|Divergence",
    ),
    Mutant(
        "epochcache-invalidate-keeps-value",
        "invalidate() keeps the cached epoch (served again until its TTL runs out)",
        "impl/controller/epochcache.py",
        "        self._value = None\n        self._frozen = False\n",
        "        self._frozen = False\n",
        check=r"tests/impl/test_units.py::test_epoch_cache_ttl_lag_invalidate",
    ),
    Mutant(
        "gc-delete-bytes-count-failures",
        "the delete phase counts the bytes of keys whose delete failed as deleted",
        "impl/gc/delete.py",
        "stats.bytes_deleted += sum(s for k, s, _, _ in batch if k not in kept)",
        "stats.bytes_deleted += sum(s for k, s, _, _ in batch)",
        check=r"tests/gc/test_scan.py::test_delete_keys_batches_and_counts_errors",
    ),
    Mutant(
        "gc-manifest-lists-failed-deletes",
        "the journal read-back counts keys whose delete failed as deleted (so does the"
        " manifest)",
        "impl/gc/journal.py",
        "            if key in errors:\n",
        "            if False:\n",
        check=r"tests/gc/test_record.py",
    ),
    # Raft commit rules: the harness's random programs reach these rarely (the heartbeat one
    # was killed at 60 x 40 but not at 200 x 50), so each names a directed scenario test of
    # the pure core.
    Mutant(
        "raft-heartbeat-commit-uncapped",
        "the leader's heartbeat carries its commit index, not capped at the follower's match",
        "impl/raft/node.py",
        "commit = min(self.prs[v].match, self.log.committed)",
        "commit = self.log.committed",
        check=r"tests/raft/test_node.py::test_heartbeat_never_commits_a_followers_stale_entries",
    ),
    Mutant(
        "raft-append-commit-past-shared",
        "a follower commits up to its own last index, past what the append proved it shares",
        "impl/raft/raftlog.py",
        "        self.commit_to(min(commit, last_new))\n",
        "        self.commit_to(min(commit, self.last_index()))\n",
        check=r"tests/raft/test_node.py::test_follower_commit_is_min_of_leader_commit",
    ),
    Mutant(
        "raft-commit-by-counting-old-term",
        "the leader commits an entry of an earlier term by counting replicas (Raft Figure 8)",
        "impl/raft/raftlog.py",
        "if index > self.committed and self.term(index) == term:",
        "if index > self.committed and self.term(index) is not None:",
        check=r"tests/raft/test_node.py::test_figure8_old_term_entry_commits_only_with",
    ),
    # --- issue 13: partition deletion and re-creation (SPEC R32-R35) ---
    Mutant(
        "recreate-keeps-old-revision",
        "a re-created partition takes its deleted incarnation's creation revision",
        "impl/controller/statemachine.py",
        "                self.partitions[name] = PartitionInfo(name, self.revision)",
        "                old = [d.creation_revision for d in self.deleted.values()"
        " if d.name == name]\n"
        "                self.partitions[name] = PartitionInfo(name, max(old) if old"
        " else self.revision)",
        check=r"tests/impl/test_lifecycle_sim.py::test_controller_delete_has_its_own_revision",
    ),
    Mutant(
        "snapshot-keeps-deleted",
        "the published partition snapshot still lists deleted partitions (their stale or"
        " missing reports keep counting)",
        # In the publisher, with the deleted incarnation's revision as its `created`, so
        # the document stays well-formed and the old reports match it (a patch of the table
        # alone only made publishing fail, which no check saw: it survived).
        "impl/controller/publisher.py",
        "    created = {n: sm.partitions[n].creation_revision for n in names}",
        "    gone = {d.name: d.creation_revision for d in sm.deleted.values()"
        " if d.name not in sm.partitions}\n"
        "    names = sorted({*names, *gone})\n"
        "    created = {n: sm.partitions[n].creation_revision if n in sm.partitions"
        " else gone[n] for n in names}",
        check=r"tests/conformance/test_lifecycle.py::.*R32: the snapshot",
    ),
    Mutant(
        "write-to-deleted-accepted",
        "a replica learns of its partition's deletion only when the deferred sync runs, so a"
        " placeholder applied in the same batch as the deletion is accepted and acked",
        "impl/broker/broker.py",
        "            if not self._current(rep.info):\n                rep.sm.deleted = True\n"
        "        # Called",
        "            pass\n        # Called",
        check=r"tests/impl/test_lifecycle_sim.py::test_replica_refuses_from_the_moment",
    ),
    Mutant(
        "apply-ignores-deleted",
        "a deleted partition's state machine still accepts placeholders at apply",
        "impl/partition/statemachine.py",
        "        if self.deleted:\n            # The partition is gone",
        "        if False:\n            # The partition is gone",
        check=r"tests/impl/test_lifecycle_sim.py::test_apply_refuses_placeholders",
    ),
    Mutant(
        "fence-ignores-creation-revision",
        "the fence admits an epoch below the partition's creation revision (an earlier"
        " incarnation's write reaches the re-created partition's log)",
        "impl/partition/fence.py",
        "            if epoch < self.sm.creation_revision:  # A2",
        "            if False:  # A2",
        check=r"tests/conformance/test_lifecycle.py::.*(A2 on|replica state on node)",
    ),
    Mutant(
        "empty-table-not-published",
        "the controller skips publishing an empty partition table (the old snapshot, listing"
        " deleted partitions without reports, blocks GC: stranded objects stay forever)",
        "impl/controller/publisher.py",
        "    doc = partitions_document(sm)\n",
        "    if not sm.partitions:\n        return sm.revision\n"
        "    doc = partitions_document(sm)\n",
        check=r"tests/impl/test_lifecycle_sim.py::test_every_partition_deleted",
    ),
)

# Issue 31: a second reviewer's classes, each with several seeded bugs of our own; every
# description names its class, and `check` the check meant to kill it.
LIVENESS = r"liveness: "
MUTANTS += (
    # -- liveness: something started never finishes once the faults stop --
    Mutant(
        "remove-group-leaves-proposals-pending",
        "[liveness] removing a deleted partition's group drops its pending proposals without"
        " failing them: a write in the log when its partition is deleted never completes",
        "impl/raft/host.py",
        "        for p in pending.values():\n"
        "            p._finish(None, GroupRemoved(f\"group {group_id} removed\"))\n",
        "        pass\n",
        check=LIVENESS,
    ),
    Mutant(
        "fence-term-moved-keeps-lock",
        "[liveness] a fence whose term moved while it waited for the lock retries without"
        " releasing it (the lock is never free again)",
        "impl/partition/fence.py",
        "            if self.raft.term() != term or not self.raft.is_leader():\n"
        "                self.lock.release(mode)\n                continue\n",
        "            if self.raft.term() != term or not self.raft.is_leader():\n"
        "                continue\n",
        check=LIVENESS,
    ),
    Mutant(
        "fence-stale-under-lock-keeps-lock",
        "[liveness] a fence whose epoch fell below the window while it waited for the lock"
        " is refused without releasing the lock",
        "impl/partition/fence.py",
        "            if not d.admitted:\n                self.lock.release(mode)\n"
        "                self._report(d)\n",
        "            if not d.admitted:\n                self._report(d)\n",
        check=LIVENESS,
    ),
    Mutant(
        "fence-lock-kept-on-failed-replicate",
        "[liveness] replicate_placeholder releases its shared lock only when the replicate"
        " succeeds: a failed one keeps it forever (with release at enqueue, a failure before"
        " the placeholder is queued: an injected fault after the fence, a refused proposal;"
        " the harness's liveness check finds the held lock, and the pinned phantom program"
        " no longer reaches its shape, the slide behind the lock never happening)",
        "impl/partition/fence.py",
        "        finally:\n            if held:\n                self.lock.release(SHARED)\n"
        "        assert isinstance(res, PlaceholderResult)\n",
        "        except BaseException:\n            raise\n        if held:\n"
        "            self.lock.release(SHARED)\n"
        "        assert isinstance(res, PlaceholderResult)\n",
        check=LIVENESS + r"|test_found_apply_time_rejection_after_phantom_then_delete_while_"
        r"writing: AssertionError",
    ),

)

# -- identity across a partition's lifecycle --
HARNESS = r"tests/conformance/test_harness.py"
MUTANTS += (
    Mutant(
        "producer-retry-follows-recreate",
        "[identity] the producer's retry does not check that its partition is still the"
        " incarnation its first attempt was for: acknowledged into the re-created partition",
        "impl/broker/producer.py",
        "                    if incarnation.setdefault(p, crev) != crev:\n",
        "                    if incarnation.setdefault(p, crev) != crev and False:\n",
        check=r"tests/conformance/test_shapes.py|R35: acknowledged .* a retry moved",
    ),
    Mutant(
        "controller-create-replaces-live",
        "[identity] the controller applies a create of an existing name as a new incarnation"
        " (a duplicate or retried create replaces a live partition)",
        "impl/controller/statemachine.py",
        "            if name not in self.partitions:  # creating an existing partition is a"
        " no-op\n",
        "            if True:\n",
        check=r"tests/conformance/test_shapes.py|replaced|duplicate create|racing creates",
    ),
    Mutant(
        "topic-match-by-bare-prefix",
        "[identity] a topic's partitions are matched by the bare topic name as a prefix"
        " (deleting topic t also deletes t2/0 and t-2/0)",
        "impl/controller/topics.py",
        "    names = [n for n in partitions if n.startswith(prefix) and"
        " n[len(prefix):].isdigit()]\n"
        "    return sorted(names, key=lambda n: int(n[len(prefix):]))\n",
        "    names = [n for n in partitions if n.startswith(topic) and"
        " n.rpartition('/')[2].isdigit()]\n"
        "    return sorted(names, key=lambda n: int(n.rpartition('/')[2]))\n",
        check=r"tests/conformance/test_shapes.py|delete_topic|create of (new|existing) topic",
    ),
    Mutant(
        "controller-restore-drops-deleted",
        "[identity] the controller's snapshot restore drops the deleted incarnations",
        "impl/controller/statemachine.py",
        "                        for n, c, d in doc.get(\"deleted\", [])}",
        "                        for n, c, d in []}",
        check=r"controller restore\(snapshot\(\)\) != state|tests/impl/test_lifecycle_sim.py",
    ),
    Mutant(
        "controller-snapshot-omits-deleted",
        "[identity] the controller's snapshot leaves out the deleted incarnations",
        "impl/controller/statemachine.py",
        "            \"deleted\": [[d.name, d.creation_revision, d.deletion_revision]\n"
        "                        for _, d in sorted(self.deleted.items())],\n",
        "            \"deleted\": [],\n",
        check=r"controller restore\(snapshot\(\)\) != state",
    ),
    Mutant(
        "mint-tick-recreates-deleted",
        "[identity] the controller's mint tick re-creates a deleted initial partition",
        "impl/broker/broker.py",
        "                if name not in self.controller.partitions and not"
        " self.controller.ever_deleted(\n                    name\n                ):\n",
        "                if name not in self.controller.partitions:\n",
        check=r"tests/impl/test_mint_tick.py",
    ),
    # -- a new controller leader publishing before its own-term commit --
    Mutant(
        "publish-before-own-term-commit",
        "[publish] the controller leader publishes the partition table without having"
        " committed an entry of its own term (a stale table, M backwards)",
        "impl/broker/broker.py",
        "        if not (self.port.is_leader(CONTROLLER_GROUP)\n"
        "                and self.port.host.reads_current(CONTROLLER_GROUP)):\n",
        "        if not self.port.is_leader(CONTROLLER_GROUP):\n",
        check=(r"tests/conformance/test_shapes.py::test_a_new_controller_leader|went back"
               r"|revision"),
    ),
    Mutant(
        "reads-current-ignores-term",
        "[publish] reads_current does not require a commit of the leader's own term",
        "impl/raft/host.py",
        "        return log.term(log.committed) == g.node.term and g.applied >= log.committed\n",
        "        return g.applied >= log.committed\n",
        check=(r"tests/conformance/test_shapes.py::test_a_new_controller_leader|went back"
               r"|revision"),
    ),
    # -- the housekeeper's replicate outside the fence's exclusive lock --
    Mutant(
        "housekeeper-advance-under-shared-lock",
        "[housekeeper] advance_epoch is replicated under a shared lock taken directly (no"
        " exclusive wait for in-flight writes, no slide of the seen window)",
        "impl/broker/housekeeper.py",
        "            term = await fence.admit(target)\n",
        "            term = await fence.sync()\n            await fence.lock.acquire(SHARED)\n",
        check=r"apply-time rejection|landed|A4|Divergence|liveness"
              r"|tests/impl/test_release_at_enqueue.py::test_an_idle_partitions_advance",
    ),
    Mutant(
        "housekeeper-advance-without-lock",
        "[housekeeper] advance_epoch is replicated with no fence lock at all",
        "impl/broker/housekeeper.py",
        "            term = await fence.admit(target)\n",
        "            term = await fence.sync()\n",
        (("impl/broker/housekeeper.py",
          "            finally:\n                fence.lock.release(SHARED)\n",
          "            finally:\n                pass\n"),),
        check=r"apply-time rejection|landed|A4|Divergence|liveness"
              r"|tests/impl/test_release_at_enqueue.py::test_an_idle_partitions_advance",
    ),
    # -- checks on the wrong side of the fence's lock --
    Mutant(
        "fence-no-redecide-under-lock",
        "[lock-side] the fence decides only before waiting for the lock, not again under it"
        " (a window slid while it waited goes unnoticed)",
        "impl/partition/fence.py",
        "            if waited:  # the window may have moved while waiting: decide again\n"
        "                d = self._decide(term, epoch)\n",
        "",
        check=r"apply-time rejection|Divergence|fence|InvariantViolation",
    ),
    Mutant(
        "fence-term-checked-before-lock-only",
        "[lock-side] the fence checks its term only before waiting for the lock: a waiter"
        " woken in a new term admits with the old term's decision",
        "impl/partition/fence.py",
        "            if self.raft.term() != term or not self.raft.is_leader():\n"
        "                self.lock.release(mode)\n                continue\n",
        "            if False:\n                self.lock.release(mode)\n"
        "                continue\n",
        check=r"apply-time rejection|Divergence|fence|landed|liveness",
    ),
    # -- the GC job failing open (patched in a copy; impl/gc is not edited here) --
    Mutant(
        "gc-reread-error-ignored",
        "[gc-open] a task's re-read of the reports that fails is treated as 'go ahead': its"
        " deletes run on the driver's M",
        "impl/gc/stream.py",
        "                    verdict.append(again.result())\n",
        "                    try:\n                        verdict.append(again.result())\n"
        "                    except Exception:\n"
        "                        verdict.append(Go())\n",
        check=r"tests/conformance/test_shapes.py|GC deleted set differs|objects gone",
    ),
    Mutant(
        "gc-reports-from-subdirectories",
        "[gc-open] health reports are read from subdirectories of _cluster/health/ too",
        "impl/gc/reports.py",
        "        if \"/\" not in info.key[len(HEALTH_PREFIX) :] and info.key.endswith(\".json\")\n",
        "        if info.key.endswith(\".json\")\n",
        (("impl/gc/reports.py", "    if key != f\"{HEALTH_PREFIX}{node}.json\":",
          "    if not key.endswith(f\"/{node}.json\"):"),),
        check=r"tests/impl/test_gc_report_paths.py|tests/gc/",
    ),
    Mutant(
        "gc-last-batch-not-accounted",
        "[gc-open] the delete batches still in flight when the items end are never"
        " accounted (their errors dropped, the counts short)",
        "impl/gc/delete.py",
        "        for fut in pending:\n            account(fut)\n    return stats\n",
        "        pass\n    return stats\n",
        check=r"tests/gc/test_pools.py|tests/gc/test_gc_open.py",
    ),
    # -- the local store following links --
    Mutant(
        "store-get-follows-links",
        "[links] the local store opens an object for reading without O_NOFOLLOW",
        "impl/store/local.py",
        "_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK",
        "_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK",
        check=r"tests/store/test_local_safety.py|tests/gc/test_reports.py::.*link",
    ),
    Mutant(
        "store-dirs-follow-links",
        "[links] the local store opens directories without O_NOFOLLOW",
        "impl/store/local.py",
        "_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC",
        "_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC",
        check=r"tests/store/test_local_safety.py",
    ),
    Mutant(
        "store-scandir-follows-links",
        "[links] the local store's listing classifies a link to a directory as a directory",
        "impl/store/local.py",
        "                e.name + \"/\" if e.is_dir(follow_symlinks=False) else e.name: e\n",
        "                e.name + \"/\" if e.is_dir() else e.name: e\n",
        check=r"tests/impl/test_store_links.py",
    ),
    # -- the chaos checker's own blind spots --
    Mutant(
        "chaos-unreadable-replica-skipped",
        "[chaos] a replica whose log no longer loads is skipped instead of reported",
        "impl/chaos/checker.py",
        "                out.append(Divergence(gid, -1, (nid,), f\"log unreadable: {exc}\"))\n",
        "                pass\n",
        check=r"tests/impl/test_chaos_checker.py",
    ),
    Mutant(
        "chaos-commit-boundary-exclusive",
        "[chaos] the committed prefix stops before the commit index (the entry at it is"
        " never compared)",
        "impl/chaos/checker.py",
        "                if ent.index > commit:\n",
        "                if ent.index >= commit:\n",
        check=r"tests/impl/test_chaos_checker.py|tests/chaos/test_parts.py",
    ),
    Mutant(
        "chaos-commit-boundary-past",
        "[chaos] the committed prefix runs one entry past the commit index (an uncommitted"
        " difference is reported as a divergence)",
        "impl/chaos/checker.py",
        "                if ent.index > commit:\n",
        "                if ent.index > commit + 1:\n",
        check=r"tests/impl/test_chaos_checker.py|tests/chaos/test_parts.py",
    ),
)

# -- the GC job failing open, several per class (issue 31), beside the three above; mutation
# sites outside impl/gc/job.py and impl/gc/stage.py. Each names the check that kills it. --
MUTANTS += (
    # a lister error dropped
    Mutant(
        "gc-scan-list-error-ends-prefix",
        "[gc-open] a list request that fails ends its prefix's listing quietly (the round"
        " reports success with the rest of that prefix never listed)",
        "impl/gc/scan.py",
        "        page = store.list_page(path, start_after, page_size, until)\n",
        "        try:\n            page = store.list_page(path, start_after, page_size, until)\n"
        "        except StoreError:\n            return\n",
        (("impl/gc/scan.py", "from epochgc.impl.store.base import ObjectStore\n",
          "from epochgc.impl.store.base import ObjectStore, StoreError\n"),),
        check=(r"tests/gc/test_gc_open.py::test_a_listing_error_mid_prefix"
               r"|tests/gc/test_stream.py::test_a_lister_thread_error"
               r"|tests/conformance/test_shapes.py::test_a_gc_round_whose_listing_fails"
               r"|a lister error dropped"),
    ),
    Mutant(
        "gc-lister-thread-error-dropped",
        "[gc-open] a lister thread's error is dropped, not handed to the task (its prefixes"
        " end where the error struck)",
        "impl/gc/stream.py",
        "        except BaseException as e:  # handed to the consumer, which re-raises it\n"
        "            put(e)\n",
        "        except BaseException:\n            pass\n",
        check=r"tests/gc/test_stream.py::test_a_lister_thread_error",
    ),
    Mutant(
        "gc-health-list-error-as-empty",
        "[gc-open] a failed listing of the health reports reads as no reports (a store failure"
        " reported as a blocked round)",
        "impl/gc/reports.py",
        "        infos, refused = listing()\n"
        "    except StoreError as e:\n"
        "        raise ReportError(f\"cannot list {HEALTH_PREFIX}: {e}\") from e\n",
        "        infos, refused = listing()\n"
        "    except StoreError:\n        infos, refused = [], []\n",
        check=r"tests/gc/test_gc_open.py::test_a_health_listing_error",
    ),
    # a last batch not accounted
    Mutant(
        "gc-journal-drops-last-batch",
        "[gc-open] reading the journal back skips its last batch (the record's counts and"
        " manifest short of what was deleted)",
        "impl/gc/journal.py",
        "    for batch_id, items in sorted(intents.items()):\n",
        "    for batch_id, items in sorted(intents.items())[:-1]:\n",
        check=r"tests/gc/test_journal.py|tests/gc/test_gc_open.py|GC deleted set differs",
    ),
    Mutant(
        "gc-last-partial-batch-dropped",
        "[gc-open] the last, partial delete batch is never sent (nor journaled): eligible keys"
        " stay while the round reports done",
        "impl/gc/delete.py",
        "            batch = []\n    if batch:\n        yield batch\n",
        "            batch = []\n",
        check=(r"tests/gc/test_scan.py::test_delete_keys_batches|tests/gc/test_gc_open.py"
               r"|GC deleted set differs"),
    ),
    Mutant(
        "gc-journal-unfinished-not-resolved",
        "[gc-open] a batch an attempt never finished (intent, no outcome: killed mid-request)"
        " is not resolved against the store: its deletes are not accounted",
        "impl/gc/journal.py",
        "            totals.unfinished += 1\n"
        "            _resolve(data, items, totals, settled or batch_id not in open_batches)\n",
        "            totals.unfinished += 1\n",
        check=r"tests/gc/test_journal.py::test_the_journal_counts_every_attempt_once",
    ),
    Mutant(
        "gc-journal-absent-counted-deleted",
        "[gc-open] a key found absent at the read-back in a batch whose answer was never"
        " recorded (killed mid-request, a group's later requests never sent) is counted"
        " deleted by the round: another writer's removal attributed to it (rev38v finding 3)",
        "impl/gc/journal.py",
        "        totals.gone_unattributed.setdefault(key, value)\n",
        "        totals.deleted.setdefault(key, value)\n",
        check=(r"tests/gc/test_journal.py::test_the_journal_counts_every_attempt_once"
               r"|tests/gc/test_rev38v.py::test_a_key_another_writer_removed"),
    ),
    # a record written at the wrong moment
    Mutant(
        "gc-intent-after-delete",
        "[gc-open] a batch's intent is journaled after its delete request, not before (a task"
        " killed mid-request, or whose journal write fails, deleted keys no record accounts)",
        "impl/gc/delete.py",
        "            seq = (journal.intent([i for b in group for i in b], len(group))\n"
        "                   if journal is not None else 0)\n",
        "            seq = 0\n",
        (("impl/gc/delete.py",
          "        if journal is not None:\n"
          "            journal.done(seq, _merged(group, results),",
          "        seq = (journal.intent([i for b in group for i in b], len(group))\n"
          "               if journal is not None else 0)\n"
          "        if journal is not None:\n"
          "            journal.done(seq, _merged(group, results),"),),
        check=r"tests/gc/test_gc_open.py::test_a_batch_that_cannot_be_journaled",
    ),
    Mutant(
        "gc-done-before-request",
        "[gc-open] a batch's outcome is journaled before its delete request, as all deleted"
        " (failed deletes recorded as deleted)",
        "impl/gc/delete.py",
        "                   if journal is not None else 0)\n",
        "                   if journal is not None else 0)\n"
        "            if journal is not None:\n"
        "                journal.done(seq, DeleteResult(sum(map(len, group))), len(group))\n",
        (("impl/gc/delete.py",
          "            journal.done(seq, _merged(group, results), sum(r is not None for r in"
          " results))\n",
          "            pass\n"),),
        check=r"tests/gc/test_gc_open.py::test_the_outcome_record",
    ),
    # the driver's gate (issue 38): a "go" backed by a HEAD of STOP from its send, on
    # time through slow requests
    Mutant(
        "gc-watch-go-from-answer",
        "[gc-open] the gate's freshness counts from a HEAD of STOP's answer, not its send (a"
        " STOP written while the HEAD was in flight is covered by a later go)",
        "impl/gc/watch.py",
        "            self._clear_at = max(self._clear_at, sent)\n",
        "            self._clear_at = max(self._clear_at, self.monotonic())\n",
        check=(r"tests/gc/test_watch_slow_look.py::(test_a_go_rests_on_when_the_head_was_sent"
               r"|test_the_gate_stays_open_through_looks_on_a_store_answering_slowly\[61)"),
    ),
    Mutant(
        "gc-watch-stop-heads-in-looks-only",
        "[gc-open] STOP is HEADed only inside the looks (on a store answering in 30 s or"
        " more a healthy round stops watch-late)",
        "impl/gc/watch.py",
        "        if self.stop_key is not None:\n"
        "            self._threads.append(self.spawn(self._run_heads, \"epochgc-watch-stop\"))\n",
        "        pass\n",
        check=r"tests/gc/test_watch_slow_look.py::test_the_gate_stays_open_through_looks",
    ),
    # a live driver's END over a recovered one (review rev38o finding 3)
    Mutant(
        "gc-own-end-not-marked",
        "[gc-open] a driver taken for dead writes its END over the recovery's unmarked (a"
        " record PUT that then fails leaves the record 'killed' for good)",
        "impl/gc/recover.py",
        "    store.put(prefix + OWN_END, b\"{}\")  # before END: a crash after it leaves it\n",
        "",
        check=r"tests/gc/test_own_end.py|tests/gc/test_rev38o.py::test_a_live_driver_recording",
    ),
    # reports read from subdirectories
    Mutant(
        "gc-health-subdirectory-filter-dropped",
        "[gc-open] every .json below _cluster/health/ is read as a report, subdirectories"
        " too (an archived report fails the round)",
        "impl/gc/reports.py",
        "        if \"/\" not in info.key[len(HEALTH_PREFIX) :] and info.key.endswith(\".json\")\n",
        "        if info.key.endswith(\".json\")\n",
        check=(r"tests/gc/test_gc_open.py::test_a_report_in_a_subdirectory"
               r"|tests/impl/test_gc_report_paths.py"),
    ),
    # a failed re-read
    Mutant(
        "gc-reread-error-goes",
        "[gc-open] a task's re-read of M that fails returns 'go ahead': its deletes run on"
        " the driver's M",
        "impl/gc/stream.py",
        "    view = read_cluster_view(store, clock(), max_report_age_s, REPORT_READERS, expect,"
        " pool)\n",
        "    try:\n"
        "        view = read_cluster_view(store, clock(), max_report_age_s, REPORT_READERS,"
        " expect,\n                                 pool)\n"
        "    except Exception:\n        return Go()\n",
        check=(r"tests/gc/test_gc_open.py::test_a_reread_that_fails"
               r"|tests/conformance/test_shapes.py|GC deleted set differs|objects gone"),
    ),
    Mutant(
        "gc-recheck-no-m-goes",
        "[gc-open] a re-read that yields no M (nothing computable) lets the deletes go ahead",
        "impl/gc/recheck.py",
        "    if again.M is None or m > again.M:\n",
        "    if again.M is not None and m > again.M:\n",
        check=r"tests/conformance/test_implchecks.py::test_recheck_before_delete",
    ),
)

# -- issue 31's survivor, killed by a shape: the housekeeper's replicate failing while it
# holds the fence's lock --
MUTANTS += (
    Mutant(
        "housekeeper-lock-leak-on-failure",
        "[liveness] the housekeeper releases the fence's lock only when its advance_epoch"
        " replicates; a failed replicate (leadership lost) keeps it forever (killed by the"
        " shape housekeep_deposed_mid_replicate: its leader cut off and deposed while the"
        " advance_epoch is pending)",
        "impl/broker/housekeeper.py",
        "                await fence.replicate_command(AdvanceEpoch(target))\n"
        "                advanced = target\n"
        "            finally:\n                fence.lock.release(SHARED)\n",
        "                await fence.replicate_command(AdvanceEpoch(target))\n"
        "                advanced = target\n"
        "                fence.lock.release(SHARED)\n"
        "            finally:\n                pass\n",
        check=(r"tests/conformance/test_shapes.py::test_a_housekeeper_deposed"
               r"|liveness: "),
    ),
)

# -- issue 38: every write of the GC lease is conditional on the store itself --
MUTANTS += (
    Mutant(
        "lease-renewal-unconditional",
        "[lease] a renewal reads the lease, finds its own round and writes by name: a round"
        " that took the (expired) lease over between the read and the write is written over",
        "impl/gc/lease.py",
        "                other = self._rewrite(store, self._doc())\n",
        "                held = _parse(store.get_versioned(LEASE_KEY, _MAX_LEASE_BYTES))\n"
        "                if held is None or held.get('round') != self.round_id:\n"
        "                    return f'the GC lease was taken: {_refusal(held or {})}'\n"
        "                store.put(LEASE_KEY, self._doc())\n"
        "                other = None\n",
        check=r"tests/gc/test_lease_backends.py::test_a_renewal_never_writes_over",
    ),
    Mutant(
        "lease-release-unconditional",
        "[lease] a release reads the lease, finds its own round and marks it expired by name:"
        " a late release frees the lease another round took over in between",
        "impl/gc/lease.py",
        "                self._rewrite(store, self._doc(release=True))\n",
        "                held = _parse(store.get_versioned(LEASE_KEY, _MAX_LEASE_BYTES))\n"
        "                if held is not None and held.get('round') == self.round_id:\n"
        "                    store.put(LEASE_KEY, self._doc(release=True))\n",
        check=r"tests/gc/test_lease_backends.py::test_a_late_release_never_frees",
    ),
)

# Issue 42: the last survivors of the reviewers' sets, each killed by a directed test that
# fails on the seeded copy (the check names it).
MUTANTS += (
    Mutant(
        "fence-barrier-reused-across-terms",
        "[survivor] the fence's sync reuses a finished barrier of an earlier term: a leader"
        " re-elected after another leader's term decides on an applied state that may miss"
        " that term's committed slide (a write admitted, then refused at apply)",
        "impl/partition/fence.py",
        "if self._barrier is None or self._barrier[0] != term or (",
        "if self._barrier is None or (self._barrier[0] != term"
        " and not self._barrier[1].done()) or (",
        check=r"tests/impl/test_fence_sim.py::test_a_reelected_leader_syncs_on_a_barrier",
    ),
    Mutant(
        "barrier-promotion-off-by-one",
        "[liveness] an idle partition's pending barrier epoch is promoted only when LRLO may"
        " move PAST the barrier's command (R38: up to it): with the command the last entry,"
        " M(p) never rises (nothing unsafe happens; GC just stops making progress)",
        "impl/broker/barrier.py",
        "    return lrlo < off <= sm.housekeeping_lrlo()",
        "    return lrlo < off < sm.housekeeping_lrlo()",
        check=r"tests/impl/test_barrier_sim.py::test_an_idle_partitions_barrier|" + LIVENESS,
    ),
    Mutant(
        "crashstates-rename-durable-on-either-dir",
        "[explorer] the strict model treats a rename across directories as durable once"
        " EITHER directory is fsynced (POSIX: both); the undone-rename states go unexplored",
        "impl/raft/crashstates.py",
        "all(pos < r.dir_synced.get(d, -1) for d in op.dirs())",
        "any(pos < r.dir_synced.get(d, -1) for d in op.dirs())",
        check=r"tests/raft/test_crash_states.py::test_a_rename_across_directories",
    ),
    Mutant(
        "chaos-ok-ignores-gc-paused-deleted",
        "[chaos] a chaos run whose GC deleted while the operator had paused it passes"
        " (`ChaosResult.ok()` no longer looks at gc_paused_deleted)",
        "impl/chaos/run.py",
        "                and self.gc_paused_deleted == 0 and self.gc_final_failed == 0)",
        "                and self.gc_final_failed == 0)",
        check=r"tests/impl/test_chaos_checker.py::test_every_violation_count_fails_the_run",
    ),
    Mutant(
        "chaos-ok-ignores-gc-final-failed",
        "[chaos] a chaos run whose final GC round could not run passes (an outside tester's"
        " S3 run: a latched pause refused every round after `gc-admin start`, and 'OK')",
        "impl/chaos/run.py",
        "                and self.gc_paused_deleted == 0 and self.gc_final_failed == 0)",
        "                and self.gc_paused_deleted == 0)",
        check=r"tests/impl/test_chaos_checker.py::test_every_violation_count_fails_the_run",
    ),
    Mutant(
        "demo-gc-one-stop-for-every-round",
        "[gc] the demo's and chaos's GC rounds share one stop: a pause that stopped one round"
        " refuses every later round as paused, after `gc-admin start` too",
        "impl/cluster/demo_gc.py",
        "        stop = self._running = RoundStop()\n",
        "        stop = self._running = getattr(self, '_shared', None) or RoundStop()\n"
        "        self._shared = stop\n",
        check=r"tests/impl/test_demo_gc_rounds.py::test_a_round_a_pause_stopped_does_not_stop",
    ),
    Mutant(
        "conform-seq-bool-accepted",
        "[conform] the driver accepts a JSON boolean as an answer's sequence number"
        " (`\"seq\": true` for line 1: Python's True == 1)",
        "impl/conform/client.py",
        "type(seq) is not int",
        "not isinstance(seq, int)",
        check=r"tests/conform/test_conform.py::test_protocol_breakers_reported\[bool_seq",
    ),
    Mutant(
        "local-version-ignores-mtime",
        "[survivor] the local store's object version is (inode, size): an object rewritten"
        " in place with same-size bytes after it was listed is deleted by the conditional"
        " delete instead of being reported changed",
        "impl/store/local.py",
        'return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"',
        'return f"{st.st_ino}:{st.st_size}"',
        check=r"tests/gc/test_conditional.py::test_a_same_size_rewrite_in_place",
    ),
)

# Issue 42: every checker's own seeded bugs, each making it see less (fewer states, a skipped
# replica, a kinder comparison); each `check` names the test that fails when it does.
CRASH_COUNTS = r"tests/raft/test_crash_states.py::test_(every_workload|generated_workloads)"
MUTANTS += (
    # -- the crash-state explorer (impl/raft/crashstates.py, tests/raft/crashexplore.py);
    # crashstates-rename-durable-on-either-dir above is its fourth --
    Mutant(
        "crashstates-no-crash-after-last-op",
        "[explorer] crash_points stops before the crash after the trace's last operation"
        " (the state after a workload's final sync is never recovered)",
        "impl/raft/crashstates.py",
        "    for k in range(start, len(trace) + 1):\n",
        "    for k in range(start, len(trace)):\n",
        check=r"tests/raft/test_crash_states.py::test_crash_points_cut_inside_writes|"
              + CRASH_COUNTS,
    ),
    Mutant(
        "crashexplore-no-crash-inside-recovery",
        "[explorer] the crashes inside each recovery are never explored",
        "tests/raft/crashexplore.py",
        "                    if in_recovery and rv.init is not None and any(",
        "                    if False and rv.init is not None and any(",
        check=CRASH_COUNTS,
    ),
    Mutant(
        "crashexplore-dedupe-ignores-ground-truth",
        "[explorer] an image is checked once per model whatever the ground truth at its"
        " crash point (the same bytes reached before and after an acknowledgement are"
        " judged against the first truth only)",
        "tests/raft/crashexplore.py",
        "                key = (model, image.digest, tids)\n",
        "                key = (model, image.digest, ())\n",
        check=CRASH_COUNTS,
    ),
)

# -- the chaos checker (impl/chaos): beside its three of issue 31 and
# chaos-ok-ignores-gc-paused-deleted --
CHAOS_CHECKER = r"tests/impl/test_chaos_checker.py|tests/chaos/test_parts.py"
MUTANTS += (
    Mutant(
        "chaos-compare-by-term-only",
        "[chaos] committed entries are compared by term and type, not their bytes",
        "impl/chaos/checker.py",
        "setdefault((ent.term, ent.type, ent.data), [])",
        "setdefault((ent.term, ent.type, b\"\"), [])",
        check=r"tests/impl/test_chaos_checker.py::test_committed_entries_of_one_term",
    ),
    Mutant(
        "chaos-last-node-skipped",
        "[chaos] the last node's data directory is never read (a replica skipped)",
        "impl/chaos/checker.py",
        "    for nid, d in sorted(node_dirs.items()):\n",
        "    for nid, d in sorted(node_dirs.items())[:-1]:\n",
        check=CHAOS_CHECKER,
    ),
    Mutant(
        "chaos-ok-ignores-survived-disk-faults",
        "[chaos] a run in which a node survived a disk fault it should have died of passes",
        "impl/chaos/run.py",
        "and self.survived_disk_faults == 0\n",
        "and True\n",
        check=r"tests/impl/test_chaos_checker.py::test_every_violation_count_fails_the_run",
    ),
)

# -- the trace checker (impl/checktrace.py, `epochgc check-trace`) --
TRACE = r"tests/conformance/test_checktrace.py::"
MUTANTS += (
    Mutant(
        "checktrace-nodes-not-compared",
        "[trace] two nodes' commands at one log index are not compared (state-machine"
        " safety unchecked: the first node's command is replayed)",
        "impl/checktrace.py",
        "            if first[\"command\"] != r[\"command\"]:\n",
        "            if False:\n",
        check=TRACE + r"test_two_nodes_applying_different_commands",
    ),
    Mutant(
        "checktrace-apply-decision-not-compared",
        "[trace] a placeholder's accept/reject at apply is not compared with the model's"
        " (only the state after it)",
        "impl/checktrace.py",
        "if r[\"command\"][\"type\"] == \"placeholder\" and r[\"accepted\"] !="
        " decisions[r[\"index\"]]:",
        "if False:",
        check=TRACE + r"test_a_flipped_apply_decision",
    ),
    Mutant(
        "checktrace-fence-applied-unchecked",
        "[trace] a fence's applied state is not checked against the states the committed"
        " log's replay reaches (a fence may decide on a state that never existed)",
        "impl/checktrace.py",
        "if p in reached and applied not in reached[p]:",
        "if False:",
        check=TRACE + r"test_a_fence_on_an_applied_state",
    ),
    Mutant(
        "checktrace-fence-admitted-only",
        "[trace] a fence record is compared with the model's decision by `admitted` alone"
        " (its window and seen window never)",
        "impl/checktrace.py",
        "            got = (r[\"admitted\"], r[\"window\"], r[\"seen_after\"])\n"
        "            want_f = (m.admitted, m.window, m.seen)\n",
        "            got = (r[\"admitted\"],)\n            want_f = (m.admitted,)\n",
        check=TRACE + r"test_a_fence_window_the_model",
    ),
    Mutant(
        "checktrace-repeated-index-passes",
        "[trace] an index applied twice in one node run passes (only a lower one fails)",
        "impl/checktrace.py",
        "if r[\"index\"] <= last_index.get(key, 0):",
        "if r[\"index\"] < last_index.get(key, 0):",
        check=TRACE + r"test_an_index_applied_twice",
    ),
)

# -- the conform driver (impl/conform): beside conform-seq-bool-accepted --
CONFORM = r"tests/conform/test_conform.py::"
MUTANTS += (
    Mutant(
        "conform-claimed-variant-refusal-skipped",
        "[conform] a port that refuses the reset of the very variant it claims is skipped"
        " (as for a variant it does not implement) instead of failing",
        "impl/conform/driver.py",
        "if refused_reset and variant != claimed:",
        "if refused_reset:",
        check=CONFORM + r"test_variant_the_port_does_not_implement_is_skipped",
    ),
    Mutant(
        "conform-vectors-top-level-only",
        "[conform] --vectors replays only the top directory of spec/vectors (the solver's"
        " generated/ vectors never run)",
        "impl/conform/driver.py",
        "    return sorted(root.rglob(\"*.jsonl\"))\n",
        "    return sorted(root.glob(\"*.jsonl\"))\n",
        check=CONFORM + r"test_every_shipped_vector_file_is_replayed",
    ),
    Mutant(
        "conform-compare-extra-fields",
        "[conform] an answer with fields the model's lacks agrees (a subset comparison)",
        "impl/conform/compare.py",
        "    if answer.keys() != model.keys():\n",
        "    if not model.keys() <= answer.keys():\n",
        check=CONFORM + r"test_compare_wording_and_refusals",
    ),
    Mutant(
        "conform-compare-bool-is-int",
        "[conform] values are compared with Python's ==, so true agrees with 1",
        "impl/conform/compare.py",
        "        elif not json_equal(v, answer[k]):\n",
        "        elif v != answer[k]:\n",
        check=CONFORM + r"test_compare_wording_and_refusals",
    ),
)

# -- the conformance harness's own invariants (tests/conformance) --
HARNESS_CHECKS = r"tests/conformance/test_harness_checks.py::"
MUTANTS += (
    Mutant(
        "harness-fence-admitted-only",
        "[harness] a fence decision is compared with the model's by `admitted` alone (its"
        " window and seen window never)",
        "tests/conformance/shadow.py",
        "    got = (d.admitted, d.window, d.seen_after)  # type: ignore[attr-defined]\n"
        "    want = (r.admitted, r.window, r.seen)\n",
        "    got = (d.admitted,)  # type: ignore[attr-defined]\n    want = (r.admitted,)\n",
        check=HARNESS_CHECKS + r"test_a_fence_decision_is_compared_whole",
    ),
    Mutant(
        "harness-last-replica-skipped",
        "[harness] the per-step replica check skips the last node (a replica never compared"
        " with the model's replay)",
        "tests/conformance/refinement.py",
        "        for nid, b in sorted(self.c.brokers.items()):\n"
        "            for p, rep in b.replicas.items():\n"
        "                g = rep.info.group\n",
        "        for nid, b in sorted(self.c.brokers.items())[:-1]:\n"
        "            for p, rep in b.replicas.items():\n"
        "                g = rep.info.group\n",
        check=HARNESS_CHECKS + r"test_every_replica_is_compared",
    ),
    Mutant(
        "harness-rejection-always-excused",
        "[harness] an apply-time rejection of a placeholder its fence admitted in the same"
        " term is always excused (as if an injected fault explained it)",
        "tests/conformance/implchecks.py",
        "        if not accepted and (partition, cmd.key) not in self.explained:\n",
        "        if False:\n",
        check=HARNESS_CHECKS + r"test_an_unexplained_apply_time_rejection",
    ),
    Mutant(
        "harness-a4-boundary-exclusive",
        "[harness] A4 misses LRLO exactly at an unreconciled placeholder's log index",
        "tests/conformance/implchecks.py",
        "        if p.log_index <= lrlo and p.last > lro:\n",
        "        if p.log_index < lrlo and p.last > lro:\n",
        check=r"tests/conformance/test_implchecks.py::test_the_state_checks_fail_on_bad_states",
    ),
    Mutant(
        "harness-gc-progress-unchecked",
        "[harness] the liveness checks stop at a GC round that ends unblocked: GC that"
        " stops making progress (a barrier never promoted, M never rising) passes",
        "tests/conformance/liveness.py",
        "    check_gc_round_ends(h)\n    check_gc_progresses(h)\n",
        "    check_gc_round_ends(h)\n",
        check=r"tests/conformance/test_liveness.py::test_gc_that_stops_making_progress",
    ),
)

# -- the proof runner's row statuses (proofs/runner.py; its status logic only) --
STATUSES = r"tests/proofs/test_runner_statuses.py::"
MUTANTS += (
    Mutant(
        "runner-unknown-passes",
        "[proofs] a row the solver answered `unknown` does not fail the run",
        "proofs/runner.py",
        '_BAD = ("failed", "unknown")',
        '_BAD = ("failed",)',
        check=STATUSES + r"test_an_unknown_row_fails_the_run",
    ),
    Mutant(
        "runner-vacuous-reference-row-proved",
        "[proofs] a \"cannot break safety in reference\" row whose final gc_delete is never"
        " enabled is reported proved (vacuous) instead of failed",
        "proofs/runner.py",
        'return Outcome(name, "invariant", "failed", dt, "vacuous: the final gc_delete is "',
        'return Outcome(name, "invariant", "proved", dt, "vacuous: the final gc_delete is "',
        check=STATUSES + r"test_a_reference_row_whose_deletion",
    ),
    Mutant(
        "runner-reference-deletes-anyway-proved",
        "[proofs] a shape that claims reference never deletes along it, but does, is"
        " reported proved",
        "proofs/runner.py",
        'return Outcome(name, "invariant", "failed", dt, "reference deletes here after all:',
        'return Outcome(name, "invariant", "proved", dt, "reference deletes here after all:',
        check=STATUSES + r"test_a_reference_row_whose_deletion",
    ),
    Mutant(
        "runner-only-drops-vacuity",
        "[proofs] --only keeps only the rows its pattern matches: the matching task's"
        " vacuity rows are skipped (a vacuous induction reads as proved)",
        "proofs/runner.py",
        'or (only.search(tasks[futures[f]][2]) and o.kind == "vacuity")]',
        'or False]',
        check=STATUSES + r"test_only_keeps_the_matching_tasks_vacuity_rows",
    ),
    Mutant(
        "runner-crash-row-checked",
        "[proofs] a task that crashed gives a `checked` row (a passing mark) instead of a"
        " failed one",
        "proofs/runner.py",
        '"failed", time.perf_counter() - t0, traceback.format_exc())]',
        '"checked", time.perf_counter() - t0, traceback.format_exc())]',
        check=r"tests/proofs/test_runner.py::test_a_crashing_task_is_a_failed_row",
    ),
)

# Issue 42: the last survivor, killed by a host-level test of reads_current's contract.
MUTANTS += (
    Mutant(
        "reads-current-ignores-applied",
        "[publish] reads_current does not wait for the state machine to apply up to the"
        " commit index (a survivor until s18: between the step that raises the commit"
        " and the Ready that applies it, a read misses a committed write)",
        "impl/raft/host.py",
        "        return log.term(log.committed) == g.node.term and g.applied >= log.committed\n",
        "        return log.term(log.committed) == g.node.term\n",
        check=r"tests/raft/test_host_deposed.py::test_a_leader_reads_current_only_once_it",
    ),
)

# Equivalent mutants: the argument why no check can kill each is in its description. Kept
# (and checked to still apply, `--survivors`) but not counted.
EQUIVALENTS: tuple[Mutant, ...] = (
    Mutant(
        "housekeeper-releases-before-replicate",
        "[housekeeper] the fence's lock is released before advance_epoch is replicated."
        " EQUIVALENT: between the release and the proposal nothing else can run. After"
        " `admit` returns (its sync set `synced_term` to this term, no await since),"
        " `replicate_command`'s `await self.sync()` returns without suspending"
        " (`synced_term == term`) and `propose` appends synchronously (GroupRaft.propose's"
        " contract), so the released lock's waiters first run after the entry is in the"
        " log: exactly release at enqueue, the fence's production rule for placeholders"
        " (impl/partition/fence.py's docstring argues its order). On failure both release"
        " once (the original in `finally`, the mutant before). It survives every check"
        " (issue 42 item 7) because no schedule tells them apart",
        "impl/broker/housekeeper.py",
        "            try:\n                await fence.replicate_command(AdvanceEpoch(target))\n",
        "            fence.lock.release(SHARED)\n"
        "            try:\n                await fence.replicate_command(AdvanceEpoch(target))\n",
        (("impl/broker/housekeeper.py",
          "            finally:\n                fence.lock.release(SHARED)\n",
          "            finally:\n                pass\n"),),
        check=r"apply-time rejection|landed|A4|Divergence|liveness",
    ),
)

# Findings: realistic bugs that survive every check. Kept (and checked to still apply) but
# not counted until a check kills them; run them with --survivors.
SURVIVORS: tuple[Mutant, ...] = ()

# The check each of the first mutants is meant to be killed by (a regex over the failing
# test's id, exception type and message); the harness-checks block names its own in `what`.
_CHECKS = {
    "F1-phantom-bump": r"Divergence|InvariantViolation",
    "F3-out-of-order-landing": r"Divergence|InvariantViolation",
    "F2-untermed-seen": r"Divergence|InvariantViolation",
    "F4-skip-missing": r"Divergence|test_f4_new_partition_blocks_gc",
    "F4-no-revision-cap": r"Divergence|test_f4_stale_snapshot_caps_m",
    "F5-watermark-from-max": r"Divergence|InvariantViolation",
    "eligibility-off-by-one": r"Divergence|InvariantViolation",
    "seen-not-forgotten": r"Divergence|InvariantViolation",
    "reconciler-lro-before-durable": r"Divergence|InvariantViolation",
    "restore-loses-floor": r"restore\(snapshot\(\)\) != state",
    "restore-loses-unreconciled": r"restore\(snapshot\(\)\) != state",
    "placeholder-without-fence-term": r"landed at index \d+ in term",
    "epoch-cache-ahead": r"A3 on node",
    # The producer stamps after learning each partition (issue 13), so the cluster's
    # abstraction breaks the model's `objects` invariant (I6's stamp rule) first.
    "stamp-without-creation-floor": r"A2 on|model invariant objects fails",
    "housekeep-lrlo-past-placeholder": r"A4 on",
    "slide-skips-shared-holders": r"apply-time rejection on node|test_a_slide_waits",
    "apply-rejection-acked": r"apply-time rejection|test_an_injected_apply_time_rejection",
    "scan-stops-at-young-epoch-m": r"test_young_and_old_keys_at_exactly_m|GC round|eligible",
    "delete-ignores-m-backwards": r"test_gc_refuses_when_reports_go_lower|test_recheck_before",
    "recheck-blocked-reported-refused": r"GC stop at the re-read",
    "host-completes-overwritten-proposal": r"tests/raft/test_host_deposed.py",
}
MUTANTS = tuple(replace(m, check=_CHECKS[m.name]) if m.name in _CHECKS else m
                for m in MUTANTS)
# Issue 31: the lock's own seeded bugs, killed by the exhaustive interleaving check.
MUTANTS += tuple(m for m, _ in LOCK_MUTANTS)


TESTS = ("tests/conformance/test_regressions.py", "tests/conformance/test_implchecks.py",
         "tests/raft/test_host_deposed.py", "tests/conformance/test_harness.py")
# spec/: the conform driver's tests replay its vectors (the checker mutants of issue 42).
DIRS = ("epochgc", "impl", "model", "tests", "proofs", "spec")
# --suite --tests all: the CI suite also reads the benchmarks, experiments, spec vectors,
# ports, docs, the CI scripts and the project files (without them its baseline cannot pass).
SUITE_DIRS = (*DIRS, "benchmarks", "experiments", "ports", "docs", ".ci",
              "pyproject.toml", "tox.ini", "README.md", "LICENSE")


def tests_for(m: Mutant | None) -> list[str]:
    """The default checks, plus any test file the mutant's check names (run first)."""
    named = re.findall(r"tests/[\w/]+\.py", m.check) if m is not None else []
    return [*dict.fromkeys([*named, *TESTS])]


# --suite --tests relevant: the test directories of each mutated component.
RELEVANT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("impl/gc/", ("tests/gc",)),
    ("impl/store/", ("tests/gc", "tests/store", "tests/impl")),
    ("impl/chaos/", ("tests/chaos", "tests/impl/test_chaos_checker.py")),
    ("impl/raft/", ("tests/raft", "tests/conformance")),
    ("impl/cluster/", ("tests/impl", "tests/conformance")),
    ("impl/", ("tests/impl", "tests/conformance")),
)


def suite_tests(m: Mutant | None, selector: str, chosen: list[Mutant]) -> list[str]:
    """The test paths `--suite` runs for `m` (None: the baseline, for every chosen mutant)."""
    if selector == "all":
        # The whole suite, the benchmarks' tests last: they run two quick benchmarks, which
        # every mutant would otherwise pay before its first check.
        entries = sorted(e for e in (ROOT / "tests").iterdir()
                         if e.name != "__pycache__" and (e.is_dir() or (
                             e.name.startswith("test_") and e.suffix == ".py")))
        return [f"tests/{e.name}" for e in sorted(entries, key=lambda e: e.name == "benchmarks")]
    if selector != "relevant":
        return [t for t in selector.split(",") if t]
    out: list[str] = []
    for x in ([m] if m is not None else chosen):
        out += re.findall(r"tests/[\w/]+\.py", x.check)
        for path, _old, _new in x.edits():
            out += next(tests for prefix, tests in RELEVANT if path.startswith(prefix))
    return [*dict.fromkeys(out)]


def level(test_id: str) -> str:
    """Where a kill happened: the harness's state machine, another conformance test, or a
    unit or property test."""
    if test_id.startswith("tests/conformance/test_harness.py"):
        return "harness"
    return "conformance" if test_id.startswith("tests/conformance/") else "unit"


def run_tests(root: Path, m: Mutant | None, timeout: float,
              tests: list[str] | None = None, profile: str = "mutants",
              marks: str = "not spark", stop_at_kill: bool = False) -> RunResult:
    """Run `tests` (default: the mutant's checks) on the copy at `root`. Stops at the first
    failure (`-x`), or with `stop_at_kill` at the first failure that is a kill (a crash in
    an unrelated test then does not hide a later kill)."""
    record = root / "build" / "failures.jsonl"
    env = dict(os.environ)
    env.update(PYTHONPATH=str(root), EPOCHGC_CONFORMANCE_PROFILE=profile,
               EPOCHGC_CONFORMANCE_SPARK="0", PYTHONHASHSEED="0",
               EPOCHGC_FAILRECORD=str(record))
    if stop_at_kill:
        env[covplugin.STOP_VAR] = "1"
    if profile == "ci":
        # The CI suite reads old revisions from git (the disk log's format-3 code, the
        # harness bench's baseline): the copy has no .git, so git reads the real one.
        env["GIT_DIR"] = _git_dir()
    stop = ["-p", "tests.conformance.mutants_covplugin"] if stop_at_kill else ["-x"]
    cmd = [sys.executable, "-m", "pytest", *stop, "-q", "-p", "no:cacheprovider",
           "-p", "epochgc.proofs.pytest_failrecord", "--rootdir", str(root), "-o", "addopts=",
           # The project's pytest configuration (markers) from the real tree: the copy
           # holds only the source directories.
           *(["-c", str(ROOT / "pyproject.toml"), "-m", marks] if profile == "ci" else []),
           *(tests if tests is not None else tests_for(m))]
    code, out, secs = run_command(cmd, root, env, timeout)
    fails = ([json.loads(line) for line in record.read_text().splitlines() if line.strip()]
             if record.exists() else [])
    return RunResult(code, out, secs, fails)


def _git_dir() -> str:
    """The real checkout's git directory (read-only use: `git show`, `cat-file`, `archive`)."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--absolute-git-dir"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


# Exceptions (by class name, anywhere in the failure's MRO) that are a check's detection
# although not AssertionError: the disk log's own corruption verdict, which its fuzzers and
# regression tests raise on a seeded disk bug; pytest's `Failed` (pytest.fail, "DID NOT
# RAISE": a test's expectation, not a crash).
DETECTIONS = frozenset({"StorageCorruption", "Failed"})


def is_kill(f: dict[str, object]) -> bool:
    """An assertion-family failure, or one of DETECTIONS."""
    mro = f.get("mro")
    names = set(mro) if isinstance(mro, list) else {str(f.get("type"))}
    return bool(f["assertion"]) or bool(names & DETECTIONS)


def classify(r: RunResult) -> Verdict:
    """Killed by an assertion-family failure or a DETECTIONS one; anything else failing is
    an error."""
    fails: list[dict[str, object]] = r.detail if isinstance(r.detail, list) else []
    if r.code == -1:
        return Verdict("error", "", "timeout")
    kills = [f for f in fails if is_kill(f)]
    if kills:
        f = kills[0]
        return Verdict("killed", str(f["test"]), f"{f['type']}: {f['message']}"[:300])
    if fails:
        f = fails[0]
        return Verdict("error", str(f["test"]), f"not an assertion: {f['type']}: "
                       f"{f['message']}"[:300])
    if r.code != 0:
        return Verdict("error", "", f"exit {r.code}: " + (r.out.strip().splitlines()
                                                            or ["?"])[-1][:200])
    if r.out == NOT_COVERED:
        return Verdict("survived", "", NOT_COVERED)
    return Verdict("survived", "", "every check passes")


def component(m: Mutant) -> str:
    return m.path.removeprefix("impl/").removesuffix(".py")


def bug_class(m: Mutant) -> str:
    """The mutant's class: the `[tag]` its description starts with (issue 31's classes),
    `lock` for the lock's own, `earlier` for the sets before issue 31."""
    tag = re.match(r"\[([^\]]+)\]", m.what)
    if tag:
        return tag.group(1)
    return "lock" if m.name.startswith("lock-") else "earlier"


NOT_COVERED = "not covered: no test of the suite executes the edited lines"


def selected_run(m: Mutant | None, root: Path, args: argparse.Namespace,
                 picks: dict[str, selection.Selection]) -> RunResult:
    """--select coverage: the baseline is the coverage run `collect` made (it is not run
    again); a mutant runs its selected tests in order, stopping at its first kill."""
    if m is None:
        return RunResult(0, "baseline: the coverage run", 0.0, [])
    pick = picks[m.name]
    if not pick.tests:
        return RunResult(0, NOT_COVERED, 0.0, [])
    return run_tests(root, m, args.timeout, list(pick.tests), "ci", args.marks,
                     stop_at_kill=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("names", nargs="*", help="run only these mutants")
    ap.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    ap.add_argument("-j", type=int, default=2, help="mutants run in parallel")
    ap.add_argument("--keep", action="store_true", help="keep the temp copies")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--survivors", action="store_true",
                    help="also run the known surviving mutants (findings) and the"
                    " equivalent ones")
    ap.add_argument("--suite", action="store_true",
                    help="run the CI suite (ci profile, no Spark) on each mutant")
    ap.add_argument("--tests", default="relevant",
                    help="with --suite: all | relevant | comma-separated test paths")
    ap.add_argument("--marks", default="not spark",
                    help="with --suite: pytest's -m expression (default: CI without Spark)")
    ap.add_argument("--select", choices=("none", "coverage"), default="none",
                    help="with --suite: `coverage` runs only the tests that execute each "
                    "mutant's edit (the index of `python -m tests.conformance.mutants_select "
                    "collect`), stopping at the first kill; --tests is then ignored")
    ap.add_argument("--index", type=Path, default=selection.DEFAULT_OUT / "index.json",
                    help="with --select coverage: the coverage index")
    args = ap.parse_args(argv)
    if args.j < 1:
        ap.error(f"-j {args.j}: at least one run at a time")
    known = {m.name for m in MUTANTS + SURVIVORS + EQUIVALENTS}
    if unknown := [n for n in args.names if n not in known]:
        # A misspelt name ran nothing and reported "killed: 0/0" with exit 0: a green run
        # that checked nothing.
        ap.error(f"no such mutant: {', '.join(unknown)} (--list names them)")
    pool = (MUTANTS + SURVIVORS + EQUIVALENTS if args.survivors or args.names
            else MUTANTS)
    chosen = [m for m in pool if not args.names or m.name in args.names]
    if args.list:
        for m in chosen:
            print(f"{m.name:36} {component(m):18} {m.check}")
        return 0
    t0 = time.monotonic()
    picks: dict[str, selection.Selection] = {}
    if args.suite and args.select == "coverage":
        index = selection.load_index(args.index)
        if index.digest != selection.digest(ROOT):
            print(f"the coverage index {args.index} was taken on other {selection.MEASURED}/ "
                  "sources: collect it again")
            return 2
        picks = {m.name: selection.select(m, index, selection.place(m)) for m in chosen}
        for m in chosen:
            p = picks[m.name]
            print(f"SELECT   {m.name} {p.reason.value}: {len(p.tests)} tests "
                  f"({p.exact} on the edited lines)", flush=True)

    def show(o: Outcome) -> None:
        v = o.verdict
        flag = " MISMATCH" if o.mismatch else ""
        lv = f" [{level(v.by)}]" if v.outcome == "killed" else ""
        print(f"{v.outcome.upper():8} {o.mutant.name} ({bug_class(o.mutant)}) {o.secs:.0f}s"
              f"{lv} {v.by}: {v.why[:200]}{flag}", flush=True)

    def run(root: Path, m: Mutant | None) -> RunResult:
        if picks:
            return selected_run(m, root, args, picks)
        if args.suite:
            return run_tests(root, m, args.timeout, suite_tests(m, args.tests, chosen), "ci",
                             args.marks)
        return run_tests(root, m, args.timeout)

    baseline, outcomes = campaign(
        chosen, src=ROOT, dirs=SUITE_DIRS if args.suite else DIRS, run=run,
        classify=classify, jobs=args.j, keep=args.keep, prefix="epochgc-mutants-",
        on_result=show)
    if baseline.code != 0:
        print(baseline.out[-3000:])
        print(f"the unmutated copy fails (exit {baseline.code}); fix that first")
        print(f"mutants killed: 0/{len(chosen)}")
        return 2
    if picks:
        info = args.index.with_name("baseline.json")
        b = json.loads(info.read_text()) if info.exists() else {}
        print(f"baseline: the suite's run under coverage ({args.index}): "
              f"{b.get('tests', '?')} tests in {b.get('secs', '?')}s, failed (never selected):"
              f" {b.get('failed', '?')}; opaque (always selected): {b.get('opaque', '?')}")
    else:
        print(f"baseline: unmutated copy passes ({baseline.secs:.0f}s)")
    print()
    print(format_table(outcomes, component))
    if args.suite:
        print()
        print("| mutant | class | first killing test | level | seconds |")
        print("| --- | --- | --- | --- | --- |")
        for o in outcomes:
            v = o.verdict
            lv = level(v.by) if v.outcome == "killed" else v.outcome
            by = v.by or (v.why if v.outcome != "killed" else "-")
            print(f"| {o.mutant.name} | {bug_class(o.mutant)} | {by} | {lv} | {o.secs:.0f} |")
        by = Counter(level(o.verdict.by) for o in outcomes if o.verdict.outcome == "killed")
        print("kills by level: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    killed = sum(o.verdict.outcome == "killed" for o in outcomes)
    mism = sum(o.mismatch for o in outcomes)
    print(f"wall time {time.monotonic() - t0:.0f}s with -j {args.j}; mismatches: {mism}")
    print(f"mutants killed: {killed}/{len(chosen)}")
    return 0 if killed == len(chosen) and not mism else 1


if __name__ == "__main__":
    sys.exit(main())
