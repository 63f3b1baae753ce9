#!/usr/bin/env node
'use strict';
// node ports/node/cli.js replay [--variant NAME] FILE.jsonl   (as `epochgc replay`)
// node ports/node/cli.js serve                                 (the conform protocol)
// node ports/node/cli.js batch    (many replays in one process, for tests: one JSON line
//   {"path": FILE, "variant": NAME or null} in, one {"code", "out", "err"} line out)

const fs = require('fs');
const readline = require('readline');
const { parse, stringify, JsonError } = require('./json');
const { Replayer, BadInput, withMismatch } = require('./replay');
const { VARIANTS } = require('./epochgc');

// Python's str.strip(): its white space differs from String.prototype.trim (\x1c-\x1f and
// \x85 are white space, a BOM is not). Lines are stripped before they are classified and parsed.
const PY_WS = '[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const PY_STRIP = new RegExp(`^${PY_WS}+|${PY_WS}+$`, 'g');
const pyStrip = (text) => text.replace(PY_STRIP, '');

const HEADER = /^#\s*variant:\s*(.*?)\s*$/;

// VECTORS.md "Files": --variant, else the header, else the longest known `-NAME.jsonl`
// (or `NAME.jsonl`) suffix of the file name, else reference.
function variantFromName(path) {
  const base = path.split('/').pop();
  let best = null;
  for (const v of VARIANTS) {
    if ((base === `${v}.jsonl` || base.endsWith(`-${v}.jsonl`)) && (best === null || v.length > best.length)) best = v;
  }
  return best;
}

function replay(path, cliVariant, out, err) {
  const label = path;
  if (cliVariant !== null && !VARIANTS.includes(cliVariant)) {
    err(`epochgc replay: ${label}: variant: unknown variant ${JSON.stringify(cliVariant)}`);
    return 65;
  }
  let text;
  try {
    // Invalid UTF-8 makes the file unreadable (no replacement characters); a BOM stays
    // and makes the first line malformed, as for `epochgc replay`.
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(fs.readFileSync(path === '-' ? 0 : path));
  } catch (e) {
    err(`epochgc replay: ${label}: cannot read: ${e.message}`);
    return 65;
  }
  const lines = text.split(/\r\n|\r|\n/); // Python's universal newlines
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const fallback = cliVariant ?? (path === '-' ? null : variantFromName(path)) ?? 'reference';
  let header = null;
  let r = null;
  let n = 0;
  const bad = [];
  for (const [k, raw] of lines.entries()) {
    const line = pyStrip(raw);
    if (line === '') continue;
    if (line.startsWith('#')) {
      // The header is checked where it stands: the steps before a late one were printed.
      const m = HEADER.exec(line);
      if (m === null) continue;
      const why = r !== null ? 'the variant header must come before the first step'
        : header !== null ? 'the variant header is given twice'
          : !VARIANTS.includes(m[1]) ? `unknown variant ${JSON.stringify(m[1])}` : null;
      if (why !== null) {
        err(`epochgc replay: ${label}:${k + 1}: variant: ${why}`);
        return 65;
      }
      header = m[1];
      continue;
    }
    if (r === null) r = new Replayer(cliVariant ?? header ?? fallback);
    n += 1;
    let result;
    try {
      const step = parse(line);
      result = withMismatch({ step: BigInt(n), ...r.step(step) }, step.get('expect'));
    } catch (e) {
      if (!(e instanceof BadInput) && !(e instanceof JsonError)) throw e;
      const where = e instanceof BadInput ? e.message : `malformed JSON: ${e.message}`;
      err(`epochgc replay: ${label}:${k + 1}: step ${n}: ${where}`);
      return 65;
    }
    if (result.mismatch) bad.push(n);
    out(stringify(result));
  }
  if (n === 0) {
    // Nothing was checked (VECTORS.md, replay's exit codes): an empty file or one of
    // comments only is bad input, not a replay that agreed.
    err(`epochgc replay: ${label}: no steps (the file is empty or holds only comments)`);
    return 65;
  }
  if (bad.length) {
    err(`epochgc replay: ${label}: ${bad.length} of ${n} steps disagree with expect (steps ${bad.join(', ')})`);
    return 1;
  }
  return 0;
}

// The conform protocol (VECTORS.md "The port protocol"): one answer line per input line.
function serve() {
  let r = null;
  // Each line is framed as {"seq": N, "line": TEXT}; the answer is {"seq": N, "answer": {...}}
  // (VECTORS.md "The port protocol"): the driver matches answers to lines by N.
  const framed = (raw) => {
    let seq;
    let text;
    try {
      const env = parse(raw);
      if (!(env instanceof Map) || env.size !== 2 || typeof env.get('seq') !== 'bigint' || typeof env.get('line') !== 'string') {
        throw new JsonError('expected {"seq": N, "line": TEXT}');
      }
      seq = env.get('seq');
      text = env.get('line');
    } catch (e) {
      process.stderr.write(`cli.js serve: not a framed line: ${e.message}\n`);
      process.exit(65);
    }
    return `{"seq":${seq},"answer":${answer(text)}}`;
  };
  const answer = (raw) => {
    try {
      const msg = parse(raw); // the protocol line as is: JSON white space only
      if (msg instanceof Map && msg.get('op') === 'reset') {
        for (const k of msg.keys()) if (k !== 'op' && k !== 'variant') throw new BadInput(`reset: ${k}`, 'unknown field');
        const v = msg.get('variant');
        if (typeof v !== 'string' || !VARIANTS.includes(v)) throw new BadInput('variant', `unknown variant ${stringify(v)}`);
        r = new Replayer(v);
        return '{}';
      }
      if (r === null) throw new BadInput(null, 'no reset before the first step');
      return stringify(r.step(msg));
    } catch (e) {
      if (!(e instanceof BadInput) && !(e instanceof JsonError)) return stringify({ error: `internal error: ${e.stack}` });
      return stringify({ error: e.message });
    }
  };
  // Blocking reads and writes, no event loop: the driver waits for each answer, so a
  // round trip is all that counts (about 1.4x the steps/s of readline on a busy machine).
  const buf = Buffer.alloc(1 << 16);
  let pending = '';
  for (;;) {
    let n;
    try {
      n = fs.readSync(0, buf, 0, buf.length, null);
    } catch (e) {
      if (e.code === 'EAGAIN') {
        nap(); // a non-blocking stdin (a terminal, say): wait instead of spinning
        continue;
      }
      if (e.code === 'EOF') break;
      throw e;
    }
    if (n === 0) break;
    const parts = (pending + buf.toString('utf8', 0, n)).split('\n');
    pending = parts.pop();
    if (parts.length) writeAll(`${parts.map((l) => framed(l.endsWith('\r') ? l.slice(0, -1) : l)).join('\n')}\n`);
  }
  if (pending !== '') writeAll(`${framed(pending)}\n`);
}

const napCell = new Int32Array(new SharedArrayBuffer(4));
function nap() {
  Atomics.wait(napCell, 0, 0, 1);
}

function writeAll(text) {
  const data = Buffer.from(text, 'utf8');
  for (let off = 0; off < data.length;) {
    try {
      off += fs.writeSync(1, data, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      nap();
    }
  }
}

// Node starts slowly on a loaded machine: the tests replay a hundred files in one process.
function batch() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  rl.on('line', (raw) => {
    const req = JSON.parse(raw);
    const out = [];
    const err = [];
    const code = replay(req.path, req.variant ?? null, (l) => out.push(l), (l) => err.push(l));
    process.stdout.write(`${JSON.stringify({ code, out, err })}\n`);
  });
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === 'serve' && rest.length === 0) {
    serve();
    return;
  }
  if (cmd === 'batch' && rest.length === 0) {
    batch();
    return;
  }
  if (cmd === 'replay') {
    let variant = null;
    const files = [];
    for (let k = 0; k < rest.length; k++) {
      if (rest[k] === '--variant') variant = rest[++k] ?? '';
      else files.push(rest[k]);
    }
    if (files.length !== 1) {
      process.stderr.write('usage: cli.js replay [--variant NAME] FILE.jsonl\n');
      process.exitCode = 64;
      return;
    }
    const outLines = [];
    const code = replay(files[0], variant, (l) => outLines.push(l), (l) => process.stderr.write(`${l}\n`));
    if (outLines.length) process.stdout.write(`${outLines.join('\n')}\n`);
    process.exitCode = code;
    return;
  }
  process.stderr.write('usage: cli.js replay [--variant NAME] FILE.jsonl | cli.js serve\n');
  process.exitCode = 64;
}

module.exports = { replay, variantFromName };
if (require.main === module) main(process.argv.slice(2));
