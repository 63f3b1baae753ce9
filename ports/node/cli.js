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

// The index of the first byte of buf that is not well-formed UTF-8 (Unicode 15, table 3-7,
// as Python's decoder applies it: no overlongs, surrogates or code points past U+10FFFF),
// or -1.
function firstBadUtf8(buf) {
  let i = 0;
  while (i < buf.length) {
    const b = buf[i];
    if (b < 0x80) { i += 1; continue; }
    let len = 0;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) len = 2;
    else if (b === 0xe0) { len = 3; lo = 0xa0; }
    else if ((b >= 0xe1 && b <= 0xec) || b === 0xee || b === 0xef) len = 3;
    else if (b === 0xed) { len = 3; hi = 0x9f; }
    else if (b === 0xf0) { len = 4; lo = 0x90; }
    else if (b >= 0xf1 && b <= 0xf3) len = 4;
    else if (b === 0xf4) { len = 4; hi = 0x8f; }
    else return i;
    if (i + len > buf.length || buf[i + 1] < lo || buf[i + 1] > hi) return i;
    for (let k = 2; k < len; k += 1) if (buf[i + k] < 0x80 || buf[i + k] > 0xbf) return i;
    i += len;
  }
  return -1;
}

// VECTORS.md "Files": invalid UTF-8 makes the file unreadable, said as `epochgc replay`
// says it: the first bad byte's line (lines end at \n, \r\n or \r) and column (its byte in
// the line, from 1), before any step. A regular file only; stdin is decoded as it comes.
function notUtf8(path) {
  let buf;
  try {
    if (!fs.statSync(path).isFile()) return null;
    buf = fs.readFileSync(path);
  } catch (e) {
    return null; // the replay's own open says why
  }
  const bad = firstBadUtf8(buf);
  if (bad < 0) return null;
  let line = 1;
  let start = 0;
  for (let i = 0; i < bad; i += 1) {
    if (buf[i] === 0x0a || buf[i] === 0x0d) {
      if (buf[i] === 0x0d && i + 1 < bad && buf[i + 1] === 0x0a) i += 1;
      line += 1;
      start = i + 1;
    }
  }
  return `${line}: not UTF-8 (byte 0x${buf[bad].toString(16).padStart(2, '0')} at column ${bad - start + 1})`;
}

function replay(path, cliVariant, out, err) {
  const label = path === '-' ? '<stdin>' : path; // as `epochgc replay` names stdin
  if (cliVariant !== null && !VARIANTS.includes(cliVariant)) {
    err(`epochgc replay: error: ${label}: variant: unknown variant ${JSON.stringify(cliVariant)}`);
    return 65;
  }
  const unreadable = path === '-' ? null : notUtf8(path);
  if (unreadable !== null) {
    err(`epochgc replay: error: ${label}:${unreadable}`);
    return 65;
  }
  let lines;
  try {
    lines = readLines(path === '-' ? 0 : fs.openSync(path, 'r'));
  } catch (e) {
    err(`epochgc replay: error: ${label}: cannot read: ${e.message}`);
    return 65;
  }
  try {
    return replayLines(lines, label, path, cliVariant, out, err);
  } catch (e) {
    if (e instanceof LineTooLong) {
      err(`epochgc replay: error: ${label}:${e.lineNo}: line longer than ${MAX_LINE} characters`);
      return 65;
    }
    if (e instanceof ReadFailed) {
      err(`epochgc replay: error: ${label}: cannot read: ${e.message}`);
      return 65;
    }
    throw e;
  } finally {
    if (path !== '-') lines.close();
  }
}

// VECTORS.md "Files": a line holds at most 2^20 characters (code points, its end of line
// counted as one), else it is bad input, refused once that much of it was read: the file is
// read in chunks, never whole (`/dev/zero` has no line end).
const MAX_LINE = 1 << 20;

class LineTooLong extends Error {
  constructor(lineNo) {
    super(`line ${lineNo} is too long`);
    this.lineNo = lineNo;
  }
}

class ReadFailed extends Error {}

const codePoints = (s) => s.length - (s.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g) ?? []).length;

// The lines of fd, lazily (an iterable with close()). Invalid UTF-8 makes the file
// unreadable (no replacement characters); a BOM stays and makes the first line malformed,
// as for `epochgc replay`. Lines end at \r\n, \r or \n (Python's universal newlines).
function readLines(fd) {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const buf = Buffer.alloc(1 << 16);
  function* gen() {
    let pending = '';
    let lineNo = 0;
    let eof = false;
    while (!eof) {
      let n;
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        if (e.code === 'EAGAIN') {
          nap();
          continue;
        }
        if (e.code !== 'EOF') throw new ReadFailed(e.message);
        n = 0;
      }
      eof = n === 0;
      try {
        pending += eof ? decoder.decode() : decoder.decode(buf.subarray(0, n), { stream: true });
      } catch (e) {
        throw new ReadFailed(e.message);
      }
      // A \r at the end may be the first half of \r\n: it waits for the next chunk.
      const carry = !eof && pending.endsWith('\r') ? '\r' : '';
      const parts = pending.slice(0, pending.length - carry.length).split(/\r\n|\r|\n/);
      const rest = parts.pop();
      pending = rest + carry;
      for (const line of parts) {
        lineNo += 1;
        if (line.length >= MAX_LINE && codePoints(line) + 1 > MAX_LINE) throw new LineTooLong(lineNo);
        yield line;
      }
      if (rest.length > MAX_LINE && codePoints(rest) > MAX_LINE) throw new LineTooLong(lineNo + 1);
    }
    if (pending !== '') {
      lineNo += 1;
      yield pending;
    }
  }
  const it = gen();
  it.close = () => {
    if (fd !== 0) fs.closeSync(fd);
  };
  return it;
}

function replayLines(lines, label, path, cliVariant, out, err) {
  const fallback = cliVariant ?? (path === '-' ? null : variantFromName(path)) ?? 'reference';
  let header = null;
  let r = null;
  let n = 0;
  const bad = [];
  let k = -1;
  for (const raw of lines) {
    k += 1;
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
        err(`epochgc replay: error: ${label}:${k + 1}: variant: ${why}`);
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
      err(`epochgc replay: error: ${label}:${k + 1}: step ${n}: ${where}`);
      return 65;
    }
    if (result.mismatch) bad.push(n);
    out(stringify(result));
  }
  if (n === 0) {
    // Nothing was checked (VECTORS.md, replay's exit codes): an empty file or one of
    // comments only is bad input, not a replay that agreed.
    err(`epochgc replay: error: ${label}: no steps (the file is empty or holds only comments)`);
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
      // The reader went away (Node ignores SIGPIPE, so the write fails with EPIPE): end
      // quietly with exit 1, the output incomplete, as `epochgc` and the model's port do on
      // a closed pipe (the stack trace of an uncaught EPIPE told the operator nothing).
      if (e.code === 'EPIPE') process.exit(1);
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
    // A closed stdout (`replay FILE | head -1`) ends it quietly with exit 1, as `epochgc
    // replay` (VECTORS.md): the output is incomplete, the input is not at fault.
    process.stdout.on('error', (e) => {
      if (e.code !== 'EPIPE') throw e;
      process.exit(1);
    });
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
