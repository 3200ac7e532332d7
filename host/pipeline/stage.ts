// A stage: one module instance in a pipeline, with its config, mode and
// failure policy. The stage keeps its instance fed from ClusterState and
// contains every failure of the module: a trap or an empty fuel tank costs the
// stage's failure policy for that decision, never an exception in the host,
// and a fresh instance is rebuilt and re-fed in the background.
import type { Attribution } from '../abi/attribution.js';
import type { FailurePolicy, KindKey, KubeObject, ObjectEvent, PodInfo, StageMode } from '../contract.js';
import { Verdict } from '../contract.js';
import { KwpError } from '../errors.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { EvaluatorInstance, type DecisionCacheStats, type ModuleInstance, type PairAnswers, type PairCodes, type RejectedObject } from '../runtime/instance.js';
import { IsolatedInstance } from '../runtime/isolated-instance.js';
import { RejectedObjects } from './rejected-objects.js';
import { encodePodInfo } from '../abi/podinfo-codec.js';
import { ObjectOp, encodeObject } from '../abi/objects.js';
import { OFF_DIRECTION, RECORD_SIZE } from '../abi/record.js';
import { LineRate } from '../runtime/line-rate.js';
import { memoryCapForState, PAGE_BYTES } from '../runtime/limits.js';
import type { ClusterState, StateListener } from '../state/cluster-state.js';
import type { StateEvent } from '../state/state-events.js';
import type { StageSpec } from './spec.js';
import { HeldState } from './held-state.js';
import { feedCalls, RecordPacker } from './feed-order.js';
import { startFeedThread, ModuleFeedFailure, type FedImage, type FedMemory, type FeedThread } from './worker-feed.js';
import { RetryBackoff } from './retry-backoff.js';
import { loggerOf, type HostLogger } from '../logger.js';
import { TimeSlices } from '../time-slices.js';

/**
 * Why a stage answers with another state than the cluster's:
 * - `growing`: the state outgrew the instance's memory cap and a bigger
 *   instance is being fed; the current one answers with the state it held;
 * - `rebuilding`: the instance broke and a new one is being fed (the failure
 *   policy answers meanwhile);
 * - `rejected`: the module cannot hold the current state within the ceiling;
 *   the stage answers with the last state it held until the state changes
 *   and a retry (with back-off) succeeds.
 */
export interface StageStateProblem {
  kind: 'growing' | 'rebuilding' | 'refreshing' | 'rejected';
  message: string;
  /** Date.now() when it began. */
  since: number;
}

/** Of an instance that trapped: whether it had used most of its cap, so that a bigger cap may help. */
function nearCap(inst: FedMemory): boolean {
  return inst.memoryBytes >= 0.75 * inst.memoryCapPages * PAGE_BYTES;
}

const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;

const NO_SUBJECTS = new Uint8Array(0);
export interface StageCounters {
  decisions: number;
  accept: number;
  deny: number;
  next: number;
  traps: number;
  fuelExhausted: number;
  /** Decisions answered by the failure policy because no healthy instance existed. */
  unavailable: number;
  /** Calls that overran their wall-clock deadline (decisionDeadlineMs, callDeadlineMs): the thread running them was stopped. */
  deadlineExceeded: number;
  rebuilds: number;
  /** Of `decisions`: records answered Next without a call, because neither pod is one the module named in kwp_subjects. */
  skipped: number;
}

export type StageFailure = 'trap' | 'fuel' | 'deadline' | 'unavailable';
/** What broke an instance (the failures an automatic rollback counts). */
export type InstanceFailure = Exclude<StageFailure, 'unavailable'>;

/**
 * Where a stage's instances run: `thread`, in the thread that calls the stage
 * (fuel is the only bound on time); `worker`, each in a thread of its own
 * that the host stops when a call overruns its deadline (isolated-instance.ts).
 */
export type StageIsolation = 'thread' | 'worker';

/** A delivery that arrived while an instance was being fed: applied to it, and to the snapshot it was fed, once the feed is done. */
interface QueuedDelivery {
  fn: (inst: ModuleInstance) => void;
  hold: (held: HeldState) => void;
}

/** A state streamed to a feed thread (currentStateAsync): that thread, and the memory cap it was sent. */
interface PackedState {
  cap: number;
  thread: FeedThread;
}

/** The longest the feeding of an instance in this thread runs between two turns of the event loop. */
const FEED_SLICE_MS = 2;

/**
 * The fewest pods and objects a state has for a feed thread to feed it
 * (feedsInWorker): a smaller one is fed here in a few short slices, sooner
 * than a thread starts.
 */
const FEED_THREAD_MIN_DELIVERIES = 500;

/** A quarantine starts over after this long without an overrun. */
const QUARANTINE_RESET_MS = 300_000;

/** answerForDrain's flags beside the verdict: the failure policy answered; and the stage had no instance to ask. */
export const DRAIN_FAILED = 0x100;
export const DRAIN_UNAVAILABLE = 0x200;

export class Stage implements StateListener {
  readonly name: string;
  readonly label: string;
  readonly mode: StageMode;
  readonly failurePolicy: FailurePolicy;
  readonly spec: StageSpec;
  readonly compiled: CompiledEvaluator;
  private readonly tally: StageCounters = { decisions: 0, accept: 0, deny: 0, next: 0, traps: 0, fuelExhausted: 0, unavailable: 0, deadlineExceeded: 0, rebuilds: 0, skipped: 0 };
  /**
   * Records the pipelines' one-packet walks skipped by their subject masks
   * without touching this stage (Pipeline.skipTallies): a pipeline's array and
   * this stage's index in it, folded into the counters when they are read.
   */
  private readonly skipTallies: { tally: Float64Array; index: number }[] = [];
  /**
   * Called whenever what subjectFilter() or decidesPairs answers may have
   * changed (Pipeline's subject masks follow it); `replaced` when a new
   * instance took the place of the one before (see the `instance` setter).
   */
  private readonly filterWatchers: ((replaced: boolean) => void)[] = [];
  /**
   * Verdicts by direction: index `direction << 2 | verdict` (0 egress, 1
   * ingress; verdicts as in the ABI). Decisions answered without a call
   * (`skipped`) are not in it. Read by the metrics; one increment a decision.
   */
  readonly verdictsByDirection = new Float64Array(8);
  /** The verdict a failed decision gets: Next for fail-open, Deny for fail-closed. */
  readonly failureVerdict: number;
  /** Why the last decision used the failure policy, when it did. */
  lastFailure: StageFailure | undefined;
  private current: ModuleInstance | undefined;
  /** The instance deciding now; every change of it may change subjectFilter() and decidesPairs. */
  private get instance(): ModuleInstance | undefined { return this.current; }
  private set instance(inst: ModuleInstance | undefined) {
    this.current = inst;
    if (inst !== undefined) this.subjectsAtFailure = null;
    // A new instance is only ever set between walks (a build, a rebuild), never while one decides,
    // so watchers may drop what they kept of the one it replaces; a failure mid-walk only clears it.
    this.filterChanged(inst !== undefined);
  }
  private readonly kindIndex = new Map<KindKey, number>();
  /** The flow buffers whose records this stage's module may still be asked about (Pipeline.flowBuffer, attributeDeferred). */
  private readonly flowGuards = new Set<{ settle(): void; noteFailure(): void }>();
  private unsubscribe: (() => void) | undefined;
  private rebuildScheduled = false;
  private disposed = false;
  /**
   * The pods the module named in kwp_subjects, as a byte per pod id (1 =
   * subject), or null when it wants all traffic. A new instance computes it
   * at its first decision; after a delivery it is stale, every record goes
   * to the module, and it is recomputed off the packet path (kwp_subjects
   * walks every pod: milliseconds at 10,000 pods).
   */
  private subjectIdsNow: Uint8Array | null = null;
  private subjectsStateNow: 'never' | 'fresh' | 'stale' = 'never';
  private get subjectIds(): Uint8Array | null { return this.subjectIdsNow; }
  private set subjectIds(ids: Uint8Array | null) {
    this.subjectIdsNow = ids;
    this.filterChanged();
  }
  private get subjectsState(): 'never' | 'fresh' | 'stale' { return this.subjectsStateNow; }
  private set subjectsState(state: 'never' | 'fresh' | 'stale') {
    this.subjectsStateNow = state;
    this.filterChanged();
  }
  private subjectsRefreshScheduled = false;
  /** Set while startAsync feeds the module: deliveries wait here. */
  private feedQueue: QueuedDelivery[] | undefined;
  /** What the instance holds (set whenever `instance` is). */
  private held: HeldState | undefined;
  private building = false;
  /** Set while the stage answers with another state than the cluster's (metrics, /readyz). */
  stateProblem: StageStateProblem | undefined;
  /** Instances grown because the state outgrew the cap; states the module could not hold. */
  readonly stateCounters = { grown: 0, rejected: 0 };
  private readonly retry = new RetryBackoff();
  /** Pods or objects fed between two turns of the event loop (startAsync sets it for later builds too). */
  private slice = 1000;
  /** Set when a bulk change arrives while a build feeds: the build starts over from the state that change led to. */
  private feedStale = false;
  /**
   * Whether new instances may be fed in a feed thread and made from its
   * image (feedsInWorker); the engine's option, off by default.
   */
  feedThread = false;
  /** The feed thread started for the state being packed or fed, cancelled when the stage is disposed. */
  private workerFeed: FeedThread | undefined;
  /** Called once, when the stage is disposed (the engine returns its memory reservation). */
  onDisposed: (() => void) | undefined;
  /**
   * Set by the engine: reserves `bytes` more of the memory budget when an
   * instance is built with a bigger cap than the stage reserved so far
   * (throws KWP_ERR_MEMORY_BUDGET); returns the release.
   */
  reserveMemory: ((bytes: number) => () => void) | undefined;
  /** Pages of the memory budget this stage holds: what the engine reserved for its module, then its largest cap. */
  private reservedPages: number;
  private readonly releases: Array<() => void> = [];
  /** Called after a trap or fuel exhaustion, for metrics and automatic rollback. */
  onFailure: ((stage: Stage, failure: InstanceFailure, err: KwpError) => void) | undefined;
  /** Overruns of a deadline: each doubles how long the stage answers its failure policy before a rebuild. */
  private readonly quarantine: RetryBackoff;
  private lastOverrunAt = 0;

  /** The failure-policy error lines: a module failing on every packet would otherwise write one per packet. */
  private readonly failureLines: LineRate;

  /** Objects the module refused when it took them (kwp_objects_rejected). */
  readonly rejectedObjects = new RejectedObjects();
  /** The instances' logger: the stage's, with each rejection recorded and its line naming the stage. */
  private readonly instanceLogger: HostLogger;

  constructor(spec: StageSpec, compiled: CompiledEvaluator, private readonly state: ClusterState, private readonly logger?: HostLogger, readonly isolation: StageIsolation = 'thread') {
    this.quarantine = new RetryBackoff(compiled.limits.deadlineQuarantineMs, QUARANTINE_RESET_MS);
    this.instanceLogger = loggerOf((level, message, fields) => {
      const rejected = (fields as { rejected?: RejectedObject }).rejected;
      if (rejected) this.rejectedObjects.add(rejected);
      this.logger?.[level](rejected ? { ...fields, stage: this.name } : fields, message);
    });
    this.failureLines = new LineRate(compiled.limits.failureLinesPerSecond);
    this.spec = spec;
    this.name = spec.name;
    this.label = spec.label ?? spec.name;
    this.mode = spec.mode ?? 'enforce';
    this.failurePolicy = spec.failurePolicy ?? compiled.meta.failurePolicy;
    this.failureVerdict = this.failurePolicy === 'fail-closed' ? Verdict.Deny : Verdict.Next;
    this.compiled = compiled;
    this.reservedPages = Math.floor(compiled.reservedBytes / PAGE_BYTES);
    compiled.meta.kinds.forEach((k, i) => this.kindIndex.set(k, i));
  }

  /** Instantiates, configures and feeds the module, then follows the state. Throws on a refused config or a state it cannot hold. */
  start(): void {
    const source = this.currentState();
    this.instance = this.buildSync(source);
    this.held = source;
    this.subjectsState = 'never';
    this.unsubscribe = this.state.subscribe(this);
  }

  /**
   * `start`, feeding the state in slices of `slice` pods or objects with a
   * turn of the event loop between them, so the packet path is not held for a
   * whole feed. The stage subscribes first: deliveries that arrive while it is
   * being fed are queued and applied after the snapshot (upserts of objects
   * the snapshot already had are idempotent). Rejects, subscribed to nothing,
   * on a refused config, a trap, or a state the module cannot hold.
   */
  async startAsync(slice = 1000): Promise<void> {
    this.slice = slice;
    const queued: QueuedDelivery[] = [];
    this.feedQueue = queued;
    this.unsubscribe = this.state.subscribe(this);
    try {
      const { inst, held, subjects } = await this.buildAsync(queued);
      this.instance = inst;
      this.held = held;
      this.takeSubjects(subjects);
    } catch (err) {
      this.unsubscribe?.();
      this.unsubscribe = undefined;
      throw err;
    } finally {
      this.feedQueue = undefined;
    }
  }

  /**
   * Pipelines holding this stage. The engine shares a started stage between
   * revisions whose stage specs and module are the same (a reorder, a change
   * elsewhere in the pipeline), so it is not fed again; the last holder's
   * dispose() disposes it.
   */
  private holders = 1;

  /** One more pipeline holds this stage; returns it. */
  share(): this {
    if (this.disposed) throw new Error(`stage ${this.name} is disposed and cannot be shared`);
    this.holders++;
    return this;
  }

  /**
   * Whether another pipeline may share this stage as it is: its instance is
   * healthy and holds the cluster's current state (it follows every change),
   * not a last-held or half-fed one.
   */
  get shareable(): boolean {
    const inst = this.instance;
    return !this.disposed && inst !== undefined && !inst.broken && this.stateProblem === undefined && !this.building && this.feedQueue === undefined && this.unsubscribe !== undefined;
  }

  /**
   * Computes the subject filter now rather than at the first decision
   * (kwp_subjects walks every pod): the engine calls it while building, so a
   * new pipeline's first decisions are not held by it.
   */
  prepareSubjects(): void {
    if (this.subjectsState === 'never' && this.instance !== undefined && !this.instance.broken) this.refreshSubjects();
  }

  /**
   * Flow records decided by this stage go to `buffer`: it is drained before
   * the module's state or instance changes (a delivery, a new instance,
   * disposal), so the drain asks the module that decided them.
   */
  guardFlows(buffer: { settle(): void; noteFailure(): void }): void {
    this.flowGuards.add(buffer);
  }

  /** Before the module's state or instance changes: each flow buffer's pending records are drained (FlowBuffer.settle). */
  private settleFlows(): void {
    for (const buffer of this.flowGuards) buffer.settle();
  }

  /** Releases one holder; the last one stops the instance and the state subscription. */
  dispose(): void {
    if (this.disposed) return;
    if (--this.holders > 0) return;
    this.settleFlows();
    this.disposed = true;
    this.retry.cancel();
    this.workerFeed?.cancel();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    // Retired by a swap: the next feeding swap of this module may restore into its memory.
    this.instance?.close(true);
    this.instance = undefined;
    this.held = undefined;
    this.onDisposed?.();
    this.onDisposed = undefined;
    for (const release of this.releases.splice(0)) release();
  }

  get healthy(): boolean { return this.instance !== undefined && !this.instance.broken; }
  get memoryBytes(): number { return this.instance?.memoryBytes ?? 0; }
  /** The most pages the current instance's memory may grow to (0 without one). */
  get memoryCapPages(): number { return this.instance?.memoryCapPages ?? 0; }
  /** Bytes of state delivered to the current instance. */
  get heldBytes(): number { return this.held?.bytes ?? 0; }
  /** The current instance's decision-cache hits and misses (they restart with a rebuilt instance); undefined without a cache. */
  decisionCacheStats(): DecisionCacheStats | undefined {
    const inst = this.instance;
    if (!inst) return undefined;
    try {
      return inst.decisionCacheStats();
    } catch (err) {
      this.failed(err);
      return undefined;
    }
  }
  get kinds(): readonly string[] { return this.compiled.meta.kinds; }

  // ---- building instances: the memory cap follows the state ----

  /** A snapshot of the cluster state this stage's module is fed. */
  private currentState(): HeldState {
    const objects = [...this.kindIndex.keys()].map((kind) => this.state.objects(kind));
    return HeldState.of(this.state.pods(), objects);
  }

  /**
   * `currentState`, sized in slices: what it holds is read at once (so it is
   * one consistent state), but the sizes of objects it has not seen before
   * (their JSON: a second at 100,000 policies) are worked out between turns
   * of the event loop. With `packIfLarge`, a state of at least
   * FEED_THREAD_MIN_DELIVERIES pods and objects is also streamed to a feed
   * thread (feedsInWorker), started right after the read: once the state is
   * sized, the thread is sent the cap `capOf` gives for its bytes (reserved
   * from the memory budget here), then every record and object as it is
   * encoded, one chunk a slice, so the thread feeds while this thread packs.
   */
  private async currentStateAsync(packIfLarge = false, capOf?: (bytes: number) => number): Promise<{ held: HeldState; packed?: PackedState }> {
    const pods = [...this.state.pods()];
    const objects = [...this.kindIndex.keys()].map((kind) => this.state.objects(kind));
    const pack = packIfLarge && capOf !== undefined && pods.length + objects.reduce((n, list) => n + list.length, 0) >= FEED_THREAD_MIN_DELIVERIES;
    // Taken now (the spare, started and loaded ahead, or a thread that then loads while the state is sized here).
    const thread = pack ? this.startFeedThread() : undefined;
    // The maps are filled in slices: at 10,000 pods and objects one go takes milliseconds.
    const held = new HeldState(objects.length);
    const slices = new TimeSlices(FEED_SLICE_MS);
    for (let i = 0; i < pods.length; i++) {
      held.upsertPod(pods[i]);
      if (slices.dueAt(i, 63)) await slices.yield();
    }
    for (let kind = 0; kind < objects.length; kind++) {
      const list = objects[kind];
      for (let i = 0; i < list.length; i++) {
        held.addObject(kind, list[i]);
        if (slices.dueAt(i, 63)) await slices.yield();
      }
    }
    if (!thread) return { held };
    let cap: number;
    try {
      cap = capOf!(held.bytes);
      this.reserveCap(cap);
    } catch (err) {
      thread.cancel();
      throw err;
    }
    thread.send({ begin: { memoryPages: cap, config: this.spec.config ?? {} } });
    const packer = new RecordPacker();
    // One list (the pods, a kind's objects) after the other, a chunk sent whenever the slice is up.
    const stream = async <T>(list: readonly T[], encode: (item: T) => Uint8Array) => {
      for (let i = 0; i < list.length; i++) {
        packer.append(encode(list[i]));
        if ((i & 63) === 63 && slices.due()) {
          thread.send({ records: packer.take() });
          await slices.yield();
        }
      }
      thread.send({ records: packer.take() });
      thread.send({ end: true });
    };
    await stream(pods, encodePodInfo);
    for (const list of objects) await stream(list, encodeObject);
    return { held, packed: { cap, thread } };
  }

  /**
   * Whether this stage's new instances are fed in a thread of their own and
   * made from the fed instance's memory image (worker-feed.ts): instances in
   * this thread of a module whose state an image holds, unless the engine
   * turned it off.
   */
  private get feedsInWorker(): boolean {
    return this.feedThread && this.isolation === 'thread' && this.compiled.imageGlobals !== undefined;
  }

  /** A feed thread for this stage's module, cancelled if the stage is disposed before its feed settles. */
  private startFeedThread(): FeedThread {
    this.workerFeed?.cancel();
    const thread = startFeedThread(this.compiled, this.instanceLogger);
    this.workerFeed = thread;
    return thread;
  }

  /**
   * The image of the instance `packed`'s feed thread was streamed the state
   * to; undefined when that feed failed, so the caller feeds in this thread
   * instead (which reproduces a module failure with the stage's own
   * handling: a bigger cap, the state rejected).
   */
  private async fedInWorker(packed: PackedState): Promise<FedImage | undefined> {
    try {
      return await packed.thread.result;
    } catch (err) {
      // A module failure is handled as one in this thread; a failure of the thread itself makes the caller feed here.
      if (err instanceof ModuleFeedFailure) throw err;
      return undefined;
    } finally {
      packed.thread.cancel();
      if (this.workerFeed === packed.thread) this.workerFeed = undefined;
    }
  }

  private get limits() { return this.compiled.limits; }

  /** The cap to build with for `bytes` of state: what the limits give it, and at least `floor`. */
  private capFor(bytes: number, floor = 0): number {
    return Math.min(this.limits.maxStageMemoryPages, Math.max(floor, memoryCapForState(this.limits, bytes)));
  }

  /** Configures and feeds `inst` with `source`, yielding after every pod and object. */
  private feeding(inst: ModuleInstance, source: HeldState): Generator<void> {
    const pods = function* () { for (const pod of source.pods.values()) yield encodePodInfo(pod); };
    const objects = source.objects.map((map) => (function* () { for (const obj of map.values()) yield encodeObject(obj); })());
    return feedCalls(inst, this.spec.config, pods(), objects);
  }

  /**
   * After a failed feed at `cap` pages: the next cap to try, or undefined
   * when a bigger cap cannot help (the module defines its own memory, did not
   * run out of it, or the cap is at the ceiling).
   */
  private biggerCap(inst: FedMemory | undefined, err: unknown): number | undefined {
    if (!inst || !this.compiled.memoryImport || !(err instanceof KwpError) || err.code !== 'KWP_ERR_TRAP') return undefined;
    if (!nearCap(inst) || inst.memoryCapPages >= this.limits.maxStageMemoryPages) return undefined;
    return Math.min(this.limits.maxStageMemoryPages, inst.memoryCapPages * 2);
  }

  /** The error for a state the module cannot hold: names the stage, the state and the limit. */
  private cannotHold(err: unknown, inst: FedMemory | undefined, source: HeldState): KwpError {
    // A refused config, the budget and a deadline are not about the state's size: their own message says what happened.
    if (err instanceof KwpError && (err.code === 'KWP_ERR_CONFIG_REJECTED' || err.code === 'KWP_ERR_MEMORY_BUDGET' || err.code === 'KWP_ERR_DEADLINE_EXCEEDED')) return err;
    const cap = inst?.memoryCapPages ?? 0;
    const limit = this.compiled.memoryImport
      ? `its memory cap of ${cap} pages (${mib(cap * PAGE_BYTES)}; the ceiling is the sandbox limit maxStageMemoryPages = ${this.limits.maxStageMemoryPages})`
      : `the ${cap} pages its own memory declares at most (it does not import env.memory, so its cap cannot follow the state)`;
    const used = inst ? `, ${inst.memoryBytes / PAGE_BYTES} pages in use` : '';
    return new KwpError('KWP_ERR_STATE_TOO_LARGE',
      `stage ${this.name}: module ${this.compiled.meta.name} cannot hold the state (${source.pods.size} pods, ${source.objectCount} objects, ${mib(source.bytes)} delivered) within ${limit}${used}: ${(err as Error).message}`,
      { cause: err });
  }

  /** An instance capped at `cap` pages, once the memory budget has room for a cap above what the stage reserved. */
  private newInstance(cap: number): ModuleInstance {
    this.reserveCap(cap);
    if (this.isolation === 'worker') return IsolatedInstance.start(this.compiled, this.instanceLogger, { memoryPages: cap });
    return new EvaluatorInstance(this.compiled, this.instanceLogger, { memoryPages: cap });
  }

  /** `newInstance`, without blocking the event loop while an instance thread starts. */
  private async newInstanceAsync(cap: number): Promise<ModuleInstance> {
    this.reserveCap(cap);
    if (this.isolation === 'worker') return IsolatedInstance.startAsync(this.compiled, this.instanceLogger, { memoryPages: cap });
    return new EvaluatorInstance(this.compiled, this.instanceLogger, { memoryPages: cap });
  }

  private reserveCap(cap: number): void {
    if (this.compiled.memoryImport && cap > this.reservedPages && this.reserveMemory) {
      try {
        this.releases.push(this.reserveMemory((cap - this.reservedPages) * PAGE_BYTES));
      } catch (err) {
        throw new KwpError((err as KwpError).code ?? 'KWP_ERR_MEMORY_BUDGET', `stage ${this.name}: growing its memory cap from ${this.reservedPages} to ${cap} pages for its state: ${(err as Error).message}`, { cause: err });
      }
      this.reservedPages = cap;
    }
  }

  private buildSync(source: HeldState): ModuleInstance {
    let cap = this.capFor(source.bytes);
    for (;;) {
      let inst: ModuleInstance | undefined;
      try {
        inst = this.newInstance(cap);
        for (const _ of this.feeding(inst, source));
        return inst;
      } catch (err) {
        inst?.close();
        const next = this.biggerCap(inst, err);
        if (next === undefined) throw this.cannotHold(err, inst, source);
        cap = next;
      }
    }
  }

  /**
   * Builds an instance in slices. With `queued` it is fed the current state
   * and then the deliveries queued meanwhile, which update the snapshot it
   * was fed too rather than a second synchronous snapshot (each attempt re-reads the
   * state, which includes them, so the queue starts over); without, it is
   * fed `from` only. A cap that proves too small is doubled up to the ceiling.
   */
  private async buildAsync(queued: QueuedDelivery[] | null, from?: HeldState, floor = 0, sized?: (bytes: number) => number): Promise<{ inst: ModuleInstance; held: HeldState; subjects?: 'all' | number[] }> {
    this.feedStale = false;
    const pack = from === undefined && this.feedsInWorker;
    // The first snapshot's cap: what the state's bytes need (`sized` says once whether that is a growth).
    const firstCap = (bytes: number) => {
      if (sized) floor = Math.max(floor, sized(bytes));
      return this.capFor(bytes, floor);
    };
    let snapshot: { held: HeldState; packed?: PackedState } = from ? { held: from } : await this.currentStateAsync(pack, firstCap);
    let source = snapshot.held;
    let cap = snapshot.packed?.cap ?? firstCap(source.bytes);
    const disposedWhileBuilt = () => new KwpError('KWP_ERR_PIPELINE_INVALID', `stage ${this.name} was disposed while it was being built`);
    for (;;) {
      let inst: ModuleInstance | undefined;
      try {
        // A streamed state is fed once (a retry feeds in this thread, or streams a new snapshot).
        const packed = snapshot.packed;
        snapshot.packed = undefined;
        const image = packed && await this.fedInWorker(packed);
        if (this.disposed) throw disposedWhileBuilt();
        if (!image) {
          inst = await this.newInstanceAsync(cap);
          if (this.disposed) throw disposedWhileBuilt();
          let fed = 0;
          const slices = new TimeSlices(FEED_SLICE_MS);
          // An isolated instance takes each call in its own thread while this
          // one awaits it (feedDeadlineMs): nothing here waits on module code.
          inst.feeding = inst.settle !== undefined;
          for (const _ of this.feeding(inst, source)) {
            if (inst.settle) {
              await inst.settle();
              if (this.disposed) throw disposedWhileBuilt();
              continue;
            }
            // A slice ends after `slice` calls or FEED_SLICE_MS, whichever is first: on a loaded
            // machine 1,000 pods took over 100 ms, and the packet path waits for a whole slice.
            if (++fed % this.slice !== 0 && !slices.due()) continue;
            fed = 0;
            await slices.yield();
            if (this.disposed) throw disposedWhileBuilt();
          }
          inst.feeding = false;
        }
        if (queued && this.feedStale) {
          // A bulk change arrived meanwhile and was not queued: feed a fresh instance the state it led to.
          this.feedStale = false;
          inst?.close();
          queued.length = 0;
          snapshot = await this.currentStateAsync(pack, (bytes) => Math.max(cap, this.capFor(bytes, floor)));
          source = snapshot.held;
          cap = snapshot.packed?.cap ?? Math.max(cap, this.capFor(source.bytes, floor));
          continue;
        }
        // One copy of the fed memory in this thread, instead of the feed's module calls.
        if (image) {
          inst = await EvaluatorInstance.fromImageInSlices(this.compiled, this.instanceLogger, { memoryPages: cap, image: image.image }, FEED_SLICE_MS);
          if (this.disposed) throw disposedWhileBuilt();
        }
        // The subjects the feed thread found are this instance's unless a delivery came in meanwhile.
        const subjects = image && !queued?.length ? image.subjects : undefined;
        if (queued) {
          // Replayed in slices (a relabel streamed as watch events can queue thousands); what comes meanwhile joins the queue.
          const replaySlices = new TimeSlices(FEED_SLICE_MS);
          for (let i = 0; i < queued.length && !this.feedStale; i++) {
            queued[i].fn(inst!);
            queued[i].hold(source);
            if (!replaySlices.due()) continue;
            await replaySlices.yield();
            if (this.disposed) throw disposedWhileBuilt();
          }
          if (this.feedStale) {
            // A bulk change arrived during the replay: start over from the state it led to.
            this.feedStale = false;
            inst!.close();
            queued.length = 0;
            snapshot = await this.currentStateAsync(pack, (bytes) => Math.max(cap, this.capFor(bytes, floor)));
            source = snapshot.held;
            cap = snapshot.packed?.cap ?? Math.max(cap, this.capFor(source.bytes, floor));
            continue;
          }
          queued.length = 0;
        }
        return { inst: inst!, held: source, subjects };
      } catch (caught) {
        inst?.close();
        // A failure in the feed thread counts as one here, with the memory of the instance it failed in.
        const failedIn = caught instanceof ModuleFeedFailure ? caught.instance : inst;
        const err = caught instanceof ModuleFeedFailure ? caught.error : caught;
        const next = this.disposed ? undefined : this.biggerCap(failedIn, err);
        if (next === undefined) throw this.cannotHold(err, failedIn, source);
        cap = next;
        if (queued) {
          queued.length = 0;
          snapshot = await this.currentStateAsync(pack, () => cap);
          source = snapshot.held;
        }
      }
    }
  }

  /**
   * Replaces the instance with one fed the current state, off the packet
   * path; whatever instance there is keeps answering until then. When the
   * module cannot hold the current state, the stage keeps (or, when its
   * instance broke, rebuilds from) the last state it held, says so, and
   * tries again only when the state changes, with back-off.
   */
  private async replaceInstance(problem: StageStateProblem, floor = 0, sized?: (bytes: number) => number): Promise<void> {
    if (this.building || this.disposed) return;
    this.building = true;
    this.stateProblem = problem;
    const queued: QueuedDelivery[] = [];
    this.feedQueue = queued;
    try {
      const { inst, held, subjects } = await this.buildAsync(queued, undefined, floor, sized);
      if (this.disposed) {
        inst.close();
        return;
      }
      this.settleFlows();
      this.instance?.close();
      this.instance = inst;
      this.held = held;
      this.takeSubjects(subjects);
      this.stateProblem = undefined;
      this.retry.succeeded();
      this.tally.rebuilds++;
    } catch (err) {
      this.feedQueue = undefined;
      if (this.disposed) return;
      await this.rejectState(err);
    } finally {
      this.feedQueue = undefined;
      this.building = false;
    }
  }

  private async rejectState(err: unknown): Promise<void> {
    const kerr = err instanceof KwpError ? err : new KwpError('KWP_ERR_TRAP', String(err));
    this.stateCounters.rejected++;
    this.retry.failed();
    const held = this.held;
    const keeping = held
      ? `answering with the last state it held (${held.pods.size} pods, ${held.objectCount} objects)`
      : `answering ${this.failurePolicy}: it never held a state`;
    const message = `${kerr.message}; ${keeping}; trying again when the state changes, not before ${Math.round(this.retry.nextDelayMs / 1000)} s`;
    this.stateProblem = { kind: 'rejected', message, since: Date.now() };
    this.logger?.error({ stage: this.name, code: kerr.code, memoryCapPages: this.limits.maxStageMemoryPages }, message);
    if (this.instance || !held) return;
    // The instance broke on a delivery: the last good state goes into a new one.
    try {
      const { inst } = await this.buildAsync(null, held, held.bytes ? this.capFor(held.bytes) : 0);
      if (this.disposed) {
        inst.close();
        return;
      }
      this.instance = inst;
      this.subjectsState = 'never';
      this.tally.rebuilds++;
    } catch (again) {
      this.logger?.error({ stage: this.name }, `stage ${this.name}: rebuilding from the last state it held failed too (${(again as Error).message}); answering ${this.failurePolicy}`);
    }
  }

  /** A state change while rejected: one retry once the back-off allows. */
  private stateChangedWhileRejected(): void {
    this.retry.stateChanged(() => {
      if (this.disposed || this.stateProblem?.kind !== 'rejected') return;
      // Still feeding the last state held into a new instance: try once that is done.
      if (this.building) { setTimeout(() => this.stateChangedWhileRejected(), 500).unref?.(); return; }
      void this.replaceInstance({ ...this.stateProblem });
    });
  }

  private failed(err: unknown): void {
    const kerr = err instanceof KwpError ? err : new KwpError('KWP_ERR_TRAP', String(err));
    const failure: InstanceFailure = kerr.code === 'KWP_ERR_FUEL_EXHAUSTED' ? 'fuel' : kerr.code === 'KWP_ERR_DEADLINE_EXCEEDED' ? 'deadline' : 'trap';
    if (failure === 'fuel') this.tally.fuelExhausted++;
    else if (failure === 'deadline') this.tally.deadlineExceeded++;
    else this.tally.traps++;
    this.lastFailure = failure;
    const broken = this.instance;
    if (failure === 'deadline') {
      // Quarantine: the stage answers its failure policy, without calling the module, until the rebuild.
      const now = Date.now();
      if (now - this.lastOverrunAt > QUARANTINE_RESET_MS) this.quarantine.succeeded();
      this.quarantine.failed();
      this.lastOverrunAt = now;
      this.logFailure(`stage ${this.name}: ${kerr.message}; answering ${this.failurePolicy} and quarantined for ${this.quarantine.nextDelayMs} ms before the module is rebuilt (overrun ${this.quarantine.failures} in a row; sandbox limit deadlineQuarantineMs)`, kerr.code);
    } else {
      this.logFailure(`stage ${this.name}: ${kerr.message}; answering ${this.failurePolicy} until the module is rebuilt`, kerr.code);
    }
    // The walks decided until now skipped this stage by the subjects it had; the drain walks theirs the same way (drainSubjects).
    this.subjectsAtFailure = this.subjectsState === 'fresh' ? this.subjectIds : null;
    this.instance = undefined;
    // Records whose walk was left to the drain cannot ask this instance any more (FlowBuffer.noteFailure).
    for (const buffer of this.flowGuards) buffer.noteFailure();
    broken?.close();
    this.onFailure?.(this, failure, kerr);
    this.scheduleRebuild(broken && nearCap(broken) ? broken.memoryCapPages * 2 : 0);
  }

  private logFailure(message: string, code?: string): void {
    const note = this.failureLines.take();
    if (note === undefined) return;
    this.logger?.error(code ? { stage: this.name, code } : { stage: this.name }, message + note);
  }

  /** Failure-policy error lines dropped by the rate limit (failureLinesPerSecond). */
  get suppressedFailureLines(): number { return this.failureLines.dropped; }

  /** Off the packet path, and after the back-off when builds have been failing: the failing call returns its failure verdict now. */
  private scheduleRebuild(floor: number): void {
    if (this.rebuildScheduled || this.disposed || this.building) return;
    this.rebuildScheduled = true;
    const run = () => {
      this.rebuildScheduled = false;
      if (this.disposed || this.instance) return;
      void this.replaceInstance({ kind: 'rebuilding', message: `stage ${this.name}: the module broke and is being rebuilt; answering ${this.failurePolicy} meanwhile`, since: Date.now() }, floor);
    };
    const wait = Math.max(this.retry.waitMs, this.quarantine.waitMs);
    if (wait > 0) setTimeout(run, wait).unref?.();
    else setImmediate(run);
  }

  /** The state outgrew the instance's cap: a bigger instance is fed while this one answers with what it holds. */
  private grow(bytes: number, floor: number): void {
    const target = this.capFor(bytes * 1.5, floor);
    void this.replaceInstance(this.growing(bytes, target), target);
  }

  /** Counts and logs a growth to `target` pages; the problem the stage has meanwhile. */
  private growing(bytes: number, target: number): StageStateProblem {
    const from = this.instance?.memoryCapPages ?? 0;
    this.stateCounters.grown++;
    this.logger?.info({ stage: this.name }, `stage ${this.name}: the state (${mib(bytes)} delivered) outgrew the memory cap of ${from} pages; feeding an instance capped at ${target} pages while this one answers with the state it holds`);
    return { kind: 'growing', message: `stage ${this.name}: growing its memory cap from ${from} to ${target} pages for the new state (${mib(bytes)} delivered); answering with the state it held until then`, since: Date.now() };
  }

  /**
   * Whether `bytes` of state outgrow the current instance's cap (a quarter of
   * slack: memoryPerStateByte is generous, the built-ins need 3 to 6 bytes a
   * byte, and without slack a stage built for an empty state would rebuild at
   * its first pod).
   */
  private outgrows(bytes: number): boolean {
    const inst = this.instance;
    if (!inst || this.compiled.memoryImport === undefined || inst.memoryCapPages >= this.limits.maxStageMemoryPages) return false;
    const want = this.capFor(bytes);
    return want > inst.memoryCapPages && want >= Math.min(this.limits.maxStageMemoryPages, Math.ceil(inst.memoryCapPages * 1.25));
  }

  /** Decides one record (direction already set). Never throws. */
  decide(record: Uint8Array): number {
    const inst = this.instance;
    let v: number;
    if (inst === undefined) {
      this.tally.unavailable++;
      this.lastFailure = 'unavailable';
      v = this.failureVerdict;
    } else {
      try {
        v = inst.decideOne(record);
        this.lastFailure = undefined;
        if (v > Verdict.Pass) v = this.badVerdict(v);
      } catch (err) {
        this.failed(err);
        v = this.failureVerdict;
      }
    }
    this.verdictsByDirection[((record[OFF_DIRECTION] & 1) << 2) | v]++;
    return v;
  }

  /** A verdict byte outside the ABI: the module is wrong, so its failure policy decides. */
  private badVerdict(v: number): number {
    this.tally.traps++;
    this.lastFailure = 'trap';
    this.logFailure(`stage ${this.name}: module ${this.compiled.meta.name} returned verdict ${v}, which ABI 1 does not define; answering ${this.failurePolicy}`);
    return this.failureVerdict;
  }

  /**
   * The batched packet path: decides the first `count` records of `records`
   * (direction already set, any count) and writes one verdict byte each to
   * `verdicts`. Never throws; counts verdicts like `decide`.
   */
  decideVerdicts(records: Uint8Array, count: number, verdicts: Uint8Array, reasons?: Uint32Array, rules?: Uint32Array): void {
    const first = this.decideChunks(records, count, false, verdicts, undefined, reasons, rules);
    this.settleVerdicts(records, count, verdicts, first);
  }

  /**
   * Calls the instance on `count` records in calls of at most its capacity:
   * decidePairsInto into `a` (egress) and `b` (ingress) with `pairs`, else
   * decideInto into `a`. Returns how many records were decided before a
   * failure (which it counts and reports); none without an instance, or
   * for pairs without one that decides them.
   */
  private decideChunks(records: Uint8Array, count: number, pairs: boolean, a: Uint8Array, b: Uint8Array | undefined, reasons?: Uint32Array, rules?: Uint32Array, codes?: PairCodes): number {
    let first = 0;
    const inst = this.instance;
    if (inst !== undefined && (!pairs || inst.decidesPairs === true)) {
      try {
        const capacity = inst.batchCapacity;
        for (; first < count; first += capacity) {
          const n = Math.min(capacity, count - first);
          if (pairs) inst.decidePairsInto!(records, first, n, a, b!, codes);
          else inst.decideInto(records, first, n, a, reasons, rules);
        }
        this.lastFailure = undefined;
      } catch (err) {
        this.failed(err);
      }
    } else {
      this.tally.unavailable += count;
      this.lastFailure = 'unavailable';
    }
    return first;
  }

  /**
   * `decideVerdicts` without blocking the event loop on an instance that
   * runs in a thread of its own (the wall-clock backstop): the main thread
   * goes on with sources, the admin API and /healthz while the module
   * decides. Other instances decide synchronously. Never rejects.
   */
  async decideVerdictsAsync(records: Uint8Array, count: number, verdicts: Uint8Array): Promise<void> {
    const inst = this.instance;
    if (inst?.decideIntoAsync === undefined || inst.broken) {
      this.decideVerdicts(records, count, verdicts);
      return;
    }
    let first = 0;
    try {
      await inst.decideIntoAsync(records, 0, count, verdicts);
      first = count;
      this.lastFailure = undefined;
    } catch (err) {
      // A call that waited for this one (a delivery, an explanation) may have reported the failure already.
      if (this.instance === inst) this.failed(err);
      else this.lastFailure = 'unavailable';
    }
    this.settleVerdicts(records, count, verdicts, first);
  }

  /** Records from `first` on get the failure policy's verdict (a failure left them undecided); every verdict is checked and counted. */
  private settleVerdicts(records: Uint8Array, count: number, verdicts: Uint8Array, first: number): void {
    for (let i = first; i < count; i++) verdicts[i] = this.failureVerdict;
    const byDirection = this.verdictsByDirection;
    for (let i = 0; i < count; i++) {
      let v = verdicts[i];
      if (v > Verdict.Pass) v = verdicts[i] = this.badVerdict(v);
      byDirection[((records[i * RECORD_SIZE + OFF_DIRECTION] & 1) << 2) | v]++;
    }
  }

  /**
   * Where a pair call of `n` records will leave its answers for flow
   * recording to read at the end of the chunk (ModuleInstance.pairAnswersInPlace);
   * undefined when they would not all stay in place, or without a healthy instance.
   */
  pairAnswersInPlace(n: number): PairAnswers | undefined {
    const inst = this.instance;
    return inst !== undefined && inst.broken === undefined ? inst.pairAnswersInPlace?.(n) : undefined;
  }

  /** Whether decidePairs asks the module for both directions in one call (ABI 1.4): false while it has no healthy instance that does. */
  get decidesPairs(): boolean {
    const inst = this.instance;
    return inst !== undefined && inst.broken === undefined && inst.decidesPairs === true;
  }

  /**
   * The pipeline's pair walk: decides the first `count` records of `records`,
   * each in the direction(s) its direction byte asks for (0, 1,
   * DIRECTION_BOTH), egress verdicts to `egress` and ingress ones to
   * `ingress`; a record asking for both whose egress is denied gets no
   * ingress verdict. Never throws: failure policy and counters as
   * decideVerdicts, one decision per direction decided. With `codes` (flow
   * recording) each direction's reason and rule codes too, where the module
   * answered Accept or Deny.
   */
  decidePairs(records: Uint8Array, count: number, egress: Uint8Array, ingress: Uint8Array, codes?: PairCodes): void {
    const first = this.decideChunks(records, count, true, egress, ingress, undefined, undefined, codes);
    this.settlePairs(records, count, egress, ingress, first);
  }

  /**
   * decidePairs for the one-packet walk's single record (`record32` its
   * words): the instance's one-record pair call where it has one (fewer
   * objects read than a batch call's, which counts after the agent slept),
   * else decidePairs. Same verdicts, failure policy and counters.
   */
  decidePairOne(record: Uint8Array, record32: Uint32Array, egress: Uint8Array, ingress: Uint8Array): void {
    const inst = this.current;
    if (inst === undefined || inst.decidesPairOne !== true) {
      this.decidePairs(record, 1, egress, ingress);
      return;
    }
    let first = 0;
    try {
      const answers = inst.decidePairOne!(record32);
      // Only the directions asked are written, as decidePairsInto does.
      const dir = record[OFF_DIRECTION];
      if (dir !== 1) egress[0] = answers & 0xff;
      if (dir !== 0) ingress[0] = answers >>> 8;
      first = 1;
      this.lastFailure = undefined;
    } catch (err) {
      this.failed(err);
    }
    this.settlePairs(record, 1, egress, ingress, first);
  }

  /**
   * decidePairs for the records of `records` (a chunk as words, direction
   * bytes set) at the indices `picked[0..n)`, copied by the instance
   * straight into its batch area; answers by position in the call, with
   * decidePairs' failure policy and counters. Returns false, having asked and
   * counted nothing, when the instance cannot take them in one such call
   * (then the caller packs them for decidePairs).
   */
  decidePairsPicked(records: Uint8Array, records32: Uint32Array, picked: Int32Array, n: number, egress: Uint8Array, ingress: Uint8Array): boolean {
    const inst = this.current;
    if (inst === undefined || inst.broken !== undefined || inst.decidePairsPicked === undefined) return false;
    let first = 0;
    try {
      if (!inst.decidePairsPicked(records32, picked, n, egress, ingress)) return false;
      first = n;
      this.lastFailure = undefined;
    } catch (err) {
      this.failed(err);
    }
    this.settlePairs(records, n, egress, ingress, first, picked);
    return true;
  }

  /**
   * decidePairs' accounting: answers from `first` on get the failure policy, every verdict is checked and counted per direction asked.
   * With `picked`, answer `i` belongs to record `picked[i]` (decidePairsPicked); without it, to record `i`.
   */
  private settlePairs(records: Uint8Array, count: number, egress: Uint8Array, ingress: Uint8Array, first: number, picked?: Int32Array): void {
    const byDirection = this.verdictsByDirection;
    for (let i = 0; i < count; i++) {
      const dir = records[(picked ? picked[i] : i) * RECORD_SIZE + OFF_DIRECTION];
      let v: number;
      if (dir !== 1) {
        if (i >= first) egress[i] = this.failureVerdict;
        v = egress[i];
        if (v > Verdict.Pass) v = egress[i] = this.badVerdict(v);
        byDirection[v]++;
        if (dir === 0 || v === Verdict.Deny) continue;
      }
      if (i >= first) ingress[i] = this.failureVerdict;
      v = ingress[i];
      if (v > Verdict.Pass) v = ingress[i] = this.badVerdict(v);
      byDirection[4 | v]++;
    }
  }

  /**
   * For the packet path: the subject bitmap (index = pod id), or null when
   * every record must go to the module — it wants all traffic, or it has no
   * healthy instance (then the failure policy must answer). A record neither
   * of whose pods is marked is one the module answers Next without looking
   * (ABI.md: a record whose subject the module does not select gets Next).
   */
  /**
   * The subjects the drain's walk (Pipeline.finishWalk) skips this stage by:
   * subjectFilter() while the stage has an instance, and since its instance
   * failed the filter it had then, as the walks of the packets decided until
   * then and the failing call's own chunk skipped it by (a new instance drains
   * the buffer first).
   */
  drainSubjects(): Uint8Array | null {
    const inst = this.instance;
    return inst !== undefined && !inst.broken ? this.subjectFilter() : this.subjectsAtFailure;
  }

  private subjectsAtFailure: Uint8Array | null = null;

  subjectFilter(): Uint8Array | null {
    const inst = this.instance;
    if (inst === undefined || inst.broken) return null;
    if (this.subjectsState === 'never') this.refreshSubjects();
    return this.subjectsState === 'fresh' ? this.subjectIds : null;
  }

  /** A new instance's subjects: those its feed thread found, or computed before its first decision (prepareSubjects). */
  private takeSubjects(found: 'all' | number[] | undefined): void {
    this.subjectsState = 'never';
    if (found !== undefined) this.refreshSubjects(found === 'all' ? found : this.deliveredOnly(found));
  }

  private refreshSubjects(subjects = this.subjects()): void {
    if (this.instance === undefined) return; // kwp_subjects trapped: no filter until the rebuild
    if (subjects === 'all') this.subjectIds = null;
    // An empty filter (a stage whose policies select no pod) lets the batched
    // walk skip the stage without looking at a record.
    else if (subjects.length === 0) this.subjectIds = NO_SUBJECTS;
    else {
      // Index loops: this runs once a swap, in code V8 has not optimised, where a for-of makes an
      // iterator result per element (10,000 subjects: a megabyte of garbage in the packet path's thread).
      let max = 0;
      for (let i = 0; i < subjects.length; i++) if (subjects[i] > max) max = subjects[i];
      const ids = new Uint8Array(max + 1);
      for (let i = 0; i < subjects.length; i++) ids[subjects[i]] = 1;
      this.subjectIds = ids;
    }
    this.subjectsState = 'fresh';
  }

  private subjectsChanged(): void {
    if (this.subjectsState !== 'fresh') return;
    this.subjectsState = 'stale';
    if (this.subjectsRefreshScheduled) return;
    this.subjectsRefreshScheduled = true;
    // A burst of deliveries costs one recomputation, after the burst.
    setImmediate(() => {
      this.subjectsRefreshScheduled = false;
      if (this.disposed || this.subjectsState !== 'stale' || this.instance === undefined) return;
      this.refreshSubjects();
    }).unref();
  }

  /**
   * The stage's counters, with the skips the pipelines tallied for it folded
   * in. Decisions and their verdicts are not counted per decision: every
   * decision the module or the failure policy answered is one increment of
   * verdictsByDirection, so they are derived from it here (Pass counts as
   * next, as it always did), plus the skips, which are all Next.
   */
  get counters(): StageCounters {
    const c = this.tally;
    for (const { tally, index } of this.skipTallies) {
      const n = tally[index];
      if (n === 0) continue;
      tally[index] = 0;
      c.skipped += n;
    }
    const v = this.verdictsByDirection;
    c.accept = v[Verdict.Accept] + v[4 | Verdict.Accept];
    c.deny = v[Verdict.Deny] + v[4 | Verdict.Deny];
    c.next = v[Verdict.Next] + v[Verdict.Pass] + v[4 | Verdict.Next] + v[4 | Verdict.Pass] + c.skipped;
    c.decisions = c.accept + c.deny + c.next;
    return c;
  }

  /**
   * A pipeline counts this stage's skipped records in `tally[index]` (as
   * countSkipped would), so that skipping the stage reads none of its memory;
   * the counters fold them in. Returns the release, which folds in what is
   * left first.
   */
  addSkipTally(tally: Float64Array, index: number): () => void {
    const entry = { tally, index };
    this.skipTallies.push(entry);
    return () => {
      void this.counters;
      const at = this.skipTallies.indexOf(entry);
      if (at >= 0) this.skipTallies.splice(at, 1);
    };
  }

  /**
   * `watcher` runs whenever subjectFilter() or decidesPairs may answer
   * differently, with `replaced` true when the stage has a new instance (never
   * during a decision: what the watcher kept of the old one may go);
   * returns the unsubscribe.
   */
  watchFilter(watcher: (replaced: boolean) => void): () => void {
    this.filterWatchers.push(watcher);
    return () => {
      const at = this.filterWatchers.indexOf(watcher);
      if (at >= 0) this.filterWatchers.splice(at, 1);
    };
  }

  private filterChanged(replaced = false): void {
    const watchers = this.filterWatchers;
    for (let i = 0; i < watchers.length; i++) watchers[i](replaced);
  }

  /** Counts `count` records answered Next through the subject filter. */
  countSkipped(count: number): void {
    this.tally.skipped += count;
  }

  get batchCapacity(): number { return this.instance?.batchCapacity ?? 64; }

  /** The reason code of the last `decide` (0 after a failure): the packet path's flow recording reads it. */
  lastReasonCode(): number {
    const inst = this.instance;
    return inst === undefined || this.lastFailure ? 0 : inst.lastReason();
  }

  /** The rule code of the last `decide` (0 after a failure or from a module older than ABI 1.3). */
  lastRuleCode(): number {
    const inst = this.instance;
    return inst === undefined || this.lastFailure ? 0 : inst.lastRule();
  }

  /** `lastReasonCode()` and `lastRuleCode()` written to `out[at]` and `out[at + 1]`: the recorded packet path's one call for both. */
  lastCodesInto(out: Uint32Array, at: number): void {
    const inst = this.instance;
    if (inst === undefined || this.lastFailure) {
      out[at] = 0;
      out[at + 1] = 0;
      return;
    }
    out[at] = inst.lastReason();
    out[at + 1] = inst.lastRule();
  }

  /**
   * The drain's question (Pipeline.attributeDeferred): the verdict the
   * module gives `record` (direction set) now, its reason and rule codes to
   * `out[at]` and `out[at + 1]`; -1 without a healthy instance or when the
   * call fails (which breaks it, as any call). Not a decision: nothing is counted.
   */
  codesFor(record: Uint8Array, out: Uint32Array, at: number): number {
    const inst = this.current;
    if (inst === undefined || inst.broken) return -1;
    try {
      const v = inst.decideOne(record);
      out[at] = inst.lastReason();
      out[at + 1] = inst.lastRule();
      return v;
    } catch (err) {
      this.failed(err);
      return -1;
    }
  }

  /**
   * The drain's walk (Pipeline.attributeDeferred, a slot whose walk was
   * left to it): what the stage answers `record` (direction set) now — the
   * module's verdict with its reason and rule codes to `out[at]` and
   * `out[at + 1]`, or the failure policy's verdict with DRAIN_FAILED (a bad
   * verdict, a failing call, which breaks the instance as any call does)
   * and DRAIN_UNAVAILABLE too when the stage has no instance to ask. Not a
   * decision: nothing is counted.
   */
  answerForDrain(record: Uint8Array, out: Uint32Array, at: number): number {
    const inst = this.current;
    if (inst === undefined || inst.broken) return this.failureVerdict | DRAIN_FAILED | DRAIN_UNAVAILABLE;
    try {
      const v = inst.decideOne(record);
      if (v > Verdict.Pass) return this.failureVerdict | DRAIN_FAILED;
      out[at] = inst.lastReason();
      out[at + 1] = inst.lastRule();
      return v;
    } catch (err) {
      this.failed(err);
      return this.failureVerdict | DRAIN_FAILED;
    }
  }

  /** The reason and rule codes of the last `decide`, for flow records (0, 0 after a failure). */
  lastCodes(): { reason: number; rule: number } {
    const inst = this.instance;
    if (!inst || this.lastFailure) return { reason: 0, rule: 0 };
    return { reason: inst.lastReason(), rule: inst.lastRule() };
  }

  /**
   * The policy and rule a (reason, rule) pair of this stage's module stands
   * for, asked off the packet path; undefined when the module says nothing,
   * has no healthy instance, or traps (which marks it broken, as any call).
   */
  attribution(reason: number, rule: number): Attribution | undefined {
    const inst = this.instance;
    if (!inst || inst.broken || reason === 0) return undefined;
    try {
      return inst.attribution(reason, rule);
    } catch (err) {
      this.failed(err);
      return undefined;
    }
  }

  /** The reason text for the last decision, for traces. */
  lastExplanation(): string {
    const inst = this.instance;
    if (!inst || this.lastFailure) return '';
    try {
      return inst.explain(inst.lastReason());
    } catch (err) {
      this.failed(err);
      return '';
    }
  }

  subjects(): 'all' | number[] {
    const inst = this.instance;
    if (!inst) return 'all';
    try {
      const ids = inst.subjects(this.held?.pods.size ?? Infinity);
      return ids === 'all' ? ids : this.deliveredOnly(ids);
    } catch (err) {
      this.failed(err);
      return 'all';
    }
  }

  /**
   * Subjects are pods the host delivered: ids it never gave out are dropped,
   * so a module cannot make the subject filter (sized by the largest id) huge.
   */
  private deliveredOnly(ids: number[]): number[] {
    const pods = this.held?.pods;
    return ids.filter((id) => pods?.has(id) ?? this.state.podById(id) !== undefined);
  }

  // StateListener: keep the instance in step with the cluster.

  /**
   * Applies one delivery to the instance and to what it holds. `bytesAfter`
   * is the held state's size once applied: a delivery that takes it past
   * what the instance's cap is sized for goes to a bigger instance instead.
   */
  private deliver(fn: (inst: ModuleInstance) => void, hold: (held: HeldState) => void, bytesAfter?: (held: HeldState) => number): void {
    if (this.feedQueue) {
      this.feedQueue.push({ fn, hold });
      return;
    }
    if (this.stateProblem?.kind === 'rejected') {
      this.stateChangedWhileRejected();
      return;
    }
    this.subjectsChanged();
    const inst = this.instance;
    const held = this.held;
    if (!inst || !held) return; // a rebuild replays the whole state
    const growable = this.compiled.memoryImport !== undefined && inst.memoryCapPages < this.limits.maxStageMemoryPages;
    if (growable && bytesAfter) {
      const after = bytesAfter(held);
      if (this.outgrows(after)) {
        this.grow(after, 0);
        return;
      }
    }
    this.settleFlows();
    // The drain asks the module as it is before this delivery, and may have computed its subjects
    // then (a stage whose subjects were never asked for): they change with the delivery all the same.
    this.subjectsChanged();
    try {
      fn(inst);
    } catch (err) {
      this.failed(err);
      return;
    }
    hold(held);
    // The module uses more than the state predicts: grow before it runs out.
    if (growable && inst.memoryBytes > 0.9 * inst.memoryCapPages * PAGE_BYTES) this.grow(held.bytes, inst.memoryCapPages * 2);
  }

  /**
   * A flush of at least `slice` deliveries for this stage (pods, and objects
   * of its kinds: a relist, a namespace relabelled) is not delivered one by
   * one on the main thread — at 100,000 policies that is many seconds of
   * module calls. A fresh instance is fed the state the change led to, in
   * slices, while the current one answers with the state it held (like a
   * stage that grows); a build under way starts over from that state.
   */
  bulkChange(events: readonly StateEvent[]): boolean {
    if (this.disposed) return false;
    let weight = 0;
    let synced = 0;
    for (const e of events) {
      if (e.type === 'objectsReplaced') {
        if (!this.kindIndex.has(e.kind)) continue;
        weight += e.objects.length + 1;
        // A snapshot ends in SYNCED, where a module may go over every pod it holds (the NetworkPolicy
        // and ClusterNetworkPolicy modules recompute each pod's policies): one call that weighs as much.
        synced = Math.max(synced, this.held?.pods.size ?? 0);
      }
      else if (e.type === 'objectApplied') weight += this.kindIndex.has(e.kind) ? 1 : 0;
      else weight++;
    }
    if (weight + synced < this.slice) return false;
    if (this.feedQueue) {
      this.feedStale = true;
      return true;
    }
    // Rejected: one retry after the back-off (deliver); broken: the rebuild replays the state anyway.
    if (this.stateProblem?.kind === 'rejected' || this.building || !this.instance || !this.held) return false;
    this.subjectsChanged();
    // Sized once the state is (in slices): a state that outgrows the cap makes it a growth.
    const sized = (bytes: number) => {
      if (!this.outgrows(bytes)) return 0;
      const target = this.capFor(bytes * 1.5);
      this.stateProblem = this.growing(bytes, target);
      return target;
    };
    void this.replaceInstance({ kind: 'refreshing', message: `stage ${this.name}: feeding an instance the new state (${weight} changes at once) in slices; answering with the state it held until then`, since: Date.now() }, 0, sized);
    return true;
  }

  podUpserted(pod: PodInfo): void {
    this.deliver((i) => i.upsertPod(encodePodInfo(pod)), (h) => h.upsertPod(pod), (h) => h.bytesIfPodUpserted(pod));
  }
  podDeleted(pod: PodInfo): void { this.deliver((i) => i.deletePod(pod.id), (h) => h.deletePod(pod)); }
  objectsReplaced(kind: KindKey, objects: KubeObject[]): void {
    const index = this.kindIndex.get(kind);
    if (index === undefined) return;
    this.rejectedObjects.forgetKind(kind.slice(kind.lastIndexOf('/') + 1));
    this.deliver((i) => {
      i.object(index, ObjectOp.Reset);
      for (const obj of objects) i.object(index, ObjectOp.Upsert, encodeObject(obj));
      i.object(index, ObjectOp.Synced);
    }, (h) => h.replace(index, objects), (h) => h.bytesIfReplaced(index, objects));
  }
  objectApplied(kind: KindKey, event: ObjectEvent): void {
    const index = this.kindIndex.get(kind);
    if (index === undefined) return;
    this.rejectedObjects.forget(event.object);
    this.deliver(
      (i) => i.object(index, event.type === 'upsert' ? ObjectOp.Upsert : ObjectOp.Delete, encodeObject(event.object)),
      (h) => h.apply(index, event),
      event.type === 'upsert' ? (h) => h.bytesIfApplied(index, event) : undefined,
    );
  }
}
