"""GC rounds checked against the model: the PySpark job's task and driver functions in
process (with a report lowered, a partition created or the re-read failing between the
driver's M and the tasks' deletes), the simulator's round and the real PySpark job, each
against `model.cluster.gc_epoch` over the published documents and `model.keys.gc_eligible`
over the listing before the round; then what the round removed."""

from __future__ import annotations

import contextlib
import functools
import json
import os
from typing import Any

from epochgc.impl.cluster.gcround import gc_round
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY
from epochgc.impl.store.base import StoreError
from epochgc.model.keys import DATA_PREFIX, PREFIXES, format_key, prefix_path
from tests.conformance.deployment import MAX_REPORT_AGE_S, STATS
from tests.conformance.gcinproc import inprocess_gc_round
from tests.conformance.shadow import Divergence, GcExpectation, model_gc
from tests.conformance.state import HarnessState
from tests.conformance.storeview import _prefixes, _regular_file, stored_files


class GcChecks(HarnessState):
    def _docs_and_listing(
        self, data: bool = True
    ) -> tuple[dict[str, object], list[tuple[str, float]], float]:
        """The `_cluster/` documents and, if `data` (not when the caller drops it), the
        listing of the data prefix."""
        now = self.c.wall()
        docs: dict[str, object] = {}
        for key, _ in stored_files(self.local.root, "_cluster/"):
            with contextlib.suppress(ValueError, StoreError):
                docs[key] = json.loads(self.local.get(key))
        listing = ([(key, max(0.0, now - mtime))
                    for key, mtime in stored_files(self.local.root, DATA_PREFIX, True)]
                   if data else [])
        return docs, listing, now

    def gc(self, grace_s: float = 0.0, lower_between: bool = False,
           create_between: bool = False, fail_reread: bool = False) -> None:
        """One GC round with the PySpark job's own task and driver functions, in process
        (`gcinproc`): listing with the early stop, eligibility, the re-check of M, the
        deletes. `lower_between`: every fresh health report is republished lower after the
        driver computed M and before the tasks' re-read (then put back), so the delete
        phase must refuse. `create_between`: a partition appears in the partitions table
        there instead (created, no report yet; then removed), so the round must come out
        blocked. Either way the tasks' stop must say which (blocked or refused) as the
        model's re-check does. `fail_reread`: every read of `_cluster/` fails there instead
        (until the round ends), so a task's re-read fails: nothing may be deleted (the round
        may stop or fail, never go ahead on the driver's M)."""
        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, grace_s)
        saved: dict[str, bytes] = {}
        again: list[GcExpectation] = []

        def lower() -> None:
            m = want.decision.M if want.decision is not None else None
            if m is not None and m >= 0:
                for key, _ in stored_files(self.local.root, HEALTH_PREFIX):
                    raw = self.local.get(key)
                    doc = json.loads(raw)
                    for r in doc["replicas"]:
                        if r["inactive_epoch"] is not None:
                            r["inactive_epoch"] = min(r["inactive_epoch"], m - 1)
                    saved[key] = raw
                    self.local.put(key, json.dumps(doc, sort_keys=True).encode())
                STATS["fault.reports_lowered_before_delete"] += 1
            reread()

        def create() -> None:
            if want.decision is not None and want.decision.M is not None:
                raw = self.local.get(PARTITIONS_KEY)
                doc = json.loads(raw)
                name = next(f"t/{n}" for n in range(1000, 2000)
                            if f"t/{n}" not in doc["partitions"])
                doc["revision"] += 1
                doc["partitions"] = [*doc["partitions"], name]
                doc["created"] = {**doc.get("created", {}), name: doc["revision"]}
                saved[PARTITIONS_KEY] = raw
                self.local.put(PARTITIONS_KEY, json.dumps(doc, sort_keys=True).encode())
                STATS["fault.partition_created_before_delete"] += 1
            reread()

        def reread() -> None:
            d2, _, n2 = self._docs_and_listing(data=False)
            again.append(model_gc(d2, [], n2, MAX_REPORT_AGE_S, grace_s))

        failed: list[bool] = []

        def fail() -> None:
            if want.decision is not None and want.decision.M is not None:
                self.store.fail_reads = "_cluster/"
                failed.append(True)
                STATS["fault.gc_reread_fails"] += 1

        try:
            got = inprocess_gc_round(self.store, self.c.wall, grace_s, MAX_REPORT_AGE_S,
                                     between=(lower if lower_between else
                                              create if create_between else
                                              fail if fail_reread else None),
                                     populated=_prefixes(listing))
        except Exception as e:
            if want.error is None and not failed:
                raise Divergence(f"GC round failed ({e!r}); the model expected {want}") from e
            if failed:
                STATS["gc.round_failed_on_failed_reread"] += 1
            self._after_gc(set(want.listing), set(), want, "gc")  # nothing deleted
            return
        finally:
            self.store.fail_reads = None
            for key, raw in saved.items():
                self.local.put(key, raw)
        if want.error is not None:
            raise Divergence(f"GC round ran ({got}) but the model says: {want.error}")
        assert want.decision is not None
        if got.M != want.decision.M or (got.blocked is None) != (want.decision.blocked is None):
            raise Divergence(
                f"GC decision: implementation M={got.M} blocked={got.blocked!r}, model"
                f" M={want.decision.M} blocked={want.decision.blocked!r} (snapshot revision"
                f" {want.revision} partitions {want.partitions} reports {want.reports})"
            )
        if want.decision.M is not None and got.eligible != want.deletable:
            raise Divergence(
                f"GC listing at M={got.M} grace {grace_s}s: eligible extra"
                f" {sorted(got.eligible - want.deletable)}, missing"
                f" {sorted(want.deletable - got.eligible)} (an early stop or an eligibility"
                f" bug in impl/gc/scan.py)"
            )
        expect = set(want.deletable)
        # (blocked, refused) at the tasks' re-read, as the model says; None: its re-read
        # failed, nothing to compare.
        stop: tuple[bool, bool] | None = (False, False)
        if expect and failed:  # the re-read failed: no delete may follow it
            expect, stop = set(), None
            STATS["gc.reread_failed_no_delete"] += 1
        if expect and again:
            d2 = again[0].decision
            if d2 is None or d2.blocked is not None or d2.M is None or d2.M < want.decision.M:
                expect = set()  # M moved backwards (or the round is blocked): delete nothing
                stop = None if d2 is None else (d2.blocked is not None, d2.blocked is None)
                blocked = stop is not None and stop[0]
                STATS["gc.blocked_on_recheck" if blocked else "gc.refused_on_recheck"] += 1
        # Every task re-reads the same store (nothing changes between them), and only a
        # task with something to delete waits for its re-read's verdict.
        got_stop = (got.blocked_on_recheck is not None, got.refused_on_recheck is not None)
        if stop is not None and got_stop != stop:
            raise Divergence(
                f"GC stop at the re-read: implementation blocked={got.blocked_on_recheck!r}"
                f" refused={got.refused_on_recheck!r}, model (blocked, refused)={stop}"
                f" (re-check: {again[:1]})"
            )
        if got.deleted != expect:
            raise Divergence(
                f"GC deleted set differs at M={got.M} (re-check: {again[:1]}): extra"
                f" {sorted(got.deleted - expect)}, missing {sorted(expect - got.deleted)}"
            )
        self._after_gc(set(want.listing), expect, want, "gc")

    def gc_listing_fails(self, grace_s: float = 0.0) -> None:
        """A GC round (in process, as `gc`) whose listing of one data prefix fails from the
        tasks' first list request of it on (the highest populated prefix, listed last): the
        round must end with that error, never as a success with the prefix left half listed
        (issue 31: a lister error dropped). What it deleted before the error is eligible (a
        subset of the model's deletable set), and nothing of the failed prefix."""
        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, grace_s)
        populated = _prefixes(listing)
        if (want.error is not None or want.decision is None or want.decision.M is None
                or want.decision.blocked is not None or not populated):
            return
        bad = prefix_path(max(populated))

        def fail() -> None:
            self.store.fail_reads = bad
            STATS["fault.gc_listing_fails"] += 1

        try:
            got = inprocess_gc_round(self.store, self.c.wall, grace_s, MAX_REPORT_AGE_S,
                                     between=fail, populated=populated)
        except StoreError:
            STATS["gc.round_failed_on_listing_error"] += 1
        else:
            raise Divergence(f"GC round ended (M={got.M}, deleted {len(got.deleted)}) although"
                             f" listing {bad} failed: a lister error dropped")
        finally:
            self.store.fail_reads = None
        root = self.local.root
        gone = {key for key in want.listing if not _regular_file(os.path.join(root, key))}
        if not gone <= want.deletable or any(key.startswith(bad) for key in gone):
            raise Divergence(f"GC round whose listing of {bad} failed removed"
                             f" {sorted(gone - want.deletable)} (not deletable) or keys of"
                             f" {bad}: {sorted(k for k in gone if k.startswith(bad))}")
        self.deleted |= gone
        STATS["gc.gc_deleted"] += len(gone)
        self.readback_dirty = True

    def sim_gc(self) -> None:
        """The simulator's GC round (impl/cluster/gcround.py, used by the demo)."""
        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, 0.0)
        try:
            got = gc_round(self.local, now, 0.0, MAX_REPORT_AGE_S)
        except Exception as e:
            if want.error is None:
                raise Divergence(f"sim GC round failed ({e!r}); the model expected {want}") from e
            self._after_gc(set(want.listing), set(), want, "sim")
            return
        if want.error is not None:
            raise Divergence(f"sim GC round ran ({got}) but the model says: {want.error}")
        assert want.decision is not None
        if (got.M, got.blocked) != (want.decision.M, want.decision.blocked):
            raise Divergence(
                f"sim GC decision: implementation M={got.M} blocked={got.blocked!r}, model"
                f" M={want.decision.M} blocked={want.decision.blocked!r}"
            )
        if set(got.deleted) != want.deletable:
            raise Divergence(
                f"sim GC deleted set differs at M={got.M}: extra"
                f" {sorted(set(got.deleted) - want.deletable)}, missing"
                f" {sorted(want.deletable - set(got.deleted))}"
            )
        self._after_gc(set(want.listing), set(want.deletable), want, "sim")

    def young_and_old_at_m(self, grace_s: float = 30.0) -> None:
        """Orphan objects (written, never placed: a producer that died) at exactly epoch M
        in one prefix, a young one sorting first and old ones after it, plus an old one at
        M + 1; then a GC round with that grace. The old ones at M must go, the rest stay."""
        docs, _, now = self._docs_and_listing(data=False)
        want = model_gc(docs, [], now, MAX_REPORT_AGE_S, grace_s)
        m = want.decision.M if want.decision is not None else None
        if m is None or m < 0:
            return
        prefix = self.rng.randrange(PREFIXES)
        self.record_seq += 1
        tag = self.record_seq
        for name, epoch, old in (("a-young", m, False), ("b-old", m, True),
                                 ("c-old", m, True), ("d-old-next", m + 1, True)):
            key = format_key(prefix, epoch, f"{name}-{tag}")
            self.local.put(key, b"orphan")
            if old:
                os.utime(os.path.join(self.local.root, key), (now - 2 * grace_s,) * 2)
        STATS["op.orphans_at_m"] += 1
        self.gc(grace_s)

    def spark_gc(self) -> None:
        """The real PySpark GC job (impl/gc) on the shared session."""
        if self.spark is None:
            return
        from epochgc.impl.gc.job import run_gc
        from epochgc.impl.gc.options import GcOptions
        from epochgc.impl.store.url import parse_store_url

        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, 0.0)
        opts = GcOptions(grace_s=0.0, allow_short_grace=True, max_report_age_s=MAX_REPORT_AGE_S,
                         tasks=2)
        try:
            # Simulated time stands still while Spark runs (the event loop is not driven),
            # so the executors' clock is the round's `now`, as a picklable callable.
            summary = run_gc(self.spark, parse_store_url(str(self.local.root)), opts,
                             clock=functools.partial(float, now))
        except Exception as e:
            if want.error is None:
                raise Divergence(f"Spark GC failed ({e!r}); the model expected {want}") from e
            self._after_gc(set(want.listing), set(), want, "spark")
            return
        if want.error is not None:
            raise Divergence(f"Spark GC ran but the model says: {want.error}")
        assert want.decision is not None
        expect_m, expect_blocked = want.decision.M, want.decision.blocked
        deletable = set(want.deletable)
        if expect_m is not None:
            # Issue 30: the job's safety monitor also blocks a round the model would run
            # (a node that reported before is stale), judged on the same reports at the
            # same `now` (simulated time stands still while Spark runs).
            from epochgc.impl.gc.monitor import check_health

            verdict = check_health(self.local, now, MAX_REPORT_AGE_S)
            if not verdict.healthy:
                expect_m, expect_blocked, deletable = None, verdict.why(), set()
        if (summary.M, summary.blocked) != (expect_m, expect_blocked):
            raise Divergence(
                f"Spark GC decision: M={summary.M} blocked={summary.blocked!r}, expected"
                f" M={expect_m} blocked={expect_blocked!r} (model: {want.decision})"
            )
        self._after_gc(set(want.listing), deletable, want, "spark")

    def _after_gc(self, listed: set[str], expect: set[str], want: Any, kind: str) -> None:
        # What the round removed of what it listed: an lstat per listed key (the harness's
        # store holds no links), not a walk of the whole data prefix.
        root = self.local.root
        gone = {key for key in listed if not _regular_file(os.path.join(root, key))}
        if gone != expect:
            raise Divergence(
                f"{kind} GC: objects gone {sorted(gone)} != expected {sorted(expect)}"
            )
        self.deleted |= gone
        STATS[f"gc.{kind}_rounds"] += 1
        if want.decision is not None and want.decision.blocked is not None:
            STATS[f"gc.{kind}_blocked"] += 1
        STATS[f"gc.{kind}_deleted"] += len(gone)
        self.readback_dirty = True
