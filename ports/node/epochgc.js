'use strict';
// The partition state machine (SPEC R1-R7), the leader's fence (R8-R12), the cluster GC
// epoch (R16-R19) and key eligibility (R20-R24), with the variants of SPEC section 6.
// Pure functions over frozen plain objects; epochs and offsets are BigInt, absent = null.

const VARIANTS = Object.freeze([
  'reference', 'strict', 'collapse', 'fence-only', 'untermed',
  'watermark-from-max', 'skip-missing', 'uncapped', 'empty-is-nothing', 'barrier-prod',
  'reference-enqueue', 'prod-january', 'prod-january-enqueue', 'prod-february',
  'prod-february-enqueue', 'prod-july', 'prod-july-enqueue', 'proposal-august',
  'proposal-august-enqueue', 'assert-at-apply',
]);

// Production's fence rules as merged (SPEC section 6, "Production's rules"; model/prodrules.py
// cites the code) and the August proposal: the rule each variant runs. `-enqueue` (release
// at enqueue) changes which interleavings happen, not any step.
const PROD_RULE = Object.freeze({
  'prod-january': 'january', 'prod-january-enqueue': 'january',
  'prod-february': 'february', 'prod-february-enqueue': 'february',
  'prod-july': 'july', 'prod-july-enqueue': 'july', 'assert-at-apply': 'july',
  'proposal-august': 'august', 'proposal-august-enqueue': 'august',
});
const prodRule = (variant) => (Object.prototype.hasOwnProperty.call(PROD_RULE, variant) ? PROD_RULE[variant] : null);
// January only: every replica slides its seen window when it applies a placeholder
// (February's apply path no longer touches it).
const followersSlide = (variant) => prodRule(variant) === 'january';
// A placeholder outside the window crashes the replica (and its replay) instead of a no-op.
const assertAtApply = (variant) => variant === 'assert-at-apply';

const INITIAL = Object.freeze({
  max_applied_epoch: null,
  previous_applied_epoch: null,
  min_epoch_lower_bound: null,
  window_offset: null,
  last_reconciled_offset: -1n,
  last_reconciled_log_offset: -1n,
  start_offset: 0n,
  barrier_epoch: -1n, // R36: the pending safe epoch and its command's offset (-1: none)
  barrier_offset: -1n,
  gc_safe_epoch: -1n, // R38: promoted once LRLO reaches barrier_offset (-1: none)
});

const bmax = (a, b) => (a > b ? a : b);
const bmin = (a, b) => (a < b ? a : b);
// max/min over the values present (R9): null only when both are absent.
const maxPresent = (a, b) => (a === null ? b : b === null ? a : bmax(a, b));

// R2, and `strict`'s collapsing slide.
function slide(s, e, o, variant) {
  if (s.max_applied_epoch === null) {
    return Object.freeze({ ...s, max_applied_epoch: e, previous_applied_epoch: e, min_epoch_lower_bound: e, window_offset: o });
  }
  const prev = variant === 'strict' ? e : s.max_applied_epoch;
  return Object.freeze({ ...s, previous_applied_epoch: prev, max_applied_epoch: e, window_offset: o });
}

// R3: whether the log accepts a placeholder of epoch e.
function accepts(s, e, variant) {
  if (s.max_applied_epoch === null) return true;
  if (variant === 'fence-only' || variant === 'untermed') return true; // no apply-time check
  if (variant === 'strict') return e >= s.max_applied_epoch;
  return e >= s.previous_applied_epoch;
}

// R37: a placeholder at or below the barrier's candidate is refused (not in `barrier-prod`).
function aboveBarrier(s, e, variant) {
  return variant === 'barrier-prod' || e > s.barrier_epoch;
}

function applyPlaceholder(s, e, o, variant) {
  if (!accepts(s, e, variant) || !aboveBarrier(s, e, variant)) return { state: s, accepted: false };
  if (s.max_applied_epoch === null || e > s.max_applied_epoch) return { state: slide(s, e, o, variant), accepted: true };
  return { state: s, accepted: true };
}

// R4: never rejected; a no-op at or below the max.
function applyAdvanceEpoch(s, e, o, variant) {
  if (s.max_applied_epoch !== null && e <= s.max_applied_epoch) return s;
  return slide(s, e, o, variant);
}

// R5: LRLO and LRO only move forward; the floor rises to previous_applied once LRLO
// reaches the window offset.
function applyReconciled(s, lrlo, lro) {
  const next = { ...s, last_reconciled_log_offset: bmax(s.last_reconciled_log_offset, lrlo) };
  if (lro !== null) next.last_reconciled_offset = bmax(s.last_reconciled_offset, lro);
  if (next.window_offset !== null && next.window_offset <= next.last_reconciled_log_offset) {
    next.min_epoch_lower_bound = next.previous_applied_epoch;
  }
  if (next.barrier_offset <= next.last_reconciled_log_offset) {
    next.gc_safe_epoch = next.barrier_epoch; // R38: promoted
  }
  return Object.freeze(next);
}

// R36: the epoch barrier's command: pending if above the pending epoch (it ratchets).
function applyAdvanceGcEpoch(s, e, o) {
  if (e <= s.barrier_epoch) return s;
  return Object.freeze({ ...s, barrier_epoch: e, barrier_offset: o });
}

// R7 (and `watermark-from-max`, F5).
function inactiveEpoch(s, variant) {
  const base = variant === 'watermark-from-max' ? s.max_applied_epoch : s.min_epoch_lower_bound;
  const m = base === null ? null : base - 1n;
  const g = variant === 'watermark-from-max' || s.gc_safe_epoch < 0n ? null : s.gc_safe_epoch;
  return g === null ? m : m === null ? g : bmax(m, g); // R38
}

const termScoped = (variant) => variant !== 'untermed';
const fenceOnly = (variant) => variant === 'fence-only' || variant === 'untermed';

// The seen window that counts for a fence in `term` (R8), or null.
function validSeen(seen, term, variant) {
  if (seen === null) return null;
  return !termScoped(variant) || seen.term === term ? seen : null;
}

// R9; fence-only/untermed take the seen window when it counts, else the applied one.
function effectiveWindow(seen, s, variant) {
  if (fenceOnly(variant)) {
    if (seen !== null) return [seen.previous, seen.max];
    return [s.previous_applied_epoch, s.max_applied_epoch];
  }
  return [
    maxPresent(seen === null ? null : seen.previous, s.previous_applied_epoch),
    maxPresent(seen === null ? null : seen.max, s.max_applied_epoch),
  ];
}

const appliedWindow = (s) => (s.max_applied_epoch === null ? null : [s.previous_applied_epoch, s.max_applied_epoch]);
const seenWin = (term, previous, max) => Object.freeze({ term, previous, max });

// January: the node's seen window alone (any term), else the applied window;
// [previous, max_seen) shared, e >= max_seen slides.
function seenKeptApart(seen, s, term, e) {
  const base = seen !== null ? [seen.previous, seen.max] : appliedWindow(s);
  if (base === null) return { admitted: true, window: [e, e], seen: seenWin(term, e, e) };
  const [lo, hi] = base;
  if (e >= hi) {
    const next = e > hi ? seenWin(term, hi, e) : seenWin(term, lo, hi);
    return { admitted: true, window: [next.previous, next.max], seen: next };
  }
  return { admitted: lo <= e, window: [lo, hi], seen };
}

// July's applied evidence below the seen max hi: none with nothing applied; an applied
// max below hi; or equal to hi with the applied window not collapsed.
function evidence(s, hi) {
  const m = s.max_applied_epoch;
  if (m === null) return false;
  if (m < hi) return true;
  const p = s.previous_applied_epoch === null ? hi : s.previous_applied_epoch;
  return m === hi && p < hi;
}

// advance_max_seen_epoch: only a later epoch in this or a newer term; a newer term resets
// to [e, e]; a newer term's epoch at or below the old max leaves the old window in place.
function advanceMaxSeen(seen, term, e) {
  if (seen !== null && (term < seen.term || e <= seen.max)) return seen;
  if (seen === null || term > seen.term) return seenWin(term, e, e);
  return seenWin(term, seen.max, e);
}

// February and July: the seen window counts in its own term only (else the applied
// window); in the window: shared (July: below the max only with evidence); above: slide.
function termWindow(seen, s, term, e, rule) {
  const w = appliedWindow(s);
  let inside;
  let above;
  let shown;
  if (seen !== null && term <= seen.term) {
    const lo = seen.previous;
    const hi = seen.max;
    inside = lo <= e && e <= hi && (rule !== 'july' || e === hi || evidence(s, hi));
    above = e > hi;
    shown = [lo, hi];
  } else {
    inside = w !== null && w[0] <= e && e <= w[1];
    above = w === null || e > w[1];
    shown = w;
  }
  if (inside) return { admitted: true, window: shown, seen };
  if (above) {
    const next = advanceMaxSeen(seen, term, e);
    const win = next !== null && next.term >= term ? [next.previous, next.max] : w;
    return { admitted: true, window: win, seen: next };
  }
  return { admitted: false, window: shown, seen };
}

// August (a proposal, closed without merge): a per-term seen window; outside its term the applied window decides and the
// first slide resets to [e, e]; while a bump is pending only the edges are shared and an
// interior epoch raises the lower edge.
function perTerm(seen, s, term, e) {
  const w = appliedWindow(s);
  if (seen === null || seen.term !== term) {
    if (w !== null && e < w[0]) return { admitted: false, window: w, seen };
    if (w !== null && e <= w[1]) return { admitted: true, window: w, seen };
    return { admitted: true, window: [e, e], seen: seenWin(term, e, e) };
  }
  const lo = seen.previous;
  const hi = seen.max;
  if (e > hi) return { admitted: true, window: [hi, e], seen: seenWin(term, hi, e) };
  if (e === lo || e === hi) return { admitted: true, window: [lo, hi], seen };
  if (e < lo) return { admitted: false, window: [lo, hi], seen };
  if (w === null || w[1] < hi) return { admitted: true, window: [e, hi], seen: seenWin(term, e, hi) };
  return { admitted: true, window: [lo, hi], seen };
}

// A replica applying epoch e slides its seen window up to e (January).
function followerSlide(seen, e) {
  if (seen === null || e <= seen.max) return seen;
  return seenWin(seen.term, seen.max, e);
}

// R10-R12. Returns the decision, the effective window after it, and the node's new seen
// window (unchanged unless the fence slid).
function fence(seen, s, term, e, variant) {
  const rule = prodRule(variant);
  if (rule === 'august') return perTerm(seen, s, term, e);
  if (rule === 'january') return seenKeptApart(seen, s, term, e);
  if (rule !== null) return termWindow(seen, s, term, e, rule);
  const valid = validSeen(seen, term, variant);
  const [lo, hi] = effectiveWindow(valid, s, variant);
  if (hi === null || e > hi) {
    const collapse = variant === 'strict' || (variant === 'collapse' && valid === null);
    const next = Object.freeze({ term, previous: collapse || hi === null ? e : hi, max: e });
    return { admitted: true, window: effectiveWindow(next, s, variant), seen: next };
  }
  if (e >= lo) return { admitted: true, window: [lo, hi], seen };
  return { admitted: false, window: [lo, hi], seen };
}

// R16-R19 with `skip-missing`, `uncapped` and `empty-is-nothing`. `reports` are already
// validated {partition, replica, inactive_epoch}.
function gcEpoch(snapshotRevision, partitions, reports, variant) {
  const best = new Map();
  for (const r of reports) {
    if (r.inactive_epoch === null) continue;
    const old = best.get(r.partition);
    best.set(r.partition, old === undefined ? r.inactive_epoch : bmax(old, r.inactive_epoch));
  }
  const missing = partitions.filter((p) => !best.has(p));
  if (partitions.length === 0) {
    return { M: variant === 'empty-is-nothing' ? null : snapshotRevision, blocked: null, missing };
  }
  if (missing.length > 0 && variant !== 'skip-missing') {
    return { M: null, blocked: `no inactive epoch reported for: ${missing.join(', ')}`, missing };
  }
  let m = null;
  for (const p of partitions) if (best.has(p)) m = m === null ? best.get(p) : bmin(m, best.get(p));
  if (m === null) return { M: null, blocked: null, missing }; // skip-missing, every partition missing
  if (variant !== 'uncapped') m = bmin(m, snapshotRevision);
  return { M: m, blocked: null, missing };
}

// R20-R21: ASCII-only grammar.
const KEY = /^level_zero\/data\/([0-9]{3})\/([0-9]{18})\/([0-9A-Za-z][0-9A-Za-z_.-]{0,127})$/;

function parseKey(key) {
  if (!key.startsWith('level_zero/data/')) return { epoch: null, error: 'not under level_zero/data/' };
  const m = KEY.exec(key);
  if (m === null) return { epoch: null, error: `malformed L0 key: ${key}` };
  return { epoch: BigInt(m[2]), error: null };
}

// R23-R24: epoch <= M (inclusive), nothing while M is null, and age >= grace.
function gcEligible(key, ageS, M, graceS) {
  const { epoch, error } = parseKey(key);
  const eligible = error === null && M !== null && epoch <= M && ageS >= graceS;
  return { eligible, error, epoch };
}

module.exports = {
  VARIANTS, INITIAL, applyPlaceholder, applyAdvanceEpoch, applyReconciled, inactiveEpoch,
  applyAdvanceGcEpoch,
  fence, effectiveWindow, gcEpoch, parseKey, gcEligible, followersSlide, followerSlide,
  assertAtApply, accepts,
};
