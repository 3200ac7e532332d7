// Drives the rollouts of every Pipeline with the Steps strategy (and records
// completion for AllAtOnce ones): watches Pipelines, NodePipelineStatuses and
// Nodes through the same informers as everything else, plans with rollout.ts,
// and writes the Pipeline's status subresource — or, when a step failed, the
// last completed stages back as a new generation. Its state is the Pipeline's
// status, so it can restart, and the API server can, mid-rollout.
import type { KubeConfig } from '@kubernetes/client-node';
import { Kinds, type KubeObject } from '../contract.js';
import { KubernetesSource } from '../sources/kubernetes.js';
import { requestJson } from '../sources/kubernetes/request.js';
import { NODE_PIPELINE_STATUS, PIPELINE, ROLLBACK_ANNOTATION, fleetPath, nodeReportOf, parsePipelineObject, type FleetPipeline, type NodeReport, type PipelineStatus } from './objects.js';
import { ObjectCache } from './object-cache.js';
import { selectorMatches } from './node-selector.js';
import { planRollout } from './rollout.js';
import { SerialRunner } from './serial-runner.js';
import type { HostLogger } from '../logger.js';

export interface RolloutControllerOptions {
  kubeConfig: KubeConfig;
  logger: HostLogger;
  /** How often pauses are checked without any event; default 1 s. */
  tickMs?: number;
  now?: () => Date;
}

export class RolloutController {
  readonly cache: ObjectCache;
  private readonly source: KubernetesSource;
  private readonly now: () => Date;
  private timer: NodeJS.Timeout | undefined;
  private soon: NodeJS.Timeout | undefined;
  private readonly runner = new SerialRunner(async () => {
    if (this.source.synced()) await this.pass();
  }, (err) => this.options.logger.error({ err: (err as Error).message }, 'fleet: rollout pass failed unexpectedly'));
  private stopped = false;

  constructor(private readonly options: RolloutControllerOptions) {
    this.now = options.now ?? (() => new Date());
    this.cache = new ObjectCache(() => this.schedule());
    this.source = new KubernetesSource({
      kubeConfig: options.kubeConfig, kinds: [PIPELINE.kind, NODE_PIPELINE_STATUS.kind, Kinds.Node], name: 'fleet-rollout', logger: options.logger, missingKindRecheckMs: 10_000,
    });
  }

  async start(): Promise<void> {
    await this.source.start(this.cache);
    this.timer = setInterval(() => this.schedule(), this.options.tickMs ?? 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.soon);
    await this.source.stop();
    await this.runner.stop();
  }

  /** Coalesces bursts of events (a thousand status writes) into one pass. */
  private schedule(): void {
    if (this.stopped || this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.run();
    }, 50);
  }

  private run(): void {
    this.runner.request();
  }

  private async pass(): Promise<void> {
    const reports = new Map<string, NodeReport>();
    for (const o of this.cache.list(NODE_PIPELINE_STATUS.kind)) {
      const r = nodeReportOf(o);
      if (r) reports.set(o.metadata.name, r);
    }
    const nodes = this.cache.list(Kinds.Node);
    for (const o of this.cache.list(PIPELINE.kind)) {
      let p: FleetPipeline;
      try {
        p = parsePipelineObject(o);
      } catch {
        continue; // the nodes report it; nothing to roll out
      }
      const targeted = nodes.filter((n) => selectorMatches(p.nodeSelector, n.metadata.labels ?? {})).map((n) => n.metadata.name).sort();
      const action = planRollout(p, targeted, reports, this.now());
      try {
        if (action.kind === 'status') await this.writeStatus(o, action.status);
        else if (action.kind === 'rollback') {
          this.options.logger.error({ pipeline: p.objectName, generation: p.generation }, `fleet: rollout step failed, rolling back: ${action.reason}`);
          const written = await this.writeStatus(o, action.status);
          await this.writeRollback(written, p, action.status);
        }
      } catch (err) {
        // A conflict or an API server away: the next pass plans again from what it then sees.
        this.options.logger.warn({ pipeline: p.objectName, err: (err as Error).message }, 'fleet: rollout write failed; retrying');
      }
    }
  }

  private async writeStatus(o: KubeObject, status: PipelineStatus): Promise<KubeObject> {
    const body = { ...o, status };
    const written = await requestJson(this.options.kubeConfig, 'PUT', fleetPath(PIPELINE, o.metadata.name, 'status'), { body, timeoutMs: 15_000 });
    this.cache.apply(PIPELINE.kind, { type: 'upsert', object: written });
    return written;
  }

  private async writeRollback(o: KubeObject, p: FleetPipeline, status: PipelineStatus): Promise<void> {
    const { status: _s, ...object } = o as KubeObject & { status?: unknown };
    const body = {
      ...object,
      metadata: { ...o.metadata, annotations: { ...(o.metadata.annotations ?? {}), [ROLLBACK_ANNOTATION]: String(p.generation) } },
      stages: status.stable!.stages,
    };
    const written = await requestJson(this.options.kubeConfig, 'PUT', fleetPath(PIPELINE, o.metadata.name), { body, timeoutMs: 15_000 });
    this.cache.apply(PIPELINE.kind, { type: 'upsert', object: written });
  }
}
