// Loading a module: every static check of the ABI and the sandbox, in the
// order the admin API documents, then fuel instrumentation and compilation.
// Nothing here runs module code; instantiation is EvaluatorInstance's job.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { KwpError } from '../errors.js';
import type { FailurePolicy } from '../contract.js';
import { readWasmSummary, formatFuncType, type Limits, type WasmFuncType, type WasmSummary } from './wasm-binary.js';
import { instrumentFuel, instrumentedFileName, FUEL_GLOBAL } from './fuel.js';
import { exportMutableGlobals, IMAGE_GLOBAL_PREFIX } from './image-globals.js';
import { resolveLimits, TABLE_ELEMENT_BYTES, type SandboxLimits } from './limits.js';
import { ABI_MAJOR, ABI_MINOR, ABI_VERSION_GLOBAL, splitAbiVersion } from '../abi/version.js';
import { IMPORT_ALLOWLIST } from '../abi/imports.js';
import { EXPORT_TYPES, REQUIRED_FUNCTIONS } from '../abi/exports.js';

export interface ModuleMeta {
  name: string;
  version: string;
  kinds: string[];
  failurePolicy: FailurePolicy;
  description?: string;
  abi: { major: number; minor: number };
}

export interface CompiledEvaluator {
  readonly meta: ModuleMeta;
  readonly sha256: string;
  readonly size: number;
  readonly module: WebAssembly.Module;
  /** Set when the module imports env.memory: the limits the host must satisfy. */
  readonly memoryImport?: Limits;
  readonly limits: SandboxLimits;
  /** Where the bytes came from, for messages: a file path, `builtin:NAME`, `upload`. */
  readonly source: string;
  /**
   * The most memory one instance can hold: its linear memory at the maximum
   * the host lets it grow to, plus its tables at their maximum. What a stage
   * reserves from the memory budget (memory-budget.ts).
   */
  readonly reservedBytes: number;
  /**
   * The export names of the module's mutable globals, which with its memory
   * make a memory image of an instance (instance.ts, `image()`); undefined
   * when an image cannot hold the module's state, so its instances are
   * always fed by replaying the state.
   */
  readonly imageGlobals?: readonly string[];
}

const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function parseMeta(summary: WasmSummary, limits: SandboxLimits, source: string): Omit<ModuleMeta, 'abi'> {
  const sections = summary.customSections.get('kwp.meta');
  const hint = 'build the module with the SDK (its transform writes kwp.meta from module.json)';
  if (!sections || sections.length !== 1) {
    throw new KwpError('KWP_ERR_METADATA', `${source}: ${sections ? 'more than one' : 'no'} kwp.meta custom section; ${hint}`);
  }
  // The metadata is copied into the module index and every GET /v1/modules answer.
  if (sections[0].length > limits.maxMetaBytes) {
    throw new KwpError('KWP_ERR_METADATA', `${source}: kwp.meta is ${sections[0].length} bytes but the host allows ${limits.maxMetaBytes} (sandbox limit maxMetaBytes); shorten module.json`);
  }
  let meta: any;
  try {
    meta = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(sections[0]));
  } catch (err) {
    throw new KwpError('KWP_ERR_METADATA', `${source}: kwp.meta is not valid UTF-8 JSON (${(err as Error).message}); ${hint}`);
  }
  const problems: string[] = [];
  if (typeof meta !== 'object' || meta === null) problems.push('it must be a JSON object');
  else {
    if (typeof meta.name !== 'string' || !NAME.test(meta.name)) problems.push('"name" must be lower-case letters, digits and dashes');
    if (typeof meta.version !== 'string' || !meta.version) problems.push('"version" must be a non-empty string');
    if (!Array.isArray(meta.kinds) || meta.kinds.some((k: unknown) => typeof k !== 'string')) problems.push('"kinds" must be a list of "apiVersion/Kind" strings');
    if (meta.failurePolicy !== 'fail-open' && meta.failurePolicy !== 'fail-closed') problems.push('"failurePolicy" must be "fail-open" or "fail-closed"');
    if (meta.description !== undefined && typeof meta.description !== 'string') problems.push('"description" must be a string');
    if (Array.isArray(meta.kinds) && meta.kinds.length > limits.maxMetaKinds) problems.push(`"kinds" lists ${meta.kinds.length} kinds but the host allows ${limits.maxMetaKinds} (sandbox limit maxMetaKinds)`);
    const strings: Array<[string, unknown]> = [['name', meta.name], ['version', meta.version], ['description', meta.description],
      ...(Array.isArray(meta.kinds) ? meta.kinds.map((k: unknown, i: number): [string, unknown] => [`kinds[${i}]`, k]) : [])];
    for (const [field, value] of strings) {
      if (typeof value === 'string' && value.length > limits.maxMetaStringChars) problems.push(`"${field}" is ${value.length} characters but the host allows ${limits.maxMetaStringChars} (sandbox limit maxMetaStringChars)`);
    }
  }
  if (problems.length) throw new KwpError('KWP_ERR_METADATA', `${source}: kwp.meta: ${problems.join('; ')}`);
  return {
    name: meta.name, version: meta.version, kinds: [...meta.kinds], failurePolicy: meta.failurePolicy,
    description: typeof meta.description === 'string' ? meta.description : undefined,
  };
}

function abiVersion(summary: WasmSummary, source: string): { major: number; minor: number } {
  const exp = summary.exports.find((e) => e.name === ABI_VERSION_GLOBAL);
  const fix = `rebuild it with the kube-wasm-policies SDK for ABI ${ABI_MAJOR}.x`;
  if (!exp || exp.kind !== 'global') throw new KwpError('KWP_ERR_ABI_VERSION', `${source}: the module exports no kwp_abi_version global; ${fix}`);
  const local = exp.index - summary.importedGlobalCount;
  const g = local >= 0 ? summary.globals[local] : undefined;
  if (!g || g.mutable || g.i32Init === undefined) {
    throw new KwpError('KWP_ERR_ABI_VERSION', `${source}: kwp_abi_version must be an immutable i32 global with a constant value; ${fix}`);
  }
  const { major, minor } = splitAbiVersion(g.i32Init);
  if (major !== ABI_MAJOR) {
    throw new KwpError('KWP_ERR_ABI_VERSION', `${source}: the module speaks ABI ${major}.${minor} but this host implements ABI ${ABI_MAJOR}.${ABI_MINOR}; ${fix}`);
  }
  return { major, minor };
}

function checkImports(summary: WasmSummary, source: string): void {
  for (const imp of summary.imports) {
    const allowed = IMPORT_ALLOWLIST.find((a) => a.module === imp.module && a.name === imp.name && a.kind === imp.kind);
    if (!allowed) {
      const list = IMPORT_ALLOWLIST.map((a) => `${a.module}.${a.name}`).join(', ');
      throw new KwpError('KWP_ERR_IMPORT_NOT_ALLOWED', `${source}: import ${imp.module}.${imp.name} (${imp.kind}) is not allowed; evaluators may import only ${list}`);
    }
    // A wrong type would instantiate (JS functions take any arguments) and
    // misbehave at the first call, so the type must be exactly the ABI's.
    if (allowed.type) {
      const actual = imp.typeIndex === undefined ? undefined : summary.types[imp.typeIndex];
      if (!actual || !sameFuncType(actual, allowed.type)) {
        throw new KwpError('KWP_ERR_IMPORT_SIGNATURE', `${source}: import ${imp.module}.${imp.name} has type ${actual ? formatFuncType(actual) : `#${imp.typeIndex}`}, but the ABI defines it as ${formatFuncType(allowed.type)}; declare it exactly so (the SDK does)`);
      }
    }
  }
  if (summary.exports.some((e) => e.name === FUEL_GLOBAL)) {
    throw new KwpError('KWP_ERR_IMPORT_NOT_ALLOWED', `${source}: the export name ${FUEL_GLOBAL} is reserved for the host's fuel counter`);
  }
  const imageExport = summary.exports.find((e) => e.name.startsWith(IMAGE_GLOBAL_PREFIX));
  if (imageExport) {
    throw new KwpError('KWP_ERR_IMPORT_NOT_ALLOWED', `${source}: the export name ${imageExport.name} is in the prefix ${IMAGE_GLOBAL_PREFIX}, which the host reserves for its memory images; rename the export`);
  }
}

function sameFuncType(a: WasmFuncType, b: WasmFuncType): boolean {
  return a.params.length === b.params.length && a.results.length === b.results.length
    && a.params.every((t, i) => t === b.params[i]) && a.results.every((t, i) => t === b.results[i]);
}

function checkMemory(summary: WasmSummary, limits: SandboxLimits, source: string): Limits | undefined {
  const imported = summary.imports.find((i) => i.kind === 'memory')?.limits;
  const memories = [...(imported ? [imported] : []), ...summary.memories];
  if (memories.length !== 1) {
    throw new KwpError('KWP_ERR_MEMORY_UNBOUNDED', `${source}: a module must have exactly one linear memory, it has ${memories.length}`);
  }
  const mem = memories[0];
  if (mem.shared || mem.memory64) {
    throw new KwpError('KWP_ERR_MEMORY_UNBOUNDED', `${source}: shared and 64-bit memories are not supported; build a plain 32-bit memory`);
  }
  const cap = limits.maxMemoryPages;
  if (imported) {
    // The host creates imported memories itself, with its own maximum.
    if (mem.min > cap) {
      throw new KwpError('KWP_ERR_MEMORY_TOO_LARGE', `${source}: the module needs ${mem.min} pages of memory at start but the host allows ${cap}`);
    }
    return imported;
  }
  if (mem.max === undefined) {
    throw new KwpError('KWP_ERR_MEMORY_UNBOUNDED', `${source}: the module's memory has no maximum; build with --maximumMemory ${cap} or lower (the SDK's asconfig.json does), or import env.memory`);
  }
  if (mem.max > cap) {
    throw new KwpError('KWP_ERR_MEMORY_TOO_LARGE', `${source}: the module's memory maximum is ${mem.max} pages but the host allows ${cap}; lower --maximumMemory`);
  }
  return undefined;
}

/**
 * Counts a few bytes can make expensive: a table declared with millions of
 * elements costs the host heap at instantiation (V8 keeps tables on its heap),
 * and functions, globals and segments cost compile time and memory each.
 */
function checkShape(summary: WasmSummary, limits: SandboxLimits, source: string): void {
  const tables = summary.tables;
  if (tables.length > limits.maxTables) {
    throw new KwpError('KWP_ERR_TABLE_TOO_LARGE', `${source}: the module defines ${tables.length} tables but the host allows ${limits.maxTables} (sandbox limit maxTables); an AssemblyScript module needs at most one`);
  }
  for (const [i, t] of tables.entries()) {
    if (t.limits.max === undefined) {
      throw new KwpError('KWP_ERR_TABLE_TOO_LARGE', `${source}: table ${i} has no maximum, so it could grow to millions of elements; give it a maximum of at most ${limits.maxTableElements} elements (sandbox limit maxTableElements; asc does)`);
    }
    const largest = Math.max(t.limits.min, t.limits.max);
    if (largest > limits.maxTableElements) {
      throw new KwpError('KWP_ERR_TABLE_TOO_LARGE', `${source}: table ${i} declares ${t.limits.min} elements at start and ${t.limits.max} at most, but the host allows ${limits.maxTableElements} (sandbox limit maxTableElements)`);
    }
  }
  const importedFunctions = summary.imports.filter((i) => i.kind === 'function').length;
  const counts: Array<[string, number, keyof SandboxLimits]> = [
    ['functions', summary.functionCount + importedFunctions, 'maxFunctions'],
    ['globals', summary.globals.length + summary.importedGlobalCount, 'maxGlobals'],
    ['data segments', summary.dataSegmentCount, 'maxDataSegments'],
    ['element segments', summary.elementSegmentCount, 'maxElementSegments'],
  ];
  for (const [what, n, limit] of counts) {
    if (n > limits[limit]) {
      throw new KwpError('KWP_ERR_MODULE_TOO_COMPLEX', `${source}: the module has ${n} ${what} but the host allows ${limits[limit]} (sandbox limit ${limit}); split or simplify it`);
    }
  }
}

/** Linear memory at the largest size the host lets it reach, plus every table at its maximum. */
function reservation(summary: WasmSummary, memoryImport: Limits | undefined, limits: SandboxLimits): number {
  const mem = memoryImport ?? summary.memories[0];
  const pages = Math.min(mem.max ?? limits.maxMemoryPages, limits.maxMemoryPages);
  const tableElements = summary.tables.reduce((n, t) => n + (t.limits.max ?? t.limits.min), 0);
  return pages * 65536 + tableElements * TABLE_ELEMENT_BYTES;
}

function checkExports(summary: WasmSummary, hasImportedMemory: boolean, source: string): void {
  const funcs = new Set(summary.exports.filter((e) => e.kind === 'function').map((e) => e.name));
  const missing: string[] = REQUIRED_FUNCTIONS.filter((f) => !funcs.has(f));
  if (!hasImportedMemory && !summary.exports.some((e) => e.kind === 'memory' && e.name === 'memory')) missing.push('memory');
  if (missing.length) {
    throw new KwpError('KWP_ERR_EXPORT_MISSING', `${source}: missing export(s) ${missing.join(', ')}; re-export "kube-wasm-policies/sdk/exports" from the entry file`);
  }
  checkExportTypes(summary, source);
}

/** Every export the host calls has exactly the ABI's type (EXPORT_TYPES says why). */
function checkExportTypes(summary: WasmSummary, source: string): void {
  const importedTypes = summary.imports.filter((i) => i.kind === 'function').map((i) => i.typeIndex);
  for (const e of summary.exports) {
    const expected = Object.hasOwn(EXPORT_TYPES, e.name) ? EXPORT_TYPES[e.name] : undefined;
    if (!expected) continue;
    const typeIndex = e.kind !== 'function' ? undefined
      : e.index < importedTypes.length ? importedTypes[e.index] : summary.functionTypes[e.index - importedTypes.length];
    const actual = typeIndex === undefined ? undefined : summary.types[typeIndex];
    if (!actual || !sameFuncType(actual, expected)) {
      const what = e.kind !== 'function' ? `a ${e.kind}` : actual ? `type ${formatFuncType(actual)}` : `type #${typeIndex}`;
      throw new KwpError('KWP_ERR_EXPORT_SIGNATURE', `${source}: export ${e.name} is ${what}, but the ABI defines it as a function ${formatFuncType(expected)}; declare it exactly so (the SDK does)`);
    }
  }
}

/**
 * Runs every static check, instruments fuel and compiles. Throws KwpError with
 * the code of the first check that fails.
 */
export function compileEvaluator(bytes: Uint8Array, options: { source: string; limits?: Partial<SandboxLimits>; instrumentationCache?: string }): CompiledEvaluator {
  const { source } = options;
  const limits = resolveLimits(options.limits);
  if (bytes.length > limits.maxModuleBytes) {
    throw new KwpError('KWP_ERR_MODULE_TOO_LARGE', `${source}: the module is ${bytes.length} bytes, over the cap of ${limits.maxModuleBytes} bytes; shrink it (asc -Oz) or raise the cap`);
  }
  if (!WebAssembly.validate(bytes as BufferSource)) {
    throw new KwpError('KWP_ERR_MODULE_INVALID', `${source}: not a valid WebAssembly module (WebAssembly.validate failed); upload the .wasm the compiler produced`);
  }
  let summary: WasmSummary;
  try {
    summary = readWasmSummary(bytes);
  } catch (err) {
    throw new KwpError('KWP_ERR_MODULE_INVALID', `${source}: ${(err as Error).message}`);
  }
  const abi = abiVersion(summary, source);
  const meta = parseMeta(summary, limits, source);
  checkImports(summary, source);
  const memoryImport = checkMemory(summary, limits, source);
  checkShape(summary, limits, source);
  checkExports(summary, memoryImport !== undefined, source);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  // The globals are exported after instrumentation, so the cached instrumented form stays what the build wrote.
  const image = exportMutableGlobals(cachedInstrumentation(bytes, sha256, limits, options.instrumentationCache), new Set([FUEL_GLOBAL]));
  let module: WebAssembly.Module;
  try {
    module = new WebAssembly.Module(image.bytes as BufferSource);
  } catch (err) {
    throw new KwpError('KWP_ERR_INSTRUMENTATION', `${source}: the instrumented module does not compile: ${(err as Error).message}`);
  }
  return {
    meta: { ...meta, abi },
    sha256,
    size: bytes.length,
    module,
    memoryImport,
    limits,
    source,
    reservedBytes: reservation(summary, memoryImport, limits),
    imageGlobals: image.names,
  };
}

/**
 * Instrumentation costs most of a module's load time, and its output depends
 * only on the input bytes, the start-function fuel and the instrumentation
 * itself. A cache directory written only by this host (the built-ins' is
 * filled by the build) keeps the result across restarts, and a process whose
 * modules all hit it never loads binaryen.
 */
function cachedInstrumentation(bytes: Uint8Array, sha256: string, limits: SandboxLimits, dir: string | undefined): Uint8Array {
  const startFuel = limits.fuelPerCall;
  if (!dir) return instrumentFuel(bytes, startFuel, limits.validationHeapMiB);
  const file = join(dir, instrumentedFileName(sha256, startFuel));
  let hit: Buffer | undefined;
  try {
    hit = readFileSync(file);
  } catch {
    // Not cached yet (or removed since): instrument below.
  }
  if (hit && WebAssembly.validate(hit as BufferSource)) return hit;
  const out = instrumentFuel(bytes, startFuel, limits.validationHeapMiB);
  try {
    mkdirSync(dir, { recursive: true });
    const tmp = `${file}.${process.pid}-${threadId}.tmp`;
    writeFileSync(tmp, out);
    renameSync(tmp, file);
  } catch {
    // A read-only install still works, only slower to start.
  }
  return out;
}
