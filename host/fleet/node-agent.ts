// A node of the fleet. Every agent with --kubeconfig watches the Pipeline and
// EvaluatorModule objects (list+watch through the Kubernetes source's
// informers), follows the Pipeline whose target selects its node, and — once
// the rollout admits it — fetches and validates the modules it lacks, then
// builds and swaps the pipeline through the same controller a REST change
// goes through. Anything that fails leaves the running pipeline alone and is
// reported, with its KWP_ERR code, in the node's own NodePipelineStatus
// object (the only object the node writes). A change made through the node's
// own admin API shows as a local override until the cluster object changes.
import type { KubeConfig } from '@kubernetes/client-node';
import { isKwpError } from '../errors.js';
import type { KubeObject } from '../contract.js';
import { compareVersions } from '../control/versions.js';
import type { PipelineSpec, StageSpec } from '../pipeline/spec.js';
import { KubernetesSource } from '../sources/kubernetes.js';
import { backoffDelay, type BackoffOptions } from '../sources/kubernetes/backoff.js';
import { getJson } from '../sources/kubernetes/request.js';
import {
  EVALUATOR_MODULE, PIPELINE, parseEvaluatorModule, parsePipelineObject,
  type EvaluatorModuleObject, type FleetPipeline, type NodeError, type NodeReport,
} from './objects.js';
import { ObjectCache } from './object-cache.js';
import { selectorMatches } from './node-selector.js';
import { isAdmitted } from './rollout.js';
import type { ModuleFetcher } from './module-fetcher.js';
import type { FleetMetrics } from './metrics.js';
import type { NodePipelineRuntime } from './runtime.js';
import { StatusWriter } from './status-writer.js';
import { SerialRunner } from './serial-runner.js';
import type { HostLogger } from '../logger.js';

export interface FleetNodeOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  runtime: NodePipelineRuntime;
  /** Fetches EvaluatorModules into the module store; without it stages resolve only to modules already there (the simulation). */
  fetcher?: ModuleFetcher;
  metrics?: FleetMetrics;
  logger: HostLogger;
  /** How often the status is refreshed when only counters moved; default 10 s. */
  statusIntervalMs?: number;
  /** Retries of a generation that failed (fetch, validation, build); default 1 s doubling to 30 s. */
  retry?: BackoffOptions;
  /**
   * The cluster-level agent: follow this Pipeline object whatever its target
   * and rollout say, and write no status (it is no node), so its own reads
   * show what the cluster runs, automatic rollbacks included.
   */
  follow?: string;
  /** Informer settings, for the simulation's thousand nodes. */
  watchTimeoutSeconds?: number;
  missingKindRecheckMs?: number;
}

export class FleetNode {
  readonly cache: ObjectCache;
  private readonly source: KubernetesSource;
  private readonly status: StatusWriter;
  private readonly log: HostLogger;
  private following: string | undefined;
  private observedGeneration: number | undefined;
  private appliedGeneration: number | undefined;
  /** The revision our last apply left active; any other active revision is a local change. */
  private appliedRevision: number | undefined;
  private lastError: NodeError | undefined;
  private firstSeen = new Map<string, number>();
  private nodeLabels: Record<string, string> | undefined;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private statusTimer: NodeJS.Timeout | undefined;
  private readonly runner = new SerialRunner(() => this.reconcile(), (err) => this.log.error({ err: (err as Error).message }, 'fleet: reconcile failed unexpectedly'));
  private stopped = false;
  private applying = false;
  private warnedSeveral = '';

  constructor(private readonly options: FleetNodeOptions) {
    this.log = options.logger;
    this.cache = new ObjectCache(() => this.trigger());
    const kinds = options.fetcher ? [PIPELINE.kind, EVALUATOR_MODULE.kind] : [PIPELINE.kind];
    this.source = new KubernetesSource({
      kubeConfig: options.kubeConfig, kinds, nodeName: options.nodeName, name: 'fleet', logger: options.logger,
      missingKindRecheckMs: options.missingKindRecheckMs ?? 10_000,
      ...(options.watchTimeoutSeconds ? { watchTimeoutSeconds: options.watchTimeoutSeconds } : {}),
    });
    this.status = new StatusWriter({ kubeConfig: options.kubeConfig, nodeName: options.nodeName, logger: options.logger, metrics: options.metrics });
    // An activation this node's own reconcile makes is reported once, when the reconcile has recorded the generation it ran:
    // reporting it here too would cost every node a second write (the new revision with the old generation) per change.
    options.runtime.onActivation(() => {
      if (!this.applying) this.publishStatus();
    });
  }

  async start(): Promise<void> {
    await this.source.start(this.cache);
    const every = this.options.statusIntervalMs ?? 10_000;
    this.statusTimer = setInterval(() => this.publishStatus(), every);
    this.statusTimer.unref();
    this.publishStatus();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.statusTimer);
    await this.source.stop();
    await this.runner.stop();
    await this.status.idle();
  }

  /** What the node reports now (what its NodePipelineStatus will say). */
  report(): NodeReport {
    const active = this.options.runtime.active();
    const followingApplied = this.appliedGeneration !== undefined;
    const errorNow = this.lastError && this.lastError.generation === this.observedGeneration ? this.lastError : undefined;
    const r: NodeReport = {
      nodeName: this.options.nodeName,
      revision: active.revision,
      since: active.since,
      ready: this.options.runtime.ready() && !errorNow,
      localOverride: followingApplied && this.appliedRevision !== active.revision,
      stages: active.stages,
    };
    if (this.following) r.pipeline = this.following;
    if (this.observedGeneration !== undefined) r.observedGeneration = this.observedGeneration;
    if (this.appliedGeneration !== undefined) r.appliedGeneration = this.appliedGeneration;
    if (this.lastError) r.lastError = this.lastError;
    return r;
  }

  private publishStatus(): void {
    if (!this.stopped && this.options.follow === undefined) this.status.write(this.report());
  }

  private trigger(): void {
    if (!this.stopped) this.runner.request();
  }

  private pipelines(): FleetPipeline[] {
    const out: FleetPipeline[] = [];
    for (const o of this.cache.list(PIPELINE.kind)) {
      try {
        out.push(parsePipelineObject(o));
      } catch (err) {
        this.log.warn({ pipeline: o.metadata.name, err: (err as Error).message }, 'fleet: ignoring an invalid Pipeline object');
      }
    }
    return out.sort((a, b) => (a.objectName < b.objectName ? -1 : 1));
  }

  private async labels(): Promise<Record<string, string>> {
    try {
      const node = (await getJson(this.options.kubeConfig, `/api/v1/nodes/${encodeURIComponent(this.options.nodeName)}`, undefined, 15_000)) as KubeObject;
      this.nodeLabels = node.metadata?.labels ?? {};
    } catch (err) {
      if (this.nodeLabels === undefined) throw err;
    }
    return this.nodeLabels;
  }

  private async reconcile(): Promise<void> {
    const all = this.pipelines();
    const follow = this.options.follow;
    const labels = follow === undefined && all.some((p) => p.nodeSelector) ? await this.labels() : {};
    const mine = all.filter((p) => (follow === undefined ? selectorMatches(p.nodeSelector, labels) : p.objectName === follow));
    if (mine.length === 0) {
      this.following = undefined;
      this.observedGeneration = undefined;
      this.publishStatus();
      return;
    }
    if (mine.length > 1 && this.warnedSeveral !== mine.map((p) => p.objectName).join(',')) {
      this.warnedSeveral = mine.map((p) => p.objectName).join(',');
      this.log.warn({ pipelines: this.warnedSeveral, following: mine[0].objectName }, 'fleet: several Pipelines target this node; following the first by name');
    }
    const p = mine[0];
    if (this.following !== p.objectName) {
      this.appliedGeneration = undefined;
      this.attempt = 0;
    }
    if (this.observedGeneration !== p.generation) this.attempt = 0;
    this.following = p.objectName;
    this.observedGeneration = p.generation;
    const key = `${p.objectName}/${p.generation}`;
    if ((follow === undefined && !isAdmitted(p, this.options.nodeName)) || this.appliedGeneration === p.generation) {
      this.publishStatus();
      return;
    }
    if (!this.firstSeen.has(key)) this.firstSeen.set(key, Date.now());
    const where = `Pipeline ${p.objectName} generation ${p.generation}`;
    try {
      const spec = await this.resolveModules(p.spec);
      const runtime = this.options.runtime;
      const active = runtime.active();
      if (sameStages(spec.stages, active.spec)) {
        this.appliedRevision = active.revision;
      } else {
        this.applying = true;
        try {
          this.appliedRevision = await runtime.apply(spec, where);
        } finally {
          this.applying = false;
        }
        this.log.info({ pipeline: p.objectName, generation: p.generation, revision: this.appliedRevision }, 'fleet: pipeline applied');
      }
      this.appliedGeneration = p.generation;
      this.lastError = undefined;
      this.attempt = 0;
      this.options.metrics?.appliedGeneration.set(p.generation);
      this.options.metrics?.convergenceSeconds.observe((Date.now() - this.firstSeen.get(key)!) / 1000);
      this.firstSeen.delete(key);
    } catch (err) {
      const code = isKwpError(err) ? err.code : 'KWP_ERR_INTERNAL';
      const message = (err as Error).message;
      const repeated = this.lastError?.generation === p.generation && this.lastError.code === code;
      this.lastError = { code, message, time: new Date().toISOString(), generation: p.generation };
      if (!repeated) this.log.error({ pipeline: p.objectName, generation: p.generation, code }, `fleet: ${where} not applied, keeping the running pipeline: ${message}`);
      const delay = backoffDelay(this.attempt++, this.options.retry ?? { initialMs: 1000, maxMs: 30_000 });
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.trigger(), delay);
      this.retryTimer.unref();
    }
    this.publishStatus();
  }

  /** Pins each stage that names an EvaluatorModule to its exact name@version, after making sure the store holds and accepted its bytes. */
  private async resolveModules(spec: PipelineSpec): Promise<PipelineSpec> {
    const fetcher = this.options.fetcher;
    if (!fetcher) return spec;
    const modules: EvaluatorModuleObject[] = [];
    const invalid: Array<{ objectName: string; error: unknown }> = [];
    for (const o of this.cache.list(EVALUATOR_MODULE.kind)) {
      try {
        modules.push(parseEvaluatorModule(o));
      } catch (error) {
        invalid.push({ objectName: o.metadata.name, error });
      }
    }
    const stages: StageSpec[] = [];
    for (const stage of spec.stages) {
      const [name, version] = stage.module.split('@');
      const candidates = modules.filter((m) => m.spec.name === name && (version === undefined || m.spec.version === version));
      // An invalid object is only a problem for a stage that names it (by its object name's NAME. prefix).
      const broken = invalid.find((m) => m.objectName.startsWith(`${name}.`));
      if (candidates.length === 0 && broken) throw broken.error;
      if (candidates.length === 0) {
        stages.push(stage);
        continue;
      }
      const chosen = candidates.sort((a, b) => compareVersions(b.spec.version, a.spec.version))[0];
      await fetcher.ensure(chosen);
      // The cluster-level agent keeps the stage as written, so the pipeline it published compares equal and is not built twice.
      stages.push(this.options.follow === undefined ? { ...stage, module: `${chosen.spec.name}@${chosen.spec.version}` } : stage);
    }
    return { stages };
  }
}

function sameStages(a: StageSpec[], b: StageSpec[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
