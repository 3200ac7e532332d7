// Policy or pod changes move what the dataplane must queue and, in strict
// mode, which established connections it must cut. This subscribes to both
// the cluster state and the engine's activations and coalesces a burst of
// changes (a snapshot of 10,000 pods is 10,000 events) into one refresh.

import type { PolicyEngine } from '../pipeline/engine.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { Dataplane } from './dataplane.js';

export interface RefreshOnChangeOptions {
  dataplane: Pick<Dataplane, 'refresh'>;
  state: ClusterState;
  engine: PolicyEngine;
  /** How long a burst may last before the refresh runs (default 50 ms). */
  delayMs?: number;
  /** Told when a refresh fails; the next change tries again. */
  onError?: (err: unknown) => void;
}

/** Starts refreshing `dataplane` after changes; returns the function that stops it (a pending refresh is dropped). */
export function refreshOnChange(options: RefreshOnChangeOptions): () => void {
  const { dataplane, state, engine, delayMs = 50, onError } = options;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = () => {
    if (timer || stopped) return;
    timer = setTimeout(() => {
      timer = undefined;
      dataplane.refresh().catch((err) => onError?.(err));
    }, delayMs);
  };
  const unsubscribeState = state.subscribe({ podUpserted: schedule, podDeleted: schedule, objectsReplaced: schedule, objectApplied: schedule });
  const unsubscribeEngine = engine.subscribe({ activated: schedule });
  return () => {
    stopped = true;
    clearTimeout(timer);
    unsubscribeState();
    unsubscribeEngine();
  };
}
