'use strict';
// Strict JSON for the vector format (spec/VECTORS.md "Files"): JSON.parse cannot be used
// as is because it silently keeps the last of two equal keys and rounds integers above
// 2^53 (epochs go up to 10^18 - 1). Integers become BigInt, other numbers Number.

class JsonError extends Error {}

const WS = new Set([' ', '\t', '\n', '\r']);
const ESC = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const NUM = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

function parse(text) {
  let i = 0;
  const fail = (what) => {
    throw new JsonError(`${what} at column ${i + 1}`);
  };
  const skip = () => {
    while (i < text.length && WS.has(text[i])) i++;
  };
  const str = () => {
    i++; // opening quote
    let out = '';
    let start = i;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c < 0x20) fail('control character in string');
      if (c === 0x5c) {
        out += text.slice(start, i);
        const e = text[i + 1];
        if (e === 'u') {
          const hex = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
          out += String.fromCharCode(parseInt(hex, 16));
          i += 6;
        } else if (e !== undefined && Object.prototype.hasOwnProperty.call(ESC, e)) {
          out += ESC[e];
          i += 2;
        } else {
          fail('bad escape');
        }
        start = i;
        continue;
      }
      i++;
    }
    out += text.slice(start, i);
    i++;
    return out;
  };
  const value = () => {
    skip();
    const c = text[i];
    if (c === '{') {
      i++;
      const obj = new Map();
      skip();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        skip();
        if (text[i] !== '"') fail('expected a string key');
        const k = str();
        if (obj.has(k)) fail(`key ${JSON.stringify(k)} twice in one object`);
        skip();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        obj.set(k, value());
        skip();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const arr = [];
      skip();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        skip();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (m) {
      i = NUM.lastIndex;
      return m[1] === undefined && m[2] === undefined ? BigInt(m[0]) : Number(m[0]);
    }
    return fail('expected a JSON value');
  };
  const v = value();
  skip();
  if (i !== text.length) fail('extra data after the JSON value');
  return v;
}

// Python's float repr (shortest round trip; exponent form below 1e-4 and from 1e16), so
// that an echoed float prints as `epochgc replay` prints it.
function pyFloat(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mant, expText] = x.toExponential().split('e');
  const exp = Number(expText);
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  let body;
  if (exp >= 16 || exp < -4) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp).toString().padStart(2, '0');
    body = `${m}e${exp < 0 ? '-' : '+'}${e}`;
  } else if (exp < 0) {
    body = `0.${'0'.repeat(-exp - 1)}${digits}`;
  } else if (digits.length <= exp + 1) {
    body = `${digits}${'0'.repeat(exp + 1 - digits.length)}.0`;
  } else {
    body = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  }
  return neg ? `-${body}` : body;
}

// Compact output with Python's default ensure_ascii escaping (json.dumps).
function pyString(s) {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function stringify(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return pyFloat(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') return pyString(v);
  if (Array.isArray(v)) return `[${v.map(stringify).join(',')}]`;
  const entries = v instanceof Map ? [...v.entries()] : Object.entries(v);
  return `{${entries.map(([k, x]) => `${pyString(k)}:${stringify(x)}`).join(',')}}`;
}

// JSON equality as in VECTORS.md "Expect and mismatch": true is not 1, 1 equals 1.0.
function jsonEqual(a, b) {
  const num = (x) => typeof x === 'bigint' || typeof x === 'number';
  if (num(a) && num(b)) return a == b; // eslint-disable-line eqeqeq -- exact BigInt/Number comparison
  if (a === null || b === null) return a === b;
  if (typeof a !== typeof b) return false;
  if (typeof a !== 'object') return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, k) => jsonEqual(x, b[k]));
  const ea = a instanceof Map ? a : new Map(Object.entries(a));
  const eb = b instanceof Map ? b : new Map(Object.entries(b));
  if (ea.size !== eb.size) return false;
  for (const [k, x] of ea) if (!eb.has(k) || !jsonEqual(x, eb.get(k))) return false;
  return true;
}

module.exports = { parse, stringify, jsonEqual, JsonError };
