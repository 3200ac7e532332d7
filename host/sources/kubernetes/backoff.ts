// Reconnect delays: capped exponential growth with jitter, so a fleet of agents
// that lost the same API server does not come back in lockstep.

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
}

/**
 * Delay before retry number `attempt` (0-based): the capped exponential value,
 * then "equal jitter" — half fixed, half random — which keeps a lower bound
 * while still spreading the fleet out.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const exp = Math.min(opts.maxMs, opts.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(exp / 2 + (random() * exp) / 2);
}
