// DNS answers only count for their TTL. The state does not own a clock (so
// tests and `kwp eval` control time); the agent runs this ticker beside it.

import type { ClusterState } from './cluster-state.js';

/**
 * Expires resolved names every `intervalMs` (default 1 s: TTLs are whole
 * seconds). The timer does not keep the process alive. Returns a stop function.
 */
export function expireResolvedNamesPeriodically(state: ClusterState, intervalMs = 1000): () => void {
  const timer = setInterval(() => state.expireResolvedNames(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
