// When the kernel fast path must forget what it holds, and when it must hold
// nothing at all. A tuple's verdict depends on the pipeline, on the objects
// every stage was fed and on the PodInfos of its two pods: exactly what the
// decision caches track (sdk/decision-cache.ts). So every pod event, every
// delivery of objects of a kind some stage of the active pipeline takes, and
// every activation invalidates at once, in the event itself, before any
// later decision: not after refreshOnChange's 50 ms. A snapshot of a kind
// identical to the last one (a manifest re-read re-delivers every kind) is
// not a change: the stages are fed the same objects in the same order.
//
// The fast path holds nothing while the active pipeline
//   - has an audit stage: audit stages must see every connection;
//   - has a stage without a decision cache: only an evaluator that keeps one
//     states that its verdict is a function of the tuple (source port
//     excepted) and the state (sdk/ABI.md, "The SDK's decision cache"); the
//     logging stage, for one, must see every connection;
// and a decision is not kept when a stage answered it by its failure policy
// or answers with another state than the cluster's (StageStateProblem).

import { createHash } from 'node:crypto';
import { Kinds, type KindKey, type KubeObject } from '../contract.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import type { PolicyEngine } from '../pipeline/engine.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { FastPath, InvalidationCause } from './fast-path.js';

/** Why `pipeline` cannot use the fast path, or undefined when it can. */
export function fastPathBlocker(pipeline: Pipeline): string | undefined {
  const audit = pipeline.auditing[0];
  if (audit) return `audit stage ${audit.name} must see every connection`;
  for (const stage of pipeline.stages) {
    if (stage.decisionCacheStats() === undefined) {
      return `stage ${stage.name} (module ${stage.compiled.meta.name}) keeps no decision cache, so its verdicts may depend on more than the tuple and the state`;
    }
  }
  return undefined;
}

/**
 * -1 while a stage of `pipeline` answers with another state than the
 * cluster's; otherwise the number of decisions its stages answered by their
 * failure policy so far (a decision that moves it is not kept).
 */
export function pipelineHealth(pipeline: Pipeline): number {
  let failures = 0;
  const stages = pipeline.stages;
  for (let i = 0; i < stages.length; i++) {
    const s = stages[i];
    if (s.stateProblem !== undefined) return -1;
    const c = s.counters;
    failures += c.traps + c.fuelExhausted + c.unavailable + c.deadlineExceeded;
  }
  return failures;
}

function snapshotDigest(objects: readonly KubeObject[]): string {
  const hash = createHash('sha256');
  for (const o of objects) hash.update(JSON.stringify(o)).update('\n');
  return hash.digest('hex');
}

export interface FastPathInvalidationOptions {
  fastPath: FastPath;
  state: ClusterState;
  engine: PolicyEngine;
}

/** Wires the fast path to the state and the engine; returns the function that unwires it. */
export function invalidateFastPathOnChange(options: FastPathInvalidationOptions): () => void {
  const { fastPath, state, engine } = options;
  const invalidate = (cause: InvalidationCause) => () => fastPath.invalidate(cause);
  const assess = (pipeline: Pipeline) => {
    const blocker = fastPathBlocker(pipeline);
    fastPath.block(blocker, pipeline.auditing.length > 0 ? 'audit' : 'pipeline');
  };
  fastPath.setJudgeHealth(() => (engine.hasActive ? pipelineHealth(engine.active) : -1));
  if (engine.hasActive) assess(engine.active);
  else fastPath.block('no pipeline is active yet', 'pipeline');
  const taken = (kind: KindKey) => engine.hasActive && engine.active.stages.some((s) => s.kinds.includes(kind));
  const causeOf = (kind: KindKey): InvalidationCause => (kind === Kinds.Pod ? 'pod' : 'object');
  /** The last snapshot of each kind a stage takes, as a digest; dropped when the kind changes otherwise. */
  const snapshots = new Map<KindKey, string>();
  const unsubscribeState = state.subscribe({
    podUpserted: invalidate('pod'),
    podDeleted: invalidate('pod'),
    objectsReplaced: (kind, objects) => {
      if (!taken(kind)) {
        snapshots.delete(kind);
        return;
      }
      const digest = snapshotDigest(objects);
      const same = snapshots.get(kind) === digest;
      snapshots.set(kind, digest);
      if (!same) fastPath.invalidate(causeOf(kind));
    },
    objectApplied: (kind) => {
      snapshots.delete(kind);
      if (taken(kind)) fastPath.invalidate(causeOf(kind));
    },
  });
  const unsubscribeEngine = engine.subscribe({
    activated: (next) => assess(next),
    stageFailed: invalidate('stage'),
  });
  return () => {
    unsubscribeState();
    unsubscribeEngine();
    fastPath.setJudgeHealth(() => -1);
  };
}
