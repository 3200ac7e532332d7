// A small JSON reader for object delivery and configuration. It is used only
// off the packet path (when policies change), so it favours a simple DOM over
// streaming: evaluators turn the DOM into their own compiled structures and
// drop it.

export enum JKind { Null = 0, Bool = 1, Number = 2, String = 3, Array = 4, Object = 5 }

export class JValue {
  kind: JKind = JKind.Null;
  b: bool = false;
  n: f64 = 0;
  s: string = "";
  items: JValue[] | null = null;
  keys: string[] | null = null;

  get isNull(): bool { return this.kind == JKind.Null; }
  get isObject(): bool { return this.kind == JKind.Object; }
  get isArray(): bool { return this.kind == JKind.Array; }
  get isString(): bool { return this.kind == JKind.String; }
  get isNumber(): bool { return this.kind == JKind.Number; }
  get isBool(): bool { return this.kind == JKind.Bool; }

  /** Member of an object, or null when absent or when this is not an object. */
  get(key: string): JValue | null {
    if (this.kind != JKind.Object) return null;
    const keys = this.keys!;
    for (let i = 0, n = keys.length; i < n; i++) {
      if (keys[i] == key) return this.items![i];
    }
    return null;
  }

  /** Present and not JSON null. */
  has(key: string): bool {
    const v = this.get(key);
    return v != null && v.kind != JKind.Null;
  }

  /** Elements of an array; an empty list for anything else. */
  get array(): JValue[] {
    if (this.kind != JKind.Array) return [];
    return this.items!;
  }

  /** Keys of an object; an empty list for anything else. */
  get objectKeys(): string[] {
    if (this.kind != JKind.Object) return [];
    return this.keys!;
  }

  str(key: string, fallback: string = ""): string {
    const v = this.get(key);
    return v != null && v.kind == JKind.String ? v.s : fallback;
  }

  int(key: string, fallback: i64 = 0): i64 {
    const v = this.get(key);
    return v != null && v.kind == JKind.Number ? <i64>v.n : fallback;
  }

  bool(key: string, fallback: bool = false): bool {
    const v = this.get(key);
    return v != null && v.kind == JKind.Bool ? v.b : fallback;
  }

  /** Follows a dotted path of object keys: `metadata.name`. */
  path(dotted: string): JValue | null {
    let cur: JValue | null = this;
    const parts = dotted.split(".");
    for (let i = 0; i < parts.length && cur != null; i++) cur = cur!.get(parts[i]);
    return cur;
  }
}

const NULL_VALUE = new JValue();

/** Parse error: set when parseJSON returns null. */
export let jsonError: string = "";

class Reader {
  pos: usize;
  constructor(public start: usize, public end: usize) { this.pos = start; }
  fail: bool = false;
  message: string = "";
  error(msg: string): JValue {
    if (!this.fail) {
      this.fail = true;
      this.message = msg + " at byte " + (this.pos - this.start).toString();
    }
    return NULL_VALUE;
  }
  skipWs(): void {
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09) this.pos++;
      else break;
    }
  }
  peek(): i32 { return this.pos < this.end ? <i32>load<u8>(this.pos) : -1; }
}

/** Parses UTF-8 JSON at [ptr, ptr+len). Returns null and sets jsonError on bad input. */
export function parseJSON(ptr: usize, len: usize): JValue | null {
  const r = new Reader(ptr, ptr + len);
  r.skipWs();
  const v = parseValue(r, 0);
  r.skipWs();
  if (!r.fail && r.pos != r.end) r.error("trailing characters");
  if (r.fail) { jsonError = r.message; return null; }
  return v;
}

/** Convenience for tests and configuration given as an AssemblyScript string. */
export function parseJSONString(text: string): JValue | null {
  const buf = String.UTF8.encode(text);
  return parseJSON(changetype<usize>(buf), <usize>buf.byteLength);
}

const MAX_DEPTH = 128;

function parseValue(r: Reader, depth: i32): JValue {
  if (depth > MAX_DEPTH) return r.error("nesting too deep");
  const c = r.peek();
  if (c == 0x7b) return parseObject(r, depth);
  if (c == 0x5b) return parseArray(r, depth);
  if (c == 0x22) {
    const v = new JValue();
    v.kind = JKind.String;
    v.s = parseString(r);
    return v;
  }
  if (c == 0x74) return literal(r, "true", JKind.Bool, true);
  if (c == 0x66) return literal(r, "false", JKind.Bool, false);
  if (c == 0x6e) return literal(r, "null", JKind.Null, false);
  if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return parseNumber(r);
  return r.error("unexpected character");
}

function literal(r: Reader, word: string, kind: JKind, b: bool): JValue {
  const n = word.length;
  if (r.pos + <usize>n > r.end) return r.error("truncated literal");
  for (let i = 0; i < n; i++) {
    if (<i32>load<u8>(r.pos + <usize>i) != word.charCodeAt(i)) return r.error("bad literal");
  }
  r.pos += <usize>n;
  if (kind == JKind.Null) return new JValue();
  const v = new JValue();
  v.kind = kind;
  v.b = b;
  return v;
}

function parseNumber(r: Reader): JValue {
  let neg = false;
  if (r.peek() == 0x2d) { neg = true; r.pos++; }
  let mant: f64 = 0;
  let digits = 0;
  while (r.pos < r.end) {
    const c = <i32>load<u8>(r.pos);
    if (c < 0x30 || c > 0x39) break;
    mant = mant * 10 + <f64>(c - 0x30);
    r.pos++; digits++;
  }
  if (digits == 0) return r.error("bad number");
  let scale: f64 = 1;
  if (r.peek() == 0x2e) {
    r.pos++;
    let frac = 0;
    while (r.pos < r.end) {
      const c = <i32>load<u8>(r.pos);
      if (c < 0x30 || c > 0x39) break;
      mant = mant * 10 + <f64>(c - 0x30);
      scale *= 10;
      r.pos++; frac++;
    }
    if (frac == 0) return r.error("bad fraction");
  }
  let exp = 0;
  const e = r.peek();
  if (e == 0x65 || e == 0x45) {
    r.pos++;
    let eneg = false;
    const s = r.peek();
    if (s == 0x2d || s == 0x2b) { eneg = s == 0x2d; r.pos++; }
    let ed = 0;
    while (r.pos < r.end) {
      const c = <i32>load<u8>(r.pos);
      if (c < 0x30 || c > 0x39) break;
      if (exp < 10000) exp = exp * 10 + (c - 0x30);
      r.pos++; ed++;
    }
    if (ed == 0) return r.error("bad exponent");
    if (eneg) exp = -exp;
  }
  let value = mant / scale;
  if (exp != 0) value *= Math.pow(10, <f64>exp);
  const v = new JValue();
  v.kind = JKind.Number;
  v.n = neg ? -value : value;
  return v;
}

function hexDigit(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

// Short ASCII strings (object keys above all, and values such as "TCP",
// "Ingress" or a label's value) repeat across the objects of a kind: a
// feed's policies parse the same few hundred strings thousands of times. Each
// one used to be a new string, garbage as soon as the evaluator had compiled
// the object, and allocating and collecting them was most of a policy's parse.
// Strings are immutable, so the parser hands out one string per distinct
// short text: a direct-mapped table of recent ones (a collision replaces the
// older), at most INTERN_SLOTS strings of at most INTERN_MAX_BYTES each kept alive.
const INTERN_SLOTS = 2048;
const INTERN_MAX_BYTES: usize = 48;
const internHashes = new StaticArray<u32>(INTERN_SLOTS);
const internStrings = new StaticArray<string | null>(INTERN_SLOTS);

/** The string of the ASCII bytes [start, start+n) with hash `h`: the table's, or decoded and kept there. */
function internAscii(start: usize, n: usize, h: u32): string {
  const slot = <i32>(h & (INTERN_SLOTS - 1));
  const known = unchecked(internStrings[slot]);
  if (known != null && unchecked(internHashes[slot]) == h && <usize>known.length == n) {
    const chars = changetype<usize>(known);
    let i: usize = 0;
    while (i < n && <u32>load<u16>(chars + (i << 1)) == <u32>load<u8>(start + i)) i++;
    if (i == n) return known;
  }
  const s = String.UTF8.decodeUnsafe(start, n);
  unchecked(internHashes[slot] = h);
  unchecked(internStrings[slot] = s);
  return s;
}

function parseString(r: Reader): string {
  r.pos++; // opening quote
  const segStart = r.pos;
  // Fast path: no escapes, decode the bytes in one go (a short ASCII string through the table).
  let h: u32 = 2166136261; // FNV-1a over the bytes
  let high: u32 = 0;
  while (r.pos < r.end) {
    const c = load<u8>(r.pos);
    if (c == 0x22) {
      const n = r.pos - segStart;
      r.pos++;
      if (n == 0) return "";
      if (high == 0 && n <= INTERN_MAX_BYTES) return internAscii(segStart, n, h);
      return String.UTF8.decodeUnsafe(segStart, n);
    }
    if (c == 0x5c) break;
    if (c < 0x20) { r.error("control character in string"); return ""; }
    h = (h ^ <u32>c) * 16777619;
    high |= <u32>c & 0x80;
    r.pos++;
  }
  if (r.pos >= r.end) { r.error("unterminated string"); return ""; }
  let out = String.UTF8.decodeUnsafe(segStart, r.pos - segStart);
  while (r.pos < r.end) {
    const c = load<u8>(r.pos);
    if (c == 0x22) { r.pos++; return out; }
    if (c == 0x5c) {
      r.pos++;
      if (r.pos >= r.end) break;
      const esc = load<u8>(r.pos);
      r.pos++;
      if (esc == 0x22) out += "\"";
      else if (esc == 0x5c) out += "\\";
      else if (esc == 0x2f) out += "/";
      else if (esc == 0x62) out += "\b";
      else if (esc == 0x66) out += "\f";
      else if (esc == 0x6e) out += "\n";
      else if (esc == 0x72) out += "\r";
      else if (esc == 0x74) out += "\t";
      else if (esc == 0x75) {
        if (r.pos + 4 > r.end) break;
        let code = 0;
        for (let i = 0; i < 4; i++) {
          const h = hexDigit(<i32>load<u8>(r.pos + <usize>i));
          if (h < 0) { r.error("bad \\u escape"); return ""; }
          code = (code << 4) | h;
        }
        r.pos += 4;
        out += String.fromCharCode(code);
      } else { r.error("bad escape"); return ""; }
      continue;
    }
    const runStart = r.pos;
    while (r.pos < r.end) {
      const d = load<u8>(r.pos);
      if (d == 0x22 || d == 0x5c) break;
      if (d < 0x20) { r.error("control character in string"); return ""; }
      r.pos++;
    }
    out += String.UTF8.decodeUnsafe(runStart, r.pos - runStart);
  }
  r.error("unterminated string");
  return "";
}

function parseArray(r: Reader, depth: i32): JValue {
  r.pos++;
  const v = new JValue();
  v.kind = JKind.Array;
  const items = new Array<JValue>();
  v.items = items;
  r.skipWs();
  if (r.peek() == 0x5d) { r.pos++; return v; }
  while (!r.fail) {
    r.skipWs();
    items.push(parseValue(r, depth + 1));
    r.skipWs();
    const c = r.peek();
    if (c == 0x2c) { r.pos++; continue; }
    if (c == 0x5d) { r.pos++; return v; }
    return r.error("expected , or ]");
  }
  return v;
}

function parseObject(r: Reader, depth: i32): JValue {
  r.pos++;
  const v = new JValue();
  v.kind = JKind.Object;
  const keys = new Array<string>();
  const items = new Array<JValue>();
  v.keys = keys;
  v.items = items;
  r.skipWs();
  if (r.peek() == 0x7d) { r.pos++; return v; }
  while (!r.fail) {
    r.skipWs();
    if (r.peek() != 0x22) return r.error("expected a string key");
    const key = parseString(r);
    r.skipWs();
    if (r.peek() != 0x3a) return r.error("expected :");
    r.pos++;
    r.skipWs();
    const val = parseValue(r, depth + 1);
    keys.push(key);
    items.push(val);
    r.skipWs();
    const c = r.peek();
    if (c == 0x2c) { r.pos++; continue; }
    if (c == 0x7d) { r.pos++; return v; }
    return r.error("expected , or }");
  }
  return v;
}
