// CPU bounds for modules (the rewrite is in fuel-rewrite.ts). binaryen costs
// about 60 MiB of RSS and most of a second to load, and an agent whose modules
// all come from the instrumentation cache never needs it, so nothing imports
// it at module load. A thread that expects many cache misses may load it once
// with prepareInstrumenter(); otherwise a miss is instrumented on a short-lived
// helper thread (instrument-helper.ts), which keeps instrumentFuel synchronous.
import { KwpError } from '../errors.js';
import { rewriteForFuel, type Binaryen } from './fuel-rewrite.js';
import { rewriteOnHelper } from './instrument-helper.js';

export { FUEL_GLOBAL, FUEL_INSTRUMENTATION_VERSION, instrumentedFileName } from './fuel-rewrite.js';

let binaryen: Binaryen | undefined;

/** Loads binaryen into this thread, so later cache misses are instrumented here instead of on a helper thread. */
export async function prepareInstrumenter(): Promise<void> {
  binaryen ??= (await import('binaryen')).default;
}

/**
 * `startFuel` is the tank for the start function, which runs during
 * instantiation before the host can refill. `helperHeapMiB` bounds the V8
 * heap of the helper thread, when one is started (sandbox limit validationHeapMiB).
 */
export function instrumentFuel(bytes: Uint8Array, startFuel: number, helperHeapMiB?: number): Uint8Array {
  try {
    return binaryen ? rewriteForFuel(binaryen, bytes, startFuel) : rewriteOnHelper(bytes, startFuel, helperHeapMiB);
  } catch (err) {
    throw new KwpError('KWP_ERR_INSTRUMENTATION', `fuel instrumentation failed: ${(err as Error).message}`, { cause: err });
  }
}
