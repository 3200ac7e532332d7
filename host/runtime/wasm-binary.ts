// A reader for the parts of a WebAssembly binary the loader must check before
// any code runs: imports (with memory limits), the memory section, globals
// with constant initializers, exports and custom sections. WebAssembly.Module
// reflection gives names and kinds but not limits or initial values, and those
// are exactly what the sandbox needs.

export interface Limits { min: number; max?: number; shared: boolean; memory64: boolean }

export interface WasmImport {
  module: string;
  name: string;
  kind: 'function' | 'table' | 'memory' | 'global' | 'tag';
  /** Function imports: the type index. */
  typeIndex?: number;
  /** Memory and table imports. */
  limits?: Limits;
}

export interface WasmTable { elementType: number; limits: Limits }

export interface WasmGlobal { valueType: number; mutable: boolean; /** Set when the initializer is a single i32.const. */ i32Init?: number }

export interface WasmExport { name: string; kind: 'function' | 'table' | 'memory' | 'global' | 'tag'; index: number }

export interface WasmFuncType { params: number[]; results: number[] }

const VALUE_TYPES: Record<number, string> = { 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64', 0x7b: 'v128', 0x70: 'funcref', 0x6f: 'externref' };

/** `(i32, i32) -> nil`, as sdk/ABI.md writes signatures. */
export function formatFuncType(t: WasmFuncType): string {
  const name = (v: number) => VALUE_TYPES[v] ?? `0x${v.toString(16)}`;
  const results = t.results.length === 0 ? 'nil' : t.results.length === 1 ? name(t.results[0]) : `(${t.results.map(name).join(', ')})`;
  return `(${t.params.map(name).join(', ')}) -> ${results}`;
}

export interface WasmSummary {
  types: WasmFuncType[];
  imports: WasmImport[];
  /** Memories the module defines itself (not imported). */
  memories: Limits[];
  /** Tables the module defines itself (imported ones are in `imports`). */
  tables: WasmTable[];
  /** Functions the module defines (the function section's count). */
  functionCount: number;
  /** The type index of each function the module defines, in index order after imported functions. */
  functionTypes: number[];
  /** Entries of the element and data sections. */
  elementSegmentCount: number;
  dataSegmentCount: number;
  /** Globals the module defines, in index order after imported globals. */
  globals: WasmGlobal[];
  importedGlobalCount: number;
  exports: WasmExport[];
  customSections: Map<string, Uint8Array[]>;
}

const KINDS = ['function', 'table', 'memory', 'global', 'tag'] as const;

export class WasmFormatError extends Error {}

class ByteReader {
  pos = 0;
  constructor(readonly bytes: Uint8Array, readonly end = bytes.length) {}
  byte(): number {
    if (this.pos >= this.end) throw new WasmFormatError(`unexpected end at byte ${this.pos}`);
    return this.bytes[this.pos++];
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) break;
      shift += 7;
      if (shift > 35) throw new WasmFormatError(`LEB128 too long at byte ${this.pos}`);
    }
    return result >>> 0;
  }
  u32le(): number {
    const b = this.bytes;
    const p = this.pos;
    if (p + 4 > this.end) throw new WasmFormatError('unexpected end of header');
    this.pos += 4;
    return (b[p] | (b[p + 1] << 8) | (b[p + 2] << 16) | (b[p + 3] << 24)) >>> 0;
  }
  /** Signed LEB128 up to 32 bits (for i32.const). */
  s32(): number {
    let result = 0;
    let shift = 0;
    let b: number;
    do {
      b = this.byte();
      result |= (b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80 && shift < 35);
    if (shift < 32 && b & 0x40) result |= -1 << shift;
    return result | 0;
  }
  /** Skips a signed LEB128 of any width. */
  skipLeb(): void { while (this.byte() & 0x80) { /* continuation */ } }
  name(): string {
    const n = this.u32();
    if (this.pos + n > this.end) throw new WasmFormatError(`name runs past the end at byte ${this.pos}`);
    const s = new TextDecoder('utf-8', { fatal: true }).decode(this.bytes.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  limits(): Limits {
    const flags = this.byte();
    const min = this.u32();
    const max = flags & 1 ? this.u32() : undefined;
    return { min, max, shared: (flags & 2) !== 0, memory64: (flags & 4) !== 0 };
  }
  valueType(): number {
    const t = this.byte();
    // Reference types with a heap type immediate (0x63/0x64) carry one more LEB.
    if (t === 0x63 || t === 0x64) this.skipLeb();
    return t;
  }
}

/** Skips a constant expression up to its `end`; returns the value when it is exactly `i32.const N end`. */
function readConstExpr(r: ByteReader): number | undefined {
  const first = r.pos;
  let value: number | undefined;
  let ops = 0;
  for (;;) {
    const op = r.byte();
    if (op === 0x0b) break;
    ops++;
    if (op === 0x41) value = r.s32();
    else if (op === 0x42) r.skipLeb();
    else if (op === 0x43) r.pos += 4;
    else if (op === 0x44) r.pos += 8;
    else if (op === 0x23 || op === 0xd2) r.u32();
    else if (op === 0xd0) r.skipLeb();
    else if (op === 0x6a || op === 0x6b || op === 0x6c || op === 0x7c || op === 0x7d || op === 0x7e) { /* extended-const arithmetic */ }
    else if (op === 0xfd && r.bytes[r.pos] === 0x0c) { r.pos += 1 + 16; }
    else throw new WasmFormatError(`unsupported opcode 0x${op.toString(16)} in a constant expression at byte ${first}`);
  }
  return ops === 1 ? value : undefined;
}

export function readWasmSummary(bytes: Uint8Array): WasmSummary {
  const r = new ByteReader(bytes);
  if (bytes.length < 8 || r.u32le() !== 0x6d736100) throw new WasmFormatError('not a WebAssembly binary (bad magic)');
  const version = r.u32le();
  if (version !== 1) throw new WasmFormatError(`unsupported binary version ${version}`);
  const summary: WasmSummary = {
    types: [], imports: [], memories: [], tables: [], functionCount: 0, functionTypes: [], elementSegmentCount: 0, dataSegmentCount: 0,
    globals: [], importedGlobalCount: 0, exports: [], customSections: new Map(),
  };
  while (r.pos < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    const end = r.pos + size;
    if (end > bytes.length) throw new WasmFormatError(`section ${id} runs past the end`);
    const s = new ByteReader(bytes, end);
    s.pos = r.pos;
    switch (id) {
      case 0: {
        const name = s.name();
        const list = summary.customSections.get(name) ?? [];
        list.push(bytes.subarray(s.pos, end));
        summary.customSections.set(name, list);
        break;
      }
      case 1: {
        for (let n = s.u32(); n > 0; n--) {
          const form = s.byte();
          if (form !== 0x60) { s.pos = end; break; } // GC rec groups: not used by evaluators; leave unread
          const params: number[] = [];
          for (let p = s.u32(); p > 0; p--) params.push(s.valueType());
          const results: number[] = [];
          for (let q = s.u32(); q > 0; q--) results.push(s.valueType());
          summary.types.push({ params, results });
        }
        break;
      }
      case 2: {
        for (let n = s.u32(); n > 0; n--) {
          const module = s.name();
          const name = s.name();
          const kindByte = s.byte();
          const kind = KINDS[kindByte];
          if (!kind) throw new WasmFormatError(`unknown import kind ${kindByte} for ${module}.${name}`);
          const imp: WasmImport = { module, name, kind };
          if (kind === 'function') imp.typeIndex = s.u32();
          else if (kind === 'table') { s.valueType(); imp.limits = s.limits(); }
          else if (kind === 'memory') imp.limits = s.limits();
          else if (kind === 'global') { s.valueType(); s.byte(); summary.importedGlobalCount++; }
          else if (kind === 'tag') { s.byte(); s.u32(); }
          summary.imports.push(imp);
        }
        break;
      }
      case 3:
        summary.functionCount = s.u32();
        // At most maxFunctions are accepted (checked later); a count past the section's bytes ends in WasmFormatError.
        for (let n = summary.functionCount; n > 0; n--) summary.functionTypes.push(s.u32());
        break;
      case 4: {
        for (let n = s.u32(); n > 0; n--) {
          // A table with an initializer expression is written 0x40 0x00 type limits expr.
          const withInit = s.bytes[s.pos] === 0x40;
          if (withInit) s.pos += 2;
          const elementType = s.valueType();
          summary.tables.push({ elementType, limits: s.limits() });
          if (withInit) readConstExpr(s);
        }
        break;
      }
      case 9:
        summary.elementSegmentCount = s.u32();
        break;
      case 11:
        summary.dataSegmentCount = s.u32();
        break;
      case 5: {
        for (let n = s.u32(); n > 0; n--) summary.memories.push(s.limits());
        break;
      }
      case 6: {
        for (let n = s.u32(); n > 0; n--) {
          const valueType = s.valueType();
          const mutable = s.byte() === 1;
          const init = readConstExpr(s);
          summary.globals.push({ valueType, mutable, i32Init: valueType === 0x7f ? init : undefined });
        }
        break;
      }
      case 7: {
        for (let n = s.u32(); n > 0; n--) {
          const name = s.name();
          const kindByte = s.byte();
          const kind = KINDS[kindByte];
          if (!kind) throw new WasmFormatError(`unknown export kind ${kindByte} for ${name}`);
          summary.exports.push({ name, kind, index: s.u32() });
        }
        break;
      }
      default:
        break;
    }
    r.pos = end;
  }
  return summary;
}
