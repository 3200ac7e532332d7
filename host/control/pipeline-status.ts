// What each stage of the active pipeline is and what it has done: the module
// bytes it runs and its counters since it started. The admin API serves it as
// GET /v1/pipeline/status; the console turns two readings into rates.
import type { Pipeline } from '../pipeline/pipeline.js';
import type { FailurePolicy, StageMode } from '../contract.js';

export interface StageStatus {
  name: string;
  label: string;
  /** The module reference the stage spec names (`name` or `name@version`). */
  module: string;
  /** The module the reference resolved to. */
  moduleName: string;
  moduleVersion: string;
  sha256: string;
  mode: StageMode;
  failurePolicy: FailurePolicy;
  /** Counted since the stage started (a pipeline swap starts new stages), egress and ingress walks together. */
  counters: {
    decisions: number;
    accept: number;
    deny: number;
    next: number;
    pass: number;
    traps: number;
    fuelExhausted: number;
    unavailable: number;
  };
}

export interface PipelineStatus {
  revision: number;
  previousRevision?: number;
  /** When the counters were read (ISO 8601): rates divide by the time between two readings. */
  readAt: string;
  stages: StageStatus[];
}

/** Verdict counters per direction are laid out [next, accept, deny, pass] for egress, then for ingress. */
const both = (byDirection: Float64Array, verdict: number) => byDirection[verdict] + byDirection[4 + verdict];

export function pipelineStatus(active: Pipeline, previousRevision: number | undefined, now: Date = new Date()): PipelineStatus {
  const status: PipelineStatus = {
    revision: active.revision,
    readAt: now.toISOString(),
    stages: active.stages.map((s) => ({
      name: s.name,
      label: s.label,
      module: s.spec.module,
      moduleName: s.compiled.meta.name,
      moduleVersion: s.compiled.meta.version,
      sha256: s.compiled.sha256,
      mode: s.mode,
      failurePolicy: s.failurePolicy,
      counters: {
        decisions: s.counters.decisions,
        accept: both(s.verdictsByDirection, 1),
        deny: both(s.verdictsByDirection, 2),
        next: both(s.verdictsByDirection, 0),
        pass: both(s.verdictsByDirection, 3),
        traps: s.counters.traps,
        fuelExhausted: s.counters.fuelExhausted,
        unavailable: s.counters.unavailable,
      },
    })),
  };
  if (previousRevision !== undefined) status.previousRevision = previousRevision;
  return status;
}
