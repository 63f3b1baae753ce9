"""Refinement checks against the model after every step: the shadows (the model's replay of
each committed log) advanced, every live replica's state and M(p) == the replay's, the seen
window (R8), every fence and apply decision == the model's, every ack an accepted placement
of the incarnation its first attempt was for, the implementation's own state (`implchecks`)
and the acknowledged records read back."""

from __future__ import annotations

from epochgc.impl.controller.statemachine import PARTITION_GROUP_BASE
from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.statemachine import ApplyEvent
from epochgc.impl.store.base import StoreError
from epochgc.model import partition as mp
from tests.conformance.deployment import STATS
from tests.conformance.implchecks import (
    check_a3,
    check_a4,
    check_controller_roundtrip,
    check_matches_reference,
    check_restore_roundtrip,
)
from tests.conformance.shadow import Divergence, Shadow, check_apply, check_fence
from tests.conformance.state import HarnessState


class Refinement(HarnessState):
    def _advance_shadows(self) -> None:
        checker = self.c.sim.checker
        assert checker is not None
        for p in self.created():
            g = self.c.group_of(p)
            if p not in self.shadows or self.shadows[p].group != g:  # created or re-created
                if p in self.shadows:  # a new incarnation's indices start again
                    self.landed.done = {d for d in self.landed.done if d[0] != p}
                self.shadows[p] = self.all_shadows[g] = Shadow(p, g)
        for sh in self.all_shadows.values():
            g, hist = sh.group, checker.history(sh.group)
            hosts = [b.port.host for b in self.c.brokers.values() if g in b.port.host.groups]
            applied = [h.applied_index(g) for h in hosts]
            if self.shadows.get(sh.name) is not sh or self._current_group(sh.name) != g:
                # A deleted incarnation: what any replica applied before removing it (a
                # lagging host may still hold the group behind the others).
                upto = max([sh.done, *applied, *hist.applied])
            else:
                # Every entry any replica applied (one that crashed and restarted since has
                # its applied index back at its snapshot: issue 14), as far as the highest
                # commit index known: a leader's as the Raft checker saw it, or any live
                # replica's (a restart recovers its synced commit). An entry applied past
                # that was applied uncommitted: left out, so its apply is a divergence.
                committed = self._highest_commit(g)
                upto = sh.done
                if committed > upto:
                    upto = max(upto, min(max([*applied, *hist.applied], default=0), committed))
                    if upto > max([sh.done, *applied]):  # the shape issue 14 was about
                        STATS["check.shadow_past_live_replicas"] += 1
            if upto > sh.done:
                sh.advance(hist.applied, upto)

    def _check_replicas(self) -> None:
        for nid, b in sorted(self.c.brokers.items()):
            for p, rep in b.replicas.items():
                g = rep.info.group
                sh = self.all_shadows.get(g)
                if sh is None or g not in b.port.host.groups or rep.sm.deleted:
                    continue
                idx = b.port.host.applied_index(g)
                if idx > sh.done:
                    raise Divergence(f"node {nid} for {p} applied up to index {idx}, past the"
                                     f" committed log the model replayed (to {sh.done})")
                want = sh.state_at(idx)
                if rep.sm.state != want:
                    raise Divergence(
                        f"replica state on node {nid} for {p} at applied index {idx}:"
                        f" implementation {rep.sm.state}, model replay {want}"
                    )
                got_m = rep.sm.inactive_epoch()
                want_m = mp.inactive_epoch(want)
                if got_m != want_m:
                    raise Divergence(
                        f"M(p) on node {nid} for {p}: implementation reports {got_m}, model"
                        f" M(p) of the same state is {want_m} ({want})"
                    )
                # R8: the seen window is forgotten on loss of leadership, scoped to a term.
                seen = rep.fence.seen
                if seen is not None:
                    leads = b.port.is_leader(g)
                    if not leads or seen.term != b.port.term(g):
                        raise Divergence(
                            f"R8: node {nid} keeps seen window {seen} for {p} while"
                            f" {'leading term ' + str(b.port.term(g)) if leads else 'not leader'}"
                        )
                    if seen.previous > seen.max:
                        raise Divergence(f"seen window {seen} on node {nid} for {p} is inverted")

    def _check_decisions(self) -> None:
        checker = self.c.sim.checker
        assert checker is not None
        log = self.c.fence_inputs
        while self.fence_seen < len(log):
            nid, name, d, applied = log[self.fence_seen]
            self.fence_seen += 1
            STATS[f"fence.{d.kind}"] += 1
            check_fence(nid, name, d, applied)
        adm = self.c.admissions
        while self.admitted_seen < len(adm):
            nid, name, ph, creation = adm[self.admitted_seen]
            self.admitted_seen += 1
            if ph.epoch < creation:
                raise Divergence(
                    f"A2 on {name}: node {nid}'s fence admitted placeholder {ph.key} with"
                    f" epoch {ph.epoch} below the partition's creation revision {creation}"
                )
        alog = self.c.apply_log
        while self.apply_seen < len(alog):
            rec = alog[self.apply_seen]
            self.apply_seen += 1
            ev: ApplyEvent = rec.event
            sh = self.all_shadows.get(self.c.apply_groups[self.apply_seen - 1])
            if sh is None or ev.index > sh.done:
                raise Divergence(f"apply on node {rec.node} for {rec.partition} at index"
                                 f" {ev.index} is not in the committed log the model replayed")
            STATS["apply.events"] += 1
            if ev.result is not None and not ev.result.accepted:
                STATS["apply.rejected_stale"] += 1
            check_apply(rec.node, rec.partition, sh, ev)
            if isinstance(ev.command, Placeholder) and ev.result is not None:
                term = checker.history(sh.group).applied[ev.index][0]
                creation = sh.group - PARTITION_GROUP_BASE  # the incarnation that applied it
                done = self.landed.check(rec.node, rec.partition, creation, ev.index, term,
                                         ev.command, ev.result.accepted)
                if done:
                    STATS[done] += 1

    def _check_acks(self) -> None:
        """Every acknowledged placeholder was applied and accepted (an apply-time rejection
        must reach the producer as a failure, never as an ack)."""
        acked = self.c.acked
        while self.acks_seen < len(acked):
            a = acked[self.acks_seen]
            self.acks_seen += 1
            sh = self.all_shadows.get(self._incarnation(a.partition, a.epoch)[0])
            pl = sh.placements.get(a.key) if sh is not None else None
            if pl is None or not pl.accepted:
                raise Divergence(
                    f"acknowledged {a.partition} key {a.key} (base {a.base}) but its"
                    f" placeholder was {'rejected at apply' if pl else 'never applied'}"
                )
            first = self._first_stamp.get((a.key, a.partition))
            if first is not None and sh is not None:
                meant, _ = self._incarnation(a.partition, first)
                if meant != sh.group:
                    raise Divergence(
                        f"R35: acknowledged {a.partition} key {a.key} into incarnation group"
                        f" {sh.group}, but the producer's first attempt (epoch {first}) was"
                        f" for group {meant}: a retry moved to a re-created partition")

    def _check_impl_state(self) -> None:
        """restore == state, the reference replay, A3 and A4 on every live node (cheap:
        a few small JSON documents per step)."""
        # The committed epoch, not the live replicas' applied maximum (deep run, seeds 912,
        # 929, 953: a cache lagged at the leader's applied epoch, then the leader crashed).
        ctl_epoch = self.committed_controller().epoch if self.c.brokers else 0
        memo = self._impl_checked
        for nid, b in sorted(self.c.brokers.items()):
            check_a3(nid, b.cache.cached, ctl_epoch)
            ctl = b.controller
            if memo.get((nid, "")) != (ctl, ctl.last_index):
                check_controller_roundtrip(f"node {nid}", ctl)
                memo[(nid, "")] = (ctl, ctl.last_index)
            for p, rep in sorted(b.replicas.items()):
                g = rep.info.group
                sh = self.all_shadows.get(g)
                if rep.sm.deleted:
                    continue
                applied = b.port.host.applied_index(g) if g in b.port.host.groups else -1
                # Only a state machine that changed since its last check (a new object after
                # a restart, or one that applied or restored entries) is checked again.
                key = (rep.sm, rep.sm.last_index, rep.sm.state, applied,
                       sh.done if sh is not None else -1)
                old = memo.get((nid, p))
                if old is not None and old[0] is rep.sm and old[1:] == key[1:]:
                    continue
                memo[(nid, p)] = key
                where = f"node {nid} {p}"
                check_restore_roundtrip(where, rep.sm)
                check_a4(where, rep.sm)
                STATS["check.restore_roundtrip"] += 1
                if sh is not None and applied == sh.done:
                    check_matches_reference(where, rep.sm, sh.ref)
                    STATS["check.reference_state"] += 1

    def check_readback(self) -> None:
        """Every acknowledged record reads back, from every live replica that applied it."""
        self.readback_dirty = False
        STATS["check.readback"] += 1
        for p, want in self.expected.items():
            if not want:
                continue
            top = max(want)
            sh = self.shadows.get(p)
            for nid, b in sorted(self.c.brokers.items()):
                rep = b.replicas.get(p)
                if rep is None or rep.sm.next_offset <= top or sh is None:
                    continue
                if rep.info.group != sh.group:
                    # A node that has not applied p's deletion yet still holds the earlier
                    # incarnation: not the records expected of the current one.
                    STATS["check.readback_skipped_earlier_incarnation"] += 1
                    continue
                # Only a replica that has applied the whole committed log: a lagging one
                # still points below LRO at L0 objects GC may already have collected (found
                # by the harness; reads must be served by an up-to-date replica).
                if b.port.host.applied_index(rep.info.group) < sh.done:
                    STATS["check.readback_skipped_lagging_replica"] += 1
                    continue
                try:
                    got = dict(b.read(p, 0, max_records=10**6))
                except StoreError as e:
                    raise Divergence(f"acknowledged records of {p} unreadable on node {nid}:"
                                     f" {e}") from e
                for off, rec in want.items():
                    if got.get(off) != rec:
                        raise Divergence(
                            f"acknowledged record {p}@{off} ({rec!r}) reads back as"
                            f" {got.get(off)!r} on node {nid}"
                        )
