// The fuel rewrite itself, with binaryen passed in rather than imported: the
// host loads binaryen (≈60 MiB) only when a module's instrumented form is not
// cached, and this file must also run where it is loaded on purpose (the
// instrumentation helper thread, the build's cache step). It imports nothing
// at run time so scripts/build-wasm.mjs can load it before tsc has run.
//
// V8 has no fuel counter, so each module is rewritten: an exported global is
// the tank, every function entry and loop header spends the static cost of
// the code it guards (fuel-charges.ts), and bulk memory and table
// instructions also pay for their length (bulk-metering.ts). A charge that
// empties the tank traps; the host refills it before each call.
import type BinaryenModule from 'binaryen';
import { meterBulkInstructions } from './bulk-metering.js';
import { chargeStaticCosts } from './fuel-charges.js';

export type Binaryen = typeof BinaryenModule;

export const FUEL_GLOBAL = 'kwp_fuel';
/**
 * Bump when the rewrite changes, so cached instrumented modules are not reused.
 * 4: modules using exception handling are refused, so a form cached before
 * (a stored upload's) must be rewritten again, and refused, not loaded.
 * 5: a function's entry pays for its declared locals (fuel-charges.ts).
 */
export const FUEL_INSTRUMENTATION_VERSION = 5;

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
    mod.addGlobal(FUEL_GLOBAL, binaryen.i32, true, mod.i32.const(startFuel | 0));
    mod.addGlobalExport(FUEL_GLOBAL, FUEL_GLOBAL);
    chargeStaticCosts(binaryen, mod, FUEL_GLOBAL);
    meterBulkInstructions(binaryen, mod, FUEL_GLOBAL);
    if (!mod.validate()) throw new Error('instrumented module does not validate');
    return mod.emitBinary();
  } finally {
    mod?.dispose();
  }
}
