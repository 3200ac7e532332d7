// What a memory image needs beyond the linear memory: the module's mutable
// globals (the AssemblyScript runtime keeps its heap and collector state in
// them, a module its top-level variables). WebAssembly gives the host no way
// to read a global the module does not export, so the loader adds an export
// for each one to the instrumented binary, under names in a prefix that
// uploaded modules may not use (loader.ts refuses them). The module's code is
// untouched: an export only names a global.
import { readWasmSummary } from './wasm-binary.js';

/** Export names the host adds for the mutable globals (`kwp_image_global_<index>`); reserved. */
export const IMAGE_GLOBAL_PREFIX = 'kwp_image_global_';

/** Value types whose globals JavaScript can read and write: i32, i64, f32, f64. */
const NUMERIC_TYPES = new Set([0x7f, 0x7e, 0x7d, 0x7c]);

export interface ImageGlobals {
  /** The binary with the added exports. */
  bytes: Uint8Array;
  /**
   * The added export names, in global index order; undefined when an image
   * cannot capture the module's state (a mutable global JavaScript cannot
   * read, such as a v128) and its instances are always fed by replay.
   */
  names: string[] | undefined;
}

function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

/** Reads an unsigned LEB128 at `pos`; returns the value and the position after it. */
function readLeb(bytes: Uint8Array, pos: number): [number, number] {
  let result = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[pos++];
    result |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [result >>> 0, pos];
    shift += 7;
  }
}

/**
 * `bytes` (a valid module) with every mutable global it defines exported as
 * `IMAGE_GLOBAL_PREFIX + index`. The export section is rewritten with the
 * new entries appended; every other section is copied as it is.
 */
export function exportMutableGlobals(bytes: Uint8Array, skip: ReadonlySet<string> = new Set()): ImageGlobals {
  const summary = readWasmSummary(bytes);
  const skipped = new Set(summary.exports.filter((e) => e.kind === 'global' && skip.has(e.name)).map((e) => e.index));
  const added: Array<{ name: string; index: number }> = [];
  let readable = true;
  summary.globals.forEach((g, i) => {
    const index = summary.importedGlobalCount + i;
    if (!g.mutable || skipped.has(index)) return;
    if (!NUMERIC_TYPES.has(g.valueType)) readable = false;
    else added.push({ name: `${IMAGE_GLOBAL_PREFIX}${index}`, index });
  });
  if (!readable) return { bytes, names: undefined };
  if (added.length === 0) return { bytes, names: [] };
  const encoder = new TextEncoder();
  const entries: number[] = [];
  for (const { name, index } of added) {
    const utf8 = encoder.encode(name);
    entries.push(...leb(utf8.length), ...utf8, 0x03, ...leb(index));
  }
  // Walk the sections: the export section (id 7) gets the entries; a module without one gets one after the global section.
  const parts: Uint8Array[] = [bytes.subarray(0, 8)];
  let pos = 8;
  let done = false;
  const section = (count: number, body: Uint8Array | number[]) => {
    const payload = [...leb(count), ...body];
    return new Uint8Array([7, ...leb(payload.length), ...payload]);
  };
  while (pos < bytes.length) {
    const id = bytes[pos];
    const [size, bodyStart] = readLeb(bytes, pos + 1);
    const end = bodyStart + size;
    if (id === 7) {
      const [count, entriesStart] = readLeb(bytes, bodyStart);
      parts.push(section(count + added.length, [...bytes.subarray(entriesStart, end), ...entries]));
      done = true;
    } else {
      // The export section comes after globals and before start, elements, data count, code and data (ids 8 to 12).
      if (!done && id >= 8 && id <= 12) {
        parts.push(section(added.length, entries));
        done = true;
      }
      parts.push(bytes.subarray(pos, end));
    }
    pos = end;
  }
  if (!done) parts.push(section(added.length, entries));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return { bytes: out, names: added.map((a) => a.name) };
}
