'use strict';
// One vector program (spec/VECTORS.md "State", "Steps", "Results"): validates each step,
// runs it against the partition state and the nodes' seen windows, and builds the result.

const core = require('./epochgc');
const { jsonEqual } = require('./json');

class BadInput extends Error {
  constructor(field, message) {
    super(field ? `${field}: ${message}` : message);
    this.field = field;
    this.reason = message;
  }
}

const STATE_KEYS = [
  'max_applied_epoch', 'previous_applied_epoch', 'min_epoch_lower_bound', 'window_offset',
  'last_reconciled_log_offset', 'last_reconciled_offset', 'inactive_epoch',
];

// Per op: required fields, optional fields, result keys (in output order).
const OPS = {
  fence: { req: ['term', 'epoch'], opt: ['node'], out: ['admitted', 'window'] },
  apply_placeholder: { req: ['epoch', 'offset'], opt: [], out: ['accepted', 'applied_window', 'crashed'] },
  apply_advance_epoch: { req: ['epoch', 'offset'], opt: [], out: ['applied_window'] },
  apply_advance_gc_epoch: { req: ['epoch', 'offset'], opt: [], out: ['barrier_epoch', 'gc_safe_epoch', 'inactive_epoch'] },
  apply_reconciled: { req: ['lrlo'], opt: ['lro'], out: ['min_epoch_lower_bound', 'inactive_epoch'] },
  restart: { req: [], opt: ['node'], out: [] },
  state: { req: [], opt: [], out: STATE_KEYS },
  delete_partition: { req: [], opt: [], out: [] },
  create_partition: { req: [], opt: [], out: [] },
  gc_epoch: { req: ['snapshot_revision', 'partitions', 'reports'], opt: [], out: ['M', 'blocked', 'missing'] },
  gc_eligible: { req: ['key', 'age_s', 'M', 'grace_s'], opt: [], out: ['eligible', 'error', 'epoch'] },
};

const isInt = (v) => typeof v === 'bigint';
const isMap = (v) => v instanceof Map;

function nat(step, f) {
  const v = step.get(f);
  if (!isInt(v)) throw new BadInput(f, 'must be an integer');
  if (v < 0n) throw new BadInput(f, 'must be >= 0');
  return v;
}

function off(v, f) {
  if (!isInt(v)) throw new BadInput(f, 'must be an integer');
  if (v < -1n) throw new BadInput(f, 'must be >= -1');
  return v;
}

function offOrNull(v, f) {
  return v === null ? null : off(v, f);
}

function nonEmptyString(v, f) {
  if (typeof v !== 'string' || v.length === 0) throw new BadInput(f, 'must be a non-empty string');
  return v;
}

function seconds(v, f) {
  if (typeof v !== 'number' && !isInt(v)) throw new BadInput(f, 'must be a number');
  if (Number.isNaN(v) || v < 0) throw new BadInput(f, 'must be a number >= 0');
  return v;
}

function reportsOf(v, partitions) {
  if (!Array.isArray(v)) throw new BadInput('reports', 'must be a list');
  const seen = new Set();
  return v.map((r, k) => {
    const f = `reports[${k}]`;
    if (!isMap(r)) throw new BadInput(f, 'must be an object');
    for (const key of r.keys()) {
      if (!['partition', 'replica', 'inactive_epoch'].includes(key)) throw new BadInput(`${f}.${key}`, 'unknown field');
    }
    for (const key of ['partition', 'replica', 'inactive_epoch']) {
      if (!r.has(key)) throw new BadInput(`${f}.${key}`, 'missing');
    }
    const partition = nonEmptyString(r.get('partition'), `${f}.partition`);
    const replica = nonEmptyString(r.get('replica'), `${f}.replica`);
    const id = JSON.stringify([partition, replica]);
    if (seen.has(id)) throw new BadInput(f, `second report for (${partition}, ${replica})`);
    seen.add(id);
    return { partition, replica, inactive_epoch: offOrNull(r.get('inactive_epoch'), `${f}.inactive_epoch`) };
  });
}

function partitionsOf(v) {
  if (!Array.isArray(v)) throw new BadInput('partitions', 'must be a list');
  const seen = new Set();
  for (const [k, p] of v.entries()) {
    nonEmptyString(p, `partitions[${k}]`);
    if (seen.has(p)) throw new BadInput(`partitions[${k}]`, `duplicate partition ${p}`);
    seen.add(p);
  }
  return v;
}

const win = (s) => (s.max_applied_epoch === null ? null : [s.previous_applied_epoch, s.max_applied_epoch]);

class Replayer {
  constructor(variant) {
    if (!core.VARIANTS.includes(variant)) throw new BadInput('variant', `unknown variant ${variant}`);
    this.variant = variant;
    this.state = core.INITIAL;
    this.seen = new Map(); // node -> seen window
    this.lastOffset = null; // highest apply offset in the current log
    this.deleted = false;
  }

  // Checks `step` (a Map from the JSON parser) and returns its result object (op and result
  // keys, plus mismatch); throws BadInput, changing nothing, when it refuses the step.
  step(step) {
    if (!isMap(step)) throw new BadInput(null, 'a step must be a JSON object');
    const op = step.get('op');
    if (op === undefined) throw new BadInput('op', 'missing');
    if (typeof op !== 'string' || !Object.prototype.hasOwnProperty.call(OPS, op)) {
      throw new BadInput('op', `unknown op ${JSON.stringify(op)}`);
    }
    const spec = OPS[op];
    for (const k of step.keys()) {
      if (k !== 'op' && k !== 'note' && k !== 'expect' && !spec.req.includes(k) && !spec.opt.includes(k)) {
        throw new BadInput(k, `unknown field for ${op}`);
      }
    }
    for (const k of spec.req) if (!step.has(k)) throw new BadInput(k, 'missing');
    if (step.has('note') && typeof step.get('note') !== 'string') throw new BadInput('note', 'must be a string');
    const expect = step.get('expect');
    if (expect !== undefined) {
      if (!isMap(expect)) throw new BadInput('expect', 'must be an object');
      for (const k of expect.keys()) {
        if (k !== 'step' && k !== 'op' && !spec.out.includes(k)) throw new BadInput(`expect.${k}`, `not a result key of ${op}`);
      }
    }
    const result = { op, ...this[`_${op}`](step) };
    return result;
  }

  _fence(step) {
    const term = nat(step, 'term');
    const epoch = nat(step, 'epoch');
    const node = step.has('node') ? nonEmptyString(step.get('node'), 'node') : 'n0';
    if (this.deleted) return { admitted: false, window: null };
    const seen = this.seen.has(node) ? this.seen.get(node) : null;
    const d = core.fence(seen, this.state, term, epoch, this.variant);
    if (d.seen !== null) this.seen.set(node, d.seen);
    return { admitted: d.admitted, window: d.window };
  }

  _checkOffset(step) {
    const epoch = nat(step, 'epoch');
    const offset = nat(step, 'offset');
    if (this.deleted) return { epoch, offset };
    if (this.lastOffset !== null && offset <= this.lastOffset) {
      throw new BadInput('offset', `log offsets must increase: ${offset} after ${this.lastOffset}`);
    }
    if (offset <= this.state.last_reconciled_log_offset) {
      throw new BadInput('offset', `must be above last_reconciled_log_offset ${this.state.last_reconciled_log_offset}`);
    }
    return { epoch, offset };
  }

  _apply_placeholder(step) {
    const { epoch, offset } = this._checkOffset(step);
    if (this.deleted) return { accepted: false, applied_window: null };
    const r = core.applyPlaceholder(this.state, epoch, offset, this.variant);
    if (!r.accepted && core.assertAtApply(this.variant)
        && !core.accepts(this.state, epoch, this.variant)) {
      // the replica crashed on this entry (outside the window; a barrier refusal is never a
      // crash): nothing applied, its replay crashes again
      return { accepted: false, applied_window: win(this.state), crashed: true };
    }
    this.state = r.state;
    this.lastOffset = offset;
    if (core.followersSlide(this.variant)) {
      for (const [n, w] of this.seen) this.seen.set(n, core.followerSlide(w, epoch));
    }
    const out = { accepted: r.accepted, applied_window: win(this.state) };
    if (core.assertAtApply(this.variant)) out.crashed = false;
    return out;
  }

  _apply_advance_epoch(step) {
    const { epoch, offset } = this._checkOffset(step);
    if (this.deleted) return { applied_window: null };
    this.state = core.applyAdvanceEpoch(this.state, epoch, offset, this.variant);
    this.lastOffset = offset;
    return { applied_window: win(this.state) };
  }

  _apply_advance_gc_epoch(step) {
    const { epoch, offset } = this._checkOffset(step);
    if (this.deleted) return { barrier_epoch: null, gc_safe_epoch: null, inactive_epoch: null };
    this.state = core.applyAdvanceGcEpoch(this.state, epoch, offset);
    this.lastOffset = offset;
    const none = (v) => (v < 0n ? null : v); // -1: none
    return {
      barrier_epoch: none(this.state.barrier_epoch),
      gc_safe_epoch: none(this.state.gc_safe_epoch),
      inactive_epoch: core.inactiveEpoch(this.state, this.variant),
    };
  }

  _apply_reconciled(step) {
    const lrlo = off(step.get('lrlo'), 'lrlo');
    const lro = step.has('lro') ? off(step.get('lro'), 'lro') : null;
    if (this.deleted) return { min_epoch_lower_bound: null, inactive_epoch: null };
    this.state = core.applyReconciled(this.state, lrlo, lro);
    return {
      min_epoch_lower_bound: this.state.min_epoch_lower_bound,
      inactive_epoch: core.inactiveEpoch(this.state, this.variant),
    };
  }

  _restart(step) {
    if (step.has('node')) this.seen.delete(nonEmptyString(step.get('node'), 'node'));
    else this.seen.clear();
    return {};
  }

  _state() {
    const s = this.state;
    return {
      max_applied_epoch: s.max_applied_epoch,
      previous_applied_epoch: s.previous_applied_epoch,
      min_epoch_lower_bound: s.min_epoch_lower_bound,
      window_offset: s.window_offset,
      last_reconciled_log_offset: s.last_reconciled_log_offset,
      last_reconciled_offset: s.last_reconciled_offset,
      inactive_epoch: core.inactiveEpoch(s, this.variant),
    };
  }

  _delete_partition() {
    if (this.deleted) throw new BadInput(null, 'delete_partition: the partition is already deleted');
    this.deleted = true;
    this.state = core.INITIAL;
    this.seen.clear();
    this.lastOffset = null;
    return {};
  }

  _create_partition() {
    if (!this.deleted) throw new BadInput(null, 'create_partition: the partition exists');
    this.deleted = false;
    return {};
  }

  _gc_epoch(step) {
    const rev = nat(step, 'snapshot_revision');
    const partitions = partitionsOf(step.get('partitions'));
    const reports = reportsOf(step.get('reports'), partitions);
    return core.gcEpoch(rev, partitions, reports, this.variant);
  }

  _gc_eligible(step) {
    const key = step.get('key');
    if (typeof key !== 'string') throw new BadInput('key', 'must be a string');
    const age = seconds(step.get('age_s'), 'age_s');
    const M = offOrNull(step.get('M'), 'M');
    const grace = seconds(step.get('grace_s'), 'grace_s');
    return core.gcEligible(key, age, M, grace);
  }
}

// Adds "mismatch" for every expected key that differs (VECTORS.md "Expect and mismatch").
function withMismatch(result, expect) {
  if (expect === undefined) return result;
  const mismatch = {};
  let any = false;
  for (const [k, want] of expect) {
    const got = result[k];
    if (!jsonEqual(want, got === undefined ? null : got)) {
      mismatch[k] = { expected: want, actual: got === undefined ? null : got };
      any = true;
    }
  }
  return any ? { ...result, mismatch } : result;
}

module.exports = { Replayer, BadInput, withMismatch, OPS };
