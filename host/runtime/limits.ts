// The sandbox's limits and their defaults. Every limit is enforced by the
// loader or the instance; an option that cannot be enforced is refused rather
// than accepted and ignored.

export interface SandboxLimits {
  /** Largest module accepted, in bytes. */
  maxModuleBytes: number;
  /**
   * Largest linear memory a module that defines its own may have, in 64 KiB
   * pages; for a module that imports env.memory (the built-ins do), the part
   * of its per-stage cap that does not depend on the state (see
   * `memoryCapForState`).
   */
  maxMemoryPages: number;
  /**
   * Bytes of memory a stage whose module imports env.memory may use per byte
   * of state the host delivers to it (PodInfo records and objects' JSON), on
   * top of maxMemoryPages.
   */
  memoryPerStateByte: number;
  /** The per-stage cap's ceiling however large the state, in pages. */
  maxStageMemoryPages: number;
  /** Fuel for one decision record (scaled by batch size). */
  fuelPerDecision: number;
  /** Fuel for one configuration, delivery or explanation call, and for the start function. */
  fuelPerCall: number;
  /** Log lines per second one instance may emit before the host drops them. */
  logLinesPerSecond: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  maxModuleBytes: 4 * 1024 * 1024,
  maxMemoryPages: 1024,
  // Measured (docs/sandbox.md): the NetworkPolicy module needs about 3 bytes
  // per delivered byte for the bench generator's policies, 6 for policies
  // that share no selector; 8 leaves room for the collector's garbage and for
  // growth until the next rebuild.
  memoryPerStateByte: 8,
  maxStageMemoryPages: 8192,
  fuelPerDecision: 1_000_000,
  fuelPerCall: 200_000_000,
  logLinesPerSecond: 20,
};

export function resolveLimits(partial?: Partial<SandboxLimits>): SandboxLimits {
  const limits = { ...DEFAULT_LIMITS, ...partial };
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value <= 0) throw new RangeError(`sandbox limit ${key} must be a positive integer, got ${value}`);
  }
  if (limits.maxStageMemoryPages > 65536) throw new RangeError('sandbox limit maxStageMemoryPages cannot exceed 65536 (4 GiB)');
  if (limits.maxMemoryPages > limits.maxStageMemoryPages) {
    throw new RangeError(`sandbox limit maxMemoryPages (${limits.maxMemoryPages}) cannot exceed maxStageMemoryPages (${limits.maxStageMemoryPages})`);
  }
  if (limits.fuelPerCall > 0x7fffffff || limits.fuelPerDecision * 64 > 0x7fffffff) {
    throw new RangeError('fuel limits must fit the 31-bit fuel counter (fuelPerDecision * 64 and fuelPerCall <= 2^31-1)');
  }
  return limits;
}

export const PAGE_BYTES = 65536;

/**
 * The memory cap, in pages, of a stage instance that is to hold `stateBytes`
 * of delivered state: maxMemoryPages plus memoryPerStateByte bytes for every
 * byte, at most maxStageMemoryPages. It applies to modules that import
 * env.memory; a module that defines its memory keeps the maximum it declares.
 */
export function memoryCapForState(limits: SandboxLimits, stateBytes: number): number {
  const pages = limits.maxMemoryPages + Math.ceil((stateBytes * limits.memoryPerStateByte) / PAGE_BYTES);
  return Math.min(limits.maxStageMemoryPages, pages);
}
