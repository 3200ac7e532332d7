// The fuel rewrite itself, with binaryen passed in rather than imported: the
// host loads binaryen (≈60 MiB) only when a module's instrumented form is not
// cached, and this file must also run where it is loaded on purpose (the
// instrumentation helper thread, the build's cache step). It imports nothing
// at run time so scripts/build-wasm.mjs can load it before tsc has run.
//
// V8 has no fuel counter, so each module is rewritten: binaryen's
// `log-execution` pass already places a call at every function entry and loop
// header (exactly where a runaway module must pass), and we replace its
// logging import with a function that spends one unit from an exported global
// and traps when the tank is empty. The host refills the tank before each call.
// Bulk memory and table instructions also pay for their length
// (bulk-metering.ts).
import type BinaryenModule from 'binaryen';
import { meterBulkInstructions } from './bulk-metering.js';

export type Binaryen = typeof BinaryenModule;

export const FUEL_GLOBAL = 'kwp_fuel';
/**
 * The import module the log-execution pass is told to use for its probe.
 * Left to itself the pass borrows the module name of the first imported
 * function (`kwp` for a module whose first import is kwp.log), so the probe
 * could not be told apart from the module's own imports. No evaluator may
 * import from this name (the loader's allowlist), so it is unambiguous.
 */
const PROBE_MODULE = 'kwp-fuel-probe';
/** Bump when the rewrite changes, so cached instrumented modules are not reused. */
export const FUEL_INSTRUMENTATION_VERSION = 2;

/**
 * The WebAssembly features of the V8 in Node 20, the set the loader's
 * WebAssembly.validate admitted. The rewrite emits with exactly these:
 * binaryen's `All` would re-encode, say, `ref.null func` as the GC bottom
 * type, which this V8 does not compile.
 */
function hostFeatures(b: Binaryen): BinaryenModule.Features {
  const f = b.Features;
  return f.MVP | f.Atomics | f.MutableGlobals | f.NontrappingFPToInt | f.SIMD128 | f.BulkMemory | f.BulkMemoryOpt
    | f.SignExt | f.ExceptionHandling | f.TailCall | f.ReferenceTypes | f.Multivalue | f.CallIndirectOverlong;
}

/** Name of a module's cached instrumented form, relative to the cache directory. */
export function instrumentedFileName(sha256: string, startFuel: number): string {
  return `${sha256}-f${startFuel}-v${FUEL_INSTRUMENTATION_VERSION}.wasm`;
}

/** `startFuel` is the tank for the start function, which runs during instantiation before the host can refill. Throws plain Errors. */
export function rewriteForFuel(binaryen: Binaryen, bytes: Uint8Array, startFuel: number): Uint8Array {
  let mod: BinaryenModule.Module | undefined;
  try {
    mod = binaryen.readBinary(bytes);
    mod.setFeatures(hostFeatures(binaryen));
    binaryen.setPassArgument('log-execution', PROBE_MODULE);
    try {
      mod.runPasses(['log-execution']);
    } finally {
      binaryen.setPassArgument('log-execution', null);
    }
    let probe: string | undefined;
    for (let i = 0; i < mod.getNumFunctions(); i++) {
      const info = binaryen.getFunctionInfo(mod.getFunctionByIndex(i));
      if (info.module === PROBE_MODULE) probe = info.name;
    }
    if (!probe) throw new Error('log-execution pass added no probe');
    mod.removeFunction(probe);
    const fuel = () => mod!.global.get(FUEL_GLOBAL, binaryen.i32);
    mod.addGlobal(FUEL_GLOBAL, binaryen.i32, true, mod.i32.const(startFuel | 0));
    mod.addGlobalExport(FUEL_GLOBAL, FUEL_GLOBAL);
    mod.addFunction(probe, binaryen.createType([binaryen.i32]), binaryen.none, [], mod.block(null, [
      mod.global.set(FUEL_GLOBAL, mod.i32.sub(fuel(), mod.i32.const(1))),
      mod.if(mod.i32.lt_s(fuel(), mod.i32.const(0)), mod.unreachable()),
    ]));
    meterBulkInstructions(binaryen, mod, FUEL_GLOBAL);
    if (!mod.validate()) throw new Error('instrumented module does not validate');
    // Inline the probe so a loop iteration costs a decrement and a compare, not
    // a call. The probe is bigger than binaryen's default always-inline size,
    // and the full optimizing inliner costs seconds per module, so raise the
    // size for this one pass only.
    const previous = binaryen.getAlwaysInlineMaxSize();
    binaryen.setAlwaysInlineMaxSize(16);
    try {
      mod.runPasses(['inlining']);
    } finally {
      binaryen.setAlwaysInlineMaxSize(previous);
    }
    return mod.emitBinary();
  } finally {
    mod?.dispose();
  }
}
