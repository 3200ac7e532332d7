// A stage: one module instance in a pipeline, with its config, mode and
// failure policy. The stage keeps its instance fed from ClusterState and
// contains every failure of the module: a trap or an empty fuel tank costs the
// stage's failure policy for that decision, never an exception in the host,
// and a fresh instance is rebuilt and re-fed in the background.
import type { FailurePolicy, KindKey, KubeObject, ObjectEvent, PodInfo, StageMode } from '../contract.js';
import { Verdict } from '../contract.js';
import { KwpError } from '../errors.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { EvaluatorInstance, type DecisionCacheStats, type InstanceLogger } from '../runtime/instance.js';
import { encodePodInfo } from '../abi/podinfo-codec.js';
import { ObjectOp, encodeObject } from '../abi/objects.js';
import { OFF_DIRECTION, RECORD_SIZE } from '../abi/record.js';
import type { ClusterState, StateListener } from '../state/cluster-state.js';
import type { StageSpec } from './spec.js';

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
  rebuilds: number;
  /** Of `decisions`: records answered Next without a call, because neither pod is one the module named in kwp_subjects. */
  skipped: number;
}

export type StageFailure = 'trap' | 'fuel' | 'unavailable';

export class Stage implements StateListener {
  readonly name: string;
  readonly label: string;
  readonly mode: StageMode;
  readonly failurePolicy: FailurePolicy;
  readonly spec: StageSpec;
  readonly compiled: CompiledEvaluator;
  readonly counters: StageCounters = { decisions: 0, accept: 0, deny: 0, next: 0, traps: 0, fuelExhausted: 0, unavailable: 0, rebuilds: 0, skipped: 0 };
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
  private instance: EvaluatorInstance | undefined;
  private readonly kindIndex = new Map<KindKey, number>();
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
  private subjectIds: Uint8Array | null = null;
  private subjectsState: 'never' | 'fresh' | 'stale' = 'never';
  private subjectsRefreshScheduled = false;
  /** Set while startAsync feeds the module: deliveries wait here. */
  private feedQueue: Array<(inst: EvaluatorInstance) => void> | undefined;
  /** Called once, when the stage is disposed (the engine returns its memory reservation). */
  onDisposed: (() => void) | undefined;
  /** Called after a trap or fuel exhaustion, for metrics and automatic rollback. */
  onFailure: ((stage: Stage, failure: 'trap' | 'fuel', err: KwpError) => void) | undefined;

  constructor(spec: StageSpec, compiled: CompiledEvaluator, private readonly state: ClusterState, private readonly logger?: InstanceLogger) {
    this.spec = spec;
    this.name = spec.name;
    this.label = spec.label ?? spec.name;
    this.mode = spec.mode ?? 'enforce';
    this.failurePolicy = spec.failurePolicy ?? compiled.meta.failurePolicy;
    this.failureVerdict = this.failurePolicy === 'fail-closed' ? Verdict.Deny : Verdict.Next;
    this.compiled = compiled;
    compiled.meta.kinds.forEach((k, i) => this.kindIndex.set(k, i));
  }

  /** Instantiates, configures and feeds the module, then follows the state. Throws on a refused config. */
  start(): void {
    this.instance = this.freshInstance();
    this.unsubscribe = this.state.subscribe(this);
  }

  /**
   * `start`, feeding the state in slices of `slice` pods or objects with a
   * turn of the event loop between them, so the packet path is not held for a
   * whole feed. The stage subscribes first: deliveries that arrive while it is
   * being fed are queued and applied after the snapshot (upserts of objects
   * the snapshot already had are idempotent). Rejects, subscribed to nothing,
   * on a refused config or a trap.
   */
  async startAsync(slice = 1000): Promise<void> {
    const queued: Array<(inst: EvaluatorInstance) => void> = [];
    this.feedQueue = queued;
    this.unsubscribe = this.state.subscribe(this);
    try {
      const inst = new EvaluatorInstance(this.compiled, this.logger);
      inst.configure(this.spec.config ?? {});
      let fed = 0;
      const pace = async () => {
        if (++fed % slice === 0) await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.disposed) throw new KwpError('KWP_ERR_PIPELINE_INVALID', `stage ${this.name} was disposed while it was being built`);
      };
      for (const pod of [...this.state.pods()]) {
        inst.upsertPod(encodePodInfo(pod));
        await pace();
      }
      for (const [kind, index] of this.kindIndex) {
        inst.object(index, ObjectOp.Reset);
        for (const obj of this.state.objects(kind)) {
          inst.object(index, ObjectOp.Upsert, encodeObject(obj));
          await pace();
        }
        inst.object(index, ObjectOp.Synced);
      }
      for (const fn of queued) fn(inst);
      this.subjectsState = 'never';
      this.instance = inst;
    } catch (err) {
      this.unsubscribe?.();
      this.unsubscribe = undefined;
      throw err;
    } finally {
      this.feedQueue = undefined;
    }
  }

  dispose(): void {
    this.disposed = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.instance = undefined;
    this.onDisposed?.();
    this.onDisposed = undefined;
  }

  get healthy(): boolean { return this.instance !== undefined && !this.instance.broken; }
  get memoryBytes(): number { return this.instance?.memoryBytes ?? 0; }
  /** The current instance's decision-cache hits and misses (they restart with a rebuilt instance); undefined without a cache. */
  decisionCacheStats(): DecisionCacheStats | undefined { return this.instance?.decisionCacheStats(); }
  get kinds(): readonly string[] { return this.compiled.meta.kinds; }

  private freshInstance(): EvaluatorInstance {
    this.subjectsState = 'never';
    const inst = new EvaluatorInstance(this.compiled, this.logger);
    inst.configure(this.spec.config ?? {});
    for (const pod of this.state.pods()) inst.upsertPod(encodePodInfo(pod));
    for (const [kind, index] of this.kindIndex) {
      inst.object(index, ObjectOp.Reset);
      for (const obj of this.state.objects(kind)) inst.object(index, ObjectOp.Upsert, encodeObject(obj));
      inst.object(index, ObjectOp.Synced);
    }
    return inst;
  }

  private failed(err: unknown): void {
    const kerr = err instanceof KwpError ? err : new KwpError('KWP_ERR_TRAP', String(err));
    const failure = kerr.code === 'KWP_ERR_FUEL_EXHAUSTED' ? 'fuel' : 'trap';
    if (failure === 'fuel') this.counters.fuelExhausted++;
    else this.counters.traps++;
    this.lastFailure = failure;
    this.logger?.log('error', `stage ${this.name}: ${kerr.message}; answering ${this.failurePolicy} until the module is rebuilt`, { stage: this.name, code: kerr.code });
    this.instance = undefined;
    this.onFailure?.(this, failure, kerr);
    this.scheduleRebuild();
  }

  private scheduleRebuild(): void {
    if (this.rebuildScheduled || this.disposed) return;
    this.rebuildScheduled = true;
    // Off the packet path: the failing call returns its failure verdict now.
    setImmediate(() => {
      this.rebuildScheduled = false;
      if (this.disposed || this.instance) return;
      try {
        this.instance = this.freshInstance();
        this.counters.rebuilds++;
      } catch (err) {
        this.logger?.log('error', `stage ${this.name}: rebuilding the module failed: ${(err as Error).message}`, { stage: this.name });
        // A module that traps on its own state will trap again; retry slowly.
        setTimeout(() => this.scheduleRebuild(), 1000).unref?.();
      }
    });
  }

  /** Decides one record (direction already set). Never throws. */
  decide(record: Uint8Array): number {
    this.counters.decisions++;
    const inst = this.instance;
    let v: number;
    if (inst === undefined) {
      this.counters.unavailable++;
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
    if (v === Verdict.Accept) this.counters.accept++;
    else if (v === Verdict.Deny) this.counters.deny++;
    else this.counters.next++;
    return v;
  }

  /** A verdict byte outside the ABI: the module is wrong, so its failure policy decides. */
  private badVerdict(v: number): number {
    this.counters.traps++;
    this.lastFailure = 'trap';
    this.logger?.log('error', `stage ${this.name}: module ${this.compiled.meta.name} returned verdict ${v}, which ABI 1 does not define; answering ${this.failurePolicy}`, { stage: this.name });
    return this.failureVerdict;
  }

  /**
   * The batched packet path: decides the first `count` records of `records`
   * (direction already set, any count) and writes one verdict byte each to
   * `verdicts`. Never throws; counts verdicts like `decide`.
   */
  decideVerdicts(records: Uint8Array, count: number, verdicts: Uint8Array): void {
    this.counters.decisions += count;
    let first = 0;
    const inst = this.instance;
    if (inst !== undefined) {
      try {
        const capacity = inst.batchCapacity;
        for (; first < count; first += capacity) inst.decideInto(records, first, Math.min(capacity, count - first), verdicts);
        this.lastFailure = undefined;
      } catch (err) {
        this.failed(err);
      }
    } else {
      this.counters.unavailable += count;
      this.lastFailure = 'unavailable';
    }
    // Records a failure left undecided get the failure policy's verdict.
    for (let i = first; i < count; i++) verdicts[i] = this.failureVerdict;
    const c = this.counters;
    for (let i = 0; i < count; i++) {
      let v = verdicts[i];
      if (v > Verdict.Pass) v = verdicts[i] = this.badVerdict(v);
      this.verdictsByDirection[((records[i * RECORD_SIZE + OFF_DIRECTION] & 1) << 2) | v]++;
      if (v === Verdict.Accept) c.accept++;
      else if (v === Verdict.Deny) c.deny++;
      else c.next++;
    }
  }

  /**
   * For the packet path: the subject bitmap (index = pod id), or null when
   * every record must go to the module — it wants all traffic, or it has no
   * healthy instance (then the failure policy must answer). A record neither
   * of whose pods is marked is one the module answers Next without looking
   * (ABI.md: a record whose subject the module does not select gets Next).
   */
  subjectFilter(): Uint8Array | null {
    const inst = this.instance;
    if (inst === undefined || inst.broken) return null;
    if (this.subjectsState === 'never') this.refreshSubjects();
    return this.subjectsState === 'fresh' ? this.subjectIds : null;
  }

  private refreshSubjects(): void {
    const subjects = this.subjects();
    if (this.instance === undefined) return; // kwp_subjects trapped: no filter until the rebuild
    if (subjects === 'all') this.subjectIds = null;
    // An empty filter (a stage whose policies select no pod) lets the batched
    // walk skip the stage without looking at a record.
    else if (subjects.length === 0) this.subjectIds = NO_SUBJECTS;
    else {
      let max = 0;
      for (const id of subjects) if (id > max) max = id;
      const ids = new Uint8Array(max + 1);
      for (const id of subjects) ids[id] = 1;
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

  /** Counts `count` records answered Next through the subject filter. */
  countSkipped(count: number): void {
    const c = this.counters;
    c.decisions += count;
    c.next += count;
    c.skipped += count;
  }

  get batchCapacity(): number { return this.instance?.batchCapacity ?? 64; }

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
      return inst.subjects();
    } catch (err) {
      this.failed(err);
      return 'all';
    }
  }

  // StateListener: keep the instance in step with the cluster.
  private deliver(fn: (inst: EvaluatorInstance) => void): void {
    if (this.feedQueue) {
      this.feedQueue.push(fn);
      return;
    }
    this.subjectsChanged();
    const inst = this.instance;
    if (!inst) return; // a rebuild replays the whole state
    try {
      fn(inst);
    } catch (err) {
      this.failed(err);
    }
  }

  podUpserted(pod: PodInfo): void { this.deliver((i) => i.upsertPod(encodePodInfo(pod))); }
  podDeleted(pod: PodInfo): void { this.deliver((i) => i.deletePod(pod.id)); }
  objectsReplaced(kind: KindKey, objects: KubeObject[]): void {
    const index = this.kindIndex.get(kind);
    if (index === undefined) return;
    this.deliver((i) => {
      i.object(index, ObjectOp.Reset);
      for (const obj of objects) i.object(index, ObjectOp.Upsert, encodeObject(obj));
      i.object(index, ObjectOp.Synced);
    });
  }
  objectApplied(kind: KindKey, event: ObjectEvent): void {
    const index = this.kindIndex.get(kind);
    if (index === undefined) return;
    this.deliver((i) => i.object(index, event.type === 'upsert' ? ObjectOp.Upsert : ObjectOp.Delete, encodeObject(event.object)));
  }
}
