// The sandbox's limits and their defaults. Every limit is enforced by the
// loader or the instance; an option that cannot be enforced is refused rather
// than accepted and ignored.

export interface SandboxLimits {
  /** Largest module accepted, in bytes. */
  maxModuleBytes: number;
  /** Largest linear memory a module may have, in 64 KiB pages. */
  maxMemoryPages: number;
  /** Fuel for one decision record (scaled by batch size). */
  fuelPerDecision: number;
  /** Fuel for one configuration, delivery or explanation call, and for the start function. */
  fuelPerCall: number;
  /** Log lines per second one instance may emit before the host drops them. */
  logLinesPerSecond: number;

  // ---- wall-clock bounds (what fuel cannot promise) ----
  /**
   * An upload's self-test (instantiation, configuration, the probe
   * decisions), in ms. Past it the thread running the self-test is stopped
   * and the upload refused; the uploads queued behind it start at once on a
   * fresh thread.
   */
  selfTestTimeoutMs: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  maxModuleBytes: 4 * 1024 * 1024,
  maxMemoryPages: 1024,
  fuelPerDecision: 1_000_000,
  fuelPerCall: 200_000_000,
  logLinesPerSecond: 20,
  selfTestTimeoutMs: 1000,
};

export function resolveLimits(partial?: Partial<SandboxLimits>): SandboxLimits {
  const limits = { ...DEFAULT_LIMITS, ...partial };
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value <= 0) throw new RangeError(`sandbox limit ${key} must be a positive integer, got ${value}`);
  }
  if (limits.maxMemoryPages > 65536) throw new RangeError('sandbox limit maxMemoryPages cannot exceed 65536 (4 GiB)');
  if (limits.fuelPerCall > 0x7fffffff || limits.fuelPerDecision * 64 > 0x7fffffff) {
    throw new RangeError('fuel limits must fit the 31-bit fuel counter (fuelPerDecision * 64 and fuelPerCall <= 2^31-1)');
  }
  return limits;
}
