// What a fleet node changes and reads on its own pipeline: the real agent's
// PipelineController and engine (the same build-then-swap as a REST change),
// or, in the fleet simulation, something that only records the change.
import type { PipelineController } from '../control/pipeline-controller.js';
import { PublishingPipelineController } from './publishing-services.js';
import type { PolicyEngine } from '../pipeline/engine.js';
import type { PipelineSpec, StageSpec } from '../pipeline/spec.js';
import type { NodeStageStatus } from './objects.js';

export interface NodePipelineRuntime {
  /** The active pipeline: its spec, revision, since when, and each stage's bytes and failure counters. */
  active(): { revision: number; since: string; spec: StageSpec[]; stages: NodeStageStatus[] };
  /** Builds and swaps in `spec` as a REST change would; resolves to the revision it activated. Throws (KwpError) and leaves the running pipeline alone on failure. */
  apply(spec: PipelineSpec, where: string): Promise<number>;
  /** Calls `listener` after every activation (a REST change, a rollback, an automatic rollback, apply()). */
  onActivation(listener: () => void): void;
  /** The agent's own readiness (its sources' first sync). */
  ready(): boolean;
}

/** The agent's PipelineController as a fleet node's runtime. */
export class ControllerRuntime implements NodePipelineRuntime {
  constructor(private readonly controller: PipelineController, private readonly engine: PolicyEngine, private readonly isReady: () => boolean) {}

  active(): ReturnType<NodePipelineRuntime['active']> {
    const p = this.engine.active;
    const history = this.controller.history();
    const since = [...history].reverse().find((h) => h.revision === p.revision)?.time ?? new Date(0).toISOString();
    return {
      revision: p.revision,
      since,
      spec: p.spec.stages,
      stages: p.stages.map((s) => ({
        name: s.name,
        module: `${s.compiled.meta.name}@${s.compiled.meta.version}`,
        sha256: s.compiled.sha256,
        traps: s.counters.traps,
        fuelExhausted: s.counters.fuelExhausted,
        failurePolicyAnswers: s.counters.traps + s.counters.fuelExhausted + s.counters.unavailable,
      })),
    };
  }

  async apply(spec: PipelineSpec, where: string): Promise<number> {
    // The cluster-level agent follows the object it publishes: following it must not publish it again.
    const c = this.controller;
    return (c instanceof PublishingPipelineController ? await c.applyFromCluster(spec, where) : await c.set(spec, undefined, where)).revision;
  }

  onActivation(listener: () => void): void {
    this.controller.observe({ activated: () => listener() });
  }

  ready(): boolean {
    return this.isReady();
  }
}
