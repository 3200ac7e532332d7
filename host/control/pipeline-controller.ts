// The control plane of the pipeline: what is active, what it replaced, and how
// it got there. Every change builds the whole new pipeline first (a bad module
// or config throws and leaves the running one untouched), persists it, then
// activates it with the engine's one reference swap. The pipeline it replaced
// stays started, so a rollback is another swap, with no compilation and no
// cold caches; anything older is disposed.
//
// Changes build with PolicyEngine.buildAsync, so the packet path keeps
// deciding while a new pipeline is fed. That opens a window in which other
// changes could land; they wait their turn instead (one change at a time, in
// arrival order), and each checks its If-Match again when its turn comes, so
// concurrent changes behave exactly as if they had arrived one after another.
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { KwpError } from '../errors.js';
import type { PolicyEngine } from '../pipeline/engine.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import type { InstanceFailure, Stage } from '../pipeline/stage.js';
import type { ModuleUsage } from './module-store.js';
import { validatePipelineSpec, type PipelineSpec, type StageSpec } from '../pipeline/spec.js';
import { writeFileAtomic } from './atomic-file.js';
import { FailureWindow } from './failure-window.js';
import { isHistoryEntry, type HistoryEntry, type PipelineAction } from './pipeline-history.js';
import type { HostLogger } from '../logger.js';

export interface AutoRollbackOptions {
  /** Traps plus fuel exhaustions of one stage that trigger a rollback... */
  failures: number;
  /** ...when they all fall within this many milliseconds. */
  windowMs: number;
}

export interface PipelineControllerOptions {
  engine: PolicyEngine;
  /** The configured pipeline: used when the state directory holds none, or a bad one. */
  fallback: PipelineSpec;
  /** Where `pipeline.json` lives; without it nothing is persisted. */
  stateDir?: string;
  logger?: HostLogger;
  /** Off unless given. */
  autoRollback?: AutoRollbackOptions;
  /** The module store whose "in use" check asks this controller which modules its pipelines run. */
  store?: { registerUsage(usage: ModuleUsage): () => void };
  /** History entries kept (default 100). */
  historyLimit?: number;
  now?: () => Date;
}

/** One stage's use of a module's bytes (the module store's "in use" check). */
export interface ModuleUse { stage: string; sha256: string; building?: true; rollback?: true }

/** Which bytes a stage runs: its module reference resolved. */
export interface StageModule { stage: string; name: string; version: string; sha256: string }

export interface PipelineView {
  revision: number;
  stages: StageSpec[];
  /** The module each stage runs, exactly: name, version and the sha256 of its bytes. */
  modules: StageModule[];
  /** The revision a rollback returns to, when there is one. */
  previousRevision?: number;
}

/** Hooks for observers (metrics): every pipeline built, every activation, every disposal. */
export interface PipelineObserver {
  built?(pipeline: Pipeline): void;
  activated?(next: Pipeline, previous: Pipeline | undefined, entry: HistoryEntry): void;
  /** Called just before the pipeline is disposed. */
  retired?(pipeline: Pipeline): void;
}

interface StateFile {
  version: 1;
  revision: number;
  spec: PipelineSpec;
  previous?: { revision: number; spec: PipelineSpec };
  history: HistoryEntry[];
}

const STATE_VERSION = 1;

const stoppingError = () => new KwpError('KWP_ERR_STOPPING', 'the agent is stopping; the pipeline change was not made and the running pipeline is unchanged');

export class PipelineController {
  readonly stateFile: string | undefined;
  private readonly engine: PolicyEngine;
  private readonly logger?: HostLogger;
  private readonly historyLimit: number;
  private readonly now: () => Date;
  private previous: Pipeline | undefined;
  private entries: HistoryEntry[] = [];
  private readonly observers = new Set<PipelineObserver>();
  private readonly windows = new WeakMap<Pipeline, Map<string, FailureWindow>>();
  private autoRollbackPending = false;
  private started = false;
  /** Set by stopChanges(): every change from then on is refused. */
  private stopping = false;
  /** The tail of the queue of changes; each change runs after the one before settled. */
  private changes: Promise<unknown> = Promise.resolve();
  /** Aborts the build in progress, if any. */
  private building: AbortController | undefined;
  /** Stages of the build in progress, so the module store will not remove their modules under it. */
  private buildingStages: Stage[] = [];
  /** Activations since start, rollbacks included. */
  swaps = 0;
  /** Why the persisted pipeline was not used at startup, when it was not. */
  startupProblem: KwpError | undefined;

  constructor(private readonly options: PipelineControllerOptions) {
    this.engine = options.engine;
    this.logger = options.logger;
    this.historyLimit = options.historyLimit ?? 100;
    this.now = options.now ?? (() => new Date());
    this.stateFile = options.stateDir ? join(options.stateDir, 'pipeline.json') : undefined;
    if (options.autoRollback) {
      const { failures, windowMs } = options.autoRollback;
      if (!Number.isInteger(failures) || failures < 1 || !(windowMs > 0)) {
        throw new RangeError(`autoRollback needs failures >= 1 and windowMs > 0, got ${failures} and ${windowMs}`);
      }
      this.engine.subscribe({ stageFailed: (stage, failure) => this.stageFailed(stage, failure) });
    }
    options.store?.registerUsage(() => this.moduleUsage());
  }

  observe(observer: PipelineObserver): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  // ---- startup ----

  /**
   * Activates the persisted pipeline (same revision, and its predecessor warm
   * for rollback), or the configured one when there is no state file or it
   * cannot be used; the reason is logged and kept in `startupProblem`.
   */
  start(): PipelineView {
    if (this.started) throw new Error('PipelineController.start() was called twice');
    this.stopping = false;
    const loaded = this.loadState();
    let active: Pipeline | undefined;
    let reason: string;
    if (loaded) {
      try {
        active = this.build(loaded.spec, this.stateFile!, loaded.revision);
        reason = `loaded revision ${loaded.revision} from ${this.stateFile}`;
        this.entries = loaded.history;
      } catch (err) {
        this.startupProblem = new KwpError('KWP_ERR_STATE_CORRUPT', `${this.stateFile}: revision ${loaded.revision} cannot be built: ${(err as Error).message}; using the configured pipeline`, { cause: err });
        this.logger?.error({ code: this.startupProblem.code, file: this.stateFile }, this.startupProblem.message);
        this.entries = loaded.history;
      }
      if (active && loaded.previous) {
        try {
          this.previous = this.build(loaded.previous.spec, `${this.stateFile}: previous`, loaded.previous.revision);
        } catch (err) {
          this.logger?.warn({ file: this.stateFile }, `${this.stateFile}: the previous revision ${loaded.previous.revision} cannot be built, so there is nothing to roll back to: ${(err as Error).message}`);
        }
      }
    }
    if (!active) {
      active = this.build(this.options.fallback, 'configured pipeline');
      reason = this.startupProblem
        ? `configured pipeline, because ${this.startupProblem.message}`
        : `configured pipeline${this.stateFile ? ` (no ${this.stateFile} yet)` : ''}`;
    }
    this.started = true;
    const entry = this.record(active.revision, 'startup', reason!);
    this.persist(active, this.previous);
    this.swapIn(active, entry);
    this.logger?.info({}, `pipeline revision ${active.revision} active: ${reason!}`);
    return this.get();
  }

  private loadState(): StateFile | undefined {
    const file = this.stateFile;
    if (!file || !existsSync(file)) return undefined;
    try {
      const doc = JSON.parse(readFileSync(file, 'utf8')) as StateFile;
      if (typeof doc !== 'object' || doc === null) throw new Error('expected a JSON object');
      if (doc.version !== STATE_VERSION) throw new Error(`"version" must be ${STATE_VERSION}, got ${JSON.stringify(doc.version)}`);
      if (!Number.isInteger(doc.revision) || doc.revision < 1) throw new Error('"revision" must be a positive integer');
      const spec = validatePipelineSpec(doc.spec, `${file}: spec`);
      let previous: StateFile['previous'];
      if (doc.previous !== undefined) {
        if (!Number.isInteger(doc.previous?.revision)) throw new Error('"previous.revision" must be an integer');
        previous = { revision: doc.previous.revision, spec: validatePipelineSpec(doc.previous.spec, `${file}: previous.spec`) };
      }
      const history = Array.isArray(doc.history) ? doc.history.filter(isHistoryEntry) : [];
      return { version: STATE_VERSION, revision: doc.revision, spec, previous, history };
    } catch (err) {
      const kept = `${file}.corrupt-${this.now().getTime()}`;
      try { renameSync(file, kept); } catch { /* keep going with the fallback either way */ }
      this.startupProblem = new KwpError('KWP_ERR_STATE_CORRUPT', `${file} is corrupt (${(err as Error).message}); kept it as ${kept}`, { cause: err });
      this.logger?.error({ code: this.startupProblem.code, file }, `${this.startupProblem.message}; starting with the configured pipeline`);
      return undefined;
    }
  }

  // ---- reads ----

  get(): PipelineView {
    const p = this.engine.active;
    const view: PipelineView = {
      revision: p.revision,
      stages: p.spec.stages.map((s) => ({ ...s })),
      modules: p.stages.map((s) => ({ stage: s.name, name: s.compiled.meta.name, version: s.compiled.meta.version, sha256: s.compiled.sha256 })),
    };
    if (this.previous) view.previousRevision = this.previous.revision;
    return view;
  }

  get revision(): number { return this.engine.active.revision; }
  get previousRevision(): number | undefined { return this.previous?.revision; }

  history(): HistoryEntry[] {
    return this.entries.map((e) => ({ ...e }));
  }

  /**
   * Which module bytes the active pipeline runs, the one kept for rollback
   * (`rollback`) and the pipeline being built (`building`), for the module
   * store's "in use" check: a module removed while a build runs would
   * otherwise be activated and then be missing at the next restart.
   */
  moduleUsage(): ModuleUse[] {
    const out: ModuleUse[] = this.engine.hasActive
      ? this.engine.active.stages.map((s) => ({ stage: s.name, sha256: s.compiled.sha256 }))
      : [];
    // The pipeline kept for rollback is persisted and rebuilt at the next
    // start: a module it runs must stay, or that restart loses it.
    for (const s of this.previous?.stages ?? []) out.push({ stage: s.name, sha256: s.compiled.sha256, rollback: true });
    for (const s of this.buildingStages) out.push({ stage: s.name, sha256: s.compiled.sha256, building: true });
    return out;
  }

  /** The active pipeline and the one kept for rollback. */
  livePipelines(): Pipeline[] {
    const out = this.engine.hasActive ? [this.engine.active] : [];
    if (this.previous) out.push(this.previous);
    return out;
  }

  // ---- changes ----

  /**
   * Replaces the pipeline. `ifMatch` is the revision the caller last read; a
   * stale one is refused with 412, on arrival and again when the change's
   * turn comes. The running pipeline keeps deciding until the new one is
   * activated.
   */
  async set(value: unknown, ifMatch?: number, where = 'pipeline'): Promise<PipelineView> {
    this.requireAccepting();
    this.checkRevision(ifMatch);
    const spec = validatePipelineSpec(value, where);
    return this.inTurn(async () => {
      this.checkRevision(ifMatch);
      const next = await this.buildChange(spec, where);
      // From here to the swap nothing yields, so nothing can change what is active.
      const current = this.engine.active;
      const entry = this.record(next.revision, 'set', undefined, current.revision);
      try {
        this.persist(next, current);
      } catch (err) {
        this.entries.pop();
        this.retire(next);
        throw new KwpError('KWP_ERR_INTERNAL', `cannot write ${this.stateFile}: ${(err as Error).message}; the running pipeline is unchanged`, { cause: err });
      }
      const older = this.previous;
      this.previous = this.swapIn(next, entry);
      if (older) this.retire(older);
      this.logger?.info({}, `pipeline revision ${next.revision} active (was ${current.revision}): ${spec.stages.map((s) => s.name).join(' -> ') || 'no stages'}`);
      return this.get();
    });
  }

  /** Swaps back to the previous pipeline, which is still started; the current one becomes the previous. Waits for a change in progress first. */
  async rollback(ifMatch?: number, reason?: string): Promise<PipelineView> {
    this.requireAccepting();
    this.checkRevision(ifMatch);
    return this.inTurn(() => {
      this.checkRevision(ifMatch);
      return this.swapBack('rollback', reason);
    });
  }

  /** Runs `change` after every change queued before it has settled. */
  private inTurn<T>(change: () => T | Promise<T>): Promise<T> {
    const run = this.changes.then(() => {
      if (this.stopping) throw stoppingError();
      return change();
    });
    this.changes = run.catch(() => undefined);
    return run;
  }

  private async buildChange(spec: PipelineSpec, where: string): Promise<Pipeline> {
    const abort = new AbortController();
    this.building = abort;
    this.buildingStages = [];
    try {
      const p = await this.engine.buildAsync(spec, where, undefined, { signal: abort.signal, onStage: (s) => this.buildingStages.push(s) });
      // stopChanges() may have run after the build's last turn.
      if (abort.signal.aborted) {
        p.dispose();
        throw abort.signal.reason;
      }
      this.track(p);
      return p;
    } finally {
      this.building = undefined;
      this.buildingStages = [];
    }
  }

  private swapBack(action: PipelineAction, reason?: string): PipelineView {
    const target = this.previous;
    const current = this.engine.active;
    if (!target) {
      throw new KwpError('KWP_ERR_NO_PREVIOUS_PIPELINE', `revision ${current.revision} is the only pipeline since the state directory was created; there is nothing to roll back to`);
    }
    const entry = this.record(target.revision, action, reason, current.revision);
    try {
      this.persist(target, current);
    } catch (err) {
      this.entries.pop();
      throw new KwpError('KWP_ERR_INTERNAL', `cannot write ${this.stateFile}: ${(err as Error).message}; the running pipeline is unchanged`, { cause: err });
    }
    this.previous = this.swapIn(target, entry);
    this.logger?.[action === 'auto-rollback' ? 'error' : 'info']({ action }, `pipeline rolled back from revision ${current.revision} to ${target.revision}${reason ? `: ${reason}` : ''}`);
    return this.get();
  }

  /**
   * Refuses every change from now on (KWP_ERR_STOPPING) and abandons the one
   * being built, disposing what it started; changes waiting for their turn
   * are refused too. The active pipeline keeps deciding until stop().
   */
  stopChanges(): void {
    this.stopping = true;
    this.building?.abort(stoppingError());
  }

  /** Disposes both live pipelines (and any build in progress); call after the dataplane stopped asking for decisions. */
  stop(): void {
    this.stopChanges();
    if (this.previous) this.retire(this.previous);
    this.previous = undefined;
    if (this.engine.hasActive) this.retire(this.engine.active);
    this.started = false;
  }

  // ---- internals ----

  private requireStarted(): void {
    if (!this.started) throw new Error('PipelineController.start() must run first');
  }

  private requireAccepting(): void {
    if (this.stopping) throw stoppingError();
    this.requireStarted();
  }

  private checkRevision(ifMatch: number | undefined): void {
    const current = this.engine.active.revision;
    if (ifMatch !== undefined && ifMatch !== current) {
      throw new KwpError('KWP_ERR_PRECONDITION_FAILED', `If-Match names revision ${ifMatch} but revision ${current} is active; read the pipeline again (kwp pipeline get), reapply your change and retry`);
    }
  }

  /** Startup only: the sources have not delivered anything yet, so there is little to feed. */
  private build(spec: PipelineSpec, where: string, revision?: number): Pipeline {
    const p = this.engine.build(spec, where, revision);
    this.track(p);
    return p;
  }

  private track(p: Pipeline): void {
    this.watch(p);
    for (const o of this.observers) o.built?.(p);
  }

  private swapIn(next: Pipeline, entry: HistoryEntry): Pipeline | undefined {
    const previous = this.engine.activate(next);
    this.swaps++;
    for (const o of this.observers) o.activated?.(next, previous, entry);
    return previous;
  }

  private retire(p: Pipeline): void {
    for (const o of this.observers) o.retired?.(p);
    p.dispose();
  }

  private record(revision: number, action: PipelineAction, reason?: string, from?: number): HistoryEntry {
    const entry: HistoryEntry = { revision, time: this.now().toISOString(), action };
    if (from !== undefined) entry.from = from;
    if (reason) entry.reason = reason;
    this.entries.push(entry);
    if (this.entries.length > this.historyLimit) this.entries.splice(0, this.entries.length - this.historyLimit);
    return entry;
  }

  private persist(active: Pipeline, previous: Pipeline | undefined): void {
    if (!this.stateFile) return;
    const doc: StateFile = { version: STATE_VERSION, revision: active.revision, spec: active.spec, history: this.entries };
    if (previous) doc.previous = { revision: previous.revision, spec: previous.spec };
    writeFileAtomic(this.stateFile, JSON.stringify(doc, null, 2) + '\n');
  }

  /** Gives `p` its failure windows, so its stages' traps and fuel exhaustions count while it is active. */
  private watch(p: Pipeline): void {
    if (this.options.autoRollback) this.windows.set(p, new Map());
  }

  /** A stage failed (the engine tells every failure): counted only when the stage is in the active pipeline. */
  private stageFailed(s: Stage, failure: InstanceFailure): void {
    const opts = this.options.autoRollback!;
    if (!this.engine.hasActive) return;
    const p = this.engine.active;
    const windows = this.windows.get(p);
    if (!windows || !p.stages.includes(s)) return;
    let w = windows.get(s.name);
    if (!w) windows.set(s.name, (w = new FailureWindow(opts.failures, opts.windowMs)));
    if (w.record(failure, this.now().getTime())) this.scheduleAutoRollback(p, s, w);
  }

  private scheduleAutoRollback(p: Pipeline, stage: Stage, w: FailureWindow): void {
    if (this.autoRollbackPending) return;
    this.autoRollbackPending = true;
    const { failures, windowMs } = this.options.autoRollback!;
    const reason = `stage ${stage.name} (module ${stage.compiled.meta.name}@${stage.compiled.meta.version}) failed ${w.count} times within ${windowMs} ms (threshold ${failures}; ${w.traps} traps, ${w.fuel} fuel exhaustions and ${w.deadlines} deadline overruns so far)`;
    // Off the packet path: the failing decision has already got its failure verdict.
    setImmediate(() => {
      this.autoRollbackPending = false;
      if (!this.started || this.stopping) return;
      // In turn like any change: a change being built would otherwise activate on top of the rollback.
      this.inTurn(() => {
        // A change that landed meanwhile already replaced the failing pipeline.
        if (!this.started || this.engine.active !== p) return;
        if (!this.previous) {
          this.logger?.error({ stage: stage.name }, `automatic rollback wanted but revision ${p.revision} has no previous pipeline: ${reason}`);
          return;
        }
        this.swapBack('auto-rollback', reason);
      }).catch((err) => {
        this.logger?.error({}, `automatic rollback failed: ${(err as Error).message}`);
      });
    });
  }
}
