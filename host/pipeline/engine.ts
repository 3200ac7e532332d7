// The policy engine: builds pipelines from specs and holds the active one.
// Building instantiates, configures and feeds every stage before anything is
// activated, so a bad module or config leaves the running pipeline untouched;
// activation is a single reference swap.
//
// A stage whose spec and module are those of a started stage of a live
// pipeline is that stage, shared (Stage.share), not a new one fed again: it
// follows every state change already, so it holds exactly what a new one
// would be fed. A reorder, or a change to one stage, feeds only what changed.
import type { Decision, Packet, PodInfo } from '../contract.js';
import type { ClusterState } from '../state/cluster-state.js';
import { KwpError } from '../errors.js';
import { resolveLimits, type SandboxLimits } from '../runtime/limits.js';
import { MemoryBudget } from '../runtime/memory-budget.js';
import { INSTANCE_THREAD_BYTES } from '../runtime/isolated-instance.js';
import { Pipeline } from './pipeline.js';
import { Stage, type InstanceFailure, type StageIsolation } from './stage.js';
import { prepareFeedThread } from './worker-feed.js';
import { type ModuleResolver, resolveOrThrow } from './modules.js';
import type { PipelineSpec, StageSpec } from './spec.js';
import type { FlowBuffer } from '../flow-records/flow-buffer.js';
import type { HostLogger } from '../logger.js';

export interface PolicyEngineOptions {
  state: ClusterState;
  modules: ModuleResolver;
  logger?: HostLogger;
  /** Told about every trap, fuel exhaustion or deadline overrun of any stage of any live pipeline. */
  onStageFailure?: (stage: Stage, failure: InstanceFailure, err: KwpError) => void;
  /**
   * Where stages run their module instances (default `thread`): `worker`
   * gives each instance a thread of its own, so that a call overrunning its
   * wall-clock deadline is stopped (the agent's choice; docs/sandbox.md).
   */
  isolation?: StageIsolation;
  /** buildAsync: pods or objects fed to a stage between two turns of the event loop (default 1000). */
  feedSlice?: number;
  /**
   * buildAsync, and a stage's later instances (growth, rebuild): feed each
   * new instance of a state of 500 pods and objects or more in a thread of
   * its own and make it from that instance's memory image (worker-feed.ts),
   * so the packet path's thread does not run the feed's module calls.
   * Default false here, so an embedder opts in; the agent turns it on
   * (AgentConfig.feedThreads; docs/performance.md, "Feeding in a feed thread").
   */
  feedThreads?: boolean;
  /** The sandbox limits this engine's pipelines are held to: maxStages and memoryBudgetMiB are the engine's. */
  limits?: Partial<SandboxLimits>;
}

/** What PolicyEngine.subscribe calls; every method is optional. */
export interface EngineListener {
  /** After every activation, e.g. so the dataplane can refresh what it queues. */
  activated?(next: Pipeline, previous: Pipeline | undefined): void;
  /** Every trap or fuel exhaustion of any stage of any pipeline this engine built (the controller's automatic rollback counts them). */
  stageFailed?(stage: Stage, failure: InstanceFailure, err: KwpError): void;
}

export interface BuildAsyncOptions {
  /** Aborting disposes every stage built so far at once; the build then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Told about each stage as soon as its module is resolved, before it is fed. */
  onStage?: (stage: Stage) => void;
}

/** JSON with object keys sorted, so that two equal specs give one key whatever order their fields came in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * What makes two stages interchangeable: the whole stage spec (name, label,
 * mode and failure policy are the stage's identity in metrics, traces and
 * flow records; the config is what the module was configured with) and the
 * module's bytes.
 */
function shareKey(s: StageSpec, sha256: string): string {
  return `${sha256}\n${canonical(s)}`;
}

export class PolicyEngine {
  readonly state: ClusterState;
  private readonly modules: ModuleResolver;
  private readonly logger?: HostLogger;
  private current: Pipeline | undefined;
  private flowBuffer: FlowBuffer | undefined;
  private nextRevision = 1;
  private readonly maxStages: number;
  /** Every stage of every pipeline this engine built and nobody disposed yet reserves from it. */
  readonly memoryBudget: MemoryBudget;
  private readonly listeners = new Set<EngineListener>();
  /** The started stages of this engine's live pipelines, by shareKey: what a new build shares instead of feeding. */
  private readonly fed = new Map<string, Stage>();

  constructor(private readonly options: PolicyEngineOptions) {
    this.state = options.state;
    this.modules = options.modules;
    this.logger = options.logger;
    const limits = resolveLimits(options.limits);
    this.maxStages = limits.maxStages;
    this.memoryBudget = new MemoryBudget(limits.memoryBudgetMiB);
    // The first feed then finds a thread already started (worker-feed.ts, the spare).
    if (options.feedThreads && (options.isolation ?? 'thread') === 'thread') prepareFeedThread();
  }

  /**
   * Tells `listener` about every activation and every stage failure from now
   * on; returns the function that stops it. Parts that react to the engine
   * subscribe here, so nobody reaches into another part's callbacks.
   */
  subscribe(listener: EngineListener): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  private stageFailed(stage: Stage, failure: InstanceFailure, err: KwpError): void {
    this.options.onStageFailure?.(stage, failure, err);
    for (const l of this.listeners) l.stageFailed?.(stage, failure, err);
  }

  private checkStageCount(spec: PipelineSpec, where: string): void {
    if (spec.stages.length > this.maxStages) {
      throw new KwpError('KWP_ERR_PIPELINE_TOO_LARGE', `${where}: the pipeline has ${spec.stages.length} stages but the host allows ${this.maxStages} (sandbox limit maxStages); merge stages or raise the limit`);
    }
  }

  /** Builds and starts every stage of `spec` without activating it. Throws KwpError; nothing leaks on failure. */
  build(spec: PipelineSpec, where = 'pipeline', revision?: number): Pipeline {
    this.checkStageCount(spec, where);
    const started: Stage[] = [];
    try {
      for (const [i, s] of spec.stages.entries()) started.push(this.sharedStage(s, i, where) ?? this.startStage(s, i, where));
    } catch (err) {
      for (const s of started) s.dispose();
      throw err;
    }
    return this.assemble(spec, started, revision);
  }

  /**
   * `build`, yielding to the event loop while stages are fed
   * (Stage.startAsync). Feeding every stage the whole state takes about a
   * second at 10,000 pods, and the packet path shares this thread: with
   * `build` it waits for all of it, with `buildAsync` for one slice (or one
   * module call, such as a module's own SYNCED processing) at a time. Each
   * stage subscribes before it is fed, so changes during the build reach
   * every stage.
   */
  async buildAsync(spec: PipelineSpec, where = 'pipeline', revision?: number, options: BuildAsyncOptions = {}): Promise<Pipeline> {
    const { signal, onStage } = options;
    this.checkStageCount(spec, where);
    const started: Stage[] = [];
    let feeding: Stage | undefined;
    let abandoned = false;
    // Disposing on abort, not at the next check, leaves no started instance
    // or state subscription behind once the caller's abort() returns. Once
    // only: a shared stage released twice would be taken from the pipeline
    // that still holds it.
    const abandon = () => {
      if (abandoned) return;
      abandoned = true;
      for (const s of started) s.dispose();
      feeding?.dispose();
    };
    signal?.addEventListener('abort', abandon, { once: true });
    try {
      for (const [i, s] of spec.stages.entries()) {
        signal?.throwIfAborted();
        const shared = this.sharedStage(s, i, where);
        if (shared) {
          started.push(shared);
          onStage?.(shared);
          continue;
        }
        if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
        signal?.throwIfAborted();
        const stage = this.newStage(s, i, where);
        feeding = stage;
        onStage?.(stage);
        await stage.startAsync(this.options.feedSlice);
        feeding = undefined;
        started.push(stage);
        this.offerForSharing(stage);
        // kwp_subjects walks every pod: in its own turn, before activation, not on the first decision.
        await new Promise<void>((resolve) => setImmediate(resolve));
        signal?.throwIfAborted();
        stage.prepareSubjects();
      }
      signal?.throwIfAborted();
    } catch (err) {
      abandon();
      throw signal?.aborted ? signal.reason : err;
    } finally {
      signal?.removeEventListener('abort', abandon);
    }
    return this.assemble(spec, started, revision);
  }

  private newStage(s: StageSpec, i: number, where: string): Stage {
    const at = `${where}: stages[${i}] (${s.name})`;
    const compiled = resolveOrThrow(this.modules, s.module, at);
    // A stage whose instance runs in a thread of its own pays for the thread too (isolated-instance.ts).
    const threadBytes = this.options.isolation === 'worker' ? INSTANCE_THREAD_BYTES : 0;
    const release = this.memoryBudget.reserve(`${at}: module ${compiled.meta.name}@${compiled.meta.version}${threadBytes ? ' and its instance thread' : ''}`, compiled.reservedBytes + threadBytes);
    const stage = new Stage(s, compiled, this.state, this.logger, this.options.isolation);
    stage.feedThread = this.options.feedThreads ?? false;
    stage.onDisposed = release;
    // A stage whose state outgrows what its module reserved reserves the rest when it builds the bigger instance.
    stage.reserveMemory = (bytes) => this.memoryBudget.reserve(`${at}: module ${compiled.meta.name}@${compiled.meta.version}, growing with its state`, bytes);
    // The engine made the stage, so it alone sets the stage's failure hook, and fans the failure out.
    stage.onFailure = (failed, failure, err) => this.stageFailed(failed, failure, err);
    return stage;
  }

  private startStage(s: StageSpec, i: number, where: string): Stage {
    const stage = this.newStage(s, i, where);
    try {
      stage.start();
    } catch (err) {
      stage.dispose();
      throw err;
    }
    this.offerForSharing(stage);
    stage.prepareSubjects();
    return stage;
  }

  /** A started stage of a live pipeline built from the same spec and module, shared; undefined when there is none fit to share. */
  private sharedStage(s: StageSpec, i: number, where: string): Stage | undefined {
    const compiled = resolveOrThrow(this.modules, s.module, `${where}: stages[${i}] (${s.name})`);
    const stage = this.fed.get(shareKey(s, compiled.sha256));
    // The same object, not only the same bytes: limits and the instrumentation are the compiled module's.
    if (stage === undefined || stage.compiled !== compiled || !stage.shareable) return undefined;
    return stage.share();
  }

  /** A started stage becomes what later builds share, until it is disposed. */
  private offerForSharing(stage: Stage): void {
    const key = shareKey(stage.spec, stage.compiled.sha256);
    this.fed.set(key, stage);
    const release = stage.onDisposed;
    stage.onDisposed = () => {
      release?.();
      if (this.fed.get(key) === stage) this.fed.delete(key);
    };
  }

  private assemble(spec: PipelineSpec, started: Stage[], revision: number | undefined): Pipeline {
    const rev = revision ?? this.nextRevision;
    this.nextRevision = Math.max(this.nextRevision, rev) + 1;
    return new Pipeline(spec, started, rev, this.state);
  }

  /**
   * Flow recording (host/flow-records/): the active pipeline, and every one
   * activated later, appends each decided connection to `buffer`; undefined
   * stops it.
   */
  recordFlows(buffer: FlowBuffer | undefined): void {
    this.flowBuffer = buffer;
    if (this.current) this.current.flowBuffer = buffer;
  }

  /** Makes `next` the active pipeline; returns the previous one, still started (keep it for rollback or dispose it). */
  activate(next: Pipeline): Pipeline | undefined {
    const previous = this.current;
    next.flowBuffer = this.flowBuffer;
    if (previous && previous !== next) previous.flowBuffer = undefined;
    this.current = next;
    for (const l of this.listeners) l.activated?.(next, previous);
    return previous;
  }

  /**
   * An engine with this one's modules and sandbox limits over `state` (this
   * engine's by default), for dry runs such as POST /v1/diff: what it builds
   * is never activated here, takes no revision number of this engine's, and
   * reserves memory from a budget of its own.
   */
  trialEngine(state: ClusterState = this.state): PolicyEngine {
    return new PolicyEngine({ ...this.options, state, onStageFailure: undefined });
  }

  get active(): Pipeline {
    if (!this.current) throw new Error('no pipeline is active yet');
    return this.current;
  }

  get hasActive(): boolean { return this.current !== undefined; }

  /** The packet path (PacketJudge). */
  allows(packet: Packet): boolean {
    return this.active.allows(packet);
  }

  /** The batched packet path (PacketJudge.allowsBatch). */
  allowsBatch(packets: readonly Packet[], out: Uint8Array): void {
    this.active.allowsBatch(packets, out);
  }

  /** The batched packet path without blocking on instance threads (PacketJudge.allowsBatchAsync). */
  allowsBatchAsync(packets: readonly Packet[], out: Uint8Array): Promise<void> | undefined {
    return this.active.allowsBatchAsync(packets, out);
  }

  evaluate(packet: Packet, srcPod?: PodInfo, dstPod?: PodInfo): Decision {
    return this.active.evaluate(packet, srcPod, dstPod);
  }

  interest(): { all: boolean; ips: string[] } {
    return this.active.interest();
  }
}
